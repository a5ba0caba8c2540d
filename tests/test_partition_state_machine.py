"""PartitionStateMachine: every table entry, legal and illegal, with seed 000's actions."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreplica import errors
from kreplica.controller.context import ControllerContext
from kreplica.controller.leader_selectors import BoundSelectors
from kreplica.controller.partition_state_machine import (
    VALID_PREVIOUS_STATES,
    PartitionState,
    PartitionStateMachine,
)
from kreplica.controller.request_batch import ControllerBrokerRequestBatch
from kreplica.meta import KafkaZkClient, MemoryStore
from kreplica.protocol import LeaderAndIsr, LeaderAndIsrRequest, TopicPartition, UpdateMetadataRequest
from kreplica.runtime import SimScheduler

P = PartitionState
TP = TopicPartition("t", 0)
EPOCH = 4


class Recorder:
    def __init__(self):
        self.sent = []

    def send(self, broker_id, request, on_response):
        self.sent.append((broker_id, request))

    def of(self, kind):
        return [(b, r) for b, r in self.sent if isinstance(r, kind)]


class Env:
    def __init__(self, live=(1, 2, 3), assignment=(1, 2, 3)):
        self.sched = SimScheduler()
        self.store = MemoryStore(self.sched)
        self.zk = KafkaZkClient(self.store.session("controller"), self.sched)
        self.zk.ensure_persistent_paths()
        self.zk.create_topic("t", {0: list(assignment), 1: list(assignment)})
        self.ctx = ControllerContext()
        self.ctx.epoch = EPOCH
        self.ctx.all_topics = {"t"}
        self.ctx.set_live_brokers(live)
        self.channel = Recorder()
        self.batch = ControllerBrokerRequestBatch(99, self.ctx, self.channel)
        self.selectors = BoundSelectors(self.ctx, lambda topic: False)
        self.psm = PartitionStateMachine(self.ctx, self.zk, self.batch, self.selectors.offline)

    def put_state(self, tp, leader, isr, epoch=0):
        created, _ = self.zk.create_partition_states({tp: LeaderAndIsr(leader, epoch, tuple(isr), 0, 1)})
        self.ctx.leadership[tp] = created[tp]

    def prepare(self, tp, state):
        """Put ``tp`` in ``state`` the way the controller would have got it there."""
        if state is not P.NON_EXISTENT:
            self.ctx.set_assignment(tp, self.zk.get_topic_assignment("t")[tp.partition])
        if state in (P.ONLINE, P.OFFLINE):
            self.put_state(tp, 1, [1, 2, 3])
        if state is not P.NON_EXISTENT:
            self.psm.states[tp] = state

    def stored(self, tp):
        return self.zk.get_partition_states([tp]).get(tp)


ALL_PAIRS = list(itertools.product(list(P), list(P)))

# Seed 000's assertValidPreviousStates calls, written out here: a table test that took
# its answers from VALID_PREVIOUS_STATES would pass whatever entry someone got wrong there.
SEED000_PREVIOUS_STATES = {
    P.NON_EXISTENT: {P.OFFLINE},
    P.NEW: {P.NON_EXISTENT},
    P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
    P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
}


def test_the_table_is_seed_000s():
    assert {target: set(prev) for target, prev in VALID_PREVIOUS_STATES.items()} == SEED000_PREVIOUS_STATES


@pytest.mark.parametrize("current,target", ALL_PAIRS, ids=lambda s: s.value)
def test_every_table_entry(current, target):
    env = Env()
    env.prepare(TP, current)
    before_store = env.stored(TP)
    legal = current in SEED000_PREVIOUS_STATES[target]
    if not legal:
        with pytest.raises(errors.StateChangeFailed):
            env.psm.handle_state_change(TP, target)
        assert env.psm.state(TP) is current          # unchanged
        assert env.stored(TP) == before_store        # nothing written
        assert env.channel.sent == []                # nothing sent
        return
    # An Online -> Online move needs a reason: the leader's broker is shutting down.
    if current is P.ONLINE and target is P.ONLINE:
        env.ctx.shutting_down_broker_ids.add(1)
        env.psm.handle_state_change(TP, target, env.selectors.controlled_shutdown)
    else:
        if current is P.OFFLINE:
            env.ctx.set_live_brokers([2, 3])     # the leader died
        env.psm.handle_state_change(TP, target)
    assert env.psm.state(TP) is target
    check_action(env, current, target, before_store)


def check_action(env, current, target, before):
    after = env.stored(TP)
    if target is P.NEW:
        # load assigned replicas from the store into the context; nothing else
        assert env.ctx.assignment(TP) == [1, 2, 3]
        assert after is None and env.channel.sent == []
    elif target is P.ONLINE and current is P.NEW:
        # first live assigned replica leads, all live assigned replicas are the ISR
        assert (after.leader, after.isr, after.leader_epoch, after.controller_epoch) == (1, (1, 2, 3), 0, EPOCH)
        lai = env.channel.of(LeaderAndIsrRequest)
        assert sorted(b for b, _ in lai) == [1, 2, 3]
        assert all(r.controller_epoch == EPOCH and r.partition_states[0].is_new for _, r in lai)
        assert sorted(b for b, _ in env.channel.of(UpdateMetadataRequest)) == [1, 2, 3]
    elif target is P.ONLINE:
        # selector decides; conditional write bumps the version; LeaderAndIsr to receivers
        assert after.zk_version == before.zk_version + 1
        assert after.leader_epoch == before.leader_epoch + 1
        if current is P.OFFLINE:
            assert (after.leader, after.isr) == (2, (2, 3))
            assert sorted(b for b, _ in env.channel.of(LeaderAndIsrRequest)) == [2, 3]
        else:
            assert (after.leader, after.isr) == (2, (2, 3))
            assert sorted(b for b, _ in env.channel.of(LeaderAndIsrRequest)) == [1, 2, 3]
        assert env.ctx.leadership[TP] == after
        assert env.channel.of(UpdateMetadataRequest)
    else:
        # Offline and NonExistent: only the state is marked
        assert after == before and env.channel.sent == []


def test_new_to_online_skips_dead_replicas_and_fails_when_none_live():
    env = Env(live=(2, 3))
    tp1 = TopicPartition("t", 1)
    env.prepare(TP, P.NEW)
    env.prepare(tp1, P.NEW)
    env.ctx.set_assignment(tp1, [1])
    failed = env.psm.handle_state_changes([TP, tp1], P.ONLINE)
    assert set(failed) == {tp1} and isinstance(failed[tp1], errors.NoReplicaOnline)
    assert env.psm.state(tp1) is P.NEW and env.psm.state(TP) is P.ONLINE
    st = env.stored(TP)
    assert st.leader == 2 and st.isr == (2, 3)


def test_offline_election_failure_leaves_partition_offline():
    env = Env()
    env.prepare(TP, P.OFFLINE)
    env.ctx.set_live_brokers([])
    failed = env.psm.handle_state_changes([TP], P.ONLINE)
    assert isinstance(failed[TP], errors.NoReplicaOnline)
    assert env.psm.state(TP) is P.OFFLINE


def test_bad_version_is_reread_and_retried():
    """A leader shrank the ISR after the controller cached the state (seed 001 3.3)."""
    env = Env()
    env.prepare(TP, P.OFFLINE)
    cached = env.ctx.leadership[TP]
    # the leader's own conditional write: ISR [1, 3]
    updated, _, _ = env.zk.update_partition_states({TP: LeaderAndIsr(1, 0, (1, 3), cached.zk_version, 1)})
    assert env.ctx.leadership[TP].zk_version == cached.zk_version  # cache is now stale
    env.ctx.set_live_brokers([2, 3])
    env.psm.handle_state_change(TP, P.ONLINE)
    st = env.stored(TP)
    assert (st.leader, st.isr) == (3, (3,))     # elected from the re-read ISR, not the stale one
    assert st.zk_version == updated[TP].zk_version + 1


def test_state_written_by_newer_controller_means_not_controller():
    env = Env()
    env.prepare(TP, P.OFFLINE)
    cached = env.ctx.leadership[TP]
    env.zk.update_partition_states({TP: LeaderAndIsr(2, 1, (2, 3), cached.zk_version, EPOCH + 1)})
    env.ctx.set_live_brokers([2, 3])
    with pytest.raises(errors.NotController):
        env.psm.handle_state_changes([TP], P.ONLINE)


def test_many_partitions_are_written_in_one_transaction():
    env = Env()
    env.zk.create_topic("many", {p: [1, 2, 3] for p in range(200)})
    tps = []
    for p in range(200):
        tp = TopicPartition("many", p)
        env.ctx.set_assignment(tp, [1, 2, 3])
        env.psm.states[tp] = P.NEW
        tps.append(tp)
    env.psm.handle_state_changes(tps, P.ONLINE)
    env.channel.sent.clear()
    env.ctx.set_live_brokers([2, 3])
    for tp in tps:
        env.psm.states[tp] = P.OFFLINE
    trips = env.store.round_trips
    assert env.psm.handle_state_changes(tps, P.ONLINE) == {}
    assert env.store.round_trips - trips == 1          # one multi, no reads
    # one LeaderAndIsr per receiving broker, not per partition
    assert sorted(b for b, _ in env.channel.of(LeaderAndIsrRequest)) == [2, 3]


def test_startup_classifies_and_brings_partitions_online():
    env = Env(live=(2, 3))
    tp1 = TopicPartition("t", 1)
    env.ctx.set_assignment(TP, [1, 2, 3])
    env.ctx.set_assignment(tp1, [1, 2, 3])
    env.put_state(TP, 1, [1, 2, 3])          # leader dead -> Offline -> re-elected
    env.psm.startup()                        # tp1 has no state -> New -> initialized
    assert env.psm.state(TP) is P.ONLINE and env.stored(TP).leader == 2
    assert env.psm.state(tp1) is P.ONLINE and env.stored(tp1).leader == 2


def test_excluded_topics_are_not_brought_online():
    env = Env()
    env.psm = PartitionStateMachine(env.ctx, env.zk, env.batch, env.selectors.offline, lambda t: t == "t")
    env.prepare(TP, P.OFFLINE)
    env.ctx.set_live_brokers([2, 3])
    assert env.psm.trigger_online_partition_state_change() == {}
    assert env.psm.state(TP) is P.OFFLINE


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(P)), min_size=1, max_size=12))
def test_random_transition_sequences_only_follow_the_table(targets):
    env = Env()
    for target in targets:
        before = env.psm.state(TP)
        failed = env.psm.handle_state_changes([TP], target)
        after = env.psm.state(TP)
        if TP in failed:
            assert after is before
        else:
            assert after is target and before in SEED000_PREVIOUS_STATES[target]


def test_a_new_partition_whose_state_node_exists_already_fails_and_stays_new():
    """The create of a new partition's state node is refused when the node exists (another
    controller wrote it): the partition is reported failed, stays NewPartition, and nobody
    is sent a state this controller did not write."""
    env = Env()
    env.prepare(TP, P.NEW)
    env.zk.create_partition_states({TP: LeaderAndIsr(2, 0, (2, 3), 0, EPOCH + 1)})
    failed = env.psm.handle_state_changes([TP], P.ONLINE)
    assert isinstance(failed.get(TP), errors.StateChangeFailed)
    assert env.psm.state(TP) is P.NEW and TP not in env.ctx.leadership
    assert env.channel.of(LeaderAndIsrRequest) == []


def test_a_batch_names_each_partition_once_in_sorted_order():
    """split_legal takes each key once, in sorted order, whatever the caller passed: the
    requests a pass builds do not depend on the iteration order of the caller's set
    (which for strings changes with the interpreter's hash seed)."""
    from kreplica.controller.transitions import split_legal
    a, b, c = (TopicPartition("t", p) for p in (0, 1, 2))
    table = {P.ONLINE: frozenset({P.NEW})}
    legal, failed = split_legal([c, a, c, b], lambda tp: P.NEW, P.ONLINE, table, str)
    assert legal == [a, b, c] and failed == {}


def test_a_partition_whose_stored_replica_list_is_empty_fails_to_become_new(monkeypatch):
    """An empty list is no replicas: the partition stays NonExistent with nothing cached,
    rather than New with an assignment no election could ever serve."""
    env = Env()
    monkeypatch.setattr(env.zk, "get_topic_assignment", lambda topic: {0: [], 1: [1, 2, 3]})
    other = TopicPartition("t", 1)
    failed = env.psm.handle_state_changes([TP, other], P.NEW)
    assert set(failed) == {TP} and isinstance(failed[TP], errors.StateChangeFailed)
    assert env.psm.state(TP) is P.NON_EXISTENT and TP not in env.ctx.partition_assignment
    assert env.psm.state(other) is P.NEW and env.ctx.assignment(other) == [1, 2, 3]
