"""The ``kreplica`` Spark data source, batch reads (issue 6, "Data source").

One real local Spark session for the module; a small log written by the real
:class:`kreplica.log.Log` (several segments per partition, indexes every 256 B)
and left open, so the active segments are preallocated and zero-filled as on a
live broker.  Expected rows come from ``decode_batches`` over whole segment files.
"""
from __future__ import annotations

import os
import shutil

import pytest

from kreplica.records import scan_batches
from kreplica.runtime import ManualClock
from spark_fixtures import (  # noqa: F401  (spark is a fixture)
    as_tuples,
    log_rows,
    open_log,
    read_topic,
    segment_files,
    spark,
    write_high_watermarks,
)

pytestmark = pytest.mark.spark

TOPIC = "events"
PARTITIONS = 3
BATCHES = 24
T0 = 1_700_000_000_000
CONFIG = {"segment.bytes": 4096, "index.interval.bytes": 256}


def _items(p: int, b: int) -> list:
    items = []
    for i in range(6):
        key = None if i == 0 else f"k{p}-{b}-{i}".encode()
        value = bytes([65 + (b + i) % 26]) * (40 + 7 * i)
        headers = [("src", f"p{p}".encode()), ("n", None)] if i % 3 == 1 else []
        items.append((key, value, headers))
    return items


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``events`` with 3 partitions (HW: all, part, none) and a decoy ``other`` topic."""
    data_dir = str(tmp_path_factory.mktemp("broker"))
    clock = ManualClock(T0)
    logs = [open_log(data_dir, TOPIC, p, clock, **CONFIG) for p in range(PARTITIONS)]
    decoy = open_log(data_dir, "other", 0, clock, **CONFIG)
    for b in range(BATCHES):
        for p, log in enumerate(logs):
            log.append_as_leader(_items(p, b), leader_epoch=b // 10)
        clock.advance(1000)
    decoy.append_as_leader([b"not events"], leader_epoch=0)
    leo = [log.log_end_offset for log in logs]
    hws = {0: leo[0], 1: 6 * 15, 2: 0}
    write_high_watermarks(data_dir, {**{(TOPIC, p): hw for p, hw in hws.items()}, ("other", 0): 1})
    yield data_dir, hws
    for log in [*logs, decoy]:
        log.close()


def _read(spark, data_dir, **options):
    return read_topic(spark, data_dir, TOPIC, **options)


def _all_rows(data_dir):
    return [row for p in range(PARTITIONS) for row in log_rows(data_dir, TOPIC, p)]


def _segments(data_dir, partitions=range(PARTITIONS)):
    return sum(len(segment_files(data_dir, TOPIC, p)) for p in partitions)


def test_columns_and_types(spark, data):
    df = _read(spark, data[0])
    assert df.columns == ["topic", "partition", "offset", "timestamp", "key", "value",
                          "headers", "leader_epoch"]
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"


def test_register_makes_a_session_built_elsewhere_read_the_source(spark, data):
    """Spark leaves pushdown into Python sources off: a session not built by local_session
    refused every read (DATA_SOURCE_PUSHDOWN_DISABLED) until register() turns it on."""
    from kreplica.spark import register
    from kreplica.spark.session import PUSHDOWN_CONF

    data_dir, hws = data
    spark.conf.set(PUSHDOWN_CONF, "false")  # as in a session of the user's own
    try:
        with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
            _read(spark, data_dir).count()
        assert register(spark) is spark and spark.conf.get(PUSHDOWN_CONF) == "true"
        assert _read(spark, data_dir).where("offset >= 0").count() == sum(hws.values())
    finally:
        spark.conf.set(PUSHDOWN_CONF, "true")


def test_uncommitted_rows_equal_the_log(spark, data):
    data_dir, _ = data
    rows = as_tuples(_read(spark, data_dir, isolation="uncommitted").collect())
    expected = _all_rows(data_dir)
    assert len(expected) == PARTITIONS * BATCHES * 6
    assert rows == expected


def test_committed_reads_only_below_the_high_watermark(spark, data):
    data_dir, hws = data
    rows = as_tuples(_read(spark, data_dir).collect())
    assert rows == [r for r in _all_rows(data_dir) if r[2] < hws[r[1]]]
    counts = {p: sum(1 for r in rows if r[1] == p) for p in range(PARTITIONS)}
    assert counts == {0: hws[0], 1: hws[1], 2: 0}


def test_one_input_partition_per_segment(spark, data):
    data_dir, _ = data
    df = _read(spark, data_dir, isolation="uncommitted")
    assert _segments(data_dir) > 2 * PARTITIONS
    assert df.rdd.getNumPartitions() == _segments(data_dir)


def test_max_partition_bytes_splits_segments_at_batch_boundaries(spark, data):
    data_dir, _ = data
    df = _read(spark, data_dir, isolation="uncommitted", max_partition_bytes=1024)
    assert df.rdd.getNumPartitions() > 2 * _segments(data_dir)
    assert as_tuples(df.collect()) == _all_rows(data_dir)


def test_pushdown_on_partition(spark, data):
    data_dir, _ = data
    df = _read(spark, data_dir, isolation="uncommitted").where("partition = 1")
    assert df.rdd.getNumPartitions() == _segments(data_dir, [1])
    assert as_tuples(df.collect()) == log_rows(data_dir, TOPIC, 1)


def test_pushdown_on_offset_range(spark, data):
    data_dir, _ = data
    df = _read(spark, data_dir, isolation="uncommitted").where(
        "partition = 0 and offset >= 40 and offset < 50")
    # Ten offsets lie in at most two neighbouring segments.
    assert 1 <= df.rdd.getNumPartitions() <= 2 < _segments(data_dir, [0])
    assert as_tuples(df.collect()) == [r for r in log_rows(data_dir, TOPIC, 0) if 40 <= r[2] < 50]


def test_pushdown_on_timestamp_uses_the_time_index(spark, data):
    data_dir, _ = data
    since = T0 + (BATCHES - 3) * 1000  # the last three batches of each partition
    df = _read(spark, data_dir, isolation="uncommitted").where(f"timestamp >= {since}")
    # Only the active segment of each partition can hold them.
    assert df.rdd.getNumPartitions() == PARTITIONS
    assert as_tuples(df.collect()) == [r for r in _all_rows(data_dir) if r[3] >= since]


def test_uncommitted_reads_with_offset_bounds_past_the_log_end(spark, data):
    """A pushed-down upper bound is no promise that the log reaches it: the active
    segment ends where its data does (a false CORRUPT_MESSAGE before the fix)."""
    data_dir, _ = data
    df = _read(spark, data_dir, isolation="uncommitted")
    assert as_tuples(df.where("offset < 1000000").collect()) == _all_rows(data_dir)
    assert as_tuples(df.where("partition = 2 and offset in (5, 1000000)").collect()) == [
        r for r in log_rows(data_dir, TOPIC, 2) if r[2] == 5]
    assert df.where("offset >= 1000 and offset <= 1000").count() == 0


def test_filters_that_cannot_be_pushed_still_hold(spark, data):
    data_dir, hws = data
    df = _read(spark, data_dir).where("offset % 7 = 3 or timestamp < 0")
    assert as_tuples(df.collect()) == [
        r for r in _all_rows(data_dir) if r[2] < hws[r[1]] and r[2] % 7 == 3]
    df = _read(spark, data_dir).where(
        "partition != 1 and offset in (3, 77, null) and not (timestamp < 0)")
    assert as_tuples(df.collect()) == [
        r for r in _all_rows(data_dir) if r[1] == 0 and r[2] in (3, 77)]


def _copy(data_dir, tmp_path):
    """A copy of the data dir with partition 0 only, whose HW covers everything."""
    target = tmp_path / "copy"
    target.mkdir()
    shutil.copytree(os.path.join(data_dir, f"{TOPIC}-0"), target / f"{TOPIC}-0")
    shutil.copy(os.path.join(data_dir, "replication-offset-checkpoint"), target)
    return str(target)


def _middle_batch(path):
    with open(path, "rb") as f:
        scan = scan_batches(f.read())
    k = scan.count // 2
    return int(scan.positions[k]), int(scan.sizes[k]), int(scan.base_offsets[k]), int(scan.last_offsets[k])


def test_corrupt_batch_fails_naming_file_and_position(spark, data, tmp_path):
    copy = _copy(data[0], tmp_path)
    sealed = segment_files(copy, TOPIC, 0)[1]
    pos, size, _, _ = _middle_batch(sealed)
    with open(sealed, "r+b") as f:  # flip a byte inside the CRC-covered records
        f.seek(pos + size - 5)
        byte = f.read(1)
        f.seek(pos + size - 5)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(Exception) as info:
        _read(spark, copy).collect()
    message = str(info.value)
    assert sealed in message and f"at position {pos}" in message and "crc mismatch" in message


def test_corrupt_batch_skipped_and_counted(spark, data, tmp_path):
    from kreplica.spark.datasource import skipped_batches, skipped_regions

    copy = _copy(data[0], tmp_path)
    sealed = segment_files(copy, TOPIC, 0)[1]
    pos, size, first, last = _middle_batch(sealed)
    with open(sealed, "r+b") as f:
        f.seek(pos + size - 5)
        f.write(b"\x00\x01\x02")
    report = str(tmp_path / "report")
    rows = as_tuples(_read(spark, copy, on_corrupt="skip", corrupt_report=report).collect())
    assert rows == [r for r in log_rows(data[0], TOPIC, 0) if not first <= r[2] <= last]
    assert skipped_batches(report) == 1
    [region] = skipped_regions(report)
    assert region["file"] == sealed and region["position"] == pos and region["skipped_bytes"] == size


def test_skip_resynchronises_on_the_offset_index_after_a_bad_length(spark, data, tmp_path):
    from kreplica.spark.datasource import skipped_batches, skipped_regions

    copy = _copy(data[0], tmp_path)
    sealed = segment_files(copy, TOPIC, 0)[1]
    pos, size, first, last = _middle_batch(sealed)
    with open(sealed, "r+b") as f:  # a batch length pointing far past the file
        f.seek(pos + 8)
        f.write((0x7FFFFF00).to_bytes(4, "big"))
    report = str(tmp_path / "report")
    rows = as_tuples(_read(spark, copy, on_corrupt="skip", corrupt_report=report).collect())
    assert rows == [r for r in log_rows(data[0], TOPIC, 0) if not first <= r[2] <= last]
    assert skipped_batches(report) == 1
    [region] = skipped_regions(report)
    assert region["position"] == pos and region["next_offset"] == last + 1
    assert f"at position {pos}" in region["reason"]


def test_torn_tail_past_the_high_watermark_is_the_live_append_edge(spark, data, tmp_path):
    copy = _copy(data[0], tmp_path)
    active = segment_files(copy, TOPIC, 0)[-1]
    with open(active, "rb") as f:
        scan = scan_batches(f.read())
    pos, size = int(scan.positions[-1]), int(scan.sizes[-1])
    hw = int(scan.base_offsets[-1])
    with open(active, "r+b") as f:  # the second half of the last batch not yet written
        f.seek(pos + size // 2)
        f.write(bytes(size - size // 2))
    write_high_watermarks(copy, {(TOPIC, 0): hw})
    expected = [r for r in log_rows(data[0], TOPIC, 0) if r[2] < hw]
    assert as_tuples(_read(spark, copy).collect()) == expected
    assert as_tuples(_read(spark, copy, isolation="uncommitted").collect()) == expected


def test_skip_without_a_report_dir_is_refused(spark, data):
    with pytest.raises(Exception, match="corrupt_report"):
        _read(spark, data[0], on_corrupt="skip").collect()


def test_torn_sealed_segment_fails_naming_file_and_position(spark, data, tmp_path):
    copy = _copy(data[0], tmp_path)
    sealed = segment_files(copy, TOPIC, 0)[0]
    pos, size, _, _ = _middle_batch(sealed)
    os.truncate(sealed, pos + size // 2)
    with pytest.raises(Exception) as info:
        _read(spark, copy).collect()
    message = str(info.value)
    assert sealed in message and f"at position {pos}" in message


def test_unknown_topic_and_bad_options_are_clear_errors(spark, data):
    with pytest.raises(Exception, match="no partition directories for topic 'nope'"):
        spark.read.format("kreplica").option("path", data[0]).option("topic", "nope").load().collect()
    with pytest.raises(Exception, match="isolation"):
        _read(spark, data[0], isolation="dirty").collect()


def test_pushdown_bounds_from_spark_filters():
    """What each filter Spark can push narrows to (no session needed)."""
    from spark_fixtures import require_spark

    require_spark()
    from pyspark.sql.datasource import (EqualTo, GreaterThan, In, IsNotNull, LessThanOrEqual, Not,
                                        StringStartsWith)

    from kreplica.spark.datasource import Pushdown

    pd = Pushdown()
    for f in (In(("partition",), (0, 2, None)), Not(EqualTo(("partition",), 2)),
              GreaterThan(("offset",), 9), LessThanOrEqual(("offset",), 20), In(("offset",), (12, 30)),
              GreaterThan(("timestamp",), 5), LessThanOrEqual(("timestamp",), 7),
              IsNotNull(("key",)), StringStartsWith(("topic",), "ev")):
        pd.absorb(f)
    assert [p for p in range(4) if pd.allows_partition(p)] == [0, 2]  # Not(...) is not used to prune
    assert (pd.offset_lo, pd.offset_hi, pd.timestamp_lo) == (12, 21, 6)
