"""``kreplica bench log``: the native log beside its peers, one table from one run.

Issue 2's performance targets, measured in one process on this machine, with the
same records for every store in the same run (see :mod:`.bench_log_peers` for the
stores and the fsync policy, which is "nobody forces an fsync"):

1. append 100 B records, 1,000 per ``append_as_leader``: >= 5 M records/s,
   >= 10x sqlite3 and >= 3x lmdb;
2. the same with 1 KiB records: >= 0.6x raw ``os.write`` of the Log's own bytes;
3. ``append_as_follower`` of ready batches (1 MiB fetches): >= 0.8x raw write;
4. sequential ``read()`` of the whole log: >= 2 GB/s (zero-copy views), and
   ``decode_records`` to Python objects: >= 5 M records/s for 100 B records;
5. random offset lookups stay flat (<= 2x) as the log grows 100x over many segments;
6. appending 4 GiB over 256 MiB segments keeps the RSS (psutil) under 600 MiB.

Every figure is the median of ``--repeat`` runs timed with ``time.perf_counter``;
the stores take turns within each repeat so machine noise falls on all of them
alike, and each run writes fresh files (the page cache holds what was just
written, for everyone).  Only the work between opening and closing a store is
timed.  ``--quick`` shrinks every size (for tests: it proves the tool, not speeds).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..cli import at_least, directory, output_file
from ..records import crc32c_backend
from .bench_log_peers import (BATCH_RECORDS, FSYNC_POLICY, STORES, AppendWork, KReplica, Lmdb, RawWrite,
                              Sqlite, append_work, fetch_chunks)

HELP = "the log against raw writes, sqlite3, lmdb and plain Python (issue 2's targets)"
PEERS = ("raw os.write", "sqlite3", "lmdb", "plain Python")
GIB, MIB = 1 << 30, 1 << 20


@dataclass(frozen=True, slots=True)
class Sizes:
    append_batches: int  # batches of 1,000 x 100 B records (workloads 1, 3, 4)
    kib_batches: int  # batches of 1,000 x 1 KiB records (workload 2)
    lookup_records: int  # the small log of workload 5; the large one is 100x
    lookup_probes: int
    lookup_segment_bytes: int
    memory_bytes: int  # workload 6
    memory_segment_bytes: int
    repeat: int


FULL = Sizes(append_batches=1000, kib_batches=256, lookup_records=10_000, lookup_probes=20_000,
             lookup_segment_bytes=1 * MIB, memory_bytes=4 * GIB, memory_segment_bytes=256 * MIB, repeat=5)
QUICK = Sizes(append_batches=10, kib_batches=4, lookup_records=500, lookup_probes=1000,
              lookup_segment_bytes=64 << 10, memory_bytes=24 * MIB, memory_segment_bytes=8 * MIB, repeat=1)
LOOKUP_GROWTH = 100
LOOKUP_BATCH_RECORDS = 100


@dataclass(frozen=True, slots=True)
class Row:
    """One target: kreplica's figure, the peers' figures for the same work, the ratio the
    target is about (if any), and whether it passed (None: not measured)."""

    workload: str
    unit: str
    kreplica: float | None
    target: str
    passed: bool | None
    peers: dict[str, float] = field(default_factory=dict)
    ratio: float | None = None
    note: str = ""


# -- timing ------------------------------------------------------------------------------

Store = Any
#: Each store's work is cut into this many pieces and the stores take turns piece by
#: piece, so a burst of load from elsewhere on the machine falls on all of them alike.
TURNS = 10


@dataclass(frozen=True, slots=True)
class Timings:
    """Median seconds per store: wall clock (``perf_counter``, what the table shows) and
    this thread's CPU time (``thread_time``, in the notes: it tells a slow path from a
    busy machine), plus the paths kept for the read workloads."""

    wall: dict[str, float]
    cpu: dict[str, float]
    kept: dict[str, Path]


def race(root: Path, openers: dict[str, Callable[[Path], Store]], pieces: list,
         run: Callable[[Store, Any], Any], repeat: int, keep: bool = False) -> Timings:
    """Median over ``repeat`` runs of the time each store takes for all ``pieces``.

    Every run opens every store on a new path (all open at once) and feeds them the
    pieces in turn; the stores are closed and deleted after the run, except the last
    run's with ``keep``."""
    wall: dict[str, list[float]] = {name: [] for name in openers}
    cpu: dict[str, list[float]] = {name: [] for name in openers}
    kept: dict[str, Path] = {}
    for r in range(repeat):
        paths = {name: root / f"{name.replace(' ', '-')}-{time.monotonic_ns()}" for name in openers}
        stores = {name: openers[name](paths[name]) for name in openers}
        spent = dict.fromkeys(openers, 0.0)
        spent_cpu = dict.fromkeys(openers, 0.0)
        try:
            gc.collect()
            for piece in pieces:
                for name, store in stores.items():
                    start, start_cpu = time.perf_counter(), time.thread_time()
                    run(store, piece)
                    spent[name] += time.perf_counter() - start
                    spent_cpu[name] += time.thread_time() - start_cpu
        finally:
            for store in stores.values():
                store.close()
        for name in openers:
            wall[name].append(spent[name])
            cpu[name].append(spent_cpu[name])
            if keep and r == repeat - 1:
                kept[name] = paths[name]
            else:
                _remove(paths[name])
    return Timings({n: statistics.median(t) for n, t in wall.items()},
                   {n: statistics.median(t) for n, t in cpu.items()}, kept)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
        Path(f"{path}-wal").unlink(missing_ok=True)
        Path(f"{path}-shm").unlink(missing_ok=True)


def _append(store: Store, work: AppendWork) -> None:
    store.append(work)


def _follow_own(store: Store, chunks: dict[str, list[bytes]]) -> None:
    store.follow(chunks[store.name])


# -- the workloads -----------------------------------------------------------------------

def bench_append_100b(root: Path, sizes: Sizes, work: AppendWork) -> tuple[list[Row], dict[str, Path]]:
    t = race(root, STORES, work.pieces(TURNS), _append, sizes.repeat, keep=True)
    _check_log_bytes(t.kept["kreplica"], work)
    rate = {name: work.records / s / 1e6 for name, s in t.wall.items()}
    cpu = {name: work.records / s / 1e6 for name, s in t.cpu.items()}
    k = rate["kreplica"]
    name = f"1. append 100 B x 1,000/batch ({work.records:,} records, append_as_leader)"
    return [
        Row(name, "M rec/s", k, ">= 5 M rec/s", k >= 5.0, {p: rate[p] for p in PEERS},
            note=f"CPU time: {cpu['kreplica']:.2f} M rec/s"),
        Row("   ... against sqlite3", "x", None, ">= 10x sqlite3", k / rate["sqlite3"] >= 10,
            ratio=k / rate["sqlite3"], note=f"CPU time: {cpu['kreplica'] / cpu['sqlite3']:.2f}x"),
        Row("   ... against lmdb", "x", None, ">= 3x lmdb", k / rate["lmdb"] >= 3, ratio=k / rate["lmdb"],
            note=f"CPU time: {cpu['kreplica'] / cpu['lmdb']:.2f}x"),
    ], t.kept


def _check_log_bytes(path: Path, work: AppendWork) -> None:
    """The raw peer must have written exactly what the Log wrote, or the ratio means nothing."""
    store = KReplica(path)
    try:
        first = bytes(store.log.read(0, 1))
        size = store.log.size_in_bytes()
    finally:
        store.close()
    if first != work.encoded[0] or size != work.log_bytes:
        raise RuntimeError("the raw-write peer's bytes differ from the Log's: the comparison would be unfair")


def bench_append_1kib(root: Path, sizes: Sizes, work: AppendWork) -> list[Row]:
    t = race(root, STORES, work.pieces(TURNS), _append, sizes.repeat)
    gbps = {name: work.value_bytes / s / 1e9 for name, s in t.wall.items()}
    ratio = t.wall["raw os.write"] / t.wall["kreplica"]
    name = f"2. append 1 KiB x 1,000/batch ({work.value_bytes / GIB:.2f} GiB of values)"
    return [Row(name, "GB/s values", gbps["kreplica"], ">= 0.6x raw os.write", ratio >= 0.6,
                {p: gbps[p] for p in PEERS}, ratio, note=_cpu_note(t, work.value_bytes))]


def bench_follower(root: Path, sizes: Sizes, work: AppendWork) -> list[Row]:
    chunks = fetch_chunks(work.encoded)
    nbytes = sum(len(c) for c in chunks)
    step = max(1, -(-len(chunks) // TURNS))
    followers = {"kreplica": KReplica, "raw os.write": RawWrite}
    # Each store follows its own copy of the fetches: with one shared copy, whichever
    # store takes its turn second finds the input in the CPU cache, put there by the
    # first (worth ~25% of this workload's time on this machine).
    copies = {name: [bytes(bytearray(c)) for c in chunks] for name in followers}
    pieces = [{name: copy[i:i + step] for name, copy in copies.items()} for i in range(0, len(chunks), step)]
    t = race(root, followers, pieces, _follow_own, sizes.repeat)
    ratio = t.wall["raw os.write"] / t.wall["kreplica"]
    name = f"3. append_as_follower, {len(chunks):,} fetches of <= 1 MiB (100 B records)"
    return [Row(name, "GB/s", nbytes / t.wall["kreplica"] / 1e9, ">= 0.8x raw os.write", ratio >= 0.8,
                {"raw os.write": nbytes / t.wall["raw os.write"] / 1e9}, ratio, note=_cpu_note(t, nbytes))]


def _cpu_note(t: Timings, nbytes: int) -> str:
    return (f"CPU time: {nbytes / t.cpu['kreplica'] / 1e9:.2f} GB/s, "
            f"{t.cpu['raw os.write'] / t.cpu['kreplica']:.2f}x raw os.write")


def _turns(stores: dict[str, Store], method: str, expected: int, repeat: int) -> Timings:
    """Median time of ``store.<method>()`` per store, the stores taking turns each repeat;
    every call must return ``expected`` (bytes or records read)."""
    wall: dict[str, list[float]] = {name: [] for name in stores}
    cpu: dict[str, list[float]] = {name: [] for name in stores}
    for _ in range(repeat):
        for name, store in stores.items():
            gc.collect()
            start, start_cpu = time.perf_counter(), time.thread_time()
            got = getattr(store, method)()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.thread_time() - start_cpu)
            if got != expected:
                raise RuntimeError(f"{name}.{method}() gave {got}, expected {expected}")
    return Timings({n: statistics.median(t) for n, t in wall.items()},
                   {n: statistics.median(t) for n, t in cpu.items()}, {})


class _Copied:
    """A KReplica store whose ``read_bytes`` copies what it reads (``read_bytes_copied``)."""

    def __init__(self, store: KReplica) -> None:
        self.store = store

    def read_bytes(self) -> int:
        return self.store.read_bytes_copied()


def bench_reads(sizes: Sizes, kept: dict[str, Path], work: AppendWork) -> list[Row]:
    """Sequential reads of the stores workload 1 left behind (all in the page cache)."""
    stores = {name: store(kept[name]) for name, store in STORES.items()}
    try:
        readers = {n: stores[n] for n in ("kreplica", "raw os.write")}
        readers["kreplica copied"] = _Copied(stores["kreplica"])  # the raw peer's job: every byte copied
        read = _turns(readers, "read_bytes", work.log_bytes, sizes.repeat)
        decode = _turns({n: s for n, s in stores.items() if n != "raw os.write"}, "read_all", work.records,
                        sizes.repeat)
    finally:
        for store in stores.values():
            store.close()
    gbps = {name: work.log_bytes / s / 1e9 for name, s in read.wall.items()}
    rate = {name: work.records / s / 1e6 for name, s in decode.wall.items()}
    return [
        Row(f"4. sequential read() of the whole log ({work.log_bytes / MIB:,.0f} MiB, 1 MiB slices)",
            "GB/s", gbps["kreplica"], ">= 2 GB/s", gbps["kreplica"] >= 2.0,
            {"raw os.write": gbps["raw os.write"]},
            note=f"views, bytes untouched; raw: readinto a buffer; kreplica copying its views into a "
                 f"buffer too: {gbps['kreplica copied']:.2f} GB/s; CPU time: "
                 f"{work.log_bytes / read.cpu['kreplica'] / 1e9:.0f} GB/s"),
        Row("   decode_records to Python objects (100 B records)", "M rec/s", rate["kreplica"],
            ">= 5 M rec/s", rate["kreplica"] >= 5.0, {p: rate[p] for p in PEERS if p in rate},
            note=f"CPU time: {work.records / decode.cpu['kreplica'] / 1e6:.2f} M rec/s"),
    ]


def bench_lookups(root: Path, sizes: Sizes) -> list[Row]:
    """Random single-offset fetches on a log and on one 100x larger, over many segments.

    Both sizes of every store are built first; then each repeat walks the probes in
    slices, every (size, store) pair taking its turn per slice.  The figure is the
    median over every slice of every repeat (a burst of load spoils a slice, not a
    figure).  The first repeat maps the segments and warms the page tables, and is
    dropped."""
    small, large = sizes.lookup_records, sizes.lookup_records * LOOKUP_GROWTH
    names = ("kreplica", "sqlite3", "lmdb")
    stores: dict[tuple[int, str], Store] = {}
    probes: dict[int, list[int]] = {}
    try:
        for n in (small, large):
            work = append_work(100, n // LOOKUP_BATCH_RECORDS, LOOKUP_BATCH_RECORDS, encode=False, seed=1)
            for name in names:
                path = root / f"lookup-{n}-{name}"
                stores[n, name] = (KReplica(path, sizes.lookup_segment_bytes) if name == "kreplica"
                                   else STORES[name](path))
                stores[n, name].append(work)
            rng = random.Random(2)
            probes[n] = [rng.randrange(n) for _ in range(sizes.lookup_probes)]
        segments = len(stores[large, "kreplica"].log.segments)
        step = max(1, sizes.lookup_probes // TURNS)
        wall: dict[tuple[int, str], list[float]] = {key: [] for key in stores}
        cpu: dict[tuple[int, str], list[float]] = {key: [] for key in stores}
        for r in range(sizes.repeat + 1):
            for i in range(0, sizes.lookup_probes, step):
                for key, store in stores.items():
                    batch = probes[key[0]][i:i + step]
                    start, start_cpu = time.perf_counter(), time.thread_time()
                    store.lookup(batch)
                    if r:
                        wall[key].append((time.perf_counter() - start) / len(batch) * 1e6)
                        cpu[key].append((time.thread_time() - start_cpu) / len(batch) * 1e6)
    finally:
        for store in stores.values():
            store.close()
        for n, name in stores:
            _remove(root / f"lookup-{n}-{name}")
    us = {key: statistics.median(t) for key, t in wall.items()}
    us_cpu = {key: statistics.median(t) for key, t in cpu.items()}
    growth = {name: us[large, name] / us[small, name] for name in names}
    cpu_growth = us_cpu[large, "kreplica"] / us_cpu[small, "kreplica"]
    return [
        Row(f"5. random offset lookup, {small:,} records", "us/lookup", us[small, "kreplica"], "", None,
            {name: us[small, name] for name in names[1:]}),
        Row(f"   ... {large:,} records ({segments} segments, {LOOKUP_GROWTH}x)", "us/lookup",
            us[large, "kreplica"], f"<= 2x the {small:,}-record log", growth["kreplica"] <= 2.0,
            {name: us[large, name] for name in names[1:]}, growth["kreplica"],
            note="growth: " + ", ".join(f"{name} {growth[name]:.2f}x" for name in names[1:])
                 + f"; CPU time: {us_cpu[small, 'kreplica']:.2f} -> {us_cpu[large, 'kreplica']:.2f} us, {cpu_growth:.2f}x"),
    ]


def bench_memory(root: Path, sizes: Sizes, values: list[bytes]) -> list[Row]:
    """Append ``memory_bytes`` of 1 KiB records over ``memory_segment_bytes`` segments,
    sampling this process's RSS after every batch (psutil)."""
    import psutil

    name = f"6. append {_size(sizes.memory_bytes)} over {_size(sizes.memory_segment_bytes)} segments"
    free = shutil.disk_usage(root).free
    if free < sizes.memory_bytes + 2 * GIB:
        return [Row(name, "MiB RSS", None, "< 600 MiB", None,
                    note=f"not run: {free / GIB:.1f} GiB free at {root}")]
    proc = psutil.Process()
    work = AppendWork(values, 1, [])
    batch_bytes = len(values) * len(values[0])
    batches = sizes.memory_bytes // batch_bytes
    baseline = peak = proc.memory_info().rss
    path = root / "memory"
    store = KReplica(path, sizes.memory_segment_bytes)
    try:
        start = time.perf_counter()
        for _ in range(batches):
            store.append(work)
            peak = max(peak, proc.memory_info().rss)
        took = time.perf_counter() - start
        segments = len(store.log.segments)
    finally:
        store.close()
        _remove(path)
    mib = peak / MIB
    return [Row(name, "MiB RSS", mib, "< 600 MiB", mib < 600, {},
                note=f"{segments} segments, start RSS {baseline / MIB:.0f} MiB, "
                     f"{batches * batch_bytes / took / 1e9:.2f} GB/s with sampling")]


# -- the command ------------------------------------------------------------------------

def default_data_dir(mounts_file: str = "/proc/mounts") -> str:
    """The system temp dir, unless it lives in memory (tmpfs): then the current directory,
    so the stores are written to a disk as the issue asks, not to RAM."""
    tmp = os.path.realpath(tempfile.gettempdir())
    mounts = []
    try:
        with open(mounts_file) as f:
            mounts = [line.split()[1:3] for line in f]
    except OSError:
        return tmp
    covering = [(point, fstype) for point, fstype in mounts
                if tmp == point or tmp.startswith(point.rstrip("/") + "/")]
    fstype = max(covering, key=lambda m: len(m[0]))[1] if covering else ""
    return os.getcwd() if fstype in ("tmpfs", "ramfs") else tmp


def run(sizes: Sizes, data_dir: str | None = None) -> list[Row]:
    """Every workload once, in this process; memory first, while the process is small."""
    root = Path(tempfile.mkdtemp(prefix="kreplica-bench-log-", dir=data_dir or default_data_dir()))
    try:
        rows = bench_memory(root, sizes, append_work(1024, 0).values)
        w1k = append_work(1024, sizes.kib_batches)
        w100 = append_work(100, sizes.append_batches)
        append_rows, kept = bench_append_100b(root, sizes, w100)
        rows += append_rows
        rows += bench_append_1kib(root, sizes, w1k)
        del w1k
        rows += bench_follower(root, sizes, w100)
        rows += bench_reads(sizes, kept, w100)
        for path in kept.values():
            _remove(path)
        rows += bench_lookups(root, sizes)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # the table reads in the order (memory ran first only to keep its RSS honest)
    return rows[1:] + rows[:1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (proves the tool, not speeds)")
    parser.add_argument("--repeat", type=at_least(1), default=None,
                        help="runs per figure (the median is shown; default 5, 1 with --quick)")
    parser.add_argument("--json", metavar="FILE", type=output_file, default=None, help="also write the rows as JSON")
    parser.add_argument("--data-dir", type=directory, default=None,
                        help="where the temporary stores go (default: the system temp dir, or the current "
                             "directory when that is a tmpfs)")


def execute(args: argparse.Namespace) -> int:
    sizes = QUICK if args.quick else FULL
    if args.repeat is not None:
        sizes = replace(sizes, repeat=args.repeat)
    load_before = os.getloadavg()[0]
    rows = run(sizes, args.data_dir)
    machine = {"cpus": os.cpu_count(), "crc32c": crc32c_backend(),
               "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    print_table(rows, sizes, machine)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"sizes": asdict(sizes), "fsync_policy": FSYNC_POLICY, "peers": list(PEERS), "machine": machine,
             "rows": [asdict(r) for r in rows]}, indent=2))
    return 0


def _size(nbytes: int) -> str:
    return f"{nbytes / GIB:g} GiB" if nbytes >= GIB else f"{nbytes / MIB:g} MiB"


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.2f}"


def print_table(rows: list[Row], sizes: Sizes, machine: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kreplica log against its peers: one run, one process, this machine (kreplica bench log)",
                  caption=f"{FSYNC_POLICY}. Median of {sizes.repeat} run(s), stores taking turns, fresh files "
                          f"each run; reads from the page cache. {BATCH_RECORDS:,} records per batch "
                          f"({LOOKUP_BATCH_RECORDS:,} in the lookup workload). "
                          f"{machine['cpus']} CPUs shared with other work: load average "
                          f"{machine['load_average'][0]:.1f} before, {machine['load_average'][1]:.1f} after.")
    table.add_column("workload")
    table.add_column("unit")
    table.add_column("kreplica", justify="right")
    for peer in PEERS:
        table.add_column(peer, justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("target")
    table.add_column("pass")
    for r in rows:
        verdict = "-" if r.passed is None else ("[green]PASS[/]" if r.passed else "[red]FAIL[/]")
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        table.add_row(r.workload + (f"\n   ({r.note})" if r.note else ""), r.unit, _fmt(r.kreplica),
                      *(_fmt(r.peers.get(p)) for p in PEERS), ratio, r.target or "-", verdict)
    Console(width=200).print(table)
