"""ReplicaStateMachine: every table entry of the 7 states, legal and illegal (seeds 000, 002)."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreplica import errors
from kreplica.controller.context import ControllerContext, PartitionReplica
from kreplica.controller.replica_state_machine import (
    VALID_PREVIOUS_STATES,
    ReplicaState,
    ReplicaStateMachine,
)
from kreplica.controller.request_batch import ControllerBrokerRequestBatch
from kreplica.meta import KafkaZkClient, MemoryStore
from kreplica.protocol import (
    LeaderAndIsr,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
)
from kreplica.runtime import SimScheduler

R = ReplicaState
TP = TopicPartition("t", 0)
EPOCH = 3


class Recorder:
    def __init__(self):
        self.sent = []

    def send(self, broker_id, request, on_response):
        self.sent.append((broker_id, request, on_response))

    def of(self, kind):
        return [(b, r) for b, r, _ in self.sent if isinstance(r, kind)]


class Env:
    def __init__(self):
        self.sched = SimScheduler()
        self.store = MemoryStore(self.sched)
        self.zk = KafkaZkClient(self.store.session("controller"), self.sched)
        self.zk.ensure_persistent_paths()
        self.zk.create_topic("t", {0: [1, 2, 3]})
        self.ctx = ControllerContext()
        self.ctx.epoch = EPOCH
        self.ctx.set_live_brokers([1, 2, 3, 4])
        self.ctx.set_assignment(TP, [1, 2, 3])
        created, _ = self.zk.create_partition_states({TP: LeaderAndIsr(1, 0, (1, 2, 3), 0, EPOCH)})
        self.ctx.leadership[TP] = created[TP]
        self.channel = Recorder()
        self.batch = ControllerBrokerRequestBatch(99, self.ctx, self.channel)
        self.rsm = ReplicaStateMachine(self.ctx, self.zk, self.batch)

    def stored(self):
        return self.zk.get_partition_states([TP])[TP]


ALL_PAIRS = list(itertools.product(list(R), list(R)))

# The legal previous states of seed 000 and Kafka 0.10 (DeletionIneligible may go back
# Online or Offline), written out here: a table test that took its answers from
# VALID_PREVIOUS_STATES would pass whatever entry someone got wrong there.
KAFKA_PREVIOUS_STATES = {
    R.NEW: {R.NON_EXISTENT},
    R.ONLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.OFFLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
    R.DELETION_STARTED: {R.OFFLINE},
    R.DELETION_SUCCESSFUL: {R.DELETION_STARTED},
    R.DELETION_INELIGIBLE: {R.DELETION_STARTED},
    R.NON_EXISTENT: {R.DELETION_SUCCESSFUL},
}


def test_the_table_is_kafkas():
    assert {target: set(prev) for target, prev in VALID_PREVIOUS_STATES.items()} == KAFKA_PREVIOUS_STATES
PR3 = PartitionReplica(TP, 3)


@pytest.mark.parametrize("current,target", ALL_PAIRS, ids=lambda s: s.value)
def test_every_table_entry(current, target):
    env = Env()
    if current is not R.NON_EXISTENT:
        env.rsm.states[PR3] = current
    before = env.stored()
    if current not in KAFKA_PREVIOUS_STATES[target]:
        with pytest.raises(errors.StateChangeFailed):
            env.rsm.handle_state_change(PR3, target)
        assert env.rsm.state(PR3) is current
        assert env.stored() == before and env.channel.sent == []
        assert env.ctx.assignment(TP) == [1, 2, 3]
        return
    env.rsm.handle_state_change(PR3, target)
    assert env.rsm.state(PR3) is target
    after = env.stored()
    lai = env.channel.of(LeaderAndIsrRequest)
    stop = env.channel.of(StopReplicaRequest)
    if target is R.NEW or (target is R.ONLINE and current is not R.NEW):
        # LeaderAndIsr with the current leader/ISR to the replica; UpdateMetadata to all live
        assert [b for b, _ in lai] == [3]
        ps = lai[0][1].partition_states[0]
        assert (ps.leader, ps.isr, ps.replicas) == (1, (1, 2, 3), (1, 2, 3))
        assert lai[0][1].controller_epoch == EPOCH
        assert sorted(b for b, _ in env.channel.of(UpdateMetadataRequest)) == [1, 2, 3, 4]
        assert after == before and not stop
    elif target is R.ONLINE:  # from New: add to AR if needed, nothing sent
        assert env.ctx.assignment(TP) == [1, 2, 3] and env.channel.sent == []
    elif target is R.OFFLINE:
        # StopReplica (no delete) to the replica; shrink the ISR (new epoch); tell the
        # remaining replicas (Kafka 2.x; the seeds' leader-only would fence followers)
        assert [(b, [p.delete for p in r.partitions]) for b, r in stop] == [(3, [False])]
        assert (after.leader, after.isr) == (1, (1, 2))
        assert after.leader_epoch == before.leader_epoch + 1
        assert after.zk_version == before.zk_version + 1
        assert sorted(b for b, _ in lai) == [1, 2]
        assert lai[0][1].partition_states[0].isr == (1, 2)
    elif target is R.DELETION_STARTED:
        assert [(b, [p.delete for p in r.partitions]) for b, r in stop] == [(3, [True])]
        assert after == before and not lai
    elif target is R.NON_EXISTENT:
        assert env.ctx.assignment(TP) == [1, 2] and PR3 not in env.rsm.states
        assert env.channel.sent == []
    else:  # DeletionSuccessful, DeletionIneligible: mark only
        assert env.channel.sent == [] and after == before


def test_new_replica_going_online_is_added_to_the_assignment():
    env = Env()
    pr4 = PartitionReplica(TP, 4)
    env.rsm.handle_state_change(pr4, R.NEW)
    assert [b for b, _ in env.channel.of(LeaderAndIsrRequest)] == [4]
    env.rsm.handle_state_change(pr4, R.ONLINE)
    assert env.ctx.assignment(TP) == [1, 2, 3, 4]


def test_offline_leader_leaves_partition_leaderless_but_isr_never_empty():
    env = Env()
    for r in (1, 2, 3):
        env.rsm.states[PartitionReplica(TP, r)] = R.ONLINE
    env.rsm.handle_state_changes([PartitionReplica(TP, 1)], R.OFFLINE)
    st = env.stored()
    assert (st.leader, st.isr) == (-1, (2, 3))
    env.rsm.handle_state_changes([PartitionReplica(TP, 2), PartitionReplica(TP, 3)], R.OFFLINE)
    st = env.stored()
    assert st.leader == -1 and len(st.isr) == 1 and st.isr[0] in (2, 3)


def test_when_every_isr_member_goes_at_once_the_leader_is_the_member_kept():
    """The ISR never shrinks to empty; of the members all leaving in one batch (their
    brokers died together) the one kept is the leader, not the first in ISR order."""
    env = Env()
    cur = env.ctx.leadership[TP]
    written, _bad, _failed = env.zk.update_partition_states({TP: LeaderAndIsr(2, 1, (1, 2, 3), cur.zk_version, EPOCH)})
    env.ctx.leadership[TP] = written[TP]
    for r in (1, 2, 3):
        env.rsm.states[PartitionReplica(TP, r)] = R.ONLINE
    env.rsm.handle_state_changes([PartitionReplica(TP, r) for r in (1, 2, 3)], R.OFFLINE)
    st = env.stored()
    assert (st.leader, st.isr) == (-1, (2,))


def test_a_leaderless_offline_transition_still_tells_the_other_replicas_and_every_broker():
    """Seed 002's OfflineReplica row: StopReplica to the replica, out of the ISR, then
    LeaderAndIsr to the other replicas and UpdateMetadata to every live broker -- also
    when the replica that went was the leader and the partition is left with leader -1."""
    env = Env()
    env.rsm.states[PartitionReplica(TP, 1)] = R.ONLINE
    env.rsm.handle_state_changes([PartitionReplica(TP, 1)], R.OFFLINE)
    st = env.stored()
    lai = env.channel.of(LeaderAndIsrRequest)
    assert sorted(b for b, _ in lai) == [2, 3]
    assert all((r.partition_states[0].leader, r.partition_states[0].leader_epoch, r.partition_states[0].isr)
               == (-1, st.leader_epoch, (2, 3)) for _b, r in lai)
    um = env.channel.of(UpdateMetadataRequest)
    assert sorted(b for b, _ in um) == [1, 2, 3, 4]
    assert all(r.partition_states[0].leader == -1 for _b, r in um)


def test_an_offline_transition_of_a_topic_being_deleted_tells_nobody_but_the_replica():
    """Kafka 0.10 sends no LeaderAndIsr for a partition queued for deletion: its replicas
    are on their way out, and UpdateMetadata with its leader would put a deleted topic
    back into brokers' metadata.  The ISR still shrinks, and the replica is stopped."""
    env = Env()
    env.rsm = ReplicaStateMachine(env.ctx, env.zk, env.batch, being_deleted=lambda topic: topic == "t")
    env.rsm.states[PR3] = R.ONLINE
    env.rsm.handle_state_change(PR3, R.OFFLINE)
    assert env.stored().isr == (1, 2)
    assert [b for b, _ in env.channel.of(StopReplicaRequest)] == [3]
    assert not env.channel.of(LeaderAndIsrRequest) and not env.channel.of(UpdateMetadataRequest)


def test_offline_batch_is_one_conditional_write_and_retries_on_conflict():
    env = Env()
    env.rsm.states[PR3] = R.ONLINE
    cached = env.ctx.leadership[TP]
    # the leader meanwhile shrinks the ISR to [1, 3] with its own conditional write
    env.zk.update_partition_states({TP: LeaderAndIsr(1, 0, (1, 3), cached.zk_version, EPOCH)})
    env.rsm.handle_state_change(PR3, R.OFFLINE)
    st = env.stored()
    assert st.isr == (1,) and env.ctx.leadership[TP] == st


def test_stop_replica_answers_reach_the_callback():
    env = Env()
    env.rsm.states[PR3] = R.OFFLINE
    seen = []
    env.rsm.handle_state_change(PR3, R.DELETION_STARTED, callback=lambda pr, code: seen.append((pr, code)))
    (_, request, on_response), = [s for s in env.channel.sent if isinstance(s[1], StopReplicaRequest)]
    on_response(StopReplicaResponse(0, ((TP, 56),)))
    assert seen == [(PR3, 56)]


def test_startup_online_for_live_then_dead_ones_offline():
    env = Env()
    env.ctx.set_live_brokers([1, 2])
    env.rsm.startup()
    assert env.rsm.state(PartitionReplica(TP, 1)) is R.ONLINE
    assert env.rsm.state(PR3) is R.DELETION_INELIGIBLE
    assert env.stored().isr == (1, 2, 3)    # startup itself writes nothing
    env.rsm.offline_dead_replicas(lambda topic: False)
    assert env.rsm.state(PR3) is R.OFFLINE
    assert env.stored().isr == (1, 2)       # the dead replica left the ISR
    assert sorted({b for b, _ in env.channel.of(LeaderAndIsrRequest)}) == [1, 2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(R)), min_size=1, max_size=14))
def test_random_transition_sequences_only_follow_the_table(targets):
    env = Env()
    for target in targets:
        before = env.rsm.state(PR3)
        failed = env.rsm.handle_state_changes([PR3], target)
        after = env.rsm.state(PR3)
        if PR3 in failed:
            assert after is before
        else:
            assert after is target and before in KAFKA_PREVIOUS_STATES[target]
        if after is R.NON_EXISTENT:
            env.ctx.set_assignment(TP, [1, 2, 3])



def test_an_offline_transition_whose_isr_write_fails_leaves_the_replica_where_it_was():
    """Kafka 0.10's OfflineReplica throws when the replica could not be taken out of the
    ISR, and the replica keeps its state.  Here the partition's state node is gone from
    the store behind the controller's back: the write fails, the replica is reported
    failed and stays OnlineReplica: marked Offline, the state machine would claim a
    transition whose ISR shrink never happened."""
    from kreplica.meta import layout
    env = Env()
    env.rsm.states[PR3] = R.ONLINE
    env.zk.session.delete(layout.partition_state_path("t", 0))
    failed = env.rsm.handle_state_changes([PR3], R.OFFLINE)
    assert PR3 in failed
    assert env.rsm.state(PR3) is R.ONLINE


def test_a_replica_of_a_partition_without_a_state_goes_offline_with_a_stop_replica_only():
    """No leader/ISR to shrink (the partition never came online): the replica is still
    stopped and marked OfflineReplica, with no state write -- a departure from seed 000,
    which left the state unchanged, so that a deletion of such a topic can start it
    (test_controller::test_a_topic_whose_partition_never_came_online_can_be_deleted)."""
    env = Env()
    other = TopicPartition("t", 1)
    env.ctx.set_assignment(other, [1, 2])
    pr = PartitionReplica(other, 2)
    env.rsm.states[pr] = R.NEW
    failed = env.rsm.handle_state_changes([pr], R.OFFLINE)
    assert failed == {} and env.rsm.state(pr) is R.OFFLINE
    assert [(b, [p.tp for p in r.partitions]) for b, r in env.channel.of(StopReplicaRequest)] == [(2, [other])]
    assert env.channel.of(LeaderAndIsrRequest) == []


def test_a_batch_sends_no_request_of_any_kind_to_a_broker_no_longer_alive():
    """request_batch's rule: requests to brokers that are not alive when the batch goes
    out are dropped -- UpdateMetadata as well as LeaderAndIsr and StopReplica (such a
    broker gets the whole picture from onBrokerStartup when it is back)."""
    env = Env()
    env.batch.add_leader_and_isr([1, 2, 3], TP, env.ctx.leadership[TP], [1, 2, 3])
    env.batch.add_stop_replica([3], TP, delete=False)
    env.ctx.set_live_brokers([1, 2, 4])       # 3 went before the batch was sent
    env.batch.send(EPOCH)
    assert {b for b, _ in env.channel.of(UpdateMetadataRequest)} == {1, 2, 4}
    assert {b for b, _ in env.channel.of(LeaderAndIsrRequest)} == {1, 2}
    assert env.channel.of(StopReplicaRequest) == []
