"""OffsetsForLeaderEpoch (KIP-101/KIP-279): where did my last epoch end on the leader?"""
from __future__ import annotations

from dataclasses import dataclass

from ..fast_init import fast_init
from .common import TopicPartition

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetForLeaderPartition:
    tp: TopicPartition
    leader_epoch: int  # the follower's latest epoch
    current_leader_epoch: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    replica_id: int
    partitions: tuple[OffsetForLeaderPartition, ...]


@fast_init
@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    tp: TopicPartition
    error_code: int
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_OFFSET


@fast_init
@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochResponse:
    partitions: tuple[EpochEndOffset, ...]
