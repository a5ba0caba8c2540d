"""``kreplica dump-log DIR|FILE...``: print segments, batches and records, as kafka-dump-log.

For a partition directory every ``.log`` is dumped in offset order; ``.index`` and
``.timeindex`` files given by name print their entries (up to the zero fill of an
active, preallocated one).  Batches are read with the
codec's framing check; a CRC failure is reported as ``isvalid: false`` and the dump
goes on, bad framing ends the file with the position and reason.  Either makes the
exit status 1, as do a missing file, a directory without segments and an index
whose size is not a whole number of entries.
"""
from __future__ import annotations

import argparse
import mmap
import sys
from pathlib import Path
from typing import TextIO

from ..arguments import digits
from ..cli import reader_left

HELP = "print the segments, batches and records of a log directory (kafka-dump-log)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR|FILE", help="partition directory or segment files")
    parser.add_argument("--print-data", action="store_true", help="print each record's key and value")


def execute(args: argparse.Namespace) -> int:
    try:
        status = dump([Path(p) for p in args.paths], args.print_data, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left (| head): stop quietly
        return reader_left()
    return status


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        logs = sorted(p.glob("*.log")) if p.is_dir() else [p]
        out += logs or [p]  # a directory without segments is reported as such
    return out


def _no_segments(path: Path) -> str:
    partitions = sorted(d for d in path.iterdir() if d.is_dir() and any(d.glob("*.log")))
    if partitions:  # a broker's log dir
        return f"  no log segments (.log files) here, but partition directories: dump those, e.g. {partitions[0]}"
    return "  no log segments (.log files) found"


def dump(paths: list[Path], print_data: bool, out: TextIO) -> int:
    """Dump every file; returns 1 if one was missing or held invalid data, else 0."""
    status = 0
    for path in _files(paths):
        print(f"Dumping {path}", file=out)
        if not path.is_file():
            print(_no_segments(path) if path.is_dir() else "  not a regular file" if path.exists()
                  else "  no such file", file=out)
            status = 1
        elif path.suffix == ".log":
            status |= _dump_log(path, print_data, out)
        elif path.suffix in (".index", ".timeindex"):
            status |= _dump_index(path, out)
        else:
            print("  not a segment file (.log, .index, .timeindex)", file=out)
            status = 1
    return status


def _base_offset(path: Path) -> int | None:
    """The base offset a segment file's name gives (ASCII digits only, as the log names
    them), or None for any other name."""
    stem = path.stem
    return int(stem) if digits(stem) else None


_NOT_AN_OFFSET = "unknown (the file's name is not a base offset)"


def _dump_log(path: Path, print_data: bool, out: TextIO) -> int:
    from ..errors import KReplicaError
    from ..records import decode_batches

    # Batches carry their own offsets, so a renamed copy still dumps whole; only the
    # starting offset, which comes from the name, is unknown.
    base = _base_offset(path)
    print(f"Log starting offset: {_NOT_AN_OFFSET if base is None else base}", file=out)
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            return 0
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            with memoryview(mm) as buf:
                return _dump_batches(buf, print_data, out, decode_batches, KReplicaError)


def _sequence(base: int, delta: int) -> int:
    """The producer sequence at offset delta ``delta`` of a batch whose base sequence is
    ``base``: past 2**31 - 1 it wraps to 0, as a producer's sequences do; -1 for a batch
    without sequences."""
    return -1 if base < 0 else (base + delta) % 2**31


def _dump_batches(buf: memoryview, print_data: bool, out: TextIO, decode_batches, error) -> int:
    position, status = 0, 0
    try:
        for b in decode_batches(buf):
            position = b.position
            valid = b.valid()
            if not valid:
                status = 1
            count = b.record_count
            # Kafka's lastSequence: the base plus lastOffsetDelta, which a compacted batch
            # keeps while its record count drops.
            last_seq = _sequence(b.base_sequence, b.last_offset_delta)
            time_type = "LogAppendTime" if b.timestamp_type else "CreateTime"
            print(
                f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {count} "
                f"baseSequence: {b.base_sequence} lastSequence: {last_seq} producerId: {b.producer_id} "
                f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.leader_epoch} "
                f"isTransactional: {str(b.is_transactional).lower()} isControl: {str(b.is_control).lower()} "
                f"position: {b.position} {time_type}: {b.max_timestamp} size: {b.size} magic: {b.magic} "
                f"compresscodec: {b.compression} crc: {b.crc} isvalid: {str(valid).lower()}",
                file=out,
            )
            if print_data and valid:
                for r in b.records():
                    keys = ",".join(k for k, _ in r.headers)  # [a,b], as kafka-dump-log prints them
                    key_size = -1 if r.key is None else len(r.key)
                    value_size = -1 if r.value is None else len(r.value)
                    print(
                        f"| offset: {r.offset} {time_type}: {r.timestamp} keySize: {key_size} "
                        f"valueSize: {value_size} sequence: {_sequence(b.base_sequence, r.offset - b.base_offset)} "
                        f"headerKeys: [{keys}] key: {_text(r.key)} "
                        f"payload: {_text(r.value)}",
                        file=out,
                    )
    except error as e:
        print(f"Found invalid data after position {position}: {e}", file=out)
        return 1
    finally:
        b = r = None  # views into the mapped file: an exception (a closed pipe) must not keep them
    return status


def _dump_index(path: Path, out: TextIO) -> int:
    import numpy as np

    base = _base_offset(path)
    data = path.read_bytes()
    entry = 8 if path.suffix == ".index" else 12
    if len(data) % entry:
        print(f"  invalid index: {len(data)} bytes is not a whole number of {entry}-byte entries", file=out)
        return 1
    if base is None:  # entries hold offsets relative to the base the name would give
        print(f"  base offset {_NOT_AN_OFFSET}: the offsets below are relative to it", file=out)
        base = 0
    if path.suffix == ".index":
        rows = _entries(np.frombuffer(data, dtype=[("rel", ">u4"), ("pos", ">u4")]))
        for rel, pos in rows.tolist():
            print(f"offset: {base + rel} position: {pos}", file=out)
    else:
        rows = _entries(np.frombuffer(data, dtype=[("ts", ">i8"), ("rel", ">u4")]))
        for ts, rel in rows.tolist():
            print(f"timestamp: {ts} offset: {base + rel}", file=out)
    return 0


def _entries(rows):
    """An index's entries up to its zero fill.  An active index is preallocated (to
    segment.index.bytes) and mapped, and one a crash left is still that size: past its
    entries it is zeros, each of which reads as the base offset.  As kafka-dump-log, the
    entries end at the first one after the first whose offset is the base offset (no later
    entry can be: offsets only grow), rather than printing a line for every empty slot."""
    zero = (rows["rel"][1:] == 0).nonzero()[0]
    return rows[:zero[0] + 1] if len(zero) else rows
