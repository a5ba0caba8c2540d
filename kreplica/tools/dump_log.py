"""``kreplica dump-log DIR|FILE...``: print segments, batches and records, as kafka-dump-log.

For a partition directory every ``.log`` is dumped in offset order; ``.index`` and
``.timeindex`` files given by name print their entries.  Batches are read with the
codec's framing check; a CRC failure is reported as ``isvalid: false`` and the dump
goes on, bad framing ends the file with the position and reason.
"""
from __future__ import annotations

import argparse
import mmap
import sys
from pathlib import Path
from typing import TextIO

HELP = "print the segments, batches and records of a log directory (kafka-dump-log)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR|FILE", help="partition directory or segment files")
    parser.add_argument("--print-data", action="store_true", help="print each record's key and value")


def execute(args: argparse.Namespace) -> int:
    return dump([Path(p) for p in args.paths], args.print_data, sys.stdout)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(p.glob("*.log"))
        else:
            out.append(p)
    return out


def dump(paths: list[Path], print_data: bool, out: TextIO) -> int:
    """Dump every file; returns 1 if one was missing or held invalid data, else 0."""
    status = 0
    for path in _files(paths):
        print(f"Dumping {path}", file=out)
        if not path.is_file():
            print("  no such file", file=out)
            status = 1
            continue
        if path.suffix == ".log":
            status |= _dump_log(path, print_data, out)
        elif path.suffix in (".index", ".timeindex"):
            _dump_index(path, out)
        else:
            print("  not a segment file (.log, .index, .timeindex)", file=out)
            status = 1
    return status


def _dump_log(path: Path, print_data: bool, out: TextIO) -> int:
    from ..errors import KReplicaError
    from ..records import decode_batches

    print(f"Log starting offset: {int(path.stem)}" if path.stem.isdigit() else "", file=out)
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            return 0
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            with memoryview(mm) as buf:
                return _dump_batches(buf, print_data, out, decode_batches, KReplicaError)


def _dump_batches(buf: memoryview, print_data: bool, out: TextIO, decode_batches, error) -> int:
    position = 0
    try:
        for b in decode_batches(buf):
            position = b.position
            valid = b.valid()
            count = b.record_count
            last_seq = b.base_sequence + count - 1 if b.base_sequence >= 0 else -1
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
                    keys = [k for k, _ in r.headers]
                    key_size = -1 if r.key is None else len(r.key)
                    value_size = -1 if r.value is None else len(r.value)
                    print(
                        f"| offset: {r.offset} {time_type}: {r.timestamp} keySize: {key_size} "
                        f"valueSize: {value_size} headerKeys: {keys} key: {_text(r.key)} "
                        f"payload: {_text(r.value)}",
                        file=out,
                    )
            del b
    except error as e:
        print(f"Found invalid data after position {position}: {e}", file=out)
        return 1
    return 0


def _dump_index(path: Path, out: TextIO) -> None:
    import numpy as np

    base = int(path.stem) if path.stem.isdigit() else 0
    data = path.read_bytes()
    if path.suffix == ".index":
        rows = np.frombuffer(data[: len(data) - len(data) % 8], dtype=[("rel", ">u4"), ("pos", ">u4")])
        for rel, pos in rows.tolist():
            print(f"offset: {base + rel} position: {pos}", file=out)
    else:
        rows = np.frombuffer(data[: len(data) - len(data) % 12], dtype=[("ts", ">i8"), ("rel", ">u4")])
        for ts, rel in rows.tolist():
            print(f"timestamp: {ts} offset: {base + rel}", file=out)
