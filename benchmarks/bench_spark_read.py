"""Batch read throughput of the ``kreplica`` Spark source, 1 KiB records (issue 6).

Peers, side by side on the same segment files (128 MiB written by the real Log):
- ``spark``: ``spark.read.format("kreplica")`` on ``local[1]`` (one task slot, so
  the figure is per core), every row materialised through an aggregate over
  ``value``;
- ``python-loop``: a plain Python loop decoding the same segments with
  kafka-python's pure-Python v2 decoder, record by record.
Target: at least 100 MB/s per core for the Spark read; the ratio is printed.

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
RECORDS = 128 * 1024
PER_BATCH = 256
TOPIC = "bench"


def build_log(data_dir: str) -> int:
    """Write RECORDS x 1 KiB through the Log; returns the bytes of the segment files."""
    from kreplica.log import Log, LogConfig
    from kreplica.log.checkpoints import OffsetCheckpointFile
    from kreplica.protocol.common import TopicPartition
    from kreplica.runtime import ManualClock

    log = Log.open(os.path.join(data_dir, f"{TOPIC}-0"),
                   LogConfig.from_dict({"segment.bytes": 16 << 20}), clock=ManualClock(1))
    value = os.urandom(RECORD_BYTES)
    for i in range(RECORDS // PER_BATCH):
        log.append_as_leader([(b"key-%08d" % i, value)] * PER_BATCH, leader_epoch=0)
    OffsetCheckpointFile(os.path.join(data_dir, "replication-offset-checkpoint")).write(
        {TopicPartition(TOPIC, 0): log.log_end_offset})
    log.close()
    d = os.path.join(data_dir, f"{TOPIC}-0")
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".log"))


def spark_read(spark, data_dir: str) -> int:
    df = spark.read.format("kreplica").option("path", data_dir).option("topic", TOPIC).load()
    rows, value_bytes = df.selectExpr("count(*)", "sum(length(value))").first()
    assert rows == RECORDS
    return value_bytes


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
    assert total == RECORDS * RECORD_BYTES
    return total


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
    benchmark.extra_info["MB_per_s"] = _mb_per_s(size, benchmark.stats.stats.mean)


def test_python_loop(benchmark, log_dir):
    d, size = log_dir
    benchmark.extra_info["segment_bytes"] = size
    benchmark.pedantic(python_loop, args=(d,), rounds=1, iterations=1)
    benchmark.extra_info["MB_per_s"] = _mb_per_s(size, benchmark.stats.stats.mean)


def main() -> None:
    from kreplica.spark.session import local_session

    d = tempfile.mkdtemp(prefix="kreplica-bench-spark-")
    try:
        size = build_log(d)
        spark = local_session("local[1]", app_name="kreplica-bench")
        spark_read(spark, d)
        timings = {}
        for name, fn in (("spark local[1]", lambda: spark_read(spark, d)),
                         ("python-loop", lambda: python_loop(d))):
            best = min(_timed(fn) for _ in range(3 if name.startswith("spark") else 1))
            timings[name] = best
        spark.stop()
        print(f"{RECORDS} records x {RECORD_BYTES} B, {size / 1e6:.1f} MB of segments")
        for name, t in timings.items():
            print(f"  {name:16s} {t:7.2f} s  {_mb_per_s(size, t):8.1f} MB/s")
        ratio = timings["python-loop"] / timings["spark local[1]"]
        print(f"  spark / python-loop throughput ratio: {ratio:.1f}x")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
