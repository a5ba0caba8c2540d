"""Each broker's copy of the cluster metadata, fed by UpdateMetadata (seed 004 section 5).

The controller broadcasts partition states (leader, epoch, ISR, replicas,
offline replicas) and the live brokers; a broker answers client metadata
questions from here.  Requests from an older controller epoch are refused by
the ReplicaManager before they reach the cache.
"""
from __future__ import annotations

from ..protocol import TopicPartition, UpdateMetadataPartitionState, UpdateMetadataRequest


class MetadataCache:
    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        self.live_brokers: frozenset[int] = frozenset()
        self.controller_id = -1
        self.controller_epoch = -1

    def update(self, request: UpdateMetadataRequest) -> None:
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.live_brokers = frozenset(request.live_brokers)
        for state in request.partition_states:
            self._partitions[state.tp] = state
        for tp in request.deleted:
            self._partitions.pop(tp, None)

    def leader_for(self, tp: TopicPartition) -> int | None:
        state = self._partitions.get(tp)
        return None if state is None else state.leader
