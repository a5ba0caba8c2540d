"""``kreplica sweep`` on a real standalone Spark cluster (a master and a worker of their
own), not a local master: the driver is a plain Python process, so the executors'
interpreter comes only from ``--conf spark.pyspark.python`` (PySpark reads it from the
environment alone, which spark-submit would have set)."""
import os
import subprocess
import sys

import pytest
from spark_fixtures import standalone_spark  # noqa: F401 - fixture

from kreplica.sim import world
from kreplica.spark.sim_runner import build_scenario
from kreplica.spark.sweep import Grid

pytestmark = pytest.mark.spark
SCENARIO = "kip101-hw-truncation"


def test_a_sweep_runs_on_a_standalone_cluster_and_matches_direct_runs(standalone_spark, tmp_path):  # noqa: F811
    import pyarrow.parquet as pq  # here: without the spark extra the fixture skips (or fails in CI)

    out = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    cmd = [sys.executable, "-m", "kreplica", "sweep", "--scenario", SCENARIO, "--seeds", "1..4",
           "--truncation", "high-watermark", "--out", str(out), "--no-progress",
           "--master", standalone_spark.url,
           "--conf", f"spark.pyspark.python={sys.executable}",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", "spark.executor.memory=1g"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(standalone_spark.applications()) >= 1  # the worker ran its executors
    rows = pq.read_table(str(out)).to_pylist()
    grid = Grid.from_axes((SCENARIO,), {"truncation": ["high-watermark"]}, "1..4")
    sc = build_scenario(SCENARIO, grid.configs[0])
    direct = {seed: world.run(sc, seed) for seed in range(1, 5)}
    assert sorted(r["seed"] for r in rows) == [1, 2, 3, 4]
    for r in rows:
        d = direct[r["seed"]]
        assert r["history_hash"] == d.history_hash and r["lost_acks"] == len(d.losses)
        assert r["violations_total"] == (d.violation is not None) and r["error"] is None
