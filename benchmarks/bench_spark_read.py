"""Batch read throughput of the ``kreplica`` Spark source, 1 KiB records (issue 6).

Peers, side by side on the same segment files (256 MiB written by the real Log):
- ``spark``: ``spark.read.format("kreplica")`` on ``local[1]`` (one task slot, so
  the figure is per core), every row materialised through an aggregate over
  ``value``;
- ``python-loop``: a plain Python loop decoding the same segments with
  kafka-python's pure-Python v2 decoder, record by record.
Target: at least 100 MB/s per core for the Spark read; the ratio is printed.
"Per core" is measured as bytes per CPU second of the whole process tree (the
JVM and the Python workers included), which stays meaningful on a shared machine
where wall time does not.

    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable \\
        benchmarks/bench_spark_read.py -s
or, for the table alone: ``.venv/bin/python benchmarks/bench_spark_read.py``.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import pytest

RECORD_BYTES = 1024
RECORDS = 256 * 1024
SMALL_RECORDS = 32 * 1024  # a second size, to separate Spark's fixed per-query cost
PER_BATCH = 256
TOPIC = "bench"


def build_log(data_dir: str, records: int = RECORDS) -> int:
    """Write ``records`` x 1 KiB through the Log; returns the bytes of the segment files."""
    from kreplica.log import Log, LogConfig
    from kreplica.log.checkpoints import OffsetCheckpointFile
    from kreplica.protocol.common import TopicPartition
    from kreplica.runtime import ManualClock

    log = Log.open(os.path.join(data_dir, f"{TOPIC}-0"),
                   LogConfig.from_dict({"segment.bytes": 16 << 20}), clock=ManualClock(1))
    value = os.urandom(RECORD_BYTES)
    for i in range(records // PER_BATCH):
        log.append_as_leader([(b"key-%08d" % i, value)] * PER_BATCH, leader_epoch=0)
    OffsetCheckpointFile(os.path.join(data_dir, "replication-offset-checkpoint")).write(
        {TopicPartition(TOPIC, 0): log.log_end_offset})
    log.close()
    d = os.path.join(data_dir, f"{TOPIC}-0")
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".log"))


def spark_read(spark, data_dir: str) -> int:
    df = spark.read.format("kreplica").option("path", data_dir).option("topic", TOPIC).load()
    rows, value_bytes = df.selectExpr("count(*)", "sum(length(value))").first()
    assert value_bytes == rows * RECORD_BYTES
    return rows


def _cpu_seconds() -> float:
    """CPU time of this process and all its descendants (the JVM, Python workers),
    reaped children included, so throughput per core survives a busy machine."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def measured(fn, *args) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call."""
    cpu, wall = _cpu_seconds(), time.perf_counter()
    fn(*args)
    return time.perf_counter() - wall, _cpu_seconds() - cpu


def python_loop(data_dir: str) -> int:
    """The baseline: a plain Python loop over every record of every segment."""
    from kafka.record import MemoryRecords

    d = os.path.join(data_dir, f"{TOPIC}-0")
    total = 0
    for name in sorted(n for n in os.listdir(d) if n.endswith(".log")):
        with open(os.path.join(d, name), "rb") as f:
            records = MemoryRecords(f.read())
        while (batch := records.next_batch()) is not None:
            for record in batch:
                total += len(record.value)
    return total // RECORD_BYTES


@pytest.fixture(scope="module")
def log_dir():
    d = tempfile.mkdtemp(prefix="kreplica-bench-spark-")
    size = build_log(d)
    yield d, size
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def spark():
    from kreplica.spark.session import local_session

    s = local_session("local[1]", app_name="kreplica-bench")
    yield s
    s.stop()


def _mb_per_s(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def test_spark_read(benchmark, spark, log_dir):
    d, size = log_dir
    spark_read(spark, d)  # warm the Python workers
    benchmark.extra_info["segment_bytes"] = size
    benchmark.pedantic(spark_read, args=(spark, d), rounds=3, iterations=1)
    if benchmark.enabled:  # disabled (the test suite's default), pedantic() only ran it once
        benchmark.extra_info["MB_per_s"] = _mb_per_s(size, benchmark.stats.stats.mean)
        wall, cpu = measured(spark_read, spark, d)
        benchmark.extra_info["MB_per_cpu_s"] = _mb_per_s(size, cpu)


def test_python_loop(benchmark, log_dir):
    d, size = log_dir
    benchmark.extra_info["segment_bytes"] = size
    benchmark.pedantic(python_loop, args=(d,), rounds=1, iterations=1)
    if benchmark.enabled:
        benchmark.extra_info["MB_per_s"] = _mb_per_s(size, benchmark.stats.stats.mean)
        wall, cpu = measured(python_loop, d)
        benchmark.extra_info["MB_per_cpu_s"] = _mb_per_s(size, cpu)


def _best(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return min(samples)


def main() -> None:
    from kreplica.spark.session import local_session

    spark = local_session("local[1]", app_name="kreplica-bench")
    results = {}
    for records in (SMALL_RECORDS, RECORDS):
        d = tempfile.mkdtemp(prefix="kreplica-bench-spark-")
        try:
            size = build_log(d, records)
            spark_read(spark, d)  # warm the Python workers and the JIT
            assert spark_read(spark, d) == python_loop(d) == records
            results[records] = (size, _best([measured(spark_read, spark, d) for _ in range(3)]),
                                _best([measured(python_loop, d) for _ in range(2)]))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    spark.stop()
    print(f"1 KiB records; spark on local[1]; best of 3 (spark) / 2 (loop)")
    print(f"  {'records':>8s} {'MB':>6s} {'peer':12s} {'wall s':>7s} {'MB/s':>7s} {'CPU s':>6s} {'MB/CPU-s':>9s}")
    for records, (size, sp, lp) in results.items():
        for name, (wall, cpu) in (("spark", sp), ("python-loop", lp)):
            print(f"  {records:8d} {size / 1e6:6.1f} {name:12s} {wall:7.2f} {_mb_per_s(size, wall):7.1f} "
                  f"{cpu:6.2f} {_mb_per_s(size, cpu):9.1f}")
    (s1, sp1, lp1), (s2, sp2, lp2) = results[SMALL_RECORDS], results[RECORDS]
    spark_marginal = _mb_per_s(s2 - s1, sp2[1] - sp1[1])
    loop_marginal = _mb_per_s(s2 - s1, lp2[1] - lp1[1])
    print(f"  spark {RECORDS}-record read: {_mb_per_s(s2, sp2[1]):.1f} MB per CPU second "
          f"(target >= 100); beyond the fixed per-query cost: {spark_marginal:.1f} MB per CPU second")
    print(f"  spark / python-loop: {lp2[0] / sp2[0]:.2f}x by wall time, {lp2[1] / sp2[1]:.2f}x per CPU "
          f"second, {spark_marginal / loop_marginal:.2f}x beyond fixed costs")


if __name__ == "__main__":
    sys.exit(main())
