"""Read-only view of a broker's log directory, for planning Spark reads.

Planning must stay cheap and must never write into a live broker's directory,
so this module reads only directory listings, the sparse ``.index`` and
``.timeindex`` files and the offset checkpoints; it does not open a
:class:`kreplica.log.Log` (which could recover or truncate).  Record data is
touched only to find a log end offset for uncommitted streaming.

Index semantics relied on (Kafka's ``LogSegment.append``): an ``.index`` entry
maps some offset of a batch to that batch's start position, and a
``.timeindex`` entry ``(T, o)`` says that every record at an offset <= ``o``
has a timestamp <= ``T`` (it records the running maximum).  Both files may be
preallocated with zeros: only the strictly increasing prefix is used.  Index
data only ever narrows what is read; the reader validates every byte it uses.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..log.checkpoints import OffsetCheckpointFile
from .segment_reader import SegmentSlice, last_valid_offset

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
HW_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
_OFFSET_ENTRY = np.dtype([("rel", ">u4"), ("pos", ">u4")])
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">u4")])


@dataclass(frozen=True, slots=True)
class OffsetBounds:
    """Offsets ``[lo, hi)`` to read; ``hi`` None means to the log end."""

    lo: int
    hi: int | None


def _increasing_prefix(keys: np.ndarray) -> int:
    """Length of the strictly increasing prefix (a zero-filled tail breaks it)."""
    if len(keys) < 2:
        return len(keys)
    breaks = np.flatnonzero(np.diff(keys.astype(np.int64)) <= 0)
    return int(breaks[0]) + 1 if len(breaks) else len(keys)


def _read_entries(path: Path, dtype: np.dtype) -> np.ndarray:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return np.zeros(0, dtype)
    return np.frombuffer(raw, dtype, count=len(raw) // dtype.itemsize)


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """One segment: its ``.log`` and the offsets its indexes name."""

    log_path: str
    base_offset: int
    next_base_offset: int | None  # None for the active (last) segment

    def offset_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(absolute offsets, batch positions) of the valid ``.index`` entries."""
        e = _read_entries(Path(self.log_path).with_suffix(".index"), _OFFSET_ENTRY)
        n = min(_increasing_prefix(e["rel"]), _increasing_prefix(e["pos"]))
        # A lone first entry (0, 0) is a real entry only in a non-empty segment;
        # either way it names position 0, which is always a batch start.
        return e["rel"][:n].astype(np.int64) + self.base_offset, e["pos"][:n].astype(np.int64)

    def time_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(max timestamp so far, absolute offset) of the valid ``.timeindex`` entries."""
        e = _read_entries(Path(self.log_path).with_suffix(".timeindex"), _TIME_ENTRY)
        n = _increasing_prefix(e["ts"])
        if n and e["ts"][0] == 0 and e["rel"][0] == 0 and (n == 1 or len(e) == 1):
            n = 0  # an all-zero preallocated file
        return e["ts"][:n].astype(np.int64), e["rel"][:n].astype(np.int64) + self.base_offset

    def slices(self, bounds: OffsetBounds, timestamp_lo: int | None, max_bytes: int | None, *,
               topic: str, partition: int, on_corrupt: str,
               corrupt_report: str | None) -> list[SegmentSlice]:
        """Byte ranges of this segment that may hold offsets in ``bounds`` with
        timestamps >= ``timestamp_lo``, each at most ``max_bytes`` where batch
        boundaries allow."""
        lo, hi = bounds.lo, bounds.hi
        if timestamp_lo is not None:
            ts, ts_off = self.time_index()
            k = int(np.searchsorted(ts, timestamp_lo, side="left")) - 1
            if k >= 0:  # every record up to ts_off[k] is older than timestamp_lo
                lo = max(lo, int(ts_off[k]) + 1)
        seg_end = self.next_base_offset
        if (hi is not None and hi <= max(lo, self.base_offset)) or (seg_end is not None and lo >= seg_end):
            return []
        offsets, positions = self.offset_index()
        k = int(np.searchsorted(offsets, lo, side="right")) - 1
        start = int(positions[k]) if k >= 0 else 0
        end: int | None = None
        if hi is not None and (seg_end is None or hi < seg_end):
            # Entry j holds an offset >= hi; batches after its batch start beyond hi.
            j = int(np.searchsorted(offsets, hi, side="left"))
            if j + 1 < len(offsets):
                end = int(positions[j + 1])
        # Offsets the last slice must reach before it may stop: a sealed
        # segment's data runs to the next base offset, the active one's to hi.
        need = hi if seg_end is None else (seg_end if hi is None else min(hi, seg_end))
        cuts = [start]
        if max_bytes is not None:
            inner = positions[(positions > start) & (positions < end if end is not None else True)]
            for p in inner.tolist():
                if p - cuts[-1] >= max_bytes:
                    cuts.append(int(p))
        edges: list[int | None] = [*cuts[1:], end]
        return [
            SegmentSlice(
                topic=topic, partition=partition, log_path=self.log_path,
                base_offset=self.base_offset, start_position=a, end_position=b,
                offset_lo=lo, offset_hi=hi,
                need_offset=need, timestamp_lo=timestamp_lo, on_corrupt=on_corrupt,
                corrupt_report=corrupt_report,
            )
            for a, b in zip(cuts, edges)
        ]

    def end_offset(self) -> int:
        """The offset after the last valid batch (scans from the last index entry)."""
        _, positions = self.offset_index()
        last = last_valid_offset(self.log_path, int(positions[-1]) if len(positions) else 0)
        return self.base_offset if last is None else last + 1


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentFiles, ...]
    log_start_offset: int

    def log_end_offset(self) -> int:
        if not self.segments:
            return self.log_start_offset
        return max(self.segments[-1].end_offset(), self.log_start_offset)


def _checkpoint(data_dir: str, name: str, topic: str) -> dict[int, int]:
    entries = OffsetCheckpointFile(Path(data_dir) / name).read()
    return {tp.partition: off for tp, off in entries.items() if tp.topic == topic}


def read_high_watermarks(data_dir: str, topic: str) -> dict[int, int]:
    """HW per partition of ``topic`` from the broker's ``replication-offset-checkpoint``.

    A partition missing from it (or a missing file) has nothing known committed,
    as on a broker that has not yet checkpointed.
    """
    return _checkpoint(data_dir, HW_CHECKPOINT, topic)


def list_partitions(data_dir: str, topic: str) -> list[PartitionFiles]:
    """Partition directories ``<topic>-<n>`` of ``data_dir``, ordered by partition."""
    pattern = re.compile(re.escape(topic) + r"-(\d+)$")
    starts = _checkpoint(data_dir, LOG_START_CHECKPOINT, topic)
    parts = []
    for entry in sorted(os.scandir(data_dir), key=lambda e: e.name):
        m = pattern.match(entry.name)
        if not m or not entry.is_dir():
            continue
        partition = int(m.group(1))
        bases = sorted(
            (int(s.group(1)), os.path.join(entry.path, s.group(0)))
            for s in map(SEGMENT_NAME.match, os.listdir(entry.path)) if s
        )
        segments = tuple(
            SegmentFiles(path, base, bases[i + 1][0] if i + 1 < len(bases) else None)
            for i, (base, path) in enumerate(bases)
        )
        first = segments[0].base_offset if segments else 0
        parts.append(PartitionFiles(topic, partition, entry.path, segments,
                                    max(first, starts.get(partition, first))))
    return sorted(parts, key=lambda p: p.partition)
