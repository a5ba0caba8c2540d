"""``kreplica bench log --quick`` runs every workload and prints one table of the issue's
targets.  Not a timed test: it checks the table's structure and the JSON rows, never
the speeds (those are for ``kreplica bench log`` and ``benchmarks/bench_log.py``)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from kreplica.cli import main
from kreplica.tools import bench_log
from kreplica.log import LogConfig
from kreplica.tools.bench_log_peers import (FSYNC_POLICY, STORES, AppendWork, KReplica, Lmdb, PlainPython, RawWrite,
                                              Sqlite, append_work, fetch_chunks)

TARGETS = [">= 5 M rec/s", ">= 10x sqlite3", ">= 3x lmdb", ">= 0.6x raw os.write", ">= 0.8x raw os.write",
           ">= 2 GB/s", ">= 5 M rec/s", "<= 2x the 500-record log", "< 600 MiB"]


def test_quick_run_prints_one_table_with_every_target(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, "-m", "kreplica", "bench", "log", "--quick", "--json", str(out), "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.count("kreplica bench log") == 1  # one table
    for column in ("workload", "kreplica", *bench_log.PEERS, "ratio", "target", "pass"):
        assert column in text
    assert "no forced fsync anywhere" in text  # the caption states the fsync policy

    report = json.loads(out.read_text())
    assert report["peers"] == list(bench_log.PEERS)
    assert report["sizes"] == asdict(bench_log.QUICK)
    assert report["machine"]["cpus"] == os.cpu_count() and len(report["machine"]["load_average"]) == 2
    rows = report["rows"]
    assert [r["target"] for r in rows if r["target"]] == TARGETS
    for row in rows:
        assert row["workload"].split()[0] in text  # every JSON row is a table row
        if row["target"]:
            assert row["passed"] in (True, False), row  # every target was measured and judged
            assert row["kreplica"] is not None or row["ratio"] is not None
    appends = rows[0]
    assert set(appends["peers"]) == set(bench_log.PEERS)
    assert all(v > 0 for v in appends["peers"].values())
    assert list(tmp_path.iterdir()) == [out]  # every store it wrote was deleted


def test_raw_peer_writes_the_logs_own_bytes(tmp_path: Path) -> None:
    """The raw-write ratio is only fair if both files hold the same bytes."""
    work = append_work(100, 3)
    k, r = KReplica(tmp_path / "log"), RawWrite(tmp_path / "raw")
    for piece in work.pieces(2):
        k.append(piece)
        r.append(piece)
    size = k.log.size_in_bytes()
    k.close()
    r.close()
    log_file = next((tmp_path / "log").glob("*.log"))
    assert log_file.read_bytes()[:size] == (tmp_path / "raw").read_bytes() == b"".join(work.encoded)


def test_every_store_reads_back_what_it_appended(tmp_path: Path) -> None:
    work = append_work(100, 2)
    for name, store_cls in STORES.items():
        store = store_cls(tmp_path / name.replace(" ", "-"))
        store.append(work)
        store.close()
        store = store_cls(tmp_path / name.replace(" ", "-"))
        if hasattr(store, "read_all"):
            assert store.read_all() == work.records, name
        if hasattr(store, "read_bytes"):
            assert store.read_bytes() == work.log_bytes, name
        if hasattr(store, "lookup"):
            store.lookup([0, work.records - 1])
        store.close()



def _sqlite_rows(store: Sqlite) -> list[tuple[int, bytes]]:
    return store.db.execute("SELECT offset, value FROM log ORDER BY offset").fetchall()


def _lmdb_rows(store: Lmdb) -> list[tuple[int, bytes]]:
    with store.env.begin() as txn:
        return [(struct.unpack(">Q", key)[0], value) for key, value in txn.cursor()]


def _plain_rows(store: PlainPython) -> list[tuple[int, bytes]]:
    data, rows, pos = Path(store.path).read_bytes(), [], 0
    while pos < len(data):
        offset, n = store._header.unpack_from(data, pos)
        pos += store._header.size
        rows.append((offset, data[pos:pos + n]))
        pos += n
    return rows


@pytest.mark.parametrize("store_cls, rows", [(Sqlite, _sqlite_rows), (Lmdb, _lmdb_rows), (PlainPython, _plain_rows)])
def test_each_peer_stores_every_batchs_own_values_at_their_offsets(store_cls, rows, tmp_path: Path) -> None:
    """The peers write what the Log writes: each batch's own values (not the first batch's
    again, which the CPU caches would hand back), every record, at consecutive offsets."""
    work = append_work(8, 5, 10)
    store = store_cls(tmp_path / "store")
    for piece in work.pieces(2):
        store.append(piece)
    assert rows(store) == list(enumerate(v for batch in work.each_batch() for v in batch))
    store.close()


def test_sqlite_commits_once_a_batch_as_the_log_appends_once_a_batch(tmp_path: Path) -> None:
    """append_as_leader takes one batch a call; one transaction a piece of the race (up to
    100 batches) would spare sqlite3 all but one commit in each."""
    store = Sqlite(tmp_path / "db")
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    for piece in append_work(8, 4, 10).pieces(2):
        store.append(piece)
    store.close()
    assert [s for s in statements if s in ("BEGIN", "COMMIT")] == ["BEGIN", "COMMIT"] * 4


def test_the_stores_run_with_the_fsync_policy_the_caption_states(tmp_path: Path) -> None:
    assert "sqlite3 WAL + synchronous=OFF" in FSYNC_POLICY and "lmdb sync=False" in FSYNC_POLICY
    sqlite = Sqlite(tmp_path / "db")
    assert sqlite.db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert sqlite.db.execute("PRAGMA synchronous").fetchone() == (0,)  # OFF
    sqlite.close()
    lm = Lmdb(tmp_path / "lmdb", map_size=1 << 20)
    assert (lm.env.flags()["sync"], lm.env.flags()["metasync"]) == (False, False)
    lm.close()
    log = KReplica(tmp_path / "log")
    defaults = LogConfig.from_dict()
    assert (log.log.config.flush_messages, log.log.config.flush_ms) == (defaults.flush_messages, defaults.flush_ms)
    log.close()


def test_fetch_chunks_keep_batches_whole_and_in_order() -> None:
    work = AppendWork([b"x" * 100] * 10, 0, [bytes([i]) * 400 for i in range(7)])
    chunks = fetch_chunks(work.encoded, max_bytes=1000)
    assert [len(c) for c in chunks] == [800, 800, 800, 400]
    assert b"".join(chunks) == b"".join(work.encoded)


def test_stores_default_to_a_disk_not_a_tmpfs(tmp_path: Path, monkeypatch) -> None:
    mounts = tmp_path / "mounts"
    monkeypatch.setattr(bench_log.tempfile, "gettempdir", lambda: "/scratch/tmp")
    monkeypatch.chdir(tmp_path)
    mounts.write_text("/dev/vda / ext4 rw 0 0\ntmpfs /scratch tmpfs rw 0 0\n")
    assert bench_log.default_data_dir(str(mounts)) == str(tmp_path)
    mounts.write_text("/dev/vda / ext4 rw 0 0\ntmpfs /scratch/tmpx tmpfs rw 0 0\n")
    assert bench_log.default_data_dir(str(mounts)) == "/scratch/tmp"


def test_bad_arguments_are_refused_before_the_benchmark_runs(tmp_path: Path, capsys, monkeypatch) -> None:

    def run(*args, **kwargs):
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(bench_log, "run", run)
    (tmp_path / "afile").write_text("x")
    cases = [
        (["--repeat", "-1"], "argument --repeat: -1: must be at least 1"),
        (["--repeat", "0"], "argument --repeat: 0: must be at least 1"),
        (["--data-dir", str(tmp_path / "nonexistent")], "no such directory"),
        (["--data-dir", str(tmp_path / "afile")], "not a directory"),
        (["--json", str(tmp_path / "afile" / "x.json")], "argument --json: "),
        (["--json", str(tmp_path)], "Is a directory"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as e:
            main(["bench", "log", "--quick", *argv])
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err.strip().splitlines()[-1], (argv, err)


# -- the arithmetic, on fake stores and a fake clock (no speed is measured) ------------------

class _Clock:
    """``bench_log.time``: the wall and CPU clocks move only when a fake store works."""

    monotonic_ns = staticmethod(time.monotonic_ns)

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def perf_counter(self) -> float:
        return self.wall

    def thread_time(self) -> float:
        return self.cpu

    def spend(self, wall: float, cpu: float) -> None:
        self.wall += wall
        self.cpu += cpu


def _fake_store(clock: _Clock, name: str, ns: dict[str, float], runs: tuple[float, ...] = (1.0,),
                cpu_share: float = 1.0, work: AppendWork | None = None, warm_up: int = 0) -> type:
    """A store class whose every method costs ``ns[method]`` fake nanoseconds a unit (a record
    appended or read, a byte followed or read, an offset looked up), times the factor of its
    run: the n-th store opened takes ``runs[n]``.  Its CPU time is ``cpu_share`` of its wall
    time.  The first ``warm_up`` lookups cost 10x (the segments are mapped then)."""

    class Fake:
        opened: list[Fake] = []

        def __init__(self, path: Path, *args) -> None:
            self.factor = runs[min(len(Fake.opened), len(runs) - 1)]
            Fake.opened.append(self)
            self.records = 0
            self.looked_up = 0
            self.log = SimpleNamespace(segments=[None] * 7)

        def _spend(self, method: str, units: int, factor: float = 1.0) -> None:
            wall = ns.get(method, 0.0) * 1e-9 * units * self.factor * factor
            clock.spend(wall, wall * cpu_share)

        def append(self, w: AppendWork) -> None:
            self.records += w.records
            self._spend("append", w.records)

        def follow(self, chunks: list[bytes]) -> None:
            self._spend("follow", sum(map(len, chunks)))

        def read_bytes(self) -> int:
            self._spend("read_bytes", work.log_bytes)
            return work.log_bytes

        def read_bytes_copied(self) -> int:
            self._spend("read_bytes_copied", work.log_bytes)
            return work.log_bytes

        def read_all(self) -> int:
            self._spend("read_all", work.records)
            return work.records

        def lookup(self, offsets: list[int]) -> None:
            cold = self.looked_up < warm_up
            self.looked_up += len(offsets)
            self._spend(f"lookup {self.records}", len(offsets), 10.0 if cold else 1.0)

        def close(self) -> None:
            pass

    Fake.name = name
    return Fake


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(bench_log, "time", c)
    return c


def test_append_rows_are_medians_and_each_ratio_is_against_its_own_peer(tmp_path, clock, monkeypatch):
    """kreplica's three runs cost 1x, 3x and 2x its base: the table shows the median (2x),
    as the module's doc says, in records (not batches) a second; each peer is divided by
    its own column, and the CPU notes come from the CPU clock."""
    ns = {"kreplica": 50, "raw os.write": 80, "sqlite3": 2500, "lmdb": 400, "plain Python": 2000}
    stores = {name: _fake_store(clock, name, {"append": per}, runs=(1, 3, 2) if name == "kreplica" else (1,),
                                cpu_share=0.8 if name == "kreplica" else 1.0)
              for name, per in ns.items()}
    monkeypatch.setattr(bench_log, "STORES", stores)
    checked = []
    monkeypatch.setattr(bench_log, "_check_log_bytes", lambda path, work: checked.append(path))
    sizes = replace(bench_log.QUICK, repeat=3)
    work = append_work(16, 4, 10)  # 40 records in 4 batches, 640 B of values
    rows, kept = bench_log.bench_append_100b(tmp_path, sizes, work)
    assert checked == [kept["kreplica"]] and set(kept) == set(ns)
    # kreplica: 50 ns x median 2 = 100 ns a record; CPU 80 ns
    assert rows[0].kreplica == pytest.approx(10.0) and rows[0].passed
    assert rows[0].peers == pytest.approx({"raw os.write": 12.5, "sqlite3": 0.4, "lmdb": 2.5, "plain Python": 0.5})
    assert rows[0].note == "CPU time: 12.50 M rec/s"
    assert (rows[1].ratio, rows[1].passed, rows[1].note) == (pytest.approx(25.0), True, "CPU time: 31.25x")
    assert (rows[2].ratio, rows[2].passed, rows[2].note) == (pytest.approx(4.0), True, "CPU time: 5.00x")

    [row] = bench_log.bench_append_1kib(tmp_path, sizes, work)  # kreplica's later runs: 2x, 100 ns a record
    assert row.kreplica == pytest.approx(640 / 4e-6 / 1e9) and row.unit == "GB/s values"
    assert (row.ratio, row.passed) == (pytest.approx(0.8), True)  # raw takes 80 ns to our 100
    assert row.note == "CPU time: 0.20 GB/s, 1.00x raw os.write"


def test_the_follower_row_is_bytes_a_second_against_raw_writes(tmp_path, clock, monkeypatch):
    work = append_work(8, 3, 10)
    monkeypatch.setattr(bench_log, "KReplica", _fake_store(clock, "kreplica", {"follow": 2.0}, runs=(1, 5, 0.5)))
    monkeypatch.setattr(bench_log, "RawWrite", _fake_store(clock, "raw os.write", {"follow": 1.0}))
    [row] = bench_log.bench_follower(tmp_path, replace(bench_log.QUICK, repeat=3), work)
    assert (row.kreplica, row.peers) == (pytest.approx(0.5), pytest.approx({"raw os.write": 1.0}))  # median 2 ns/B
    assert (row.ratio, row.passed) == (pytest.approx(0.5), False)


def test_read_rows_judge_the_views_and_show_each_reader_in_its_column(tmp_path, clock, monkeypatch):
    work = append_work(8, 2, 10)
    costs = {"kreplica": {"read_bytes": 0.25, "read_bytes_copied": 1.0, "read_all": 100},
             "raw os.write": {"read_bytes": 0.8}, "sqlite3": {"read_all": 1000}, "lmdb": {"read_all": 500},
             "plain Python": {"read_all": 2000}}
    monkeypatch.setattr(bench_log, "STORES", {name: _fake_store(clock, name, ns, cpu_share=0.5, work=work)
                                              for name, ns in costs.items()})
    views, decode = bench_log.bench_reads(replace(bench_log.QUICK, repeat=3), dict.fromkeys(costs, tmp_path), work)
    assert (views.kreplica, views.passed, views.peers) == (pytest.approx(4.0), True, pytest.approx({"raw os.write": 1.25}))
    assert "copying its views into a buffer too: 1.00 GB/s; CPU time: 8 GB/s" in views.note
    assert decode.kreplica == pytest.approx(10.0) and decode.passed
    assert decode.peers == pytest.approx({"sqlite3": 1.0, "lmdb": 2.0, "plain Python": 0.5})
    assert decode.note == "CPU time: 20.00 M rec/s"
    # views slower than 2 GB/s fail, however fast the copying read is
    costs["kreplica"].update(read_bytes=1.0, read_bytes_copied=0.25)
    views, _ = bench_log.bench_reads(bench_log.QUICK, dict.fromkeys(costs, tmp_path), work)
    assert (views.kreplica, views.passed) == (pytest.approx(1.0), False)


def test_lookup_growth_is_the_large_log_over_the_small_with_the_warm_up_dropped(tmp_path, clock, monkeypatch):
    """Every (size, store) pair's first pass over the probes costs 10x: dropped, it moves
    no median; the growth is the large log's time over the small one's."""
    sizes = replace(bench_log.QUICK, lookup_records=100, lookup_probes=20, repeat=1)
    small, large = 100, 100 * bench_log.LOOKUP_GROWTH
    us = {"kreplica": (1.0, 1.5), "sqlite3": (2.0, 3.0), "lmdb": (1.0, 4.0)}
    fakes = {name: _fake_store(clock, name, {f"lookup {small}": s * 1000, f"lookup {large}": g * 1000},
                               cpu_share=0.5, warm_up=sizes.lookup_probes)
             for name, (s, g) in us.items()}
    monkeypatch.setattr(bench_log, "KReplica", fakes["kreplica"])
    monkeypatch.setattr(bench_log, "STORES", fakes)
    first, second = bench_log.bench_lookups(tmp_path, sizes)
    assert (first.kreplica, first.peers) == (pytest.approx(1.0), pytest.approx({"sqlite3": 2.0, "lmdb": 1.0}))
    assert (second.kreplica, second.peers) == (pytest.approx(1.5), pytest.approx({"sqlite3": 3.0, "lmdb": 4.0}))
    assert (second.ratio, second.passed) == (pytest.approx(1.5), True)
    assert "(7 segments, 100x)" in second.workload
    assert second.note == "growth: sqlite3 1.50x, lmdb 4.00x; CPU time: 0.50 -> 0.75 us, 1.50x"


def test_memory_row_is_the_peak_rss_in_mib_sampled_after_every_batch(tmp_path, clock, monkeypatch):
    """This process's RSS (psutil.Process() of no pid) before the work and after each batch:
    the row shows the peak, in MiB, and a peak over 600 MiB fails."""
    import psutil

    fake = _fake_store(clock, "kreplica", {"append": 1.0})
    stores = fake.opened
    rss_after = [150, 700, 300, 200]  # MiB after each batch; 100 before the first
    monkeypatch.setattr(bench_log, "KReplica", fake)

    class Process:
        def __init__(self, *pid) -> None:
            assert pid == ()  # this process, not another one

        def memory_info(self):
            done = stores[0].records // 10 if stores else 0
            return SimpleNamespace(rss=([100] + rss_after)[done] * bench_log.MIB)

    monkeypatch.setattr(psutil, "Process", Process)
    sizes = replace(bench_log.QUICK, memory_bytes=4 * 160, memory_segment_bytes=1 << 20)
    [row] = bench_log.bench_memory(tmp_path, sizes, [b"v" * 16] * 10)  # 4 batches of 160 B
    assert stores[0].records == 40
    assert (row.kreplica, row.unit, row.passed) == (700.0, "MiB RSS", False)
    # 4 batches of 160 B in 40 fake ns: 16 GB/s (of 10^9 bytes, as the note says; 14.90 in GiB)
    assert row.note == "7 segments, start RSS 100 MiB, 16.00 GB/s with sampling"


@pytest.mark.parametrize("argv, repeat", [([], 5), (["--repeat", "2"], 2), (["--quick"], 1),
                                          (["--quick", "--repeat", "3"], 3)])
def test_the_options_reach_the_run(argv, repeat, tmp_path, monkeypatch, capsys):
    runs = []
    monkeypatch.setattr(bench_log, "run", lambda sizes, data_dir=None: runs.append((sizes, data_dir)) or [])
    assert main(["bench", "log", *argv, "--data-dir", str(tmp_path)]) == 0
    base = bench_log.QUICK if "--quick" in argv else bench_log.FULL
    assert runs == [(replace(base, repeat=repeat), str(tmp_path))]
    assert f"Median of {repeat} run(s)" in capsys.readouterr().out.replace("\n", " ")


# -- second pass (forty-fourth review) ---------------------------------------------------------

def test_the_1kib_target_is_0_6x_raw_and_the_cpu_note_is_raw_over_ours(tmp_path, clock, monkeypatch):
    """Raw writes take 70 ns a record to our 100: 0.7x passes the 0.6x target; the CPU note
    divides raw's CPU time by ours (70 ns over our 50 ns: 1.40x)."""
    ns = {"kreplica": 100, "raw os.write": 70, "sqlite3": 2500, "lmdb": 400, "plain Python": 2000}
    monkeypatch.setattr(bench_log, "STORES", {name: _fake_store(clock, name, {"append": per},
                                                                cpu_share=0.5 if name == "kreplica" else 1.0)
                                              for name, per in ns.items()})
    work = append_work(16, 4, 10)
    [row] = bench_log.bench_append_1kib(tmp_path, bench_log.QUICK, work)
    assert (row.ratio, row.passed) == (pytest.approx(0.7), True)
    assert row.note == "CPU time: 0.32 GB/s, 1.40x raw os.write"  # 640 B in 40 x 50 ns


class _Reader:
    """A reader whose n-th call costs ``costs[n]`` fake seconds and returns ``got``."""

    def __init__(self, clock: _Clock, costs: list[float], got: int) -> None:
        self.clock, self.costs, self.got = clock, list(costs), got

    def read_bytes(self) -> int:
        cost = self.costs.pop(0)
        self.clock.spend(cost, cost / 2)
        return self.got


def test_read_figures_are_the_median_call_and_a_short_read_is_an_error(clock):
    t = bench_log._turns({"a": _Reader(clock, [1.0, 3.0, 2.0], 100), "b": _Reader(clock, [4.0, 4.0, 4.0], 100)},
                         "read_bytes", 100, 3)
    assert (t.wall, t.cpu) == ({"a": 2.0, "b": 4.0}, {"a": 1.0, "b": 2.0})
    with pytest.raises(RuntimeError, match=r"b.read_bytes\(\) gave 99, expected 100"):
        bench_log._turns({"a": _Reader(clock, [1.0], 100), "b": _Reader(clock, [1.0], 99)}, "read_bytes", 100, 1)


def test_lookups_probe_all_of_each_log_and_kreplicas_logs_use_the_small_segments(tmp_path, clock, monkeypatch):
    """The large log's probes range over its 10,000 offsets, not the small log's 100; kreplica's
    logs are opened with ``lookup_segment_bytes`` (the "many segments" of the target)."""
    sizes = replace(bench_log.QUICK, lookup_records=100, lookup_probes=50, repeat=1)
    probed: dict[tuple[str, int], list[int]] = {}
    opened_with: list[tuple] = []
    order: list[tuple[str, int]] = []  # the (store, size) of each slice looked up, in turn

    def recording(name: str) -> type:
        base = _fake_store(clock, name, {"lookup 100": 1000.0, "lookup 10000": 1500.0})

        class Recording(base):
            def __init__(self, path: Path, *args) -> None:
                super().__init__(path, *args)
                if name == "kreplica":
                    opened_with.append(args)

            def lookup(self, offsets: list[int]) -> None:
                probed.setdefault((name, self.records), []).extend(offsets)
                order.append((name, self.records))
                super().lookup(offsets)

        return Recording

    fakes = {name: recording(name) for name in ("kreplica", "sqlite3", "lmdb")}
    monkeypatch.setattr(bench_log, "KReplica", fakes["kreplica"])
    monkeypatch.setattr(bench_log, "STORES", fakes)
    bench_log.bench_lookups(tmp_path, sizes)
    assert opened_with == [(sizes.lookup_segment_bytes,)] * 2
    for (name, records), offsets in probed.items():
        assert len(offsets) == 2 * sizes.lookup_probes  # the warm-up pass and one repeat
        assert max(offsets) < records and max(offsets) >= records // 2, (name, records)
    assert {records for _, records in probed} == {100, 10_000}
    # each slice goes to every (size, store) pair before the next slice (BH5-08)
    pairs = [(name, n) for n in (100, 10_000) for name in ("kreplica", "sqlite3", "lmdb")]
    assert order == pairs * 2 * bench_log.TURNS


def test_memory_peak_counts_the_rss_before_the_first_batch(tmp_path, clock, monkeypatch):
    """RSS that falls once the appends start (500 MiB, then 300): the peak is the 500."""
    import psutil

    monkeypatch.setattr(bench_log, "KReplica", _fake_store(clock, "kreplica", {"append": 1.0}))
    samples = iter([500, 300, 300, 300, 300])
    monkeypatch.setattr(psutil, "Process", lambda: SimpleNamespace(
        memory_info=lambda: SimpleNamespace(rss=next(samples) * bench_log.MIB)))
    sizes = replace(bench_log.QUICK, memory_bytes=4 * 160, memory_segment_bytes=1 << 20)
    [row] = bench_log.bench_memory(tmp_path, sizes, [b"v" * 16] * 10)
    assert (row.kreplica, row.passed) == (500.0, True)


def test_run_gives_each_workload_its_records_and_lists_memory_last(tmp_path, monkeypatch):
    got, roots = {}, []

    def workload(number, result):
        def bench(*args):
            got[number] = [a for a in args if isinstance(a, (AppendWork, list))]
            roots.extend(a for a in args if isinstance(a, Path))
            return result(number)
        return bench

    row = lambda number: [bench_log.Row(f"{number}. w", "u", 1.0, "", None)]
    kept: dict[str, Path] = {}

    def append_100b(root, sizes, work):  # keeps a file and a directory, as sqlite3 and the Log do
        kept.update({"sqlite3": root / "sqlite3-1", "kreplica": root / "kreplica-1"})
        kept["sqlite3"].write_bytes(b"x")
        (kept["kreplica"] / "0.log").mkdir(parents=True)
        return workload(1, lambda n: (row(n), dict(kept)))(root, sizes, work)

    def lookups(root, sizes):  # the reads are done with them: they are gone before the lookups
        assert kept and not any(path.exists() for path in kept.values())
        return workload(5, row)(root, sizes)

    monkeypatch.setattr(bench_log, "bench_memory", workload(6, row))
    monkeypatch.setattr(bench_log, "bench_append_100b", append_100b)
    monkeypatch.setattr(bench_log, "bench_append_1kib", workload(2, row))
    monkeypatch.setattr(bench_log, "bench_follower", workload(3, row))
    monkeypatch.setattr(bench_log, "bench_reads", workload(4, row))
    monkeypatch.setattr(bench_log, "bench_lookups", lookups)
    rows = bench_log.run(replace(bench_log.QUICK, append_batches=2, kib_batches=1), str(tmp_path))
    assert [r.workload for r in rows] == ["1. w", "2. w", "3. w", "4. w", "5. w", "6. w"]
    assert len(got[6][0][0]) == 1024 and got[5] == []
    assert [(w.batches, len(w.values[0])) for w in got[1] + got[2] + got[3]] == [(2, 100), (1, 1024), (2, 100)]
    assert got[4][0] is got[1][0]  # the reads read back workload 1's records
    assert len(roots) == 5 and {root.parent for root in roots} == {tmp_path}  # every store under --data-dir
    assert list(tmp_path.iterdir()) == []


def test_the_json_report_holds_the_sizes_that_ran(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_log, "run", lambda sizes, data_dir=None: [])
    out = tmp_path / "rows.json"
    assert main(["bench", "log", "--quick", "--repeat", "3", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["sizes"] == asdict(replace(bench_log.QUICK, repeat=3))
    assert (report["fsync_policy"], report["rows"]) == (FSYNC_POLICY, [])


def test_the_table_puts_each_peer_in_its_column_and_shows_fail_and_not_measured(capsys):
    rows = [bench_log.Row("w1", "u", 1.0, "t1", False,
                          {"raw os.write": 11.0, "sqlite3": 22.0, "lmdb": 33.0, "plain Python": 44.0}, 0.5),
            bench_log.Row("w2", "u", 2.0, "t2", True), bench_log.Row("w3", "u", None, "", None)]
    bench_log.print_table(rows, bench_log.QUICK, {"cpus": 2, "load_average": [1.0, 2.0]})
    lines = [line for line in capsys.readouterr().out.replace("┃", "│").splitlines() if line.count("│") == 11]
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines]
    header, *body = cells
    assert header == ["workload", "unit", "kreplica", *bench_log.PEERS, "ratio", "target", "pass"]
    assert body == [["w1", "u", "1.00", "11.00", "22.00", "33.00", "44.00", "0.50x", "t1", "FAIL"],
                    ["w2", "u", "2.00", "-", "-", "-", "-", "-", "t2", "PASS"],
                    ["w3", "u", "-", "-", "-", "-", "-", "-", "-", "-"]]


def test_a_fetch_of_exactly_max_bytes_is_one_chunk() -> None:
    assert fetch_chunks([b"a" * 500, b"b" * 500, b"c" * 10], max_bytes=1000) == [b"a" * 500 + b"b" * 500, b"c" * 10]


def test_the_copying_read_copies_every_byte_of_the_log(tmp_path, monkeypatch) -> None:
    """``read_bytes_copied`` is the raw peer's job (every byte into a buffer): its buffer
    receives the log's bytes, in order."""
    from kreplica.tools import bench_log_peers

    copied = []

    class Buffer(bytearray):
        def __setitem__(self, index, value):
            copied.append(bytes(value))
            super().__setitem__(index, value)

    work = append_work(100, 3)
    store = KReplica(tmp_path / "log")
    store.append(work)
    monkeypatch.setattr(bench_log_peers, "bytearray", Buffer, raising=False)
    assert store.read_bytes_copied() == work.log_bytes
    store.close()
    assert b"".join(copied) == b"".join(work.encoded)


def test_race_keeps_the_last_runs_stores_and_removes_the_others(tmp_path, monkeypatch):
    """The reads (workload 4) read the stores workload 1 leaves: the last run's, the freshest
    in the page cache; every earlier run's files are removed."""
    import itertools

    monkeypatch.setattr(bench_log, "time", SimpleNamespace(perf_counter=lambda: 0.0, thread_time=lambda: 0.0,
                                                           monotonic_ns=itertools.count().__next__))
    opened: list[Path] = []

    class Store:
        def __init__(self, path: Path) -> None:
            path.write_bytes(b"x")
            opened.append(path)

        def close(self) -> None:
            pass

    t = bench_log.race(tmp_path, {"a": Store}, [None], lambda store, piece: None, 3, keep=True)
    assert len(opened) == 3 and t.kept == {"a": opened[-1]}
    assert list(tmp_path.iterdir()) == [opened[-1]]
    # without ``keep`` (workloads 2 and 3) the last run's files go as every other run's do
    # (the hundred-and-twentieth review's BH6-01 left 5 stores of workload 2 on the disk)
    opened.pop().unlink()
    t = bench_log.race(tmp_path, {"a": Store}, [None], lambda store, piece: None, 2)
    assert len(opened) == 4 and t.kept == {} and list(tmp_path.iterdir()) == []


# The sixty-third review (docs/engine-audit.md, BH3-..): the third pass over the harness.

def test_the_memory_row_is_not_run_without_its_bytes_and_2_gib_to_spare(tmp_path, monkeypatch):
    """Workload 6 writes ``memory_bytes`` and needs 2 GiB more free (the other stores'
    files, the page cache's write-back): with less it is a "not measured" row whose note
    gives the free space in GiB, and no store is opened."""
    monkeypatch.setattr(bench_log.shutil, "disk_usage",
                        lambda path: SimpleNamespace(free=bench_log.QUICK.memory_bytes + 3 * bench_log.GIB // 2))
    monkeypatch.setattr(bench_log, "KReplica", lambda *a: pytest.fail("workload 6 ran without room for it"))
    [row] = bench_log.bench_memory(tmp_path, bench_log.QUICK, [b"v" * 1024])
    assert (row.kreplica, row.passed) == (None, None)
    assert row.note == f"not run: 1.5 GiB free at {tmp_path}"


def test_sizes_of_a_whole_gib_and_more_are_named_in_gib():
    # the memory row's name: FULL appends "4 GiB over 256 MiB segments"; 1 GiB is not "1024 MiB"
    assert [bench_log._size(n) for n in (bench_log.GIB, 4 * bench_log.GIB, 256 * bench_log.MIB)] == [
        "1 GiB", "4 GiB", "256 MiB"]


def test_the_json_and_the_caption_give_the_load_average_before_and_after_the_run(tmp_path, monkeypatch, capsys):
    """The machine is shared: the load before the run and after it are two readings, the
    first taken before any store is opened."""
    loads = [1.5, 3.5]  # the first reading, then the second for every later one
    monkeypatch.setattr(bench_log.os, "getloadavg", lambda: (loads.pop(0) if len(loads) > 1 else loads[0], 0.0, 0.0))
    monkeypatch.setattr(bench_log, "run", lambda sizes, data_dir=None: [])
    out = tmp_path / "rows.json"
    assert main(["bench", "log", "--quick", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["machine"]["load_average"] == [1.5, 3.5]
    assert "load average 1.5 before, 3.5 after" in " ".join(capsys.readouterr().out.split())


# The eighty-second review (docs/engine-audit.md, BH4-..): the fourth pass over the harness.

def test_the_lookup_row_counts_the_segments_of_the_large_log(tmp_path, clock, monkeypatch):
    """"Many segments" is the 100x log's count: a segment a hundred records here, so the
    large log has 100 and the small one 1."""
    sizes = replace(bench_log.QUICK, lookup_records=100, lookup_probes=20, repeat=1)
    costs = {"lookup 100": 1000.0, "lookup 10000": 1000.0}

    class Segmented(_fake_store(clock, "kreplica", costs)):
        def append(self, w: AppendWork) -> None:
            super().append(w)
            self.log = SimpleNamespace(segments=[None] * (self.records // 100))

    fakes = {"kreplica": Segmented, **{name: _fake_store(clock, name, costs) for name in ("sqlite3", "lmdb")}}
    monkeypatch.setattr(bench_log, "KReplica", Segmented)
    monkeypatch.setattr(bench_log, "STORES", fakes)
    _, second = bench_log.bench_lookups(tmp_path, sizes)
    assert "10,000 records (100 segments, 100x)" in second.workload


def test_each_follower_follows_its_own_copy_of_the_same_fetches(tmp_path, monkeypatch):
    """Both followers get the same bytes in the same pieces, but not the same objects: the
    second to take its turn would find the first's input in the CPU caches."""
    raced = []

    def race(root, openers, pieces, run, repeat, keep=False):
        raced.extend(pieces)
        return bench_log.Timings(dict.fromkeys(openers, 1.0), dict.fromkeys(openers, 1.0), {})

    monkeypatch.setattr(bench_log, "race", race)
    work = append_work(8, 4, 10)
    bench_log.bench_follower(tmp_path, bench_log.QUICK, work)
    ours, raws = ([c for piece in raced for c in piece[name]] for name in ("kreplica", "raw os.write"))
    assert ours == raws == fetch_chunks(work.encoded)
    assert not any(a is b for a, b in zip(ours, raws))


def test_the_default_data_dir_follows_the_temp_dirs_symlink_and_knows_every_memory_filesystem(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    real = real.resolve()
    (tmp_path / "link").symlink_to(real)
    cwd = (tmp_path / "cwd")
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(bench_log.tempfile, "gettempdir", lambda: str(tmp_path / "link"))
    mounts = tmp_path / "mounts"

    def default(table: str) -> str:
        mounts.write_text(table)
        return bench_log.default_data_dir(str(mounts))

    assert default(f"/dev/vda / ext4 rw 0 0\ntmpfs {real} tmpfs rw 0 0\n") == os.getcwd()  # through the link
    assert default(f"/dev/vda / ext4 rw 0 0\nnone {real} ramfs rw 0 0\n") == os.getcwd()  # ramfs is memory too
    assert default("none / tmpfs rw 0 0\n") == os.getcwd()  # a root filesystem in memory covers the temp dir
    assert default("/dev/vda / ext4 rw 0 0\n") == str(real)
    # a tmpfs at a name the temp dir's path merely starts with does not cover it (BH6-08)
    assert default(f"/dev/vda / ext4 rw 0 0\ntmpfs {str(real)[:-1]} tmpfs rw 0 0\n") == str(real)
    assert bench_log.default_data_dir(str(tmp_path / "no-mount-table")) == str(real)  # unreadable: the temp dir


def test_a_rows_note_is_printed_under_its_workload(capsys):
    bench_log.print_table([bench_log.Row("w1", "u", 1.0, "t1", True, note="CPU time: 1.23x")], bench_log.QUICK,
                          {"cpus": 2, "load_average": [1.0, 2.0]})
    assert "(CPU time: 1.23x)" in capsys.readouterr().out


def test_the_caption_gives_the_lookup_workloads_own_batch_size(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "300")
    bench_log.print_table([], bench_log.QUICK, {"cpus": 2, "load_average": [1.0, 2.0]})
    out = " ".join(capsys.readouterr().out.split())
    assert f"{bench_log.BATCH_RECORDS:,} records per batch ({bench_log.LOOKUP_BATCH_RECORDS:,} in the lookup" in out


def test_the_raw_peers_check_refuses_a_log_of_another_size(tmp_path):
    """Same first batch, one batch more: the raw file and the log would not hold the same bytes."""
    work = append_work(100, 2)
    store = KReplica(tmp_path / "log")
    store.append(work)
    store.close()
    bench_log._check_log_bytes(tmp_path / "log", work)
    with pytest.raises(RuntimeError, match="the raw-write peer's bytes differ from the Log's"):
        bench_log._check_log_bytes(tmp_path / "log", append_work(100, 3))


def test_every_store_looks_up_each_offset_it_is_given(tmp_path):
    """Workload 5 probes random offsets: a store fetching one offset over and over would
    answer from its caches."""
    work, probes = append_work(8, 2, 10), [3, 17, 0]
    sqlite = Sqlite(tmp_path / "db")
    sqlite.append(work)
    statements: list[str] = []
    sqlite.db.set_trace_callback(statements.append)
    sqlite.lookup(probes)
    sqlite.close()
    assert statements == [f"SELECT value FROM log WHERE offset = {o}" for o in probes]
    lm = Lmdb(tmp_path / "lmdb", map_size=1 << 20)
    lm.append(work)
    keys: list[int] = []
    lm._key = lambda offset: keys.append(offset) or Lmdb._key(offset)
    lm.lookup(probes)
    lm.close()
    kr = KReplica(tmp_path / "log")
    kr.append(work)
    log, reads = kr.log, []
    kr.log = SimpleNamespace(read=lambda offset, n: reads.append(offset) or log.read(offset, n))
    kr.lookup(probes)
    log.close()
    assert keys == reads == probes


# The hundred-and-first review (docs/engine-audit.md, BH5-..): the fifth pass over the harness.

def test_the_memory_row_samples_after_the_last_batch_on_its_own_segments_and_600_mib_fails(tmp_path, clock,
                                                                                           monkeypatch):
    """The RSS reaches exactly 600 MiB after the last batch: sampled after every batch (not
    before), that is the peak, and the target says "under 600 MiB". The log is opened on
    ``memory_segment_bytes`` segments (the row's name says so), and the free space is that
    of the directory the log goes in."""
    import psutil

    fake = _fake_store(clock, "kreplica", {"append": 1.0})
    opened_with: list[tuple] = []

    class Store(fake):
        def __init__(self, path: Path, *args) -> None:
            super().__init__(path, *args)
            opened_with.append((path.parent, args))
            (path / "00000000000000000000.log").mkdir(parents=True)  # the log's files, as Log.open makes

    rss = [100, 150, 200, 300, 600]  # MiB before the work, then after each of the 4 batches
    monkeypatch.setattr(bench_log, "KReplica", Store)
    monkeypatch.setattr(psutil, "Process", lambda: SimpleNamespace(memory_info=lambda: SimpleNamespace(
        rss=rss[fake.opened[0].records // 10 if fake.opened else 0] * bench_log.MIB)))
    asked: list[Path] = []
    monkeypatch.setattr(bench_log.shutil, "disk_usage",
                        lambda path: asked.append(Path(path)) or SimpleNamespace(free=64 * bench_log.GIB))
    sizes = replace(bench_log.QUICK, memory_bytes=4 * 160, memory_segment_bytes=3 << 20)
    [row] = bench_log.bench_memory(tmp_path, sizes, [b"v" * 16] * 10)
    assert (row.kreplica, row.passed) == (600.0, False)
    assert opened_with == [(tmp_path, (3 << 20,))]
    assert asked == [tmp_path]
    # the 4 GiB log is deleted once measured, not left on the disk through the other workloads
    # (the hundred-and-twentieth review's BH6-07)
    assert list(tmp_path.iterdir()) == []


def test_the_raw_peers_check_refuses_a_log_of_the_same_size_with_other_bytes(tmp_path):
    """Same sizes, other values: the raw file would not hold the Log's bytes."""
    store = KReplica(tmp_path / "log")
    store.append(append_work(100, 2, seed=1))
    store.close()
    with pytest.raises(RuntimeError, match="the raw-write peer's bytes differ from the Log's"):
        bench_log._check_log_bytes(tmp_path / "log", append_work(100, 2, seed=0))


def test_the_stores_take_turns_piece_by_piece_in_every_run(tmp_path, monkeypatch):
    """A burst of load must fall on every store alike: each piece goes to every store
    before the next piece starts."""
    monkeypatch.setattr(bench_log, "time", SimpleNamespace(perf_counter=lambda: 0.0, thread_time=lambda: 0.0,
                                                           monotonic_ns=time.monotonic_ns))
    calls: list[tuple[str, int]] = []

    def opener(name: str):
        return lambda path: SimpleNamespace(name=name, close=lambda: None)

    bench_log.race(tmp_path, {"a": opener("a"), "b": opener("b")}, [1, 2, 3],
                   lambda store, piece: calls.append((store.name, piece)), 2)
    assert calls == [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)] * 2


def test_a_figure_of_100_or_more_is_a_whole_number():
    assert [bench_log._fmt(x) for x in (99.994, 100.0, 1234.5, None)] == ["99.99", "100", "1,234", "-"]
    # a figure of nothing is still a figure, not "not measured" (the hundred-and-thirty-ninth review's BH7-18)
    assert bench_log._fmt(0.0) == "0.00"


# The hundred-and-twentieth review (docs/engine-audit.md, BH6-..): the sixth pass over the harness.

def _timed(monkeypatch, wall: dict[str, float]) -> None:
    """``bench_log.race`` replaced: every store took ``wall`` seconds (and as much CPU)."""
    monkeypatch.setattr(bench_log, "race", lambda root, openers, pieces, run, repeat, keep=False: bench_log.Timings(
        {n: wall[n] for n in openers}, {n: wall[n] for n in openers}, dict.fromkeys(openers, root) if keep else {}))


def test_a_target_met_exactly_passes_and_the_1kib_row_names_its_size_in_gib(tmp_path, monkeypatch):
    """">= 10x sqlite3", ">= 3x lmdb" and ">= 0.8x raw os.write" are met by exactly 10x, 3x
    and 0.8x (30 records in 1 s, 10 s and 3 s: the ratios come out exact); workload 2's
    name gives its values in GiB of 2**30 bytes."""
    _timed(monkeypatch, {"kreplica": 1.0, "raw os.write": 0.8, "sqlite3": 10.0, "lmdb": 3.0, "plain Python": 1.0})
    monkeypatch.setattr(bench_log, "_check_log_bytes", lambda path, work: None)
    rows, _kept = bench_log.bench_append_100b(tmp_path, bench_log.QUICK, append_work(8, 3, 10))
    assert [(r.ratio, r.passed) for r in rows[1:]] == [(10.0, True), (3.0, True)]
    [row] = bench_log.bench_follower(tmp_path, bench_log.QUICK, append_work(8, 3, 10))
    assert (row.ratio, row.passed) == (0.8, True)
    gib = AppendWork([b"v" * 1024] * 1024, 1024, [])  # 1,024 batches of 1,024 x 1 KiB: 1 GiB of values
    [row] = bench_log.bench_append_1kib(tmp_path, bench_log.QUICK, gib)
    assert row.workload == "2. append 1 KiB x 1,000/batch (1.00 GiB of values)"


def test_lookup_figures_are_the_median_over_every_repeat_and_2x_growth_passes(tmp_path, clock, monkeypatch):
    """Two timed repeats after the warm-up: the small log's lookups cost 1 then 3 units, the
    large log's 2 then 6. The figure is the median over the slices of both repeats (2 units,
    not the last repeat's 3), and the large log's 2x growth meets "<= 2x" (a unit is 2**-20 s,
    so the growth comes out exact)."""
    sizes = replace(bench_log.QUICK, lookup_records=100, lookup_probes=20, repeat=2)
    unit = 2.0 ** -20
    costs = {100: (10, 1, 3), 100 * bench_log.LOOKUP_GROWTH: (10, 2, 6)}  # the warm-up, then each repeat

    class Store:
        def __init__(self, path: Path, *args) -> None:
            self.records = self.looked_up = 0
            self.log = SimpleNamespace(segments=[None])

        def append(self, work: AppendWork) -> None:
            self.records += work.records

        def lookup(self, offsets: list[int]) -> None:
            cost = costs[self.records][self.looked_up // sizes.lookup_probes] * unit * len(offsets)
            self.looked_up += len(offsets)
            clock.spend(cost, cost)

        def close(self) -> None:
            pass

    monkeypatch.setattr(bench_log, "KReplica", Store)
    monkeypatch.setattr(bench_log, "STORES", dict.fromkeys(("kreplica", "sqlite3", "lmdb"), Store))
    small, large = bench_log.bench_lookups(tmp_path, sizes)
    assert small.kreplica == pytest.approx(2 * unit * 1e6) and large.kreplica == pytest.approx(4 * unit * 1e6)
    assert (large.ratio, large.passed) == (2.0, True)


def test_the_decoding_peers_read_every_value_back(tmp_path):
    """Workload 4's decode row sets the Log's records against "sqlite3 rows" and "lmdb
    (key, value) pairs": each peer fetches the values, not just the keys it can count."""
    work = append_work(8, 2, 10)
    expected = list(enumerate(v for batch in work.each_batch() for v in batch))

    class Recording:
        """Wraps a connection, a transaction or a cursor; records what its cursors hand out."""

        def __init__(self, inner, seen: list) -> None:
            self.inner, self.seen = inner, seen

        def __getattr__(self, name):
            attr = getattr(self.inner, name)
            if name == "fetchmany":
                return lambda *a, **k: self.seen.extend(rows := attr(*a, **k)) or rows
            if name == "iternext":
                return lambda *a, **k: self.seen.extend(items := list(attr(*a, **k))) or iter(items)
            if name in ("execute", "begin", "cursor"):
                return lambda *a, **k: Recording(attr(*a, **k), self.seen)
            return attr

        def __enter__(self):
            return Recording(self.inner.__enter__(), self.seen)

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

    sqlite, sqlite_rows = Sqlite(tmp_path / "db"), []
    sqlite.append(work)
    sqlite.db = Recording(sqlite.db, sqlite_rows)
    assert sqlite.read_all() == work.records
    sqlite.close()
    lm, lmdb_items = Lmdb(tmp_path / "lmdb", map_size=1 << 20), []
    lm.append(work)
    env = lm.env
    lm.env = Recording(env, lmdb_items)
    assert lm.read_all() == work.records
    env.close()
    assert sqlite_rows == expected
    assert [(struct.unpack(">Q", key)[0], value) for key, value in lmdb_items] == expected


def test_both_sequential_readers_go_in_1_mib_pieces(tmp_path, monkeypatch):
    """Workload 4's row says "1 MiB slices": the Log is read in 1 MiB ``read()`` calls and the
    raw file into a 1 MiB buffer, like for like."""
    from kreplica.tools import bench_log_peers

    work = append_work(100, 3)
    store, raw = KReplica(tmp_path / "log"), RawWrite(tmp_path / "raw")
    store.append(work)
    raw.append(work)
    log, asked = store.log, []

    class Log:
        def __getattr__(self, name):
            return getattr(log, name)

        def read(self, offset, max_bytes):
            asked.append(max_bytes)
            return log.read(offset, max_bytes)

    store.log = Log()
    buffers: list[int] = []
    monkeypatch.setattr(bench_log_peers, "bytearray", lambda n: buffers.append(n) or bytearray(n), raising=False)
    assert store.read_bytes() == raw.read_bytes() == work.log_bytes
    log.close()
    raw.close()
    assert asked and set(asked) == {1 << 20} and buffers == [1 << 20]


# The hundred-and-thirty-ninth review (docs/engine-audit.md, BH7-..): the seventh pass over the harness.

def test_the_rate_targets_and_the_1kib_ratio_met_exactly_pass(tmp_path, monkeypatch):
    """">= 5 M rec/s" (appends and decoding), ">= 0.6x raw os.write" and ">= 2 GB/s" are met
    by exactly 5 M records/s, 0.6x and 2 GB/s (times chosen so the figures come out exact)."""
    work = append_work(8, 3, 10)  # 30 records
    _timed(monkeypatch, {"kreplica": work.records / 5e6, "raw os.write": 1.0, "sqlite3": 1.0, "lmdb": 1.0,
                         "plain Python": 1.0})
    monkeypatch.setattr(bench_log, "_check_log_bytes", lambda path, work: None)
    rows, _kept = bench_log.bench_append_100b(tmp_path, bench_log.QUICK, work)
    assert (rows[0].kreplica, rows[0].passed) == (5.0, True)
    _timed(monkeypatch, {"kreplica": 5.0, "raw os.write": 3.0, "sqlite3": 1.0, "lmdb": 1.0, "plain Python": 1.0})
    [row] = bench_log.bench_append_1kib(tmp_path, bench_log.QUICK, work)
    assert (row.ratio, row.passed) == (0.6, True)

    seconds = {"read_bytes": work.log_bytes / 2e9, "read_all": work.records / 5e6}
    monkeypatch.setattr(bench_log, "STORES", {name: lambda path: SimpleNamespace(close=lambda: None)
                                              for name in STORES})
    monkeypatch.setattr(bench_log, "_turns", lambda stores, method, expected, repeat: bench_log.Timings(
        dict.fromkeys(stores, seconds[method]), dict.fromkeys(stores, seconds[method]), {}))
    views, decode = bench_log.bench_reads(bench_log.QUICK, dict.fromkeys(STORES, tmp_path), work)
    assert (views.kreplica, views.passed, decode.kreplica, decode.passed) == (2.0, True, 5.0, True)


def test_every_figure_is_the_median_run_not_the_mean(tmp_path, clock):
    """Runs of 1, 2 and 6 units: a burst of load (the 6) must not move the figure, which is
    the middle run's 2, as the module's doc says (the mean would be 3)."""
    store = _fake_store(clock, "kreplica", {"append": 1e9}, runs=(1, 2, 6), cpu_share=0.5)
    t = bench_log.race(tmp_path, {"kreplica": store}, [AppendWork([b"v"], 1, [])], bench_log._append, 3)
    assert (t.wall, t.cpu) == ({"kreplica": 2.0}, {"kreplica": 1.0})
    t = bench_log._turns({"a": _Reader(clock, [1.0, 2.0, 6.0], 100)}, "read_bytes", 100, 3)
    assert (t.wall, t.cpu) == ({"a": 2.0}, {"a": 1.0})


def test_the_lookup_stores_are_removed_once_measured(tmp_path, clock, monkeypatch):
    """Workload 5 builds a small and a 100x log for each store (a directory for the Log and
    lmdb, a file for sqlite3): none is left on the disk afterwards."""
    sizes = replace(bench_log.QUICK, lookup_records=100, lookup_probes=20, repeat=1)

    def store(name: str) -> type:
        class Store(_fake_store(clock, name, {"lookup 100": 1000.0, "lookup 10000": 1000.0})):
            def __init__(self, path: Path, *args) -> None:
                super().__init__(path, *args)
                if name == "sqlite3":
                    path.write_bytes(b"db")
                else:
                    (path / "data").mkdir(parents=True)

        return Store

    fakes = {name: store(name) for name in ("kreplica", "sqlite3", "lmdb")}
    monkeypatch.setattr(bench_log, "KReplica", fakes["kreplica"])
    monkeypatch.setattr(bench_log, "STORES", fakes)
    bench_log.bench_lookups(tmp_path, sizes)
    assert sum(len(f.opened) for f in fakes.values()) == 6 and list(tmp_path.iterdir()) == []


def test_the_memory_row_runs_with_exactly_its_bytes_and_2_gib_free(tmp_path, clock, monkeypatch):
    import psutil

    sizes = replace(bench_log.QUICK, memory_bytes=4 * 160, memory_segment_bytes=1 << 20)
    monkeypatch.setattr(bench_log.shutil, "disk_usage",
                        lambda path: SimpleNamespace(free=sizes.memory_bytes + 2 * bench_log.GIB))
    monkeypatch.setattr(bench_log, "KReplica", _fake_store(clock, "kreplica", {"append": 1.0}))
    monkeypatch.setattr(psutil, "Process", lambda: SimpleNamespace(
        memory_info=lambda: SimpleNamespace(rss=100 * bench_log.MIB)))
    [row] = bench_log.bench_memory(tmp_path, sizes, [b"v" * 16] * 10)
    assert (row.kreplica, row.passed) == (100.0, True)


def test_a_run_that_fails_still_closes_every_store(tmp_path, monkeypatch):
    """A store that raises mid-run (a full disk, a bug) must not leave the others open: the
    Log's mapped segments and lmdb's environment are released before the error goes up."""
    closed: list[str] = []

    def opener(name: str):
        return lambda path: SimpleNamespace(name=name, close=lambda: closed.append(name))

    def run(store, piece):
        if store.name == "b":
            raise OSError("no space left on device")

    with pytest.raises(OSError, match="no space left"):
        bench_log.race(tmp_path, {"a": opener("a"), "b": opener("b"), "c": opener("c")}, [1, 2], run, 1)
    assert sorted(closed) == ["a", "b", "c"]


def test_a_followers_fetches_are_up_to_1_mib_by_default() -> None:
    """Workload 3's row says "fetches of <= 1 MiB": three 300 KiB batches fit in one, the
    fourth starts the next."""
    assert [len(c) for c in fetch_chunks([b"x" * (300 << 10)] * 4)] == [900 << 10, 300 << 10]


def test_sqlite3_looks_an_offset_up_by_its_key(tmp_path: Path) -> None:
    """The lookup peer is sqlite3 at its best: the offset is the table's INTEGER PRIMARY KEY
    (the rowid), so a lookup is a search of the table's b-tree, not a scan."""
    store = Sqlite(tmp_path / "db")
    columns = [(name, kind, pk) for _cid, name, kind, _notnull, _default, pk
               in store.db.execute("PRAGMA table_info(log)")]
    store.close()
    assert columns == [("offset", "INTEGER", 1), ("value", "BLOB", 0)]


# The hundred-and-fifty-eighth review (docs/engine-audit.md, BH8-..): the eighth pass over the harness.

def test_the_readers_take_turns_in_every_repeat(clock):
    """"The stores taking turns each repeat" (``_turns``' doc, as ``race`` does for the
    appends): a burst of load spoils one call of every reader, not every call of one."""
    calls: list[str] = []

    class Reader:
        def __init__(self, name: str) -> None:
            self.name = name

        def read_bytes(self) -> int:
            calls.append(self.name)
            return 100

    bench_log._turns({"a": Reader("a"), "b": Reader("b")}, "read_bytes", 100, 3)
    assert calls == ["a", "b"] * 3


def _failing_stores(closed: list[str], failing: str, method: str) -> dict[str, type]:
    """A stand-in for every store, each noting its close; ``failing``'s ``method`` raises
    as a full disk would."""

    def store(name: str) -> type:
        class Store:
            def __init__(self, path: Path, *args) -> None:
                self.log = SimpleNamespace(segments=[None])

            def append(self, work: AppendWork) -> None:
                pass

            def lookup(self, offsets: list[int]) -> None:
                pass

            def close(self) -> None:
                closed.append(name)

        def fail(self, *args):
            raise OSError("no space left on device")

        if name == failing:
            setattr(Store, method, fail)
        return Store

    return {name: store(name) for name in STORES}


def test_reads_and_lookups_that_fail_still_close_every_store(tmp_path, monkeypatch):
    """As ``race`` does for workloads 1 to 3 (BH7-20), workloads 4 and 5 close every store
    they opened before an error goes up: the Log's mapped segments, lmdb's environment."""
    closed: list[str] = []
    monkeypatch.setattr(bench_log, "STORES", _failing_stores(closed, "kreplica", "read_bytes"))
    with pytest.raises(OSError, match="no space left"):
        bench_log.bench_reads(bench_log.QUICK, dict.fromkeys(STORES, tmp_path), append_work(8, 2, 10))
    assert sorted(closed) == sorted(STORES)

    closed.clear()
    stores = _failing_stores(closed, "sqlite3", "lookup")
    monkeypatch.setattr(bench_log, "STORES", stores)
    monkeypatch.setattr(bench_log, "KReplica", stores["kreplica"])
    sizes = replace(bench_log.QUICK, lookup_records=100, lookup_probes=20, repeat=1)
    with pytest.raises(OSError, match="no space left"):
        bench_log.bench_lookups(tmp_path, sizes)
    assert sorted(closed) == sorted(["kreplica", "sqlite3", "lmdb"] * 2)


def test_a_run_that_fails_leaves_no_temporary_directory(tmp_path, monkeypatch):
    """``run``'s stores go in a temporary directory under ``--data-dir``: a workload that
    raises (a full disk) must not leave it, and what is in it, behind."""

    def memory(root: Path, sizes, values) -> list:
        (root / "memory").mkdir()
        raise OSError("no space left on device")

    monkeypatch.setattr(bench_log, "bench_memory", memory)
    with pytest.raises(OSError, match="no space left"):
        bench_log.run(bench_log.QUICK, str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_batch_larger_than_a_fetch_is_a_fetch_of_its_own() -> None:
    """A follower's fetch returns at least one whole batch, however large (Kafka's KIP-74):
    a batch over ``max_bytes`` is a fetch alone, with no empty fetch before it."""
    assert fetch_chunks([b"x" * 2000, b"y" * 10, b"z" * 1500], max_bytes=1000) == [b"x" * 2000, b"y" * 10,
                                                                                   b"z" * 1500]


def test_the_raw_peers_check_closes_the_log_even_when_reading_it_fails(tmp_path, monkeypatch):
    """``_check_log_bytes`` opens workload 1's kept Log a second time: a read that raises
    (an I/O error) must not leave its segments mapped while the error goes up."""
    closed: list[Path] = []

    def fail(offset: int, max_bytes: int):
        raise OSError("Input/output error")

    class Store:
        def __init__(self, path: Path) -> None:
            self.path = path
            self.log = SimpleNamespace(read=fail, size_in_bytes=lambda: 0)

        def close(self) -> None:
            closed.append(self.path)

    monkeypatch.setattr(bench_log, "KReplica", Store)
    with pytest.raises(OSError, match="Input/output error"):
        bench_log._check_log_bytes(tmp_path / "log", append_work(8, 1, 10))
    assert closed == [tmp_path / "log"]


def test_plain_python_reads_every_value_back(tmp_path, monkeypatch):
    """The decode row sets the Log's records against plain Python's (offset, value) pairs, as
    it does sqlite3's rows and lmdb's items (BH6-11, BH6-12): plain Python slices every
    value out of its file, in order, not just its headers."""
    from kreplica.tools import bench_log_peers

    work = append_work(8, 2, 10)
    store = PlainPython(tmp_path / "plain")
    store.append(work)
    sliced: list[bytes] = []

    class Data(bytes):
        def __getitem__(self, index):
            part = super().__getitem__(index)
            sliced.append(part)
            return part

    monkeypatch.setattr(bench_log_peers, "Path", lambda path: SimpleNamespace(
        read_bytes=lambda: Data(Path(path).read_bytes())))
    assert store.read_all() == work.records
    store.close()
    assert sliced == [v for batch in work.each_batch() for v in batch]


def test_the_workloads_records_are_the_same_in_every_run():
    """``append_work``'s values are reproducible (its doc): one seed gives the same records
    in every run and process, so runs and machines compare like with like; another seed
    gives others (the lookups' logs, seed 1)."""
    import random

    first = append_work(8, 3, 10, seed=1)
    again = append_work(8, 3, 10, seed=1)
    assert first.batch_values == again.batch_values and first.encoded == again.encoded
    assert append_work(8, 3, 10, seed=2).batch_values != first.batch_values
    # pinned: the first bytes of seed 0's workload (what every ``kreplica bench log`` appends)
    assert append_work(8, 1, 10).values[0] == random.Random(0).randbytes(8)


def test_the_pieces_are_the_work_cut_in_turns_with_nothing_added():
    """``pieces`` cuts the batches into consecutive runs for the stores' turns: the last run
    holds what is left, not a whole step (a reused list's work, as the memory row's, would
    append batches that were never asked for)."""
    work = append_work(8, 5, 10)
    pieces = work.pieces(2)  # steps of 3: 3 batches, then the 2 left
    assert [p.batches for p in pieces] == [3, 2] and sum(p.records for p in pieces) == work.records
    assert [list(p.each_batch()) for p in pieces] == [work.batch_values[:3], work.batch_values[3:]]
    assert [p.encoded for p in pieces] == [work.encoded[:3], work.encoded[3:]]
    reused = AppendWork([b"v"] * 10, 5, [])
    assert [len(list(p.each_batch())) for p in reused.pieces(2)] == [3, 2]


# The hundred-and-seventy-seventh review (docs/engine-audit.md, BH9-..): the ninth pass over the harness.

def test_the_memory_rows_rate_is_of_the_whole_batches_it_appended(tmp_path, clock, monkeypatch):
    """``memory_bytes`` that is no whole number of batches: the row appends the whole batches
    that fit (3 of 160 B in 500 B) and its GB/s is of the 480 B appended, not of the 500 asked."""
    import psutil

    fake = _fake_store(clock, "kreplica", {"append": 1.0})
    monkeypatch.setattr(bench_log, "KReplica", fake)
    monkeypatch.setattr(bench_log.shutil, "disk_usage", lambda path: SimpleNamespace(free=64 * bench_log.GIB))
    monkeypatch.setattr(psutil, "Process", lambda: SimpleNamespace(
        memory_info=lambda: SimpleNamespace(rss=100 * bench_log.MIB)))
    sizes = replace(bench_log.QUICK, memory_bytes=500, memory_segment_bytes=1 << 20)
    [row] = bench_log.bench_memory(tmp_path, sizes, [b"v" * 16] * 10)
    assert fake.opened[0].records == 30
    # 480 B in 30 fake ns: 16 GB/s (the 500 B asked for would read 16.67)
    assert row.note == "7 segments, start RSS 100 MiB, 16.00 GB/s with sampling"


def test_the_follower_rows_name_counts_the_fetches_not_the_turns(tmp_path, monkeypatch):
    """25 fetches raced in 9 turns of 3: the row names the 25 fetches (one
    ``append_as_follower`` each), not the pieces they are cut into for taking turns."""
    raced = []

    def race(root, openers, pieces, run, repeat, keep=False):
        raced.extend(pieces)
        return bench_log.Timings(dict.fromkeys(openers, 1.0), dict.fromkeys(openers, 1.0), {})

    monkeypatch.setattr(bench_log, "race", race)
    monkeypatch.setattr(bench_log, "fetch_chunks", lambda encoded: fetch_chunks(encoded, max_bytes=1))  # a batch a fetch
    [row] = bench_log.bench_follower(tmp_path, bench_log.QUICK, append_work(8, 25, 10))
    assert len(raced) == 9 and sum(len(piece["kreplica"]) for piece in raced) == 25
    assert row.workload == "3. append_as_follower, 25 fetches of <= 1 MiB (100 B records)"
