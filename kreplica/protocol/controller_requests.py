"""Controller-to-broker requests: LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown.

Every request carries the controller epoch; a broker answers a request from an
older epoch with STALE_CONTROLLER_EPOCH (seed 001 'D').  LeaderAndIsr, StopReplica
and UpdateMetadata also carry the addressee's ``broker_epoch`` (KIP-380: the
registration the controller knows; -1 = unchecked), so a request meant for an
earlier incarnation of the broker is answered STALE_BROKER_EPOCH.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..fast_init import fast_init
from .common import TopicPartition


@fast_init
@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    tp: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False
    # The topic's config overrides (/config/topics/<topic>) as the controller read them,
    # as sorted (key, value) pairs.  Kafka's brokers watch that znode themselves; here the
    # controller, which reads it anyway (unclean.leader.election.enable), hands it over, so
    # a broker never reads the store while it applies a LeaderAndIsr.
    topic_config: tuple[tuple[str, str], ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[int, ...] = ()
    # seed 001 C step 3: the first request of a controller to a broker; the broker
    # deletes local partitions the request does not list.
    is_init: bool = False
    broker_epoch: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    error_code: int
    partition_errors: tuple[tuple[TopicPartition, int], ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    tp: TopicPartition
    delete: bool
    leader_epoch: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    partitions: tuple[StopReplicaPartition, ...]
    broker_epoch: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    error_code: int
    partition_errors: tuple[tuple[TopicPartition, int], ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    tp: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[int, ...]
    # Partitions of deleted topics, removed from the metadata cache.
    deleted: tuple[TopicPartition, ...] = ()
    broker_epoch: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class UpdateMetadataResponse:
    error_code: int


@fast_init
@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    error_code: int
    partitions_remaining: tuple[TopicPartition, ...] = ()
