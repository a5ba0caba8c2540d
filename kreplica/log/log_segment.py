"""LogSegment: one ``.log`` file of whole v2 batches plus its ``.index`` and ``.timeindex``.

Theory of operation (Kafka's LogSegment).  Files are named by the segment's base
offset in 20 digits.  The active segment's ``.log`` is preallocated to
``segment.bytes`` and mapped; batches are appended with ``pwrite`` (the leader's
freshly encoded ones, a follower's copies), which lands them in the same page cache
the map reads, without a page fault per new page.  Ready batches (``append_run``)
are framed first and CRC-checked while they are copied (see ``_batch_run.pyx``).  Every
``index.interval.bytes`` of batches gets an offset-index entry (the batch's base
offset and position) and, when the max timestamp grew, a time-index entry.
Reads go index -> nearest position -> a header walk in Cython to the batch that
holds the offset, and return a zero-copy view of whole batches.  On roll or close
the files are trimmed and the write maps dropped; a sealed segment is mapped
read-only only when read.  Bytes past the data are always zero (truncation zeroes
them), so a crash can never bring truncated batches back.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import KafkaStorageError
from ..records import restamp_batches
from ._batch_run import BatchRun, frame_batches
from ._segment import find_batch, find_timestamp, span_batches, stamp_log_append_time, walk_to_end, zero_range
from .log_config import LogConfig
from .mapped_file import MappedFile
from .offset_index import OffsetIndex
from .time_index import TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
# A segment rolls before an offset lies more than Int.MaxValue past its base, as Kafka's
# does: index files hold relative offsets that Kafka's tools read as signed ints.
MAX_RELATIVE_OFFSET = 0x7FFFFFFF
#: How far ahead of the writes the ``.log`` has its disk blocks reserved (see MappedFile).
LOG_RESERVE_CHUNK = 8 << 20
#: How many recent appends remember where they start (``read``'s shortcut).
RECENT_APPENDS = 256


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    batches: int
    error: str | None  # why the scan stopped early (None: clean end of data)
    epoch_starts: tuple[tuple[int, int], ...] = ()  # (leader epoch, first offset) where it rises


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, created_ms: int) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        stem = os.path.join(directory, file_name(base_offset, ""))  # one join for the three files
        self.log_file = MappedFile(stem + LOG_SUFFIX, LOG_RESERVE_CHUNK)
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX, base_offset, config.segment_index_bytes,
                                         writable=False)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX, base_offset, config.segment_index_bytes,
                                    writable=False)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index_entry = 0
        # base offset -> position of the first batch of recent appends, oldest first: a
        # follower fetches from where an earlier append (its previous fetch) began, and
        # finds it here instead of in the offset index
        self._recent: dict[int, int] = {}

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int,
               min_bytes: int = 0) -> "LogSegment":
        """A new, empty, active segment (its files must not hold data)."""
        seg = cls(directory, base_offset, config, now_ms)
        try:
            seg.activate(min_bytes)
        except KafkaStorageError:
            seg.delete()
            raise
        return seg

    @classmethod
    def load(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> "LogSegment":
        """A segment closed cleanly: its indexes are trusted and its end is found by
        walking the headers after the last index entry.  Its age (``segment.ms``) counts
        from ``now_ms``, the log's clock at load, as Kafka's does: a file's wall-clock
        mtime means nothing to a log on virtual time."""
        seg = cls(directory, base_offset, config, now_ms)
        try:
            length = os.path.getsize(seg.log_file.filename)
        except OSError as e:
            raise KafkaStorageError(f"opening {seg.log_file.filename}: {e}") from e
        _, position = seg.offset_index.lookup(1 << 62)
        if position > length:
            raise KafkaStorageError(f"{seg.offset_index.file.filename}: entry beyond the end of the log")
        seg._set_tail(length, position)
        seg.max_timestamp, seg.offset_of_max_timestamp = max(
            seg.time_index.last_entry(), (seg.max_timestamp, seg.offset_of_max_timestamp)
        )
        return seg

    def _set_tail(self, length: int, from_position: int) -> None:
        mm = self.log_file.map(length)
        if mm is None:
            self.size, self.next_offset = 0, self.base_offset
            return
        try:
            end, last, max_ts, off_max = walk_to_end(mm, from_position, length)
        except KafkaStorageError as e:
            raise self._damage(e) from None
        self.size = end
        self.bytes_since_index_entry = end - from_position
        if last >= 0:
            self.next_offset = last + 1
        elif from_position:
            raise KafkaStorageError(f"{self.log_file.filename}: no batch at indexed position {from_position}")
        if max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, off_max

    def activate(self, min_bytes: int = 0) -> None:
        """Map the segment for append (it becomes the log's active segment)."""
        if self.log_file.writable:
            return
        length = max(self.config.segment_bytes, self.size + min_bytes)
        self.log_file.open_for_write(self.size, length)
        self.offset_index.open_for_append()
        self.time_index.open_for_append()

    def recover(self) -> RecoveryResult:
        """Re-validate every batch (CRC, offsets), cut the file at the first bad one and
        rebuild both indexes from what remains."""
        try:
            length = os.path.getsize(self.log_file.filename)
        except OSError as e:
            raise KafkaStorageError(f"recovering {self.log_file.filename}: {e}") from e
        mm = self.log_file.map(length)
        run = None if mm is None else frame_batches(mm, check_crc=True)
        error = None
        if run is not None:
            bad = run.keep_in_order(self.base_offset)
            error = bad or run.error
        count, valid = (run.count, run.nbytes) if run is not None else (0, 0)
        del mm
        self.log_file.close()
        if valid < length:
            self.log_file.truncate_file(valid)
        self.size = valid
        self._recent.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self.activate()
        self.bytes_since_index_entry = 0
        if count:
            self._put_index(self._index_entries(run, 0))
            self.next_offset = run.last_offset + 1
        return RecoveryResult(valid, count, error, tuple(run.epoch_starts(-1)) if count else ())

    # -- appending -----------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        return self.log_file.length if self.log_file.writable else self.size

    def append_encoded(self, batch: memoryview, base_offset: int, last_offset: int, max_timestamp: int) -> int:
        """Append one batch encoded elsewhere (the leader's scratch buffer); the caller
        checked it fits.  Returns the position it went to."""
        pos = self.size
        self.log_file.write_at(pos, batch)
        self._commit(pos, len(batch), base_offset, last_offset, max_timestamp)
        self._remember(base_offset, pos)
        return pos

    def _remember(self, base_offset: int, pos: int) -> None:
        recent = self._recent
        recent[base_offset] = pos
        if len(recent) > RECENT_APPENDS:
            del recent[next(iter(recent))]

    def _commit(self, pos: int, n: int, base: int, last: int, max_ts: int) -> None:
        """Account for one batch written at ``pos`` (the common leader path, no arrays)."""
        self.size = pos + n
        self.next_offset = last + 1
        if max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, last
        if self.bytes_since_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(base, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += n

    def append_run(self, data, run: BatchRun, restamp_epoch: int | None = None,
                   log_append_time: int | None = None) -> int:
        """Copy framed batches (``data``, walked into ``run``) to the end of the segment,
        checking their CRCs on the way; returns the position they went to.

        With ``restamp_epoch`` the copies get ``run``'s offsets (already rebased by the
        caller) and that leader epoch in place, and ``run``'s max timestamps (the records'
        own, CreateTime); with ``log_append_time`` they are stamped with it (LogAppendTime).  Nothing counts as appended before all of it is written
        and checked; a bad batch raises with the segment unchanged.  The caller checked
        that they fit."""
        pos = self.size
        if log_append_time is not None:
            run.set_max_timestamps(log_append_time)
        entries = self._index_entries(run, pos)  # checks the indexes have room first
        self.log_file.write_run(pos, data, run)
        if restamp_epoch is not None or log_append_time is not None:
            self._stamp_copies(pos, run, restamp_epoch, log_append_time)
        self._put_index(entries)
        self.size = pos + run.nbytes
        self.next_offset = run.last_offset + 1
        self._remember(run.base_offset, pos)
        return pos

    def _stamp_copies(self, pos: int, run: BatchRun, restamp_epoch: int | None,
                      log_append_time: int | None) -> None:
        mm = self.log_file.map(pos + run.nbytes)
        assert mm is not None
        with memoryview(mm)[pos:pos + run.nbytes] as copy:
            if restamp_epoch is not None and restamp_batches(copy, run.base_offset, restamp_epoch) != run.last_offset:
                zero_range(mm, pos, pos + run.nbytes)
                raise KafkaStorageError(f"restamping batches at {pos} did not end at offset {run.last_offset}")
            if log_append_time is not None:
                stamp_log_append_time(copy, run.positions(), log_append_time)
            elif restamp_epoch is not None:  # a producer's batches: their max timestamps are the records'
                run.stamp_create_time(copy)

    def _index_entries(self, run: BatchRun, pos: int) -> tuple:
        """The index entries for ``run`` written at ``pos`` and the running values after it
        (Kafka's rule, in Cython).  The indexes are sparse: when many batches at a small
        ``index.interval.bytes`` want more entries than an index has left, the append
        keeps the first that fit (the full index rolls the segment at the next append)."""
        oi, ti = self.offset_index, self.time_index
        last_ts, last_ts_offset = ti.last_entry() if ti.entries else (-1, -1)
        offsets, times, *running = run.index_entries(
            pos, self.base_offset, self.config.index_interval_bytes, self.bytes_since_index_entry,
            self.max_timestamp, self.offset_of_max_timestamp, oi.last_entry()[0] if oi.entries else -1,
            last_ts, last_ts_offset)
        offsets, times = offsets[:oi.room_bytes()], times[:ti.room_bytes()]
        oi.check_room(len(offsets))
        ti.check_room(len(times))
        return (offsets, times, *running)

    def _put_index(self, planned: tuple) -> None:
        offsets, times, self.bytes_since_index_entry, self.max_timestamp, self.offset_of_max_timestamp = planned
        self.offset_index.append_encoded(offsets)
        self.time_index.append_encoded(times)

    def view(self, start: int, end: int) -> memoryview:
        """A zero-copy view of bytes already written (e.g. to restamp them in place)."""
        mm = self.log_file.map(self.size)
        assert mm is not None
        return memoryview(mm)[start:end]

    def index_is_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def takes(self, base_offset: int, last_offset: int, nbytes: int, now_ms: int) -> bool:
        """Whether an append goes here with no roll: open for write, holding data, with room
        in the file and the indexes, and younger than ``segment.ms``."""
        f = self.log_file
        return (f.writable and 0 < self.size and self.size + nbytes <= f.length
                and self.base_offset <= base_offset and last_offset - self.base_offset <= MAX_RELATIVE_OFFSET
                and now_ms - self.created_ms < self.config.segment_ms and not self.index_is_full())

    def fits(self, base_offset: int, last_offset: int, nbytes: int) -> bool:
        return (self.size + nbytes <= self.capacity
                and last_offset - self.base_offset <= MAX_RELATIVE_OFFSET and base_offset >= self.base_offset)

    # -- reading -------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int,
             prefault: bool = False) -> tuple[memoryview, int] | None:
        """Whole batches from the one holding ``offset``: ``(view, its base offset)``, or None
        when this segment has nothing at or after ``offset`` wholly below ``max_offset``.
        ``prefault``: the caller reads every byte, map them all now (MappedFile.prefault)."""
        mm = self.log_file.map(self.size)
        if mm is None:
            return None
        pos = self._recent.get(offset)
        if pos is None:
            _, pos = self.offset_index.lookup(offset)
        try:
            pos, base = find_batch(mm, pos, self.size, offset)
            if base < 0 or base >= max_offset:
                return None
            end = span_batches(mm, pos, self.size, max_bytes, max_offset)
        except KafkaStorageError as e:  # damage: never the end of the data, or the next segment's
            raise self._damage(e) from None
        if end == pos:
            return None
        if prefault:
            self.log_file.prefault(pos, end)
        return memoryview(mm)[pos:end].toreadonly(), base

    def position_of(self, offset: int) -> tuple[int, int]:
        """``(position, base offset)`` of the batch holding ``offset``; base -1 if none."""
        mm = self.log_file.map(self.size)
        if mm is None:
            return 0, -1
        _, pos = self.offset_index.lookup(offset)
        try:
            return find_batch(mm, pos, self.size, offset)
        except KafkaStorageError as e:
            raise self._damage(e) from None

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(position, base offset)`` of the first batch whose max timestamp >= ``timestamp``."""
        mm = self.log_file.map(self.size)
        if mm is None or self.max_timestamp < timestamp:
            return None
        _, offset = self.time_index.lookup(timestamp)
        pos, _ = self.position_of(offset)
        try:
            pos, base, _ = find_timestamp(mm, pos, self.size, timestamp)
        except KafkaStorageError as e:
            raise self._damage(e) from None
        return (pos, base) if base >= 0 else None

    def _damage(self, e: KafkaStorageError) -> KafkaStorageError:
        """A header walk's KafkaStorageError (a damaged header), naming this segment's file."""
        return KafkaStorageError(f"{self.log_file.filename}: {e.message}")

    # -- truncation, flush, close --------------------------------------------------------

    def truncation_point(self, offset: int) -> tuple[int, int]:
        """``(position, base offset)`` where ``truncate_to(offset)`` cuts (base -1: nothing
        to cut), once every header that truncation walks was found sound: a damaged one
        raises KafkaStorageError here, before anything changed."""
        pos, base = self.position_of(offset)
        if base >= 0:
            _, tail_from = self.offset_index.lookup(base - 1)  # where the new tail is walked from
            try:
                walk_to_end(self.log_file.map(self.size), tail_from, pos)
            except KafkaStorageError as e:
                raise self._damage(e) from None
        return pos, base

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and all after it; returns the bytes dropped.

        Only the active (writable) segment is truncated; the dropped bytes are zeroed,
        or, while a reader's view may still show them, left to that view in the old
        file (``MappedFile.cut_for_write``).  A damaged batch header on the way raises
        KafkaStorageError with nothing changed (it was taken for the end of the data,
        and the truncation reported done while nothing was cut).
        """
        pos, base = self.truncation_point(offset)
        self.activate()
        if base < 0:
            return 0
        dropped = self.size - pos
        self._recent.clear()
        durable = self.log_file.flushed
        if not self.log_file.cut_for_write(pos):
            zero_range(self.log_file.map(self.size), pos, self.size)
            if pos < durable:
                # The cut batches were on disk: left in the page cache, the zeroes could
                # be lost to a power loss, and the next open would find the batches again,
                # CRCs intact, past a point every replica has since agreed to drop.
                self.log_file.sync_range(pos, durable)
        self.offset_index.truncate_to(base)
        self.time_index.truncate_to(base)
        self.log_file.flushed = min(self.log_file.flushed, pos)
        last_indexed = self.offset_index.last_entry()[1] if self.offset_index.entries else 0
        self.size = pos
        self.next_offset = base
        ts, off = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, off
        self.bytes_since_index_entry = 0
        self._set_tail(pos, last_indexed)
        return dropped

    def flush(self) -> None:
        if self.log_file.writable:
            self.log_file.flush(self.size)
            self.offset_index.flush()
            self.time_index.flush()
        else:
            self.log_file.fsync()
            self.offset_index.file.fsync()
            self.time_index.file.fsync()

    def drop_cache(self) -> None:
        """Release the pages of flushed data (the kernel rereads them if needed)."""
        self.log_file.drop_cache(self.log_file.flushed)

    def seal(self) -> None:
        """Stop appending: record the final time-index entry, trim, unmap for write.

        No fsync here (Kafka flushes rolled segments later too): durability comes from
        ``Log.flush``, and recovery re-scans everything after the recovery point."""
        if not self.log_file.writable:
            return
        if self.time_index.writable and self.size:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.log_file.seal(self.size)
        self.offset_index.seal()
        self.time_index.seal()

    def close(self) -> None:
        self.seal()
        self.log_file.close()
        self.offset_index.file.close()
        self.time_index.file.close()

    def delete(self) -> None:
        self.log_file.delete()
        self.offset_index.delete()
        self.time_index.delete()

    @property
    def largest_timestamp(self) -> int:
        return self.max_timestamp

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
