"""Fetch: followers (replica_id >= 0) and consumers (replica_id = -1)."""
from __future__ import annotations

from dataclasses import dataclass

from ..fast_init import fast_init
from .common import TopicPartition

CONSUMER_REPLICA_ID = -1
# A consumer reads below the HW ("committed"); "uncommitted" reads to the leader's log end,
# for looking at what is not yet replicated.  Anything else is refused, not guessed at.
ISOLATION_LEVELS = frozenset({"committed", "uncommitted"})


@fast_init
@dataclass(frozen=True, slots=True)
class FetchPartition:
    tp: TopicPartition
    fetch_offset: int
    current_leader_epoch: int = -1  # -1: unchecked
    log_start_offset: int = -1
    max_bytes: int = 1048576


@fast_init
@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    partitions: tuple[FetchPartition, ...]
    max_wait_ms: int = 0
    # Answered at once when at least this many bytes are readable (0: at once, always),
    # else held up to max_wait_ms; 1 is Kafka's consumer default.
    min_bytes: int = 1
    max_bytes: int = 10485760
    # Consumers: "committed" (below the HW) or "uncommitted" (below the LEO).
    isolation: str = "committed"


@fast_init
@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    tp: TopicPartition
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes | memoryview = b""


@fast_init
@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    partitions: tuple[FetchPartitionData, ...] = ()
