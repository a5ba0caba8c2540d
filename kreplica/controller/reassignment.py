"""Partition reassignment: seed 000's onPartitionReassignment, all 12 steps.

Theory of operation.  An admin writes ``/admin/reassign_partitions`` with the
new replica list RAR of a partition whose current list is OAR.  The controller
first widens the assignment to OAR + RAR and starts the new replicas (steps
1-3), then waits until every RAR replica is in the ISR (step 4, learned from
the leader's ISR change notification), then completes (steps 5-12): RAR
online, AR = RAR in memory, leader moved into RAR if needed, OAR - RAR taken
out of the ISR, stopped and deleted, AR = RAR in the store, the partition
removed from the admin path, metadata resent.  For OAR = {1,2,3} and
RAR = {4,5,6} the store goes through::

    AR              leader/ISR
    {1,2,3}         1/{1,2,3}          initial
    {1,2,3,4,5,6}   1/{1,2,3}          step 2
    {1,2,3,4,5,6}   1/{1,2,3,4,5,6}    step 4 (the leader expands the ISR)
    {1,2,3,4,5,6}   4/{1,2,3,4,5,6}    step 7
    {1,2,3,4,5,6}   4/{4,5,6}          step 8
    {4,5,6}         4/{4,5,6}          step 10

The store keeps OAR + RAR until step 10 and RAR in the admin path until step
11, so a controller that dies at any step leaves enough behind: the next one
reloads both on failover and calls :func:`initiate` again, and every step is
idempotent (re-widening a widened AR is a no-op, replicas already started are
not restarted, a partition whose AR already equals RAR is simply removed from
the admin path).

``controller.reassignment_step_hook(tp, step)`` is called after each step; the
simulator and the failover tests use it to kill the controller mid-way.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from ..meta.store import BadVersion
from ..protocol import LeaderAndIsr, TopicPartition
from .context import PartitionReplica, ReassignmentContext
from .partition_state_machine import PartitionState
from .replica_state_machine import ReplicaState
from .state_writer import write_states

if TYPE_CHECKING:
    from .controller import KafkaController


def initiate(c: "KafkaController", tp: TopicPartition, new_replicas: Sequence[int], *,
             found_on_failover: bool = False) -> None:
    """initiateReassignReplicasForTopicPartition: validate, record, start."""
    ctx = c.ctx
    rar = list(new_replicas)
    # Past step 1 (AR already holds RAR) a reassignment found on failover is resumed
    # even while some RAR broker is down: onBrokerStartup continues it.  Kafka 0.10
    # would drop it and leave AR widened to OAR + RAR for good.  A new request must
    # name live brokers only, whatever its RAR (a subset of AR included).
    resuming = found_on_failover and set(rar) <= set(ctx.assignment(tp))
    valid = (
        tp in ctx.partition_assignment
        and not c.deletion.is_topic_queued_for_deletion(tp.topic)
        and rar
        and len(set(rar)) == len(rar)
        and rar != ctx.assignment(tp)
        and (resuming or all(r in ctx.live_broker_ids for r in rar))
    )
    if not valid:
        # Unknown partition, topic being deleted, nothing to do, or a new request
        # naming a broker that is not alive: Kafka drops it from the admin path.
        remove_from_admin_path(c, tp)
        # A failover marks a queued topic ineligible for its pending reassignments;
        # dropped, they no longer hold its deletion up.
        c.deletion.resume_deletion_for_topics({tp.topic})
        return
    ctx.partitions_being_reassigned[tp] = ReassignmentContext(tuple(rar))
    c.deletion.mark_topic_ineligible({tp.topic})
    on_partition_reassignment(c, tp)


def new_replicas_in_isr(c: "KafkaController", tp: TopicPartition) -> bool:
    """Step 4's test, on the state read from the store (seed 000 areReplicasInIsr)."""
    rar = c.ctx.partitions_being_reassigned[tp].new_replicas
    st = c.zk.get_partition_states([tp]).get(tp)
    if st is None:
        return False
    c.ctx.leadership[tp] = st
    return set(rar) <= set(st.isr)


def on_partition_reassignment(c: "KafkaController", tp: TopicPartition) -> None:
    ctx = c.ctx
    rar = list(ctx.partitions_being_reassigned[tp].new_replicas)
    if not new_replicas_in_isr(c, tp):
        oar = ctx.assignment(tp)
        new = [r for r in rar if r not in oar]
        both = oar + new
        update_assigned_replicas(c, tp, both)
        _step(c, tp, 1)
        update_leader_epoch_and_send(c, tp, both, both)
        _step(c, tp, 2)
        not_started = [pr for pr in (PartitionReplica(tp, r) for r in new)
                       if c.rsm.state(pr) is ReplicaState.NON_EXISTENT]
        c.rsm.handle_state_changes(not_started, ReplicaState.NEW)
        _step(c, tp, 3)
        return
    if not _leader_can_move_into(c, tp, rar):
        # Every RAR replica in the ISR is down: the reassignment stays pending (in the
        # admin path and the context) until onBrokerStartup of an RAR broker continues it.
        return
    _step(c, tp, 4)
    old = [r for r in ctx.assignment(tp) if r not in rar]
    c.rsm.handle_state_changes([PartitionReplica(tp, r) for r in rar], ReplicaState.ONLINE)
    _step(c, tp, 5)
    ctx.set_assignment(tp, rar)
    _step(c, tp, 6)
    _move_leader_if_required(c, tp, rar, old)
    _step(c, tp, 7)
    old_replicas = [PartitionReplica(tp, r) for r in old]
    c.rsm.handle_state_changes(old_replicas, ReplicaState.OFFLINE)
    _step(c, tp, 8)
    c.rsm.handle_state_changes(old_replicas, ReplicaState.DELETION_STARTED, callback=_ignore_answer)
    c.rsm.handle_state_changes(old_replicas, ReplicaState.DELETION_SUCCESSFUL)
    c.rsm.handle_state_changes(old_replicas, ReplicaState.NON_EXISTENT)
    _step(c, tp, 9)
    update_assigned_replicas(c, tp, rar)
    _step(c, tp, 10)
    remove_from_admin_path(c, tp)
    ctx.partitions_being_reassigned.pop(tp, None)
    _step(c, tp, 11)
    c.send_update_metadata(ctx.live_or_shutting_down_broker_ids)
    _step(c, tp, 12)
    c.deletion.resume_deletion_for_topics({tp.topic})


def _leader_must_move(c: "KafkaController", tp: TopicPartition, rar: list[int]) -> bool:
    st = c.ctx.leadership.get(tp)
    return st is None or st.leader not in rar or st.leader not in c.ctx.live_broker_ids


def _leader_can_move_into(c: "KafkaController", tp: TopicPartition, rar: list[int]) -> bool:
    """Can step 7 succeed now: the leader stays, or the reassigned selector has a live
    RAR replica in the ISR to choose?"""
    if not _leader_must_move(c, tp, rar):
        return True
    st = c.ctx.leadership.get(tp)
    live = c.ctx.live_broker_ids
    return st is not None and any(r in live and r in st.isr for r in rar)


def _move_leader_if_required(c: "KafkaController", tp: TopicPartition, rar: list[int], old: list[int]) -> None:
    """Step 7: elect from RAR if the leader is not in it (or dead), else bump the epoch."""
    if _leader_must_move(c, tp, rar):
        failed = c.psm.handle_state_changes([tp], PartitionState.ONLINE, c.selectors.reassigned)
        if tp in failed:
            raise failed[tp]
    else:
        update_leader_epoch_and_send(c, tp, old + rar, rar)


def update_leader_epoch_and_send(
    c: "KafkaController", tp: TopicPartition, receivers: Iterable[int], replicas: Sequence[int]
) -> None:
    """Same leader and ISR with epoch + 1, written conditionally; LeaderAndIsr carrying AR = ``replicas``."""

    def bump(_tp: TopicPartition, cur: LeaderAndIsr) -> LeaderAndIsr:
        return LeaderAndIsr(cur.leader, cur.leader_epoch + 1, cur.isr)

    result = write_states(c.zk, c.ctx, [tp], bump)
    if tp in result.failed:
        raise result.failed[tp]
    c.batch.add_leader_and_isr(receivers, tp, result.written[tp], replicas)
    c.batch.send(c.ctx.epoch)


def update_assigned_replicas(c: "KafkaController", tp: TopicPartition, replicas: Sequence[int]) -> None:
    """Write the partition's AR into its topic node (read-modify-write, conditional)."""
    while True:
        assignment, version = c.zk.get_topic_assignment_and_version(tp.topic)
        assignment[tp.partition] = list(replicas)
        try:
            c.zk.set_topic_assignment(tp.topic, assignment, expected_version=version)
            break
        except BadVersion:
            continue  # another partition of the topic changed meanwhile: re-read
    c.ctx.set_assignment(tp, replicas)


def remove_from_admin_path(c: "KafkaController", tp: TopicPartition) -> None:
    """Step 11: drop the partition from ``/admin/reassign_partitions`` (the node goes when empty)."""
    pending = c.zk.get_partition_reassignment()
    if tp in pending:
        del pending[tp]
        c.zk.set_partition_reassignment(pending)


def _step(c: "KafkaController", tp: TopicPartition, n: int) -> None:
    hook = c.reassignment_step_hook
    if hook is not None:
        hook(tp, n)


def _ignore_answer(_replica: PartitionReplica, _code: int) -> None:
    """The old replicas' deletion is not waited for (seed 000 step 9)."""

