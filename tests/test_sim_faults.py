"""Faults: power loss on real segment files (what was not fsynced is gone, a torn tail is
cut), faults that end on their own timers, and the chaos planner's draws."""
from __future__ import annotations

import itertools
import random
from dataclasses import replace
from types import SimpleNamespace

import pytest

from kreplica.log import Log
from kreplica.protocol import FetchRequest, TopicPartition
from kreplica.records import decode_records
from kreplica.runtime import ManualClock, SimScheduler
from kreplica.sim import faults
from kreplica.sim.faults import ChaosPlanner, FaultRates, drop_tail, unflushed_tails
from kreplica.sim.network import SimNetwork


def _stub_world(seed: int = 1) -> tuple:
    """A world of three live brokers on a real network and clock, enough for the faults that
    touch only the network, and for the chaos planner to draw them; records (time, kind,
    broker, data)."""
    sched = SimScheduler(seed)
    net = SimNetwork(None, random.Random(seed))
    net.scheduler = sched
    events: list = []
    world = SimpleNamespace(
        network=net, later=sched.call_later, rng=random.Random(seed), partition_in_place=None, fault_ends={},
        cluster=SimpleNamespace(brokers=dict.fromkeys((1, 2, 3)), live_brokers=lambda: [1, 2, 3], controller_id=1),
        record=lambda kind, broker=None, tp=None, **data: events.append((sched.now_ms(), kind, broker, data)))
    return sched, world, events


@pytest.mark.parametrize("torn", [False, True])
def test_power_loss_keeps_exactly_the_flushed_prefix(tmp_path, torn):
    tp = TopicPartition("t", 0)
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    for i in range(5):
        log.append_as_leader([b"flushed-%d" % i], leader_epoch=0)
    log.flush()
    for i in range(7):
        log.append_as_leader([b"volatile-%d" % i] * 3, leader_epoch=0)
    assert (log.recovery_point, log.log_end_offset) == (5, 26)
    rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log)})
    tails = unflushed_tails(rm, random.Random(4), torn)
    assert [(t.tp, t.first_offset) for t in tails] == [(tp, 5)]
    assert (tails[0].torn_bytes > 0) is torn
    log.abandon()
    for t in tails:
        drop_tail(t)
    again = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    try:
        assert again.log_end_offset == 5
        assert (again.last_recovery[-1].error is not None) is torn
        assert [r.value for r in decode_records(again.read(0).view)] == [b"flushed-%d" % i for i in range(5)]
    finally:
        again.close()


def test_nothing_to_lose_when_everything_was_flushed(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    log.append_as_leader([b"x"], leader_epoch=0)
    log.flush()
    rm = SimpleNamespace(partitions={TopicPartition("t", 0): SimpleNamespace(log=log)})
    assert unflushed_tails(rm, random.Random(1), True) == []
    log.close()


def test_a_torn_first_batch_of_a_never_flushed_log_leaves_it_empty(tmp_path):
    """Seed 703's shape: nothing fsynced, 73 bytes of the 97-byte first batch survive.
    Recovery keeps nothing (the batch after the restart at offset 0 was newly appended)."""
    tp = TopicPartition("t", 1)
    log = Log.open(tmp_path / "t-1", {"segment.bytes": 1 << 20}, ManualClock())
    first = log.append_as_leader([b"p3-s1-r0", b"p3-s1-r1"], leader_epoch=0)
    for i in range(50):
        log.append_as_leader([b"p3-s%d-r0" % (i + 2), b"p3-s%d-r1" % (i + 2)], leader_epoch=0)
    assert (first.first_offset, log.recovery_point) == (0, 0)
    rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log)})
    (tail,) = unflushed_tails(rm, random.Random(0), torn=True)
    tail = replace(tail, torn_bytes=73)
    log.abandon()
    drop_tail(tail)
    again = Log.open(tmp_path / "t-1", {"segment.bytes": 1 << 20}, ManualClock())
    try:
        assert again.log_end_offset == 0 and again.last_recovery[-1].error is not None
        again.append_as_leader([b"p3-s20-r0", b"p3-s20-r1"], leader_epoch=0)
        assert [r.value for r in decode_records(again.read(0).view)] == [b"p3-s20-r0", b"p3-s20-r1"]
    finally:
        again.close()


def test_a_partition_that_replaces_another_lasts_its_own_duration():
    """A scripted isolation during a swarm's chaos partition: the chaos partition's heal
    timer used to heal the isolation too, at the chaos partition's time."""
    sched, world, events = _stub_world()
    net = world.network
    faults.partition(world, [[1], [2, 3]], 1000)          # chaos, until 1000
    sched.advance(500)
    faults.partition(world, [[2], [1, 3]], 2000)          # scripted, until 2500
    sched.advance(600)                                    # 1100: the first one's timer fired
    assert net.partitioned and net.cut(2, 3)
    sched.advance(1500)                                   # 2600
    assert not net.partitioned
    assert [(t, kind) for t, kind, _, _ in events] == [(0, "partition"), (500, "partition"), (2500, "heal")]


def test_a_slow_disk_that_replaces_another_lasts_its_own_duration():
    """A second slow disk on a broker still slow: the first one's end used to end it too."""
    sched, world, events = _stub_world()
    net = world.network
    faults.slow_disk(world, 2, 100, 5000)                 # until 5000
    sched.advance(3000)
    faults.slow_disk(world, 2, 50, 5000)                  # until 8000
    sched.advance(2100)                                   # 5100: the first one's timer fired
    assert net.slow_ms == {2: 50}
    sched.advance(3000)                                   # 8100
    assert net.slow_ms == {}
    assert [(t, kind) for t, kind, _, _ in events] == [(0, "slow_disk"), (3000, "slow_disk"), (8000, "disk_fast")]


@pytest.mark.parametrize("cut_first", [True, False], ids=["cut-then-crash", "crash-then-cut"])
def test_a_restart_does_not_heal_a_cut_from_the_store(cut_first):
    """A broker crashed and restarted while cut from the store: its new session used to
    reach the store at once, and the cut's end was never recorded (no heal_store).  The
    cut is the host's, not the process's: one landing while the broker is down is applied
    too (the hundred-and-twenty-seventh review)."""
    from kreplica.sim import scenarios
    from kreplica.sim.world import World

    world = World(scenarios.load("rolling-restart"), 1)
    try:
        world._build()
        sched = world.cluster.scheduler
        if cut_first:
            assert faults.cut_store(world, 2, 5000)
        faults.crash(world, 2)
        if not cut_first:
            assert faults.cut_store(world, 2, 5000)
        sched.advance(500)
        faults.restart(world, 2)
        sched.advance(1000)
        assert not world.cluster.brokers[2].session.reachable
        sched.advance(4000)
        assert world.cluster.brokers[2].session.reachable
        down = ["cut_store", "crash"] if cut_first else ["crash", "cut_store"]
        assert [e.kind for e in world.history.events if e.broker == 2][-4:] == down + ["restart", "heal_store"]
    finally:
        world.close()


@pytest.mark.parametrize("volatile", [1, 60])
def test_a_power_loss_takes_one_record_past_the_flush_and_every_segment_rolled_since(tmp_path, volatile):
    """One record appended after the last fsync is lost as surely as many, and the
    segments rolled since that fsync go with the rest, whole."""
    tp = TopicPartition("t", 0)
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1024}, ManualClock())
    for i in range(3):
        log.append_as_leader([b"flushed-%d" % i], leader_epoch=0)
    log.flush()
    for i in range(volatile):
        log.append_as_leader([b"volatile-%d" % i], leader_epoch=0)
    assert (log.recovery_point, log.log_end_offset) == (3, 3 + volatile)
    rolled = len(log.segments) - 1
    assert (rolled >= 2) is (volatile > 1)
    rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log)})
    tails = unflushed_tails(rm, random.Random(1), torn=False)
    assert [(t.first_offset, len(t.later_segments)) for t in tails] == [(3, rolled)]
    log.abandon()
    for t in tails:
        drop_tail(t)
    # A segment goes whole: its offset and time indexes with its .log (none left orphaned).
    first = log.segments[0].log_file.path
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix in (".log", ".index", ".timeindex")) \
        == sorted(first.with_suffix(suffix).name for suffix in (".log", ".index", ".timeindex"))
    again = Log.open(tmp_path / "t-0", {"segment.bytes": 1024}, ManualClock())
    try:
        assert again.log_end_offset == 3 and len(again.segments) == 1
        assert [r.value for r in decode_records(again.read(0).view)] == [b"flushed-%d" % i for i in range(3)]
    finally:
        again.close()


def test_a_cut_from_the_store_ends_for_its_own_broker_only():
    """Two brokers cut from the store for different times: the first cut's end heals the
    first broker, not the second."""
    sched, world, events = _stub_world()
    assert faults.cut_store(world, 2, 1000) and faults.cut_store(world, 3, 3000)
    assert not faults.cut_store(world, 3, 500)  # already cut: that cut's own end stands
    sched.advance(1500)
    assert world.network.store_cut == {3}
    sched.advance(2000)
    assert world.network.store_cut == set()
    assert [(t, kind, broker) for t, kind, broker, _ in events] == [
        (0, "cut_store", 2), (0, "cut_store", 3), (1000, "heal_store", 2), (3000, "heal_store", 3)]


_QUIET = dict.fromkeys(("crash", "controlled_shutdown", "pause", "slow_disk", "disk_full", "kill_controller",
                        "expire_session", "partition", "cut_store"), 0.0)


@pytest.mark.parametrize("tick_ms", [250, 1000])
def test_the_chaos_planner_draws_a_fault_at_its_rate_per_virtual_minute_until_stopped(tick_ms):
    sched, world, events = _stub_world()
    planner = ChaosPlanner(world, FaultRates(**{**_QUIET, "slow_disk": 30.0}), tick_ms=tick_ms)
    planner.start()
    sched.advance(10 * 60_000)  # ten virtual minutes at 30 a minute
    slow = sum(kind == "slow_disk" for _, kind, _, _ in events)
    assert 240 < slow < 360
    planner.stop()
    sched.advance(60_000)
    assert sum(kind == "slow_disk" for _, kind, _, _ in events) == slow  # none once stopped


@pytest.mark.parametrize("brokers", [2, 3, 4])
def test_a_chaos_partition_always_leaves_brokers_on_both_sides(brokers):
    """Every broker on one side or the other, neither side empty, and the first side of any
    size from 1 to all but one: two brokers are split too, four 1|3, 2|2 and 3|1 (the
    165th review added the sizes and the two and four brokers)."""
    sched, world, events = _stub_world()
    ids = list(range(1, brokers + 1))
    world.cluster.brokers, world.cluster.live_brokers = dict.fromkeys(ids), lambda: list(ids)
    planner = ChaosPlanner(world, FaultRates(**{**_QUIET, "partition": 600.0}, partition_ms_max=300))
    planner.start()
    sched.advance(60_000)
    planner.stop()
    groups = [data["groups"] for _, kind, _, data in events if kind == "partition"]
    assert len(groups) > 50
    assert all(len(g) == 2 and g[0] and g[1] and sorted(g[0] + g[1]) == ids for g in groups)
    assert {len(g[0]) for g in groups} == set(range(1, brokers))
    # The sides are drawn, not only their sizes: every broker set is a first side at some
    # point, not just the lowest ids (the 184th review).
    assert {tuple(g[0]) for g in groups} == {
        tuple(side) for n in range(1, brokers) for side in itertools.combinations(ids, n)}


def test_a_power_loss_after_a_flush_past_a_roll_keeps_every_flushed_segment(tmp_path):
    """The flush reached the second segment: the tail starts in the segment holding the
    recovery point, and the segments before it, flushed, stay whole."""
    tp = TopicPartition("t", 0)
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1024}, ManualClock())
    for i in range(40):
        log.append_as_leader([b"flushed-%d" % i], leader_epoch=0)
    log.flush()
    for i in range(3):
        log.append_as_leader([b"volatile-%d" % i], leader_epoch=0)
    rp = log.recovery_point
    assert rp == 40 and len(log.segments) >= 2
    holding = [s for s in log.segments if s.base_offset <= rp][-1]
    rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log)})
    (tail,) = unflushed_tails(rm, random.Random(1), torn=False)
    assert (tail.first_offset, tail.segment, tail.later_segments) == (40, holding.log_file.path, ())
    log.abandon()
    drop_tail(tail)
    again = Log.open(tmp_path / "t-0", {"segment.bytes": 1024}, ManualClock())
    try:
        assert again.log_end_offset == 40
        values: list[bytes] = []
        while len(values) < again.log_end_offset:  # a read stops at its segment's end
            values += [r.value for r in decode_records(again.read(len(values)).view)]
        assert values == [b"flushed-%d" % i for i in range(40)]
    finally:
        again.close()


def test_a_torn_write_never_keeps_the_whole_first_unflushed_batch(tmp_path):
    """A torn batch keeps some of its bytes but never all of them (then it would not be
    torn, and recovery would keep a batch the power loss took), whatever the draw."""
    tp = TopicPartition("t", 0)
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    log.append_as_leader([b"flushed"], leader_epoch=0)
    log.flush()
    log.append_as_leader([b"volatile"], leader_epoch=0)  # one batch, well under 200 bytes
    rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log)})
    try:
        (tail,) = unflushed_tails(rm, random.Random(0), torn=True)
        unflushed = tail.end - tail.position
        assert unflushed < 200
        torn = {unflushed_tails(rm, random.Random(seed), torn=True)[0].torn_bytes for seed in range(400)}
        assert torn == set(range(1, unflushed))
    finally:
        log.close()


def test_a_stopped_planner_fails_no_new_leader_however_likely_the_cascade(monkeypatch):
    """The liveness phase stops the planner: an election then (there are many as the
    cluster heals) must not draw a cascading crash, as it does while the planner runs."""
    sched, world, _events = _stub_world()
    crashed = []
    monkeypatch.setattr(faults, "crash", lambda w, broker, *a, **k: crashed.append(broker) or False)
    planner = ChaosPlanner(world, FaultRates(**_QUIET, cascade=1.0, cascade_ms_max=10), tick_ms=1000)
    planner.start()
    planner.on_election("t-0", 2)
    sched.advance(20)
    assert crashed == [2]
    planner.stop()
    state = world.rng.getstate()
    planner.on_election("t-0", 3)
    sched.advance(20)
    assert crashed == [2] and world.rng.getstate() == state


def _full_disk_world(**config):
    from kreplica.sim import scenarios
    from kreplica.sim.world import World

    world = World(replace(scenarios.load("slow-follower").with_config(**config), steps=()), 1)
    world._build()
    return world


def test_a_full_disk_refuses_a_followers_appends_as_well_as_a_leaders():
    """A full disk fails every log append on its broker: the follower's fetched batches
    too, not only the produce a leader takes."""
    from kreplica.errors import KafkaStorageError

    world = _full_disk_world()
    try:
        assert faults.disk_full(world, 2, 1000)
        logs = [p.log for p in world.cluster.brokers[2].replica_manager.partitions.values()]
        assert logs
        for log in logs:
            for append in (log.append_batches_as_leader, log.append_as_follower):
                with pytest.raises(KafkaStorageError, match="no space left"):
                    append(None)
    finally:
        world.close()


def test_a_crash_frees_a_full_disk_for_the_restarted_broker():
    """The restarted broker gets a working disk at once, not when the full disk's timer ends."""
    world = _full_disk_world()
    try:
        assert faults.disk_full(world, 2, 60_000)
        assert faults.crash(world, 2)
        assert world.disk_full == set()
        assert faults.restart(world, 2)
        world._step_until(world.now_ms() + 100)
        assert world.disk_full == set()
    finally:
        world.close()


def test_the_chaos_planner_draws_its_partitions_from_the_seed_alone():
    """One seed, one history: the same seed draws the same partitions (sides included),
    however often it is run in one process; another seed draws others."""
    def drawn(seed: int) -> list:
        sched, world, events = _stub_world(seed)
        planner = ChaosPlanner(world, FaultRates(**{**_QUIET, "partition": 600.0}, partition_ms_max=300))
        planner.start()
        sched.advance(20_000)
        return [(t, data["groups"]) for t, kind, _, data in events if kind == "partition"]

    first = drawn(5)
    assert len(first) > 20
    assert drawn(5) == first and drawn(5) == first
    assert drawn(6) != first


def test_a_restart_is_told_to_the_checker_at_its_time():
    """The checker excuses what a broker's earlier incarnations did by its restart times:
    every restart is handed to it, at the instant it happens."""
    world = _full_disk_world()
    try:
        assert faults.crash(world, 2)
        world._step_until(world.now_ms() + 300)
        assert faults.restart(world, 2) and not faults.restart(world, 2)  # a live broker: refused
        assert world.checker.restarts == {2: [world.now_ms()]}
    finally:
        world.close()


def _pause_world():
    """_stub_world with a pausable process per broker, enough for pause and resume."""
    from kreplica.sim.pausable_scheduler import PausableScheduler

    sched, world, events = _stub_world()
    world.cluster.brokers = {b: SimpleNamespace(alive=True) for b in (1, 2, 3)}
    world.processes = {b: PausableScheduler(sched) for b in (1, 2, 3)}
    world._mark_leaderless = world._mark_led_again = lambda broker: None
    return sched, world, events


def test_a_pause_that_replaces_another_lasts_its_own_duration_and_a_dead_broker_is_not_paused():
    """A scripted pause landing on a chaos pause: the process stays paused until the new
    pause's end, not the first one's.  A dead broker has no process to pause."""
    sched, world, events = _pause_world()
    assert faults.pause(world, 2, 1000)
    sched.advance(500)
    assert not faults.pause(world, 2, 100)               # a chaos pause on a paused broker: refused
    assert faults.pause(world, 2, 2000, replace=True)    # scripted: until 2500
    sched.advance(600)                                   # 1100: the first one's timer fired
    assert world.network.is_paused(2) and world.processes[2].paused
    sched.advance(1500)                                  # 2600
    assert not world.network.is_paused(2) and not world.processes[2].paused
    assert [(t, kind) for t, kind, _, _ in events] == [(0, "pause"), (500, "pause"), (2500, "resume")]
    world.cluster.brokers[3].alive = False
    assert not faults.pause(world, 3, 100) and not world.network.is_paused(3)


def test_at_a_resume_the_processs_overdue_timers_run_before_its_socket_buffer_is_read():
    """The order resume() documents: the callbacks the process held first, then what its
    socket buffer took in during the pause, at the same instant."""
    sched, world, _events = _pause_world()
    net = world.network
    seen: list = []
    net.register(2, lambda src, req, respond: seen.append(("message", sched.now_ms())))
    net.deliver(1, 2, "bytes", lambda m: seen.append(("buffered", sched.now_ms())))  # on the wire
    assert faults.pause(world, 2, 1000)
    world.processes[2].call_later(10, lambda: seen.append(("timer", sched.now_ms())))
    net.send(1, 2, FetchRequest(replica_id=1, partitions=()), None)  # sent to a paused node
    sched.advance(1100)
    assert seen[:2] == [("timer", 1000), ("buffered", 1000)]
    assert seen[2][0] == "message" and seen[2][1] > 1000


def test_a_full_disk_needs_a_live_broker_and_only_a_disk_still_full_is_freed_by_its_timer():
    """A dead broker's disk is not filled (nothing would free it: the crash that frees a
    full disk has happened already), and a disk a crash freed is not freed again, in the
    history, when the full disk's own timer ends."""
    sched, world, events = _pause_world()
    world.disk_full = set()
    world.instrument_broker = lambda broker: None
    world.cluster.brokers[3].alive = False
    assert not faults.disk_full(world, 3, 100) and world.disk_full == set()
    assert faults.disk_full(world, 2, 1000)
    world.disk_full.discard(2)  # what a crash of broker 2 does
    sched.advance(1100)
    assert [(t, kind, broker) for t, kind, broker, _ in events] == [(0, "disk_full", 2)]


def test_a_scripted_cut_from_the_store_replaces_one_in_place_and_a_healed_cut_records_no_end():
    """A scripted cut on a broker the planner cut already lasts its own duration; a cut the
    liveness phase healed through the network records no heal_store at its timer."""
    sched, world, events = _stub_world()
    assert faults.cut_store(world, 2, 1000)
    sched.advance(500)
    assert faults.cut_store(world, 2, 2000, replace=True)  # until 2500
    sched.advance(600)
    assert world.network.store_cut == {2}
    sched.advance(1500)
    assert world.network.store_cut == set()
    assert faults.cut_store(world, 3, 1000)
    world.network.heal_store()  # the liveness phase's heal
    sched.advance(1100)
    assert [(t, kind, broker) for t, kind, broker, _ in events] == [
        (0, "cut_store", 2), (500, "cut_store", 2), (2500, "heal_store", 2), (2600, "cut_store", 3)]


def test_a_cascade_crashes_within_max_down_only_while_the_planner_runs_and_restarts_its_broker(monkeypatch):
    """A cascading failure is a crash like the planner's others: it keeps at most max_down
    brokers down, it does not happen once the planner has stopped (even when drawn before
    the stop), and the crashed leader comes back after a downtime."""
    sched, world, _events = _stub_world()
    crashed, restarted = [], []
    monkeypatch.setattr(faults, "crash", lambda w, broker, *a, **k: crashed.append(broker) or True)
    monkeypatch.setattr(faults, "restart", lambda w, broker: restarted.append(broker) or True)
    rates = FaultRates(**_QUIET, cascade=1.0, cascade_ms_max=100, downtime_ms_max=1000, max_down=1)
    planner = ChaosPlanner(world, rates, tick_ms=60_000)
    planner.start()
    planner.on_election("t-0", 2)
    sched.advance(1200)
    assert crashed == [2] and restarted == [2]
    world.cluster.live_brokers = lambda: [1, 3]  # one broker down already: max_down reached
    planner.on_election("t-0", 3)
    sched.advance(200)
    assert crashed == [2]
    world.cluster.live_brokers = lambda: [1, 2, 3]
    planner.on_election("t-1", 1)  # drawn while running ...
    planner.stop()                 # ... and the liveness phase begins before it is due
    sched.advance(200)
    assert crashed == [2] and restarted == [2]


def test_the_chaos_planner_never_stacks_a_partition_on_one_in_place(monkeypatch):
    """The planner draws a partition only when none is in place: each one heals before the
    next, however often partitions are drawn."""
    sched, world, events = _stub_world()
    planner = ChaosPlanner(world, FaultRates(**{**_QUIET, "partition": 600.0}, partition_ms_max=5000))
    planner.start()
    sched.advance(60_000)
    planner.stop()
    kinds = [kind for _, kind, _, _ in events]
    assert kinds.count("partition") > 5
    assert all(a != b for a, b in zip(kinds, kinds[1:]))  # partition, heal, partition, heal, ...


def test_the_planner_restarts_the_controller_it_killed(monkeypatch):
    """After kill_controller the broker brought back is the controller that was killed,
    not the broker the tick happened to draw."""
    sched, world, _events = _stub_world()
    world.cluster.brokers = {b: SimpleNamespace(alive=True) for b in (1, 2, 3)}
    world.cluster.controller_id = 1
    restarted = []
    monkeypatch.setattr(faults, "crash", lambda w, broker, *a, **k: True)
    monkeypatch.setattr(faults, "restart", lambda w, broker: restarted.append(broker) or True)
    planner = ChaosPlanner(world, FaultRates(**{**_QUIET, "kill_controller": 600.0}, downtime_ms_max=1000))
    planner.start()
    sched.advance(30_000)
    planner.stop()
    assert len(restarted) > 20 and set(restarted) == {1}


def test_a_controlled_shutdown_in_progress_is_not_begun_again():
    """A broker already shutting down is refused a second controlled shutdown (the planner's
    draw, or a scripted step landing on one)."""
    world = _full_disk_world()
    try:
        assert faults.controlled_shutdown(world, 2)
        assert not faults.controlled_shutdown(world, 2)
        assert [e.kind for e in world.history.events if e.kind.startswith("controlled_shutdown")] == [
            "controlled_shutdown"]
    finally:
        world.close()


def test_a_power_loss_right_after_a_roll_tears_the_first_batch_of_the_new_segment(tmp_path):
    """The last flush ended exactly where the active segment begins: the unflushed bytes
    start at that segment's first byte, so a torn write leaves part of its first batch for
    recovery to cut, as anywhere else (not a whole earlier segment and nothing torn)."""
    tp = TopicPartition("t", 0)
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    for i in range(3):
        log.append_as_leader([b"flushed-%d" % i], leader_epoch=0)
    log.flush()
    log.roll()
    for i in range(3):
        log.append_as_leader([b"volatile-%d" % i] * 3, leader_epoch=0)
    active = log.segments[-1]
    assert active.base_offset == log.recovery_point == 3
    rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log)})
    (tail,) = unflushed_tails(rm, random.Random(1), torn=True)
    assert (tail.first_offset, tail.segment, tail.position, tail.later_segments) == (3, active.log_file.path, 0, ())
    assert tail.torn_bytes > 0
    log.abandon()
    drop_tail(tail)
    again = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    try:
        assert again.log_end_offset == 3 and again.last_recovery[-1].error is not None
    finally:
        again.close()


def _led_world():
    """_full_disk_world a second in, every partition led; and one leader's partitions."""
    world = _full_disk_world()
    world._step_until(1000)
    leader = world.checker.models["t-0"].leader
    return world, leader, sorted(n for n, m in world.checker.models.items() if m.leader == leader)


def test_time_to_reelect_counts_from_the_crash_not_from_the_next_sample():
    world, leader, led = _led_world()
    try:
        world._step_until(1042)  # between two samples
        assert faults.crash(world, leader)
        assert {n: world._leaderless_since.get(n) for n in led} == dict.fromkeys(led, 1042)
        world._step_until(5000)
        elected = {tp: t for t, tp, _leader, epoch in world.checker.elections if epoch > 0 and tp in led}
        assert sorted(elected) == led
        assert sorted(world.reelect_ms) == sorted(t - 1042 for t in elected.values())
    finally:
        world.close()


def test_a_paused_leaders_partitions_are_leaderless_from_the_pause_until_its_resume():
    """A paused leader serves nothing: its partitions count as leaderless from the pause's
    first instant, and from its resume no more (no election was needed)."""
    world, leader, led = _led_world()
    try:
        world._step_until(1042)
        assert faults.pause(world, leader, 5000)
        assert {n: world._leaderless_since.get(n) for n in led} == dict.fromkeys(led, 1042)
        world._step_until(1342)
        faults.resume(world, leader)  # as the liveness phase ends it, between two samples
        assert not world.network.is_paused(leader)
        assert not any(n in world._leaderless_since for n in led)
    finally:
        world.close()


def test_a_slow_disk_the_liveness_phase_ended_records_no_end_at_its_timer():
    sched, world, events = _stub_world()
    assert faults.slow_disk(world, 2, 100, 1000)
    world.network.slow_ms.clear()  # the liveness phase ends every slow disk at once
    sched.advance(1100)
    assert [(t, kind, broker) for t, kind, broker, _ in events] == [(0, "slow_disk", 2)]


def test_a_partition_the_liveness_phase_healed_records_no_heal_at_its_timer():
    """The liveness phase heals the network itself; the partition's own timer, due later,
    finds nothing to heal and must not put a heal in the history, as a slow disk's, a full
    disk's and a store cut's timers record nothing for a fault already ended."""
    sched, world, events = _stub_world()
    assert faults.partition(world, [[1], [2, 3]], 1000)
    world.network.heal()  # the liveness phase
    sched.advance(1100)
    assert [(t, kind) for t, kind, _, _ in events] == [(0, "partition")]


def _planned(monkeypatch, rates: FaultRates, live=(1, 2, 3), shutdown_answer: bool = True):
    """The chaos planner over ``_stub_world`` for a virtual minute, then stopped, with crash, controlled
    shutdown and restart noted (broker and flags), not done (a crash answers False: refused; a
    controlled shutdown answers ``shutdown_answer``).
    Returns (world, events, noted: [(time, kind, broker, flags)])."""
    sched, world, events = _stub_world()
    world.cluster.live_brokers = lambda: list(live)
    # A broker the planner shut down is stopped by the time its restart is due.
    world.cluster.brokers = {b: SimpleNamespace(alive=b in live, shutting_down=False) for b in (1, 2, 3)}
    noted: list = []

    def note(kind, answer):
        return lambda w, broker, *a, **k: noted.append((sched.now_ms(), kind, broker, a)) or answer

    monkeypatch.setattr(faults, "crash", note("crash", False))
    monkeypatch.setattr(faults, "controlled_shutdown", note("controlled_shutdown", shutdown_answer))
    monkeypatch.setattr(faults, "restart", note("restart", True))
    planner = ChaosPlanner(world, rates)
    planner.start()
    sched.advance(60_000)
    planner.stop()
    sched.advance(20_000)  # the restarts still due
    return world, events, noted


@pytest.mark.parametrize("power, torn, flags", [(0.0, 1.0, {(False, False)}), (1.0, 0.0, {(True, False)}),
                                                (1.0, 1.0, {(True, True)})],
                         ids=["no-power-loss", "power-loss-untorn", "power-loss-torn"])
def test_the_planners_crashes_lose_unflushed_bytes_and_tear_as_its_fractions_say(monkeypatch, power, torn, flags):
    """power_loss_fraction says which crashes drop unflushed bytes, and torn_fraction which of
    those power losses tear a batch: a crash without a power loss tears nothing."""
    rates = FaultRates(**{**_QUIET, "crash": 600.0}, power_loss_fraction=power, torn_fraction=torn)
    _world, _events, noted = _planned(monkeypatch, rates)
    crashes = [a for _, kind, _, a in noted if kind == "crash"]
    assert len(crashes) > 50 and set(crashes) == flags


def test_the_planner_brings_back_every_broker_it_shut_down(monkeypatch):
    rates = FaultRates(**{**_QUIET, "controlled_shutdown": 60.0}, downtime_ms_max=1000)
    _world, _events, noted = _planned(monkeypatch, rates)
    shut = [(t, b) for t, kind, b, _ in noted if kind == "controlled_shutdown"]
    back = [(t, b) for t, kind, b, _ in noted if kind == "restart"]
    assert len(shut) > 20 and sorted(b for _, b in back) == sorted(b for _, b in shut)
    assert all(any(b == shut_b and 2000 <= tb - ts <= 3000 for ts, shut_b in shut) for tb, b in back)


def test_with_a_broker_down_the_planner_aims_at_live_ones_and_partitions_place_every_broker(monkeypatch):
    """Faults that need a process land on live brokers only (a slow disk on a dead one would
    be recorded for nothing); a partition still places the dead broker on one side, where a
    restart during the partition finds it, not in no group (reaching both sides)."""
    rates = FaultRates(**{**_QUIET, "slow_disk": 120.0, "partition": 120.0}, partition_ms_max=300)
    world, events, _noted = _planned(monkeypatch, rates, live=(1, 2))
    slow = {b for _, kind, b, _ in events if kind == "slow_disk"}
    groups = [data["groups"] for _, kind, _, data in events if kind == "partition"]
    assert slow == {1, 2}
    assert len(groups) > 10 and all(sorted(g[0] + g[1]) == [1, 2, 3] for g in groups)


def test_a_tick_with_every_broker_down_draws_nothing_and_the_planner_goes_on():
    sched, world, events = _stub_world()
    live: list = []
    world.cluster.live_brokers = lambda: list(live)
    planner = ChaosPlanner(world, FaultRates(**{**_QUIET, "slow_disk": 120.0}))
    planner.start()
    sched.advance(5000)
    assert events == []
    live[:] = [2]  # one broker back: the only target, still drawn for (the 203rd review)
    sched.advance(10_000)
    assert {broker for _, kind, broker, _ in events if kind == "slow_disk"} == {2}
    assert sum(kind == "slow_disk" for _, kind, _, _ in events) > 5
    live[:] = [1, 2, 3]  # the brokers are back
    sched.advance(10_000)
    planner.stop()
    assert {broker for _, kind, broker, _ in events if kind == "slow_disk"} == {1, 2, 3}


def test_a_fault_kind_at_rate_zero_takes_nothing_from_the_seed():
    """Each tick with every kind switched off draws its target and nothing more: a kind at
    rate 0 (as disk_full is by default) leaves every other draw of a seed where it was.
    So does an election with cascades off (``cascade`` 0, the default)."""
    sched, world, events = _stub_world()
    planner = ChaosPlanner(world, FaultRates(**_QUIET), tick_ms=250)
    planner.start()
    sched.advance(20 * 250)
    for leader in (1, 2, 3):
        planner.on_election("t-0", leader)
    sched.advance(20 * 250)
    planner.stop()
    expected = random.Random(1)
    for _ in range(40):
        expected.choice([1, 2, 3])
    assert events == [] and world.rng.getstate() == expected.getstate()


def test_a_partition_in_place_leaves_the_planners_draws_where_they_were():
    """The partition's chance is drawn every tick, a partition in place or not (then the
    planner just starts none): a scripted partition does not shift a seed's later draws."""
    sched, world, events = _stub_world()
    world.network.partition({1}, {2, 3})
    planner = ChaosPlanner(world, FaultRates(**{**_QUIET, "partition": 60.0}), tick_ms=250)
    planner.start()
    sched.advance(40 * 250)
    planner.stop()
    expected = random.Random(1)
    for _ in range(40):
        expected.choice([1, 2, 3])
        expected.random()
    assert events == [] and world.rng.getstate() == expected.getstate()


def test_a_cascade_on_a_leader_already_down_brings_nobody_back(monkeypatch):
    """The cascade's restart belongs to its crash: a leader that died otherwise before the
    cascade came due (a scripted crash, say) is not restarted early by it."""
    rates = FaultRates(**_QUIET, cascade=1.0, cascade_ms_max=10, downtime_ms_max=1000)
    sched, world, _events = _stub_world()
    restarted = []
    monkeypatch.setattr(faults, "crash", lambda w, broker, *a, **k: False)  # down already
    monkeypatch.setattr(faults, "restart", lambda w, broker: restarted.append(broker) or True)
    planner = ChaosPlanner(world, rates, tick_ms=60_000)
    planner.start()
    planner.on_election("t-0", 2)
    sched.advance(2000)
    assert restarted == []


def test_a_controller_killed_with_a_power_loss_loses_its_unflushed_bytes():
    world, _leader, _led = _led_world()
    try:
        cid = world.cluster.controller_id
        tp, p = sorted(world.cluster.brokers[cid].replica_manager.partitions.items())[0]
        p.log.append_as_leader([b"fsynced"] * 3, leader_epoch=p.leader_epoch)
        p.log.flush()
        p.log.append_as_leader([b"not fsynced"], leader_epoch=p.leader_epoch)
        unflushed = {f"{tp.topic}-{tp.partition}": p.log.recovery_point}
        # the first offset dropped, not the byte position it starts at (equal only at 0)
        assert 0 < p.log.recovery_point < p.log.log_end_offset
        assert faults.kill_controller(world, lose_unflushed=True)
        (crash,) = [e for e in world.history.events if e.kind == "crash"]
        assert (crash.broker, crash.data["lose_unflushed"], crash.data["dropped"]) == (cid, True, unflushed)
        assert [e.broker for e in world.history.events if e.kind == "kill_controller"] == [cid]  # who, in the trace
        assert crash.data["torn"] is False  # a scripted step has no torn write to ask for
        (name, first), = unflushed.items()  # the checker excuses from the first offset dropped, no later
        assert [d[:2] for d in world.checker.model(name).drops] == [(cid, first)]
    finally:
        world.close()


# ---- the eighty-ninth review -----------------------------------------------------------------

def test_a_full_disk_fails_the_appends_of_its_own_broker_only():
    """The guard of a broker's appends looks at that broker's disk: another broker's full
    disk leaves its appends alone."""
    from kreplica.errors import KafkaStorageError

    world = SimpleNamespace(disk_full={2})
    appended = []
    assert faults.full_disk_guard(world, 1, lambda *a: appended.append(a) or "ok")(b"batch") == "ok"
    with pytest.raises(KafkaStorageError, match="broker 2: no space left"):
        faults.full_disk_guard(world, 2, lambda *a: appended.append(a))(b"batch")
    assert appended == [(b"batch",)]


def test_a_dead_brokers_session_is_not_expired():
    """expire_session needs a live broker: a crashed one's session is abandoned already (the
    store expires it on its own), so a scripted expiry landing on it is refused, not recorded."""
    world = _full_disk_world()
    try:
        assert faults.crash(world, 2)
        assert not faults.expire_session(world, 2)
        assert faults.expire_session(world, 3)
        assert [e.broker for e in world.history.events if e.kind == "expire_session"] == [3]
    finally:
        world.close()


def test_a_controlled_shutdown_that_fails_is_recorded_as_failed():
    """With controlled.shutdown.max.retries = 0 the broker makes no attempt and stops anyway;
    the history says the shutdown did not succeed."""
    world = _full_disk_world(**{"controlled.shutdown.max.retries": 0})
    try:
        assert faults.controlled_shutdown(world, 2)
        done = [e for e in world.history.events if e.kind == "controlled_shutdown_done"]
        assert done and all(e.broker == 2 and e.data["ok"] is False for e in done)
        assert not world.cluster.brokers[2].alive
    finally:
        world.close()


def test_a_crash_of_a_paused_broker_loses_what_it_sent_during_the_pause():
    """What a paused process sent waits in its host's queues until the resume; a host failure
    during the pause loses it with everything else the host had not delivered."""
    sched, world, _events = _pause_world()
    world.cluster.brokers[2].replica_manager = None
    world.cluster.kill = lambda broker: setattr(world.cluster.brokers[broker], "alive", False)
    world.disk_full = set()
    got: list = []
    assert faults.pause(world, 2, 1000)
    world.network.deliver(2, 1, "sent during the pause", got.append)
    assert world.network.stats.held == 1
    assert faults.crash(world, 2)
    sched.advance(2000)
    assert got == []


def test_the_planner_draws_no_partition_with_one_broker_live(monkeypatch):
    """A partition needs two live brokers to cut between; with one, a tick draws none."""
    rates = FaultRates(**{**_QUIET, "partition": 600.0}, partition_ms_max=300, max_down=2)
    for live, drawn in (((1,), False), ((1, 2), True)):
        _world, events, _noted = _planned(monkeypatch, rates, live=live)
        assert any(kind == "partition" for _, kind, _, _ in events) is drawn, live


def test_a_controlled_shutdown_the_planner_was_refused_brings_nobody_back(monkeypatch):
    """The restart after a controlled shutdown belongs to it: a target shutting down already
    (a scripted shutdown, say) is refused and not restarted by the planner, nor is its
    downtime drawn: each of the minute's 240 ticks draws its target and the shutdown's
    chance, nothing more."""
    rates = FaultRates(**{**_QUIET, "controlled_shutdown": 60.0}, downtime_ms_max=1000)
    world, _events, noted = _planned(monkeypatch, rates, shutdown_answer=False)
    assert sum(kind == "controlled_shutdown" for _, kind, _, _ in noted) > 20
    assert [b for _, kind, b, _ in noted if kind == "restart"] == []
    expected = random.Random(1)
    for _ in range(240):
        expected.choice([1, 2, 3])
        expected.random()
    assert world.rng.getstate() == expected.getstate()


def test_the_planner_kills_no_controller_with_max_down_brokers_down(monkeypatch):
    killed: list = []
    monkeypatch.setattr(faults, "kill_controller", lambda w, *a, **k: killed.append(w.cluster.controller_id) or True)
    rates = FaultRates(**{**_QUIET, "kill_controller": 600.0}, downtime_ms_max=1000, max_down=1)
    _planned(monkeypatch, rates, live=(1, 2))
    assert killed == []
    _planned(monkeypatch, rates)
    assert len(killed) > 20


def test_the_planners_faults_last_between_their_shortest_and_their_bounds(monkeypatch):
    """Each drawn length lies in its own range: a pause in [50, pause_ms_max], a partition and
    a cut from the store in [100, partition_ms_max], a slow disk's delay in [5, 200] for
    [500, 5000] ms, a full disk in [200, 3000] ms; and each spreads over its whole range, not a
    corner of it (the 222nd review: a full disk drawn from 2000 ms stayed within its bounds)."""
    drawn: dict = {}

    def note(kind):
        return lambda w, target, *a: drawn.setdefault(kind, []).append(a) or True

    for kind in ("pause", "slow_disk", "disk_full", "partition", "cut_store"):
        monkeypatch.setattr(faults, kind, note(kind))
    rates = FaultRates(**{**_QUIET, **dict.fromkeys(("pause", "slow_disk", "disk_full", "partition", "cut_store"),
                                                    48.0)}, pause_ms_max=400, partition_ms_max=3000)
    sched, world, _events = _stub_world()
    planner = ChaosPlanner(world, rates)
    planner.start()
    sched.advance(10 * 60_000)
    planner.stop()
    assert {kind: len(d) > 30 for kind, d in drawn.items()} == dict.fromkeys(
        ("pause", "slow_disk", "disk_full", "partition", "cut_store"), True)
    pauses = [d for (d,) in drawn["pause"]]
    assert 50 <= min(pauses) and max(pauses) <= 400
    for kind in ("partition", "cut_store"):
        lengths = [a[-1] for a in drawn[kind]]
        assert 100 <= min(lengths) and 400 < max(lengths) <= 3000, kind
    assert all(5 <= delay <= 200 and 500 <= length <= 5000 for delay, length in drawn["slow_disk"])
    assert all(200 <= length <= 3000 for (length,) in drawn["disk_full"])
    delays, slow_lengths = zip(*drawn["slow_disk"])
    full_lengths = [length for (length,) in drawn["disk_full"]]
    assert (min(delays), max(delays)) == (5, 200)
    assert min(slow_lengths) < 600 and max(slow_lengths) > 4900
    assert min(full_lengths) < 300 and max(full_lengths) > 2900


# ---- the hundred-and-eighth review -----------------------------------------------------------

def test_a_controller_down_already_is_not_killed_again():
    """kill_controller needs the controller alive: the store names a crashed controller until
    its session expires, and a scripted kill landing then is refused, not recorded."""
    world = _full_disk_world()
    try:
        cid = world.cluster.controller_id
        assert faults.crash(world, cid)
        assert world.cluster.controller_id == cid  # its session has not expired yet
        assert not faults.kill_controller(world)
        assert [e.kind for e in world.history.events if e.kind in ("crash", "kill_controller")] == ["crash"]
    finally:
        world.close()


# ---- the hundred-and-twenty-seventh review -----------------------------------------------------

def test_a_full_disk_that_replaces_another_lasts_its_own_duration():
    """A scripted full disk landing on a full one lasts its own duration: the first one's
    timer no longer frees the disk (as a replacing slow disk, pause or cut does)."""
    sched, world, events = _pause_world()
    world.disk_full = set()
    world.instrument_broker = lambda broker: None
    assert faults.disk_full(world, 2, 1000)                    # until 1000
    sched.advance(500)
    assert faults.disk_full(world, 2, 2000, replace=True)      # scripted: until 2500
    sched.advance(600)                                         # 1100: the first one's timer fired
    assert world.disk_full == {2}
    sched.advance(1500)                                        # 2600
    assert world.disk_full == set()
    assert [(t, kind) for t, kind, _, _ in events] == [(0, "disk_full"), (500, "disk_full"), (2500, "disk_freed")]


@pytest.mark.parametrize("fault, end", [("pause", "resume"), ("disk_full", "disk_freed"), ("cut_store", "heal_store")])
def test_the_planner_stacks_no_fault_on_the_same_fault_in_place(fault, end):
    """A chaos pause, full disk or store cut is refused on a broker under that fault already
    (only a scripted step replaces one): on each broker the planner's faults of the kind and
    their ends alternate, none stacked on another (until the 165th review this test was
    test_the_planner_pauses_no_broker_paused_already, the pause alone)."""
    sched, world, events = _pause_world()
    world.disk_full, world.instrument_broker = set(), lambda broker: None
    planner = ChaosPlanner(world, FaultRates(**{**_QUIET, fault: 600.0}, pause_ms_max=4000, partition_ms_max=4000))
    planner.start()
    sched.advance(60_000)
    planner.stop()
    sched.advance(5000)
    for b in (1, 2, 3):
        kinds = [kind for _, kind, broker, _ in events if broker == b]
        assert len(kinds) > 10 and kinds == [fault, end] * (len(kinds) // 2), b


def test_a_controller_the_planner_killed_stays_down_between_the_shortest_downtime_and_its_bound(monkeypatch):
    """A killed controller is a crash: it comes back after a downtime drawn in
    [200, downtime_ms_max], not after a pause's length."""
    sched, world, _events = _stub_world()
    world.cluster.brokers = {b: SimpleNamespace(alive=True) for b in (1, 2, 3)}
    killed, restarted = [], []
    monkeypatch.setattr(faults, "kill_controller", lambda w, *a, **k: killed.append(sched.now_ms()) or True)
    monkeypatch.setattr(faults, "restart", lambda w, broker: restarted.append(sched.now_ms()) or True)
    rates = FaultRates(**{**_QUIET, "kill_controller": 60.0}, downtime_ms_max=1000, pause_ms_max=100)
    planner = ChaosPlanner(world, rates, tick_ms=2000)  # a kill at most every 2 s: each restart follows its kill
    planner.start()
    sched.advance(120_000)
    planner.stop()
    sched.advance(2000)
    assert len(killed) > 20 and len(restarted) == len(killed)
    downtimes = [r - k for k, r in zip(killed, restarted)]
    assert 200 <= min(downtimes) and max(downtimes) <= 1000 and max(downtimes) > 500


def test_a_cascading_crash_comes_0_to_cascade_ms_max_ms_after_the_election(monkeypatch):
    """The new leader may fail at the very instant of its election (KIP-101's double failure
    at once) or up to cascade_ms_max ms later, both ends included."""
    sched, world, _events = _stub_world()
    delays = []
    elected = {}
    monkeypatch.setattr(faults, "crash", lambda w, broker, *a, **k: delays.append(sched.now_ms() - elected[broker]))
    planner = ChaosPlanner(world, FaultRates(**_QUIET, cascade=1.0, cascade_ms_max=3), tick_ms=60_000)
    planner.start()
    for i in range(100):
        elected[i] = sched.now_ms()
        planner.on_election("t-0", i)
        sched.advance(10)
    planner.stop()
    assert len(delays) == 100 and set(delays) == {0, 1, 2, 3}


def test_a_torn_write_keeps_under_200_bytes_however_long_the_unflushed_tail(tmp_path):
    """The torn prefix is under 200 bytes: from a tail of several kilobytes it keeps 1 to
    199 of them, 199 included."""
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    log.append_as_leader([b"flushed"], leader_epoch=0)
    log.flush()
    for i in range(20):
        log.append_as_leader([b"volatile-%03d" % i * 20], leader_epoch=0)
    rm = SimpleNamespace(partitions={TopicPartition("t", 0): SimpleNamespace(log=log)})
    try:
        torn = set()
        rng = random.Random(2)
        for _ in range(3000):
            (tail,) = unflushed_tails(rm, rng, torn=True)
            torn.add(tail.torn_bytes)
        assert tail.end - tail.position > 1000
        assert min(torn) == 1 and max(torn) == 199
    finally:
        log.close()


def test_the_planner_shuts_no_broker_down_with_max_down_brokers_down(monkeypatch):
    """A controlled shutdown takes its broker down as a crash does: none is drawn while
    max_down brokers are down already."""
    rates = FaultRates(**{**_QUIET, "controlled_shutdown": 600.0}, downtime_ms_max=1000, max_down=1)
    _world, _events, noted = _planned(monkeypatch, rates, live=(1, 2))
    assert [kind for _, kind, _, _ in noted] == []
    _world, _events, noted = _planned(monkeypatch, rates)
    assert sum(kind == "controlled_shutdown" for _, kind, _, _ in noted) > 20


def test_the_planners_fault_lengths_reach_both_ends_of_their_range(monkeypatch):
    """A drawn length lies in [shortest, bound], both ends included: with pause_ms_max=60 every
    pause length from 50 to 60 ms comes up, and with partition_ms_max=110 every cut from the
    store from 100 to 110 ms."""
    drawn: dict = {}
    for kind in ("pause", "cut_store"):
        monkeypatch.setattr(faults, kind, lambda w, target, length, kind=kind: drawn.setdefault(kind, set()).add(length))
    rates = FaultRates(**{**_QUIET, "pause": 120.0, "cut_store": 240.0}, pause_ms_max=60, partition_ms_max=110)
    sched, world, _events = _stub_world()
    planner = ChaosPlanner(world, rates)
    planner.start()
    sched.advance(5 * 60_000)
    planner.stop()
    assert drawn == {"pause": set(range(50, 61)), "cut_store": set(range(100, 111))}


def test_a_power_loss_draws_its_torn_prefixes_partition_by_partition_in_name_order(tmp_path):
    """The logs of a power loss are taken in (topic, partition) order whatever the replica
    manager's order, so each one's torn prefix is the same draw of the seed in every run."""
    logs = {}
    for topic, partition in (("b", 0), ("a", 1), ("a", 0)):
        tp = TopicPartition(topic, partition)
        log = logs[tp] = Log.open(tmp_path / f"{topic}-{partition}", {"segment.bytes": 1 << 20}, ManualClock())
        for i in range(5):
            log.append_as_leader([b"volatile-%d" % i], leader_epoch=0)
    try:
        rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log) for tp, log in logs.items()})
        tails = unflushed_tails(rm, random.Random(9), torn=True)
        assert [(t.tp.topic, t.tp.partition) for t in tails] == [("a", 0), ("a", 1), ("b", 0)]
        rm.partitions = dict(reversed(rm.partitions.items()))
        again = unflushed_tails(rm, random.Random(9), torn=True)
        assert [(t.tp, t.torn_bytes) for t in again] == [(t.tp, t.torn_bytes) for t in tails]
    finally:
        for log in logs.values():
            log.close()



def test_a_crash_told_to_keep_the_hosts_in_flight_messages_keeps_them():
    """``lose_in_flight=False`` (a process crash, the host up): what the broker had on the
    wire still arrives, while a default crash loses it (the hundred-and-forty-sixth
    review)."""
    sched, world, events = _pause_world()
    for b in (2, 3):
        world.cluster.brokers[b].replica_manager = None
    world.cluster.kill = lambda broker: setattr(world.cluster.brokers[broker], "alive", False)
    world.disk_full = set()
    got: list = []
    world.network.deliver(2, 1, "from 2", got.append)
    world.network.deliver(3, 1, "from 3", got.append)
    assert faults.crash(world, 2, lose_in_flight=False)
    assert faults.crash(world, 3)
    sched.advance(100)
    assert got == ["from 2"] and world.network.stats.dropped == 1
    assert [(kind, b, d["lose_in_flight"]) for _, kind, b, d in events] == [("crash", 2, False), ("crash", 3, True)]


def test_a_dead_broker_is_refused_a_controlled_shutdown():
    """A crashed broker has no process to shut down: a scripted controlled shutdown landing
    on it is refused and recorded nowhere, and its restart is the one that brings it back
    (the hundred-and-forty-sixth review)."""
    world = _full_disk_world()
    try:
        assert faults.crash(world, 2)
        assert not faults.controlled_shutdown(world, 2)
        world._step_until(world.now_ms() + 500)
        assert not world.cluster.brokers[2].alive
        assert not [e for e in world.history.events if e.kind.startswith("controlled_shutdown")]
        assert faults.restart(world, 2) and world.cluster.brokers[2].alive
    finally:
        world.close()


def test_a_partition_enters_the_history_with_each_side_sorted():
    """A scripted step may name a side's brokers in any order; the history records each
    side sorted, so two scenarios cutting the same sides hash alike (the
    hundred-and-forty-sixth review)."""
    sched, world, events = _stub_world()
    assert faults.partition(world, [[3, 1], [2]], 100)
    assert events[-1][1:3] == ("partition", None)
    assert events[-1][3]["groups"] == [[1, 3], [2]]
    assert world.network.cut(1, 2) and world.network.cut(3, 2) and not world.network.cut(1, 3)


def test_an_expired_session_fault_expires_the_session_even_right_after_a_heartbeat():
    """expire_session stops the heartbeats for longer than the session timeout: even when
    the last ping came at the very instant of the fault, the store expires the session
    before the heartbeats come back (the hundred-and-forty-sixth review)."""
    from kreplica.meta.memory_store import MemoryStore

    sched, world, events = _stub_world()
    store = MemoryStore(sched, session_timeout_ms=300)  # a ping every 100 ms
    session = store.session("broker-2")
    world.session_timeout_ms = 300
    world.cluster.brokers = {2: SimpleNamespace(alive=True, session=session)}
    sched.advance(400)  # the ping at 400 has run: the store heard from it just now
    assert faults.expire_session(world, 2)
    sched.advance(400)
    assert session.expired
    assert [(t, kind) for t, kind, _, _ in events] == [(400, "expire_session")]


def test_a_crash_without_a_power_loss_takes_no_torn_draw_from_the_seed(monkeypatch):
    """torn_fraction is drawn for power losses only: a plain crash takes its target, its
    chance and its power-loss draw from the seed and nothing more, so the torn fraction
    moves no other draw of a seed without power losses (the hundred-and-forty-sixth
    review)."""
    rates = FaultRates(**{**_QUIET, "crash": 600_000.0}, power_loss_fraction=0.0)
    world, _events, noted = _planned(monkeypatch, rates)  # every crash refused: no restart drawn
    assert len(noted) == 240
    expected = random.Random(1)
    draws = [(expected.choice([1, 2, 3]), expected.random(), expected.random()) for _ in noted]
    assert len(draws) == 240 and world.rng.getstate() == expected.getstate()


def test_a_cascaded_leader_stays_down_between_the_shortest_downtime_and_its_bound(monkeypatch):
    """A cascading failure is a crash: the leader it fails comes back after a downtime drawn
    in [200, downtime_ms_max], not after a pause's length (the hundred-and-forty-sixth
    review)."""
    sched, world, _events = _stub_world()
    crashed, restarted = {}, {}
    monkeypatch.setattr(faults, "crash", lambda w, broker, *a, **k: crashed.setdefault(broker, sched.now_ms()) or True)
    monkeypatch.setattr(faults, "restart", lambda w, broker: restarted.setdefault(broker, sched.now_ms()) or True)
    rates = FaultRates(**_QUIET, cascade=1.0, cascade_ms_max=0, downtime_ms_max=1000, pause_ms_max=100)
    planner = ChaosPlanner(world, rates, tick_ms=600_000)
    planner.start()
    for leader in range(40):
        planner.on_election("t-0", leader)
        sched.advance(1001)  # back before the next one fails: max_down is never reached
    planner.stop()
    assert len(crashed) == 40 and restarted.keys() == crashed.keys()
    downtimes = [restarted[b] - crashed[b] for b in crashed]
    assert 200 <= min(downtimes) and max(downtimes) <= 1000 and max(downtimes) > 500


def test_with_no_controller_elected_a_controller_kill_is_refused():
    """Between a controller's loss and the next election the store names none: a scripted
    kill_controller landing then is refused and recorded nowhere (the
    hundred-and-forty-sixth review)."""
    sched, world, events = _stub_world()
    world.cluster.controller_id = None
    assert not faults.kill_controller(world, lose_unflushed=True)
    assert events == []


def test_a_broker_between_sessions_is_refused_an_expired_session():
    """A live broker whose new session could not be opened yet (``Broker._renew_session``
    retrying a store out of reach) has no session to expire: the fault is refused and
    recorded nowhere."""
    sched, world, events = _stub_world()
    world.cluster.brokers = {2: SimpleNamespace(alive=True, session=None)}
    world.session_timeout_ms = 6000
    assert not faults.expire_session(world, 2)
    sched.advance(7000)
    assert events == []


def test_a_controlled_shutdown_that_ends_at_once_is_recorded_before_its_end():
    """With no attempt to make (controlled.shutdown.max.retries = 0) the shutdown ends inside
    the call: the history still shows it begun before it ended (the
    hundred-and-forty-sixth review)."""
    world = _full_disk_world(**{"controlled.shutdown.max.retries": 0})
    try:
        assert faults.controlled_shutdown(world, 2)
        assert [(e.kind, e.broker) for e in world.history.events if e.kind.startswith("controlled_shutdown")] == [
            ("controlled_shutdown", 2), ("controlled_shutdown_done", 2)]
    finally:
        world.close()


def test_a_cascading_crash_is_a_host_failure_without_a_power_loss(monkeypatch):
    """The leader a cascade fails crashes as a host does (what it had in flight lost), its
    unflushed bytes kept: no power loss, no torn write, whatever the planner's power-loss
    fraction (the hundred-and-forty-sixth review)."""
    sched, world, _events = _stub_world()
    calls = []
    monkeypatch.setattr(faults, "crash", lambda w, broker, *a, **k: calls.append((broker, a, k)) or True)
    planner = ChaosPlanner(world, FaultRates(**_QUIET, cascade=1.0, cascade_ms_max=0, power_loss_fraction=1.0,
                                             torn_fraction=1.0), tick_ms=600_000)
    planner.start()
    planner.on_election("t-0", 2)
    sched.advance(1)
    assert calls == [(2, (), {})]


def test_a_controller_kill_the_planner_was_refused_brings_nobody_back(monkeypatch):
    """A crashed controller stays named until its session expires; a kill_controller the
    planner draws then is refused, and the restart belongs to a kill that happened: the
    dead controller comes back at its own crash's restart, not at a refused kill's
    (the hundred-and-forty-sixth review)."""
    refused: list = []
    monkeypatch.setattr(faults, "kill_controller", lambda w, *a, **k: refused.append(w.cluster.controller_id) and False)
    _world, _events, noted = _planned(monkeypatch, FaultRates(**{**_QUIET, "kill_controller": 60.0}))
    assert len(refused) > 20 and set(refused) == {1}
    assert not [b for _, kind, b, _ in noted if kind == "restart"]


@pytest.mark.parametrize("kind", ["disk_full", "cut_store"])
def test_a_refused_fault_leaves_the_one_in_place_to_end_on_its_own_timer(kind):
    """A chaos full disk (or store cut) drawn on a broker under one already is refused, and
    takes nothing from the one in place: that one still ends at its own timer, not never
    (the hundred-and-forty-sixth review)."""
    sched, world, events = _pause_world()
    world.disk_full = set()
    world.instrument_broker = lambda broker: None
    fault = getattr(faults, kind)
    assert fault(world, 2, 1000)
    sched.advance(500)
    assert not fault(world, 2, 5000)
    sched.advance(600)
    assert world.disk_full == set() and world.network.store_cut == set()
    end = {"disk_full": "disk_freed", "cut_store": "heal_store"}[kind]
    assert [(t, k, b) for t, k, b, _ in events] == [(0, kind, 2), (1000, end, 2)]


def test_a_fault_max_down_holds_back_takes_nothing_from_the_seed():
    """With max_down brokers down, a crash, a controlled shutdown and a controller kill are
    not drawn at all: their chances are not taken from the seed, however high their rates,
    so a broker going down does not shift the seed's later draws (the 184th review)."""
    sched, world, events = _stub_world()
    world.cluster.live_brokers = lambda: [1, 2]
    rates = FaultRates(**{**_QUIET, **dict.fromkeys(("crash", "controlled_shutdown", "kill_controller"), 600.0)},
                       max_down=1)
    planner = ChaosPlanner(world, rates, tick_ms=250)
    planner.start()
    sched.advance(40 * 250)
    planner.stop()
    expected = random.Random(1)
    for _ in range(40):
        expected.choice([1, 2])
    assert events == [] and world.rng.getstate() == expected.getstate()


def test_a_controller_kill_loses_what_the_controller_had_in_flight():
    """kill_controller is a host failure like the planner's crashes: the LeaderAndIsr or
    UpdateMetadata the controller had on the wire never arrives, as Kafka's controller
    failover assumes (the 184th review)."""
    sched, world, events = _pause_world()
    world.cluster.brokers[2].replica_manager = None
    world.cluster.controller_id = 2
    world.cluster.kill = lambda broker: setattr(world.cluster.brokers[broker], "alive", False)
    world.disk_full = set()
    got: list = []
    world.network.deliver(2, 1, "from the controller", got.append)
    world.network.deliver(3, 1, "from 3", got.append)
    assert faults.kill_controller(world)
    sched.advance(100)
    assert got == ["from 3"] and world.network.stats.dropped == 1
    assert [(kind, b, d.get("lose_in_flight")) for _, kind, b, d in events] == [
        ("kill_controller", 2, None), ("crash", 2, True)]


def test_a_partition_of_three_groups_cuts_every_pair_of_them_until_its_end():
    """A scripted partition may name more than two groups (a split into racks): each group
    is cut from every other one, the middle ones too, until the partition's end (the 184th
    review)."""
    sched, world, events = _stub_world()
    net = world.network
    assert faults.partition(world, [[3], [1], [2]], 1000)
    assert all(net.cut(a, b) for a, b in itertools.permutations((1, 2, 3), 2))
    sched.advance(1000)
    assert not net.partitioned and not any(net.cut(a, b) for a, b in itertools.permutations((1, 2, 3), 2))
    assert [(t, kind, d.get("groups")) for t, kind, _, d in events] == [
        (0, "partition", [[3], [1], [2]]), (1000, "heal", None)]


def test_a_broker_whose_shutdown_outlasts_its_drawn_restart_is_restarted_once_it_stops(monkeypatch):
    """The planner draws a shut-down broker's restart 2 to downtime_ms_max + 2 s after the
    shutdown began, but a shutdown can take longer (attempts controlled.shutdown.retry.backoff.ms
    apart, a controller out of reach). The restart then waits for the broker to stop, looking
    again each tick, instead of being refused while the broker still runs and leaving it down
    until the liveness phase (swarm seed 76: 22.8 s; the 184th review)."""
    sched, world, events = _stub_world()
    brokers = {b: SimpleNamespace(alive=True, shutting_down=False) for b in (1, 2, 3)}
    world.cluster.brokers = brokers
    world.cluster.live_brokers = lambda: [b for b, x in brokers.items() if x.alive]
    shut, back = [], []

    def shutdown(w, broker):
        brokers[broker].shutting_down = True
        shut.append((sched.now_ms(), broker))
        sched.call_later(9000, setattr, brokers[broker], "alive", False)  # stops 9 s later
        return True

    def restart(w, broker):
        if brokers[broker].alive:
            return False  # as faults.restart refuses a running broker
        brokers[broker] = SimpleNamespace(alive=True, shutting_down=False)
        back.append((sched.now_ms(), broker))
        return True

    monkeypatch.setattr(faults, "controlled_shutdown", shutdown)
    monkeypatch.setattr(faults, "restart", restart)
    rates = FaultRates(**{**_QUIET, "controlled_shutdown": 600.0}, downtime_ms_max=1000, max_down=1)
    planner = ChaosPlanner(world, rates, tick_ms=250)
    planner.start()
    sched.advance(250)  # one tick: a shutdown is certain at 2.5 expected a tick
    planner.stop()
    sched.advance(30_000)
    assert len(shut) == 1 and [b for _, b in back] == [b for _, b in shut]
    (t0, _), (t1, _) = shut[0], back[0]
    assert t0 + 9000 <= t1 < t0 + 9000 + 250
