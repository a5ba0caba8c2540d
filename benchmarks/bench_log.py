"""Issue 2's log workloads, kreplica and each peer as separate benchmarks in one group.

The stores and the work are :mod:`kreplica.tools.bench_log_peers` (the same code
``kreplica bench log`` times for its table): the same records for every store,
no forced fsync anywhere, only the work between opening and closing a store
timed (each round opens a fresh store in its setup).  Groups, one per workload:
append 100 B, append 1 KiB, follower append, sequential read, decode, random
lookups on a small and a 100x larger log, and the 4 GiB memory run.

    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable benchmarks/bench_log.py
    .venv/bin/kreplica bench log                              # the one table, with targets

``KREPLICA_BENCH_DIR`` picks where the temporary stores go (default: the system temp
dir, or the current directory when that is a tmpfs); everything is deleted at the end.
"""
from __future__ import annotations

import itertools
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from kreplica.tools import bench_log
from kreplica.tools.bench_log_peers import STORES, AppendWork, KReplica, append_work, fetch_chunks

SIZES = bench_log.FULL
ROUNDS = 5
APPENDERS = list(STORES)
READERS = ["kreplica", "raw os.write"]
DECODERS = ["kreplica", "sqlite3", "lmdb", "plain Python"]
LOOKERS = ["kreplica", "sqlite3", "lmdb"]


@pytest.fixture(scope="module")
def root():
    where = os.environ.get("KREPLICA_BENCH_DIR") or bench_log.default_data_dir()
    path = Path(tempfile.mkdtemp(prefix="kreplica-bench-log-", dir=where))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def work_100b() -> AppendWork:
    return append_work(100, SIZES.append_batches)


@pytest.fixture(scope="module")
def work_1kib() -> AppendWork:
    return append_work(1024, SIZES.kib_batches)


class FreshStores:
    """pedantic() setup: each round gets a new store on a new path; the last is closed and
    deleted by ``finish``."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name, self.counter = root, name, itertools.count()
        self.store = self.path = None

    def setup(self):
        self.finish()
        self.path = self.root / f"{self.name.replace(' ', '-')}-{next(self.counter)}"
        self.store = STORES[self.name](self.path)
        return (self.store,), {}

    def finish(self) -> None:
        if self.store is not None:
            self.store.close()
            bench_log._remove(self.path)
            self.store = None


def _rounds(benchmark, root: Path, name: str, run) -> None:
    fresh = FreshStores(root, name)
    try:
        benchmark.pedantic(run, setup=fresh.setup, rounds=ROUNDS, iterations=1)
    finally:
        fresh.finish()


def test_memory_4gib_over_256mib_segments(benchmark, root, work_1kib) -> None:
    """First in the file, while the process is still small: RSS is absolute."""
    benchmark.group = "6. append 4 GiB over 256 MiB segments (peak RSS in extra_info)"
    rows = benchmark.pedantic(bench_log.bench_memory, args=(root, SIZES, work_1kib.values), rounds=1, iterations=1)
    (row,) = rows
    if row.kreplica is None:
        pytest.skip(row.note)  # not enough free disk for 4 GiB
    benchmark.extra_info.update(peak_rss_mib=row.kreplica, note=row.note)
    assert row.passed, f"peak RSS {row.kreplica:.0f} MiB"


@pytest.mark.parametrize("name", APPENDERS)
def test_append_100b(benchmark, root, work_100b, name) -> None:
    benchmark.group = f"1. append 100 B x 1,000/batch, {work_100b.records:,} records"
    benchmark.extra_info["records"] = work_100b.records
    _rounds(benchmark, root, name, lambda store: store.append(work_100b))


@pytest.mark.parametrize("name", APPENDERS)
def test_append_1kib(benchmark, root, work_1kib, name) -> None:
    benchmark.group = f"2. append 1 KiB x 1,000/batch, {work_1kib.records:,} records"
    benchmark.extra_info["records"] = work_1kib.records
    _rounds(benchmark, root, name, lambda store: store.append(work_1kib))


@pytest.mark.parametrize("name", READERS)
def test_append_as_follower(benchmark, root, work_100b, name) -> None:
    chunks = fetch_chunks(work_100b.encoded)
    benchmark.group = f"3. follower append, {len(chunks)} ready fetches of <= 1 MiB"
    benchmark.extra_info["bytes"] = work_100b.log_bytes
    _rounds(benchmark, root, name, lambda store: store.follow(chunks))


@pytest.fixture(scope="module")
def written(root, work_100b):
    """Workload 1's output in every store, left in the page cache for the read benchmarks."""
    paths = {}
    for name, store_cls in STORES.items():
        paths[name] = root / f"read-{name.replace(' ', '-')}"
        store = store_cls(paths[name])
        store.append(work_100b)
        store.close()
    yield paths
    for path in paths.values():
        bench_log._remove(path)


def _read_rounds(benchmark, path: Path, name: str, method: str):
    store = STORES[name](path)
    try:
        return benchmark.pedantic(getattr(store, method), rounds=ROUNDS, iterations=1, warmup_rounds=1)
    finally:
        store.close()


@pytest.mark.parametrize("name", READERS)
def test_sequential_read(benchmark, written, work_100b, name) -> None:
    benchmark.group = f"4. sequential read of {work_100b.log_bytes >> 20} MiB in 1 MiB slices"
    assert _read_rounds(benchmark, written[name], name, "read_bytes") == work_100b.log_bytes


@pytest.mark.parametrize("name", DECODERS)
def test_decode_to_python(benchmark, written, work_100b, name) -> None:
    benchmark.group = f"4. decode {work_100b.records:,} 100 B records to Python objects"
    assert _read_rounds(benchmark, written[name], name, "read_all") == work_100b.records


@pytest.fixture(scope="module", params=[1, bench_log.LOOKUP_GROWTH], ids=["small", "100x"])
def lookup_stores(request, root):
    n = SIZES.lookup_records * request.param
    work = append_work(100, n // bench_log.LOOKUP_BATCH_RECORDS, bench_log.LOOKUP_BATCH_RECORDS, encode=False)
    stores, paths = {}, {}
    for name in LOOKERS:
        paths[name] = root / f"lookup-{n}-{name}"
        stores[name] = (KReplica(paths[name], SIZES.lookup_segment_bytes) if name == "kreplica"
                        else STORES[name](paths[name]))
        stores[name].append(work)
    rng = random.Random(2)
    yield n, stores, [rng.randrange(n) for _ in range(SIZES.lookup_probes)]
    for name, store in stores.items():
        store.close()
        bench_log._remove(paths[name])


@pytest.mark.parametrize("name", LOOKERS)
def test_random_lookups(benchmark, lookup_stores, name) -> None:
    n, stores, probes = lookup_stores
    benchmark.group = f"5. {len(probes):,} random offset lookups in {n:,} records"
    benchmark.extra_info["segments"] = len(stores["kreplica"].log.segments)
    benchmark.pedantic(stores[name].lookup, args=(probes,), rounds=ROUNDS, iterations=1, warmup_rounds=1)
