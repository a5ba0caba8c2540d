"""Log: an ordered run of segments with LEO, HW, log start offset and recovery point.

Theory of operation (Kafka's LocalLog + UnifiedLog).  Segments are ordered by base
offset; only the last is mapped for write.  Appends roll to a new segment on
``segment.bytes``, ``segment.ms`` or a full index.  The leader path encodes records
into a warm scratch buffer and appends it (``append_as_leader``), or copies ready
producer batches and restamps their offsets and epoch in place in the segment
(``append_batches_as_leader``); a follower copies the leader's batches after
checking CRCs and offset contiguity (``append_as_follower``).  A bad batch raises before a byte is appended.

Invariants: log_start_offset <= high_watermark <= log_end_offset, and
recovery_point <= log_end_offset.  The HW moves only through
``maybe_increment_high_watermark`` / ``update_high_watermark`` (seed 004: the
leader's HW is the min LEO of the ISR, never backwards, never above its LEO).
The flush policy (``flush.messages``, ``flush.ms``) fsyncs and moves the recovery
point.  ``close`` writes a clean-shutdown marker; opening without one re-validates
every batch after the recovery point, cuts at the first torn or corrupt batch and
rebuilds the indexes, so nothing flushed is lost and nothing torn survives.
"""
from __future__ import annotations

import bisect
import operator
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import CorruptMessage, InvalidRecord, KafkaStorageError, OffsetOutOfRange, RecordTooLarge
from ..fast_init import fast_init
from ..records import batch_at, decode_records, encode_batch_into
from ..runtime import Clock, SystemClock
from .checkpoints import CheckpointFile, LeaderEpochCheckpointFile, fsync_dir
from .leader_epoch_cache import LeaderEpochCache
from .log_config import LogConfig
from .log_dir import (CLEAN_SHUTDOWN, LEADER_EPOCH_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, DirLock,
                      check_log_dir, segment_bases)
from ._batch_run import BatchRun, frame_append, frame_batches, frame_producer_append
from ._segment import stamp_log_append_time
from .log_segment import MAX_RELATIVE_OFFSET, LogSegment, RecoveryResult
from .mapped_file import zero_tail

# ListOffsets' special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


@fast_init
@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    num_records: int
    num_batches: int
    valid_bytes: int
    log_start_offset: int
    log_append_time: int = -1  # the time a leader stamped, under LogAppendTime; -1 under CreateTime


class LogSlice:
    """Whole batches read from a segment: a zero-copy view plus where it starts.

    ``view`` is a memoryview into the segment's map (valid while it is held, even
    after the segment rolls or is deleted); ``bytes(slice)`` copies.
    """

    __slots__ = ("view", "first_offset")

    def __init__(self, view: memoryview, first_offset: int) -> None:
        self.view = view
        self.first_offset = first_offset

    def __len__(self) -> int:
        return len(self.view)

    def __bytes__(self) -> bytes:
        return self.view.tobytes()

    def tobytes(self) -> bytes:
        return self.view.tobytes()

    @property
    def nbytes(self) -> int:
        return self.view.nbytes

    def release(self) -> None:
        self.view.release()

    def __repr__(self) -> str:
        return f"LogSlice(first_offset={self.first_offset}, bytes={len(self.view)})"


_EMPTY = memoryview(b"")
_FIRST = np.zeros(1, dtype=np.int64)
_scratch = threading.local()


def _encode(items: list, base: int, leader_epoch: int, ts: int) -> memoryview:
    """Encode one batch into this thread's reusable buffer (its pages stay warm, which
    is what makes the encoder fast); returns a view of the batch."""
    buf = getattr(_scratch, "buf", None)
    if buf is None:
        buf = _scratch.buf = bytearray(1 << 20)
    n = encode_batch_into(buf, 0, items, base, leader_epoch, ts)
    if n < 0:
        buf = _scratch.buf = bytearray(-n + (-n >> 2))
        n = encode_batch_into(buf, 0, items, base, leader_epoch, ts)
    return memoryview(buf)[:n]


def _int(value: Any, name: str) -> int:
    """``value`` as an int, or a TypeError naming ``name``: an offset given as a str or a
    float would otherwise fail in some comparison deep inside (or, a float, be taken).
    Integer types other than int (numpy's) pass through ``__index__``; bool does not."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return operator.index(value)


def _buffer(data: Any) -> memoryview:
    return data.view if isinstance(data, LogSlice) else memoryview(data).cast("B")


class Log:
    def __init__(self, directory: Path, config: LogConfig, clock: Clock, lock: DirLock) -> None:
        self.dir = directory
        self.config = config
        self._clock = clock
        self._lock = lock
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self._log_start = 0
        self._hw = 0
        self._recovery_point = 0
        self._persisted_rp_segment = -1
        self._unflushed_records = 0
        self._last_flush_ms = clock.now_ms()
        self._closed = False
        self._log_append_time = config.message_timestamp_type == "LogAppendTime"
        self._rp_file: CheckpointFile[int] = CheckpointFile(
            os.path.join(directory, RECOVERY_POINT_CHECKPOINT), str, lambda parts: int(parts[0])
        )
        self.leader_epoch_cache = LeaderEpochCache(
            LeaderEpochCheckpointFile(os.path.join(directory, LEADER_EPOCH_CHECKPOINT)), lambda: self._leo
        )
        self.last_recovery: list[RecoveryResult] = []

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, config: LogConfig | dict[str, Any] | None = None,
             clock: Clock | None = None, *, recovery_point: int | None = None,
             log_start_offset: int | None = None) -> "Log":
        """Open (or create) the log in ``path``, recovering it if it was not closed cleanly.

        ``recovery_point`` / ``log_start_offset`` may come from the broker's
        checkpoint files; otherwise the log's own recovery point and its first
        segment are used.
        """
        if not isinstance(config, LogConfig):
            config = LogConfig.from_dict(config)
        if recovery_point is not None:
            recovery_point = _int(recovery_point, "recovery_point")
        if log_start_offset is not None:
            log_start_offset = _int(log_start_offset, "log_start_offset")
        directory = Path(path)
        check_log_dir(directory)  # refuses a directory that is not a log, changing nothing
        try:
            if not directory.is_dir():
                directory.mkdir(parents=True, exist_ok=True)
                # The new directory's entry must be durable in its parent, or a power loss
                # could take the whole partition, flushed data included.
                fsync_dir(directory.parent)
        except OSError as e:
            raise KafkaStorageError(f"creating {directory}: {e}") from e
        lock = DirLock(directory)
        try:
            # Left-over temp and orphan index files are cleared under the lock: a refused
            # second opener must not delete the open log's temp files.
            bases = segment_bases(directory)
            log = cls(directory, config, clock or SystemClock(), lock)
        except BaseException:
            lock.release()
            raise
        try:
            log._load(bases, recovery_point, log_start_offset)
        except BaseException:
            log._release_all()
            raise
        return log

    def _load(self, bases: list[int], recovery_point: int | None, log_start_offset: int | None) -> None:
        marker = os.path.join(self.dir, CLEAN_SHUTDOWN)
        had_marker = clean = os.path.exists(marker)
        saved = self._rp_file.read_entries()
        rp = recovery_point if recovery_point is not None else (saved[0] if saved else 0)
        # Segments before the one holding the recovery point were flushed: trusted.
        flushed = dirty_from = len(bases) if clean else max(bisect.bisect_right(bases, rp) - 1, 0)
        for i, base in enumerate(bases):
            if i < dirty_from:
                try:
                    self._add(LogSegment.load(self.dir, base, self.config, self._clock.now_ms()))
                    continue
                except KafkaStorageError:
                    dirty_from = i  # its index or a batch header is damaged: rebuild from here
                    clean = False
            seg = LogSegment(self.dir, base, self.config, self._clock.now_ms())
            result = seg.recover()
            self.last_recovery.append(result)
            self._add(seg)
            hole = i + 1 < len(bases) and seg.next_offset != bases[i + 1]
            if hole or (result.error is not None and i >= flushed):
                # Cut at a bad batch, or short of where the next segment starts (its tail
                # read back as zeros after a power loss): the later segments, all written
                # after the last flush, can no longer follow on contiguously.  (A sealed
                # segment may end in zeros legitimately: one trimmed while a reader still
                # mapped it keeps its reserved length.)  A flushed segment recovered only
                # because a header in it was found damaged keeps the later, flushed ones
                # unless the cut left a hole: garbage past its data costs nothing else.
                for later in bases[i + 1:]:
                    LogSegment(self.dir, later, self.config, 0).delete()
                break
            if i < len(bases) - 1:
                seg.seal()
        if not self._segments:
            start = log_start_offset or 0
            self._add(LogSegment.create(self.dir, start, self.config, self._clock.now_ms()))
        self._active().activate()
        self._leo = self._segments[-1].next_offset
        self._log_start = min(max(log_start_offset or 0, self._bases[0]), self._leo)
        self._hw = self._log_start
        cache = self.leader_epoch_cache
        cache.truncate_from_end(self._leo)
        cache.truncate_from_start(self._log_start)
        for result in self.last_recovery:  # epochs of batches appended after the last flush
            for epoch, start in result.epoch_starts:
                if epoch > cache.latest_epoch and start < self._leo:  # the flush below persists them
                    cache.assign(epoch, max(start, self._log_start), durable=False)
        if had_marker:  # from now on a crash must be detected
            os.unlink(marker)
            fsync_dir(self.dir)
        if clean:
            self._recovery_point = self._leo
        else:
            self._recovery_point = min(rp, self._leo)
            self.flush()  # what recovery kept is made durable before anything new lands
        start = log_start_offset or 0
        if start > self._leo:
            # Recovery lost the log past the start it had published (a power loss after
            # the start moved beyond unflushed data): it starts over, empty, at that start,
            # as Kafka's does, rather than give out offsets below it again.
            self.truncate_fully_and_start_at(start)

    def _add(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def _active(self) -> LogSegment:
        return self._segments[-1]

    # -- offsets -------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped to [log start, LEO] (a follower taking the leader's HW,
        or a restart restoring the checkpoint); returns the HW set."""
        if type(offset) is not int:
            offset = _int(offset, "offset")
        self._hw = min(max(offset, self._log_start), self._leo)
        return self._hw

    def maybe_increment_high_watermark(self, offset: int) -> int | None:
        """Raise the HW to ``offset`` if that is higher; returns the old HW, or None."""
        if type(offset) is not int:
            offset = _int(offset, "offset")
        if offset > self._leo:
            raise ValueError(f"high watermark {offset} would pass the log end offset {self._leo}")
        if offset <= self._hw:
            return None
        old, self._hw = self._hw, offset
        return old

    # -- appending -----------------------------------------------------------------------

    def append_as_leader(self, items: list, leader_epoch: int = 0,
                         timestamp_ms: int | None = None) -> LogAppendInfo:
        """Encode ``items`` (values, or (key, value[, headers]) tuples) as one batch at the
        LEO, stamped with ``leader_epoch``; the records get ``timestamp_ms`` (default: now)."""
        self._check_open()
        if type(leader_epoch) is not int:
            leader_epoch = _int(leader_epoch, "leader_epoch")
        if timestamp_ms is not None and type(timestamp_ms) is not int:
            timestamp_ms = _int(timestamp_ms, "timestamp_ms")
        if not isinstance(items, list):
            items = list(items)
        if not items:
            raise InvalidRecord("an append needs at least one record")
        now = self._clock.now_ms()
        ts = now if timestamp_ms is None or self._log_append_time else timestamp_ms
        base, last = self._leo, self._leo + len(items) - 1
        batch = _encode(items, base, leader_epoch, ts)
        if self._log_append_time:
            stamp_log_append_time(batch, _FIRST, now)
        try:
            if len(batch) > self.config.max_message_bytes:
                raise RecordTooLarge(
                    f"batch of {len(batch)} bytes exceeds max.message.bytes={self.config.max_message_bytes}"
                )
            self._segment_for(len(batch), base, last, now).append_encoded(batch, base, last, ts)
            return self._appended(base, last, ts, len(items), 1, len(batch), leader_epoch, now,
                                  now if self._log_append_time else -1)
        finally:
            batch.release()

    def append_batches_as_leader(self, batch_bytes: Any, leader_epoch: int) -> LogAppendInfo:
        """Append ready producer batches: validated (records and CRC), then given offsets
        from the LEO and ``leader_epoch`` in place in the segment, never re-encoded."""
        self._check_open()
        if type(leader_epoch) is not int:
            leader_epoch = _int(leader_epoch, "leader_epoch")
        data = _buffer(batch_bytes)
        if not len(data):
            raise InvalidRecord("no batches to append")
        run = self._frame(data, lambda d: frame_producer_append(d, self.config.max_decompressed_bytes))
        run.rebase(self._leo)
        return self._append_run(data, run, leader_epoch)

    def append_as_follower(self, batch_bytes: Any) -> LogAppendInfo:
        """Append the leader's batches with the leader's offsets and epochs.

        Checks every CRC and that offsets continue the log without gaps or overlap;
        raises CorruptMessage / InvalidRecord (log unchanged) otherwise.
        """
        self._check_open()
        data = _buffer(batch_bytes)
        if not len(data):
            return LogAppendInfo(self._leo, self._leo - 1, -1, 0, 0, 0, self._log_start)
        # No max.message.bytes check: the leader accepted these batches (Kafka's follower
        # append ignores the size too), and a limit lowered since must not strand a replica.
        run = frame_append(data)
        if run.base_offset != self._leo:
            raise InvalidRecord(f"batch at offset {run.base_offset} does not start at the log end offset {self._leo}")
        i = run.first_gap()
        if i >= 0:
            raise InvalidRecord(f"batch {i} starts at {run.batch_offsets(i)[0]}, expected {run.batch_offsets(i - 1)[1] + 1}")
        if run.last_offset - run.base_offset > MAX_RELATIVE_OFFSET:
            return self._append_in_segments(data, run)
        return self._append_run(data, run, None)

    def _append_in_segments(self, data: memoryview, run: BatchRun) -> LogAppendInfo:
        """A follower's batches spanning more offsets than one segment may (offset gaps,
        as compaction leaves them): each piece that fits goes to a segment of its own,
        rolled at its first batch, as Kafka rolls rather than overflow a relative offset.
        All CRCs are checked first, so a bad batch still leaves the log unchanged."""
        checked = frame_batches(data, check_crc=True)
        if checked.error is not None:
            raise CorruptMessage(checked.error)
        cuts = [0, *run.segment_starts(MAX_RELATIVE_OFFSET), len(data)]
        pieces = [self._append_run(data[a:b], frame_append(data[a:b]), None) for a, b in zip(cuts, cuts[1:])]
        return LogAppendInfo(run.base_offset, run.last_offset, max(p.max_timestamp for p in pieces),
                             sum(p.num_records for p in pieces), run.count, len(data), self._log_start)

    def _frame(self, data: memoryview, frame: Callable[[Any], BatchRun]) -> BatchRun:
        """Walk the batch headers (framing; CRCs are checked while copying) and check sizes."""
        run = frame(data)
        if run.max_batch_bytes > self.config.max_message_bytes:
            raise RecordTooLarge(
                f"batch of {run.max_batch_bytes} bytes exceeds max.message.bytes={self.config.max_message_bytes}"
            )
        return run

    def _append_run(self, data: memoryview, run: BatchRun, restamp_epoch: int | None) -> LogAppendInfo:
        now = self._clock.now_ms()
        base, last = run.base_offset, run.last_offset
        seg = self._segment_for(len(data), base, last, now)
        # A leader stamps LogAppendTime; a follower keeps what its leader stamped.
        append_time = now if restamp_epoch is not None and self._log_append_time else None
        seg.append_run(data, run, restamp_epoch, append_time)
        if restamp_epoch is None and run.max_leader_epoch > self.leader_epoch_cache.latest_epoch:
            for epoch, start in run.epoch_starts(self.leader_epoch_cache.latest_epoch):
                self.leader_epoch_cache.assign(epoch, start, durable=False)
        max_ts = append_time if append_time is not None else run.max_timestamp
        return self._appended(base, last, max_ts, last - base + 1, run.count, len(data), restamp_epoch, now,
                              -1 if append_time is None else append_time)

    def _appended(self, base: int, last: int, max_ts: int, records: int, batches: int, nbytes: int,
                  leader_epoch: int | None, now: int, append_time: int) -> LogAppendInfo:
        self._leo = last + 1
        if leader_epoch is not None and leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, base, durable=False)
        self._unflushed_records += records
        if (self._unflushed_records >= self.config.flush_messages
                or now - self._last_flush_ms >= self.config.flush_ms):
            self.flush()
        return LogAppendInfo(base, last, max_ts, records, batches, nbytes, self._log_start, append_time)

    def _segment_for(self, nbytes: int, base: int, last: int, now: int) -> LogSegment:
        """The segment to append to, rolling first when Kafka would."""
        seg = self._segments[-1]
        if seg.takes(base, last, nbytes, now):  # the usual case, in one call
            return seg
        if not seg.log_file.writable:
            seg.activate()
        if seg.size == 0 and not seg.fits(base, last, nbytes) and seg.base_offset == base:
            return self._replace_empty(seg, now, nbytes)
        if seg.size and (not seg.fits(base, last, nbytes) or seg.index_is_full()
                         or now - seg.created_ms >= self.config.segment_ms):
            return self._roll(now, nbytes)
        return seg

    def _roll(self, now: int, min_bytes: int = 0) -> LogSegment:
        old = self._active()
        if old.size == 0:
            return self._replace_empty(old, now, min_bytes)
        old.seal()
        seg = LogSegment.create(self.dir, self._leo, self.config, now, min_bytes)
        self._add(seg)
        return seg

    def _replace_empty(self, seg: LogSegment, now: int, min_bytes: int) -> LogSegment:
        """An empty active segment too small (or too old) is recreated at the same base."""
        seg.delete()
        new = LogSegment.create(self.dir, self._leo, self.config, now, min_bytes)
        self._segments[-1] = new
        self._bases[-1] = new.base_offset
        return new

    def roll(self) -> None:
        """Start a new segment at the LEO now (the current one is sealed)."""
        self._check_open()
        self._roll(self._clock.now_ms())

    # -- reading -------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int = 1 << 20, max_offset: int | None = None, *,
             prefault: bool = False) -> LogSlice:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one
        batch) and wholly below ``max_offset`` (e.g. the HW for consumers: a batch holding
        it is left out).  ``prefault`` is for a
        caller that will read every byte (a fetch answered with them): the view's pages are
        mapped in one call, not faulted in 64 KiB at a time."""
        self._check_open()
        if type(offset) is not int:
            offset = _int(offset, "offset")
        if type(max_bytes) is not int:
            max_bytes = _int(max_bytes, "max_bytes")
        if max_offset is not None and type(max_offset) is not int:
            max_offset = _int(max_offset, "max_offset")
        if offset < self._log_start or offset > self._leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self._log_start}, {self._leo}] in {self.dir.name}"
            )
        limit = self._leo if max_offset is None else min(max_offset, self._leo)
        i = bisect.bisect_right(self._bases, offset) - 1
        while 0 <= i < len(self._segments) and offset < limit:
            found = self._segments[i].read(offset, max_bytes, limit, prefault)
            if found is not None:
                return LogSlice(found[0], found[1])
            i += 1
        return LogSlice(_EMPTY, offset)

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp`` (Kafka's ListOffsets;
        -1 means the LEO, -2 the log start offset); None when every record is older."""
        self._check_open()
        timestamp = _int(timestamp, "timestamp")
        if timestamp == LATEST_TIMESTAMP:
            return self._leo
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start
        for seg in self._segments:
            found = seg.find_offset_by_timestamp(timestamp)
            if found is None:
                continue
            # Batch by batch from there: the first batch new enough may lie (partly)
            # below the log start, and then so may every record new enough in it.  The
            # next batch starts after the header's last offset, not the last record's: a
            # compacted batch may end below its lastOffsetDelta, or hold no record at all.
            offset = max(found[1], self._log_start)
            while offset < self._leo:
                view = self.read(offset, 1).view  # one batch
                if not len(view):
                    return None
                for record in decode_records(view, start_offset=offset):  # in C
                    if record.timestamp >= timestamp:
                        return record.offset
                offset = batch_at(view).next_offset
            return None
        return None

    # -- truncation and retention ---------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after ``offset`` (a follower matching its leader).

        A batch is never split: the one holding ``offset`` goes whole, so the new LEO
        is its base.  Returns True if anything was removed.
        """
        self._check_open()
        offset = _int(offset, "offset")
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._leo:
            return False
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset)
            return True
        keep = bisect.bisect_right(self._bases, offset)
        self._segments[keep - 1].truncation_point(offset)  # a damaged header raises before a segment goes
        for seg in self._segments[keep:]:
            seg.delete()
        del self._segments[keep:], self._bases[keep:]
        seg = self._active()
        seg.truncate_to(offset)
        self._leo = seg.next_offset
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart empty at ``offset`` (a follower far behind)."""
        self._check_open()
        offset = _int(offset, "offset")
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        for seg in self._segments:
            seg.delete()
        self._segments.clear()
        self._bases.clear()
        self._add(LogSegment.create(self.dir, offset, self.config, self._clock.now_ms()))
        self._leo = self._log_start = self._hw = offset
        self.leader_epoch_cache.clear()
        self._after_truncation()
        self._recovery_point = offset
        self._persist_recovery_point(force=True)

    def _after_truncation(self) -> None:
        self._log_start = min(self._log_start, self._leo)
        self._hw = min(self._hw, self._leo)
        if self._recovery_point > self._leo:
            self._recovery_point = self._leo
            self._persist_recovery_point(force=True)
        self.leader_epoch_cache.truncate_from_end(self._leo)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start up to ``offset`` (KIP-107: a follower adopting its leader's),
        never past the HW.  Reads below it are refused at once; the segments wholly
        below it go at the next retention pass.  True if it moved."""
        self._check_open()
        offset = _int(offset, "offset")
        offset = min(offset, self._hw)
        if offset <= self._log_start:
            return False
        self._log_start = offset
        self._recovery_point = max(self._recovery_point, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        return True

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete the oldest segments wholly below the log start, past
        ``retention.ms`` or beyond ``retention.bytes``, only below the HW; returns how
        many went.  The log start offset moves to the first remaining segment."""
        self._check_open()
        now = self._clock.now_ms() if now_ms is None else _int(now_ms, "now_ms")
        excess = self.size_in_bytes() - self.config.retention_bytes if self.config.retention_bytes >= 0 else -1
        doomed = 0
        for i, seg in enumerate(self._segments):
            upper = self._bases[i + 1] if i + 1 < len(self._segments) else self._leo
            if seg.size == 0 or upper > self._hw:
                break
            newest = seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms
            expired = 0 <= self.config.retention_ms < now - newest
            if not (upper <= self._log_start or expired or excess - seg.size >= 0):
                break
            excess -= seg.size
            doomed += 1
        if not doomed:
            return 0
        if doomed == len(self._segments):
            self._roll(now)
        for seg in self._segments[:doomed]:
            seg.delete()
        del self._segments[:doomed], self._bases[:doomed]
        self._log_start = max(self._log_start, self._bases[0])
        self._hw = max(self._hw, self._log_start)
        self._recovery_point = max(self._recovery_point, self._log_start)
        self.leader_epoch_cache.truncate_from_start(self._log_start)
        return doomed

    # -- durability ----------------------------------------------------------------------

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Flush when ``flush.ms`` has passed since the last flush and something waits:
        the periodic half of the flush policy (appends check it too, but a produce
        followed by silence would otherwise stay unflushed).  True if it flushed."""
        now = self._clock.now_ms() if now_ms is None else _int(now_ms, "now_ms")
        if self._unflushed_records and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    def flush(self) -> None:
        """fsync everything up to the LEO and move the recovery point there."""
        self._check_open()
        first = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        for seg in self._segments[first:]:
            seg.flush()
        # Epochs learnt from appended batches become durable before the recovery point
        # passes them (after a crash, recovery finds them only beyond that point).
        self.leader_epoch_cache.flush()
        self._recovery_point = self._leo
        self._unflushed_records = 0
        self._last_flush_ms = self._clock.now_ms()
        self._persist_recovery_point()

    def _persist_recovery_point(self, force: bool = False) -> None:
        # Recovery re-scans whole segments, so the file only has to move when the
        # recovery point enters a new segment (a few writes per segment, not per flush).
        seg = self._segments[max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)].base_offset
        if force or seg != self._persisted_rp_segment:
            self._rp_file.write_entries([self._recovery_point])
            self._persisted_rp_segment = seg

    def close(self) -> None:
        """Flush, trim the active segment, and mark the shutdown clean."""
        if self._closed:
            return
        self.flush()
        self._rp_file.write_entries([self._recovery_point])
        for seg in self._segments:
            seg.close()
        try:
            (self.dir / CLEAN_SHUTDOWN).touch()
            fsync_dir(self.dir)
        except OSError as e:
            raise KafkaStorageError(f"marking {self.dir} clean: {e}") from e
        self._release_all()

    def crash(self, lose_unflushed: bool = True, torn_bytes: int = 0) -> None:
        """Stop as a killed broker would: no flush, no clean-shutdown marker.

        With ``lose_unflushed`` also lose what a power failure may lose: every byte
        after the recovery point except the first ``torn_bytes`` of it (a torn write).
        For simulators and tests; reopening runs recovery.
        """
        self._check_open()
        cut: tuple[int, int, int] | None = None
        if lose_unflushed and self._recovery_point < self._leo:
            i = bisect.bisect_right(self._bases, self._recovery_point) - 1
            seg = self._segments[i]
            pos, _ = seg.position_of(self._recovery_point)
            cut = (i, pos + max(torn_bytes, 0), seg.size)
        self._release_all()
        if cut is None:
            return
        i, start, end = cut
        # zeroes, not a shorter file: a reader's view past the end would SIGBUS; and what
        # a live view shows (an answer already sent) stays as it was
        zero_tail(self._segments[i].log_file.filename, start, end)
        for seg in self._segments[i + 1:]:
            seg.delete()

    def _release_all(self) -> None:
        for seg in self._segments:
            seg.log_file.close()
            seg.offset_index.file.close()
            seg.time_index.file.close()
        self._closed = True
        self._lock.release()

    def delete(self) -> None:
        """Close without ceremony and remove the partition directory (StopReplica delete)."""
        if not self._closed:
            self._release_all()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- added by the replica engineer (kreplica/replica): a broker crash in tests --------

    def abandon(self) -> None:
        """Let go of the files as a crashed process would: no flush, no clean-shutdown
        marker; the next ``open`` recovers whatever reached the files."""
        if not self._closed:
            self.crash(lose_unflushed=False)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir} is closed")

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Log({self.dir.name}, start={self._log_start}, hw={self._hw}, leo={self._leo}, "
                f"segments={len(self._segments)})")
