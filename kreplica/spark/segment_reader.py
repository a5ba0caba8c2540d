"""Executor side of the ``kreplica`` source: one segment byte range to Arrow batches.

A :class:`SegmentSlice` is the picklable unit of work Spark ships to a task.
:func:`read_slice` preads it in chunks, validates every batch with the native
scanner, decodes the kept batches natively and yields ``pyarrow.RecordBatch``es
(one per chunk): Python runs per chunk and per batch run, never per record.

A slice is defined by offsets; its positions are hints from the offset index,
which may be stale on a live broker (a truncation leaves old entries on disk
past the ones the log still counts).  ``start_position`` must hold the batch
whose base offset is ``start_offset``; when it does not, the slice is read from
the segment's first batch instead.  ``end_position`` only sizes the reads: the
slice ends on offsets, never on a position.

Stopping rules (why a range may end early):
- once offsets up to ``offset_hi`` were seen (the HW: beyond it a live leader
  may be mid-append, so a torn tail there is expected, not corruption);
- otherwise at zeros or the end of the data, provided ``need_offset`` was
  reached (a sealed segment must run to the next segment's base offset).
Anything else is corruption (a batch whose CRC holds over records that do not
match its header included): a :class:`~kreplica.errors.CorruptMessage` naming
the file and position, or with ``on_corrupt=skip`` a skipped batch recorded in
the ``corrupt_report`` directory.
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..errors import CorruptMessage, KReplicaError, OffsetOutOfRange
from ..records import decode_records, scan_batches

CHUNK_BYTES = 8 << 20
BATCH_OVERHEAD = 12  # baseOffset + batchLength, not counted by batchLength
MIN_BATCH_LENGTH = 49  # a v2 header after batchLength, with no records

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
    ("headers", HEADERS_TYPE), ("leader_epoch", pa.int32()),
])


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """The records of one segment file at offsets ``[offset_lo, offset_hi)`` (None:
    unbounded), expected between ``start_position`` (the batch starting at
    ``start_offset``) and ``end_position``."""

    topic: str
    partition: int
    log_path: str
    base_offset: int
    start_position: int
    end_position: int | None
    offset_lo: int
    offset_hi: int | None
    need_offset: int | None
    timestamp_lo: int | None = None
    on_corrupt: str = "fail"
    corrupt_report: str | None = None
    start_offset: int | None = None  # None: start_position is not an index hint
    on_missing: str = "fail"  # the segment was deleted after planning: "fail" or "skip"

    @property
    def report_name(self) -> str:
        return f"{self.topic}-{self.partition}-{self.base_offset:020d}-{self.start_position}.json"


@dataclass(slots=True)
class _Cursor:
    position: int
    covered: int = -1  # one past the last offset of the batches scanned so far


class _StaleHint(Exception):
    """The batch at a slice's start position is not the one the index named."""


def read_slice(s: SegmentSlice) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records of ``s`` (see the module docstring)."""
    regions: list[dict] = []
    try:
        f = open(s.log_path, "rb")
    except FileNotFoundError:
        # Retention deleted the segment between planning and this task.
        if s.on_missing == "skip":
            return
        raise OffsetOutOfRange(
            f"{s.log_path}: the segment was deleted (retention) after the read was planned; "
            f"partition {s.topic}-{s.partition} no longer has offsets {s.offset_lo} and up in it "
            "(re-run the read, or stream with fail_on_data_loss=false to skip them)") from None
    with f:
        fd = f.fileno()
        cur = _Cursor(s.start_position)
        expect = s.start_offset if s.start_position else None
        while True:
            try:
                reason = yield from _read_valid(fd, s, cur, expect=expect)
            except _StaleHint:
                # Position 0 always starts the segment's first batch: walk from there
                # (batches below offset_lo are validated, not decoded).
                cur, expect = _Cursor(0), None
                continue
            if reason is None:
                break
            # The batch at the start position was checked before a bad one was found: reading
            # goes on from the skip, which resumes at some later batch, not the start one.
            expect = None
            if s.on_corrupt != "skip":
                raise CorruptMessage(f"{s.log_path}: {reason} ({_context(s, cur)})")
            regions.append(_skip(fd, s, cur, reason))
    if regions:
        _write_report(s, regions)


def _context(s: SegmentSlice, cur: _Cursor) -> str:
    read = f"read up to offset {cur.covered - 1}" if cur.covered >= 0 else "nothing read yet"
    text = f"partition {s.topic}-{s.partition}, {read}"
    if cur.position == s.start_position != 0:
        # Ranges start where the offset index points; a stale index points wrong.
        text += f"; the position comes from {Path(s.log_path).with_suffix('.index').name}"
    return text


def _done(s: SegmentSlice, cur: _Cursor) -> bool:
    return s.offset_hi is not None and cur.covered >= s.offset_hi


def _read_valid(fd: int, s: SegmentSlice, cur: _Cursor, decode: bool = True,
                expect: int | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the valid batches from ``cur``; return None when the slice ended
    cleanly, else the reason the data at ``cur.position`` is bad.  With ``expect``
    the first batch must have that base offset, else :class:`_StaleHint`."""
    size = os.fstat(fd).st_size
    at_least = 0  # a batch larger than the chunk (or cut by it) needs this many bytes
    # One buffer per slice: fresh 8 MiB allocations cost page faults on every
    # chunk.  Rows never point into it (decoding copies keys and values out).
    buf = bytearray(0)
    while not _done(s, cur):
        room = max(size - cur.position, 0)
        span = CHUNK_BYTES
        if s.end_position is not None and cur.position < s.end_position:
            span = min(span, s.end_position - cur.position)  # a small slice reads little
        wanted = min(max(span, at_least), room)
        if wanted > len(buf):
            buf = bytearray(wanted)
        chunk = memoryview(buf)[:os.preadv(fd, [memoryview(buf)[:wanted]], cur.position)] if wanted else b""
        scan = scan_batches(chunk, 0, len(chunk))
        if scan.count:
            if expect is not None and int(scan.base_offsets[0]) != expect:
                raise _StaleHint
            expect = None
            at_least = 0
            out, bad, reason = _decode_kept(chunk, scan, s) if decode else (None, None, None)
            if out is not None:
                yield out
            if bad is not None:
                # A batch whose CRC and framing hold but whose records do not: the
                # scanner checks no records, so it is found here, and is corruption
                # like any other (named with its file position, or skipped).
                if bad:
                    cur.covered = int(scan.last_offsets[bad - 1]) + 1
                cur.position += int(scan.positions[bad])
                return (f"unreadable records in the batch at position {cur.position} "
                        f"(offsets {int(scan.base_offsets[bad])}..{int(scan.last_offsets[bad])}): "
                        f"{_at(reason, cur.position)}")  # the decoder's positions count from the batch
            cur.covered = int(scan.last_offsets[-1]) + 1
            cur.position += int(scan.valid_bytes)
            continue
        need = _declared_size(chunk)
        if scan.error is not None and need is not None and len(chunk) < need <= room:
            at_least = need  # one batch larger than a chunk, or cut by the chunk's end
            continue
        if len(chunk) < min(BATCH_OVERHEAD, room):
            # A chunk sized to a stale end position can cut a batch's header (its first
            # bytes, a small base offset's, are zeros): read a whole header before judging.
            at_least = BATCH_OVERHEAD
            continue
        if expect is not None:
            raise _StaleHint  # no batch where the index points
        return _verdict(s, cur, _at(scan.error, cur.position), len(chunk))
    return None


def _at(error: str | None, chunk_position: int) -> str | None:
    """The scanner's reason with its chunk-relative positions made file positions."""
    if error is None:
        return None
    return re.sub(r"position (\d+)", lambda m: f"position {int(m.group(1)) + chunk_position}", error)


@dataclass(frozen=True, slots=True)
class DataEnd:
    """Where the valid batches from some position stop."""

    last_offset: int | None  # None: no valid batch there
    clean: bool  # zeros or the end of the file follow (not a bad or torn batch)


def data_end(log_path: str, position: int) -> DataEnd:
    """Walk the valid batches from ``position`` (a batch start) to their end."""
    probe = SegmentSlice("", 0, log_path, 0, position, None, 0, None, None)
    cur = _Cursor(position)
    with open(log_path, "rb") as f:
        fd = f.fileno()
        for _ in _read_valid(fd, probe, cur, decode=False):
            pass
        head = os.pread(fd, BATCH_OVERHEAD, cur.position)
    return DataEnd(cur.covered - 1 if cur.covered >= 0 else None, not any(head))


def batch_base_at(fd: int, position: int) -> int | None:
    """The base offset of the valid batch starting at ``position``, else None."""
    size = _declared_size(os.pread(fd, BATCH_OVERHEAD, position))
    if size is None or position + size > os.fstat(fd).st_size:
        return None
    scan = scan_batches(os.pread(fd, size, position))
    return int(scan.base_offsets[0]) if scan.count else None


def _verdict(s: SegmentSlice, cur: _Cursor, error: str | None, available: int) -> str | None:
    if s.need_offset is None or cur.covered >= s.need_offset:
        return None  # the log's end (a torn tail past the HW is a live append)
    what = error or f"{'zero bytes' if available else 'end of file'} at position {cur.position}"
    if s.end_position is not None and cur.position < s.end_position:
        return f"{what}, where batches run to position {s.end_position}"
    return f"{what}, before offset {s.need_offset}"


def _declared_size(chunk: bytes | memoryview) -> int | None:
    if len(chunk) < BATCH_OVERHEAD:
        return None
    length = struct.unpack_from(">i", chunk, 8)[0]
    return BATCH_OVERHEAD + length if length >= MIN_BATCH_LENGTH else None


def _skip(fd: int, s: SegmentSlice, cur: _Cursor, reason: str) -> dict:
    """Step over the bad batch at ``cur``: to the end its own length declares when
    a valid batch (or the clean end of the data) follows, else to the next
    offset-index position holding a valid batch, else to the end of the slice.

    The bytes stepped over start with one bad batch; when the resync falls back
    to the index they may also hold good batches that cannot be found without
    trusting the bad one, so the report names the offsets lost, not only bytes.
    """
    bad, before = cur.position, cur.covered
    limit = s.end_position if s.end_position is not None else os.fstat(fd).st_size
    declared = _declared_size(os.pread(fd, BATCH_OVERHEAD, bad))
    # A declared end at the limit itself is no candidate: nothing past it may be probed, so
    # an empty probe would pass for a clean end however wrong the length is, hiding every
    # batch the index names inside the span; with none there, reading resumes at the limit.
    candidates = [bad + declared] if declared is not None and bad + declared < limit else []
    candidates += [p for p in _index_positions(s).tolist() if bad < p < limit]
    resume, next_offset = limit, None
    for p in candidates:
        probe = scan_batches(os.pread(fd, min(CHUNK_BYTES, limit - p), p))
        if probe.count:
            resume, next_offset = p, int(probe.base_offsets[0])
            break
        if probe.error is None:  # zero fill: the bad batch was the last one written
            resume = p
            break
    cur.position = resume
    if next_offset is not None:
        cur.covered = max(cur.covered, next_offset)
    elif s.end_position is None:
        # Nothing valid follows: whatever this range had to reach was in the skipped bytes.
        cur.covered = max(cur.covered, s.need_offset if s.need_offset is not None else cur.covered)
    print(f"kreplica: skipped corrupt data in {s.log_path} at position {bad}: {reason}",
          file=sys.stderr)
    return {"file": s.log_path, "position": bad, "resume_position": resume,
            "skipped_bytes": resume - bad, "reason": reason,
            "offsets_read_before": before, "next_offset": next_offset}


def _index_positions(s: SegmentSlice) -> np.ndarray:
    """Batch starts named by the segment's offset index, read only when skipping."""
    from .log_files import SegmentFiles  # log_files plans these slices: import late, no cycle

    return SegmentFiles(s.log_path, s.base_offset, None).offset_index()[1]


def _write_report(s: SegmentSlice, regions: list[dict]) -> None:
    """One JSON file per slice, replaced atomically: a retried task rewrites it, not adds to it."""
    assert s.corrupt_report is not None  # ReadOptions requires it with on_corrupt=skip
    report_dir = Path(s.corrupt_report)
    report_dir.mkdir(parents=True, exist_ok=True)
    final = report_dir / s.report_name
    tmp = final.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump({"skipped_batches": len(regions), "regions": regions}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)


_OFFSET, _TIMESTAMP, _KEY, _VALUE, _HEADERS = (
    attrgetter(name) for name in ("offset", "timestamp", "key", "value", "headers")
)


def _decode_kept(chunk: memoryview, scan, s: SegmentSlice) -> tuple[pa.RecordBatch | None, int | None, str | None]:
    """Decode the batches of ``chunk`` that may hold wanted records: (the rows, or None;
    the index in ``scan`` of a kept batch whose records are unreadable, rows only from
    the batches before it, or None; why it is unreadable)."""
    keep = scan.last_offsets >= s.offset_lo
    if s.offset_hi is not None:
        keep &= scan.base_offsets < s.offset_hi
    if s.timestamp_lo is not None:
        keep &= scan.max_timestamps >= s.timestamp_lo
    if not keep.any():
        return None, None, None
    starts = scan.positions.astype(np.int64)
    ends = starts + scan.sizes
    view = memoryview(chunk)
    records: list = []
    bad, reason = None, None
    # Contiguous runs of kept batches decode in one native call each; a run that fails
    # is decoded again batch by batch, to keep the records before the bad batch.
    edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.view(np.int8), [0]))))
    for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):
        try:
            records.extend(decode_records(view[starts[a]:ends[b - 1]]))
        except KReplicaError:
            for i in range(a, b):
                try:
                    records.extend(decode_records(view[starts[i]:ends[i]]))
                except KReplicaError as e:
                    bad, reason = i, str(e)
                    break
            if bad is not None:
                break
    if bad is not None:
        keep[bad:] = False
        if not records:
            return None, bad, reason
    epochs = np.repeat(scan.leader_epochs[keep], scan.record_counts[keep])
    n = len(records)
    if n != len(epochs):
        raise CorruptMessage(f"{s.log_path}: record counts in batch headers ({len(epochs)}) "
                             f"disagree with the records decoded ({n})")
    offsets = np.fromiter(map(_OFFSET, records), np.int64, count=n)
    rows = offsets >= s.offset_lo
    if s.offset_hi is not None:
        rows &= offsets < s.offset_hi
    columns = [
        pa.repeat(pa.scalar(s.topic, pa.string()), n),
        pa.repeat(pa.scalar(s.partition, pa.int32()), n),
        pa.array(offsets),
        pa.array(np.fromiter(map(_TIMESTAMP, records), np.int64, count=n)),
        pa.array(list(map(_KEY, records)), pa.binary()),
        pa.array(list(map(_VALUE, records)), pa.binary()),
        pa.array(list(map(_HEADERS, records)), HEADERS_TYPE),
        pa.array(epochs.astype(np.int32)),
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
    return (batch if rows.all() else batch.filter(pa.array(rows))), bad, reason
