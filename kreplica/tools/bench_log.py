"""``kreplica bench log``: the native log beside its peers, one table from one run.

Same records, same machine, same run: kreplica's ``append_as_leader`` (encoding
into the segment map), ``append_as_follower`` (copying ready batches) and
``read`` (zero-copy views), against raw ``os.write`` of the same bytes (the
limit), sqlite3 (WAL, synchronous=OFF, executemany per 1,000), lmdb (append=True,
1,000 per transaction) and a plain-Python per-record append.  Random offset
lookups are timed on a log and on one 100x larger.  ``--memory`` also appends
4 GiB over 256 MiB segments and reports the peak RSS (psutil).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import tempfile
import time
from pathlib import Path

HELP = "the log against raw writes, sqlite3, lmdb and plain Python"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=2_000_000, help="100 B records per workload")
    parser.add_argument("--data-dir", default=None, help="where the temporary files go")
    parser.add_argument("--memory", action="store_true", help="also append 4 GiB and report peak RSS")


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _values(size: int, n: int = 1000, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(n)]


def _leader(path: Path, values: list[bytes], batches: int) -> float:
    """Seconds for the appends alone: like the peers, the page cache is the target
    (the fsync in ``close`` is outside the timing)."""
    from ..log import Log

    log = Log.open(path, {"segment.bytes": 256 << 20})
    start = time.perf_counter()
    for _ in range(batches):
        log.append_as_leader(values, 0, 1_700_000_000_000)
    took = time.perf_counter() - start
    log.close()
    return took


def _follower(path: Path, chunks: list[bytes]) -> float:
    from ..log import Log

    log = Log.open(path, {"segment.bytes": 256 << 20})
    start = time.perf_counter()
    for chunk in chunks:
        log.append_as_follower(chunk)
    took = time.perf_counter() - start
    log.close()
    return took


def _raw(path: Path, chunk: bytes, times: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(times):
        os.write(fd, chunk)
    os.close(fd)


def _sqlite(path: Path, values: list[bytes], batches: int) -> None:
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, value BLOB)")
    for b in range(batches):
        with db:
            db.executemany("INSERT INTO log VALUES (?, ?)", zip(range(b * 1000, b * 1000 + 1000), values))
    db.close()


def _lmdb(path: Path, values: list[bytes], batches: int) -> None:
    import lmdb

    env = lmdb.open(str(path), map_size=batches * 1000 * (len(values[0]) + 64) * 2 + (64 << 20),
                    sync=False, metasync=False, writemap=True)
    for b in range(batches):
        with env.begin(write=True) as txn:
            keys = [struct.pack(">q", o) for o in range(b * 1000, b * 1000 + 1000)]
            txn.cursor().putmulti(zip(keys, values), append=True)
    env.close()


def _plain_python(path: Path, values: list[bytes], batches: int) -> None:
    pack = struct.Struct(">qi").pack
    with open(path, "wb") as f:
        offset = 0
        for _ in range(batches):
            buf = bytearray()
            for v in values:  # the per-record loop kreplica avoids
                buf += pack(offset, len(v))
                buf += v
                offset += 1
            f.write(buf)


def _sequential_read(path: Path) -> tuple[float, float, int]:
    from ..log import Log
    from ..records import decode_records

    log = Log.open(path)
    start = time.perf_counter()
    offset, nbytes, views = 0, 0, []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        nbytes += len(data)
        views.append(data)
        offset = data.first_offset + _records_in(data)
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    count = sum(len(decode_records(v.view)) for v in views)
    decode_s = time.perf_counter() - start
    del views
    log.close()
    return nbytes / read_s, count / decode_s, nbytes


def _records_in(data) -> int:
    from ..log._segment import walk_to_end

    _, last, _, _ = walk_to_end(data.view, 0, len(data))
    return last + 1 - data.first_offset


def _lookups(path: Path, records: int, probes: int = 20_000) -> float:
    from ..log import Log

    log = Log.open(path, {"segment.bytes": 64 << 20})
    values = [b"x" * 10] * 100
    for _ in range(records // 100):
        log.append_as_leader(values, 0, 0)
    rng = random.Random(1)
    targets = [rng.randrange(records) for _ in range(probes)]
    start = time.perf_counter()
    for t in targets:
        log.read(t, 1)
    took = time.perf_counter() - start
    log.close()
    return took / probes


def _memory(path: Path) -> tuple[float, float]:
    import psutil

    from ..log import Log

    proc = psutil.Process()
    log = Log.open(path, {"segment.bytes": 256 << 20})
    values = _values(1024)
    peak = 0
    start = time.perf_counter()
    for b in range((4 << 30) // (1024 * 1000)):
        log.append_as_leader(values, 0, 0)
        if b % 64 == 0:
            peak = max(peak, proc.memory_info().rss)
    took = time.perf_counter() - start
    log.delete()
    return peak / (1 << 20), (4 << 30) / took / 1e9


def execute(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="kreplica-bench-", dir=args.data_dir))
    rows: list[tuple[str, str, str]] = []
    try:
        batches = max(args.records // 1000, 10)
        n = batches * 1000
        v100 = _values(100)
        t = {
            "kreplica": _leader(root / "leader-0", v100, batches),
            "sqlite3": _timed(_sqlite, root / "sqlite.db", v100, batches),
            "lmdb": _timed(_lmdb, root / "lmdb", v100, batches),
            "plain Python": _timed(_plain_python, root / "plain", v100, batches),
        }
        from ..log import Log

        with Log.open(root / "leader-0") as log:
            chunk = bytes(log.read(0, 1))
        t["raw os.write"] = _timed(_raw, root / "raw", chunk, batches)
        rows.append(("append 100 B x 1,000 (append_as_leader)", f"{n / t['kreplica'] / 1e6:.2f} M rec/s", ""))
        for peer in ("raw os.write", "sqlite3", "lmdb", "plain Python"):
            rows.append((f"  {peer}", f"{n / t[peer] / 1e6:.2f} M rec/s", f"kreplica {t[peer] / t['kreplica']:.1f}x"))

        kbatches = max(batches // 8, 10)
        v1k = _values(1024)
        lead_s = _leader(root / "leader1k-0", v1k, kbatches)
        with Log.open(root / "leader1k-0") as log:
            chunk1k = bytes(log.read(0, 1))
            size1k = log.size_in_bytes()
        raw_s = _timed(_raw, root / "raw1k", chunk1k, kbatches)
        rows.append(("append 1 KiB x 1,000 (append_as_leader)", f"{size1k / lead_s / 1e9:.2f} GB/s",
                     f"{raw_s / lead_s:.2f}x raw os.write ({size1k / raw_s / 1e9:.2f} GB/s)"))

        with Log.open(root / "leader-0") as log:
            chunks, offset = [], 0
            while offset < log.log_end_offset:
                data = log.read(offset, 1 << 20)
                chunks.append(bytes(data))
                offset = data.first_offset + _records_in(data)
        total = sum(len(c) for c in chunks)
        follow_s = _follower(root / "follower-0", chunks)
        raw_f = _timed(lambda: _raw_chunks(root / "rawf", chunks))
        rows.append(("append_as_follower, ready 1 MiB fetches", f"{total / follow_s / 1e9:.2f} GB/s",
                     f"{raw_f / follow_s:.2f}x raw os.write ({total / raw_f / 1e9:.2f} GB/s)"))

        read_bps, decode_rps, _ = _sequential_read(root / "leader-0")
        rows.append(("sequential read() of the whole log", f"{read_bps / 1e9:.2f} GB/s", "zero-copy views"))
        rows.append(("decode_records to Python objects", f"{decode_rps / 1e6:.2f} M rec/s", ""))

        small = _lookups(root / "lookup-small-0", 20_000)
        large = _lookups(root / "lookup-large-0", 2_000_000)
        rows.append(("random offset lookup, 20k records", f"{small * 1e6:.1f} us", ""))
        rows.append(("random offset lookup, 2M records (100x)", f"{large * 1e6:.1f} us",
                     f"{large / small:.2f}x the small log"))
        if args.memory:
            rss, gbps = _memory(root / "memory-0")
            rows.append(("append 4 GiB over 256 MiB segments", f"peak RSS {rss:,.0f} MiB", f"{gbps:.2f} GB/s"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _print(rows)
    return 0


def _raw_chunks(path: Path, chunks: list[bytes]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for c in chunks:
        os.write(fd, c)
    os.close(fd)


def _print(rows: list[tuple[str, str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kreplica log, one run on this machine (kreplica bench log)")
    table.add_column("workload")
    table.add_column("result", justify="right")
    table.add_column("comparison")
    for row in rows:
        table.add_row(*row)
    Console().print(table)
