"""Read-only view of a broker's log directory, for planning Spark reads.

Planning must stay cheap and must never write into a live broker's directory,
so this module reads only directory listings, the sparse ``.index`` and
``.timeindex`` files and the offset checkpoints; it does not open a
:class:`kreplica.log.Log` (which could recover or truncate).  Record data is
touched only to find a log end offset for uncommitted streaming.

Index semantics relied on (Kafka's ``LogSegment.append``): an ``.index`` entry
``(o, p)`` says the batch whose base offset is ``o`` starts at position ``p``,
and a ``.timeindex`` entry ``(T, o)`` says that every record at an offset <= ``o``
has a timestamp <= ``T`` (it records the running maximum).  Both files may be
preallocated with zeros: only the strictly increasing prefix is used.

The index files are hints, never the truth.  On a live broker a truncation
only lowers the entry count the log keeps in memory: the old entries stay on
disk past it, still increasing, naming batches that were replaced.  So an
offset-index entry is believed only up to the last one whose position really
holds a batch with its base offset (one header read while the last entry checks
out, as it does unless the log was truncated while open).  A time-index entry
cannot be checked that way, so time pruning uses only index files trimmed to
their entries, as a segment is when rolled or closed.  Readers check the
position they start from again (:mod:`kreplica.spark.segment_reader`).
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..log.checkpoints import OffsetCheckpointFile
from .segment_reader import DataEnd, SegmentSlice, batch_base_at, data_end

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
HW_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
_OFFSET_ENTRY = np.dtype([("rel", ">u4"), ("pos", ">u4")])
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">u4")])
# Fresh listings tried when the listed last segment vanishes before its tail is scanned
# (each vanishing needs a roll and a retention pass in between).
_RELISTS = 3


@dataclass(frozen=True, slots=True)
class OffsetBounds:
    """Offsets ``[lo, hi)`` to read; ``hi`` None means to the log end.  ``known_end``
    is where the data is known to reach (the committed end, a stream's end offset),
    None when only the log's end says (uncommitted reads): a pushed-down ``hi``
    promises no data, so the active segment may end short of it without error."""

    lo: int
    hi: int | None
    known_end: int | None


def _increasing_prefix(keys: np.ndarray) -> int:
    """Length of the strictly increasing prefix (a zero-filled tail breaks it)."""
    if len(keys) < 2:
        return len(keys)
    breaks = np.flatnonzero(np.diff(keys.astype(np.int64)) <= 0)
    return int(breaks[0]) + 1 if len(breaks) else len(keys)


def _index_prefix(path: Path, dtype: np.dtype, keys: tuple[str, ...]) -> tuple[np.ndarray, bool]:
    """The leading entries of an index file whose ``keys`` all strictly increase, and
    whether the file holds nothing else (it was trimmed).  Reads only as far as the
    entries go: a live segment's index is preallocated, megabytes of zeros."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return np.zeros(0, dtype), True
    with f:
        size = os.fstat(f.fileno()).st_size
        total = size // dtype.itemsize
        count = min(total, 4096)
        while True:
            raw = os.pread(f.fileno(), count * dtype.itemsize, 0)
            e = np.frombuffer(raw, dtype, count=len(raw) // dtype.itemsize)
            n = min(_increasing_prefix(e[k]) for k in keys)
            if n < len(e) or len(e) >= total:
                break
            count = min(total, count * 8)
    return e[:n], n == total and size % dtype.itemsize == 0


def _believed(log_path: str, offsets: np.ndarray, positions: np.ndarray) -> int:
    """How many leading offset-index entries to believe: up to the last whose
    position holds a valid batch with the entry's base offset."""
    n = len(offsets)
    if not n:
        return 0
    try:
        f = open(log_path, "rb")
    except FileNotFoundError:
        # Retention deleted the segment since it was listed (its ``.log`` goes before its
        # indexes): believe nothing, and leave the deletion for the reader to report.
        return 0
    with f:
        fd = f.fileno()
        if batch_base_at(fd, int(positions[-1])) == offsets[-1]:
            return n
        # Entries left by a truncation mostly point past the data, into zeros or
        # beyond the file: bisect those away, then walk back to an entry that checks
        # out.  Zeros inside the data can only make this stop early, believing less.
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if any(os.pread(fd, 12, int(positions[mid]))):
                lo = mid + 1
            else:
                hi = mid
        for i in range(lo - 1, -1, -1):
            if batch_base_at(fd, int(positions[i])) == offsets[i]:
                return i + 1
    return 0


@dataclass(frozen=True, slots=True)
class IndexHints:
    """What a segment's index files may be trusted for (see the module docstring)."""

    offsets: np.ndarray  # base offsets of batches, increasing
    positions: np.ndarray  # where those batches start
    timestamps: np.ndarray  # time-index entries usable for pruning (empty if none are)
    timestamp_offsets: np.ndarray


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """One segment: its ``.log`` and the offsets its indexes name."""

    log_path: str
    base_offset: int
    next_base_offset: int | None  # None for the active (last) segment

    def hints(self) -> IndexHints:
        e, trimmed = _index_prefix(Path(self.log_path).with_suffix(".index"), _OFFSET_ENTRY, ("rel", "pos"))
        # A lone first entry (0, 0) is a real entry only in a non-empty segment;
        # either way it names position 0, which is always a batch start.
        offsets = e["rel"].astype(np.int64) + self.base_offset
        positions = e["pos"].astype(np.int64)
        believed = _believed(self.log_path, offsets, positions)
        t, t_trimmed = _index_prefix(Path(self.log_path).with_suffix(".timeindex"), _TIME_ENTRY, ("ts",))
        if len(t) == 1 and t["ts"][0] == 0 and t["rel"][0] == 0:
            t = t[:0]  # an all-zero preallocated file
        # Trimmed files (nothing past the entries) cannot hold stale entries.
        if not (trimmed and t_trimmed and believed == len(e)):
            t = t[:0]
        return IndexHints(offsets[:believed], positions[:believed], t["ts"].astype(np.int64),
                          t["rel"].astype(np.int64) + self.base_offset)

    def offset_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(absolute base offsets, batch positions) of the believed ``.index`` entries."""
        h = self.hints()
        return h.offsets, h.positions

    def time_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(max timestamp so far, absolute offset) of the usable ``.timeindex`` entries."""
        h = self.hints()
        return h.timestamps, h.timestamp_offsets

    def slices(self, bounds: OffsetBounds, timestamp_lo: int | None, max_bytes: int | None, *,
               topic: str, partition: int, on_corrupt: str,
               corrupt_report: str | None, on_missing: str = "fail") -> list[SegmentSlice]:
        """Ranges of this segment that may hold offsets in ``bounds`` with
        timestamps >= ``timestamp_lo``, cut at batch starts the offset index names: a
        slice ends at the first indexed batch at least ``max_bytes`` past its start, so
        all but the last hold at least ``max_bytes`` and may run over by up to one index
        interval and a batch."""
        lo, hi = bounds.lo, bounds.hi
        seg_end = self.next_base_offset
        if self._misses(lo, hi):
            return []
        h = self.hints()
        if timestamp_lo is not None:
            k = int(np.searchsorted(h.timestamps, timestamp_lo, side="left")) - 1
            if k >= 0:  # every record up to that entry's offset is older than timestamp_lo
                lo = max(lo, int(h.timestamp_offsets[k]) + 1)
            if self._misses(lo, hi):
                return []
        offsets, positions = h.offsets, h.positions
        k = int(np.searchsorted(offsets, lo, side="right")) - 1
        # Entry j's batch starts at an offset >= hi: the data wanted ends before it.
        j = len(offsets) if hi is None else int(np.searchsorted(offsets, hi, side="left"))
        end = int(positions[j]) if j < len(offsets) else None
        # Cuts are (position, base offset) of batches; the first is where reading starts.
        cuts = [(int(positions[k]), int(offsets[k])) if k >= 0 else (0, self.base_offset)]
        if max_bytes is not None:
            for i in range(k + 1, j):
                if positions[i] - cuts[-1][0] >= max_bytes:
                    cuts.append((int(positions[i]), int(offsets[i])))
        # Offsets the last slice must reach before it may stop: a sealed
        # segment's data runs to the next base offset, the active one's to the
        # known end (none for an uncommitted read), and neither past hi.
        reach = bounds.known_end if seg_end is None else seg_end
        need = None if reach is None else (reach if hi is None else min(hi, reach))
        out = []
        for i, (position, offset) in enumerate(cuts):
            last = i + 1 == len(cuts)
            slice_hi = hi if last else cuts[i + 1][1]
            out.append(SegmentSlice(
                topic=topic, partition=partition, log_path=self.log_path,
                base_offset=self.base_offset, start_position=position,
                end_position=end if last else cuts[i + 1][0],
                offset_lo=lo if i == 0 else offset, offset_hi=slice_hi,
                need_offset=need if last else slice_hi, timestamp_lo=timestamp_lo,
                on_corrupt=on_corrupt, corrupt_report=corrupt_report, start_offset=offset,
                on_missing=on_missing,
            ))
        return out

    def _misses(self, lo: int, hi: int | None) -> bool:
        """True when ``[lo, hi)`` and this segment's offsets do not meet."""
        return ((hi is not None and hi <= max(lo, self.base_offset))
                or (self.next_base_offset is not None and lo >= self.next_base_offset))

    def data_end(self, hints: IndexHints | None = None) -> DataEnd:
        """Where the valid batches end (scanned from the last believed index entry)."""
        positions = (hints or self.hints()).positions
        return data_end(self.log_path, int(positions[-1]) if len(positions) else 0)

    def end_offset(self) -> int:
        """The offset after the last valid batch."""
        last = self.data_end().last_offset
        return self.base_offset if last is None else last + 1


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentFiles, ...]
    log_start_offset: int

    def log_end_offset(self) -> int:
        return self._at_tail(PartitionFiles._log_end_offset)

    def _log_end_offset(self) -> int:
        if not self.segments:
            return self.log_start_offset
        return max(self.segments[-1].end_offset(), self.log_start_offset)

    def committed_end(self, hw: int) -> int:
        return self._at_tail(lambda part: part._committed_end(hw))

    def _at_tail(self, measure: Callable[[PartitionFiles], int]) -> int:
        """``measure(self)``, taken again on a fresh listing of the directory when the
        listed last segment is gone: since the listing it was rolled and retention
        deleted it.  The answer is then the one a listing a moment later gives."""
        part = self
        for _ in range(_RELISTS):
            try:
                return measure(part)
            except FileNotFoundError:
                part = part.relisted()
        return measure(part)

    def relisted(self) -> PartitionFiles:
        """This partition as its directory is now (no segments if the directory is gone)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return replace(self, segments=())
        return replace(self, segments=_segments(self.directory, names))

    def _committed_end(self, hw: int) -> int:
        """Where committed records end: below the HW checkpoint, and below the log end.

        A broker that truncates below its HW (a follower after an unclean election)
        lowers the HW in memory at once but checkpoints it later, so the file may name
        an HW past the data.  Only a log that ends cleanly (in zeros or at the end of
        the file) clamps it: a bad batch below the HW stays for the reader to report.
        """
        active = self.segments[-1] if self.segments else None
        if active is None or hw <= active.base_offset:
            return hw
        hints = active.hints()
        if len(hints.offsets) and hw <= hints.offsets[-1]:
            return hw
        end = active.data_end(hints)
        leo = active.base_offset if end.last_offset is None else end.last_offset + 1
        return min(hw, leo) if end.clean else hw


def _segments(directory: str, names: list[str]) -> tuple[SegmentFiles, ...]:
    """The segments among a partition directory's file ``names``, in offset order."""
    bases = sorted(
        (int(s.group(1)), os.path.join(directory, s.group(0)))
        for s in map(SEGMENT_NAME.match, names) if s
    )
    return tuple(
        SegmentFiles(path, base, bases[i + 1][0] if i + 1 < len(bases) else None)
        for i, (base, path) in enumerate(bases)
    )


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
        try:
            names = os.listdir(entry.path)
        except FileNotFoundError:
            # Renamed away (``<topic>-<n>.<id>-delete``: the topic is being deleted) since the
            # scan above: the listing a moment later, which would not have found it.
            continue
        segments = _segments(entry.path, names)
        first = segments[0].base_offset if segments else 0
        parts.append(PartitionFiles(topic, partition, entry.path, segments,
                                    max(first, starts.get(partition, first))))
    return sorted(parts, key=lambda p: p.partition)
