"""Conditional leader/ISR writes for many partitions at once, retried on conflict.

Theory of operation.  Every leader/ISR change the controller makes is a write of
the partition's state node conditional on the version the controller knows
(seed 001 step 3.3).  :func:`write_states` proposes a new state per partition
from the cached one, writes all proposals as one ``update_partition_states``
call (one ``multi`` on the store, seed 000's "ZK reads/writes ... can be
batched"), and for the partitions whose version moved underneath (a leader
changed its ISR meanwhile) re-reads just those and proposes again -- seed
001's "go back to 1.1".  A state found written by a *newer* controller epoch
means this controller has been superseded: :class:`~kreplica.errors.NotController`
is raised and the caller resigns.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Protocol

from .. import errors
from ..protocol import LeaderAndIsr, TopicPartition
from .context import ControllerContext

# Returns the state to write, or None when no write is needed; may raise a
# KReplicaError that fails just this partition.
Propose = Callable[[TopicPartition, LeaderAndIsr], "LeaderAndIsr | None"]


class PartitionStateStore(Protocol):
    """The part of KafkaZkClient the state machines use."""

    def get_partition_states(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, LeaderAndIsr]: ...

    def create_partition_states(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> tuple[
        Mapping[TopicPartition, LeaderAndIsr], Mapping[TopicPartition, Exception]
    ]: ...

    def update_partition_states(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> tuple[
        Mapping[TopicPartition, LeaderAndIsr], Iterable[TopicPartition], Mapping[TopicPartition, Exception]
    ]: ...


class WriteResult:
    __slots__ = ("written", "unchanged", "failed")

    def __init__(self) -> None:
        self.written: dict[TopicPartition, LeaderAndIsr] = {}
        self.unchanged: set[TopicPartition] = set()
        self.failed: dict[TopicPartition, errors.KReplicaError] = {}


def write_states(
    store: PartitionStateStore,
    ctx: ControllerContext,
    tps: Iterable[TopicPartition],
    propose: Propose,
    max_rounds: int = 64,
) -> WriteResult:
    """Propose and conditionally write new states; ``ctx.leadership`` follows each success."""
    result = WriteResult()
    pending: dict[TopicPartition, LeaderAndIsr | None] = {tp: ctx.leadership.get(tp) for tp in tps}
    missing = [tp for tp, st in pending.items() if st is None]
    if missing:
        pending.update(_reread(store, ctx, missing))
    for _ in range(max_rounds):
        proposals: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, current in pending.items():
            if current is None:
                result.failed[tp] = errors.StateChangeFailed(f"{tp} has no leader/ISR state")
                continue
            try:
                proposed = propose(tp, current)
            except errors.KReplicaError as e:
                result.failed[tp] = e
                continue
            if proposed is None:
                result.unchanged.add(tp)
                continue
            proposals[tp] = LeaderAndIsr(proposed.leader, proposed.leader_epoch, proposed.isr,
                                         current.zk_version, ctx.epoch)
        if not proposals:
            return result
        updated, bad_version, failures = store.update_partition_states(proposals)
        for tp, st in updated.items():
            ctx.leadership[tp] = st
            result.written[tp] = st
        for tp, exc in failures.items():
            result.failed[tp] = exc if isinstance(exc, errors.KReplicaError) else errors.KReplicaError(str(exc))
        bad = list(bad_version)
        if not bad:
            return result
        pending = dict(_reread(store, ctx, bad))
    for tp in pending:
        result.failed[tp] = errors.StateChangeFailed(f"{tp}: gave up after {max_rounds} conflicting writes")
    return result


def _reread(
    store: PartitionStateStore, ctx: ControllerContext, tps: list[TopicPartition]
) -> dict[TopicPartition, LeaderAndIsr | None]:
    fresh = store.get_partition_states(tps)
    out: dict[TopicPartition, LeaderAndIsr | None] = {}
    for tp in tps:
        st = fresh.get(tp)
        if st is not None:
            if st.controller_epoch > ctx.epoch:
                raise errors.NotController(
                    f"{tp} state was written by controller epoch {st.controller_epoch} > {ctx.epoch}"
                )
            ctx.leadership[tp] = st
        out[tp] = st
    return out
