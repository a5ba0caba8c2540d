"""Typed messages: every request, response and event is a frozen, slotted dataclass."""
from .common import LeaderAndIsr, TopicPartition
from .controller_requests import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartition,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from .alter_isr import AlterIsrRequest, AlterIsrResponse
from .fetch import (CONSUMER_REPLICA_ID, ISOLATION_LEVELS, FetchPartition, FetchPartitionData, FetchRequest,
                    FetchResponse)
from .produce import ProducePartition, ProducePartitionResult, ProduceRequest, ProduceResponse
from .offsets_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)

__all__ = [name for name in dir() if not name.startswith("_")]
