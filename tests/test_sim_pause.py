"""A GC pause freezes the whole broker process: its own timers wait, then run late at resume.

What Kafka does after a stop-the-world pause longer than replica.lag.time.max.ms
(since KAFKA-7040/Kafka 2.5's Replica.isCaughtUp rule, which kreplica follows:
a follower is out of sync only when it is behind the leader's LEO *and* has not
caught up within the lag time): the isr-expiration task, overdue, runs as soon
as the JVM resumes -- before the request handlers have read the fetches waiting
in the sockets -- so a leader that had appended records its followers had not
fetched yet shrinks its ISR to itself; a leader whose followers held its whole
log keeps them.  Delayed produces whose timeout passed during the pause expire
the same way, at resume, with REQUEST_TIMED_OUT.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreplica import errors
from kreplica.protocol import ProducePartition, ProduceRequest, TopicPartition
from kreplica.records import encode_batch
from kreplica.runtime import SimScheduler
from kreplica.sim import faults, scenarios
from kreplica.sim.pausable_scheduler import PausableScheduler
from kreplica.sim.world import World

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# ---- the scheduler view alone -----------------------------------------------------------------

def test_unpaused_view_runs_exactly_as_the_shared_scheduler_would():
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    for i, (delay, on_view) in enumerate([(5, True), (5, False), (0, True), (3, False), (5, True)]):
        (view if on_view else shared).call_later(delay, lambda i=i: ran.append((i, shared.now_ms())))
    view.call_soon(ran.append, ("soon", 0))
    view.call_soon_threadsafe(ran.append, ("threadsafe", 0))

    def callback() -> None:  # a threadsafe call goes through the shared inbox, as on the shared one
        view.call_soon_threadsafe(ran.append, ("posted", 8))
        view.call_soon(ran.append, ("scheduled", 8))

    view.call_later(8, callback)
    assert view.now_ms() == 0 and view.rng is shared.rng
    shared.advance(10)
    assert ran == [(2, 0), ("soon", 0), ("threadsafe", 0), (3, 3), (0, 5), (1, 5), (4, 5),
                   ("scheduled", 8), ("posted", 8)]


def test_timers_due_during_a_pause_run_at_resume_in_due_order_and_see_the_late_time():
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    view.call_later(300, lambda: ran.append(("b", shared.now_ms())))
    view.call_later(100, lambda: ran.append(("a", shared.now_ms())))
    view.call_later(900, lambda: ran.append(("after", shared.now_ms())))
    shared.call_later(200, lambda: ran.append(("other process", shared.now_ms())))
    shared.advance(50)
    view.pause()
    view.call_soon_threadsafe(ran.append, ("threadsafe", -1))  # due at 50 (e.g. a store callback): held too
    shared.advance(450)  # now 500
    assert ran == [("other process", 200)] and view.held == 3 and view.paused
    assert view.resume() == 3 and view.held == 0
    shared.advance(0)
    assert ran[1:] == [("threadsafe", -1), ("a", 500), ("b", 500)]
    shared.advance(500)
    assert ran[-1] == ("after", 900)  # not due during the pause: runs on time


def test_a_timer_cancelled_during_the_pause_never_runs():
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    held = view.call_later(10, ran.append, "held then cancelled")
    before = view.call_later(30, ran.append, "cancelled before due")
    kept = view.call_later(20, ran.append, "kept")
    view.pause()
    shared.advance(25)
    held.cancel()
    before.cancel()
    assert view.held == 1
    view.resume()
    shared.advance(100)
    assert ran == ["kept"] and not kept.cancelled


def test_a_held_callback_cancelled_after_resume_but_before_it_runs_stays_cancelled():
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    t = view.call_later(10, ran.append, "x")
    view.pause()
    shared.advance(20)
    view.resume()
    t.cancel()  # the held callback is queued for the resume instant, not run yet
    shared.advance(0)
    assert ran == []


def test_callbacks_held_again_before_their_release_ran_keep_their_order():
    """A pause that begins after a resume released its held callbacks, but before all of
    them ran, holds the ones not yet run; the next resume runs them in their first order,
    not the ones held again behind those still queued (the eighty-ninth review), and each of
    them once: the resume that releases them again lets go of them."""
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    view.call_later(0, ran.append, 0)
    view.call_later(0, ran.append, 1)
    view.pause()
    shared.advance(1)
    view.call_later(0, ran.append, 2)  # due while paused, after both
    shared.advance(0)
    assert view.resume() == 3
    view.pause()
    shared.run_next(shared.now_ms())  # the first released callback, held again
    assert ran == [] and view.held == 1
    assert view.resume() == 1  # 1 and 2 are still queued from the first resume
    shared.advance(1000)
    assert ran == [0, 1, 2]
    view.pause()  # each ran once: a later pause holds nothing of theirs (the 222nd review)
    shared.advance(1000)
    assert view.held == 0 and view.resume() == 0
    shared.advance(1000)
    assert ran == [0, 1, 2]


def test_a_callback_held_while_an_earlier_release_is_still_queued_runs_behind_it():
    """A resume releases its held callbacks behind those an earlier resume released and
    that have not run yet: a pause and a resume in one instant, with a timer coming due
    between them, keep the order the callbacks came due (the 203rd review)."""
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    view.call_later(0, ran.append, 0)
    view.pause()
    shared.advance(1)  # 0 held
    view.call_later(0, ran.append, 1)  # due now, ahead of the release the resume queues
    assert view.resume() == 1
    view.pause()
    shared.run_next(shared.now_ms())  # 1 comes due and is held; 0 is still queued
    assert ran == [] and view.held == 1
    assert view.resume() == 1
    shared.advance(1000)
    assert ran == [0, 1]


def test_kill_drops_held_callbacks_and_everything_scheduled_later():
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    view.call_later(10, ran.append, "held")
    cancelled = view.call_later(20, ran.append, "held, then cancelled")
    view.call_later(100, ran.append, "later")
    view.pause()
    shared.advance(50)
    cancelled.cancel()  # would never have run: not among what the kill drops
    assert view.kill() == 1 and view.dead and not view.paused
    view.call_soon(ran.append, "after death")
    assert view.resume() == 0
    shared.advance(200)
    assert ran == [] and view.held == 0  # nothing held for a process that is gone


def test_kill_drops_the_callbacks_held_again_too():
    """A process killed while a pause holds callbacks a resume had released keeps none of
    them: the kill counts them once, and a dead process holds nothing afterwards."""
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    view.call_later(0, ran.append, 0)
    view.pause()
    shared.advance(1)
    assert view.resume() == 1
    view.pause()
    shared.run_next(shared.now_ms())  # released, then held again by the second pause
    assert view.held == 1
    assert view.kill() == 1 and view.held == 0 and view.kill() == 0
    shared.advance(100)
    assert ran == []


# ---- whole worlds --------------------------------------------------------------------------------

def _world(seed: int = 1) -> World:
    """slow-follower's cluster (replica.lag.time.max.ms 3000) without its steps or workload;
    sessions outlive the pauses here, so no election interferes."""
    sc = scenarios.load("slow-follower").with_config(**{"zookeeper.session.timeout.ms": 10_000})
    world = World(replace(sc, steps=()), seed)
    world._build()
    world._step_until(world.now_ms() + 1000)  # followers fetching, caught up
    return world


def _produce(world: World, broker: int, tp: TopicPartition, acks: int, timeout_ms: int, answers: list) -> None:
    """A produce handled by the leader right now (no network in between)."""
    batch = encode_batch([b"just-before-the-pause"], timestamp_ms=world.now_ms())
    rm = world.cluster.brokers[broker].replica_manager
    rm.handle_produce(ProduceRequest(acks, timeout_ms, (ProducePartition(tp, batch),)),
                      lambda r: answers.append((world.now_ms(), r.partitions[0].error_code)))


def _isr_changes(world: World) -> list:
    changes: list = []
    world.cluster.observers.append(
        lambda e: e.kind == "isr_changed" and changes.append((e.time_ms, str(e.details["tp"]), tuple(e.details["isr"]))))
    return changes


def test_a_paused_leader_shrinks_no_isr_during_the_pause_and_its_overdue_check_shrinks_at_resume():
    world = _world()
    try:
        lagging, caught_up = TopicPartition("t", 0), TopicPartition("t", 2)  # both led by broker 1
        leader = world.cluster.leader_for("t", 0)
        assert leader == world.cluster.leader_for("t", 2) == 1
        rm = world.cluster.brokers[leader].replica_manager
        p0, p2 = rm.partitions[lagging], rm.partitions[caught_up]
        assert sorted(p0.isr) == sorted(p2.isr) == [1, 2, 3]
        changes = _isr_changes(world)
        answers: list = []
        _produce(world, leader, lagging, 1, 3000, answers)  # appended; the followers never see it before the pause
        t0 = world.now_ms()
        assert faults.pause(world, leader, 4000)
        world._step_until(t0 + 3999)  # 1000 ms past replica.lag.time.max.ms (3000)
        assert changes == [] and sorted(p0.isr) == [1, 2, 3] and not p0.isr_state.is_inflight
        assert world.processes[leader].held >= 1  # the overdue ISR check, at least
        world._step_until(t0 + 4000 + 3000)
        # The held check ran at the resume instant, before the followers' waiting fetches were read.
        assert changes[0] == (t0 + 4000, str(lagging), (1,))
        assert [c for c in changes if c[1] == str(caught_up)] == []  # LEO equal: never out of sync
        # Then the followers' fetches arrive and catch up: back in the ISR.
        assert sorted(changes[-1][2]) == [1, 2, 3] and sorted(p0.isr) == [1, 2, 3]
        assert world.checker.violation is None
    finally:
        world.close()


def test_delayed_produce_timeouts_on_a_paused_broker_wait_for_the_resume_and_expire_then():
    world = _world()
    try:
        tp = TopicPartition("t", 0)
        leader = world.cluster.leader_for("t", 0)
        answers: list = []
        _produce(world, leader, tp, -1, 1000, answers)  # acks=all: waits for followers the pause keeps away
        t0 = world.now_ms()
        assert faults.pause(world, leader, 3000)
        world._step_until(t0 + 2500)  # 1500 ms past the produce's timeout
        assert answers == [] and world.now_ms() >= t0 + 2500
        world._step_until(t0 + 3500)
        # The overdue expiry runs at resume -- before the followers' held fetches could complete it.
        assert answers == [(t0 + 3000, errors.RequestTimedOut.code)]
    finally:
        world.close()


def test_a_crash_during_a_pause_drops_what_the_process_held_and_the_restart_runs_fresh():
    world = _world()
    try:
        victim = 2
        broker = world.cluster.brokers[victim]
        ran: list = []
        t0 = world.now_ms()
        assert faults.pause(world, victim, 4000)
        view = world.processes[victim]
        broker.scheduler.call_later(500, ran.append, "due during the pause")
        world._step_until(t0 + 2000)
        assert ran == [] and view.held >= 2
        assert faults.crash(world, victim)
        assert view.dead and view.held == 0 and not world.network.is_paused(victim)
        world._step_until(t0 + 6000)  # past the pause's end: nothing of the dead process runs
        assert ran == []
        assert [e for e in world.history.events if e.kind == "resume"] == []
        assert faults.restart(world, victim)
        fresh = world.processes[victim]
        assert fresh is not view and not fresh.paused and not fresh.dead
        assert world.cluster.brokers[victim].scheduler is fresh
        # It registers again once the crashed session expires (10 s), then catches up.
        world._step_until(t0 + 20_000)
        assert world.checker.violation is None
        assert victim in world.cluster.live_brokers()
        assert sorted(world.cluster.describe("t").partitions[0].isr) == [1, 2, 3]
    finally:
        world.close()


def test_a_pauses_end_leaves_the_next_incarnations_pause_alone():
    """Crashed and restarted during a pause, then paused again: the first pause's timer must
    not end the second (the process it paused is gone)."""
    world = _world()
    try:
        victim = 2
        t0 = world.now_ms()
        assert faults.pause(world, victim, 3000)
        world._step_until(t0 + 500)
        assert faults.crash(world, victim) and faults.restart(world, victim)
        world._step_until(t0 + 1000)
        assert faults.pause(world, victim, 5000)  # the new process, until t0 + 6000
        world._step_until(t0 + 4000)  # past the first pause's end
        assert world.network.is_paused(victim) and world.processes[victim].paused
        world._step_until(t0 + 6500)
        assert not world.network.is_paused(victim) and not world.processes[victim].paused
        assert [e.time_ms for e in world.history.events if e.kind == "resume" and e.broker == victim] == [t0 + 6000]
    finally:
        world.close()

def test_same_seed_same_history_with_pauses():
    sc = scenarios.load("random-chaos").with_config(**{"replica.truncation.strategy": "leader-epoch"})
    sc = replace(sc, until_ms=6000, chaos=replace(sc.chaos, pause=60.0, crash=2.0))
    worlds = [World(sc, 3) for _ in range(2)]
    a, b = (w.run() for w in worlds)
    assert a.history_hash == b.history_hash and a.events == b.events and a.ok
    resumes = [e for e in worlds[0].history.events if e.kind == "resume"]
    assert len(resumes) >= 3 and sum(e.data["held"] for e in resumes) > 0


# ---- what pauses exposed: a deposed controller's request reaching a restarted broker ---------------
# gc-pause-chaos seeds 437 and 937 (--until 12000, leader-epoch): a controller paused past its session
# expiry held LeaderAndIsr requests addressed to a broker that crashed and restarted meanwhile; the new
# incarnation, knowing no controller epoch yet, applied them and led an old epoch on an empty log
# (replica divergence; an acked write lost).  Kafka 2.2 closed this with KIP-380's broker epoch.

def _restarted(world: World, victim: int) -> int:
    """Crash and restart ``victim``; returns the session id (broker epoch) of its first incarnation."""
    old_epoch = world.cluster.brokers[victim].session.session_id
    assert faults.crash(world, victim) and faults.restart(world, victim)
    # It registers again once the crashed session expires (10 s), then catches up.
    world._step_until(world.now_ms() + 15_000)
    assert world.checker.violation is None
    return old_epoch


def test_a_controller_request_meant_for_a_broker_s_previous_incarnation_is_refused():
    from kreplica.protocol import LeaderAndIsrPartitionState, LeaderAndIsrRequest

    world = _world()
    try:
        tp = TopicPartition("t", 0)
        victim = 3
        old_epoch = _restarted(world, victim)
        broker = world.cluster.brokers[victim]
        p = broker.replica_manager.partitions[tp]
        assert not p.is_leader and broker.session.session_id != old_epoch
        cid = world.cluster.controller_id
        # Everything but the broker epoch would be accepted: the current controller epoch, a newer leader epoch.
        state = LeaderAndIsrPartitionState(tp, broker.replica_manager.controller_epoch, victim, p.leader_epoch + 1,
                                           (victim,), p.zk_version + 1, tuple(p.assigned_replicas))
        stale = LeaderAndIsrRequest(cid, broker.replica_manager.controller_epoch, (state,), broker_epoch=old_epoch)
        answers: list = []
        world.network.send(cid, victim, stale, answers.append)
        world._step_until(world.now_ms() + 50)
        assert [a.error_code for a in answers] == [errors.StaleBrokerEpoch.code]
        assert not p.is_leader
        current = LeaderAndIsrRequest(cid, stale.controller_epoch, (state,), broker_epoch=broker.session.session_id)
        world.network.send(cid, victim, current, answers.append)
        world._step_until(world.now_ms() + 50)
        assert answers[-1].error_code == errors.NONE and p.is_leader  # the fence, and only it, refused the first
    finally:
        world.close()


def test_the_controller_addresses_each_broker_by_its_current_registration():
    from kreplica.protocol import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

    world = _world()
    try:
        seen: list = []
        hook = world.network.around_arrival

        def around(src, dst, message, arrive):
            if isinstance(message, (LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest)):
                b = world.cluster.brokers[dst]
                seen.append((type(message).__name__, message.broker_epoch, b.session.session_id if b.alive else None))
            hook(src, dst, message, arrive)

        world.network.around_arrival = around
        _restarted(world, 2)
        assert {name for name, _, _ in seen} >= {"LeaderAndIsrRequest", "UpdateMetadataRequest"}
        assert all(epoch == current for _, epoch, current in seen if current is not None)
    finally:
        world.close()


def test_a_late_stop_replica_answer_from_a_gone_registration_does_not_fail_the_deletion():
    """gc-pause-chaos 89, random-chaos 477: StopReplica(delete) held for a paused broker whose session
    expired reached its next registration and was refused (STALE_BROKER_EPOCH); that answer failed the
    replica's deletion after the new request had already been sent, and the topic deletion hung."""
    from types import SimpleNamespace

    from kreplica.controller.request_batch import _stop_replica_handler
    from kreplica.protocol import StopReplicaResponse

    tp = TopicPartition("gone", 0)
    ctx = SimpleNamespace(broker_epochs={1: 5})
    results: list = []
    old = _stop_replica_handler(1, {tp: lambda replica, code: results.append(("old", code))}, ctx, 5)
    new = _stop_replica_handler(1, {tp: lambda replica, code: results.append(("new", code))}, ctx, 8)
    ctx.broker_epochs[1] = 8  # the broker re-registered: the controller's channel to session 5 is gone
    old(StopReplicaResponse(errors.StaleBrokerEpoch.code))
    new(StopReplicaResponse(errors.NONE))
    assert results == [("new", errors.NONE)]


def test_a_controlled_shutdown_whose_answer_died_with_the_controller_retries_and_finishes():
    """random-chaos 230: the controller crashed with its ControlledShutdown answer in flight; the broker
    waited for it forever (alive, shutting down, out of every ISR) and the cluster never converged."""
    from kreplica.protocol import ControlledShutdownRequest

    sc = scenarios.load("slow-follower").with_config(**{
        "zookeeper.session.timeout.ms": 3000, "controller.socket.timeout.ms": 2000,
        "controlled.shutdown.retry.backoff.ms": 200})
    world = World(replace(sc, steps=()), 1)
    try:
        world._build()
        world._step_until(world.now_ms() + 1000)
        cid = world.cluster.controller_id
        victim = next(b for b in sorted(world.cluster.brokers) if b != cid)
        hook = world.network.around_arrival

        def around(src, dst, message, arrive):
            hook(src, dst, message, arrive)
            if isinstance(message, ControlledShutdownRequest) and dst == cid and world.cluster.brokers[cid].alive:
                faults.crash(world, cid)  # its answer was sent, not yet delivered: lost with the host

        world.network.around_arrival = around
        t0 = world.now_ms()
        assert faults.controlled_shutdown(world, victim)
        world._step_until(t0 + 20_000, lambda: not world.cluster.brokers[victim].alive)
        done = [e for e in world.history.events if e.kind == "controlled_shutdown_done"]
        assert done and not world.cluster.brokers[victim].alive
        assert done[0].time_ms - t0 >= 2000  # not before the first attempt timed out
        assert world.checker.violation is None
    finally:
        world.close()


# ---- property: a process's timers, through pauses, cancels and a crash -------------------------
_sop = st.one_of(
    st.tuples(st.just("schedule"), st.integers(0, 40)),
    st.tuples(st.just("cancel"), st.integers(0, 30)),
    st.tuples(st.just("pause"),),
    st.tuples(st.just("resume"),),
    st.tuples(st.just("advance"), st.integers(0, 25)),
    st.tuples(st.just("step"),),
    st.tuples(st.just("kill"),),
)


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(_sop, max_size=60))
def test_a_process_runs_each_live_timer_once_never_early_never_paused_never_after_death(ops):
    """PausableScheduler's promise (module docstring) under any mix of pauses, cancels
    and a crash: a timer runs at most once, never before it is due, never while its
    process is paused or after it died, never once cancelled; every other one runs."""
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    timers, due, ran, cancelled, at = [], [], [], set(), {}

    def fire(i):
        assert not view.paused and not view.dead
        assert shared.now_ms() >= due[i]
        ran.append(i)
        at[i] = shared.now_ms()

    for op in ops:
        if op[0] == "schedule" and not view.dead:
            due.append(shared.now_ms() + op[1])
            timers.append(view.call_later(op[1], fire, len(timers)))
        elif op[0] == "cancel" and timers:
            i = op[1] % len(timers)
            if i not in ran:
                cancelled.add(i)
            timers[i].cancel()
        elif op[0] == "pause":
            view.pause()
        elif op[0] == "resume":
            view.resume()
        elif op[0] == "advance":
            shared.advance(op[1])
        elif op[0] == "step":
            shared.run_next(shared.now_ms())
        elif op[0] == "kill":
            view.kill()
    view.resume()
    shared.advance(1000)
    assert len(ran) == len(set(ran))
    assert not cancelled & set(ran)
    if not view.dead:
        assert set(ran) == set(range(len(timers))) - cancelled
    # What a resume releases runs in the order it came due. (A timer due at the resume
    # instant itself may run before or after them: the process's threads race there.)
    for now in set(at.values()):
        late = [i for i in ran if at[i] == now and due[i] < now]
        assert late == sorted(late, key=lambda i: (due[i], i))


def test_resume_counts_only_the_held_callbacks_it_releases():
    """The count a resume returns (the history's ``resume`` event records it) leaves out a
    held callback cancelled during the pause: it never runs."""
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran = []
    cancelled = view.call_later(10, ran.append, "cancelled")
    view.call_later(20, ran.append, "kept")
    view.pause()
    shared.advance(30)
    cancelled.cancel()
    assert view.resume() == 1
    shared.advance(0)
    assert ran == ["kept"]



def _due_during_a_pause(n: int):
    """A view whose ``n`` callbacks, due at 0, came due during a pause still in place."""
    shared = SimScheduler(1)
    view = PausableScheduler(shared)
    ran: list = []
    timers = [view.call_later(0, ran.append, i) for i in range(n)]
    view.pause()
    shared.advance(1)
    return shared, view, ran, timers


def test_several_callbacks_held_again_go_back_in_their_first_order_and_only_live_ones_count():
    """Callbacks a pause holds again before their release ran go back ahead of those still
    queued, in the order they first came due, and the next resume counts (and runs) only
    those not cancelled since (the hundred-and-eighth review)."""
    shared, view, ran, timers = _due_during_a_pause(5)
    assert view.resume() == 5
    view.pause()
    for _ in range(3):
        shared.run_next(shared.now_ms())  # 0, 1 and 2 come up and are held again
    assert ran == [] and view.held == 3
    timers[1].cancel()
    assert view.held == 2
    assert view.resume() == 2  # 3 and 4 are still queued from the first resume
    shared.advance(1000)
    assert ran == [0, 2, 3, 4]


def test_a_process_killed_before_its_released_callbacks_ran_holds_none_of_them():
    """A crash right after a resume, before the callbacks it released ran: they never run,
    and the dead process keeps none of them held (nothing for another kill to count)."""
    shared, view, ran, _timers = _due_during_a_pause(2)
    assert view.resume() == 2
    assert view.kill() == 0  # released already, not held
    shared.advance(1000)
    assert ran == [] and view.held == 0 and view.kill() == 0
