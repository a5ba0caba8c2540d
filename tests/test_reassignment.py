"""Partition reassignment (seed 000's 12 steps), and a controller killed at every step.

OAR = {1,2,3}, RAR = {4,5,6}; brokers 7 and 8 are controller candidates only,
so killing a controller does not touch the partition's replicas.  The store's
(AR, leader, ISR) must go through seed 000's table and nothing else, whatever
step the first controller dies at.
"""
from __future__ import annotations

import pytest

from controller_harness import ControllerCluster, cluster_factory, make_cluster  # noqa: F401 (fixture)
from kreplica.controller import ReplicaState
from kreplica.controller.context import PartitionReplica
from kreplica.protocol import LeaderAndIsr, LeaderAndIsrRequest, StopReplicaRequest, TopicPartition, UpdateMetadataRequest

TP = TopicPartition("r", 0)
OAR, RAR = [1, 2, 3], [4, 5, 6]

# seed 000's table: AR, leader/ISR
TABLE = [
    ({1, 2, 3}, 1, {1, 2, 3}),                  # initial
    ({1, 2, 3, 4, 5, 6}, 1, {1, 2, 3}),         # step 2
    ({1, 2, 3, 4, 5, 6}, 1, {1, 2, 3, 4, 5, 6}),  # step 4
    ({1, 2, 3, 4, 5, 6}, 4, {1, 2, 3, 4, 5, 6}),  # step 7
    ({1, 2, 3, 4, 5, 6}, 4, {4, 5, 6}),         # step 8
    ({4, 5, 6}, 4, {4, 5, 6}),                  # step 10
]


class Crash(Exception):
    """The controller process dies here."""


class Story:
    def __init__(self, crash_at=None, make=None):
        brokers = [7, 8, 1, 2, 3, 4, 5, 6]
        self.c = make(brokers, candidates=[7, 8]) if make else ControllerCluster(brokers, candidates=[7, 8])
        self.c.create_topic("r", {0: OAR})
        self.pictures = [self.picture()]
        self.steps: list[tuple[int, int]] = []
        self.crash_at = crash_at
        for c in self.c.controllers.values():
            c.reassignment_step_hook = self.hook(c.broker_id)

    def picture(self):
        st = self.c.state(*TP)
        return set(self.c.assignment("r")[0]), st.leader, set(st.isr)

    def record(self):
        p = self.picture()
        if p != self.pictures[-1]:
            self.pictures.append(p)

    def hook(self, broker_id):
        def on_step(tp, step):
            assert tp == TP
            self.steps.append((broker_id, step))
            self.record()
            if broker_id == 7 and step == self.crash_at:
                raise Crash(step)
        return on_step

    def run(self, fn):
        """Run ``fn``; if the first controller crashes inside, kill it and let 8 take over."""
        try:
            fn()
        except Crash:
            self.c.kill(7)
            assert self.c.controller.broker_id == 8
            self.record()
            return True
        return False

    def start_reassignment(self):
        self.c.admin.create_partition_reassignment({TP: RAR})
        assert self.c.wait_for(lambda: len(self.steps) >= 3)

    def catch_up(self):
        """The leader adds the new replicas to the ISR (seed 000 step 4)."""
        self.c.leader_sets_isr(TP, [1, 2, 3, 4, 5, 6])
        self.record()
        assert self.c.wait_for(self.finished, 20_000)

    def finished(self):
        return self.c.admin.get_partition_reassignment() == {}


def test_reassignment_goes_through_seed000_table(make_cluster):
    s = Story(make=make_cluster)
    s.start_reassignment()
    assert [step for _, step in s.steps] == [1, 2, 3]
    assert s.c.controller.ctx.partitions_being_reassigned[TP].new_replicas == tuple(RAR)
    # step 2 forced a new leader epoch and told OAR + RAR, the leader included (it must
    # know AR = OAR + RAR to take the new replicas' fetches); step 3 started 4,5,6 as
    # followers of 1
    for b in OAR + RAR:
        lai = s.c.channel.requests(LeaderAndIsrRequest, b)
        assert any(ps.tp == TP and ps.leader == 1 and set(ps.replicas) == set(OAR + RAR)
                   for r in lai for ps in r.partition_states), b
    s.catch_up()
    assert [step for _, step in s.steps] == list(range(1, 13))
    assert s.pictures == TABLE
    assert s.c.assignment("r")[0] == RAR
    assert s.c.admin.get_partition_reassignment() == {}
    deleted = {(x.broker_id, p.delete) for x in s.c.channel.sent if isinstance(x.request, StopReplicaRequest)
               for p in x.request.partitions if p.tp == TP}
    assert {(b, True) for b in OAR} <= deleted
    ctrl = s.c.controller
    assert not ctrl.ctx.partitions_being_reassigned
    assert ctrl.rsm.state(PartitionReplica(TP, 1)) is ReplicaState.NON_EXISTENT
    assert ctrl.rsm.state(PartitionReplica(TP, 4)) is ReplicaState.ONLINE


def test_a_leader_that_stays_is_sent_the_new_assignment_with_a_new_epoch_at_step_7():
    """Seed 000 step 7: a leader in RAR stays, with its epoch bumped and AR = RAR sent to it,
    "this will prevent the leader from adding any replica in OAR - RAR back in the isr".
    Step 8 does not do it for step 7 when the old replica has already left the ISR: no ISR
    write, so no LeaderAndIsr, and the leader kept the removed replica in its replica set
    (a fetch of it still in flight would put it back in the ISR)."""
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2]})
    c.leader_sets_isr(tp, [1])                   # 2 fell behind; alive, out of the ISR
    c.admin.create_partition_reassignment({tp: [1, 3]})
    c.settle()
    widened = c.state("t", 0)
    c.channel.clear()
    c.leader_sets_isr(tp, [1, 3])                # 3 caught up: steps 4-12
    assert c.admin.get_partition_reassignment() == {}
    st = c.state("t", 0)
    assert (c.assignment("t")[0], st.leader, st.isr) == ([1, 3], 1, (1, 3))
    assert st.leader_epoch == widened.leader_epoch + 1
    told = [ps for r in c.channel.requests(LeaderAndIsrRequest, 1) for ps in r.partition_states if ps.tp == tp]
    assert told and (told[-1].replicas, told[-1].leader_epoch) == ((1, 3), st.leader_epoch)


@pytest.mark.parametrize("crash_at", [1, 2, 3, "waiting", 4, 5, 6, 7, 8, 9, 10, 11, 12])
def test_controller_failover_at_every_step_resumes(crash_at):
    s = Story(crash_at=None if crash_at == "waiting" else crash_at)
    crashed = s.run(s.start_reassignment)
    if crash_at == "waiting":
        s.c.kill(7)
        crashed = True
    if not crashed:
        crashed = s.run(s.catch_up)
    else:
        s.catch_up()
    assert crashed
    assert s.c.controller.broker_id == 8 and s.c.controller.epoch == 2
    st = s.c.state(*TP)
    assert (s.c.assignment("r")[0], st.leader, set(st.isr)) == (RAR, 4, set(RAR))
    assert s.c.admin.get_partition_reassignment() == {}
    assert not s.c.controller.ctx.partitions_being_reassigned
    assert s.pictures == TABLE
    # the resumed controller's own steps, after the crash
    resumed = [step for b, step in s.steps if b == 8]
    if crash_at in (10, 11, 12):
        assert resumed == []          # nothing left but clearing the admin path / metadata
    else:
        assert resumed[-1] == 12


def test_invalid_reassignments_are_dropped_from_the_admin_path():
    c = ControllerCluster([1, 2, 3, 4, 5])
    c.create_topic("r", {0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 2, 3], 3: [1, 2, 3], 4: [1, 2, 3]})
    c.kill(4)
    assert c.controller.shutdown_broker(5) == set()
    # a dead broker, AR unchanged, a broker named twice, no replica at all (Kafka's
    # reassigned selector finds none in sync, and the request is dropped), a broker in
    # controlled shutdown (not among Kafka 0.10's live brokers: about to go)
    c.admin.create_partition_reassignment({TP: [4, 1], TopicPartition("r", 1): [1, 2, 3],
                                           TopicPartition("r", 2): [3, 3, 1], TopicPartition("r", 3): [],
                                           TopicPartition("r", 4): [5, 1]})
    c.settle()
    assert c.admin.get_partition_reassignment() == {}
    assert c.assignment("r") == {p: [1, 2, 3] for p in range(5)}
    assert not c.controller.ctx.partitions_being_reassigned


def test_restarted_new_replica_gets_its_state_again():
    c = ControllerCluster([9, 1, 2, 3, 4], candidates=[9])
    c.create_topic("r", {0: [1, 2, 3]})
    c.admin.create_partition_reassignment({TP: [2, 3, 4]})
    c.settle()
    c.kill(4)
    c.channel.clear()
    c.start(4)
    lai = c.channel.requests(LeaderAndIsrRequest, 4)
    assert any(ps.tp == TP and set(ps.replicas) == {1, 2, 3, 4} for r in lai for ps in r.partition_states)
    c.leader_sets_isr(TP, [1, 2, 3, 4])
    assert c.assignment("r")[0] == [2, 3, 4]
    st = c.state(*TP)
    assert st.leader == 2 and set(st.isr) == {2, 3, 4}


@pytest.mark.zookeeper
@pytest.mark.parametrize("crash_at", ["waiting", 7])
def test_controller_failover_mid_reassignment_on_zookeeper(request, crash_at):
    make, cleanup = cluster_factory(request, "zookeeper")
    try:
        s = Story(crash_at=None if crash_at == "waiting" else crash_at, make=make)
        s.start_reassignment()
        if crash_at == "waiting":
            s.c.kill(7)
            s.catch_up()
        else:
            assert s.run(s.catch_up)
            assert s.c.wait_for(s.finished, 20_000)
            s.record()
        assert s.c.controller.broker_id == 8
        st = s.c.state(*TP)
        assert (s.c.assignment("r")[0], st.leader, set(st.isr)) == (RAR, 4, set(RAR))
        assert s.pictures == TABLE
    finally:
        cleanup()


def test_failover_keeps_a_started_reassignment_while_a_new_replica_is_down():
    s = Story()
    s.start_reassignment()
    s.c.kill(4, wait_expiry=False)
    s.c.kill(7)                              # the controller dies too
    assert s.c.controller.broker_id == 8
    assert s.c.admin.get_partition_reassignment() == {TP: RAR}   # still pending
    assert TP in s.c.controller.ctx.partitions_being_reassigned
    s.c.start(4)                             # onBrokerStartup continues it
    s.catch_up()
    st = s.c.state(*TP)
    assert (s.c.assignment("r")[0], st.leader, set(st.isr)) == (RAR, 4, set(RAR))
    assert s.pictures == TABLE


def test_failover_keeps_a_started_reassignment_onto_a_superset_while_the_new_replica_is_down():
    # RAR = [3, 1, 2] holds all of OAR = [1, 2]: past step 1 the widened AR [1, 2, 3] is RAR
    # as a set, which is still "AR already holds RAR" (`<=`, not `<`).  The next controller
    # resumes it while 3 is down; dropped, 3 never became the preferred replica.
    tp = TopicPartition("a", 0)
    c = ControllerCluster([7, 8, 1, 2, 3], candidates=[7, 8])
    c.create_topic("a", {0: [1, 2]})
    c.admin.create_partition_reassignment({tp: [3, 1, 2]})
    c.settle()
    assert c.assignment("a") == {0: [1, 2, 3]}       # steps 1-3 done, 3 not in the ISR yet
    c.kill(3, wait_expiry=False)
    c.kill(7)
    assert c.controller.broker_id == 8
    assert c.admin.get_partition_reassignment() == {tp: [3, 1, 2]}
    assert tp in c.controller.ctx.partitions_being_reassigned
    c.start(3)
    c.leader_sets_isr(tp, [1, 2, 3])
    assert c.wait_for(lambda: c.admin.get_partition_reassignment() == {})
    st = c.state("a", 0)
    assert (c.assignment("a")[0], st.leader, set(st.isr)) == ([3, 1, 2], 1, {1, 2, 3})


def test_a_step_7_election_that_fails_stops_the_reassignment_before_the_old_replicas_go():
    # OAR [1, 2], RAR [3, 4].  Between step 4's read (ISR [1, 2, 3, 4]) and step 7's write the
    # leader shrinks the ISR to [1, 2] (its notification not sent yet): the write conflicts,
    # the re-read state has no RAR replica in sync, and the reassigned selector fails.  The
    # reassignment must stop there (the term ends; the next resumes it and waits): carried
    # on, steps 8-10 took 1 and 2 out and deleted them, leaving [3, 4] with no leader.
    tp = TopicPartition("m", 0)
    c = ControllerCluster([9, 1, 2, 3, 4], candidates=[9])
    c.create_topic("m", {0: [1, 2]})
    c.admin.create_partition_reassignment({tp: [3, 4]})
    c.settle()

    def shrink_before_step_7(_tp, step):
        if step == 6 and c.state("m", 0).isr != (1, 2):
            cur = c.state("m", 0)
            shrunk = LeaderAndIsr(cur.leader, cur.leader_epoch, (1, 2), cur.zk_version, cur.controller_epoch)
            assert c.admin.update_partition_states({tp: shrunk})[0]

    c.controller.reassignment_step_hook = shrink_before_step_7
    c.channel.clear()
    c.leader_sets_isr(tp, [1, 2, 3, 4])
    c.sched.advance(3000)                    # the failed term ends; 9 is elected again
    st = c.state("m", 0)
    assert (c.assignment("m")[0], st.leader, st.isr) == ([1, 2, 3, 4], 1, (1, 2))
    assert c.admin.get_partition_reassignment() == {tp: [3, 4]}
    assert c.controller.epoch == 2 and tp in c.controller.ctx.partitions_being_reassigned
    assert not [p for r in c.channel.requests(StopReplicaRequest) for p in r.partitions if p.delete]


def test_a_new_request_naming_a_dead_broker_is_dropped_even_within_the_assignment():
    # RAR = [1, 3] is a subset of AR = [1, 2, 3]; broker 3 is down.  Kafka refuses a
    # request naming a dead broker, and a pending one would hold the auto rebalance off.
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2, 3]})
    c.kill(3)
    c.admin.create_partition_reassignment({tp: [1, 3]})
    c.settle()
    assert c.admin.get_partition_reassignment() == {}
    assert not c.controller.ctx.partitions_being_reassigned
    assert c.assignment("t") == {0: [1, 2, 3]}


def test_a_reassignment_whose_new_replicas_are_all_down_waits_without_ending_the_term():
    # t-0 on [1, 2], both dead: leader -1, ISR (1,).  A reassignment to [1] found on
    # failover cannot move the leader into RAR; it waits for broker 1 rather than
    # making every controller term fail at step 7 (and resign, and be elected again).
    c = ControllerCluster([9, 1, 2], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2]})
    c.kill(2)
    c.kill(1)
    assert (c.state("t", 0).leader, c.state("t", 0).isr) == (-1, (1,))
    c.kill(9)
    c.admin.create_partition_reassignment({tp: [1]})
    c.start(9)
    epoch = c.admin.get_controller_epoch()[0]
    c.sched.advance(30_000)
    assert c.admin.get_controller_epoch()[0] == epoch and c.controller.failovers == 1
    assert c.admin.get_partition_reassignment() == {tp: [1]}
    c.start(1)                                   # onBrokerStartup continues it
    c.settle()
    st = c.state("t", 0)
    assert (c.assignment("t")[0], st.leader, st.isr) == ([1], 1, (1,))
    assert c.admin.get_partition_reassignment() == {}


def test_a_failover_that_drops_a_deleted_topics_reassignment_lets_the_deletion_run():
    # The topic is queued for deletion while one of its partitions is being reassigned;
    # the next controller marks it ineligible for that reassignment, then drops the
    # reassignment (its topic is going): the deletion must go on.
    s = Story()
    s.start_reassignment()
    s.c.admin.create_topic_deletion("r")
    s.c.settle()
    assert s.c.admin.topic_exists("r")       # held up by the reassignment
    s.c.kill(7)
    assert s.c.controller.broker_id == 8
    s.c.sched.advance(10_000)
    assert s.c.admin.get_partition_reassignment() == {}
    assert not s.c.admin.topic_exists("r") and s.c.admin.get_topic_deletions() == []


def test_a_failover_drops_a_request_for_a_partition_the_store_no_longer_holds():
    # The admin tool checked t-5 while it existed; by the next failover it is gone (its
    # topic deleted meanwhile, say).  Kafka 0.10's initializePartitionReassignment drops
    # such an entry; left in the admin path it refused every later reassignment.
    c = ControllerCluster([8, 9, 1, 2, 3], candidates=[8, 9])
    c.create_topic("t", {0: [1, 2]})
    first = c.controller.broker_id
    c.kill(first, wait_expiry=False)
    c.admin.create_partition_reassignment({TopicPartition("t", 5): [1, 2],
                                           TopicPartition("gone", 0): [2, 3]})
    assert c.wait_for(lambda: any(x.is_active for x in c.controllers.values()), 30_000)
    c.settle(100)
    assert c.admin.get_partition_reassignment() == {}
    assert not c.controller.ctx.partitions_being_reassigned
    assert c.assignment("t") == {0: [1, 2]}


@pytest.mark.parametrize("leader_dies", ["before the deletion request", "after it"])
def test_a_reassignment_holding_a_deletion_up_still_gets_its_partition_elected(leader_dies):
    # t-0 on [2] moves to [1]; 1 can catch up only from a leader.  The topic is queued for
    # deletion meanwhile, which waits for the reassignment (as Kafka's does).  Partitions
    # of a queued topic were never elected: once 2 was back, t-0 stayed leaderless, the
    # reassignment waited for it and the deletion for the reassignment, for good.
    c = ControllerCluster([9, 1, 2], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [2]})
    if leader_dies == "before the deletion request":
        c.kill(2)
    c.admin.create_partition_reassignment({tp: [1]})
    c.settle()
    c.admin.create_topic_deletion("t")
    c.settle()
    if leader_dies == "after it":
        c.kill(2)
    assert c.state("t", 0).leader == -1 and c.admin.topic_exists("t")
    c.start(2)
    assert c.state("t", 0).leader == 2
    c.leader_sets_isr(tp, [2, 1])
    assert c.wait_for(lambda: not c.admin.topic_exists("t"), 20_000)
    assert c.admin.get_partition_reassignment() == {} and c.admin.get_topic_deletions() == []


def _failover_reading_an_unclean_restart(c: ControllerCluster, broker: int, request: dict) -> None:
    """``broker`` restarts from an unclean shutdown and ``request`` is written while the
    controller cannot see either; it dies, and the next controller's failover reads both
    (so it runs onBrokerStartup for ``broker`` before step 7 of onControllerFailover)."""
    old = c.controller.broker_id
    c.sessions[old].set_reachable(False)
    c.stop(broker)
    c.start(broker, unclean_shutdown=True)
    c.admin.create_partition_reassignment(request)
    c.kill(old)
    assert c.controller.broker_id != old


@pytest.mark.parametrize("moved", [0, 1], ids=["the partition it led", "one it follows"])
def test_a_failover_that_restarts_an_unclean_broker_still_drops_a_request_naming_a_dead_one(moved):
    # 1 led t-0 and follows 2 in t-1.  Found with it at failover: a request moving t-<moved>
    # to [1, 4], 4 dead.  The failover's onBrokerStartup of 1 used to continue it before
    # step 7 validated it: AR widened to [1, 2, 4], and step 7 then took it for one
    # already started (AR holding RAR) and kept it.  Kafka drops it, the AR untouched.
    c = ControllerCluster([1, 2, 4, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [1, 2], 1: [2, 1]})
    c.kill(4)
    tp = TopicPartition("t", moved)
    mark = len(c.channel.sent)
    _failover_reading_an_unclean_restart(c, 1, {tp: [1, 4]})
    assert c.admin.get_partition_reassignment() == {}
    assert not c.controller.ctx.partitions_being_reassigned
    assert c.assignment("t") == {0: [1, 2], 1: [2, 1]}
    assert not [ps for s in c.channel.sent[mark:] if isinstance(s.request, LeaderAndIsrRequest)
                for ps in s.request.partition_states if 4 in ps.replicas]
    assert c.state("t", 0).leader == 2        # the unclean restart itself was handled


def test_a_failover_that_restarts_an_unclean_broker_resumes_a_valid_request_naming_it():
    c = ControllerCluster([1, 2, 3, 9, 8, 7], candidates=[9, 8, 7])
    c.create_topic("t", {0: [1, 2]})
    tp = TopicPartition("t", 0)
    _failover_reading_an_unclean_restart(c, 1, {tp: [3, 1]})
    assert c.admin.get_partition_reassignment() == {tp: [3, 1]}
    assert c.assignment("t")[0] == [1, 2, 3]
    c.leader_sets_isr(tp, [2, 3, 1])
    assert c.wait_for(lambda: c.admin.get_partition_reassignment() == {})
    st = c.state("t", 0)
    assert (c.assignment("t")[0], st.leader, set(st.isr)) == ([3, 1], 3, {3, 1})


def test_a_leader_in_rar_that_is_shutting_down_is_moved_at_step_7():
    """Seed 000 step 7 keeps the leader only if it is in RAR *and alive*; Kafka's
    liveBrokerIds leaves out brokers in controlled shutdown.  Broker 1 leads alone in the
    ISR, so its controlled shutdown cannot move the leadership; when 3 catches up the
    reassignment completes and must elect 3, not bump the epoch of the leaving leader."""
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2]})
    c.leader_sets_isr(tp, [1])                   # 2 fell behind
    c.admin.create_partition_reassignment({tp: [1, 3]})
    c.settle()
    assert c.controller.shutdown_broker(1) == {tp}   # nobody else in the ISR to lead
    c.leader_sets_isr(tp, [1, 3])                # 3 caught up: steps 4-12
    assert c.admin.get_partition_reassignment() == {}
    st = c.state("t", 0)
    assert c.assignment("t")[0] == [1, 3]
    assert st.leader == 3
    assert c.controller.shutdown_broker(1) == set()


def test_the_step_10_assignment_write_is_retried_after_a_concurrent_change_of_the_topic():
    """Step 10 rewrites the whole topic node conditionally; another writer of the node
    (an admin adding partitions, say) between the read and the write must make the
    controller read again and retry, not give up with AR = OAR + RAR left in the store."""
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2]})
    ctrl = c.controller
    armed = []
    read = ctrl.zk.get_topic_assignment_and_version

    def racing_read(topic, watch=None):
        got = read(topic, watch)
        if armed:
            armed.clear()
            c.admin.set_topic_assignment(topic, c.admin.get_topic_assignment(topic))  # bumps the version
        return got

    ctrl.zk.get_topic_assignment_and_version = racing_read

    def hook(_tp, step):
        if step == 9:
            armed.append(True)

    ctrl.reassignment_step_hook = hook
    c.admin.create_partition_reassignment({tp: [1, 3]})
    c.settle()
    c.leader_sets_isr(tp, [1, 2, 3])
    assert c.admin.get_partition_reassignment() == {}
    assert not armed                              # the race did happen
    assert c.assignment("t")[0] == [1, 3]
    assert ctrl.ctx.assignment(tp) == [1, 3]


# -- fourth controller mutation pass (sixty-sixth review) ----------------------------------

def test_a_new_request_judges_the_isr_by_the_store_not_the_cache():
    """Leaders announce ISR changes lazily (the notification may not have been handled
    yet): step 4's test reads the store.  Here the leader has shrunk the ISR to [1]
    unannounced; the cache still says [1, 2, 3], and taking it would drop 3 while the new
    assignment's 2 is out of sync."""
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2, 3]})
    cur = c.state("t", 0)
    c.admin.update_partition_states({tp: LeaderAndIsr(cur.leader, cur.leader_epoch, (1,), cur.zk_version,
                                                      cur.controller_epoch)})
    c.admin.create_partition_reassignment({tp: [1, 2]})
    c.settle()
    assert c.admin.get_partition_reassignment() == {tp: [1, 2]}
    assert c.assignment("t")[0] == [1, 2, 3]
    c.leader_sets_isr(tp, [1, 2])
    assert c.admin.get_partition_reassignment() == {}
    assert c.assignment("t")[0] == [1, 2]


def test_an_isr_change_short_of_every_new_replica_leaves_the_waiting_reassignment_alone():
    """Step 4 waits for *all* of RAR; an ISR change that brings in only some of it must not
    run steps 1-3 again (one more leader epoch and LeaderAndIsr round per change)."""
    c = ControllerCluster([9, 1, 2, 3, 4, 5], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2, 3]})
    c.admin.create_partition_reassignment({tp: [1, 4, 5]})
    c.settle()
    waiting = c.state("t", 0)
    c.channel.clear()
    c.leader_sets_isr(tp, [1, 2, 3, 4])          # 4 caught up, 5 not yet
    assert c.state("t", 0).leader_epoch == waiting.leader_epoch
    assert not c.channel.requests(LeaderAndIsrRequest)
    assert c.admin.get_partition_reassignment() == {tp: [1, 4, 5]}


def test_a_partition_already_being_reassigned_is_not_started_again_by_a_later_request():
    """Kafka skips partitions already being reassigned when the admin path changes; here
    the admin adds a second partition while the first waits for its new replica."""
    c = ControllerCluster([9, 1, 2, 3, 4, 5], candidates=[9])
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    c.create_topic("t", {0: [1, 2, 3], 1: [1, 2, 3]})
    c.admin.create_partition_reassignment({t0: [1, 2, 4]})
    c.settle()
    waiting = c.state("t", 0)
    c.channel.clear()
    c.admin.set_partition_reassignment({t0: [1, 2, 4], t1: [1, 2, 5]})
    c.settle()
    assert c.state("t", 0).leader_epoch == waiting.leader_epoch
    assert not [ps for r in c.channel.requests(LeaderAndIsrRequest) for ps in r.partition_states if ps.tp == t0]
    assert c.controller.ctx.partitions_being_reassigned[t1].new_replicas == (1, 2, 5)


# -- fifth controller mutation pass (eighty-sixth review) ----------------------------------

def test_a_finished_reassignment_leaves_the_other_pending_ones_in_the_admin_path():
    """Step 11 removes the finished partition from /admin/reassign_partitions, not the
    whole request: t-1 still waits for 5, and a failover must still find it."""
    c = ControllerCluster([9, 8, 1, 2, 3, 4, 5], candidates=[9, 8])
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    c.create_topic("t", {0: [1, 2, 3], 1: [1, 2, 3]})
    c.admin.create_partition_reassignment({t0: [1, 4], t1: [1, 5]})
    c.settle()
    c.leader_sets_isr(t0, [1, 2, 3, 4])
    assert c.assignment("t")[0] == [1, 4]
    assert c.admin.get_partition_reassignment() == {t1: [1, 5]}
    c.kill(9)
    assert c.controller.broker_id == 8
    c.leader_sets_isr(t1, [1, 2, 3, 5])
    assert c.assignment("t") == {0: [1, 4], 1: [1, 5]}
    assert c.admin.get_partition_reassignment() == {}


def test_step_4_caches_the_isr_it_read_so_a_leader_that_must_move_can():
    """The leader grew the ISR to [1, 2, 3] unannounced (the controller's cache still
    says [1]).  A request moving t-0 to [2, 3] passes step 4 on the store's ISR, and step 7
    must then see 2 and 3 in sync too: the reassignment completes at once, not when the
    ISR change happens to be announced."""
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2, 3]})
    c.leader_sets_isr(tp, [1])
    cur = c.state("t", 0)
    c.admin.update_partition_states({tp: LeaderAndIsr(cur.leader, cur.leader_epoch, (1, 2, 3), cur.zk_version,
                                                      cur.controller_epoch)})
    c.admin.create_partition_reassignment({tp: [2, 3]})
    c.settle()
    assert c.admin.get_partition_reassignment() == {}
    assert c.assignment("t")[0] == [2, 3] and c.state("t", 0).leader == 2


def test_each_phase_sends_its_leader_and_isr_before_the_next_step():
    """Step 2's LeaderAndIsr (AR = OAR + RAR, to OAR + RAR) is out before step 3 starts the
    new replicas, and step 7's epoch bump (AR = RAR) before step 8 shrinks the ISR: a
    controller dying between steps has told the brokers what the store already says."""
    c = ControllerCluster([9, 1, 2, 3, 4], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2, 3]})
    seen = {}

    def on_step(_tp, step):
        seen[step] = {(s.broker_id, ps.replicas, ps.leader_epoch) for s in c.channel.sent
                      if isinstance(s.request, LeaderAndIsrRequest)
                      for ps in s.request.partition_states if ps.tp == tp}

    c.controller.reassignment_step_hook = on_step
    c.admin.create_partition_reassignment({tp: [1, 2, 4]})
    c.settle()
    assert {(b, 1) for b in (1, 2, 3, 4)} <= {(b, e) for b, r, e in seen[2] if r == (1, 2, 3, 4)}
    c.leader_sets_isr(tp, [1, 2, 3, 4])
    assert {(b, 2) for b in (1, 2, 4)} <= {(b, e) for b, r, e in seen[7] if r == (1, 2, 4)}
    assert c.assignment("t")[0] == [1, 2, 4]


def test_a_leader_elected_at_step_7_and_the_isr_shrink_of_step_8_carry_the_new_assignment():
    """Step 6 sets AR = RAR in memory before step 7: the new leader's LeaderAndIsr (and
    step 8's) carry AR = RAR, so it takes no fetch from a replica being removed back into
    the ISR (seed 000 step 7's reason)."""
    c = ControllerCluster([9, 1, 2, 3, 4], candidates=[9])
    tp = TopicPartition("t", 0)
    c.create_topic("t", {0: [1, 2, 3]})
    marks = {}
    c.controller.reassignment_step_hook = lambda _tp, step: marks.setdefault(step, len(c.channel.sent))
    c.admin.create_partition_reassignment({tp: [2, 3, 4]})
    c.settle()
    c.leader_sets_isr(tp, [1, 2, 3, 4])
    assert c.state("t", 0).leader == 2 and c.assignment("t")[0] == [2, 3, 4]
    late = [ps.replicas for s in c.channel.sent[marks[6]:marks[9]] if isinstance(s.request, LeaderAndIsrRequest)
            for ps in s.request.partition_states if ps.tp == tp]
    assert late and set(late) == {(2, 3, 4)}


def test_a_request_that_only_reorders_the_replicas_is_carried_out():
    """Kafka 0.10 compares RAR with AR as sequences: the same brokers in another order are
    a reassignment (it changes the preferred replica), not a request already done."""
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    c.create_topic("r", {0: [1, 2, 3]})
    c.admin.create_partition_reassignment({TP: [2, 1, 3]})
    c.settle()
    assert c.assignment("r")[0] == [2, 1, 3] and c.controller.ctx.assignment(TP) == [2, 1, 3]
    assert c.admin.get_partition_reassignment() == {}
    assert c.controller.elect_preferred_leaders([TP]) == {}
    assert c.state("r", 0).leader == 2


def test_step_12_tells_a_broker_in_controlled_shutdown_too():
    """Seed 000 step 12 sends UpdateMetadata to liveOrShuttingDownBrokerIds: a broker
    still shutting down serves metadata requests until it stops."""
    c = ControllerCluster([9, 1, 2, 3, 4], candidates=[9])
    c.create_topic("r", {0: [1, 2]})
    assert c.controller.shutdown_broker(4) == set()
    marks = {}
    c.controller.reassignment_step_hook = lambda tp, step: marks.setdefault(step, len(c.channel.sent))
    c.admin.create_partition_reassignment({TP: [2, 3]})
    c.settle()
    c.leader_sets_isr(TP, [1, 2, 3])
    assert c.admin.get_partition_reassignment() == {}
    after_11 = c.channel.sent[marks[11]:]
    assert {s.broker_id for s in after_11 if type(s.request).__name__ == "UpdateMetadataRequest"} == {1, 2, 3, 4, 9}


def test_a_broker_starting_continues_only_the_reassignments_it_is_a_new_replica_of():
    """onBrokerStartup resumes the reassignments whose RAR names a new broker (Kafka
    0.10's partitionsWithReplicasOnNewBrokers); another one waiting for its replicas to
    catch up is left alone, not restarted at steps 1-3 with a new leader epoch."""
    c = ControllerCluster([9, 1, 2, 3, 4, 5], candidates=[9])
    c.create_topic("r", {0: [1, 2]})
    c.admin.create_partition_reassignment({TP: [1, 3]})
    c.settle()
    before = c.state("r", 0)
    assert c.controller.ctx.partitions_being_reassigned
    c.kill(5)
    c.channel.clear()
    c.start(5)
    assert c.state("r", 0) == before
    assert [r for r in c.channel.requests(LeaderAndIsrRequest) if any(p.tp == TP for p in r.partition_states)] == []


def test_the_new_replicas_are_started_knowing_the_widened_assignment():
    """Step 1 sets AR = OAR + RAR in the store and in memory (Kafka 0.10's
    updateAssignedReplicasForPartition): the new replica's first LeaderAndIsr (step 3)
    and every broker's metadata while the reassignment waits list it."""
    c = ControllerCluster([9, 1, 2, 3], candidates=[9])
    c.create_topic("r", {0: [1, 2]})
    c.channel.clear()
    c.admin.create_partition_reassignment({TP: [2, 3]})
    c.settle()
    assert c.controller.ctx.assignment(TP) == [1, 2, 3] and c.assignment("r")[0] == [1, 2, 3]
    to_3 = [ps.replicas for r in c.channel.requests(LeaderAndIsrRequest, 3) for ps in r.partition_states]
    assert to_3 and set(to_3) == {(1, 2, 3)}
    meta = [ps.replicas for r in c.channel.requests(UpdateMetadataRequest) for ps in r.partition_states if ps.tp == TP]
    assert meta and set(meta) == {(1, 2, 3)}


def test_step_7_tells_a_leader_in_controlled_shutdown_that_it_no_longer_leads():
    """The reassigned selector's receivers are RAR whole (0.10's ReassignedPartitionLeaderSelector),
    live or shutting down: 3 leads r-0 alone when its controlled shutdown starts (no other ISR
    member to hand over to), 4 then catches up, and step 7 moves the leadership to 4.  3, still
    in RAR and still running, must hear of it, or it goes on acting as leader of the old epoch."""
    c = ControllerCluster([9, 3, 4], candidates=[9])
    c.create_topic("r", {0: [3]})
    c.admin.create_partition_reassignment({TP: [3, 4]})
    c.settle()
    assert c.assignment("r") == {0: [3, 4]}
    assert c.controller.shutdown_broker(3) == {TP}       # no one to take over yet
    c.channel.clear()
    c.leader_sets_isr(TP, [3, 4])
    assert c.admin.get_partition_reassignment() == {}
    st = c.state("r", 0)
    assert st.leader == 4
    told = [ps for r in c.channel.requests(LeaderAndIsrRequest, 3) for ps in r.partition_states if ps.tp == TP]
    assert any(ps.leader == 4 and ps.leader_epoch == st.leader_epoch for ps in told)


def test_a_reassignment_of_a_partition_created_with_no_live_replica_ends_the_term_then_completes():
    # n-0 was created on [1] while 1 was down: no leader/ISR state.  A request moving it to
    # live broker 2 widens AR to [1, 2]; step 2's epoch bump then finds no state to bump.
    # That failure ends the term as any Kafka error in a watch handler does; the next term
    # brings n-0 online led by 2 (now in AR) and finishes the move.
    tp = TopicPartition("n", 0)
    c = ControllerCluster([9, 1, 2], candidates=[9])
    c.kill(1)
    c.create_topic("n", {0: [1]})
    assert c.admin.get_partition_states([tp]) == {}
    c.admin.create_partition_reassignment({tp: [2]})
    escaped = []
    try:
        c.settle()
    except Exception as e:                    # an error the controller did not expect
        escaped.append(e)
    assert escaped == [] and not c.controllers[9].is_active
    assert c.admin.get_controller_id() == 9   # kept: 9 stands again after ELECTION_RETRY_MS
    c.sched.advance(3000)
    assert c.controller.epoch == 2
    st = c.state("n", 0)
    assert (c.assignment("n")[0], st.leader, st.isr) == ([2], 2, (2,))
    assert c.admin.get_partition_reassignment() == {}
