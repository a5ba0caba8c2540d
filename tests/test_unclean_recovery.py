"""A broker back from an unclean shutdown must not resume leadership at its old leader epoch.

The gap KIP-966 closes: a leader that was also the controller loses power while
its only other ISR member is cut off; no controller processes its death (its own
new controller's failover finds it registered again and leading), so it would
lead its old epoch again with a log that lost its unflushed tail, and two
histories would share one (partition, epoch).  The registration now says the
broker recovered uncleanly (``unclean_shutdown_controller_epoch``) and the
controller elects its stale leaderships again (always a new epoch) before telling
it anything, once.
"""
from __future__ import annotations

import pytest

from controller_harness import ControllerCluster
from kreplica import errors
from kreplica.broker import Broker
from kreplica.cluster import Cluster
from kreplica.meta import layout
from kreplica.controller import leader_selectors
from kreplica.protocol import LeaderAndIsr, LeaderAndIsrRequest, TopicPartition
from kreplica.sim import scenarios
from kreplica.sim.checker import Invariant
from kreplica.sim.world import World

T0 = TopicPartition("t", 0)


# -- the simulator reproduction (scenario leader-power-loss-alone) -------------------------------

def _run(strategy: str, seed: int = 1) -> tuple[World, object]:
    sc = scenarios.load("leader-power-loss-alone").with_config(**{"replica.truncation.strategy": strategy})
    world = World(sc, seed)
    return world, world.run()


def _elections(world: World) -> list[tuple[int, int, int]]:
    return [(e.time_ms, e.broker, e.data["epoch"]) for e in world.history.events if e.kind == "election"]


def _crash_time(world: World) -> int:
    return next(e.time_ms for e in world.history.events if e.kind == "crash")


@pytest.mark.parametrize("strategy", ["leader-epoch", "high-watermark"])
def test_without_the_registration_flag_the_old_epoch_is_resumed_and_an_acked_write_is_lost(monkeypatch, strategy):
    """The anomaly itself, on the code as it was: a registration that does not say
    'unclean' (what every broker registered before) lets the power-lost leader resume
    epoch 0 over its shorter log; the follower that kept the old epoch-0 history would
    diverge, and the checker stops the run as soon as the leader's epoch-0 data differs."""
    register = Broker._register

    def register_as_before(self, zk):
        if self.replica_manager is not None:
            self.replica_manager.recovered_uncleanly = False
        return register(self, zk)

    monkeypatch.setattr(Broker, "_register", register_as_before)
    world, result = _run(strategy)
    # The checker gives a resumed old epoch no excuse: broker 1's new epoch-0 data sits
    # where the committed epoch-0 history was, so an acked write is gone from the leader.
    assert result.violation is not None
    assert result.violation.invariant is Invariant.ACKED_WRITE_LOST
    assert result.violation.tp == "t-0" and result.violation.broker == 1
    # Nobody was elected after the crash: broker 1 led epoch 0 before and after it.
    assert [(b, e) for _t, b, e in _elections(world)] == [(1, 0)]


@pytest.mark.parametrize("strategy", ["leader-epoch", "high-watermark"])
def test_with_the_flag_a_new_epoch_is_elected_and_nothing_diverges(strategy):
    world, result = _run(strategy)
    assert result.violation is None, result.violation.describe()
    assert result.converged
    after = [(b, e) for t, b, e in _elections(world) if t > _crash_time(world)]
    # The follower that kept the committed history leads a new epoch; nothing acked is lost.
    assert after and after[0][1] > 0 and after[0][0] == 2
    assert result.losses == []


# -- the selector ---------------------------------------------------------------------------------

def test_after_unclean_restart_prefers_clean_members_then_the_leader_and_is_never_unclean():
    current = LeaderAndIsr(2, 5, (2, 1, 3), 7, 1)
    pick = lambda live, unclean: leader_selectors.after_unclean_restart(  # noqa: E731
        [1, 2, 3], current, frozenset(live), frozenset(unclean)).leader_and_isr
    assert pick({1, 2, 3}, {2}) == LeaderAndIsr(1, 6, (2, 1, 3), 7, 1)   # a clean member, new epoch
    assert pick({1, 2, 3}, {1, 2, 3}).leader == 2                         # all suspect: the leader
    assert pick({1, 2}, {1, 2}) == LeaderAndIsr(2, 6, (2, 1), 7, 1)       # dead members leave the ISR
    assert pick({1, 3}, {1, 2}).leader == 3
    with pytest.raises(errors.NoReplicaOnline):                           # never an unclean election
        leader_selectors.after_unclean_restart([1, 2, 3], LeaderAndIsr(2, 5, (2,), 7, 1),
                                               frozenset({1, 3}), frozenset({2}))


# -- the controller, in the controller harness -----------------------------------------------------

def _leader_and_isr_to(c: ControllerCluster, broker: int, since: int) -> list[tuple[int, int, int]]:
    """(leader, leader epoch, controller epoch) of every LeaderAndIsr for t-0 sent to ``broker``."""
    return [(ps.leader, ps.leader_epoch, s.request.controller_epoch) for s in c.channel.sent[since:]
            if s.broker_id == broker and isinstance(s.request, LeaderAndIsrRequest)
            for ps in s.request.partition_states if ps.tp == T0]


def _restart_unseen(c: ControllerCluster, broker: int, *, unclean: bool) -> None:
    """``broker`` restarts while the controller cannot see it happen, and the controller
    then dies: the next controller's failover is the first to read the new registration."""
    old = c.controller.broker_id
    c.sessions[old].set_reachable(False)
    c.stop(broker)
    c.start(broker, unclean_shutdown=unclean)
    c.kill(old)


def _failover_cluster() -> ControllerCluster:
    c = ControllerCluster([1, 2, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [1, 2]})
    assert c.controller.broker_id == 9
    return c


def test_failover_with_an_unclean_registration_moves_leadership_to_a_new_epoch():
    c = _failover_cluster()
    before = c.state("t", 0)
    assert before.leader == 1
    mark = len(c.channel.sent)
    _restart_unseen(c, 1, unclean=True)
    assert c.controller.broker_id == 8
    assert c.admin.get_broker(1).unclean_shutdown_controller_epoch == 1
    after = c.state("t", 0)
    # Elected again before 1 hears of it: 2 (live, in the ISR) leads a new epoch; 1 follows.
    assert (after.leader, after.controller_epoch) == (2, c.controller.epoch)
    assert after.leader_epoch > before.leader_epoch
    sent = _leader_and_isr_to(c, 1, mark)
    assert sent and all(leader != 1 for leader, _e, _ce in sent)


def test_failover_takes_an_uncleanly_restarted_follower_out_of_the_isr_beside_a_clean_member():
    """1 follows 2 and lost power: its unflushed tail may be gone while the ISR still
    counts it. The failover that first reads its registration takes it out of the ISR
    (a new leader epoch) and sends it the state as a follower, so it re-joins only after
    fetching again; 2 keeps leading."""
    c = ControllerCluster([1, 2, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [2, 1]})
    before = c.state("t", 0)
    assert (before.leader, before.isr) == (2, (2, 1))
    mark = len(c.channel.sent)
    _restart_unseen(c, 1, unclean=True)
    after = c.state("t", 0)
    assert (after.leader, after.isr) == (2, (2,))
    assert after.leader_epoch == before.leader_epoch + 1
    assert (2, after.leader_epoch) in {(leader, e) for leader, e, _ce in _leader_and_isr_to(c, 1, mark)}


def test_failover_takes_a_former_leader_back_from_an_unclean_shutdown_out_of_the_isr_too():
    c = _failover_cluster()                          # t-0 on [1, 2]: 1 leads
    _restart_unseen(c, 1, unclean=True)
    after = c.state("t", 0)
    assert (after.leader, after.isr) == (2, (2,))


def test_failover_keeps_a_cleanly_restarted_follower_in_the_isr():
    c = ControllerCluster([1, 2, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [2, 1]})
    before = c.state("t", 0)
    _restart_unseen(c, 1, unclean=False)
    after = c.state("t", 0)
    assert (after.leader, after.leader_epoch, after.isr) == (2, before.leader_epoch, (2, 1))


def test_failover_with_an_unclean_registration_of_the_only_isr_member_reelects_it_at_a_new_epoch():
    c = _failover_cluster()
    c.leader_sets_isr(T0, [1])                       # 2 fell out of sync: 1 is electable alone
    before = c.state("t", 0)
    mark = len(c.channel.sent)
    _restart_unseen(c, 1, unclean=True)
    after = c.state("t", 0)
    assert after.leader == 1 and after.leader_epoch > before.leader_epoch
    # 1 is never told to lead the epoch it led before its crash.
    led = [(e, ce) for leader, e, ce in _leader_and_isr_to(c, 1, mark) if leader == 1]
    assert led and all(e > before.leader_epoch for e, _ce in led)


def test_a_restarted_follower_stays_electable_where_the_leader_died_too():
    """2 crashed (its logs intact as far as anyone can tell), 3 died too, and the next
    controller finds both at once: 2 gets a new epoch where it led, and stays in the
    ISR where it followed 3, so it is elected there -- failing it out of that ISR first
    (a seen bounce) would leave only the dead 3 electable."""
    c = ControllerCluster([2, 3, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [3, 2], 1: [2, 3]})
    led = c.state("t", 1)
    c.sessions[9].set_reachable(False)
    c.kill(3, wait_expiry=False)
    c.stop(2)
    c.start(2, unclean_shutdown=True)
    c.kill(9)
    assert c.wait_for(lambda: 3 not in c.admin.get_live_broker_ids(), 4 * c.session_timeout_ms)
    c.settle()
    followed, reled = c.state("t", 0), c.state("t", 1)
    assert (followed.leader, followed.isr) == (2, (2,))
    assert (reled.leader, reled.isr) == (2, (2,)) and reled.leader_epoch > led.leader_epoch


def test_an_unclean_registration_is_handled_once_across_failovers():
    c = _failover_cluster()
    _restart_unseen(c, 1, unclean=True)
    handled = c.state("t", 0)
    mark = len(c.channel.sent)
    c.kill(8)                                        # another failover, same registration
    assert c.controller.broker_id == 7
    again = c.state("t", 0)
    assert (again.leader, again.leader_epoch, again.zk_version) == (
        handled.leader, handled.leader_epoch, handled.zk_version)
    assert all(e == handled.leader_epoch for _l, e, _ce in _leader_and_isr_to(c, 1, mark))


def test_a_clean_restart_seen_first_at_failover_keeps_the_leader_epoch():
    c = _failover_cluster()
    before = c.state("t", 0)
    mark = len(c.channel.sent)
    _restart_unseen(c, 1, unclean=False)
    assert c.admin.get_broker(1).unclean_shutdown_controller_epoch is None
    after = c.state("t", 0)
    assert (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch)
    assert {(leader, e) for leader, e, _ce in _leader_and_isr_to(c, 1, mark)} == {(1, before.leader_epoch)}


def test_a_leadership_granted_after_the_unclean_registration_is_not_revoked():
    """A registration whose controller epoch is older than the state's: the leadership
    was assigned after the broker came back (by a controller that knew), so a failover
    leaves it alone."""
    c = _failover_cluster()
    _restart_unseen(c, 1, unclean=True)              # handled by 8: 2 leads, 1 follows
    c.leader_sets_isr(T0, [2, 1])                    # 1 caught up with 2
    c.controller.elect_preferred_leaders([T0])       # 8 makes 1 leader again, under epoch 2
    granted = c.state("t", 0)
    assert granted.leader == 1 and granted.controller_epoch == 2
    c.kill(8)
    kept = c.state("t", 0)
    assert (kept.leader, kept.leader_epoch) == (1, granted.leader_epoch)


def test_a_controller_in_office_handles_an_unclean_bounce_as_before():
    """The bounce seen by the controller in office (new session, same id) was already
    failure then startup; the flag changes nothing there."""
    c = _failover_cluster()
    before = c.state("t", 0)
    c.stop(1)
    c.start(1, unclean_shutdown=True)
    after = c.state("t", 0)
    assert after.leader == 2 and after.leader_epoch == before.leader_epoch + 1


def test_a_bounce_handled_by_the_controller_in_office_is_not_handled_again():
    """The controller in office when the broker registered handles the bounce, records
    it handled, and re-grants it leadership under its own epoch (which equals the
    registration's); the next controllers leave that leadership alone."""
    c = _failover_cluster()
    c.stop(1)
    c.start(1, unclean_shutdown=True)                # 9 sees the bounce: 2 leads
    assert c.admin.get_unclean_shutdowns_handled([1]) == {1: c.admin.get_broker_epoch(1)}
    c.leader_sets_isr(T0, [2, 1])
    c.controller.elect_preferred_leaders([T0])       # 9 makes 1 leader again, under epoch 1
    granted = c.state("t", 0)
    assert (granted.leader, granted.controller_epoch) == (1, 1)
    c.kill(9)
    assert c.controller.broker_id == 8
    assert c.state("t", 0) == granted
    c.kill(8)
    assert c.state("t", 0) == granted


def test_a_follower_that_rejoined_the_isr_after_a_handled_bounce_keeps_its_place_at_failover():
    """gc-pause-chaos swarm seed 358: 1 follows 2, restarts uncleanly, and the controller
    in office (9) sees the bounce: 1 leaves the ISR and, once it has fetched again, 2
    adds it back -- a write that carries 2's leadership's controller epoch, 9's, which
    is also the one 1 registered with.  The next controller used to read that ISR as
    pre-crash and take 1 out again; the handled-restart record tells it otherwise."""
    c = ControllerCluster([1, 2, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [2, 1]})
    c.stop(1)
    c.start(1, unclean_shutdown=True)
    assert c.state("t", 0).isr == (2,)
    rejoined = c.leader_sets_isr(T0, [2, 1])
    assert rejoined.controller_epoch == c.admin.get_broker(1).unclean_shutdown_controller_epoch
    c.kill(9)
    assert c.controller.broker_id == 8
    after = c.state("t", 0)
    assert (after.leader, after.leader_epoch, after.isr) == (2, rejoined.leader_epoch, (2, 1))


def test_a_record_of_an_earlier_restart_does_not_cover_the_next_one():
    """The record names the registration (broker epoch) it vouches for: after another
    unclean restart, unseen, the next failover takes the follower out as before."""
    c = ControllerCluster([1, 2, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [2, 1]})
    c.stop(1)
    c.start(1, unclean_shutdown=True)                # seen and recorded by 9
    c.leader_sets_isr(T0, [2, 1])
    recorded = c.admin.get_unclean_shutdowns_handled([1])[1]
    _restart_unseen(c, 1, unclean=True)              # again, and 9 dies unaware
    assert c.admin.get_broker_epoch(1) != recorded
    after = c.state("t", 0)
    assert (after.leader, after.isr) == (2, (2,))
    assert c.admin.get_unclean_shutdowns_handled([1]) == {1: c.admin.get_broker_epoch(1)}


def test_a_clean_restart_leaves_no_record():
    c = _failover_cluster()
    c.stop(1)
    c.start(1, unclean_shutdown=False)
    _restart_unseen(c, 2, unclean=False)
    assert c.admin.get_unclean_shutdowns_handled([1, 2]) == {}


# -- the broker: its registration says how it last shut down -----------------------------------

def test_broker_registration_says_whether_its_logs_recovered_uncleanly(tmp_path):
    cluster = Cluster.embedded(brokers=[1, 2, 3], data_dir=tmp_path, seed=3,
                               config={"zookeeper.session.timeout.ms": 2000})
    try:
        cluster.create_topic("t", assignment={0: [1, 2]})
        assert cluster.zk.get_broker(1).unclean_shutdown_controller_epoch is None
        epoch = cluster.zk.get_controller_epoch()[0]
        cluster.kill(1)
        cluster.start(1)
        assert cluster.brokers[1].replica_manager.recovered_uncleanly
        registered = lambda: cluster.brokers[1].controller is not None  # noqa: E731
        assert cluster.run_until(registered, 10_000)     # after the old session expired
        assert cluster.zk.get_broker(1).unclean_shutdown_controller_epoch == epoch
        # A clean stop closes every open log with its marker (a log still unopened since
        # the crash keeps none: it was never recovered); the next registration is plain.
        assert cluster.run_until(lambda: T0 in cluster.brokers[1].replica_manager.partitions, 10_000)
        cluster.brokers[1].stop()
        cluster.start(1)
        assert not cluster.brokers[1].replica_manager.recovered_uncleanly
        assert cluster.run_until(registered, 10_000)
        assert cluster.zk.get_broker(1).unclean_shutdown_controller_epoch is None
    finally:
        cluster.close()


def test_registration_json_keeps_kafkas_fields_and_adds_one():
    plain = layout.encode_broker(1, "h", 9092, 5)
    flagged = layout.encode_broker(1, "h", 9092, 5, unclean_shutdown_controller_epoch=4)
    assert flagged.startswith(plain[:-1]) and flagged.endswith(b',"unclean_shutdown_controller_epoch":4}')
    assert layout.decode_broker(1, plain).unclean_shutdown_controller_epoch is None
    info = layout.decode_broker(1, flagged)
    assert (info.host, info.port, info.unclean_shutdown_controller_epoch) == ("h", 9092, 4)


def test_a_broker_back_from_a_crash_before_any_controller_was_elected_registers_with_epoch_minus_1(tmp_path):
    # The whole cluster comes back on a fresh store: the crashed broker reads no controller
    # epoch at all.  It must still say it recovered uncleanly (-1: every leadership it held
    # is older than any controller), not register as if its logs had been closed cleanly.
    config = {"zookeeper.session.timeout.ms": 2000}
    cluster = Cluster.embedded(brokers=[1, 2, 3], data_dir=tmp_path, seed=3, config=config)
    try:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.kill(1)
    finally:
        cluster.close()
    again = Cluster.embedded(brokers=[1, 2, 3], data_dir=tmp_path, seed=3, config=config)
    try:
        assert again.brokers[1].replica_manager.recovered_uncleanly
        assert again.zk.get_broker(1).unclean_shutdown_controller_epoch == -1
        assert again.zk.get_broker(2).unclean_shutdown_controller_epoch is None
    finally:
        again.close()
