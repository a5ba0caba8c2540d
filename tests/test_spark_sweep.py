"""Fault sweeps on Spark (issue 6, "Sweeps"): grid, job, Parquet, resume, report, progress.

One real local Spark session for the module.  The grid is KIP-101's
HW-truncation scenario and the unclean-election scenario under both truncation
strategies, three seeds each: under ``high-watermark`` some HW-truncation seeds
lose an acknowledged write (the checker's invariant 1), under ``leader-epoch``
none do, and the unclean elections' losses are counted and attributed, so the
report has failing and clean configurations.  The same twelve runs are also
run directly through the simulator (``kreplica.sim.world.run``) in this process;
the sweep's rows and the report's figures must agree with them.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from kreplica.spark.sim_runner import RunConfig, build_scenario
from kreplica.spark.sweep import Grid, parse_seeds, read_results, run_sweep
from spark_fixtures import require_spark, spark  # noqa: F401  (spark is a fixture)

pytestmark = pytest.mark.spark

SCENARIO = "kip101-hw-truncation"
SCENARIOS = (SCENARIO, "unclean-election")
TRUNCATIONS = ("high-watermark", "leader-epoch")
SEEDS = "1..3"
GRID = Grid.from_axes(SCENARIOS, {"truncation": list(TRUNCATIONS)}, SEEDS)
RUNS = 2 * 2 * 3


@pytest.fixture(scope="module")
def direct():
    """Every run of GRID straight through the simulator: {(config_key, seed): RunResult}."""
    from kreplica.sim import world

    out = {}
    for name in SCENARIOS:
        for config in GRID.configs:
            sc = build_scenario(name, config)
            for seed in range(GRID.seeds[0], GRID.seeds[1] + 1):
                out[(name, config.key, seed)] = world.run(sc, seed)
    return out


@pytest.fixture(scope="module")
def swept(spark, tmp_path_factory):  # noqa: F811
    out = str(tmp_path_factory.mktemp("sweep") / "runs")
    stats = run_sweep(spark, GRID, out, runs_per_task=2, tasks_per_chunk=3)
    return out, stats


# ---- the grid ---------------------------------------------------------------------------------

def test_seed_ranges():
    assert parse_seeds("1..1000") == (1, 1000)
    assert parse_seeds(7) == (7, 7)
    for bad in ("5..1", "1-3", "", "a..b"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_grid_files_and_flags_agree(tmp_path):
    toml = tmp_path / "g.toml"
    toml.write_text('scenarios = ["kip101-hw-truncation", "random-chaos"]\nseeds = "3..5"\n'
                    '[config]\n"replica.truncation.strategy" = ["high-watermark", "leader-epoch"]\n'
                    'unclean = [false, true]\nacks = "all"\n')
    yaml = tmp_path / "g.yaml"
    yaml.write_text("scenarios: [kip101-hw-truncation, random-chaos]\nseeds: 3..5\nconfig:\n"
                    "  truncation: [high-watermark, leader-epoch]\n  unclean: ['false', 'true']\n  acks: [-1]\n")
    from kreplica.cli import build_parser

    argv = ["sweep", "--scenario", "kip101-hw-truncation,random-chaos", "--seeds", "3..5",
            "--truncation", "high-watermark,leader-epoch", "--unclean", "false,true", "--acks", "all",
            "--out", str(tmp_path / "o")]
    args = build_parser({"sweep": "kreplica.tools.sweep"}, "kreplica", argv).parse_args(argv)
    from kreplica.tools.sweep import grid_from_args

    grids = [Grid.load(toml), Grid.load(yaml), grid_from_args(args)]
    assert grids[0] == grids[1] == grids[2]
    g = grids[0]
    assert len(g) == 2 * 4 * 3 and g.seed_count == 3
    assert {c.key for c in g.configs} == {
        f"acks=all,min_isr=-,unclean={u},truncation={t},rf=-,fault_rate=-,until_ms=-"
        for u in ("false", "true") for t in TRUNCATIONS}
    # Every run exactly once.
    specs = {(s.scenario, s.config.key, s.seed) for s in map(g.spec, range(len(g)))}
    assert len(specs) == len(g)


def test_bad_grids_fail_before_spark(tmp_path):
    with pytest.raises(ValueError, match="unknown sweep axis"):
        Grid.from_axes(["random-chaos"], {"retries": [1]})
    with pytest.raises(ValueError, match="no scenario"):
        Grid.from_axes(["no-such-scenario"], {}).validate()
    with pytest.raises(ValueError, match="pins the replicas"):
        Grid.from_axes([SCENARIO], {"rf": [2]}).validate()
    with pytest.raises(ValueError, match="fault_rate"):
        RunConfig.parse({"fault_rate": -1})
    bad = tmp_path / "g.toml"
    bad.write_text('scenarios = ["random-chaos"]\nseed = "1..3"\n')
    with pytest.raises(ValueError, match="unknown keys"):
        Grid.load(bad)


def test_loopback_and_this_interpreter_are_defaults_for_a_local_master_only(monkeypatch):
    from kreplica.spark import session

    for var in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        monkeypatch.delenv(var, raising=False)
    session.prepare_environment(master="spark://head:7077")
    assert "SPARK_LOCAL_IP" not in os.environ and "PYSPARK_PYTHON" not in os.environ
    remote = session.session_conf("yarn", {"spark.archives": "env.tar.gz#env",
                                           "spark.pyspark.python": "./env/bin/python"})
    assert remote["spark.pyspark.python"] == "./env/bin/python" and remote["spark.archives"] == "env.tar.gz#env"
    assert "spark.pyspark.python" not in session.session_conf("spark://head:7077")
    session.prepare_environment(master="local[2]")
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert session.session_conf("local[2]")["spark.pyspark.python"] == os.environ["PYSPARK_PYTHON"]


def test_overrides_reach_the_scenario():
    sc = build_scenario("random-chaos", RunConfig.parse(
        {"acks": "1", "min.insync.replicas": 1, "unclean": True, "truncation": "leader-epoch",
         "rf": 2, "fault_rate": 0.5, "until_ms": 1234}))
    base = build_scenario("random-chaos", RunConfig())
    assert sc.workload.acks == "1" and sc.until_ms == 1234
    assert sc.config["min.insync.replicas"] == 1 and sc.config["unclean.leader.election.enable"] is True
    assert sc.config["replica.truncation.strategy"] == "leader-epoch"
    assert {t.replication_factor for t in sc.topics} == {2}
    assert sc.chaos.crash == base.chaos.crash * 0.5 and sc.chaos.max_down == base.chaos.max_down
    assert build_scenario("random-chaos", RunConfig(fault_rate=0.0)).chaos is None


@pytest.mark.parametrize("sweep_flag, simulate_config", [
    (["--min-isr", "2"], "min.insync.replicas=2"),
    (["--unclean", "true"], "unclean.leader.election.enable=true"),
    (["--acks", "1"], "acks=1"),  # the producers' acks, and the config key, in both
])
def test_a_sweep_run_and_simulate_give_one_history_hash(sweep_flag, simulate_config, capsys):
    """The run header records the scenario's config: typed by the sweep, text from --config,
    until both go through Scenario.with_config."""
    import argparse

    from kreplica import sim_cli
    from kreplica.spark.sim_runner import run
    from kreplica.tools.sweep import add_arguments, grid_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    grid = grid_from_args(parser.parse_args(
        ["--scenario", SCENARIO, "--seeds", "1", "--until", "6000", "--out", "unused", *sweep_flag]))
    row = run(grid.spec(0))
    assert row["error"] is None
    sim_cli.main(["--scenario", SCENARIO, "--seed", "1", "--until", "6000", "--config", simulate_config])
    assert f"history hash {row['history_hash']}" in capsys.readouterr().out


def test_index_decoded_on_the_executors_matches_the_grid(spark):  # noqa: F811
    g = Grid.from_axes(["a-scenario", "b-scenario", "c-scenario"],
                       {"acks": ["0", "1", "all"], "unclean": [False, True]}, "10..14")
    rows = g.index_columns(spark.range(0, len(g), numPartitions=4)).collect()
    assert len(rows) == len(g) == 90
    for r in rows:
        spec = g.spec(r.id)
        assert (r.scenario, r.config_key, r.seed) == (spec.scenario, spec.config.key, spec.seed)
        assert g.configs[r.config_index] == spec.config
    # Seeds past 32 bits (the eighty-third review): the JVM's seed column is a long, as the row's is.
    big = Grid.from_axes(["a-scenario", "b-scenario"], {}, "4294967295..4294967296")
    rows = big.index_columns(spark.range(0, len(big), numPartitions=2)).orderBy("id").collect()
    assert [(r.scenario, r.seed) for r in rows] == [("a-scenario", 4294967295), ("b-scenario", 4294967295),
                                                    ("a-scenario", 4294967296), ("b-scenario", 4294967296)]


# ---- the job and its rows -------------------------------------------------------------------------

def test_sweep_rows_match_direct_runs(spark, swept, direct):  # noqa: F811
    out, stats = swept
    assert stats.total == len(GRID) == RUNS and stats.executed == RUNS and stats.already_done == 0
    assert stats.chunks == 2  # 3 tasks x 2 runs per chunk
    assert sorted(p.name for p in Path(out).iterdir() if p.is_dir()) == sorted(f"scenario={s}" for s in SCENARIOS)
    rows = read_results(spark, out).collect()
    assert len(rows) == RUNS
    assert len({(r.scenario, r.config_key, r.seed) for r in rows}) == RUNS
    for r in rows:
        d = direct[(r.scenario, r.config_key, r.seed)]
        assert r.history_hash == d.history_hash and r.events == d.events
        assert r.lost_acks == len(d.losses) and r.unclean_elections == d.unclean_elections
        assert r.lost_by_cause == dict(Counter(loss.cause for loss in d.losses))
        assert r.acked_writes == d.acked_writes and r.availability == d.availability
        assert r.superseded_reads == len(d.superseded_reads)
        assert r.superseded_by_cause == dict(Counter(read.cause for read in d.superseded_reads))
        assert r.writes_completed == d.writes_completed >= d.acked_writes
        assert r.throughput == pytest.approx(d.writes_completed * 1000.0 / d.virtual_ms)
        assert r.reelect_ms == [float(x) for x in d.reelect_ms]
        # Per-run percentiles as `kreplica simulate` computes them (numpy, linear between ranks).
        for q, got in ((50, r.reelect_p50_ms), (99, r.reelect_p99_ms)):
            assert got == (pytest.approx(np.percentile(d.reelect_ms, q)) if d.reelect_ms else None)
        expected = {} if d.violation is None else {d.violation.invariant.value: 1}
        assert r.violations == expected and r.violations_total == len(expected)
        assert r.truncation in TRUNCATIONS and r.config_key.endswith(f"truncation={r.truncation},rf=-,"
                                                                      "fault_rate=-,until_ms=-")
        # The scenario files' own settings, filled in where the grid left an axis open.
        expected_config = {SCENARIO: ("all", 2, False), "unclean-election": ("all", 1, True)}[r.scenario]
        assert (r.acks, r.min_isr, r.unclean, r.rf, r.brokers) == (*expected_config, 3, 3)
        assert r.wall_ms > 0 and r.error is None
        assert (r.history_gz is not None) == (d.violation is not None or bool(d.losses))
    # The scenarios' point: losses under high-watermark, none under leader-epoch; and the
    # unclean elections' losses counted and attributed to them.
    hw = {t: sum(1 for r in rows if r.scenario == SCENARIO and r.truncation == t and r.violations_total)
          for t in TRUNCATIONS}
    assert hw["high-watermark"] > 0 and hw["leader-epoch"] == 0
    unclean = [r for r in rows if r.scenario == "unclean-election"]
    assert all(r.unclean_elections > 0 for r in unclean)
    assert sum(r.lost_by_cause.get("unclean-election", 0) for r in unclean) > 0
    assert sum(r.superseded_by_cause.get("unclean-election", 0) for r in unclean) > 0  # read, then lost


def test_rerun_skips_everything_already_present(spark, swept):  # noqa: F811
    out, _ = swept
    again = run_sweep(spark, GRID, out, runs_per_task=2, tasks_per_chunk=3)
    assert again.already_done == RUNS and again.executed == 0
    assert read_results(spark, out).count() == RUNS


# ---- the report ----------------------------------------------------------------------------------

def _wilson_by_bisection(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The score interval as its definition: the p0 whose score statistic is exactly z."""
    phat = k / n

    def score(p0: float) -> float:
        return abs(phat - p0) / math.sqrt(p0 * (1 - p0) / n)

    def solve(lo: float, hi: float, rising: bool) -> float:
        for _ in range(200):
            mid = (lo + hi) / 2
            if (score(mid) > z) == rising:
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(1e-12, phat, rising=False)
    high = 1.0 if k == n else solve(phat, 1 - 1e-12, rising=True)
    return low, high


def test_wilson_interval_sql(spark):  # noqa: F811
    from kreplica.spark.report import wilson_sql

    lo, hi = wilson_sql("k", "n")
    cases = [(0, 10), (5, 10), (10, 10), (3, 12), (81, 263), (1, 1000)]
    values = ", ".join(f"({k}, {n})" for k, n in cases)
    got = spark.sql(f"SELECT k, n, {lo} AS lo, {hi} AS hi FROM VALUES {values} AS t(k, n)").collect()
    for r in got:
        want = _wilson_by_bisection(r.k, r.n)
        assert r.lo == pytest.approx(want[0], abs=1e-9) and r.hi == pytest.approx(want[1], abs=1e-9)


def test_report_numbers_match_direct_runs(spark, swept, direct, tmp_path):  # noqa: F811
    from rich.console import Console

    from kreplica.sim.history import read_jsonl, run_header
    from kreplica.sim.report import Summary
    from kreplica.spark.report import build_report

    out, _ = swept
    text = io.StringIO()
    report = build_report(spark, read_results(spark, out), tmp_path / "report",
                          console=Console(file=text, width=220), source=out)
    assert len(report.rows) == 4
    for row in report.rows:
        runs = [d for (name, key, _), d in direct.items() if (name, key) == (row["scenario"], row["config_key"])]
        lost = [d for d in runs if d.losses or (d.violation and d.violation.invariant.value == "1-acked-write-lost")]
        assert row["runs"] == len(runs) == 3 and row["loss_runs"] == len(lost)
        assert row["loss_probability"] == pytest.approx(len(lost) / 3)
        low, high = _wilson_by_bisection(len(lost), 3)
        assert row["loss_ci_low"] == pytest.approx(low, abs=1e-9)
        assert row["loss_ci_high"] == pytest.approx(high, abs=1e-9)
        assert row["lost_acks"] == sum(len(d.losses) for d in runs)
        assert row["lost_by_cause"] == dict(Counter(loss.cause for d in runs for loss in d.losses))
        assert row["superseded_reads"] == sum(len(d.superseded_reads) for d in runs)
        assert row["writes_completed"] == sum(d.writes_completed for d in runs)
        # writes/s as `kreplica simulate` prints it for the same seeds: total over total
        # (the high-watermark runs stop at their violation, so a mean of rates differs).
        local = Summary()
        for d in runs:
            local.add(d)
        assert f"{row['throughput']:.1f}" == dict(local.rows())[
            "writes completed / virtual s (acked, or sent with acks=0)"]
        assert row["throughput"] == pytest.approx(sum(d.writes_completed for d in runs) * 1000
                                                  / sum(d.virtual_ms for d in runs))
        assert row["mean_availability"] == pytest.approx(np.mean([d.availability for d in runs]))
        samples = [ms for d in runs for ms in d.reelect_ms]
        assert row["elections"] == len(samples)
        if samples:
            assert row["reelect_p50_ms"] == pytest.approx(np.percentile(samples, 50))
            assert row["reelect_p99_ms"] == pytest.approx(np.percentile(samples, 99))
        by_invariant: dict[str, int] = {}
        for d in runs:
            if d.violation is not None:
                by_invariant[d.violation.invariant.value] = by_invariant.get(d.violation.invariant.value, 0) + 1
        assert row["violations"] == by_invariant
    printed = text.getvalue()
    assert "truncation=high-watermark" in printed and "truncation=leader-epoch" in printed

    # Failing seeds: exactly the direct runs with a violation or a counted loss, each replayable.
    failing = sorted(k for k, d in direct.items() if d.violation or d.losses)
    assert failing and report.failing_total == len(failing)
    assert sorted((f["scenario"], f["config_key"], f["seed"]) for f in report.failing) == failing
    md = report.markdown.read_text()
    for f in report.failing:
        assert f["replay"] in md and f["replay"].startswith("kreplica simulate --replay /")
        events = read_jsonl(f["replay"].split()[-1])
        header = run_header(events)
        assert header["seed"] == f["seed"]
        assert direct[(f["scenario"], f["config_key"], f["seed"])].history_hash == f["history_hash"]
    # The listed command, run: the simulator replays the file and finds the identical hash.
    from kreplica import sim_cli

    first = report.failing[0]
    args = first["replay"].split()
    assert args[:2] == ["kreplica", "simulate"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = sim_cli.main(args[2:])
    # A replay exits as the run did: 1 with its violation, 0 for a run listed for its losses.
    failed_run = direct[(first["scenario"], first["config_key"], first["seed"])]
    assert rc == (1 if failed_run.violation is not None else 0)
    assert f"replayed history hash {first['history_hash']}" in printed.getvalue() and "identical" in printed.getvalue()
    for png in report.plots:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.name in md


# ---- resume after a killed sweep -----------------------------------------------------------------

def _parquet_files(out: Path) -> list[Path]:
    return sorted(out.glob("scenario=*/*.parquet")) if out.exists() else []


def test_resume_after_killed_sweep(spark, direct, tmp_path):  # noqa: F811
    """A ``kreplica sweep`` process is SIGKILLed once its first chunks are committed; the
    re-run runs exactly the missing triples: none twice, none missing."""
    require_spark()
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "kreplica", "sweep", "--scenario", ",".join(SCENARIOS), "--seeds", SEEDS,
           "--truncation", ",".join(TRUNCATIONS), "--out", str(out), "--master", "local[1]",
           "--runs-per-task", "1", "--tasks-per-chunk", "1", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(_parquet_files(out)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert _parquet_files(out), "the sweep committed nothing in time"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        from kreplica.spark.sim_runner import remove_orphaned_scratch

        remove_orphaned_scratch(keep="", min_age_s=0)  # what the killed sweep left
    before = read_results(spark, str(out)).collect()
    assert 2 <= len(before) < len(GRID)
    assert len({(r.scenario, r.config_key, r.seed) for r in before}) == len(before)

    stats = run_sweep(spark, GRID, str(out), runs_per_task=2, tasks_per_chunk=3)
    assert stats.already_done == len(before) and stats.executed == len(GRID) - len(before)
    after = read_results(spark, str(out)).collect()
    keys = [(r.scenario, r.config_key, r.seed) for r in after]
    assert len(keys) == len(set(keys)) == len(GRID)
    assert set(keys) == set(direct)
    for r in after:
        assert r.history_hash == direct[(r.scenario, r.config_key, r.seed)].history_hash


# ---- an interrupted sweep ------------------------------------------------------------------------

_FIRST = 7_300_001  # seeds no other run uses: data dirs named for them are a sweep's here


def _run_data_left() -> list[str]:
    import glob

    from kreplica.sim.world import default_data_root

    root = default_data_root()
    return glob.glob(os.path.join(root, "kreplica-sim-7300*")) + glob.glob(os.path.join(root, "*", "kreplica-sim-7300*"))


def _sweep_scratch_dirs() -> set[str]:
    import glob

    from kreplica.sim.world import default_data_root

    return set(glob.glob(os.path.join(default_data_root(), "kreplica-sweep-*")))


def _jvm_started(proc: subprocess.Popen) -> bool:
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    names = []
    for child in children:
        try:
            names.append(child.name())
        except psutil.NoSuchProcess:
            pass
    return "java" in names


def _interrupt_a_sweep(tmp_path: Path, stop: Callable[[subprocess.Popen], None],
                       at_start: bool = False) -> tuple[int, str]:
    """Start ``kreplica sweep`` (local[1]), ``stop`` it once a run is in flight (or while
    Spark starts); (exit status, stderr)."""
    cmd = [sys.executable, "-m", "kreplica", "sweep", "--scenario", "random-chaos",
           "--seeds", f"{_FIRST}..{_FIRST + 399}", "--out", str(tmp_path / "runs"), "--master", "local[1]",
           "--runs-per-task", "2", "--tasks-per-chunk", "1", "--no-progress"]
    before = set(_run_data_left())  # a failed earlier test's, not this sweep's
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        if at_start:
            # Once Spark's JVM is a child the sweep has its handlers installed and is starting
            # Spark: a fixed sleep could land inside Python's start-up on a loaded machine.
            while not _jvm_started(proc) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _jvm_started(proc), "Spark's JVM did not start in time"
        else:
            while not set(_run_data_left()) - before and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert set(_run_data_left()) - before and proc.poll() is None, "no run started in time"
            time.sleep(0.5)
        stop(proc)
        _, err = proc.communicate(timeout=120)
        # What the sweep started (the JVM, its Python workers) ends with it.
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return proc.returncode, err.decode()


def test_ctrl_c_stops_a_sweep_in_one_line_and_leaves_no_run_data(tmp_path):
    """Ctrl-C reaches the whole process group (driver, JVM, Python workers): exit 130 with
    one line saying what finished, and no simulator data left behind."""
    require_spark()
    scratch_before = _sweep_scratch_dirs()
    rc, err = _interrupt_a_sweep(tmp_path, lambda p: os.killpg(p.pid, signal.SIGINT))
    lines = [line for line in err.splitlines() if line.strip() and "incubator" not in line]
    assert rc == 130, err[-3000:]
    assert "Traceback" not in err and "Exception" not in err and len(lines) <= 4, err[-3000:]
    assert "sweep: interrupted after" in lines[-1]
    assert _run_data_left() == [] and _sweep_scratch_dirs() <= scratch_before


def test_ctrl_c_while_spark_starts_is_one_line_too(tmp_path):
    require_spark()
    rc, err = _interrupt_a_sweep(tmp_path, lambda p: os.killpg(p.pid, signal.SIGINT), at_start=True)
    lines = [line for line in err.splitlines() if line.strip() and "incubator" not in line]
    assert rc == 130 and lines == ["sweep: interrupted while Spark started; nothing ran"], err[-3000:]


def test_sigterm_cancels_the_jobs_from_another_thread_as_ctrl_c_does():
    """The handler itself must not call the JVM: the main thread is inside a gateway call."""
    import threading

    from kreplica.tools.sweep import _Interrupts

    class Context:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []
            self.cancelled = threading.Event()

        def setLogLevel(self, level: str) -> None:
            self.calls.append((threading.current_thread().name, f"log {level}"))

        def cancelAllJobs(self) -> None:
            self.calls.append((threading.current_thread().name, "cancel"))
            self.cancelled.set()

    sc = Context()
    before = signal.getsignal(signal.SIGTERM)
    interrupts = _Interrupts().install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # before the session is up: only noted
        assert interrupts.requested and not sc.calls
        interrupts.attach(sc)
        assert sc.cancelled.wait(10)
        with pytest.raises(KeyboardInterrupt):  # a second signal does not wait for Spark
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    finally:
        interrupts.restore()
    assert sc.calls[:2] == [("kreplica-sweep-cancel", "log OFF"), ("kreplica-sweep-cancel", "cancel")]
    assert signal.getsignal(signal.SIGTERM) == before


def test_what_a_sweep_killed_outright_leaves_the_next_sweep_removes(tmp_path):
    """SIGKILL of the driver alone: its JVM exits, the Python daemon hangs up on the workers
    mid-run (they close their worlds on the way out, unless Spark kills them first), and
    nobody is left to remove the sweep's scratch directory.  The next sweep's tasks on the
    host do, once no task holds it (here without waiting the minute they leave it)."""
    require_spark()
    from kreplica.spark.sim_runner import remove_orphaned_scratch, scratch_dir, use_scratch

    scratch_before = _sweep_scratch_dirs()
    _interrupt_a_sweep(tmp_path, lambda p: p.kill())
    left = _sweep_scratch_dirs() - scratch_before
    assert len(left) == 1
    busy = "kreplica-sweep-test-busy"
    lock = use_scratch(busy)  # a live task's: kept
    try:
        removed = remove_orphaned_scratch(keep="", min_age_s=0)
        assert left <= set(removed) and scratch_dir(busy) not in removed
        assert _run_data_left() == [] and _sweep_scratch_dirs() <= scratch_before | {scratch_dir(busy)}
    finally:
        os.close(lock)
    assert scratch_dir(busy) in remove_orphaned_scratch(keep="", min_age_s=0)


def test_a_failure_in_a_python_worker_is_named_by_its_own_last_line():
    """Spark's first line only says a Python worker failed; the sweep prints what did."""
    from kreplica.tools.sweep import _spark_error

    captured = type("PythonException", (Exception,), {"__module__": "pyspark.errors.exceptions.captured"})
    exc = captured("An exception was thrown from the Python worker. Please see the stack trace below.\n"
                   "Traceback (most recent call last):\n  File \"task.py\", line 1, in <module>\n"
                   "TypeError: run_tasks() takes 2 positional arguments but 3 were given\n")
    assert _spark_error(exc) == ("in a Python worker: TypeError: run_tasks() takes 2 positional "
                                 "arguments but 3 were given")
    assert _spark_error(ValueError("not Spark's")) is None


# ---- progress ------------------------------------------------------------------------------------

def test_progress_counts_tasks_from_the_status_tracker(spark, tmp_path):  # noqa: F811
    from rich.console import Console

    from kreplica.spark.progress import TaskTracker

    sc = spark.sparkContext
    sc.setJobGroup("kreplica-progress-test", "progress test")
    try:
        spark.range(0, 100, numPartitions=5).selectExpr("sum(id)").collect()
        spark.range(0, 100, numPartitions=3).rdd.map(lambda r: r.id).count()
        counts = TaskTracker(sc, "kreplica-progress-test").poll()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    # 5 + 1 tasks for the aggregate (whatever adaptive execution skipped), 3 for the count.
    assert counts.completed == counts.total >= 9 and counts.failed == 0 and counts.active == 0

    text = io.StringIO()
    g = Grid.from_axes([SCENARIO], {"truncation": ["leader-epoch"]}, "1..2")
    seen = []
    stats = run_sweep(spark, g, str(tmp_path / "runs"), runs_per_task=1, tasks_per_chunk=2, progress=True,
                      console=Console(file=text, width=160),
                      on_chunk=lambda k, n, s: seen.append((k, n, s.executed)))
    assert seen == [(1, 1, 2)] and stats.executed == 2
    assert "2/2 tasks" in text.getvalue()


def test_staging_left_by_a_killed_writer_is_not_published(spark, tmp_path):  # noqa: F811
    """A writer killed between task commit and job commit leaves committed task files under
    ``_temporary``; the next job's commit would move them into place (checked: it does), so
    a sweep removes that staging first."""
    import shutil

    out = tmp_path / "runs"
    small = {"until_ms": [200]}
    run_sweep(spark, Grid.from_axes([SCENARIO], small, "1..2"), str(out), runs_per_task=2, tasks_per_chunk=1)
    committed = _parquet_files(out)[0]
    stale = out / "_temporary" / "0" / "task_202601010000_0000_m_000000" / committed.parent.name
    stale.mkdir(parents=True)
    shutil.copy(committed, stale / "part-99999-stale.c000.snappy.parquet")

    stats = run_sweep(spark, Grid.from_axes([SCENARIO], small, "1..3"), str(out), runs_per_task=2,
                      tasks_per_chunk=1)
    assert stats.already_done == 2 and stats.executed == 1
    assert sorted(r.seed for r in read_results(spark, str(out)).select("seed").collect()) == [1, 2, 3]
    assert not (out / "_temporary").exists()
    # Another configuration point of seed 2: not done, though a run of seed 2 is.
    other = run_sweep(spark, Grid.from_axes([SCENARIO], {"until_ms": [300]}, "2..2"), str(out), runs_per_task=2,
                      tasks_per_chunk=1)
    assert (other.total, other.already_done, other.executed) == (1, 0, 1)


def _result_row(seed: int, **changes) -> dict:
    """A row as sim_runner.run makes it: a clean run unless ``changes`` say otherwise."""
    from kreplica.spark.sweep import RESULT_COLUMNS

    config = RunConfig(truncation="leader-epoch")
    row = {name: None for name, _ in RESULT_COLUMNS}
    row.update(scenario=SCENARIO, config_key=config.key, seed=seed, acks="all", min_isr=2, unclean=False,
               truncation="leader-epoch", rf=3, fault_rate=0.0, faults_per_minute=0.0, until_ms=1000,
               brokers=3, history_hash=str(seed) * 64, events=10, virtual_ms=1000, violations={},
               violations_total=0, lost_acks=0, lost_by_cause={}, unclean_elections=0, superseded_reads=0,
               superseded_by_cause={}, acked_writes=10, writes_completed=10, availability=1.0,
               reelect_ms=[], converged=True, wall_ms=1.0)
    row.update(changes)
    return row


def test_report_tells_losses_other_violations_and_errors_apart(spark, tmp_path):  # noqa: F811
    """Only invariant 1 or a counted loss is a lost write; another invariant and a run that
    raised are failing runs, listed with their histories, but not losses."""
    import gzip

    from kreplica.spark.report import build_report
    from kreplica.spark.sweep import result_schema

    history = gzip.compress(b'{"kind": "run"}\n')
    rows = [
        _result_row(1),
        _result_row(2, violations={"3-replica-divergence": 1}, violations_total=1, converged=False,
                    first_violation="3-replica-divergence: replicas differ", history_gz=history),
        _result_row(3, error="RuntimeError: boom", virtual_ms=None, availability=None, converged=False,
                    history_gz=history),
        _result_row(4, lost_acks=2, lost_by_cause={"unclean-election": 2}, unclean_elections=2,
                    history_gz=history),
    ]
    # Given in reverse: the failing runs are listed by seed, not in the order they were written
    # (the hundred-and-twenty-first review).
    report = build_report(spark, spark.createDataFrame(rows[::-1], result_schema()), tmp_path, show=False)
    [row] = report.rows
    assert (row["runs"], row["loss_runs"], row["violation_runs"], row["errors"], row["failing_runs"]) == (
        4, 1, 1, 1, 3)
    assert row["loss_probability"] == 0.25 and row["violations"] == {"3-replica-divergence": 1}
    assert row["mean_availability"] == 1.0  # over the runs that measured it
    assert row["unclean_elections"] == 2  # elections, not runs with one (the 195th review)
    assert report.failing_total == 3 and [f["seed"] for f in report.failing] == [2, 3, 4]
    md = report.markdown.read_text()
    assert f"seed 3 (hash `{'3' * 16}`): RuntimeError: boom" in md
    assert all(f["replay"] in md and Path(f["replay"].split()[-1]).is_file() for f in report.failing)
    # Listing fewer failing runs does not make fewer of them fail.
    first = build_report(spark, spark.createDataFrame(rows[::-1], result_schema()), tmp_path / "first",
                         show=False, max_failing=1)
    assert (first.failing_total, [f["seed"] for f in first.failing]) == (3, [2])
    assert "The first 1 of 3:" in first.markdown.read_text()


def test_cli_report_only(spark, swept, tmp_path, capsys):  # noqa: F811
    """``kreplica sweep --report-only``: the table on stdout, report.md beside the replays.
    Last in the module: the command stops the (shared) session when it is done."""
    from kreplica.cli import main

    out, _ = swept
    assert main(["sweep", "--out", out, "--report-only", "--report-dir", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert "kreplica sweep: per configuration" in printed and "unclean-election" in printed
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.count("kreplica simulate --replay ") >= 1 and "## Failing runs" in md
    assert sorted(p.name for p in (tmp_path / "r").glob("*.png")) == [
        "availability.png", "loss_probability.png", "reelection.png"]
