"""Sweep scaling on Spark: runs per second on ``local[2]`` against ``local[1]`` (issue 6).

A sweep of 2,000 small runs: KIP-101's HW-truncation scenario (one partition,
three brokers, producers and consumers) cut to ``until_ms`` = 300 virtual ms,
then its liveness phase; seeds 1..2000.  Peers, side by side on the same runs:

- ``spark local[1]`` and ``spark local[2]``: ``run_sweep`` into a fresh
  directory (Parquet rows written), the session already started and its Python
  workers warm;
- ``plain loop``: the same runs one after another in this process through
  :func:`kreplica.spark.sim_runner.run` (what each Spark task does per run).

Target: ``local[2]`` at least 1.6x the runs per second of ``local[1]``.  The
per-run overhead of Spark is ``(local[1] wall - loop wall) / runs`` (both on one
core).  The machine's other load moves these figures: run it on a quiet machine.

    .venv/bin/python benchmarks/bench_spark_sweep.py [RUNS] [UNTIL_MS] [RUNS_PER_TASK] [SCENARIO]
or under pytest-benchmark (one round each):
    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable \\
        benchmarks/bench_spark_sweep.py -s
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import warnings

import pytest

RUNS = 2000
UNTIL_MS = 300
# A run here takes ~12 ms; a task of 125 of them (~1.5 s) keeps Spark's per-task cost
# (~0.1 s: scheduling, Arrow, one Parquet file and its commit) small beside the work.
RUNS_PER_TASK = 125
SCENARIO = "kip101-hw-truncation"


def grid(runs: int = RUNS, until_ms: int = UNTIL_MS):
    from kreplica.spark.sweep import Grid

    return Grid.from_axes([SCENARIO], {"until_ms": [until_ms]}, f"1..{runs}")


class WarmSession:
    """A session on ``master`` with warm Python workers (one run per slot done), and a
    scratch directory; closed with :meth:`close`."""

    def __init__(self, master: str, g) -> None:
        from kreplica.spark.session import local_session
        from kreplica.spark.sweep import Grid, run_sweep

        warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*")
        self.master = master
        self.spark = local_session(master, app_name=f"kreplica-bench-sweep-{master}")
        self.dir = tempfile.mkdtemp(prefix="kreplica-bench-sweep-")
        slots = self.spark.sparkContext.defaultParallelism
        warm = Grid(g.scenarios, g.configs, (10_000_000, 10_000_000 + slots - 1))
        run_sweep(self.spark, warm, os.path.join(self.dir, "warm"), runs_per_task=1, tasks_per_chunk=slots)

    def sweep(self, g) -> None:
        from kreplica.spark.sweep import run_sweep

        stats = run_sweep(self.spark, g, os.path.join(self.dir, "runs"), runs_per_task=RUNS_PER_TASK)
        assert stats.executed == len(g), stats

    def inside_ms(self) -> float:
        """Mean time inside the runs, as the tasks measured it: the rest is Spark's."""
        from kreplica.spark.sweep import read_results

        return read_results(self.spark, os.path.join(self.dir, "runs")).selectExpr("avg(wall_ms)").first()[0]

    def close(self) -> None:
        self.spark.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def spark_sweep(master: str, g) -> float:
    """Seconds for a whole sweep of ``g`` on ``master`` (session start and warm-up excluded)."""
    session = WarmSession(master, g)
    try:
        t = time.perf_counter()
        session.sweep(g)
        wall = time.perf_counter() - t
        print(f"  {master}: mean run inside a task {session.inside_ms():.1f} ms", flush=True)
        return wall
    finally:
        session.close()


def plain_loop(g) -> float:
    from kreplica.spark import sim_runner

    scenario = sim_runner.build_scenario(g.scenarios[0], g.configs[0])
    t = time.perf_counter()
    for i in range(len(g)):
        sim_runner.run(g.spec(i), scenario)
    return time.perf_counter() - t


def figures(runs: int = RUNS, until_ms: int = UNTIL_MS) -> dict[str, float]:
    g = grid(runs, until_ms)
    peers = {"spark local[1]": lambda: spark_sweep("local[1]", g),
             "spark local[2]": lambda: spark_sweep("local[2]", g),
             "plain loop": lambda: plain_loop(g)}
    out = {}
    for name, peer in peers.items():
        out[name] = peer()
        # The machine is shared: the load beside each figure says how far to trust it.
        print(f"  {name}: {out[name]:.1f} s, load average {os.getloadavg()[0]:.1f}", flush=True)
    return out


def print_figures(walls: dict[str, float], runs: int) -> None:
    print(f"\n{runs} runs of {SCENARIO} (until_ms={UNTIL_MS}), {RUNS_PER_TASK} runs per Spark task")
    for name, wall in walls.items():
        print(f"  {name:15s} {wall:8.1f} s  {runs / wall:7.2f} runs/s  {1000 * wall / runs:7.1f} ms/run")
    scaling = walls["spark local[1]"] / walls["spark local[2]"]
    overhead = (walls["spark local[1]"] - walls["plain loop"]) / runs * 1000
    print(f"  local[2] / local[1] runs per second: {scaling:.2f}x (target >= 1.6x)")
    print(f"  Spark overhead per run on one core: {overhead:+.1f} ms "
          f"({100 * overhead / (1000 * walls['plain loop'] / runs):+.0f}% of a run)")


@pytest.fixture(scope="module")
def bench_grid():
    return grid()


@pytest.mark.parametrize("master", ["local[1]", "local[2]"])
def test_spark_sweep(benchmark, bench_grid, master):
    sessions = []

    def setup():
        sessions.append(WarmSession(master, bench_grid))
        return (bench_grid,), {}

    try:
        benchmark.pedantic(lambda g: sessions[-1].sweep(g), setup=setup, rounds=1, iterations=1)
    finally:
        for s in sessions:
            s.close()
    if benchmark.enabled:  # disabled (the test suite's default), pedantic() only ran it once
        benchmark.extra_info["runs_per_s"] = len(bench_grid) / benchmark.stats.stats.mean


def test_plain_loop(benchmark, bench_grid):
    benchmark.pedantic(plain_loop, args=(bench_grid,), rounds=1, iterations=1)
    if benchmark.enabled:  # disabled (the test suite's default), pedantic() only ran it once
        benchmark.extra_info["runs_per_s"] = len(bench_grid) / benchmark.stats.stats.mean


def main(argv: list[str]) -> int:
    global UNTIL_MS, RUNS_PER_TASK, SCENARIO
    runs = int(argv[0]) if argv else RUNS
    UNTIL_MS = int(argv[1]) if len(argv) > 1 else UNTIL_MS
    RUNS_PER_TASK = int(argv[2]) if len(argv) > 2 else RUNS_PER_TASK
    SCENARIO = argv[3] if len(argv) > 3 else SCENARIO
    walls = figures(runs, UNTIL_MS)
    print_figures(walls, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
