"""ControllerContext: the active controller's in-memory view of the cluster.

Theory of operation.  The metadata store is the source of truth (seed 000,
"After the controller makes a decision, it publishes the decision permanently
in ZK").  The context is the controller's cache of it, filled once on failover
and then kept current by the controller's own writes and by the store watches:
live brokers, topics, each partition's assigned replicas (AR), each partition's
leader/ISR *with the version of the state node it was written as*, and the
reassignments and preferred elections in progress.  Because the versions are
kept, a broker failure over N partitions needs no re-read before the
conditional writes (seed 001 step 3.1 is only repeated for partitions whose
write lost a race).

Invariants: ``live_broker_ids`` excludes brokers in controlled shutdown (they
must not be elected); ``live_or_shutting_down_broker_ids`` still receives
requests.  ``leadership[tp].zk_version`` is the version of the state node the
controller last read or wrote.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Iterable, NamedTuple

from ..protocol import LeaderAndIsr, TopicPartition

INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


class PartitionReplica(NamedTuple):
    """One replica of one partition (Kafka's PartitionAndReplica)."""

    tp: TopicPartition
    replica: int


@dataclass(slots=True)
class ReassignmentContext:
    """A reassignment in progress: RAR, the replicas the partition moves to."""

    new_replicas: tuple[int, ...]


class ControllerContext:
    """Caches of seed 000's ControllerContext, named as there."""

    def __init__(self) -> None:
        self.epoch = INITIAL_CONTROLLER_EPOCH - 1
        self.epoch_zk_version = INITIAL_CONTROLLER_EPOCH_ZK_VERSION - 1
        self.shutting_down_broker_ids: set[int] = set()
        self._live_brokers: set[int] = set()
        # broker -> the store session of its registration (a restart changes it)
        self.broker_epochs: dict[int, int] = {}
        self.all_topics: set[str] = set()
        self.partition_assignment: dict[TopicPartition, list[int]] = {}
        self.leadership: dict[TopicPartition, LeaderAndIsr] = {}
        self.partitions_being_reassigned: dict[TopicPartition, ReassignmentContext] = {}
        self.partitions_undergoing_preferred_election: set[TopicPartition] = set()
        # topic -> its partitions, so per-topic questions do not scan every partition.
        self._by_topic: dict[str, set[TopicPartition]] = {}

    # -- brokers ---------------------------------------------------------
    @property
    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self._live_brokers - self.shutting_down_broker_ids)

    @property
    def live_or_shutting_down_broker_ids(self) -> frozenset[int]:
        return frozenset(self._live_brokers)

    def set_live_brokers(self, broker_ids: Iterable[int]) -> None:
        self._live_brokers = set(broker_ids)

    # -- assignment ------------------------------------------------------
    def set_assignment(self, tp: TopicPartition, replicas: Iterable[int]) -> None:
        self.partition_assignment[tp] = list(replicas)
        self._by_topic.setdefault(tp.topic, set()).add(tp)

    def assignment(self, tp: TopicPartition) -> list[int]:
        return self.partition_assignment.get(tp, [])

    def remove_topic(self, topic: str) -> None:
        for tp in self._by_topic.pop(topic, ()):
            self.partition_assignment.pop(tp, None)
            self.leadership.pop(tp, None)
            self.partitions_being_reassigned.pop(tp, None)
            self.partitions_undergoing_preferred_election.discard(tp)
        self.all_topics.discard(topic)

    def partitions_for_topic(self, topic: str) -> set[TopicPartition]:
        return set(self._by_topic.get(topic, ()))

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        return {tp for tp, ar in self.partition_assignment.items() if broker_id in ar}

    def replicas_on_brokers(self, broker_ids: AbstractSet[int]) -> set[PartitionReplica]:
        return {
            PartitionReplica(tp, r)
            for tp, ar in self.partition_assignment.items()
            for r in ar
            if r in broker_ids
        }

    def replicas_for_partitions(self, tps: Iterable[TopicPartition]) -> set[PartitionReplica]:
        return {PartitionReplica(tp, r) for tp in tps for r in self.assignment(tp)}

    def replicas_for_topic(self, topic: str) -> set[PartitionReplica]:
        return self.replicas_for_partitions(self._by_topic.get(topic, ()))

    def live_assigned(self, tp: TopicPartition) -> list[int]:
        live = self.live_broker_ids
        return [r for r in self.assignment(tp) if r in live]
