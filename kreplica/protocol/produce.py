"""Produce: one v2 record batch per partition, acks 0, 1 or -1 (all)."""
from __future__ import annotations

from dataclasses import dataclass

from ..fast_init import fast_init
from .common import TopicPartition


@fast_init
@dataclass(frozen=True, slots=True)
class ProducePartition:
    tp: TopicPartition
    records: bytes | memoryview  # one v2 batch (Kafka refuses more); offsets are assigned by the leader


@fast_init
@dataclass(frozen=True, slots=True)
class ProduceRequest:
    acks: int
    timeout_ms: int
    partitions: tuple[ProducePartition, ...]

    def __post_init__(self) -> None:
        if self.acks not in (0, 1, -1):
            raise ValueError(f"acks must be 0, 1 or -1, not {self.acks}")


@fast_init
@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    tp: TopicPartition
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class ProduceResponse:
    partitions: tuple[ProducePartitionResult, ...]
