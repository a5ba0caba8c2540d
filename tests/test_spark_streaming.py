"""The ``kreplica`` streaming source: committed records exactly once (issue 6).

A writer thread appends to real :class:`kreplica.log.Log`s and advances the
broker's ``replication-offset-checkpoint`` (the HW, lagging the log end by one
batch, as a leader waiting for followers would) while a Spark streaming query
copies the topic into Parquet.  The query is stopped and restarted on the same
Spark checkpoint in the middle of production; at the end the Parquet table must
hold every committed offset of every partition exactly once and nothing above
the HW.
"""
from __future__ import annotations

import threading
import time

import pytest

from kreplica.runtime import ManualClock
from spark_fixtures import (  # noqa: F401  (spark is a fixture)
    as_tuples,
    log_rows,
    open_log,
    require_spark,
    segment_files,
    spark,
    write_high_watermarks,
)

pytestmark = pytest.mark.spark

TOPIC = "stream"
PARTITIONS = 2
CONFIG = {"segment.bytes": 8192, "index.interval.bytes": 512}


class Producer:
    """Appends batches to every partition and publishes a lagging HW after each round."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.clock = ManualClock(1_700_000_000_000)
        self.logs = [open_log(data_dir, TOPIC, p, self.clock, **CONFIG) for p in range(PARTITIONS)]
        self.hw = {p: 0 for p in range(PARTITIONS)}
        self.rounds = 0

    def round(self) -> None:
        for p, log in enumerate(self.logs):
            before = log.log_end_offset
            log.append_as_leader(
                [(f"{p}-{self.rounds}-{i}".encode(), b"v" * (20 + i)) for i in range(5)],
                leader_epoch=0)
            self.hw[p] = before  # the previous round is now replicated
        write_high_watermarks(self.data_dir, {(TOPIC, p): hw for p, hw in self.hw.items()})
        self.clock.advance(10)
        self.rounds += 1

    def run(self, rounds: int, pause_s: float) -> threading.Thread:
        def loop() -> None:
            for _ in range(rounds):
                self.round()
                time.sleep(pause_s)

        t = threading.Thread(target=loop, name="kreplica-producer")
        t.start()
        return t

    def close(self) -> None:
        for log in self.logs:
            log.close()


def _run_while_producing(spark, producer, data_dir, out, checkpoint, rounds):
    """Run the query on ``checkpoint`` while ``rounds`` rounds are produced; returns
    how many micro-batches had input."""
    stream = (spark.readStream.format("kreplica").option("path", data_dir)
              .option("topic", TOPIC).load())
    query = (stream.writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(processingTime="100 milliseconds")
             .start())
    try:
        # Let the query catch up with what exists, then grow the log under it.
        deadline = time.monotonic() + 120
        while not any(p["numInputRows"] for p in query.recentProgress):
            assert time.monotonic() < deadline and query.exception() is None
            time.sleep(0.1)
        producer.run(rounds=rounds, pause_s=0.1).join()
        query.processAllAvailable()
    finally:
        query.stop()
    return sum(1 for p in query.recentProgress if p["numInputRows"] > 0)


def _written(spark, out):
    return as_tuples(spark.read.parquet(out).collect())


def test_streaming_reads_committed_records_exactly_once_across_a_restart(spark, tmp_path):
    data_dir = str(tmp_path / "broker")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    producer = Producer(data_dir)
    try:
        for _ in range(3):
            producer.round()
        batches = _run_while_producing(spark, producer, data_dir, out, checkpoint, rounds=20)
        assert batches >= 2  # the query tailed the log while it grew
        assert len(_written(spark, out)) == sum(producer.hw.values())

        # Records appended and committed while no query runs must be neither
        # skipped nor read twice by the restarted query.
        for _ in range(4):
            producer.round()
        _run_while_producing(spark, producer, data_dir, out, checkpoint, rounds=6)

        rows = _written(spark, out)
        expected = [r for p in range(PARTITIONS) for r in log_rows(data_dir, TOPIC, p)
                    if r[2] < producer.hw[p]]
        assert rows == expected  # sorted by (partition, offset): no duplicates, no gaps
        assert [r[2] for r in rows if r[1] == 0] == list(range(producer.hw[0]))
        assert producer.hw[0] < producer.logs[0].log_end_offset  # the uncommitted tail stayed out
    finally:
        producer.close()


def test_stream_reader_offsets_follow_the_hw_or_the_log_end(tmp_path):
    """The stream reader's offset protocol, called directly as Spark's planner would."""
    require_spark()  # pyspark is imported, though no session is needed
    from kreplica.spark.datasource import KReplicaDataSource

    data_dir = str(tmp_path / "broker")
    producer = Producer(data_dir)
    try:
        for _ in range(80):
            producer.round()
        assert len(segment_files(data_dir, TOPIC, 0)) > 2

        def reader(**options):
            return KReplicaDataSource({"path": data_dir, "topic": TOPIC, **options}).streamReader(None)

        committed = reader()
        assert committed.initialOffset() == {"0": 0, "1": 0}
        assert committed.latestOffset({"0": 0, "1": 0}, None) == {str(p): producer.hw[p] for p in range(2)}
        # A checkpointed offset above a (regressed) HW is never moved back.
        assert committed.latestOffset({"0": producer.hw[0] + 3, "1": 0}, None)["0"] == producer.hw[0] + 3
        leo = {str(p): log.log_end_offset for p, log in enumerate(producer.logs)}
        assert reader(isolation="uncommitted").latestOffset({}, None) == leo
        assert reader(starting_offsets="latest").initialOffset() == {str(p): producer.hw[p] for p in range(2)}

        # A read limit shares the budget in proportion to the backlogs (295 and 15).
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        limited = reader(max_records_per_trigger="30")
        assert limited.getDefaultReadLimit() == ReadMaxRows(30)
        assert limited.latestOffset({"0": 100, "1": 380}, ReadMaxRows(30)) == {"0": 129, "1": 381}
        assert limited.latestOffset({"0": 0}, ReadMaxRows(1)) == {"0": 1, "1": 0}
        assert limited.latestOffset({"0": 100, "1": 380}, ReadAllAvailable()) == {
            str(p): producer.hw[p] for p in range(2)}

        start, end = {"0": 17, "1": 40}, {"0": 310, "1": 40}
        parts = committed.partitions(start, end)
        assert len(parts) == 2  # offsets 17..309 span two segments of partition 0
        rows = [(r["partition"], r["offset"])
                for part in parts for batch in committed.read(part) for r in batch.to_pylist()]
        assert rows == [(0, o) for o in range(17, 310)]

        # Retention moved the log start past offsets the query has not read.
        from kreplica.errors import OffsetOutOfRange
        from kreplica.log.checkpoints import OffsetCheckpointFile
        from kreplica.protocol.common import TopicPartition

        OffsetCheckpointFile(f"{data_dir}/log-start-offset-checkpoint").write({TopicPartition(TOPIC, 0): 100})
        with pytest.raises(OffsetOutOfRange, match=f"{TOPIC}-0: the query's next offset 17"):
            reader().partitions(start, end)
        lossy = reader(fail_on_data_loss="false")
        assert [r["offset"] for part in lossy.partitions(start, end)
                for batch in lossy.read(part) for r in batch.to_pylist()] == list(range(100, 310))
    finally:
        producer.close()


def test_a_segment_deleted_after_planning_fails_the_read_or_is_skipped(tmp_path):
    """Retention can delete a segment between the driver's plan and the task that reads
    it. The read then fails naming the deletion, not with a bare FileNotFoundError; with
    fail_on_data_loss=false the deleted records are skipped, as below the log start."""
    require_spark()
    import os

    from kreplica.errors import OffsetOutOfRange
    from kreplica.spark.datasource import KReplicaDataSource

    data_dir = str(tmp_path / "broker")
    producer = Producer(data_dir)
    try:
        for _ in range(80):
            producer.round()
        first, second = segment_files(data_dir, TOPIC, 0)[:2]

        def reader(**options):
            return KReplicaDataSource({"path": data_dir, "topic": TOPIC, **options}).streamReader(None)

        start, end = {"0": 0, "1": 0}, {"0": producer.hw[0], "1": 0}
        strict, lossy = reader(), reader(fail_on_data_loss="false")
        plans = strict.partitions(start, end), lossy.partitions(start, end)
    finally:
        producer.close()
    os.remove(first)  # as retention would, once the broker's log let go of it

    def offsets(r, parts):
        return [row["offset"] for part in parts for batch in r.read(part) for row in batch.to_pylist()]

    with pytest.raises(OffsetOutOfRange, match="deleted \\(retention\\) after the read was planned"):
        offsets(strict, plans[0])
    base = int(os.path.basename(second).split(".")[0])
    assert base > 0 and offsets(lossy, plans[1]) == list(range(base, producer.hw[0]))


def _committed(cluster, topic: str, partition: int) -> list[tuple]:
    """(partition, offset, key, value) of every committed record, fetched from the leader."""
    out, offset = [], 0
    while records := cluster.fetch(topic, partition, offset):
        out += [(partition, r.offset, r.key, r.value) for r in records]
        offset = records[-1].offset + 1
    return out


def test_streaming_from_a_broker_of_an_embedded_cluster(spark, tmp_path):
    """The issue's setting: an embedded 3-broker cluster keeps producing (acks=all)
    while a query tails one broker's data dir; its HW checkpoint drives the query."""
    from kreplica import Cluster

    topic, out, checkpoint = "orders", str(tmp_path / "out"), str(tmp_path / "checkpoint")
    cluster = Cluster.embedded(brokers=[1001, 1002, 1003], data_dir=str(tmp_path / "cluster"),
                               metadata="memory", seed=11)
    try:
        cluster.create_topic(topic, partitions=2, replication_factor=3)
        broker_dir = str(tmp_path / "cluster" / "broker-1002")

        def produce(rounds: int) -> None:
            for n in range(rounds):
                for p in range(2):
                    cluster.produce(topic, p, [f"{p}:{n}:{i}".encode() for i in range(4)], acks="all")
                cluster.advance(1000)  # HW checkpoints every 5 s of cluster time
                time.sleep(0.05)

        produce(6)
        query = (spark.readStream.format("kreplica").option("path", broker_dir).option("topic", topic)
                 .load().writeStream.format("parquet").option("path", out)
                 .option("checkpointLocation", checkpoint).trigger(processingTime="100 milliseconds")
                 .start())
        try:
            produce(30)
            cluster.advance(6000)
            query.processAllAvailable()
        finally:
            query.stop()
        rows = sorted((r.partition, r.offset, r.key, bytes(r.value))
                      for r in spark.read.parquet(out).collect())
        assert rows == _committed(cluster, topic, 0) + _committed(cluster, topic, 1)
        assert len(rows) == 2 * 36 * 4
    finally:
        cluster.close()
