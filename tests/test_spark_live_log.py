"""The ``kreplica`` source reading a LIVE broker's log after a follower truncation.

A truncation on an open log only lowers the entry counts the log keeps in memory;
the old ``.index`` / ``.timeindex`` entries stay on disk past them, still
increasing, naming batches that were replaced.  Every log here stays open while
it is read, as on a running broker.  Expected rows come from ``decode_batches``
over the segment files, cut at the HW checkpoint.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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

T0 = 1_700_000_000_000


def _read(spark, data_dir, **options):
    reader = spark.read.format("kreplica").option("path", data_dir).option("topic", "t")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def _live(data_dir, batches=40, keep=None, new=0):
    """An open log of one-record batches of 300 B, indexed every 1 KiB; truncated to
    ``keep`` and appended ``new`` batches in a new epoch, it keeps stale index entries
    past the new data."""
    log = open_log(data_dir, "t", 0, ManualClock(T0), **{"index.interval.bytes": 1024})
    for _ in range(batches):
        log.append_as_leader([(b"k", b"a" * 300)], leader_epoch=0)
    if keep is not None:
        log.truncate_to(keep)
    for _ in range(new):
        log.append_as_leader([(b"n", b"b" * 300)], leader_epoch=1)
    log.flush()
    return log


def test_time_pushdown_ignores_time_index_entries_left_by_a_truncation(spark, tmp_path):
    data_dir = str(tmp_path)
    clock = ManualClock(T0)
    log = open_log(data_dir, "t", 0, clock, **{"index.interval.bytes": 4096})
    try:
        for _ in range(15):
            log.append_as_leader([(b"k", b"a" * 830)] * 2, leader_epoch=0)
            clock.advance(10)
        log.truncate_to(8)
        log.append_as_leader([(b"n", b"b" * 698)] * 2, leader_epoch=1)  # offsets 8, 9 at T0 + 150
        write_high_watermarks(data_dir, {("t", 0): 9})
        log.flush()
        # On disk, entries such as (T0 + 140, 29) still claim offsets 8 and 9 are older.
        since = T0 + 150
        rows = as_tuples(_read(spark, data_dir).where(f"timestamp >= {since}").collect())
        assert [(r[2], r[3]) for r in rows] == [(8, since)]
    finally:
        log.close()


def test_reads_of_a_truncated_live_log_follow_the_data_not_stale_index_entries(spark, tmp_path):
    data_dir = str(tmp_path)
    log = _live(data_dir, keep=20, new=3)
    try:
        write_high_watermarks(data_dir, {("t", 0): 23})
        expected = log_rows(data_dir, "t", 0)
        assert [r[2] for r in expected] == list(range(23))
        # Small partitions cut at index positions, stale ones included before the fix.
        for options in ({}, {"max_partition_bytes": 100}, {"isolation": "uncommitted"},
                        {"isolation": "uncommitted", "max_partition_bytes": 100}):
            assert as_tuples(_read(spark, data_dir, **options).collect()) == expected, options
        assert as_tuples(_read(spark, data_dir).where("offset >= 15").collect()) == expected[15:]
    finally:
        log.close()


def test_log_end_offset_of_a_truncated_live_log(tmp_path):
    require_spark()
    from kreplica.spark.log_files import list_partitions

    log = _live(str(tmp_path), keep=20, new=3)
    try:
        [part] = list_partitions(str(tmp_path), "t")
        assert part.log_end_offset() == log.log_end_offset == 23
    finally:
        log.close()


def _stream(spark, data_dir):
    return (spark.readStream.format("kreplica").option("path", data_dir).option("topic", "t")
            .option("isolation", "uncommitted").load())


def test_uncommitted_stream_of_a_truncated_live_log_reads_to_the_log_end(spark, tmp_path):
    data_dir = str(tmp_path / "broker")
    os.makedirs(data_dir)
    log = _live(data_dir, keep=20, new=3)
    try:
        query = (_stream(spark, data_dir).writeStream.format("memory").queryName("live_uncommitted")
                 .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert spark.sql("select count(*) from live_uncommitted").first()[0] == 23
    finally:
        log.close()


def test_a_high_watermark_checkpoint_above_the_log_end_is_clamped_to_it(spark, tmp_path):
    """A broker truncating below its HW checkpoints the lower HW only later."""
    data_dir = str(tmp_path)
    log = _live(data_dir, 30, keep=10)
    try:
        write_high_watermarks(data_dir, {("t", 0): 30})
        expected = log_rows(data_dir, "t", 0)
        assert [r[2] for r in expected] == list(range(10))
        assert as_tuples(_read(spark, data_dir).collect()) == expected
        # A committed stream must not move past records it has not read either.
        from kreplica.spark.datasource import KReplicaStreamReader, ReadOptions

        reader = KReplicaStreamReader(ReadOptions.from_options({"path": data_dir, "topic": "t"}))
        assert reader.latestOffset() == {"0": 10}
    finally:
        log.close()


def test_the_clamp_never_hides_a_corrupt_batch_below_the_high_watermark(spark, tmp_path):
    """The clamp applies to a log that ends in zeros, not to one that ends in garbage."""
    from kreplica.records import scan_batches
    from kreplica.spark.log_files import SegmentFiles

    data_dir = str(tmp_path)
    log = _live(data_dir, 30)
    try:
        write_high_watermarks(data_dir, {("t", 0): 30})
        [path] = segment_files(data_dir, "t", 0)
        with open(path, "rb") as f:
            scan = scan_batches(f.read())
        # The batch after the last index entry: the planner's scan for the log end meets it.
        [last_indexed] = SegmentFiles(path, 0, None).offset_index()[0][-1:]
        bad = int(last_indexed) + 1
        assert bad < 30
        pos = int(scan.positions[bad])
        with open(path, "r+b") as f:  # inside the max timestamp: a CRC mismatch
            f.seek(pos + 40)
            f.write(b"\xff\xfe")
        with pytest.raises(Exception, match=f"CORRUPT_MESSAGE.*position {pos}"):
            _read(spark, data_dir).collect()
    finally:
        log.close()


def test_a_slice_whose_start_position_holds_another_batch_is_read_from_the_segment_start(tmp_path):
    """The reader's own check of an index hint, whatever the planner believed."""
    require_spark()
    from kreplica.records import scan_batches
    from kreplica.spark.segment_reader import SegmentSlice, read_slice

    log = _live(str(tmp_path), keep=20)
    try:
        [path] = segment_files(str(tmp_path), "t", 0)
        with open(path, "rb") as f:
            scan = scan_batches(f.read())
        # Position of batch 12, named as the start of batch 10 (as a stale entry might).
        s = SegmentSlice("t", 0, path, 0, int(scan.positions[12]), None, 10, 15, 15, start_offset=10)
        got = [r for b in read_slice(s) for r in b.column("offset").to_pylist()]
        assert got == [10, 11, 12, 13, 14]
    finally:
        log.close()


# ---- property: planner + reader against the files, live and closed logs ----

@st.composite
def _histories(draw):
    steps = draw(st.lists(st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 400), st.integers(-3000, 3000)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("hw"), st.floats(0, 1)),
    ), min_size=1, max_size=40))
    return (steps, draw(st.sampled_from([0, 200, 1024])), draw(st.sampled_from([2048, 1 << 20])),
            draw(st.booleans()), draw(st.one_of(st.none(), st.integers(0, 120))),
            draw(st.one_of(st.none(), st.integers(-4000, 80_000))), draw(st.sampled_from([None, 100, 1024])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_histories())
def test_plans_and_reads_match_the_log_files(tmp_path_factory, history):
    require_spark()
    from kreplica.spark.datasource import Pushdown, ReadOptions, _partitions_of, _upper_bounds, plan_slices
    from kreplica.spark.segment_reader import read_slice

    steps, interval, segment, closed, offset_lo, since, max_bytes = history
    data_dir = str(tmp_path_factory.mktemp("prop"))
    clock = ManualClock(T0)
    log = open_log(data_dir, "t", 0, clock, **{"index.interval.bytes": interval, "segment.bytes": segment})
    hw = 0
    try:
        for i, (kind, *args) in enumerate(steps):
            if kind == "append":
                n, size, skew = args
                log.append_as_leader([(b"k", bytes(size))] * n, leader_epoch=i // 8,
                                     timestamp_ms=clock.now_ms() + skew)
                clock.advance(100)
            elif kind == "truncate":  # below the checkpointed HW too: a live broker's edge
                log.truncate_to(int(args[0] * log.log_end_offset))
            else:
                hw = int(args[0] * log.log_end_offset)
        write_high_watermarks(data_dir, {("t", 0): hw})
        committed = min(hw, log.log_end_offset)  # the reader clamps a checkpoint past the data
        if closed:
            log.close()
        else:
            log.flush()
        rows = log_rows(data_dir, "t", 0)
        for isolation in ("committed", "uncommitted"):
            opts = ReadOptions.from_options({"path": data_dir, "topic": "t", "isolation": isolation,
                                             **({"max_partition_bytes": str(max_bytes)} if max_bytes else {})})
            pd = Pushdown(offset_lo=offset_lo, timestamp_lo=None if since is None else T0 + since)
            got = sorted(r for s in plan_slices(opts, pd, _upper_bounds(opts, _partitions_of(opts)))
                         for b in read_slice(s) for r in zip(b.column("offset").to_pylist(),
                                                             b.column("timestamp").to_pylist()))
            want = [(r[2], r[3]) for r in rows
                    if (isolation == "uncommitted" or r[2] < committed)
                    and (offset_lo is None or r[2] >= offset_lo) and (since is None or r[3] >= T0 + since)]
            got = [g for g in got if since is None or g[1] >= T0 + since]
            assert got == want, (isolation, steps)
    finally:
        if not closed:
            log.close()
