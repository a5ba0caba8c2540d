"""How the Spark source finds a topic's partitions, segments and offsets on disk, without Spark.

:mod:`kreplica.spark.log_files` is plain Python over a broker's data dir: the
partition directories of one topic among every other directory Kafka keeps there,
the ``.log`` files among a partition's other files, and the log start and HW from
the broker's checkpoint files.  The Spark modules test it through a session, with
one-digit partition numbers and topics of letters only; here its functions are
called directly on directories written by the real :class:`kreplica.log.Log`, in the
fast run (the eighteenth review, docs/engine-audit.md, LF..).  It needs numpy and
pyarrow (the ``spark`` extra), not pyspark or Java.
"""
from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

from kreplica.log import Log
from kreplica.log.checkpoints import OffsetCheckpointFile
from kreplica.protocol.common import TopicPartition
from kreplica.runtime import ManualClock

if importlib.util.find_spec("pyarrow") is None:  # log_files reads segments through pyarrow's module
    if os.environ.get("KREPLICA_REQUIRE_SPARK") == "1":
        pytest.fail("KREPLICA_REQUIRE_SPARK=1 but pyarrow is not installed", pytrace=False)
    pytest.skip("pyarrow is not installed (pip install 'kreplica[spark]')", allow_module_level=True)

from kreplica.errors import CorruptMessage, OffsetOutOfRange  # noqa: E402
from kreplica.spark.log_files import OffsetBounds, list_partitions, read_high_watermarks  # noqa: E402
from kreplica.spark.segment_reader import read_slice  # noqa: E402

T0 = 1_700_000_000_000
# How Kafka renames a replica's directory while deleting it, moving it to another log
# dir (the future replica), or finding it stray (3.x): `<topic>-<n>.<32 hex>-<suffix>`.
UID = "0123456789abcdef0123456789abcdef"


def _log(data_dir, name: str, batches: int = 1, records: int = 3, rolls: int = 0, **config) -> Log:
    """An open real log in ``data_dir/name``: ``batches`` batches of ``records``
    records, rolled after every ``rolls`` batches."""
    log = Log.open(os.path.join(data_dir, name), config, clock=ManualClock(T0))
    for b in range(batches):
        log.append_as_leader([(b"k", b"v%d" % b)] * records)
        if rolls and b % rolls == rolls - 1:
            log.roll()
    return log


def _write(data_dir, name: str, entries: dict) -> None:
    OffsetCheckpointFile(os.path.join(data_dir, name)).write(
        {TopicPartition(t, p): off for (t, p), off in entries.items()})


def test_only_the_topics_partition_directories_are_found(tmp_path):
    """Topic ``a.b`` (a dot: regex syntax) with partition 12 (two digits), beside the
    directories of topics sharing a prefix or matching ``a.b`` as a pattern, the renamed
    directories of a replica being deleted, moved or found stray, and a file named like
    a partition directory."""
    d = str(tmp_path)
    for p in (0, 7, 12):
        _log(d, f"a.b-{p}").close()
    for decoy in ("axb-1", "xa.b-2", "a.b-x-3", "a.bx-4", "a.b.c-5", "a.b-"):
        _log(d, decoy).close()
    for p, suffix in ((5, "delete"), (6, "future"), (8, "stray")):
        shutil.copytree(os.path.join(d, "a.b-0"), os.path.join(d, f"a.b-{p}.{UID}-{suffix}"))
    (tmp_path / "a.b-9").write_text("a file, not a partition directory")
    parts = list_partitions(d, "a.b")
    assert [(p.topic, p.partition, p.directory) for p in parts] == [
        ("a.b", n, os.path.join(d, f"a.b-{n}")) for n in (0, 7, 12)]
    assert [p.partition for p in list_partitions(d, "a.b-x")] == [3]
    assert list_partitions(d, "a") == []


def test_a_partition_directory_renamed_for_deletion_while_listed_is_left_out(tmp_path, monkeypatch):
    """Deleting a topic renames ``t-1`` to ``t-1.<id>-delete``; between the scan of the data
    dir and the listing of ``t-1`` that was a bare FileNotFoundError from planning. Now
    the answer is the one a listing a moment later gives."""
    from kreplica.spark import log_files

    d = str(tmp_path)
    for p in (0, 1, 2):
        _log(d, f"t-{p}").close()
    listdir = os.listdir

    def renamed_first(path):
        if os.path.basename(path) == "t-1":
            os.rename(path, os.path.join(d, f"t-1.{UID}-delete"))
        return listdir(path)

    monkeypatch.setattr(log_files.os, "listdir", renamed_first)
    assert [p.partition for p in list_partitions(d, "t")] == [0, 2]
    monkeypatch.setattr(log_files.os, "listdir", listdir)
    assert [p.partition for p in list_partitions(d, "t")] == [0, 2]


def test_segments_are_the_log_files_in_base_offset_order(tmp_path):
    """Twelve segments, their bases past two digits, among the files Kafka keeps beside
    them: a segment retention renamed to ``.deleted`` before removing it, a cleaner's
    ``.cleaned`` and ``.swap`` files, indexes, producer snapshots and checkpoints."""
    d = str(tmp_path)
    log = _log(d, "t-0", batches=12, records=9, rolls=1)
    leo = log.log_end_offset
    log.close()
    part_dir = tmp_path / "t-0"
    # Kafka's retention renames a segment's files to *.deleted and removes them later.
    for ext in (".log", ".index", ".timeindex"):
        os.rename(part_dir / f"{0:020d}{ext}", part_dir / f"{0:020d}{ext}.deleted")
    shutil.copy(part_dir / f"{18:020d}.log", part_dir / f"{18:020d}.log.cleaned")
    shutil.copy(part_dir / f"{27:020d}.log", part_dir / f"{27:020d}.log.swap")
    (part_dir / f"{leo:020d}.snapshot").write_bytes(b"")
    (part_dir / "partition.metadata").write_text("version: 0\ntopic_id: x\n")
    bases = list(range(9, leo + 1, 9))  # 9 .. 108: the last is the empty active segment
    [part] = list_partitions(d, "t")
    assert [s.base_offset for s in part.segments] == bases
    assert [s.log_path for s in part.segments] == [str(part_dir / f"{b:020d}.log") for b in bases]
    assert [s.next_base_offset for s in part.segments] == [*bases[1:], None]
    assert part.log_start_offset == 9 and part.log_end_offset() == leo == 108


def test_log_start_and_high_watermarks_come_from_the_checkpoints_of_this_topic(tmp_path):
    """The log start is the checkpoint's, raised to the first segment (Kafka's
    LogLoader), or the first segment without an entry; the HW is the
    replication-offset-checkpoint's, not the recovery point's, and neither reads the
    entries of topics that share a prefix."""
    d = str(tmp_path)
    _log(d, "t-0", batches=4).close()  # 12 records in one segment
    for p in (1, 2):  # retention moved the log start past the first two segments
        log = _log(d, f"t-{p}", batches=4, rolls=1)
        log.update_high_watermark(log.log_end_offset)
        assert log.maybe_increment_log_start_offset(7) and log.delete_old_segments() == 2
        log.close()
    assert read_high_watermarks(d, "t") == {}  # no checkpoint files yet: nothing committed
    assert [p.log_start_offset for p in list_partitions(d, "t")] == [0, 6, 6]
    decoys = {("t-x", 0): 99, ("t-x", 1): 98, ("tt", 2): 97}  # sorted after t's entries
    # t-1's entry is stale: below its first segment (the checkpoint lags retention).
    _write(d, "log-start-offset-checkpoint", {("t", 0): 5, ("t", 1): 2, **decoys})
    _write(d, "replication-offset-checkpoint", {("t", 0): 10, ("t", 1): 11, **decoys})
    _write(d, "recovery-point-offset-checkpoint", {("t", 0): 12, ("t", 1): 12, ("t", 2): 12})
    assert [(p.partition, p.log_start_offset) for p in list_partitions(d, "t")] == [(0, 5), (1, 6), (2, 6)]
    assert read_high_watermarks(d, "t") == {0: 10, 1: 11}
    assert read_high_watermarks(d, "t-x") == {0: 99, 1: 98}


def test_a_partition_missing_from_the_hw_checkpoint_has_nothing_committed(tmp_path):
    """A broker checkpoints a partition's HW some time after it gets the replica: until
    then a committed read returns none of its records, and a stream's latest offset is
    its log start (the data source's planning, called as Spark would, no JVM)."""
    pytest.importorskip("pyspark")
    from kreplica.spark.datasource import KReplicaDataSource

    d = str(tmp_path)
    _log(d, "t-0", batches=4).close()
    log = _log(d, "t-1", batches=4, rolls=1)
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(7) and log.delete_old_segments() == 2
    log.close()
    _write(d, "replication-offset-checkpoint", {("t", 0): 5})

    def rows(**options):
        reader = KReplicaDataSource({"path": d, "topic": "t", **options}).reader(None)
        return [(r["partition"], r["offset"]) for part in reader.partitions()
                for batch in reader.read(part) for r in batch.to_pylist()]

    assert rows() == [(0, o) for o in range(5)]
    assert rows(isolation="uncommitted") == [(0, o) for o in range(12)] + [(1, o) for o in range(6, 12)]
    stream = KReplicaDataSource({"path": d, "topic": "t"}).streamReader(None)
    assert stream.latestOffset({}, None) == {"0": 5, "1": 6}


@pytest.mark.parametrize("gone", [(".log",), (".log", ".index", ".timeindex")], ids=["mid-deletion", "deleted"])
def test_a_segment_deleted_while_the_read_is_planned_is_left_for_the_read_to_report(tmp_path, gone):
    """Retention can delete a listed segment before planning reads its index; it removes
    the ``.log`` first (Kafka renames it first), so for a moment the index is there and
    the log is not.  Planning then failed with a bare FileNotFoundError.  It must plan the
    segment as it does one deleted after planning: the read fails naming the deletion, or
    with fail_on_data_loss=false skips the segment's records."""
    d = str(tmp_path)
    log = _log(d, "t-0", batches=12, records=1, rolls=4, **{"index.interval.bytes": 1})
    log.close()
    [part] = list_partitions(d, "t")
    first = part.segments[0]
    assert [s.base_offset for s in part.segments] == [0, 4, 8, 12] and len(first.hints().offsets) == 3  # batches 1..3
    for ext in gone:
        os.unlink(os.path.splitext(first.log_path)[0] + ext)

    def plan(on_missing):
        return [s for seg in part.segments
                for s in seg.slices(OffsetBounds(0, 12, 12), None, None, topic="t", partition=0,
                                    on_corrupt="fail", corrupt_report=None, on_missing=on_missing)]

    def offsets(slices):
        return [r["offset"] for s in slices for batch in read_slice(s) for r in batch.to_pylist()]

    with pytest.raises(OffsetOutOfRange, match="deleted \\(retention\\) after the read was planned"):
        offsets(plan("fail"))
    assert offsets(plan("skip")) == list(range(4, 12))


def test_a_tail_segment_rolled_and_deleted_since_the_listing_is_measured_on_a_fresh_listing(tmp_path):
    """The listed last segment can be rolled and then deleted by retention before
    planning scans its tail for the log end.  That scan failed with a bare
    FileNotFoundError.  The ends must be those a listing a moment later gives."""
    d = str(tmp_path)
    log = _log(d, "t-0", batches=6, records=1, rolls=3)  # segments 0, 3 and the empty active 6
    [stale] = list_partitions(d, "t")
    assert [s.base_offset for s in stale.segments] == [0, 3, 6]
    for b in (6, 7):
        log.append_as_leader([(b"k", b"v%d" % b)])
    log.roll()
    log.append_as_leader([(b"k", b"v8")])
    log.update_high_watermark(9)
    assert log.maybe_increment_log_start_offset(8) and log.delete_old_segments() == 3  # 0, 3 and 6
    assert not os.path.exists(stale.segments[-1].log_path)
    assert stale.log_end_offset() == 9
    assert stale.committed_end(9) == 9 and stale.committed_end(20) == 9
    assert [s.base_offset for s in stale.relisted().segments] == [8]
    log.close()
    shutil.rmtree(os.path.join(d, "t-0"))
    assert stale.relisted().segments == () and stale.log_end_offset() == stale.log_start_offset


def test_time_pruning_of_a_live_segment_with_no_index_entry_yet_keeps_every_record(tmp_path):
    """A live active segment holding less than ``index.interval.bytes`` has index files
    preallocated and all zeros.  Their only usable entry is the first (0, 0); the zeros
    after it repeat it rather than increase, and are not entries: believed, they would
    say every record up to the segment's base is older than any time bound."""
    log = _log(str(tmp_path), "t-0", batches=3, records=1)  # open: a live broker's log
    try:
        [part] = list_partitions(str(tmp_path), "t")
        [active] = part.segments
        assert os.path.getsize(os.path.splitext(active.log_path)[0] + ".timeindex") > 12  # preallocated

        def offsets(timestamp_lo):
            return [r["offset"] for s in active.slices(OffsetBounds(0, None, None), timestamp_lo, None, topic="t",
                                                       partition=0, on_corrupt="fail", corrupt_report=None)
                    for batch in read_slice(s) for r in batch.to_pylist()]

        assert offsets(None) == offsets(T0) == offsets(T0 - 1) == [0, 1, 2]
    finally:
        log.close()


# ---- the slice reader on damaged and oddly cut data, without Spark (twenty-third review) ----

def _sealed(tmp_path, batches: int = 6):
    """A closed log of ``batches`` batches of 3 records (an index entry each): its one
    segment's path and the batches' positions and sizes."""
    from kreplica.records import scan_batches

    _log(str(tmp_path), "t-0", batches=batches, records=3, **{"index.interval.bytes": 1}).close()
    path = os.path.join(str(tmp_path), "t-0", "00000000000000000000.log")
    with open(path, "rb") as f:
        scan = scan_batches(f.read())
    assert scan.count == batches and os.path.getsize(path) == int(scan.positions[-1] + scan.sizes[-1])
    return path, scan.positions.tolist(), scan.sizes.tolist()


def _slice(path, start=0, end=None, lo=0, hi=None, need=None, **kw):
    from kreplica.spark.segment_reader import SegmentSlice

    return SegmentSlice("t", 0, path, 0, start, end, lo, hi, need, **kw)


def _offsets(s):
    return [o for b in read_slice(s) for o in b.column("offset").to_pylist()]


def test_batches_larger_than_a_read_chunk_are_read_whole_up_to_the_last_byte_of_the_file(tmp_path, monkeypatch):
    """A batch longer than the chunk is read again at its declared size, also when it
    ends exactly at the end of the file; a start hint is checked once, on the first
    batch, not on every chunk after it."""
    from kreplica.spark import segment_reader

    path, positions, _ = _sealed(tmp_path)
    monkeypatch.setattr(segment_reader, "CHUNK_BYTES", 64)  # every batch is 91 bytes
    assert _offsets(_slice(path, need=18)) == list(range(18))
    assert _offsets(_slice(path, positions[2], lo=6, hi=18, need=18, start_offset=6)) == list(range(6, 18))


def test_the_end_of_a_sealed_segment_before_its_next_offset_is_named_by_what_is_there(tmp_path):
    """Zeros and the end of the file are reported as such, at the file position where
    the batches stop, with the position the index promised when the data stops short
    of it, else with the offset the segment had to reach."""
    path, positions, sizes = _sealed(tmp_path)
    end = positions[-1] + sizes[-1]
    with pytest.raises(CorruptMessage, match=f"end of file at position {end}, before offset 21"):
        _offsets(_slice(path, end=end, need=21))
    with pytest.raises(CorruptMessage, match=f"end of file at position {end}, where batches run to position {end + 91}"):
        _offsets(_slice(path, end=end + 91, need=21))
    with open(path, "r+b") as f:
        f.seek(positions[4])
        f.write(bytes(end - positions[4]))
    with pytest.raises(CorruptMessage, match=f"zero bytes at position {positions[4]}, before offset 18"):
        _offsets(_slice(path, need=18))


def test_a_skipped_batch_is_reported_with_the_offsets_read_before_it_and_where_reading_resumed(tmp_path, capsys):
    import json

    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:  # inside batch 3's records: a CRC mismatch
        f.seek(positions[3] + sizes[3] - 5)
        f.write(b"\xff\xfe")
    report = tmp_path / "report"
    s = _slice(path, need=18, on_corrupt="skip", corrupt_report=str(report))
    assert _offsets(s) == [*range(9), *range(12, 18)]
    [region] = json.loads((report / s.report_name).read_text())["regions"]
    assert region == {"file": path, "position": positions[3], "resume_position": positions[4],
                      "skipped_bytes": sizes[3], "reason": region["reason"], "offsets_read_before": 9,
                      "next_offset": 12}
    assert region["reason"].startswith(f"crc mismatch at position {positions[3]}:")
    # The notice goes to stderr, beside the task's other warnings; stdout stays the caller's.
    out, err = capsys.readouterr()
    assert out == "" and err == f"kreplica: skipped corrupt data in {path} at position {positions[3]}: {region['reason']}\n"


def test_a_skip_whose_declared_length_lands_inside_a_batch_resumes_at_the_next_index_entry(tmp_path):
    """The end a bad batch declares is tried first; when no valid batch starts there the
    offset index's next position is tried, and one region is reported, not two."""
    import json

    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:  # batch 2 claims to end 10 bytes into batch 3
        f.seek(positions[2] + 8)
        f.write((sizes[2] + 10 - 12).to_bytes(4, "big"))
    report = tmp_path / "report"
    s = _slice(path, need=18, on_corrupt="skip", corrupt_report=str(report))
    assert _offsets(s) == [*range(6), *range(9, 18)]
    [region] = json.loads((report / s.report_name).read_text())["regions"]
    assert (region["position"], region["resume_position"], region["next_offset"]) == (positions[2], positions[3], 9)


# ---- the slice reader's stopping rules and messages (forty-third review) ----

def test_a_corrupt_batch_is_named_with_the_offsets_read_before_it_and_the_index_only_when_it_named_the_position(tmp_path):
    """The message says how far the read got (the last offset read, or that nothing was)
    and names the offset index only when the bad position is the one the index gave."""
    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:  # inside batch 3's records: a CRC mismatch
        f.seek(positions[3] + sizes[3] - 5)
        f.write(b"\xff\xfe")
    with pytest.raises(CorruptMessage) as info:
        _offsets(_slice(path, need=18))
    assert str(info.value).endswith("(partition t-0, read up to offset 8)")
    with pytest.raises(CorruptMessage) as info:
        _offsets(_slice(path, positions[3], lo=9, need=18, start_offset=9))
    assert str(info.value).endswith("(partition t-0, read up to offset 8; "
                                    "the position comes from 00000000000000000000.index)")
    with open(path, "r+b") as f:  # now batch 0, at position 0, is bad too
        f.seek(sizes[0] - 5)
        f.write(b"\xff\xfe")
    with pytest.raises(CorruptMessage) as info:
        _offsets(_slice(path, need=18))
    assert str(info.value).endswith("(partition t-0, nothing read yet)")


def test_a_slice_stops_once_its_last_offset_was_read_whatever_follows(tmp_path):
    """Past ``offset_hi`` (the HW) a live leader may be mid-append: a torn or bad batch
    there ends the slice cleanly, even when the segment has offsets still to reach."""
    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:  # batch 3 (offsets 9 to 11), the first past the HW, is bad
        f.seek(positions[3] + sizes[3] - 5)
        f.write(b"\xff\xfe")
    assert _offsets(_slice(path, hi=9, need=18)) == list(range(9))
    with pytest.raises(CorruptMessage, match=f"crc mismatch at position {positions[3]}"):
        _offsets(_slice(path, hi=10, need=18))


def test_an_index_hint_pointing_inside_a_batch_is_read_from_the_segment_start(tmp_path):
    """No batch at all where the index points (a stale entry after a truncation and new
    appends) is a stale hint, not corruption: the slice is read from position 0."""
    path, positions, _ = _sealed(tmp_path)
    assert _offsets(_slice(path, positions[3] + 20, lo=9, need=18, start_offset=9)) == list(range(9, 18))
    assert _offsets(_slice(path, positions[5] + 91, lo=15, hi=18, need=18, start_offset=15)) == [15, 16, 17]


def test_a_bad_last_batch_before_the_zero_fill_is_skipped_up_to_the_zeros_only(tmp_path):
    """A bad batch followed by a segment's zero fill is the last one written: the skip
    ends where its own length says, and the report counts its bytes, not the zeros'."""
    import json

    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:
        f.seek(positions[5])  # batch 5 never written: zeros from there, as preallocated
        f.write(bytes(sizes[5] + 4096))
        f.seek(positions[4] + sizes[4] - 5)  # and batch 4 bad
        f.write(b"\xff\xfe")
    report = tmp_path / "report"
    s = _slice(path, need=15, on_corrupt="skip", corrupt_report=str(report))
    assert _offsets(s) == list(range(12))
    [region] = json.loads((report / s.report_name).read_text())["regions"]
    assert (region["position"], region["resume_position"], region["skipped_bytes"], region["next_offset"]) == (
        positions[4], positions[5], sizes[4], None)


def test_a_slice_read_without_damage_writes_no_corrupt_report(tmp_path):
    """With on_corrupt=skip the report directory gets a file only for a slice that
    skipped something: a clean read leaves it as it was."""
    path, _, _ = _sealed(tmp_path)
    report = tmp_path / "report"
    assert _offsets(_slice(path, need=18, on_corrupt="skip", corrupt_report=str(report))) == list(range(18))
    assert not report.exists()


# ---- the forty-fifth review (docs/engine-audit.md, SP2-..) -----------------------------------

def test_an_index_of_more_than_4096_entries_is_read_to_its_last_entry(tmp_path):
    """The index is read in a first block of 4096 entries, grown while every entry read
    increases: a closed segment of 5,000 indexed batches keeps all its entries, so a read
    from near its end starts at its batch, and its trimmed time index still prunes."""
    d = str(tmp_path)
    _log(d, "t-0", batches=5000, records=1, **{"index.interval.bytes": 1}).close()
    [part] = list_partitions(d, "t")
    [seg] = part.segments
    offsets, positions = seg.offset_index()
    assert offsets.tolist() == list(range(1, 5000))  # no entry for the batch at position 0
    [s] = seg.slices(OffsetBounds(4990, None, 5000), None, None, topic="t", partition=0, on_corrupt="fail",
                     corrupt_report=None)
    assert s.start_position == positions[offsets == 4990][0] and _offsets(s) == list(range(4990, 5000))
    timestamps, timestamp_offsets = seg.time_index()  # one entry: the clock stood still
    assert timestamps.tolist() == [T0] and len(timestamp_offsets) == 1
    [s] = seg.slices(OffsetBounds(0, None, 5000), T0 + 1, None, topic="t", partition=0, on_corrupt="fail",
                     corrupt_report=None)
    assert s.offset_lo == timestamp_offsets[0] + 1  # the records up to the entry are older


def test_an_offset_in_list_plans_a_read_that_reaches_its_largest_offset(tmp_path):
    """Spark evaluates ``offset IN (4, 13, 7)`` on the rows again, but only on the rows the
    plan reads: the pushed bounds must keep 13."""
    from pyspark.sql.datasource import In

    from kreplica.spark.datasource import Pushdown, ReadOptions, plan_slices

    d = str(tmp_path)
    _log(d, "t-0", batches=6, records=3, **{"index.interval.bytes": 1}).close()
    pushdown = Pushdown()
    pushdown.absorb(In(("offset",), (4, 13, 7)))
    assert (pushdown.offset_lo, pushdown.offset_hi) == (4, 14)
    opts = ReadOptions.from_options({"path": d, "topic": "t"})
    read = [o for s in plan_slices(opts, pushdown, {0: 18}) for o in _offsets(s)]
    assert {4, 7, 13} <= set(read) and min(read) >= 3 and max(read) <= 14


# ---- the sixty-fourth review (docs/engine-audit.md, SP3-..) ----------------------------------

def test_max_partition_bytes_cuts_a_slice_once_it_reaches_the_size(tmp_path):
    """Six 91-byte batches, an index entry each, cut at 182 bytes: three slices of two
    batches, each exactly the size asked for, not one batch over it; all 18 records once."""
    path, positions, sizes = _sealed(tmp_path)
    assert set(sizes) == {91}
    [part] = list_partitions(str(tmp_path), "t")
    [seg] = part.segments
    slices = seg.slices(OffsetBounds(0, 18, 18), None, 2 * 91, topic="t", partition=0, on_corrupt="fail",
                        corrupt_report=None)
    assert [(s.start_position, s.end_position) for s in slices] == [
        (0, positions[2]), (positions[2], positions[4]), (positions[4], None)]
    assert [o for s in slices for o in _offsets(s)] == list(range(18))


def test_a_committed_read_of_the_active_segment_fails_at_a_bad_batch_below_the_high_watermark(tmp_path):
    """Planned as Spark plans it: the HW checkpoint says 18 were committed, and the batch at
    offsets 9..11 is corrupt.  The read must say so, not stop there and return 9 rows."""
    from kreplica.spark.datasource import Pushdown, ReadOptions, _partitions_of, _upper_bounds, plan_slices

    path, positions, sizes = _sealed(tmp_path)
    _write(str(tmp_path), "replication-offset-checkpoint", {("t", 0): 18})
    with open(path, "r+b") as f:
        f.seek(positions[3] + sizes[3] - 2)
        last = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([last[0] ^ 0xFF]))
    opts = ReadOptions.from_options({"path": str(tmp_path), "topic": "t"})
    [s] = plan_slices(opts, Pushdown(), _upper_bounds(opts, _partitions_of(opts)))
    with pytest.raises(CorruptMessage, match="before offset 18"):
        _offsets(s)


@pytest.mark.parametrize("option, value", [("max_partition_bytes", "0"), ("max_partition_bytes", "0k"),
                                           ("max_records_per_trigger", "0")])
def test_an_option_that_would_ask_for_nothing_is_refused(tmp_path, option, value):
    """A 0-byte input partition or a 0-record trigger is a mistake, not "no limit"."""
    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import ReadOptions

    with pytest.raises(InvalidConfig, match=option):
        ReadOptions.from_options({"path": str(tmp_path), "topic": "t", option: value})


# ---- the eighty-third review (docs/engine-audit.md, SP4-..) ----------------------------------

def test_partition_filters_prune_to_the_partitions_every_one_of_them_allows(tmp_path):
    """Two ``partition IN`` lists leave what both name, and ``partition < 2`` stops before 2:
    the plan reads only those partitions' segments (Spark filters the rows again, but a
    partition read for nothing is a wasted task per segment)."""
    from pyspark.sql.datasource import In, LessThan

    from kreplica.spark.datasource import Pushdown, ReadOptions, plan_slices

    d = str(tmp_path)
    for p in range(4):
        _log(d, f"t-{p}", batches=1).close()
    opts = ReadOptions.from_options({"path": d, "topic": "t", "isolation": "uncommitted"})

    def planned(*filters):
        pushdown = Pushdown()
        for f in filters:
            pushdown.absorb(f)
        return sorted({s.partition for s in plan_slices(opts, pushdown, dict.fromkeys(range(4)))})

    assert planned(In(("partition",), (0, 1, 2)), In(("partition",), (1, 2, 3))) == [1, 2]
    assert planned(LessThan(("partition",), 2)) == [0, 1]


def test_a_path_that_is_a_file_is_refused_as_not_a_directory(tmp_path):
    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import ReadOptions

    path = tmp_path / "server.properties"
    path.write_text("broker.id=0\n")
    with pytest.raises(InvalidConfig, match="is not a directory"):
        ReadOptions.from_options({"path": str(path), "topic": "t"})


@pytest.mark.parametrize("text, size", [("512", 512), ("3k", 3 << 10), ("2MB", 2 << 20), ("1g", 1 << 30),
                                        ("1gb", 1 << 30), (" 2t ", 2 << 40), ("3tb", 3 << 40), ("1PB", 1 << 50),
                                        ("2p", 2 << 50)])
def test_a_partition_size_takes_each_unit_as_a_power_of_1024(text, size):
    """Each of Spark's units, k to p, with or without ``b``, in any case."""
    from kreplica.spark.datasource import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("option, value", [
    ("max_partition_bytes", "4 m"), ("max_partition_bytes", "+4m"), ("max_partition_bytes", "1_000"),
    ("max_partition_bytes", "1.5g"), ("max_partition_bytes", "\u0664m"), ("max_partition_bytes", "4mib"),
    ("max_records_per_trigger", " 30"), ("max_records_per_trigger", "30\n"),
    ("max_records_per_trigger", "1_000")])
def test_a_number_option_is_read_as_the_jvm_reads_its_own(tmp_path, option, value):
    """Sizes as Spark's ``byteStringAs`` (ASCII digits, then a unit), a record limit as
    its ``maxOffsetsPerTrigger`` (``Long.parseLong``: nothing around the number):
    ``int()``'s leniencies (blanks, signs inside a size, underscores) are refused."""
    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import ReadOptions

    with pytest.raises(InvalidConfig, match=option):
        ReadOptions.from_options({"path": str(tmp_path), "topic": "t", option: value})


def test_a_small_read_limit_moves_the_partition_that_has_a_backlog():
    """The rounding remainder goes to partitions with offsets left to read: with partition 0
    caught up, a budget of 1 moves partition 1 by one (not the stream by none), and a budget
    of 3 is spent whole (2 and 1), none of it on the partition with nothing to read."""
    from kreplica.spark.datasource import _cap

    begin, latest = {"0": 5, "1": 0, "2": 0}, {"0": 5, "1": 10, "2": 10}
    assert _cap(begin, latest, 1) == {"0": 5, "1": 1, "2": 0}
    assert _cap(begin, latest, 3) == {"0": 5, "1": 2, "2": 1}


def _ticking(tmp_path, batches: int = 6) -> str:
    """A closed log of ``batches`` batches of 3 records, the clock a second on per batch (so
    the time index has an entry per batch): its one segment's path."""
    log = Log.open(os.path.join(str(tmp_path), "t-0"), {"index.interval.bytes": 1}, clock=(clock := ManualClock(T0)))
    for b in range(batches):
        log.append_as_leader([(b"k", b"v%d" % b)] * 3)
        clock.advance(1000)
    log.close()
    return os.path.join(str(tmp_path), "t-0", "00000000000000000000.log")


def test_time_pruning_trusts_a_trimmed_time_index_only_while_every_offset_index_entry_checks_out(tmp_path):
    """A closed segment's trimmed indexes prune by time; once its data ends before the
    batches its offset index names (lost past the last fsync), the time index beside it
    names records that are not there either and must not prune."""
    path = _ticking(tmp_path)
    [part] = list_partitions(str(tmp_path), "t")
    [seg] = part.segments

    def planned_lo():
        [s] = seg.slices(OffsetBounds(0, None, None), T0 + 3500, None, topic="t", partition=0, on_corrupt="fail",
                         corrupt_report=None)
        return s.offset_lo

    assert len(seg.time_index()[0]) == 5 and planned_lo() == 12  # records 0..11 are before T0+3500
    from kreplica.records import scan_batches

    with open(path, "rb") as f:
        scan = scan_batches(f.read())
    os.truncate(path, int(scan.positions[3]))  # batches 3..5 gone, their index entries left
    assert seg.offset_index()[0].tolist() == [3, 6]  # the entries of batches 1 and 2 still check out
    assert len(seg.time_index()[0]) == 0 and planned_lo() == 0
    os.truncate(path, int(scan.positions[2]))  # only the first entry, batch 1's, still checks out
    assert seg.offset_index()[0].tolist() == [3]


def test_a_time_index_ending_in_a_torn_entry_is_not_taken_as_trimmed(tmp_path):
    """A trimmed index holds whole entries only; a few bytes past the last one are a write
    that did not finish, and the file, not known to be trimmed, is not used to prune."""
    path = _ticking(tmp_path)
    [part] = list_partitions(str(tmp_path), "t")
    [seg] = part.segments
    assert len(seg.time_index()[0]) == 5
    with open(os.path.splitext(path)[0] + ".timeindex", "ab") as f:
        f.write(b"\x00\x00\x01\x8b")
    assert len(seg.time_index()[0]) == 0


def test_slices_of_one_segment_that_skip_corrupt_batches_each_keep_their_report(tmp_path):
    """With ``max_partition_bytes`` one segment is read by several slices; each writes its
    own report, so the count of skipped batches is every slice's, not the last one's."""
    from kreplica.spark.datasource import skipped_batches

    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:  # CRC mismatches in batches 1 and 3 (offsets 3..5, 9..11)
        for b in (1, 3):
            f.seek(positions[b] + sizes[b] - 5)
            f.write(b"\xff\xfe")
    [part] = list_partitions(str(tmp_path), "t")
    [seg] = part.segments
    report = tmp_path / "report"
    slices = seg.slices(OffsetBounds(0, 18, 18), None, 2 * 91, topic="t", partition=0, on_corrupt="skip",
                        corrupt_report=str(report))
    assert len(slices) == 3
    assert [o for s in slices for o in _offsets(s)] == [0, 1, 2, 6, 7, 8, *range(12, 18)]
    assert skipped_batches(report) == 2 and len(list(report.glob("*.json"))) == 2


def test_a_slice_started_at_an_index_hint_skips_a_corrupt_batch_and_reads_on_once(tmp_path):
    """A slice that starts at an offset-index position (``offset >= 6``, a stream's next
    offset, a cut of ``max_partition_bytes``) checks that its first batch is the one the
    index named; a batch skipped later must not send it back to the segment's start, which
    returned offsets 6..8 twice and reported the bad batch again and a batch before the
    slice as well."""
    import json

    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:  # a CRC mismatch in batch 3 (offsets 9..11)
        f.seek(positions[3] + sizes[3] - 5)
        f.write(b"\xff\xfe")
    with open(path, "r+b") as f:  # and in batch 1 (offsets 3..5), before the slice
        f.seek(positions[1] + sizes[1] - 5)
        f.write(b"\xff\xfe")
    report = tmp_path / "report"
    s = _slice(path, start=positions[2], lo=6, need=18, start_offset=6, on_corrupt="skip",
               corrupt_report=str(report))
    assert _offsets(s) == [6, 7, 8, *range(12, 18)]
    [region] = json.loads((report / s.report_name).read_text())["regions"]
    assert (region["position"], region["resume_position"], region["offsets_read_before"], region["next_offset"]) == (
        positions[3], positions[4], 9, 12)


def test_the_rows_a_slice_reads_have_the_types_the_source_declares(tmp_path):
    """The Arrow batches a task hands Spark carry :data:`SCHEMA`'s types column by column
    (``partition`` and ``leader_epoch`` 32-bit, ``offset`` and ``timestamp`` 64-bit)."""
    import pyarrow as pa

    from kreplica.spark.datasource import SCHEMA

    arrow = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "binary": pa.binary(),
             "array<struct<key:string,value:binary>>": pa.list_(pa.struct([("key", pa.string()),
                                                                          ("value", pa.binary())]))}
    declared = [(name, arrow[kind]) for name, kind in (column.split(" ", 1) for column in SCHEMA.split(", "))]
    path, _, _ = _sealed(tmp_path)
    [batch] = list(read_slice(_slice(path, need=18)))
    assert [(f.name, f.type) for f in batch.schema] == declared and batch.num_rows == 18


# ---- the hundred-and-second review (docs/engine-audit.md, SP5-..) ----------------------------

def test_a_partition_new_to_a_stream_starts_at_its_log_start_without_a_data_loss_error(tmp_path):
    """A partition the stream's start offsets do not name (added since the query started)
    is read from its log start, even one above 0: nothing of it was skipped, so
    ``fail_on_data_loss`` has nothing to stop for."""
    from kreplica.spark.datasource import KReplicaStreamReader, ReadOptions

    d = str(tmp_path)
    _log(d, "t-0", batches=1).close()
    _log(d, "t-1", batches=3).close()
    _write(d, "log-start-offset-checkpoint", {("t", 1): 3})
    reader = KReplicaStreamReader(ReadOptions.from_options({"path": d, "topic": "t", "isolation": "uncommitted"}))
    parts = reader.partitions({"0": 0}, {"0": 3, "1": 9})
    assert [(s.value.partition, o) for s in parts for o in _offsets(s.value)] == [
        *((0, o) for o in range(3)), *((1, o) for o in range(3, 9))]


def test_a_range_starting_at_a_segments_next_base_offset_plans_nothing_in_that_segment(tmp_path):
    """Offsets 6..8 lie wholly in the second segment (base 6): the first one plans no slice,
    which would be a task reading its whole file for nothing."""
    from kreplica.spark.datasource import Pushdown, ReadOptions, plan_slices

    d = str(tmp_path)
    _log(d, "t-0", batches=3, records=3, rolls=2).close()
    [part] = list_partitions(d, "t")
    first, second = part.segments
    assert (first.next_base_offset, second.base_offset) == (6, 6)
    bounds = OffsetBounds(6, 9, 9)
    assert first.slices(bounds, None, None, topic="t", partition=0, on_corrupt="fail", corrupt_report=None) == []
    pushdown = Pushdown(offset_lo=6)
    opts = ReadOptions.from_options({"path": d, "topic": "t", "isolation": "uncommitted"})
    slices = plan_slices(opts, pushdown, {0: None})
    assert [s.log_path for s in slices] == [second.log_path]
    assert [o for s in slices for o in _offsets(s)] == list(range(6, 9))


def _recount(path, position, count):
    """Rewrite the record count of the batch at ``position`` and sign it again: its CRC
    and length hold, its records no longer match its header."""
    import struct

    from kreplica.records import crc32c

    with open(path, "r+b") as f:
        f.seek(position)
        batch = bytearray(f.read(12))
        batch += f.read(struct.unpack_from(">i", batch, 8)[0])
        struct.pack_into(">i", batch, 57, count)
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
        f.seek(position)
        f.write(batch)


@pytest.mark.parametrize("count", [2, 4, 0])
def test_a_batch_whose_crc_holds_but_whose_records_do_not_is_corruption_named_or_skipped(tmp_path, count):
    """The scanner checks CRCs and framing, not records: a batch signed over records that
    do not match its count (only a writer skipping the leader's record check makes one)
    fails the read naming the file and the batch's position, or with on_corrupt=skip is
    stepped over like any other bad batch; the batches before it are read either way."""
    import json

    path, positions, sizes = _sealed(tmp_path)
    _recount(path, positions[3], count)
    s = _slice(path, need=18)
    rows = []
    with pytest.raises(CorruptMessage) as e:
        for b in read_slice(s):
            rows += b.column("offset").to_pylist()
    assert rows == list(range(9))
    message = str(e.value)
    assert f"{path}: unreadable records in the batch at position {positions[3]} (offsets 9..11): INVALID_RECORD: " in message
    assert message.endswith(f"the batch at position {positions[3]} (partition t-0, read up to offset 8)")
    assert "position 0" not in message  # the decoder's own positions, made file positions
    report = tmp_path / "report"
    s = _slice(path, need=18, on_corrupt="skip", corrupt_report=str(report))
    assert _offsets(s) == [*range(9), *range(12, 18)]
    [region] = json.loads((report / s.report_name).read_text())["regions"]
    assert (region["position"], region["resume_position"], region["offsets_read_before"],
            region["next_offset"]) == (positions[3], positions[4], 9, 12)


# ---- the hundred-and-twenty-first review (docs/engine-audit.md, SP6-..) ----------------------


@pytest.mark.parametrize("size, cut", [(18, 8), (20, 4)], ids=["torn", "zeros"])
def test_a_slices_end_position_only_sizes_its_reads_even_once_a_refetch_put_a_batch_header_across_it(
        tmp_path, size, cut):
    """A slice ends on offsets, its end position only sizes the reads.  Planned on batches
    of 3 records (cut at 182 bytes: offsets 0..5), the segment is then fetched again
    batched otherwise (a follower truncated fully): two one-record batches, then the
    rest.  The slice's start still holds offset 0's batch, but the end position now falls
    ``cut`` bytes into the third batch's 12-byte header; a read cut there took it for a
    torn batch, or for zero fill (the first bytes of a small base offset are zeros), and
    failed the slice as corrupt, where it must read on to offset 5."""
    path, positions, sizes = _sealed(tmp_path)
    [part] = list_partitions(str(tmp_path), "t")
    first = part.segments[0].slices(OffsetBounds(0, 18, 18), None, 2 * 91, topic="t", partition=0,
                                    on_corrupt="fail", corrupt_report=None)[0]
    assert (first.start_position, first.end_position, first.offset_lo, first.offset_hi) == (0, 182, 0, 6)
    shutil.rmtree(os.path.dirname(path))
    log = Log.open(os.path.dirname(path), {"index.interval.bytes": 1}, clock=ManualClock(T0))
    for value in (b"x" * size, b"y" * size, *(b"z%d" % o for o in range(2, 18))):
        log.append_as_leader([(b"k", value)])
    log.close()
    from kreplica.records import scan_batches

    with open(path, "rb") as f:
        starts = scan_batches(f.read()).positions.tolist()
    assert starts[2] == 182 - cut  # 182 is inside the third batch's header
    assert _offsets(first) == list(range(6))

def test_each_cut_slice_reads_only_its_own_offsets_even_from_a_segment_fetched_again(tmp_path):
    """A segment cut at 182 bytes plans slices of offsets 0..5, 6..11 and 12..17, each
    bounded below by its own first batch.  A follower that truncates fully and fetches
    the same offsets again, batched otherwise, leaves every planned position but the
    first holding another batch: those slices are read from the segment's start, and
    must still return only their own offsets, not the ones the slices before them read."""
    path, positions, sizes = _sealed(tmp_path)
    [part] = list_partitions(str(tmp_path), "t")
    [seg] = part.segments
    slices = seg.slices(OffsetBounds(0, 18, 18), None, 2 * 91, topic="t", partition=0, on_corrupt="fail",
                        corrupt_report=None)
    assert [(s.offset_lo, s.offset_hi, s.start_offset) for s in slices] == [(0, 6, 0), (6, 12, 6), (12, 18, 12)]
    shutil.rmtree(os.path.dirname(path))
    _log(str(tmp_path), "t-0", batches=18, records=1, **{"index.interval.bytes": 1}).close()
    assert [_offsets(s) for s in slices] == [list(range(0, 6)), list(range(6, 12)), list(range(12, 18))]



# ---- the hundred-and-fortieth review (docs/engine-audit.md, SP7-..) --------------------------

def test_option_values_are_taken_in_any_case_and_a_limit_that_is_no_number_is_refused_by_name(tmp_path):
    """Option values are read as Spark reads its own (``isolation=UNCOMMITTED`` is
    uncommitted), and a ``max_records_per_trigger`` that is not a number is refused as
    the option's error, not as int()'s bare ValueError."""
    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import ReadOptions

    base = {"path": str(tmp_path), "topic": "t"}
    opts = ReadOptions.from_options({**base, "isolation": "Uncommitted", "on_corrupt": "SKIP",
                                     "corrupt_report": str(tmp_path / "r"), "starting_offsets": "LATEST"})
    assert (opts.isolation, opts.on_corrupt, opts.starting_offsets) == ("uncommitted", "skip", "latest")
    with pytest.raises(InvalidConfig, match="max_records_per_trigger: 'ten' is not a positive integer"):
        ReadOptions.from_options({**base, "max_records_per_trigger": "ten"})


def test_two_timestamp_lower_bounds_prune_by_the_later_one(tmp_path):
    """``timestamp >= a AND timestamp > b`` keeps only records after both: the plan starts
    after the records the later bound excludes, whichever filter came first."""
    from pyspark.sql.datasource import GreaterThan, GreaterThanOrEqual

    from kreplica.spark.datasource import Pushdown, ReadOptions, plan_slices

    _ticking(tmp_path)
    opts = ReadOptions.from_options({"path": str(tmp_path), "topic": "t", "isolation": "uncommitted"})
    early, late = GreaterThanOrEqual(("timestamp",), T0 + 500), GreaterThan(("timestamp",), T0 + 3499)
    for filters in ((early, late), (late, early)):
        pushdown = Pushdown()
        for f in filters:
            pushdown.absorb(f)
        assert pushdown.timestamp_lo == T0 + 3500
        [s] = plan_slices(opts, pushdown, {0: None})
        assert s.offset_lo == 12 and _offsets(s) == list(range(12, 18))


def test_skipped_regions_come_in_the_order_of_their_report_files_whatever_the_listing(tmp_path, monkeypatch):
    """A directory lists its files in no fixed order: the regions of several slices'
    reports come back in one order (by report file name) however the listing came."""
    import json
    import pathlib

    from kreplica.spark.datasource import skipped_regions

    report = tmp_path / "report"
    report.mkdir()
    for start in (0, 182, 364):
        region = {"file": "f.log", "position": start + 91}
        (report / f"t-0-{0:020d}-{start}.json").write_text(json.dumps({"skipped_batches": 1, "regions": [region]}))
    glob = pathlib.Path.glob
    orders = []
    for reverse in (False, True):
        monkeypatch.setattr(pathlib.Path, "glob", lambda self, pattern, reverse=reverse: iter(
            sorted(glob(self, pattern), reverse=reverse)))
        orders.append([r["position"] for r in skipped_regions(report)])
    assert orders == [[91, 273, 455]] * 2


def test_a_range_ending_at_an_indexed_batch_plans_no_slice_from_that_batch_on(tmp_path):
    """``offset < 12`` on six 91-byte batches of 3 records, an index entry each, cut at 182
    bytes: two slices (offsets 0..5 and 6..11), the second sized up to the batch of offset
    12, not a third, empty slice starting at it (a task that reads a batch for nothing)."""
    path, positions, sizes = _sealed(tmp_path)
    [part] = list_partitions(str(tmp_path), "t")
    [seg] = part.segments
    slices = seg.slices(OffsetBounds(0, 12, 18), None, 2 * 91, topic="t", partition=0, on_corrupt="fail",
                        corrupt_report=None)
    assert [(s.start_position, s.end_position, s.offset_lo, s.offset_hi) for s in slices] == [
        (0, positions[2], 0, 6), (positions[2], positions[4], 6, 12)]
    assert [o for s in slices for o in _offsets(s)] == list(range(12))


def test_a_log_end_is_never_below_the_log_start_a_checkpoint_names(tmp_path):
    """The log start checkpoint lags as the HW checkpoint does: after a follower truncated
    below its log start (and started the log again lower) the file may still name the old
    start, past the data.  The log end is then the log start, so an uncommitted stream's
    latest offset is never below the offset it starts from."""
    pytest.importorskip("pyspark")
    from kreplica.spark.datasource import KReplicaDataSource

    d = str(tmp_path)
    _log(d, "t-0", batches=1).close()  # offsets 0..2
    _write(d, "log-start-offset-checkpoint", {("t", 0): 5})
    [part] = list_partitions(d, "t")
    assert (part.log_start_offset, part.log_end_offset()) == (5, 5)
    stream = KReplicaDataSource({"path": d, "topic": "t", "isolation": "uncommitted"}).streamReader(None)
    assert stream.initialOffset() == stream.latestOffset(None, None) == {"0": 5}


def test_a_trimmed_time_index_prunes_also_where_the_offset_index_is_missing(tmp_path):
    """A segment whose ``.index`` is gone (Kafka rebuilds a missing one) cannot hold a stale
    offset-index entry, so its trimmed time index still prunes by time."""
    path = _ticking(tmp_path)
    os.remove(os.path.splitext(path)[0] + ".index")
    [part] = list_partitions(str(tmp_path), "t")
    [seg] = part.segments
    [s] = seg.slices(OffsetBounds(0, None, None), T0 + 3500, None, topic="t", partition=0, on_corrupt="fail",
                     corrupt_report=None)
    assert (s.start_position, s.offset_lo) == (0, 12) and _offsets(s) == list(range(12, 18))


def test_a_slice_whose_first_batch_is_unreadable_has_read_nothing_and_skips_only_that_batch(tmp_path):
    """A slice started at an index hint (offsets 9..17) whose first batch's CRC holds over
    records that do not match its count: the error says nothing was read yet, and with
    on_corrupt=skip only that batch goes (offsets 12..17 read), recorded as nothing read
    before it, in a report directory made with its parents."""
    import json

    path, positions, sizes = _sealed(tmp_path)
    _recount(path, positions[3], 2)
    s = _slice(path, positions[3], lo=9, hi=18, need=18, start_offset=9)
    with pytest.raises(CorruptMessage) as e:
        _offsets(s)
    assert str(e.value).endswith("(partition t-0, nothing read yet; the position comes from "
                                 "00000000000000000000.index)"), str(e.value)
    report = tmp_path / "reports" / "run-1"
    s = _slice(path, positions[3], lo=9, hi=18, need=18, start_offset=9, on_corrupt="skip",
               corrupt_report=str(report))
    assert _offsets(s) == list(range(12, 18))
    [region] = json.loads((report / s.report_name).read_text())["regions"]
    assert (region["position"], region["resume_position"], region["offsets_read_before"],
            region["next_offset"]) == (positions[3], positions[4], -1, 12)


def test_a_committed_read_fails_at_a_bad_first_batch_of_offset_0_below_the_high_watermark(tmp_path):
    """The first batch of a fresh partition (base offset 0, its first eight bytes zeros)
    is corrupt and the HW checkpoint says 6 were committed: the log does not end cleanly
    there (its length follows), so the HW is not clamped to 0 and the read fails, where a
    clamp would have read nothing and said nothing."""
    from kreplica.records import scan_batches
    from kreplica.spark.datasource import Pushdown, ReadOptions, _partitions_of, _upper_bounds, plan_slices

    d = str(tmp_path)
    _log(d, "t-0", batches=2).close()
    path = os.path.join(d, "t-0", "00000000000000000000.log")
    with open(path, "rb") as f:
        scan = scan_batches(f.read())
    with open(path, "r+b") as f:  # a CRC mismatch in the first batch (offsets 0..2)
        f.seek(int(scan.positions[0] + scan.sizes[0]) - 5)
        f.write(b"\xff\xfe")
    _write(d, "replication-offset-checkpoint", {("t", 0): 6})
    [part] = list_partitions(d, "t")
    assert part.committed_end(6) == 6
    opts = ReadOptions.from_options({"path": d, "topic": "t"})
    [s] = plan_slices(opts, Pushdown(), _upper_bounds(opts, _partitions_of(opts)))
    with pytest.raises(CorruptMessage, match="crc|CRC"):
        _offsets(s)


# ---- the hundred-and-fifty-ninth review (docs/engine-audit.md, SP8-..) -----------------------

def test_a_read_limits_remainder_goes_to_the_lowest_numbered_partition_first():
    """Offsets name partitions by their number as text; the rounding remainder of a read
    limit goes to partition 2 before partition 10 (numeric order, not "10" < "2"), whatever
    order the offsets came in, so each trigger of a stream moves the same partitions."""
    from kreplica.spark.datasource import _cap

    for begin, latest in (({"2": 0, "10": 0}, {"2": 10, "10": 10}), ({"10": 0, "2": 0}, {"10": 10, "2": 10})):
        assert _cap(begin, latest, 1) == {"2": 1, "10": 0}
        assert _cap(begin, latest, 3) == {"2": 2, "10": 1}


def test_a_report_file_still_being_written_is_not_counted(tmp_path):
    """A task writes its slice's report to ``<name>.<pid>.tmp`` and renames it over
    ``<name>.json``: only the finished files count, so a report read while a retried task
    rewrites its file counts each skipped batch once (and never reads half a file)."""
    import json

    from kreplica.spark.datasource import skipped_batches, skipped_regions

    regions = [{"file": "00000000000000000000.log", "position": 61, "reason": "crc", "batches": 1},
               {"file": "00000000000000000000.log", "position": 400, "reason": "crc", "batches": 1}]
    (tmp_path / "t-0-0-0.json").write_text(json.dumps({"skipped_batches": 2, "regions": regions}))
    (tmp_path / "t-0-0-0.4242.tmp").write_text(json.dumps({"skipped_batches": 2, "regions": regions}))
    assert skipped_batches(tmp_path) == 2
    assert skipped_regions(tmp_path) == regions


def test_a_read_of_the_empty_partition_planned_when_everything_was_pruned_yields_nothing(tmp_path):
    """When the filters prune every range, Spark still runs one task, on InputPartition(None):
    the batch and the streaming reader both yield no rows for it."""
    from pyspark.sql.datasource import InputPartition

    from kreplica.spark.datasource import KReplicaReader, KReplicaStreamReader, ReadOptions

    opts = ReadOptions.from_options({"path": str(tmp_path), "topic": "t"})
    assert list(KReplicaReader(opts).read(InputPartition(None))) == []
    assert list(KReplicaStreamReader(opts).read(InputPartition(None))) == []


# ---- the hundred-and-seventy-eighth review (docs/engine-audit.md, SP9-..) --------------------

@pytest.mark.parametrize("value, taken", [("false", False), ("FALSE", False), ("True", True), ("fal\u017fe", False),
                                          (" false", None),
                                          ("false ", None), ("\tfalse", None), ("", None), ("no", None)])
def test_fail_on_data_loss_takes_true_or_false_in_any_case_and_no_blanks_around_them(tmp_path, value, taken):
    """Spark's Kafka source reads ``failOnDataLoss`` with Scala's ``toBoolean``: true or
    false in any case, as Java's ``equalsIgnoreCase`` compares (the long s of "fal\u017fe"
    upper-cases to S), nothing else, and no blank trimmed (``" false"`` fails the query).
    The kreplica source takes the same values and refuses the rest by name."""
    import re

    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import ReadOptions

    options = {"path": str(tmp_path), "topic": "t", "fail_on_data_loss": value}
    if taken is None:
        with pytest.raises(InvalidConfig, match=re.escape(f"fail_on_data_loss: {value!r} is not true/false")):
            ReadOptions.from_options(options)
    else:
        assert ReadOptions.from_options(options).fail_on_data_loss is taken


@pytest.mark.parametrize("option", ["path", "topic"])
def test_an_empty_path_or_topic_is_refused_as_not_given(tmp_path, option):
    """``option("path", "")`` names no directory (``Path("")`` is the current one, which
    ``is_dir()`` accepts) and ``option("topic", "")`` no topic: both are refused at once,
    as if not given, not read as the current directory or planned as a topic of no name."""
    import re

    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import ReadOptions

    with pytest.raises(InvalidConfig, match=re.escape(f"needs option({option!r}, ...)")):
        ReadOptions.from_options({"path": str(tmp_path), "topic": "t", option: ""})


# ---- the hundred-and-ninety-fifth review (docs/engine-audit.md, SP10-..) ---------------------

def test_a_committed_read_stops_at_a_clean_log_end_below_the_hw_checkpoint(tmp_path):
    """A follower truncated below its HW checkpoints the lower HW later: the file says 24
    while the log ends cleanly at 18.  The read's upper bound is the log end, and all 18
    records come back without a corruption error about offsets that are not there."""
    from kreplica.spark.datasource import Pushdown, ReadOptions, _partitions_of, _upper_bounds, plan_slices

    _sealed(tmp_path)
    _write(str(tmp_path), "replication-offset-checkpoint", {("t", 0): 24})
    opts = ReadOptions.from_options({"path": str(tmp_path), "topic": "t"})
    assert _upper_bounds(opts, _partitions_of(opts)) == {0: 18}
    [s] = plan_slices(opts, Pushdown(), _upper_bounds(opts, _partitions_of(opts)))
    assert _offsets(s) == list(range(18))


def test_a_partition_a_stream_has_read_keeps_its_offset_once_its_directory_is_gone(tmp_path):
    """Deleting a topic renames ``t-1`` away between two triggers: the next end offsets keep
    partition 1 where the query's checkpoint has it, instead of failing the trigger with a
    KeyError, and a stream that skips lost data plans only what partition 0 has new."""
    from kreplica.spark.datasource import KReplicaStreamReader, ReadOptions

    d = str(tmp_path)
    for p in (0, 1):
        _log(d, f"t-{p}", batches=2).close()
    _write(d, "replication-offset-checkpoint", {("t", 0): 6, ("t", 1): 6})
    reader = KReplicaStreamReader(ReadOptions.from_options({"path": d, "topic": "t", "fail_on_data_loss": "false"}))
    start = {"0": 3, "1": 6}
    os.rename(os.path.join(d, "t-1"), os.path.join(d, f"t-1.{UID}-delete"))
    try:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
    except KeyError as e:
        pytest.fail(f"the trigger failed on the partition whose directory is gone: KeyError {e}")
    assert end == {"0": 6, "1": 6}
    assert [(p.value.partition, p.value.offset_lo, p.value.offset_hi) for p in reader.partitions(start, end)] == [
        (0, 3, 6)]


def test_a_partition_gone_under_a_stream_stops_it_unless_data_loss_is_allowed(tmp_path):
    """A partition the query has read whose directory went (its topic deleted, its replica
    moved) may have held records the query never read: by default the next trigger stops
    the query naming it, as Spark's Kafka source counts a deleted topic as data loss (it
    used to be carried at its offset and silently never read again). With
    fail_on_data_loss=false a topic gone whole is no data, not an error."""
    from kreplica.errors import UnknownTopicOrPartition
    from kreplica.spark.datasource import KReplicaStreamReader, ReadOptions

    d = str(tmp_path)
    for p in (0, 1):
        _log(d, f"t-{p}", batches=2).close()
    _write(d, "replication-offset-checkpoint", {("t", 0): 6, ("t", 1): 6})
    strict = KReplicaStreamReader(ReadOptions.from_options({"path": d, "topic": "t"}))
    lenient = KReplicaStreamReader(ReadOptions.from_options({"path": d, "topic": "t", "fail_on_data_loss": "false"}))
    start = {"0": 3, "1": 4}
    os.rename(os.path.join(d, "t-1"), os.path.join(d, f"t-1.{UID}-delete"))
    with pytest.raises(UnknownTopicOrPartition, match="t-1: gone from .*fail_on_data_loss=false"):
        strict.latestOffset(start, strict.getDefaultReadLimit())
    with pytest.raises(UnknownTopicOrPartition, match="t-1: gone from"):
        strict.partitions(start, {"0": 6, "1": 4})
    os.rename(os.path.join(d, "t-0"), os.path.join(d, f"t-0.{UID}-delete"))
    with pytest.raises(UnknownTopicOrPartition, match=": t-0, t-1: gone from"):
        strict.latestOffset(start, strict.getDefaultReadLimit())
    # The whole topic gone: nothing new, and a batch planned before it went reads nothing.
    assert lenient.latestOffset(start, lenient.getDefaultReadLimit()) == start
    assert lenient.partitions(start, {"0": 6, "1": 4}) == []


def test_a_checkpointed_hw_below_the_log_start_is_read_as_the_log_start(tmp_path):
    """A restarted broker writes HW 0 for a partition its last checkpoint never named (a
    replica that came in at the leader's log start, KIP-107, then crashed before its
    first checkpoint). Nothing below the log start is readable, so a stream starting at
    ``latest`` begins at the log start, not at 0, and the next trigger, once the HW has
    moved on, reads what was committed instead of stopping the query for records
    "deleted" below an offset it never had."""
    from kreplica.spark.datasource import KReplicaStreamReader, ReadOptions

    d = str(tmp_path)
    _log(d, "t-0", batches=3).close()
    _write(d, "log-start-offset-checkpoint", {("t", 0): 6})
    _write(d, "replication-offset-checkpoint", {("t", 0): 0})
    reader = KReplicaStreamReader(ReadOptions.from_options({"path": d, "topic": "t", "starting_offsets": "latest"}))
    start = reader.initialOffset()
    assert start == {"0": 6}
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == {"0": 6}
    _write(d, "replication-offset-checkpoint", {("t", 0): 9})
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert [(s.value.partition, o) for s in reader.partitions(start, end) for o in _offsets(s.value)] == [
        (0, o) for o in range(6, 9)]


def test_a_topic_with_no_partition_directory_is_refused_by_name_not_read_as_empty(tmp_path):
    """A misspelt topic (or the wrong data dir) is an error naming both, from the batch
    reader's plan and from a stream's first offsets, not an empty DataFrame."""
    import re

    from kreplica.errors import UnknownTopicOrPartition
    from kreplica.spark.datasource import KReplicaReader, KReplicaStreamReader, ReadOptions

    d = str(tmp_path)
    _log(d, "t-0").close()
    opts = ReadOptions.from_options({"path": d, "topic": "T"})
    message = re.escape(f"no partition directories for topic 'T' in {d}")
    with pytest.raises(UnknownTopicOrPartition, match=message):
        KReplicaReader(opts).partitions()
    with pytest.raises(UnknownTopicOrPartition, match=message):
        KReplicaStreamReader(opts).initialOffset()


def test_a_slice_that_skips_two_corrupt_batches_counts_both_in_its_one_report(tmp_path):
    """One slice (no ``max_partition_bytes``) stepping over two bad batches writes one report
    file that counts two skipped batches, one region each."""
    import json

    from kreplica.spark.datasource import skipped_batches

    path, positions, sizes = _sealed(tmp_path)
    with open(path, "r+b") as f:  # CRC mismatches in batches 1 and 3 (offsets 3..5, 9..11)
        for b in (1, 3):
            f.seek(positions[b] + sizes[b] - 5)
            f.write(b"\xff\xfe")
    report = tmp_path / "report"
    s = _slice(path, need=18, on_corrupt="skip", corrupt_report=str(report))
    assert _offsets(s) == [0, 1, 2, 6, 7, 8, *range(12, 18)]
    [written] = report.glob("*.json")
    assert [r["position"] for r in json.loads(written.read_text())["regions"]] == [positions[1], positions[3]]
    assert skipped_batches(report) == 2


def test_a_committed_read_is_not_failed_by_an_unreadable_batch_starting_at_the_high_watermark(tmp_path):
    """Past the HW is not the committed read's business: a batch starting exactly there
    whose records do not match its header (its CRC holds) is in the chunk read, but it is
    not decoded, and the 9 committed records come back without an error."""
    from kreplica.spark.datasource import Pushdown, ReadOptions, _partitions_of, _upper_bounds, plan_slices

    from kreplica.records import scan_batches

    d = str(tmp_path)
    _log(d, "t-0", batches=6).close()  # no offset-index entry: the slice's reads are not cut at the HW
    path = os.path.join(d, "t-0", "00000000000000000000.log")
    with open(path, "rb") as f:
        _recount(path, int(scan_batches(f.read()).positions[3]), 2)  # batch 3, offsets 9..11
    _write(d, "replication-offset-checkpoint", {("t", 0): 9})
    opts = ReadOptions.from_options({"path": d, "topic": "t"})
    [s] = plan_slices(opts, Pushdown(), _upper_bounds(opts, _partitions_of(opts)))
    assert (s.offset_hi, s.need_offset, s.end_position) == (9, 9, None)
    try:
        assert _offsets(s) == list(range(9))
    except CorruptMessage as e:
        pytest.fail(f"the read failed on a batch past the HW: {e}")


# ---- the two-hundred-and-sixteenth review (docs/engine-audit.md, SP11-..) ------------------------

@pytest.mark.parametrize("text", ["m", "KB", " t "])
def test_a_unit_without_a_number_is_not_a_size(text):
    """Spark's ``byteStringAs`` wants digits before the unit: a unit alone is refused as not
    a size, naming the option, not a bare ValueError from ``int('')``."""
    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import parse_size

    try:
        parse_size(text)
    except InvalidConfig as e:
        assert str(e).endswith(f"max_partition_bytes: not a size: {text!r}")
    except ValueError as e:
        pytest.fail(f"{text!r} failed as a bare ValueError: {e}")
    else:
        pytest.fail(f"{text!r} was taken as a size")


def test_a_size_is_trimmed_of_tabs_and_newlines_as_java_trims_it():
    """Spark trims a size with Java's ``trim`` before reading it, which drops tabs and line
    ends as well as blanks: a size pasted with a newline after it is that size."""
    from kreplica.errors import InvalidConfig
    from kreplica.spark.datasource import parse_size

    try:
        size = parse_size("\t4m\n")
    except InvalidConfig as e:
        pytest.fail(f"a tab and a newline around the size were refused: {e}")
    assert size == 4 << 20


def test_partitions_gone_under_a_stream_are_named_in_partition_order(tmp_path):
    """The error naming the partitions gone lists them by number (2 before 10), as every
    other listing of partitions is ordered, not as their names sort as strings."""
    from kreplica.errors import UnknownTopicOrPartition
    from kreplica.spark.datasource import KReplicaStreamReader, ReadOptions

    d = str(tmp_path)
    for p in (0, 2, 10):
        _log(d, f"t-{p}").close()
    reader = KReplicaStreamReader(ReadOptions.from_options({"path": d, "topic": "t", "isolation": "uncommitted"}))
    for p in (10, 2):
        os.rename(os.path.join(d, f"t-{p}"), os.path.join(d, f"t-{p}.{UID}-delete"))
    with pytest.raises(UnknownTopicOrPartition) as e:
        reader.latestOffset({"0": 3, "10": 3, "2": 3}, reader.getDefaultReadLimit())
    assert ": t-2, t-10: gone from " in str(e.value)



def test_a_committed_streams_end_is_never_below_a_log_start_past_the_data(tmp_path):
    """The log start checkpoint may name an offset past the data (it lags, as after a
    follower truncated below its log start), with the HW checkpoint at or past it: the
    committed end the HW clamp finds (the clean log end, 3) is below the log start (5).
    A committed stream starting at ``latest`` begins at the log start, as an uncommitted
    one does, and once the log and its HW reach 9 the next trigger reads from there
    instead of stopping the query for records "deleted" below an offset it never had."""
    from kreplica.spark.datasource import KReplicaStreamReader, ReadOptions

    d = str(tmp_path)
    _log(d, "t-0", batches=1).close()  # offsets 0..2
    _write(d, "log-start-offset-checkpoint", {("t", 0): 5})
    _write(d, "replication-offset-checkpoint", {("t", 0): 5})
    reader = KReplicaStreamReader(ReadOptions.from_options({"path": d, "topic": "t", "starting_offsets": "latest"}))
    start = reader.initialOffset()
    assert start == {"0": 5}
    log = Log.open(os.path.join(d, "t-0"), {}, clock=ManualClock(T0))
    for _ in range(2):
        log.append_as_leader([(b"k", b"v")] * 3)  # offsets 3..8
    log.close()
    _write(d, "replication-offset-checkpoint", {("t", 0): 9})
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"0": 9}
    try:
        planned = reader.partitions(start, end)
    except OffsetOutOfRange as e:
        pytest.fail(f"the stream stopped for records below where it started: {e}")
    assert [o for s in planned for o in _offsets(s.value)] == [5, 6, 7, 8]


def test_a_bad_length_reaching_exactly_the_end_of_the_data_does_not_hide_the_batches_indexed_inside_it(tmp_path):
    """A skipped batch whose length field was damaged to reach exactly the end of the file
    proves nothing there (there is nothing past it to check): the batches the offset index
    names inside the span it declares are valid, so reading resumes at the first of them
    and only the bad batch's offsets are lost, not every batch after it."""
    import json
    import struct

    from kreplica.records import scan_batches
    from kreplica.spark.datasource import Pushdown, ReadOptions, plan_slices

    d = str(tmp_path)
    _log(d, "t-0", batches=6, **{"index.interval.bytes": 1}).close()  # offsets 0..17, an entry per batch
    path = os.path.join(d, "t-0", "00000000000000000000.log")
    with open(path, "rb") as f:
        data = f.read()
    bad = int(scan_batches(data).positions[1])  # offsets 3..5
    with open(path, "r+b") as f:
        f.seek(bad + 8)
        f.write(struct.pack(">i", len(data) - bad - 12))
    _write(d, "replication-offset-checkpoint", {("t", 0): 18})
    report = str(tmp_path / "report")
    opts = ReadOptions.from_options({"path": d, "topic": "t", "on_corrupt": "skip", "corrupt_report": report})
    [s] = plan_slices(opts, Pushdown(), {0: 18})
    assert _offsets(s) == [0, 1, 2, *range(6, 18)]
    [name] = os.listdir(report)
    [region] = json.loads((tmp_path / "report" / name).read_text())["regions"]
    assert (region["position"], region["resume_position"], region["next_offset"]) == (
        bad, int(scan_batches(data).positions[2]), 6)


# ---- the two-hundred-and-thirty-fifth review (docs/engine-audit.md, SP12-..) -------------------

def test_a_partition_in_list_holding_only_nulls_prunes_every_partition(tmp_path):
    """``partition IN (NULL)`` matches no row (NULL equals nothing): the plan reads no
    partition for it, as for an IN list naming none of the topic's partitions, rather
    than taking the list for no filter and reading every partition for nothing."""
    from pyspark.sql.datasource import In

    from kreplica.spark.datasource import Pushdown, ReadOptions, plan_slices

    d = str(tmp_path)
    for p in range(3):
        _log(d, f"t-{p}", batches=1).close()
    opts = ReadOptions.from_options({"path": d, "topic": "t", "isolation": "uncommitted"})
    for values in ((None,), (None, None), (7,)):
        pushdown = Pushdown()
        pushdown.absorb(In(("partition",), values))
        assert plan_slices(opts, pushdown, dict.fromkeys(range(3))) == [], values


def test_a_committed_read_ends_at_the_base_of_an_empty_active_segment_below_the_hw_checkpoint(tmp_path):
    """A follower truncated to the start of its active segment (left empty) checkpoints its
    lower HW later: the file says 9 while the data ends, cleanly, at the segment's base 6.
    The committed end is 6 (the records of the sealed segment), not the log start."""
    from kreplica.spark.datasource import Pushdown, ReadOptions, _partitions_of, _upper_bounds, plan_slices

    d = str(tmp_path)
    _log(d, "t-0", batches=2, records=3, rolls=2).close()  # 0..5 sealed, the active segment 6 empty
    _write(d, "replication-offset-checkpoint", {("t", 0): 9})
    opts = ReadOptions.from_options({"path": d, "topic": "t"})
    [part] = _partitions_of(opts)
    assert [s.base_offset for s in part.segments] == [0, 6] and part.log_start_offset == 0
    assert _upper_bounds(opts, [part]) == {0: 6}
    assert [o for s in plan_slices(opts, Pushdown(), {0: 6}) for o in _offsets(s)] == list(range(6))
