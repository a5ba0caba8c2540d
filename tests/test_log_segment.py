import os

import numpy as np
import pytest

from kreplica import errors
from kreplica.log.log_config import LogConfig
from kreplica.log._batch_run import frame_batches
from kreplica.log.log_segment import LogSegment
from kreplica.records import decode_records, encode_batch, scan_batches

CONFIG = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": 300,
                              "segment.index.bytes": 4096})


def fill(seg, batches=20, per=10):
    for b in range(batches):
        base = seg.next_offset
        batch = encode_batch([b"v%06d" % (base + i) for i in range(per)], base_offset=base, leader_epoch=1,
                             timestamp_ms=1000 + b)
        assert seg.append_encoded(memoryview(batch), base, base + per - 1, 1000 + b) >= 0


def test_files_named_by_base_offset_and_preallocated(tmp_path):
    seg = LogSegment.create(tmp_path, 1234, CONFIG, 0)
    names = sorted(os.listdir(tmp_path))
    assert names == ["00000000000000001234.index", "00000000000000001234.log", "00000000000000001234.timeindex"]
    assert os.path.getsize(seg.log_file.path) == 64 * 1024
    assert os.path.getsize(seg.offset_index.path) == 4096
    seg.close()
    assert os.path.getsize(seg.log_file.path) == 0


def test_append_read_and_sparse_index(tmp_path):
    seg = LogSegment.create(tmp_path, 100, CONFIG, 0)
    fill(seg)
    assert seg.next_offset == 300
    entries = seg.offset_index.array()
    assert 0 < len(entries) < 20  # sparse: one per index.interval.bytes
    view, base = seg.read(155, 1, 1 << 62)
    assert base == 150 and [r.offset for r in decode_records(view)] == list(range(150, 160))
    assert seg.read(300, 1, 1 << 62) is None
    ts = seg.time_index.array()["timestamp"]
    assert (np.diff(ts) > 0).all()
    assert seg.find_offset_by_timestamp(1005) == (seg.position_of(150)[0], 150)
    seg.close()


def test_seal_trims_and_load_finds_the_end(tmp_path):
    seg = LogSegment.create(tmp_path, 0, CONFIG, 0)
    fill(seg)
    size, index_entries = seg.size, seg.offset_index.entries
    seg.close()
    assert os.path.getsize(seg.log_file.path) == size
    loaded = LogSegment.load(tmp_path, 0, CONFIG, 5_000)
    assert loaded.created_ms == 5_000
    assert (loaded.size, loaded.next_offset, loaded.offset_index.entries) == (size, 200, index_entries)
    assert loaded.max_timestamp == 1019
    assert not loaded.log_file.writable  # a sealed segment is not mapped for write
    view, base = loaded.read(42, 1 << 20, 1 << 62)
    assert base == 40 and len(view) == size - loaded.position_of(40)[0]


def test_truncate_zeroes_the_dropped_bytes(tmp_path):
    seg = LogSegment.create(tmp_path, 0, CONFIG, 0)
    fill(seg)
    old_size = seg.size
    pos, _ = seg.position_of(95)
    assert seg.truncate_to(95) == old_size - pos
    assert (seg.size, seg.next_offset) == (pos, 90)
    assert bytes(seg.log_file.map(old_size)[pos:old_size]) == bytes(old_size - pos)
    assert seg.offset_index.last_entry()[0] < 90
    fill(seg, 1)
    assert seg.next_offset == 100
    seg.close()


def test_recover_rebuilds_identical_indexes(tmp_path):
    seg = LogSegment.create(tmp_path, 0, CONFIG, 0)
    fill(seg, 40)
    seg.flush()
    index, tindex = seg.offset_index.array(), seg.time_index.array()
    seg.log_file.close()
    seg.offset_index.file.close()
    seg.time_index.file.close()
    again = LogSegment(tmp_path, 0, CONFIG, 0)
    result = again.recover()
    assert result.error is None and result.batches == 40
    assert (again.offset_index.array() == index).all()
    assert (again.time_index.array() == tindex).all()
    assert again.next_offset == 400
    again.close()


def test_follower_batches_copied_verbatim(tmp_path):
    seg = LogSegment.create(tmp_path, 0, CONFIG, 0)
    data = b"".join(encode_batch([b"x" * 100] * 5, base_offset=i * 5, leader_epoch=2) for i in range(30))
    seg.append_run(data, frame_batches(data))
    assert bytes(seg.view(0, seg.size)) == data
    assert seg.offset_index.entries > 0
    seg.close()


def test_a_crc_mismatch_found_while_copying_leaves_the_segment_unchanged(tmp_path):
    """CRCs are checked piece by piece after each piece is written: a bad batch far into
    a large append (past the first pieces) still raises with nothing appended, and the
    bytes already copied are zeros again (a crash cannot bring them back)."""
    seg = LogSegment.create(tmp_path, 0, LogConfig.from_dict({"segment.bytes": 4 << 20}), 0)
    first = encode_batch([b"a" * 100] * 10, base_offset=0)
    seg.append_run(first, frame_batches(first))
    data = bytearray(b"".join(encode_batch([b"y" * 1000] * 100, base_offset=10 + i * 100) for i in range(8)))
    data[-50] ^= 0x40  # inside the last batch's records, 700 KiB in
    index_entries = seg.offset_index.entries
    with pytest.raises(errors.CorruptMessage, match="crc mismatch"):
        seg.append_run(data, frame_batches(data))
    assert seg.size == len(first) and seg.next_offset == 10
    assert seg.offset_index.entries == index_entries
    with open(seg.log_file.path, "rb") as f:
        f.seek(len(first))
        assert f.read(len(data)) == bytes(len(data))
    data[-50] ^= 0x40
    seg.append_run(data, frame_batches(data))
    assert bytes(seg.view(len(first), seg.size)) == bytes(data) and seg.next_offset == 810
    seg.close()


def test_writes_past_the_preallocation_are_refused(tmp_path):
    seg = LogSegment.create(tmp_path, 0, CONFIG, 0)
    with pytest.raises(errors.KafkaStorageError, match="preallocated"):
        seg.log_file.write_at(64 * 1024 - 10, b"x" * 11)
    assert seg.size == 0
    seg.close()


def test_a_run_of_batches_gets_the_index_entries_one_batch_at_a_time_would(tmp_path):
    """``append_run`` plans every index entry of a fetch in one Cython call; the leader's
    one-batch path (``append_encoded``) applies the same Kafka rule entry by entry.
    Both must leave identical ``.index`` and ``.timeindex`` files."""
    stamps = [1000, 1000, 990, 1200, 1100, 1300, 1300, 1250, 1400, 1500] * 4
    batches, base = [], 0
    for i, ts in enumerate(stamps):
        per = 3 + i % 5
        batches.append((encode_batch([b"r%05d" % (base + j) for j in range(per)], base_offset=base,
                                     leader_epoch=1, timestamp_ms=ts), base, base + per - 1, ts))
        base += per
    (tmp_path / "one").mkdir()
    (tmp_path / "run").mkdir()
    one = LogSegment.create(tmp_path / "one", 0, CONFIG, 0)
    for data, first, last, ts in batches:
        one.append_encoded(memoryview(data), first, last, ts)
    run = LogSegment.create(tmp_path / "run", 0, CONFIG, 0)
    data = b"".join(b[0] for b in batches)
    half = sum(len(b[0]) for b in batches[:17])  # two fetches, the cut mid-interval
    run.append_run(data[:half], frame_batches(data[:half]))
    run.append_run(data[half:], frame_batches(data[half:]))
    assert run.offset_index.entries > 3 and run.time_index.entries > 2
    assert (run.offset_index.array() == one.offset_index.array()).all()
    assert (run.time_index.array() == one.time_index.array()).all()
    assert (run.max_timestamp, run.offset_of_max_timestamp) == (one.max_timestamp, one.offset_of_max_timestamp)
    one.close()
    run.close()


@pytest.mark.parametrize("short", [0, 1], ids=["2n", "3n-1"])
@pytest.mark.parametrize("path", ["one batch at a time", "run"])
def test_an_index_entry_goes_only_once_more_than_the_interval_was_written(tmp_path, path, short):
    """Kafka's rule, exactly: a batch gets an entry when the bytes since the last entry
    are more than ``index.interval.bytes``; having written exactly that much is not
    enough.  With batches of n bytes and an interval of 2n the entries fall on every
    third batch, on both append paths; so they do with an interval of 3n - 1, which
    three batches pass only when each counts whole, its 12-byte offset and length too
    (Kafka counts a batch's sizeInBytes)."""
    batches = [encode_batch([b"v%06d" % (4 * i + j) for j in range(4)], base_offset=4 * i, leader_epoch=1,
                            timestamp_ms=1000 + i) for i in range(12)]
    n = len(batches[0])
    assert all(len(b) == n for b in batches)
    interval = 3 * n - 1 if short else 2 * n
    config = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": interval,
                                  "segment.index.bytes": 4096})
    seg = LogSegment.create(tmp_path, 0, config, 0)
    if path == "run":
        data = b"".join(batches)
        seg.append_run(data, frame_batches(data))
    else:
        for i, b in enumerate(batches):
            seg.append_encoded(memoryview(b), 4 * i, 4 * i + 3, 1000 + i)
    index = seg.offset_index.array()
    assert index["position"].tolist() == [3 * n, 6 * n, 9 * n]
    assert index["relative_offset"].tolist() == [12, 24, 36]
    seg.close()


def test_a_read_stops_before_a_header_no_batch_within_its_limit_could_fill():
    """span_batches reads the next header only while at least an empty (61-byte) batch
    would still fit: a read that ends at its limit touches no page past it, and damage
    lying there is for a read that reaches it to report."""
    from kreplica.log._segment import span_batches

    first = encode_batch([b"x" * 50], base_offset=0)
    buf = first + b"\xff" * 100  # not a batch, not zeros
    n = len(first)
    assert span_batches(buf, 0, len(buf), n + 60, 1 << 62) == n
    with pytest.raises(errors.KafkaStorageError, match=f"damaged batch header at position {n}"):
        span_batches(buf, 0, len(buf), n + 61, 1 << 62)


@pytest.mark.parametrize("second_base", [4, 2])
def test_recovery_cuts_at_a_batch_that_starts_at_or_below_the_last_offset_before_it(tmp_path, second_base):
    """Offsets must rise strictly from batch to batch: a batch starting at the previous
    batch's last offset repeats that offset, and recovery keeps only what comes before."""
    first = encode_batch([b"a"] * 5, base_offset=0, timestamp_ms=1)
    (tmp_path / ("%020d.log" % 0)).write_bytes(first + encode_batch([b"b"] * 3, base_offset=second_base,
                                                                   timestamp_ms=2))
    seg = LogSegment(tmp_path, 0, CONFIG, 0)
    result = seg.recover()
    assert (result.error, result.batches, result.valid_bytes) == ("offsets out of order at batch 1", 1, len(first))
    assert seg.next_offset == 5
    seg.close()


def test_recovery_names_the_batch_it_cut_at_not_damage_further_on(tmp_path):
    """The reason recovery gives is for where it cut: a torn batch after the batch whose
    offsets go back was never kept either way, and is not why the segment shrank."""
    first = encode_batch([b"a"] * 5, base_offset=0, timestamp_ms=1)
    back = encode_batch([b"b"] * 3, base_offset=2, timestamp_ms=2)
    (tmp_path / ("%020d.log" % 0)).write_bytes(first + back + encode_batch([b"c"], base_offset=8)[:-1])
    seg = LogSegment(tmp_path, 0, CONFIG, 0)
    result = seg.recover()
    assert (result.error, result.batches, result.valid_bytes) == ("offsets out of order at batch 1", 1, len(first))
    seg.close()


def test_recovery_keeps_no_batch_below_the_segments_base_offset(tmp_path):
    """A segment file holds offsets from its base up: a batch below it (a file renamed or
    mixed up) is cut with everything after it."""
    data = encode_batch([b"a"] * 5, base_offset=95, timestamp_ms=1) + encode_batch([b"b"], base_offset=100)
    (tmp_path / ("%020d.log" % 100)).write_bytes(data)
    seg = LogSegment(tmp_path, 100, CONFIG, 0)
    result = seg.recover()
    assert (result.error, result.batches, result.valid_bytes) == ("offsets out of order at batch 0", 0, 0)
    assert (seg.size, seg.next_offset) == (0, 100)
    seg.close()


def test_recovery_cuts_a_batch_whose_last_offset_wraps_past_the_largest_offset(tmp_path):
    """Offsets are int64s: a batch based just below 2**63 - 1 whose lastOffsetDelta carries
    its last offset past it (the sum wraps negative) holds offsets no log can have. The
    relative bound does not see it (the wrapped last offset minus the base wraps back to a
    small number), so recovery must cut it for ending below its own base, as it does a
    batch out of order, and keep the batches before it."""
    base = 2**63 - 10
    first = encode_batch([b"a"] * 3, base_offset=base, timestamp_ms=1)
    data = first + encode_batch([b"b"] * 10, base_offset=base + 3, timestamp_ms=2)  # would end at 2**63 + 2
    (tmp_path / ("%020d.log" % base)).write_bytes(data)
    seg = LogSegment(tmp_path, base, CONFIG, 0)
    result = seg.recover()
    assert (result.error, result.batches, result.valid_bytes) == ("offsets out of order at batch 1", 1, len(first))
    assert (seg.size, seg.next_offset) == (len(first), base + 3)
    seg.close()


def test_recovery_reports_each_leader_epoch_once_where_it_first_rises(tmp_path):
    epochs = [-1, 1, 1, 3, 3, 2, 4]
    data = b"".join(encode_batch([b"v"] * 2, base_offset=2 * i, leader_epoch=e) for i, e in enumerate(epochs))
    (tmp_path / ("%020d.log" % 0)).write_bytes(data)
    seg = LogSegment(tmp_path, 0, CONFIG, 0)
    result = seg.recover()
    assert result.error is None and result.batches == 7
    assert result.epoch_starts == ((1, 2), (3, 6), (4, 12))
    seg.close()


def test_a_load_keeps_the_first_batch_with_the_max_timestamp_as_appending_did(tmp_path):
    """Kafka's offsetOfMaxTimestamp is the first batch to reach the max: a later batch
    with the same timestamp does not move it, on append or on a load's header walk."""
    config = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": 1 << 20})
    seg = LogSegment.create(tmp_path, 0, config, 0)
    for i, ts in enumerate([1000, 1500, 1200, 1500]):
        batch = encode_batch([b"a", b"b"], base_offset=2 * i, timestamp_ms=ts)
        seg.append_encoded(memoryview(batch), 2 * i, 2 * i + 1, ts)
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (1500, 3)
    seg.close()
    loaded = LogSegment.load(tmp_path, 0, config, 0)
    assert loaded.offset_index.entries == 0  # the walk covers every batch
    assert (loaded.max_timestamp, loaded.offset_of_max_timestamp) == (1500, 3)
    loaded.close()


def test_a_truncation_walks_each_batchs_max_timestamp_not_its_first_records(tmp_path):
    """A batch's records need not be in time order: the walk after a truncation must take
    each batch's maxTimestamp (byte 35), not its baseTimestamp (byte 27, the first
    record's), for the segment's max timestamp, as the append did."""
    config = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": 1 << 20})
    seg = LogSegment.create(tmp_path, 0, config, 0)
    for base, stamps in ((0, (1000, 3000, 2000)), (3, (2500, 2600)), (5, (4000,))):
        batch = encode_batch([(None, b"v", None, ts) for ts in stamps], base_offset=base)
        seg.append_encoded(memoryview(batch), base, base + len(stamps) - 1, max(stamps))
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (4000, 5)
    seg.truncate_to(5)
    assert seg.time_index.entries == 0  # the walk alone finds the max
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (3000, 2)
    seg.close()


def test_recovery_cuts_at_a_batch_whose_last_offset_is_too_far_past_the_segments_base(tmp_path):
    """An index entry holds an offset relative to the segment's base in 4 bytes: a batch
    ending more than that past the base (a narrow batch after a wide gap) is cut, however
    few offsets the batch itself spans."""
    first = encode_batch([b"a"] * 5, base_offset=0, timestamp_ms=1)
    data = first + encode_batch([b"b"] * 2, base_offset=2**32 - 1, timestamp_ms=2)  # ends at 2**32
    (tmp_path / ("%020d.log" % 0)).write_bytes(data)
    seg = LogSegment(tmp_path, 0, CONFIG, 0)
    result = seg.recover()
    assert (result.error, result.batches, result.valid_bytes) == ("offsets out of order at batch 1", 1, len(first))
    assert seg.next_offset == 5
    seg.close()


def test_recovery_keeps_a_batch_ending_exactly_the_widest_relative_offset_past_the_base(tmp_path):
    """The 4-byte bound is inclusive: a batch whose last offset is 2**32 - 1 past the
    segment's base still fits an index entry, and recovery keeps it (OffsetIndex.append
    and put_entries take the same 2**32 - 1)."""
    data = encode_batch([b"a"] * 5, base_offset=0, timestamp_ms=1) + encode_batch(
        [b"b"] * 2, base_offset=2**32 - 2, timestamp_ms=2)  # ends at 2**32 - 1
    (tmp_path / ("%020d.log" % 0)).write_bytes(data)
    seg = LogSegment(tmp_path, 0, CONFIG, 0)
    result = seg.recover()
    assert (result.error, result.batches, result.valid_bytes) == (None, 2, len(data))
    assert seg.next_offset == 2**32
    seg.close()


def _batches_past_two_pieces():
    """Batches of about 600 KiB in all: the checked copy writes them in three pieces."""
    data = bytearray(b"".join(encode_batch([b"w" * 1000] * 50, base_offset=50 * i) for i in range(12)))
    return data, frame_batches(data)


def test_a_crc_mismatch_names_the_bad_batch_and_both_crcs(tmp_path):
    """The copy's report names the batch that failed (not the first one, not the one
    before) with the CRC it carries and the one its bytes give."""
    from kreplica.records import crc32c

    data, run = _batches_past_two_pieces()
    scan = scan_batches(bytes(data))
    pos, size = int(scan.positions[7]), int(scan.sizes[7])
    stored = int.from_bytes(data[pos + 17:pos + 21], "big")
    data[pos + size - 30] ^= 0x01
    computed = crc32c(bytes(data[pos + 21:pos + size]))
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(errors.CorruptMessage) as info:
            run.write_to(fd, data, 100)
        assert not any(os.pread(fd, len(data) + 100, 0))
    finally:
        os.close(fd)
    assert str(info.value) == f"CORRUPT_MESSAGE: crc mismatch at position {pos}: stored 0x{stored:08x}, computed 0x{computed:08x}"


def test_a_short_write_is_continued_and_an_io_error_leaves_no_written_byte(tmp_path):
    """A file size limit inside the last piece makes its pwrite short and the next one
    fail (EFBIG): the copy must carry on after the short write (not count the piece as
    written, nor write the rest over its start), report the error, and zero again every
    byte it wrote."""
    import errno
    import resource

    data, run = _batches_past_two_pieces()
    start = 3 * 4096 + 100
    limit = start + len(data) - 1000
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))  # Python ignores SIGXFSZ
    try:
        with pytest.raises(OSError) as info:
            run.write_to(fd, data, start)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    try:
        assert info.value.errno == errno.EFBIG
        assert os.fstat(fd).st_size == limit
        assert os.pread(fd, limit, 0) == bytes(limit)
    finally:
        os.close(fd)


def test_a_truncation_keeps_the_max_timestamp_at_the_last_offset_of_its_batch(tmp_path):
    """After a truncation the tail is walked again for the max timestamp: its offset is the
    last offset of the batch that holds it (as appending recorded it), not the batch's base,
    and the time-index entry written at seal says so too."""
    config = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": 1 << 20})
    seg = LogSegment.create(tmp_path, 0, config, 0)
    for i, ts in enumerate([1000, 1500, 1200, 1700]):
        batch = encode_batch([b"a", b"b", b"c"], base_offset=3 * i, timestamp_ms=ts)
        seg.append_encoded(memoryview(batch), 3 * i, 3 * i + 2, ts)
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (1700, 11)
    seg.truncate_to(9)
    assert seg.time_index.entries == 0  # the walk alone finds the max
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (1500, 5)
    seg.close()
    loaded = LogSegment.load(tmp_path, 0, config, 0)
    assert loaded.time_index.last_entry() == (1500, 5)
    assert (loaded.max_timestamp, loaded.offset_of_max_timestamp) == (1500, 5)
    loaded.close()


def test_a_truncation_past_a_segments_last_batch_cuts_nothing_and_keeps_its_indexes(tmp_path):
    """A follower's truncation can land in the gap between a segment's last batch and the
    next segment's base: nothing of the segment holds the offset, so the header walk says
    "no batch" (base -1) and the segment keeps its batches and every index entry.  Taken
    for its last batch, the cut dropped that batch's index entries."""
    config = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": 1})  # an entry a batch
    seg = LogSegment.create(tmp_path, 100, config, 0)
    fill(seg)
    end, size = seg.next_offset, seg.size
    offsets, times = seg.offset_index.entries, seg.time_index.entries
    assert offsets and times
    assert seg.position_of(end) == (size, -1)
    assert seg.position_of(end + 1000) == (size, -1)
    assert seg.truncate_to(end + 1000) == 0
    assert (seg.next_offset, seg.size) == (end, size)
    assert (seg.offset_index.entries, seg.time_index.entries) == (offsets, times)
    seg.close()


def test_a_truncation_zeroes_every_byte_it_dropped(tmp_path):
    """With no reader's view on the file, a truncation zeroes the dropped bytes in place, to
    the last one: bytes left behind the new end are found again by a crash's recovery
    scan (not zeros within a header's reach of the data's end: damage) and by later
    appends that stop short of them."""
    from kreplica.log._segment import zero_range

    buf = bytearray(b"\xff" * 10)
    zero_range(buf, 2, 8)
    assert buf == b"\xff\xff" + bytes(6) + b"\xff\xff"
    seg = LogSegment.create(tmp_path, 0, CONFIG, 0)
    fill(seg)
    old_size = seg.size
    pos, _ = seg.position_of(55)
    assert seg.truncate_to(55) == old_size - pos
    seg.flush()
    data = seg.log_file.path.read_bytes()
    assert any(data[:pos]) and data[pos:old_size] == bytes(old_size - pos)
    seg.close()


def test_a_segment_truncated_to_its_first_batch_has_no_max_timestamp(tmp_path):
    """The header walk over no batch reports timestamps of -1, so a segment cut back to
    its base holds no max timestamp (-1 at its base offset), and the next batch -- even
    one stamped 0 -- is the one its time index names.  Had the empty walk said 0, the
    segment would name offset -1 and its seal would fail to write that entry."""
    from kreplica.log._segment import walk_to_end

    assert walk_to_end(bytearray(64), 0, 0) == (0, -1, -1, -1)
    config = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": 1 << 20})
    seg = LogSegment.create(tmp_path, 100, config, 0)
    fill(seg, batches=3)
    assert seg.truncate_to(100) > 0
    assert (seg.next_offset, seg.size, seg.max_timestamp, seg.offset_of_max_timestamp) == (100, 0, -1, 100)
    batch = encode_batch([b"a"], base_offset=100, timestamp_ms=0)
    seg.append_encoded(memoryview(batch), 100, 100, 0)
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (0, 100)
    seg.close()
    loaded = LogSegment.load(tmp_path, 100, config, 0)
    assert loaded.time_index.last_entry() == (0, 100)
    loaded.close()


def test_a_timestamp_lookup_that_meets_a_damaged_header_fails_rather_than_find_nothing(tmp_path):
    """ListOffsets by timestamp walks batch headers from where the time index points: a
    damaged header on that walk is damage (KafkaStorageError naming the file), as it is
    for reads and truncations.  Taken for the end of the data, the lookup answered "no
    record that new" for a segment whose later batches hold one.  A walk that runs off
    the end of sound data finds no batch: base and last offset -1."""
    from kreplica.log._segment import find_timestamp

    batches = [encode_batch([b"a", b"b"], base_offset=2 * i, timestamp_ms=1000 + i) for i in range(3)]
    data = b"".join(batches)
    assert find_timestamp(data, 0, len(data), 1001) == (len(batches[0]), 2, 3)
    assert find_timestamp(data, 0, len(data), 1003) == (len(data), -1, -1)
    config = LogConfig.from_dict({"segment.bytes": 64 * 1024, "index.interval.bytes": 1 << 20})
    seg = LogSegment.create(tmp_path, 0, config, 0)
    for i, batch in enumerate(batches):
        seg.append_encoded(memoryview(batch), 2 * i, 2 * i + 1, 1000 + i)
    with open(seg.log_file.path, "r+b") as f:
        f.seek(len(batches[0]) + 8)  # batch 1's length
        f.write(b"\xff" * 4)
    assert seg.find_offset_by_timestamp(1000) == (0, 0)  # the batch before the damage
    with pytest.raises(errors.KafkaStorageError,
                       match=f"00000000000000000000.log: damaged batch header at position {len(batches[0])}"):
        seg.find_offset_by_timestamp(1002)
    seg.close()


def test_a_timestamp_lookup_steps_over_a_batch_with_no_timestamp():
    """A batch whose records carry no timestamp has maxTimestamp -1 (NO_TIMESTAMP), older
    than any time asked for: the walk compares it as the signed number it is and goes on
    to the first batch whose max timestamp is new enough."""
    from kreplica.log._segment import find_timestamp

    batches = [encode_batch([b"a", b"b"], base_offset=0), encode_batch([b"c"], base_offset=2, timestamp_ms=50),
               encode_batch([b"d"], base_offset=3)]
    data = b"".join(batches)
    assert find_timestamp(data, 0, len(data), 0) == (len(batches[0]), 2, 2)
    assert find_timestamp(data, 0, len(data), 50) == (len(batches[0]), 2, 2)
    assert find_timestamp(data, 0, len(data), 51) == (len(data), -1, -1)


def test_a_run_of_no_batches_reports_no_offsets_timestamps_or_epochs():
    """A walk that finds no batch (an empty buffer, or zero fill from its first byte, as
    a preallocated segment that never got a batch is recovered) reports -1 for its
    base and last offset, its max timestamp and its leader epoch, never 0: 0 is a real
    offset, timestamp and epoch; its largest batch is 0 bytes, as its size is.  (Today's
    callers look only when count > 0.)"""
    for buf in (b"", bytes(200)):
        run = frame_batches(buf, check_crc=True)
        assert (run.count, run.nbytes, run.error, run.max_batch_bytes) == (0, 0, None, 0)
        assert (run.base_offset, run.last_offset, run.max_timestamp, run.max_leader_epoch) == (-1, -1, -1, -1)
        assert run.first_gap() == -1 and run.epoch_starts(-1) == [] and run.rebase(7) == 6


def test_a_header_of_zeros_ends_the_data_whatever_lies_after_it():
    """Zero fill is judged on one header's 61 bytes, by recovery's scan (C) and by the
    segment's header walk alike: what lies past them (a page a crash wrote out of order,
    old bytes in a preallocated tail) is not looked at.  Judged on everything to the end,
    the walk would raise damage and the scan report another magic for a segment whose
    batches are all sound, and each would read the whole preallocated tail."""
    from kreplica.log._segment import walk_to_end

    batch = encode_batch([b"a"] * 3, base_offset=0, timestamp_ms=5)
    data = batch + bytes(61) + b"\xff" * 100
    run = frame_batches(data, check_crc=True)
    assert (run.count, run.nbytes, run.error) == (1, len(batch), None)
    assert walk_to_end(data, 0, len(data)) == (len(batch), 2, 5, 2)


def test_batch_offsets_names_only_the_batches_the_run_holds():
    """batch_offsets reads the run's C columns, which have room for more batches than the
    run holds: an index past the last batch (or negative) is an IndexError, not a read of
    a slot no batch filled."""
    data = encode_batch([b"a"] * 3, base_offset=10) + encode_batch([b"b"] * 2, base_offset=13)
    run = frame_batches(data)
    assert [run.batch_offsets(i) for i in range(run.count)] == [(10, 12), (13, 14)]
    for i in (run.count, -1):
        with pytest.raises(IndexError):
            run.batch_offsets(i)


def test_stamp_create_time_rewrites_and_counts_only_the_batches_whose_header_is_wrong():
    """A producer run's max timestamps are its records' own; stamp_create_time gives them
    to the batches whose header says otherwise and answers how many it changed, not how
    many it looked at."""
    import struct

    from kreplica.log._batch_run import frame_producer_append
    from kreplica.records import crc32c

    honest = encode_batch([(None, b"a", None, 100), (None, b"b", None, 200)])
    right = encode_batch([(None, b"c", None, 300)])
    wrong = bytearray(right)
    struct.pack_into(">q", wrong, 35, 0)
    struct.pack_into(">I", wrong, 17, crc32c(bytes(wrong[21:])))
    data = bytearray(honest + bytes(wrong))
    run = frame_producer_append(bytes(data))
    assert run.stamp_create_time(data) == 1
    assert bytes(data) == honest + right
    assert run.stamp_create_time(data) == 0  # nothing is left to change


def test_stamp_create_time_writes_only_into_a_writable_buffer_holding_the_whole_run():
    """stamp_create_time writes in place without bounds checks: a read-only buffer (an
    immutable bytes object) is refused, as is a buffer shorter than the bytes framed
    (here a view one byte short of a larger array, so a write or a CRC read past the
    view would land on bytes the test owns), and neither is touched."""
    import struct

    from kreplica.log._batch_run import frame_producer_append
    from kreplica.records import crc32c

    wrong = bytearray(encode_batch([(None, b"a", None, 100), (None, b"b", None, 200)]))
    struct.pack_into(">q", wrong, 35, 0)
    struct.pack_into(">I", wrong, 17, crc32c(bytes(wrong[21:])))
    data = encode_batch([(None, b"c", None, 300)]) + bytes(wrong)
    run = frame_producer_append(data)
    with pytest.raises(BufferError):
        run.stamp_create_time(data)
    assert data == encode_batch([(None, b"c", None, 300)]) + bytes(wrong)
    backing = bytearray(data)
    with pytest.raises(ValueError, match=f"{len(data) - 1} bytes given, {len(data)} were framed"):
        run.stamp_create_time(memoryview(backing)[:len(data) - 1])
    assert backing == data



def test_stamp_create_time_takes_a_buffer_running_past_the_run_and_leaves_the_rest_alone():
    """Only a buffer shorter than the bytes framed is refused: one that holds the whole
    run and more (the run's copies followed by a mapping's zero fill, say) gets the run's
    batches rewritten as they were framed, and not a byte past the run is touched."""
    import struct

    from kreplica.log._batch_run import frame_producer_append
    from kreplica.records import crc32c

    right = encode_batch([(None, b"a", None, 100), (None, b"b", None, 200)])
    wrong = bytearray(right)
    struct.pack_into(">q", wrong, 35, 0)
    struct.pack_into(">I", wrong, 17, crc32c(bytes(wrong[21:])))
    run = frame_producer_append(bytes(wrong))
    tail = bytes(range(1, 40))
    backing = bytearray(bytes(wrong) + tail)
    assert run.stamp_create_time(backing) == 1
    assert bytes(backing) == right + tail
    assert run.stamp_create_time(memoryview(backing)) == 0

def test_index_entries_refuse_a_position_wider_than_four_bytes():
    """An offset-index entry holds the batch's file position in 4 bytes: a position past
    2**32 - 1 is refused (KafkaStorageError), not written cut to its low 4 bytes."""
    run = frame_batches(encode_batch([b"a"], base_offset=5))
    offsets, times, *_ = run.index_entries(2**32 - 1, 0, 0, 1, -1, -1, -1, -1, -1)
    assert bytes(offsets) == (5).to_bytes(4, "big") + (2**32 - 1).to_bytes(4, "big")
    with pytest.raises(errors.KafkaStorageError, match="does not follow"):
        run.index_entries(2**32, 0, 0, 1, -1, -1, -1, -1, -1)


def _index_entries(base_offset, n=1, **kw):
    """index_entries over one batch of ``n`` records at ``base_offset`` (time 1000), written
    at file position 0 of a segment based at 5, an entry due; keywords override."""
    run = frame_batches(encode_batch([b"a"] * n, base_offset=base_offset, timestamp_ms=1000))
    args = dict(file_pos=0, segment_base=5, interval=0, bytes_since=1, max_ts=-1, offset_of_max_ts=-1,
                last_indexed_offset=-1, last_time_ts=-1, last_time_offset=-1)
    args.update(kw)
    return run.index_entries(*args.values())


def test_index_entries_refuse_a_relative_offset_wider_than_four_bytes():
    """Both indexes hold an offset relative to the segment's base in 4 unsigned bytes: an
    entry 2**32 - 1 past the base is written, one past that refused (KafkaStorageError),
    not written cut to its low 4 bytes (which would read as the base itself)."""
    offsets, times, *_ = _index_entries(5 + 2**32 - 1)
    assert bytes(offsets) == (2**32 - 1).to_bytes(4, "big") + bytes(4)
    assert bytes(times) == (1000).to_bytes(8, "big") + (2**32 - 1).to_bytes(4, "big")
    with pytest.raises(errors.KafkaStorageError, match="does not follow"):
        _index_entries(5 + 2**32)
    # the offset entry fits, but the time entry's offset (the batch's last) does not
    with pytest.raises(errors.KafkaStorageError, match="outside the segment"):
        _index_entries(5 + 2**32 - 1, n=2)


@pytest.mark.parametrize("base", [0, 5])
def test_index_entries_follow_the_last_entry_even_at_the_segments_base(base):
    """The last indexed offset may be the segment's base itself (relative offset 0), offset
    0 of the first segment included: the next entry must still lie above it, as Kafka's
    OffsetIndex.append demands (only -1 means no entry yet)."""
    offsets, *_ = _index_entries(base + 1, segment_base=base, last_indexed_offset=base)
    assert bytes(offsets) == (1).to_bytes(4, "big") + bytes(4)
    with pytest.raises(errors.KafkaStorageError, match="does not follow relative offset 0"):
        _index_entries(base, segment_base=base, last_indexed_offset=base)


def test_a_time_entry_may_repeat_the_last_entrys_offset_with_a_later_timestamp():
    """Kafka's TimeIndex.maybeAppend refuses an offset below the last entry's and appends
    whenever the timestamp grew: the running max moving on at the same offset gets an
    entry, though this batch's own timestamp is older."""
    _, times, *_ = _index_entries(8, max_ts=2000, offset_of_max_ts=7, last_indexed_offset=6,
                                  last_time_ts=1500, last_time_offset=7)
    assert bytes(times) == (2000).to_bytes(8, "big") + (2).to_bytes(4, "big")


def test_a_time_entry_for_an_offset_below_the_segments_base_is_refused_not_written_cut():
    """A time entry's offset is relative to the segment's base in 4 unsigned bytes: a
    running max timestamp carried in at an offset below the base (one that belongs to an
    earlier segment) is refused (KafkaStorageError), not written as the low 4 bytes of a
    negative relative offset (an entry pointing near 2**32); at the base it is written."""
    with pytest.raises(errors.KafkaStorageError, match="time index entry for offset 3 is outside the segment at 5"):
        _index_entries(8, max_ts=2000, offset_of_max_ts=3, last_indexed_offset=6)
    _, times, *_ = _index_entries(8, max_ts=2000, offset_of_max_ts=5, last_indexed_offset=6)
    assert bytes(times) == (2000).to_bytes(8, "big") + bytes(4)


@pytest.mark.parametrize("second_base", [8, 7])
def test_index_entries_within_one_run_must_each_follow_the_entry_just_made(second_base):
    """Each offset-index entry of a run must lie above the one made before it in the same
    call, not only above the index's last entry before the call (Kafka's OffsetIndex.append
    checks every append): a second batch repeating or going below the first's offset is
    refused (KafkaStorageError), not indexed twice. Rising batches get an entry each."""
    ok = frame_batches(encode_batch([b"a"], base_offset=8) + encode_batch([b"b"], base_offset=9))
    offsets, *_ = ok.index_entries(0, 5, 0, 1, -1, -1, -1, -1, -1)
    assert bytes(offsets)[0:4] == (3).to_bytes(4, "big") and bytes(offsets)[8:12] == (4).to_bytes(4, "big")
    run = frame_batches(encode_batch([b"a"], base_offset=8) + encode_batch([b"b"], base_offset=second_base))
    assert run.count == 2
    with pytest.raises(errors.KafkaStorageError, match="does not follow relative offset 3"):
        run.index_entries(0, 5, 0, 1, -1, -1, -1, -1, -1)


def test_write_to_takes_exactly_the_framed_bytes_not_the_zero_fill_the_walk_stopped_at(tmp_path):
    """A run framed from batches followed by zero fill (a recovery's walk, a preallocated
    tail) holds the batches' bytes only: write_to takes exactly those and refuses the
    buffer the walk was given, zeros included."""
    batch = encode_batch([b"a", b"b"], timestamp_ms=1)
    run = frame_batches(batch + bytes(61))
    assert (run.count, run.nbytes, run.given) == (1, len(batch), len(batch) + 61)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(ValueError, match=f"{len(batch) + 61} bytes given, {len(batch)} were framed"):
            run.write_to(fd, batch + bytes(61), 0)
        assert os.fstat(fd).st_size == 0
        run.write_to(fd, batch, 0)
        assert os.pread(fd, len(batch) + 1, 0) == batch
    finally:
        os.close(fd)


def test_zeroing_an_abandoned_copy_does_not_grow_the_file_past_what_was_copied(tmp_path):
    """After a CRC mismatch the copy zeros what it wrote and nothing more: the file ends
    at or before the end of the data it was given.  A file size limit well past that end
    keeps a runaway zeroing short (it stops at EFBIG) so the test fails instead of
    filling the disk."""
    import resource

    data, run = _batches_past_two_pieces()
    scan = scan_batches(bytes(data))
    pos, size = int(scan.positions[7]), int(scan.sizes[7])
    data[pos + size - 30] ^= 0x01
    start = 4096 + 100
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (start + len(data) + (4 << 20), hard))  # Python ignores SIGXFSZ
    try:
        with pytest.raises(errors.CorruptMessage, match=f"crc mismatch at position {pos}:"):
            run.write_to(fd, data, start)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    try:
        assert pos + size + start <= os.fstat(fd).st_size <= start + len(data)
        assert not any(os.pread(fd, len(data) + start, 0))
    finally:
        os.close(fd)


def test_closing_a_sealed_segment_lets_go_of_the_maps_its_reads_made(tmp_path):
    # A sealed segment is mapped read-only when read (the .log, and each index a lookup
    # goes through; CPython's mmap keeps a descriptor each): close lets go of them all.
    from fd_count import fds_under

    seg = LogSegment.create(tmp_path, 100, CONFIG, 0)
    fill(seg)
    seg.close()
    seg = LogSegment.load(tmp_path, 100, CONFIG, 0)
    assert seg.offset_index.entries and seg.time_index.entries
    assert seg.read(155, 1, 1 << 62)[1] == 150  # through the offset index
    assert seg.find_offset_by_timestamp(1005)[1] == 150  # through the time index
    assert fds_under(tmp_path) == 3
    seg.close()
    assert fds_under(tmp_path) == 0
