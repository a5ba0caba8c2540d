"""``kreplica bench log --quick`` runs every workload and prints one table of the issue's
targets.  Not a timed test: it checks the table's structure and the JSON rows, never
the speeds (those are for ``kreplica bench log`` and ``benchmarks/bench_log.py``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from kreplica.cli import main
from kreplica.tools import bench_log
from kreplica.tools.bench_log_peers import STORES, AppendWork, KReplica, RawWrite, append_work, fetch_chunks

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
