"""LogConfig: the topic-level keys a Log obeys, validated once at open.

Kafka's names and defaults (``kreplica.config.SPEC``); an unknown key or a value
out of range raises :class:`~kreplica.errors.InvalidConfig` naming the key before
any file is touched.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from .. import config as _config
from ..errors import InvalidConfig
from ..records import MAX_DECOMPRESSED_BYTES

# The preallocated .log map needs room for at least one batch header (61 bytes).
_MIN_SEGMENT_BYTES = 1 << 10


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int
    segment_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    retention_bytes: int
    retention_ms: int
    flush_messages: int
    flush_ms: int
    max_message_bytes: int
    message_timestamp_type: str
    min_insync_replicas: int
    unclean_leader_election_enable: bool

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None = None) -> "LogConfig":
        """Validate Kafka-named keys (``{"segment.bytes": 1 << 28}``); defaults fill the rest."""
        checked = _config.validate(values, allowed=_config.LOG_KEYS)
        if checked["segment.bytes"] < _MIN_SEGMENT_BYTES:
            raise InvalidConfig(f"segment.bytes={checked['segment.bytes']!r}: below {_MIN_SEGMENT_BYTES}")
        return cls(**{name.replace(".", "_"): value for name, value in checked.items()})

    def to_dict(self) -> dict[str, Any]:
        return {f.name.replace("_", "."): getattr(self, f.name) for f in fields(self)}

    @property
    def max_decompressed_bytes(self) -> int:
        """Most bytes of records a leader takes in one compressed producer batch once
        decompressed: 64 x ``max.message.bytes`` (at least 1 MiB, at most what any reader
        decodes).  It checks the records decompressed, in memory; without a bound a small
        gzip batch of zeros cost gigabytes before anything was refused."""
        return min(MAX_DECOMPRESSED_BYTES, max(1 << 20, 64 * self.max_message_bytes))

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // 8
