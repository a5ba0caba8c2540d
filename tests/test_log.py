import mmap
import os
import shutil
import tempfile

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from fd_count import fds_under
from kreplica import errors
from kreplica.log import Log, LogConfig
from kreplica.records import decode_batches, decode_records, encode_batch, scan_batches
from kreplica.runtime import ManualClock

SMALL = {"segment.bytes": 16 * 1024, "index.interval.bytes": 512}


def values(n, start=0, size=50):
    return [b"%08d" % i + b"v" * (size - 8) for i in range(start, start + n)]


def all_records(log, start=None):
    out, offset = [], log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        recs = decode_records(data.view)
        out += [r for r in recs if r.offset >= offset]
        offset = recs[-1].offset + 1
    return out


@pytest.fixture
def clock():
    return ManualClock(1_000_000)


@pytest.fixture
def log(tmp_path, clock):
    lg = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    yield lg
    lg.close()


def test_append_assigns_offsets_and_reads_back(log):
    a = log.append_as_leader(values(10), leader_epoch=3)
    b = log.append_as_leader([(b"k", b"v"), (None, b"w")], leader_epoch=3)
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 9, 10, 11)
    assert log.log_end_offset == 12
    recs = all_records(log)
    assert [r.offset for r in recs] == list(range(12))
    assert recs[10].key == b"k" and recs[11].key is None and recs[11].value == b"w"
    assert recs[0].timestamp == 1_000_000  # the injected clock
    batch = next(decode_batches(log.read(10).view))
    assert batch.leader_epoch == 3 and batch.base_offset == 10 and batch.valid()


def test_read_is_a_zero_copy_view_of_the_segment_map(log):
    log.append_as_leader(values(5))
    data = log.read(0)
    assert isinstance(data.view, memoryview) and isinstance(data.view.obj, mmap.mmap)
    assert data.first_offset == 0 and len(data) == scan_batches(data.view).valid_bytes
    assert data.view.readonly  # a reader cannot scribble on the log


def test_read_returns_whole_batches_at_least_one(log):
    for i in range(5):
        log.append_as_leader(values(10, 10 * i))
    one = log.read(13, max_bytes=1)  # smaller than a batch: still the whole batch holding 13
    assert one.first_offset == 10 and scan_batches(one.view).count == 1
    two = log.read(13, max_bytes=2 * len(one))
    assert scan_batches(two.view).count == 2
    bounded = log.read(0, 1 << 20, max_offset=20)  # e.g. a consumer limited to the HW
    assert scan_batches(bounded.view).last_offsets.tolist() == [9, 19]
    below = log.read(0, 1 << 20, max_offset=19)  # the batch holding offset 19 itself is left out
    assert scan_batches(below.view).last_offsets.tolist() == [9]
    assert len(log.read(50)) == 0 and log.read(50).first_offset == 50


@pytest.mark.parametrize("offset", [-1, 6, 10**9])
def test_read_outside_the_log_is_offset_out_of_range(log, offset):
    log.append_as_leader(values(5))
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(offset)


def test_rolls_on_size_and_reads_across_segments(log):
    for i in range(100):
        log.append_as_leader(values(10, 10 * i))
    assert len(log.segments) >= 4
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert all(s.size <= 16 * 1024 for s in log.segments)
    assert [r.value[:8] for r in all_records(log)] == [b"%08d" % i for i in range(1000)]
    sealed = log.segments[0]
    assert os.path.getsize(sealed.log_file.path) == sealed.size  # trimmed on roll
    assert os.path.getsize(log.segments[-1].log_file.path) == 16 * 1024  # active: preallocated


def test_a_batch_that_exactly_fills_a_segment_goes_in_it(tmp_path, clock):
    """A segment rolls when an append would pass ``segment.bytes`` (Kafka's
    ``size > maxSegmentBytes - messagesSize``), not when it would reach it."""
    probe = Log.open(tmp_path / "probe", SMALL, clock=clock)
    n = probe.append_as_leader(values(10), timestamp_ms=1000).valid_bytes
    probe.close()
    log = Log.open(tmp_path / "t-0", {**SMALL, "segment.bytes": 24 * n}, clock=clock)
    for i in range(24):
        assert log.append_as_leader(values(10, 10 * i), timestamp_ms=1000).valid_bytes == n
    assert [s.base_offset for s in log.segments] == [0] and log.segments[0].size == 24 * n
    log.append_as_leader(values(10, 240), timestamp_ms=1000)
    assert [s.base_offset for s in log.segments] == [0, 240]
    log.close()


def test_rolling_an_empty_active_segment_replaces_it(tmp_path, clock):
    """``roll`` on a segment holding nothing (a new log, one just restarted at an offset)
    recreates it at the same base: a second segment would share its files."""
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    log.roll()
    assert [s.base_offset for s in log.segments] == [0]
    log.truncate_fully_and_start_at(70)
    log.roll()
    assert [s.base_offset for s in log.segments] == [70]
    log.append_as_leader(values(3, 70))
    log.roll()
    assert [s.base_offset for s in log.segments] == [70, 73]
    log.close()
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    assert [r.offset for r in all_records(log)] == [70, 71, 72]
    log.close()


def test_rolls_on_segment_ms(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", {"segment.ms": 1000}, clock=clock)
    log.append_as_leader(values(1))
    clock.advance(999)
    log.append_as_leader(values(1))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append_as_leader(values(1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_an_empty_segment_past_segment_ms_takes_the_next_append_and_keeps_its_age(tmp_path, clock):
    # Kafka 0.10's maybeRoll never rolls an empty segment (segment.size > 0); it takes the
    # append and still ages from its creation, so the next append rolls.  Recreated for
    # the first append, it would hold every later one for another segment.ms.
    log = Log.open(tmp_path / "t-0", {"segment.ms": 1000}, clock=clock)
    clock.advance(5000)
    log.append_as_leader(values(1))
    assert [(s.base_offset, s.created_ms) for s in log.segments] == [(0, 1_000_000)]
    log.append_as_leader(values(1))
    assert [s.base_offset for s in log.segments] == [0, 1]
    log.close()


@pytest.mark.parametrize("stop", ["close", "crash"])
def test_a_reopened_segment_ages_on_the_logs_clock(tmp_path, clock, stop):
    # Its age used to come from the file's wall-clock mtime: on a virtual clock that is
    # decades ahead, so a reopened segment never rolled on segment.ms.  A segment
    # recovered after a crash ages from the open too, as one loaded after a clean close.
    path = tmp_path / "t-0"
    log = Log.open(path, {"segment.ms": 1000}, clock=clock)
    log.append_as_leader(values(1))
    if stop == "close":
        log.close()
    else:
        log.crash(lose_unflushed=False)
    clock.advance(500)
    log = Log.open(path, {"segment.ms": 1000}, clock=clock)
    clock.advance(999)
    log.append_as_leader(values(1))
    assert len(log.segments) == 1  # 999 ms since it was loaded
    clock.advance(1)
    log.append_as_leader(values(1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_rolls_when_the_index_is_full(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.index.bytes": 24, "index.interval.bytes": 0})
    for i in range(10):
        log.append_as_leader(values(1, i))
    assert len(log.segments) >= 3
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert [r.offset for r in all_records(log)] == list(range(10))
    log.close()


def test_a_batch_bigger_than_a_segment_gets_its_own(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 4096, "max.message.bytes": 1 << 20})
    log.append_as_leader(values(1))
    log.append_as_leader(values(100, 1, size=200))  # ~21 KB
    assert len(all_records(log)) == 101
    log.close()


def test_record_too_large_leaves_the_log_unchanged(log):
    log.append_as_leader(values(3))
    size = log.size_in_bytes()
    with pytest.raises(errors.RecordTooLarge):
        log.append_as_leader([b"x" * 2_000_000])
    assert log.log_end_offset == 3 and log.size_in_bytes() == size


@pytest.mark.parametrize("too_big", [0, 1, 2])
def test_a_leader_refuses_producer_batches_when_any_one_of_them_is_too_large(tmp_path, too_big):
    log = Log.open(tmp_path / "t-0", {"max.message.bytes": 1000})
    batches = [encode_batch([b"x" * (2000 if i == too_big else 100)]) for i in range(3)]
    with pytest.raises(errors.RecordTooLarge, match=f"batch of {len(batches[too_big])} bytes"):
        log.append_batches_as_leader(b"".join(batches), leader_epoch=0)
    assert log.log_end_offset == 0
    log.close()


def test_a_follower_appends_what_its_leader_accepted_whatever_its_own_size_limit(log):
    # The leader checked max.message.bytes; a limit lowered since must not keep a
    # lagging replica from the batches it already holds.
    big = encode_batch([b"x" * 2_000_000], base_offset=0)
    assert log.append_as_follower(big).last_offset == 0
    assert bytes(log.read(0, 4 << 20)) == big


def test_follower_append_keeps_leader_offsets_and_epochs(log):
    batches = encode_batch(values(5), base_offset=0, leader_epoch=1) + encode_batch(
        values(5, 5), base_offset=5, leader_epoch=2
    )
    info = log.append_as_follower(batches)
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 9, 2)
    assert bytes(log.read(0, 1 << 20)) == batches
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 5)]


def test_follower_append_rejects_bad_batches_and_leaves_the_log_unchanged(log):
    log.append_as_follower(encode_batch(values(5), base_offset=0, leader_epoch=1))
    before = bytes(log.read(0))
    good = bytearray(encode_batch(values(3), base_offset=5, leader_epoch=1))
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    with pytest.raises(errors.CorruptMessage):
        log.append_as_follower(bytes(flipped))
    with pytest.raises(errors.CorruptMessage):
        log.append_as_follower(bytes(good) + b"\x01\x02")
    with pytest.raises(errors.InvalidRecord):
        log.append_as_follower(encode_batch(values(3), base_offset=6))  # a gap
    with pytest.raises(errors.InvalidRecord):
        log.append_as_follower(encode_batch(values(3), base_offset=4))  # an overlap
    with pytest.raises(errors.InvalidRecord):
        log.append_as_follower(bytes(good) + encode_batch(values(1), base_offset=9))
    assert log.log_end_offset == 5 and bytes(log.read(0)) == before
    log.append_as_follower(bytes(good))
    assert log.log_end_offset == 8


def test_a_follower_append_whose_batches_overlap_or_repeat_inside_it_is_refused(log):
    """The batches of one append must continue each other exactly: a later batch that
    starts at or below the one before's last offset is an overlap, not just a gap."""
    log.append_as_follower(encode_batch(values(5), base_offset=0, leader_epoch=1))
    good = encode_batch(values(3), base_offset=5, leader_epoch=1)
    for base in (7, 6, 5):
        with pytest.raises(errors.InvalidRecord, match="expected 8"):
            log.append_as_follower(good + encode_batch(values(1), base_offset=base))
    assert log.log_end_offset == 5
    log.append_as_follower(good + encode_batch(values(1), base_offset=8))
    assert log.log_end_offset == 9


def test_append_batches_as_leader_restamps_in_place(log):
    log.append_as_leader(values(2), leader_epoch=4)
    produced = encode_batch(values(3), base_offset=0, leader_epoch=-1) + encode_batch(values(2), base_offset=0)
    info = log.append_batches_as_leader(produced, leader_epoch=5)
    assert (info.first_offset, info.last_offset) == (2, 6)
    got = list(decode_batches(log.read(2, 1 << 20).view))
    assert [(b.base_offset, b.last_offset, b.leader_epoch) for b in got] == [(2, 4, 5), (5, 6, 5)]
    assert all(b.valid() for b in got)
    assert log.leader_epoch_cache.entries == [(4, 0), (5, 2)]
    with pytest.raises(errors.CorruptMessage):
        log.append_batches_as_leader(produced[:-3], leader_epoch=5)
    assert log.log_end_offset == 7


@pytest.mark.parametrize("call, name, kind", [
    (lambda log: log.read("0"), "offset", "str"),
    (lambda log: log.read(1.5), "offset", "float"),
    (lambda log: log.read(True), "offset", "bool"),
    (lambda log: log.read(0, 1.5), "max_bytes", "float"),
    (lambda log: log.read(0, 100, "3"), "max_offset", "str"),
    (lambda log: log.truncate_to("2"), "offset", "str"),
    (lambda log: log.truncate_to(2.0), "offset", "float"),
    (lambda log: log.truncate_fully_and_start_at(False), "offset", "bool"),
    (lambda log: log.offset_for_timestamp(1.5), "timestamp", "float"),
    (lambda log: log.update_high_watermark("1"), "offset", "str"),
    (lambda log: log.maybe_increment_high_watermark(1.0), "offset", "float"),
    (lambda log: log.maybe_increment_log_start_offset("1"), "offset", "str"),
    (lambda log: log.append_as_leader([b"x"], leader_epoch=1.0), "leader_epoch", "float"),
    (lambda log: log.append_as_leader([b"x"], timestamp_ms="5"), "timestamp_ms", "str"),
    (lambda log: log.append_batches_as_leader(encode_batch([b"x"]), "0"), "leader_epoch", "str"),
    (lambda log: log.delete_old_segments(now_ms=1.5), "now_ms", "float"),
    (lambda log: log.maybe_flush(now_ms=1.5), "now_ms", "float"),
])
def test_offsets_and_times_must_be_ints(log, call, name, kind):
    log.append_as_leader(values(3), leader_epoch=0)
    log.update_high_watermark(3)
    with pytest.raises(TypeError, match=f"^{name} must be an int, not {kind}$"):
        call(log)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 3, 3)


def test_integer_types_other_than_int_are_taken_as_ints(log):
    import numpy as np

    log.append_as_leader(values(3), leader_epoch=np.int32(0))
    assert log.read(np.int64(1), np.int64(1 << 20)).first_offset == 0
    assert log.update_high_watermark(np.int64(2)) == 2 and type(log.high_watermark) is int


def test_high_watermark_bounds(log):
    log.append_as_leader(values(10))
    assert log.high_watermark == 0
    assert log.maybe_increment_high_watermark(4) == 0
    assert log.maybe_increment_high_watermark(3) is None  # never backwards
    assert log.maybe_increment_high_watermark(4) is None  # where it is: no move reported
    with pytest.raises(ValueError):
        log.maybe_increment_high_watermark(11)  # never above the LEO
    assert log.update_high_watermark(50) == 10
    assert log.update_high_watermark(-5) == 0


def test_truncate_to_across_segments_then_append(log):
    for i in range(60):
        log.append_as_leader(values(10, 10 * i), leader_epoch=i // 20)
    log.update_high_watermark(600)
    segs = len(log.segments)
    assert log.truncate_to(205)  # mid-batch: the whole batch holding 205 goes
    assert log.log_end_offset == 200 and log.high_watermark == 200
    assert len(log.segments) < segs
    assert log.leader_epoch_cache.entries == [(0, 0)]  # epochs starting at or after 200 went
    assert not log.truncate_to(300)
    assert not log.truncate_to(log.log_end_offset)  # nothing at or after the LEO
    log.append_as_leader(values(5, 9000), leader_epoch=7)
    recs = all_records(log)
    assert [r.offset for r in recs] == list(range(205))
    assert recs[-1].value[:8] == b"00009004"
    assert log.leader_epoch_cache.entries == [(0, 0), (7, 200)]
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(206)


def test_a_view_read_before_a_truncation_keeps_its_bytes_and_the_log_moves_on(tmp_path, clock):
    """A fetch answer is a zero-copy view into the leader's segment; a deposed leader
    truncating and appending its successor's batches at the same file positions must
    not change what the view shows (swarm control-plane-chaos seed 8071).  The
    truncated file is replaced by a copy; the view keeps the old one."""
    path = tmp_path / "t-0"
    log = Log.open(path, SMALL, clock=clock)
    log.append_as_leader(values(10), leader_epoch=11)
    log.flush()
    view = log.read(5, 1 << 20).view[:]        # a slice holds the map as well as the view
    sent = bytes(view)
    ino = os.stat(path / "00000000000000000000.log").st_ino
    assert log.truncate_to(0)
    log.append_as_leader(values(10, 100), leader_epoch=12)
    assert bytes(view) == sent                  # what was read stays what was read
    assert os.stat(path / "00000000000000000000.log").st_ino != ino
    assert [r.value[:8] for r in all_records(log)] == [b"%08d" % i for i in range(100, 110)]
    log.flush()
    log.close()
    again = Log.open(path, SMALL, clock=clock)  # the replacement is the log, on disk too
    try:
        assert [r.value[:8] for r in all_records(again)] == [b"%08d" % i for i in range(100, 110)]
        assert again.leader_epoch_cache.entries == [(12, 0)]
    finally:
        again.close()
    del view


def test_a_view_into_a_sealed_segment_survives_a_truncation_back_into_it(log):
    for i in range(60):
        log.append_as_leader(values(10, 10 * i), leader_epoch=1)
    assert len(log.segments) > 2
    view = log.read(100, 1 << 20).view          # from the first, sealed segment
    sent = bytes(view)
    assert log.truncate_to(50)                   # back into it: it is active again
    log.append_as_leader(values(100, 5000), leader_epoch=2)
    assert bytes(view) == sent
    assert [r.value[:8] for r in all_records(log)][48:52] == [b"00000048", b"00000049", b"00005000", b"00005001"]


def test_a_truncation_no_view_covers_cuts_the_file_in_place(log, tmp_path):
    log.append_as_leader(values(10), leader_epoch=1)
    log.append_as_leader(values(10, 10), leader_epoch=1)
    name = tmp_path / "t-0" / "00000000000000000000.log"
    ino = os.stat(name).st_ino
    view = log.read(0, 1 << 20).view
    del view                                    # released before the truncation: no copy
    assert log.truncate_to(10)
    assert os.stat(name).st_ino == ino
    log.append_as_leader(values(3, 50), leader_epoch=2)
    assert [r.offset for r in all_records(log)] == list(range(13))


def test_a_replacement_interrupted_before_its_rename_leaves_the_log_as_it_was(tmp_path, clock):
    path = tmp_path / "t-0"
    log = Log.open(path, SMALL, clock=clock)
    log.append_as_leader(values(10), leader_epoch=1)
    log.flush()
    log.close()
    (path / "00000000000000000000.log.tmp").write_bytes(b"half a copy")
    again = Log.open(path, SMALL, clock=clock)
    try:
        assert not (path / "00000000000000000000.log.tmp").exists()
        assert [r.offset for r in all_records(again)] == list(range(10))
    finally:
        again.close()


def _reopened_with_batch_1_length_damaged(tmp_path, cfg):
    """30 one-record batches over several segments, closed, batch 1's length overwritten with
    0xffffffff, and reopened: (the log, batch 1's position in the first segment)."""
    log = Log.open(tmp_path / "t-0", cfg)
    for i in range(30):
        log.append_as_leader(values(1, i), leader_epoch=0)
    log.close()
    path = log.segments[0].log_file.filename
    with open(path, "r+b") as f:
        second = 12 + int.from_bytes(f.read(12)[8:], "big")
        f.seek(second + 8)  # batch 1's length
        f.write(b"\xff\xff\xff\xff")
    return Log.open(tmp_path / "t-0", cfg), second


def test_a_damaged_batch_header_fails_reads_and_truncations_and_changes_nothing(tmp_path):
    # The header walks took a damaged length for the end of the data: truncate_to(1)
    # deleted the later segments, cut nothing and returned True; read(1) was answered
    # from the next segment.  The damage lies behind the index entries, where a clean
    # open (walking from the last entry) does not see it.
    cfg = {"segment.bytes": 1024, "index.interval.bytes": 200}
    log, second = _reopened_with_batch_1_length_damaged(tmp_path, cfg)
    before = (log.log_end_offset, [s.base_offset for s in log.segments])
    assert log.last_recovery == [] and len(before[1]) > 1
    damaged = f"00000000000000000000.log: damaged batch header at position {second}:"
    with pytest.raises(errors.KafkaStorageError, match=damaged):
        log.truncate_to(1)
    assert (log.log_end_offset, [s.base_offset for s in log.segments]) == before
    with pytest.raises(errors.KafkaStorageError, match=damaged):
        log.read(1)
    with pytest.raises(errors.KafkaStorageError, match=damaged):
        log.read(0, 1 << 20)  # a read spanning it
    assert [r.offset for r in decode_records(log.read(0, 1).view)] == [0]  # what lies before it still reads
    log.close()


def test_truncating_to_a_segments_base_offset_empties_that_segment_and_seals_the_rest(log):
    """Kafka's truncateTo keeps the segment whose base is the target, emptied, as the
    active one: the sealed segment before it is not reopened and rewritten."""
    for i in range(60):
        log.append_as_leader(values(10, 10 * i))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    assert log.truncate_to(bases[2])
    assert [s.base_offset for s in log.segments] == bases[:3]
    assert log.segments[-1].size == 0 and log.log_end_offset == bases[2]
    assert not log.segments[1].log_file.writable
    assert log.append_as_leader(values(1, 7000)).first_offset == bases[2]
    assert [s.base_offset for s in log.segments] == bases[:3]


def test_a_truncation_forgets_the_max_timestamp_of_the_batches_it_removed(tmp_path, clock):
    """The segment's max timestamp goes back to what its remaining batches hold: kept, the
    removed batch's newer timestamp held old data back from time retention and was sealed
    into the time index as an entry for an offset the segment no longer has."""
    log = Log.open(tmp_path / "t-0", {**SMALL, "retention.ms": 10_000}, clock=clock)
    for i in range(5):
        log.append_as_leader(values(10, 10 * i), timestamp_ms=1000)
    log.append_as_leader(values(10, 50), timestamp_ms=clock.now_ms())  # a fresh one, then cut
    assert log.truncate_to(50)
    assert log.segments[0].max_timestamp == 1000
    log.roll()
    log.append_as_leader(values(1, 50))
    assert log.segments[0].time_index.last_entry() == (1000, 9)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 1 and log.log_start_offset == 50
    log.close()


def test_truncate_fully_and_start_at(log):
    log.append_as_leader(values(10), leader_epoch=1)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert log.leader_epoch_cache.entries == []
    info = log.append_as_leader(values(2), leader_epoch=2)
    assert info.first_offset == 500
    assert [s.base_offset for s in log.segments] == [500]
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(0)


def segment_files(log):
    return sorted(n for n in os.listdir(log.dir) if n.endswith((".log", ".index", ".timeindex")))


def test_a_deleted_segment_takes_its_index_files_with_it(log):
    """Retention and a full truncation delete a segment's three files. An index left
    behind stays until the next open, or is taken up, entries and all, by the next
    segment created at its base (a follower restarted at a base it once had)."""
    for i in range(100):
        log.append_as_leader(values(10, 10 * i))
    log.update_high_watermark(1000)
    log.config = LogConfig.from_dict({**SMALL, "retention.bytes": log.size_in_bytes() // 2})
    assert log.delete_old_segments() > 0
    bases = [s.base_offset for s in log.segments]
    assert segment_files(log) == sorted(f"{b:020d}{x}" for b in bases for x in (".log", ".index", ".timeindex"))
    log.truncate_fully_and_start_at(bases[1])
    assert segment_files(log) == [f"{bases[1]:020d}{x}" for x in (".index", ".log", ".timeindex")]
    assert log.segments[0].offset_index.entries == log.segments[0].time_index.entries == 0


def test_retention_by_bytes_only_below_the_hw(log):
    for i in range(100):
        log.append_as_leader(values(10, 10 * i), leader_epoch=i // 50)
    log_bytes = log.size_in_bytes()
    log.config = LogConfig.from_dict({**SMALL, "retention.bytes": log_bytes // 2})
    assert log.delete_old_segments() == 0  # HW is 0: nothing is committed yet
    log.update_high_watermark(1000)
    deleted = log.delete_old_segments()
    assert deleted > 0 and log.size_in_bytes() <= log_bytes // 2 + 16 * 1024
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(0)
    assert all_records(log)[0].offset == log.log_start_offset
    start = log.log_start_offset
    expected = [(0, start), (1, 500)] if start < 500 else [(1, start)]
    assert log.leader_epoch_cache.entries == expected


def test_a_log_start_raised_from_outside_stops_at_the_hw_and_retention_follows_it(log):
    """KIP-107, the follower's half: the leader's log start is adopted, bounded by the HW;
    reads below it are refused at once and the next retention pass drops the segments
    wholly below it (retention.bytes/ms alone would keep them)."""
    for i in range(100):
        log.append_as_leader(values(10, 10 * i), leader_epoch=i // 50)
    assert len(log.segments) > 3
    log.update_high_watermark(300)
    assert log.maybe_increment_log_start_offset(700) and log.log_start_offset == 300  # not past the HW
    assert not log.maybe_increment_log_start_offset(200)  # never back
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(299)
    assert log.recovery_point >= 300
    log.update_high_watermark(1000)
    assert log.maybe_increment_log_start_offset(620) and log.log_start_offset == 620
    assert log.leader_epoch_cache.entries == [(1, 620)]
    assert log.delete_old_segments() > 0
    assert log.segments[0].base_offset <= 620 and (len(log.segments) == 1 or log.segments[1].base_offset > 620)
    assert log.log_start_offset == 620 and all_records(log)[0].offset <= 620


def test_retention_by_time(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", {**SMALL, "retention.ms": 10_000}, clock=clock)
    for i in range(30):
        log.append_as_leader(values(10, 10 * i))
    clock.advance(20_000)
    for i in range(30, 60):
        log.append_as_leader(values(10, 10 * i))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    assert log.log_start_offset > 0
    assert all(s.max_timestamp == clock.now_ms() for s in log.segments[1:])
    clock.advance(20_000)
    log.delete_old_segments()  # everything expired: the active one is rolled, then deleted
    assert log.log_start_offset == log.log_end_offset == 600
    assert log.append_as_leader(values(1)).first_offset == 600
    log.close()


def test_retention_limits_are_kafkas_boundaries(tmp_path, clock):
    """A segment goes once its newest record is more than retention.ms old (exactly that
    old it stays), and while the log without it still holds retention.bytes (Kafka's
    ``diff - segment.size >= 0``)."""
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    for i in range(60):
        log.append_as_leader(values(10, 10 * i), timestamp_ms=1000)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) >= 3
    total, first = log.size_in_bytes(), log.segments[0].size
    age = clock.now_ms() - 1000
    log.config = LogConfig.from_dict({**SMALL, "retention.ms": age})
    assert log.delete_old_segments() == 0
    log.config = LogConfig.from_dict({**SMALL, "retention.bytes": total - first + 1})
    assert log.delete_old_segments() == 0
    log.config = LogConfig.from_dict({**SMALL, "retention.bytes": total - first})
    assert log.delete_old_segments() == 1 and log.size_in_bytes() == total - first
    log.config = LogConfig.from_dict({**SMALL, "retention.ms": age - 1})
    assert log.delete_old_segments() > 0
    assert log.log_start_offset == log.log_end_offset == 600
    log.close()


def test_the_recovery_point_never_lags_the_log_start(tmp_path, clock):
    """Retention past unflushed segments, and a restart at a later offset, raise the
    recovery point to the new log start (Kafka's updateLogStartOffset and
    truncateFullyAndStartAt do).  Left below it, a power loss took every segment with it
    and the log came back at offset 0, giving out again offsets below its published start."""
    path = tmp_path / "t-0"
    log = Log.open(path, {**SMALL, "retention.bytes": 16 * 1024}, clock=clock)
    for i in range(60):
        log.append_as_leader(values(10, 10 * i))
    log.update_high_watermark(log.log_end_offset)
    assert log.recovery_point == 0 and log.delete_old_segments() > 0
    start = log.log_start_offset
    assert log.recovery_point >= start > 0
    log.crash(lose_unflushed=True)
    log = Log.open(path, SMALL, clock=clock)
    assert log.log_start_offset == log.log_end_offset == start
    log.append_as_leader(values(5))  # unflushed
    log.truncate_fully_and_start_at(5000)
    assert log.recovery_point == 5000
    log.append_as_leader(values(5))
    log.crash(lose_unflushed=True)
    log = Log.open(path, SMALL, clock=clock)
    assert log.log_start_offset == log.log_end_offset == 5000
    log.close()


def test_offset_for_timestamp(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    for i in range(50):
        log.append_as_leader(values(10, 10 * i), timestamp_ms=1000 + i * 10)
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1000) == 0
    assert log.offset_for_timestamp(1001) == 10
    assert log.offset_for_timestamp(1250) == 250
    assert log.offset_for_timestamp(1490) == 490
    assert log.offset_for_timestamp(1491) is None
    assert log.offset_for_timestamp(-1) == 500 and log.offset_for_timestamp(-2) == 0
    log.close()


def test_offset_for_timestamp_looks_past_batches_below_the_log_start(tmp_path):
    # The first batch new enough (ts 2000) lies below the log start, and so does the
    # part of the next holding the target: the answer is the next batch's first offset.
    log = Log.open(tmp_path / "t-0", {})
    for ts in (2000, 500, 1500):
        log.append_as_leader([b"x"] * 5, timestamp_ms=ts)
    log.update_high_watermark(15)
    log.maybe_increment_log_start_offset(7)
    assert log.offset_for_timestamp(1500) == 10 and log.offset_for_timestamp(1000) == 10
    assert log.offset_for_timestamp(2001) is None
    log.close()


def _resigned(batch, **fields):
    """``batch`` with header fields overwritten and its CRC redone (as compaction leaves
    batches: lastOffsetDelta past the last record, or no records at all)."""
    import struct

    from kreplica.records import crc32c

    b = bytearray(batch)
    at = {"length": (8, ">i"), "last_offset_delta": (23, ">i"), "max_timestamp": (35, ">q"),
          "record_count": (57, ">i")}
    for name, value in fields.items():
        struct.pack_into(at[name][1], b, at[name][0], value)
    b[17:21] = struct.pack(">I", crc32c(bytes(b[21:])))
    return bytes(b)


def test_offset_for_timestamp_steps_over_compacted_and_empty_batches(tmp_path, monkeypatch):
    # Stepping by the last record's offset + 1 re-read the same batch for ever when it
    # ended below its lastOffsetDelta, and raised IndexError on a batch with no records.
    log = Log.open(tmp_path / "t-0", {})
    log.append_as_follower(_resigned(encode_batch([(None, b"a", None, 100), (None, b"b", None, 200)]),
                                     last_offset_delta=5, max_timestamp=500))      # offsets 0..5
    empty = encode_batch([b"x"], base_offset=6)[:61]
    log.append_as_follower(_resigned(empty, length=49, last_offset_delta=2, max_timestamp=500,
                                     record_count=0))                              # offsets 6..8
    log.append_as_follower(encode_batch([b"c"], base_offset=9, timestamp_ms=400))
    reads, real_read = [], log.read

    def read(*args, **kwargs):
        reads.append(args)
        if len(reads) > 10:
            pytest.fail("offset_for_timestamp is going round in circles")
        return real_read(*args, **kwargs)

    monkeypatch.setattr(log, "read", read)
    assert log.offset_for_timestamp(150) == 1
    assert log.offset_for_timestamp(300) == 9
    assert log.offset_for_timestamp(401) is None
    log.close()


def test_an_empty_batch_at_the_end_of_the_log_is_read_and_reopened_as_a_batch(tmp_path):
    # A header-only batch (61 bytes, as compaction leaves them) is the last thing in the
    # data: the header walk must frame it, not take it for damage in place of an end.
    log = Log.open(tmp_path / "t-0", {})
    log.append_as_follower(encode_batch([b"a", b"b"], base_offset=0, timestamp_ms=100))
    empty = _resigned(encode_batch([b"x"], base_offset=2)[:61], length=49, last_offset_delta=2,
                      max_timestamp=500, record_count=0)                            # offsets 2..4
    log.append_as_follower(empty)
    assert bytes(log.read(3, 1 << 20).view) == empty
    assert log.offset_for_timestamp(300) is None
    log.close()
    log = Log.open(tmp_path / "t-0", {})
    assert log.last_recovery == [] and log.log_end_offset == 5
    assert bytes(log.read(2, 1 << 20).view) == empty
    log.close()


def test_a_leader_gives_a_producer_batch_its_records_max_timestamp(tmp_path):
    # The header's maxTimestamp was kept as the producer sent it: with 0 for records
    # written now, offset_for_timestamp missed them and retention.ms deleted them at once.
    clock = ManualClock(10_000_000)
    log = Log.open(tmp_path / "t-0", {"retention.ms": 3_600_000, "segment.bytes": 1024}, clock=clock)
    now = clock.now_ms()
    honest = encode_batch([(None, b"a", None, now), (None, b"b", None, now + 1)], base_offset=0, leader_epoch=3)
    assert log.append_batches_as_leader(_resigned(honest, max_timestamp=0), 3).max_timestamp == now + 1
    assert bytes(log.read(0).view) == honest  # header and CRC as an honest producer's
    assert log.offset_for_timestamp(now) == 0
    # Too high is corrected as well, and a LogAppendTime type on a CreateTime log goes.
    high = encode_batch([(None, b"c", None, now + 2)], base_offset=2, leader_epoch=3)
    log.append_batches_as_leader(_resigned(high, max_timestamp=2**40), 3)
    log.append_batches_as_leader(encode_batch([(None, b"d", None, now + 3)], attributes=0x08), 3)
    stored = list(decode_batches(log.read(2, 1 << 20).view))
    assert [(b.max_timestamp, b.timestamp_type, b.valid()) for b in stored] == [(now + 2, 0, True), (now + 3, 0, True)]
    assert log.offset_for_timestamp(now + 3) == 3 and log.offset_for_timestamp(now + 4) is None
    log.roll()
    for _ in range(3):
        log.append_as_leader([b"x" * 100], leader_epoch=3)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0 and log.log_start_offset == 0
    log.close()


@pytest.mark.parametrize("deltas", [(5, 9, 7), (0, 2**31 + 5, 1)], ids=["out-of-order", "past-int32"])
def test_a_leader_takes_the_largest_record_timestamp_not_the_last_records(tmp_path, deltas):
    """A producer's records need not be in time order, nor within 2**31 ms (24.8 days) of
    the batch's base timestamp: the max timestamp the leader checks the header against is
    the largest record's, wherever it stands and however far, so an honest header is kept
    as sent and a time lookup just below the largest finds that record's offset."""
    clock = ManualClock(10_000_000)
    log = Log.open(tmp_path / "t-0", clock=clock)
    now, top = clock.now_ms(), max(deltas)
    honest = encode_batch([(None, b"v%d" % i, None, now + d) for i, d in enumerate(deltas)], leader_epoch=3)
    assert next(decode_batches(honest)).max_timestamp == now + top
    assert log.append_batches_as_leader(honest, 3).max_timestamp == now + top
    assert bytes(log.read(0).view) == honest
    assert log.offset_for_timestamp(now + top - 1) == deltas.index(top)
    assert log.offset_for_timestamp(now + top + 1) is None
    log.close()


def test_flush_messages_moves_the_recovery_point(tmp_path):
    log = Log.open(tmp_path / "t-0", {"flush.messages": 10})
    log.append_as_leader(values(5))
    assert log.recovery_point == 0
    log.append_as_leader(values(5))
    assert log.recovery_point == 10
    log.append_as_leader(values(3))
    log.flush()
    assert log.recovery_point == 13
    log.close()


def test_flush_ms(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", {"flush.ms": 100}, clock=clock)
    log.append_as_leader(values(1))
    assert log.recovery_point == 0
    clock.advance(100)
    log.append_as_leader(values(1))
    assert log.recovery_point == 2
    log.close()


def test_flush_ms_counts_from_a_clean_open(tmp_path, clock):
    # A clean open flushes nothing, so flush.ms must count from the open (Kafka's
    # lastFlushedTime starts at the log's creation), not from the epoch: else the first
    # append after a restart fsyncs at once.
    Log.open(tmp_path / "t-0", {"flush.ms": 100}, clock=clock).close()
    log = Log.open(tmp_path / "t-0", {"flush.ms": 100}, clock=clock)
    log.append_as_leader(values(1))
    assert log.recovery_point == 0 and not log.maybe_flush()
    clock.advance(100)
    assert log.maybe_flush() and log.recovery_point == 1
    log.close()


def test_flush_ms_without_a_later_append_needs_the_periodic_check(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", {"flush.ms": 100}, clock=clock)
    assert not log.maybe_flush()  # nothing waits
    log.append_as_leader(values(1))
    clock.advance(99)
    assert not log.maybe_flush() and log.recovery_point == 0
    clock.advance(1)
    assert log.maybe_flush() and log.recovery_point == 1
    assert not log.maybe_flush()
    log.close()


def test_clean_reopen_keeps_everything(tmp_path, clock):
    path = tmp_path / "t-0"
    log = Log.open(path, SMALL, clock=clock)
    for i in range(40):
        log.append_as_leader(values(10, 10 * i), leader_epoch=i // 10)
    before = all_records(log)
    log.close()
    assert (path / ".kafka_cleanshutdown").exists()
    assert os.path.getsize(log.segments[-1].log_file.path) == log.segments[-1].size  # trimmed
    log = Log.open(path, SMALL, clock=clock)
    assert not (path / ".kafka_cleanshutdown").exists()
    assert log.log_end_offset == 400 and log.recovery_point == 400
    assert [(r.offset, r.value) for r in all_records(log)] == [(r.offset, r.value) for r in before]
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 100), (2, 200), (3, 300)]
    assert log.append_as_leader(values(1), leader_epoch=3).first_offset == 400
    log.close()


def test_a_clean_reopen_keeps_a_segments_max_timestamp_from_its_time_index(tmp_path, clock):
    """A clean open walks only the batches after the last offset-index entry; the max
    timestamp of those before comes from the time index.  Lost, a record newer than the
    segment's tail was no longer found by timestamp (and time retention saw the segment
    as older than it is)."""
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    log.append_as_leader(values(10), timestamp_ms=5000)
    for i in range(1, 15):
        log.append_as_leader(values(10, 10 * i), timestamp_ms=1000)
    assert len(log.segments) == 1 and log.segments[0].offset_index.entries > 2
    assert log.offset_for_timestamp(4000) == 0
    log.close()
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    assert log.segments[0].max_timestamp == 5000
    assert log.offset_for_timestamp(4000) == 0
    log.close()


def test_an_open_with_a_later_log_start_clamps_the_leader_epoch_cache(tmp_path):
    """A log start from the broker's checkpoint, above the cache's first entry (the cache
    file was not rewritten before a crash), clamps the epoch covering it, as Kafka's
    LogLoader does with truncateFromStart."""
    log = Log.open(tmp_path / "t-0", SMALL)
    for i in range(100):
        log.append_as_leader(values(10, 10 * i), leader_epoch=i // 50)
    log.close()
    log = Log.open(tmp_path / "t-0", SMALL, log_start_offset=300)
    assert log.log_start_offset == 300
    assert log.leader_epoch_cache.entries == [(0, 300), (1, 500)]
    log.close()


def test_config_errors_name_the_key_and_touch_nothing(tmp_path):
    with pytest.raises(errors.InvalidConfig, match="segment.bytes"):
        Log.open(tmp_path / "t-0", {"segment.bytes": -1})
    with pytest.raises(errors.InvalidConfig, match="retention.byte"):
        Log.open(tmp_path / "t-0", {"retention.byte": 1})
    assert not (tmp_path / "t-0").exists()


def test_one_log_per_directory(tmp_path):
    log = Log.open(tmp_path / "t-0")
    # The open log's checkpoint write in progress: a refused second opener leaves it
    # alone (clearing left-overs is the lock holder's work, at its own open).
    tmp = tmp_path / "t-0" / "recovery-point-checkpoint.tmp"
    tmp.write_bytes(b"0\n")
    with pytest.raises(errors.KafkaStorageError, match="already open"):
        Log.open(tmp_path / "t-0")
    assert tmp.exists()
    log.close()
    tmp.write_bytes(b"0\n")
    Log.open(tmp_path / "t-0").close()
    assert not tmp.exists()  # the next opener clears what the last left


def test_kafka_python_reads_our_segment_files(tmp_path):
    from kafka.record.default_records import DefaultRecordBatch

    log = Log.open(tmp_path / "t-0", SMALL)
    for i in range(20):
        log.append_as_leader([(b"k%d" % j, b"v%d" % (i * 10 + j)) for j in range(10)], leader_epoch=2,
                             timestamp_ms=5000 + i)
    log.close()
    seen = []
    for seg in sorted(p for p in os.listdir(tmp_path / "t-0") if p.endswith(".log")):
        buf = (tmp_path / "t-0" / seg).read_bytes()
        pos = 0
        while pos < len(buf):
            size = 12 + int.from_bytes(buf[pos + 8:pos + 12], "big")
            batch = DefaultRecordBatch(buf[pos:pos + size])
            assert batch.validate_crc()
            seen += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
            pos += size
    assert seen == [(i, b"k%d" % (i % 10), b"v%d" % i, 5000 + i // 10) for i in range(200)]


def test_append_after_close_is_refused(tmp_path):
    log = Log.open(tmp_path / "t-0")
    log.close()
    with pytest.raises(errors.KafkaStorageError, match="closed"):
        log.append_as_leader([b"x"])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=40)),
                                   st.one_of(st.none(), st.binary(max_size=300)),
                                   st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)), max_size=2)),
                         min_size=1, max_size=30), min_size=1, max_size=12),
       st.integers(0, 2**40))
def test_kafka_python_decodes_random_logs_byte_for_byte(tmp_path_factory, batches, ts):
    from kafka.record.default_records import DefaultRecordBatch

    path = tmp_path_factory.mktemp("oracle") / "t-0"
    log = Log.open(path, {"segment.bytes": 2048, "index.interval.bytes": 64})
    for epoch, items in enumerate(batches):
        log.append_as_leader(items, leader_epoch=epoch, timestamp_ms=ts + epoch)
    log.close()
    expected = [(k, v, [(hk, hv) for hk, hv in h], ts + e) for e, items in enumerate(batches) for k, v, h in items]
    seen, epochs = [], []
    for seg in sorted(path.glob("*.log")):
        buf = seg.read_bytes()
        pos = 0
        while pos < len(buf):
            size = 12 + int.from_bytes(buf[pos + 8:pos + 12], "big")
            batch = DefaultRecordBatch(buf[pos:pos + size])
            assert batch.validate_crc()
            epochs.append(batch.leader_epoch)
            seen += [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch]
            pos += size
    assert [s[0] for s in seen] == list(range(len(expected)))
    assert [s[1:] for s in seen] == expected
    assert epochs == list(range(len(batches)))


def test_log_append_time_is_stamped_by_the_leader_only(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    log.append_as_leader([b"a", b"b"], timestamp_ms=5)  # the producer's time is overridden
    # every batch of an append of several, each at its own position, the first one included
    log.append_batches_as_leader(encode_batch([b"c"], timestamp_ms=7) + encode_batch([b"d", b"e"], timestamp_ms=9),
                                 leader_epoch=0)
    # a batch whose producer set the LogAppendTime bit already keeps it (set, not flipped)
    log.append_batches_as_leader(encode_batch([b"f"], timestamp_ms=11, attributes=0x08), leader_epoch=0)
    batches = list(decode_batches(log.read(0, 1 << 20).view))
    assert len(batches) == 4
    assert all(b.valid() and b.timestamp_type == 1 and b.max_timestamp == 1_000_000 for b in batches)
    follower = Log.open(tmp_path / "t-1", {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    clock.advance(50)
    follower.append_as_follower(log.read(0, 1 << 20))
    assert bytes(follower.read(0, 1 << 20)) == bytes(log.read(0, 1 << 20))  # copied verbatim
    assert follower.offset_for_timestamp(1_000_000) == 0
    log.close()
    follower.close()


def test_log_append_time_replaces_a_producers_future_timestamp_in_the_segments_max(tmp_path, clock):
    # Retention and the time index go by the segment's max timestamp: with LogAppendTime it
    # is the broker's time, even for the first (here the only) batch of an append whose
    # producer claimed a later one.
    log = Log.open(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    log.append_batches_as_leader(encode_batch([b"c"], timestamp_ms=5_000_000), leader_epoch=0)
    assert (log.segments[-1].max_timestamp, log.segments[-1].offset_of_max_timestamp) == (1_000_000, 0)
    assert next(iter(decode_batches(log.read(0, 1 << 20).view))).max_timestamp == 1_000_000
    log.close()


def test_log_append_time_replaces_a_producers_missing_timestamp_in_every_byte(tmp_path, clock):
    # A producer batch without timestamps carries maxTimestamp -1, all eight bytes 0xff;
    # the broker's time must replace every one of them, the top byte too, which no real
    # time in milliseconds sets (a stamp leaving it read as a negative time).
    log = Log.open(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    log.append_batches_as_leader(encode_batch([b"c"]), leader_epoch=0)
    batch = next(iter(decode_batches(log.read(0, 1 << 20).view)))
    assert batch.valid() and (batch.timestamp_type, batch.max_timestamp) == (1, 1_000_000)
    assert [r.timestamp for r in batch.records()] == [1_000_000]
    log.close()


def test_log_append_time_replaces_the_timestamp_given_to_an_encoded_append_in_the_segments_max(tmp_path, clock):
    # The same for a batch the log encodes itself from a caller's timestamp_ms: the
    # segment, its time index and the append's answer all carry the broker's time.
    log = Log.open(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"}, clock=clock)
    info = log.append_as_leader([b"a", b"b"], timestamp_ms=5)
    assert (info.max_timestamp, info.log_append_time) == (1_000_000, 1_000_000)
    assert log.segments[-1].max_timestamp == 1_000_000
    assert log.offset_for_timestamp(1_000_000) == 0
    log.close()


def test_a_leader_append_takes_any_iterable_of_items(tmp_path, clock):
    # The encoder takes any iterable; so does the log, whose own count of the records
    # must not need a list (an iterator or a generator has no len).
    log = Log.open(tmp_path / "t-0", {}, clock=clock)
    assert log.append_as_leader(iter([b"a", b"b"])).last_offset == 1
    assert log.append_as_leader(v for v in (b"c",)).last_offset == 2
    assert log.append_as_leader((b"d", (b"k", b"e"))).last_offset == 4
    assert [(r.key, r.value) for r in all_records(log)] == [
        (None, b"a"), (None, b"b"), (None, b"c"), (None, b"d"), (b"k", b"e")]
    log.close()


def test_a_create_time_append_reports_no_log_append_time(tmp_path, clock):
    # Kafka's ProduceResponse carries logAppendTime -1 unless the topic stamps
    # LogAppendTime: a producer takes any other value for the broker's stamp.
    log = Log.open(tmp_path / "t-0", {}, clock=clock)
    assert log.append_as_leader([b"a"], timestamp_ms=5).log_append_time == -1
    assert log.append_batches_as_leader(encode_batch([b"b"], timestamp_ms=7), leader_epoch=0).log_append_time == -1
    log.close()


def test_an_open_log_holds_five_descriptors(tmp_path):
    """The lock, the active .log for pwrite, and the one each of its three maps holds
    (CPython's mmap keeps a dup): sealed segments hold none until read."""
    logs = [Log.open(tmp_path / f"t-{i}", SMALL) for i in range(20)]
    for log in logs:
        for i in range(40):
            log.append_as_leader(values(10, 10 * i))
    assert fds_under(tmp_path) == 5 * len(logs)
    for log in logs:
        log.close()
    assert fds_under(tmp_path) == 0


def test_closing_a_closed_or_crashed_log_does_nothing(tmp_path):
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append_as_leader(values(3))
    log.close()
    log.close()  # a second close is a no-op, not a storage error
    assert (tmp_path / "t-0" / ".kafka_cleanshutdown").exists()
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append_as_leader(values(2, 3))
    log.crash()
    log.close()  # a crashed log let go of its files: it is not flushed or marked clean now
    assert not (tmp_path / "t-0" / ".kafka_cleanshutdown").exists()
    log = Log.open(tmp_path / "t-0", SMALL)
    assert log.log_end_offset == 3 and log.last_recovery  # recovered, the unflushed append lost
    log.close()


@pytest.mark.parametrize("stop", ["crash", "abandon"])
def test_a_crashed_log_keeps_no_descriptor(tmp_path, stop):
    # A broker killed in a simulation lets go of every file, the active time index's
    # map included: a restart then opens the log again in the same process.
    log = Log.open(tmp_path / "t-0", SMALL)
    for i in range(40):
        log.append_as_leader(values(10, 10 * i))
    log.read(0)  # a sealed segment mapped for a read, too
    log.flush()  # nothing for crash to cut: every segment stays to be let go of
    getattr(log, stop)()
    assert fds_under(tmp_path) == 0


def test_deleting_an_open_log_lets_go_of_its_descriptors_and_lock(tmp_path):
    log = Log.open(tmp_path / "t-0", SMALL)
    for i in range(40):
        log.append_as_leader(values(10, 10 * i))
    log.delete()
    assert not (tmp_path / "t-0").exists() and fds_under(tmp_path) == 0


def test_deleting_a_log_again_or_after_its_directory_went_is_a_no_op(tmp_path):
    # A StopReplica with delete repeated (or a delete after the directory was removed
    # from outside) finds nothing left to remove: no error for the broker to report.
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append_as_leader(values(3))
    log.delete()
    log.delete()
    other = Log.open(tmp_path / "t-1", SMALL)
    other.close()
    shutil.rmtree(tmp_path / "t-1")
    other.delete()
    assert os.listdir(tmp_path) == [] and fds_under(tmp_path) == 0


def test_a_released_answer_no_longer_keeps_its_segment_from_being_cut_in_place(log):
    # Only an answer still held costs a truncation a replacement of the file: once the
    # reader released it, the cut is made in place (same inode), as with no reader.
    log.append_as_leader(values(5))
    log.append_as_leader(values(5, 5))
    name = log.segments[0].log_file.filename
    ino = os.stat(name).st_ino
    answer = log.read(0)
    assert len(answer) > 0
    answer.release()
    assert log.truncate_to(5)
    assert os.stat(name).st_ino == ino
    with pytest.raises(ValueError):
        answer.view.tobytes()
    assert [r.offset for r in all_records(log)] == list(range(5))


def test_retention_that_deletes_every_segment_rolls_one_aged_from_the_passes_time(tmp_path, clock):
    # The segment rolled so that every old one may go is created at the pass's time (the
    # now_ms it was given), as the deletions were decided: segment.ms counts from there.
    log = Log.open(tmp_path / "t-0", {**SMALL, "retention.ms": 1000, "segment.ms": 60_000}, clock=clock)
    for i in range(3):
        log.append_as_leader(values(10, 10 * i))
    log.update_high_watermark(30)
    now = clock.now_ms() + 50_000
    assert log.delete_old_segments(now) == 1
    assert [(s.base_offset, s.created_ms) for s in log.segments] == [(30, now)]
    assert log.log_start_offset == 30
    log.close()


class LogMachine(RuleBasedStateMachine):
    """The Log against a model (a list of batches) through appends of both kinds,
    truncations, retention, HW moves, flushes, clean reopens and crashes."""

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="logmachine-")
        self.clock = ManualClock(1_000_000)
        self.config = {"segment.bytes": 1024, "index.interval.bytes": 100}
        self.log = Log.open(os.path.join(self.dir, "t-0"), self.config, clock=self.clock)
        self.batches = []  # (base, [values]) in offset order
        self.epoch = 0

    def teardown(self):
        if not self.log._closed:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _leo(self):
        return self.batches[-1][0] + len(self.batches[-1][1]) if self.batches else self.log.log_start_offset

    @rule(n=st.integers(1, 12), size=st.integers(0, 90), bump=st.booleans())
    def append_as_leader(self, n, size, bump):
        self.epoch += bump
        base = self._leo()
        vals = [b"%d" % (base + i) + b"." * size for i in range(n)]
        assert self.log.append_as_leader(vals, leader_epoch=self.epoch).first_offset == base
        self.batches.append((base, vals))

    @rule(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4))
    def append_as_follower(self, sizes):
        base = self._leo()
        data = b""
        for n in sizes:
            vals = [b"f%d" % (base + i) for i in range(n)]
            data += encode_batch(vals, base_offset=base, leader_epoch=self.epoch)
            self.batches.append((base, vals))
            base += n
        self.log.append_as_follower(data)

    @rule(frac=st.floats(0, 1))
    def truncate_to(self, frac):
        start, leo = self.log.log_start_offset, self._leo()
        target = start + int((leo - start) * frac)
        self.log.truncate_to(target)
        while self.batches and self.batches[-1][0] + len(self.batches[-1][1]) > target:
            self.batches.pop()  # the batch holding the target goes whole
        assert self.log.log_end_offset == self._leo()

    @rule(frac=st.floats(0, 1))
    def move_hw(self, frac):
        start, leo = self.log.log_start_offset, self._leo()
        self.log.update_high_watermark(start + int((leo - start) * frac))

    @rule(keep=st.integers(0, 3000))
    def retention(self, keep):
        self.log.config = LogConfig.from_dict({**self.config, "retention.bytes": keep})
        self.log.delete_old_segments()
        start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b[0] >= start]
        assert not self.batches or self.batches[0][0] == start

    @rule()
    def flush(self):
        self.log.flush()
        assert self.log.recovery_point == self._leo()

    @rule(crash=st.booleans())
    def reopen(self, crash):
        if crash:
            self.log.crash(lose_unflushed=False)
        else:
            self.log.close()
        hw = self.log.high_watermark
        self.log = Log.open(os.path.join(self.dir, "t-0"), self.config, clock=self.clock)
        self.log.update_high_watermark(hw)  # as the broker's HW checkpoint would

    @rule(offset_frac=st.floats(0, 1))
    def read_one(self, offset_frac):
        start, leo = self.log.log_start_offset, self._leo()
        if leo > start:
            offset = start + int((leo - start) * offset_frac)
            offset = min(offset, leo - 1)
            data = self.log.read(offset, 1)
            holder = next(b for b in self.batches if b[0] <= offset < b[0] + len(b[1]))
            assert data.first_offset == holder[0]

    @invariant()
    def matches_the_model(self):
        log = self.log
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset == self._leo()
        assert log.recovery_point <= log.log_end_offset
        expected = [v for _, vals in self.batches for v in vals]
        assert [r.value for r in all_records(log)] == expected


LogMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
test_log_against_a_model = LogMachine.TestCase


def test_a_prefaulted_read_is_the_same_zero_copy_view(tmp_path):
    """``prefault`` only maps the pages early (one madvise, for a fetch whose bytes will
    all be read); the slice is the same view of the same bytes."""
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 8 << 20})
    for i in range(40):
        log.append_as_leader([b"%06d" % i + b"v" * 4000] * 10, timestamp_ms=1000)
    plain, early = log.read(0, 1 << 20), log.read(0, 1 << 20, prefault=True)
    assert early.first_offset == plain.first_offset == 0
    assert len(early) == len(plain) > 64 << 10 and early.view.readonly
    assert early.tobytes() == plain.tobytes()
    batches = len(list(decode_batches(early.view)))
    assert [r.offset for r in decode_records(early.view)] == list(range(10 * batches))
    log.close()


def test_a_read_bounded_inside_a_batch_leaves_that_batch_out(log):
    # A consumer must see nothing at or above the HW: a batch holding it is not served
    # (Kafka stops the read at that batch's position), even as the first batch.
    log.append_as_leader(values(5))
    log.append_as_leader(values(5, 5))           # 5..9
    assert [r.offset for r in decode_records(log.read(0, 1 << 20, 7).view)] == [0, 1, 2, 3, 4]
    assert len(log.read(5, 1 << 20, 7).view) == 0
    assert [r.offset for r in decode_records(log.read(5, 1 << 20, 10).view)] == list(range(5, 10))


def test_an_append_wanting_more_index_entries_than_are_left_keeps_those_that_fit(tmp_path):
    # Twelve batches at index.interval.bytes=0 want twelve entries; the indexes hold 12
    # offsets and 7 (+1 reserved) times.  The indexes are sparse: the append keeps what
    # fits and succeeds, the next one rolls, and every offset still reads back.
    log = Log.open(tmp_path / "t-0", {"segment.index.bytes": 96, "index.interval.bytes": 0})
    for i in range(3):
        log.append_as_leader([b"p" * 30], timestamp_ms=1000 + i)
    many = b"".join(encode_batch([b"q" * 30], base_offset=3 + i, timestamp_ms=2000 + i) for i in range(12))
    assert log.append_as_follower(many).last_offset == 14
    log.append_as_leader([b"r"], timestamp_ms=3000)
    assert len(log.segments) == 2
    assert [r.offset for r in all_records(log)] == list(range(16))
    assert all(log.read(o, 1).first_offset <= o for o in range(16))
    assert log.offset_for_timestamp(2005) == 8
    log.close()


def test_the_time_index_keeps_a_slot_for_the_entry_sealing_adds(tmp_path):
    # Appends fill the time index to its reserve; the roll's (and close's) final entry
    # still fits, where it used to make every later roll and the close fail.
    log = Log.open(tmp_path / "t-0", {"segment.index.bytes": 120, "index.interval.bytes": 150})
    offset = 0
    while len(log.segments) == 1:
        two = b"".join(encode_batch([b"x" * 60], base_offset=offset + i, timestamp_ms=1000 + offset + i)
                       for i in range(2))
        log.append_as_follower(two)
        offset += 2
    first = log.segments[0]
    assert first.time_index.entries <= first.time_index.max_entries
    assert first.time_index.last_entry() == (first.max_timestamp, first.offset_of_max_timestamp)
    log.close()
    log = Log.open(tmp_path / "t-0", {"segment.index.bytes": 120, "index.interval.bytes": 150})
    assert log.log_end_offset == offset
    log.close()


def test_a_segment_rolls_before_a_relative_offset_passes_int_max(tmp_path):
    # Kafka reads index relative offsets as signed ints: an offset more than Int.MaxValue
    # past the base starts a new segment (batches with gaps, as compaction leaves).
    import struct

    from kreplica.records import crc32c

    def gapped(base, last_delta):
        b = bytearray(encode_batch([b"v"], base_offset=base, timestamp_ms=1))
        struct.pack_into(">i", b, 23, last_delta)
        struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
        return bytes(b)

    log = Log.open(tmp_path / "t-0", {"index.interval.bytes": 0})
    log.append_as_follower(gapped(0, 2**31 - 1))
    log.append_as_follower(gapped(2**31, 0))
    assert [s.base_offset for s in log.segments] == [0, 2**31]
    log.close()


def test_a_batch_ending_exactly_the_widest_relative_offset_past_the_base_stays_in_its_segment(tmp_path):
    # A segment holds relative offsets up to Int.MaxValue inclusive: a batch whose last
    # offset is exactly that far past the segment's base stays in it, and the segment
    # rolls at the next batch, the first that does not fit (not at the one that just did).
    big = 2**31 - 1
    batches = [_resigned(encode_batch([b"v"], base_offset=base, timestamp_ms=1), last_offset_delta=delta)
               for base, delta in ((0, 9), (10, big - 10), (big + 1, 0))]
    log = Log.open(tmp_path / "t-0", {})
    info = log.append_as_follower(b"".join(batches))
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, big + 1, 3)
    assert [s.base_offset for s in log.segments] == [0, big + 1]
    log.close()


def test_a_batch_starting_inside_a_segments_offsets_but_ending_past_them_starts_the_next_segment(tmp_path):
    # Whether a batch fits a segment goes by its last offset: this one starts 10 past the
    # base, well inside, but ends Int.MaxValue + 10 past it, so the append rolls at it.
    big = 2**31 - 1
    batches = [_resigned(encode_batch([b"v"], base_offset=base, timestamp_ms=1), last_offset_delta=delta)
               for base, delta in ((0, 9), (10, big))]
    log = Log.open(tmp_path / "t-0", {})
    info = log.append_as_follower(b"".join(batches))
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, big + 10, 2)
    assert [s.base_offset for s in log.segments] == [0, 10]
    log.close()


def test_the_batches_after_a_roll_inside_a_follower_append_go_to_the_new_segment_as_one_piece(tmp_path):
    # The piece that starts a new segment runs to the next batch that would not fit that
    # segment's relative offsets, measured from the new base: here the last two batches
    # are one piece, more bytes than segment.bytes, so they share one segment made to fit
    # (cut again at the last batch, they took a segment each).
    big = 2**31 - 1
    batches = [_resigned(encode_batch([b"v" * size], base_offset=base, timestamp_ms=1), last_offset_delta=delta)
               for base, delta, size in ((0, 9, 1), (10, big - 10, 1), (big + 1, 0, 600), (big + 2, 5, 600))]
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1024})
    info = log.append_as_follower(b"".join(batches))
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, big + 7, 4)
    assert [s.base_offset for s in log.segments] == [0, big + 1]
    assert log.log_end_offset == big + 8
    log.close()


def test_one_follower_append_spanning_more_than_a_segment_may_rolls_inside_it(tmp_path):
    # All of one append went into one segment, however many offsets it spanned: relative
    # offsets past what a segment holds, and recovery after a crash cut flushed batches.
    big = 2**31 - 1  # the widest a batch's own offsets can be
    batches = [_resigned(encode_batch([b"v"], base_offset=base, timestamp_ms=1), last_offset_delta=delta)
               for base, delta in ((0, big), (big + 1, big), (2 * big + 2, big), (3 * big + 3, 0))]
    log = Log.open(tmp_path / "t-0", {})
    info = log.append_as_follower(b"".join(batches))
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 3 * big + 3, 4)
    assert [s.base_offset for s in log.segments] == [0, big + 1, 2 * big + 2, 3 * big + 3]
    log.flush()
    log.crash()
    log = Log.open(tmp_path / "t-0", {})
    assert log.log_end_offset == 3 * big + 4 and all(r.error is None for r in log.last_recovery)
    # A bad CRC anywhere still refuses the whole append, with nothing appended.
    bad = bytearray(encode_batch([b"w"], base_offset=3 * big + 4 + big + 1, timestamp_ms=1))
    bad[-1] ^= 1
    with pytest.raises(errors.CorruptMessage, match="crc mismatch"):
        log.append_as_follower(_resigned(encode_batch([b"v"], base_offset=3 * big + 4), last_offset_delta=big)
                               + bytes(bad))
    assert log.log_end_offset == 3 * big + 4 and len(log.segments) == 4
    log.close()


def test_a_follower_append_split_across_segments_answers_as_one_append(tmp_path):
    # The pieces of an append too wide for one segment each go through the one-segment
    # path; the answer is the whole append's: the newest timestamp of any piece (here
    # the first) and its offsets counted as an unsplit append counts them.
    big = 2**31 - 1
    first = _resigned(encode_batch([b"v"], base_offset=0, timestamp_ms=5_000), last_offset_delta=big)
    second = encode_batch([b"w"], base_offset=big + 1, timestamp_ms=3_000)
    log = Log.open(tmp_path / "t-0", {})
    info = log.append_as_follower(first + second)
    assert [s.base_offset for s in log.segments] == [0, big + 1]
    assert (info.max_timestamp, info.num_records, info.num_batches) == (5_000, big + 2, 2)
    log.close()


@pytest.mark.parametrize("target", [50, 55])
def test_truncating_below_the_log_start_brings_the_log_start_down_to_the_new_end(log, target):
    """A follower truncated below its log start (inside the first segment) restarts its
    log start at the new LEO, as Kafka's truncateTo takes min(target, logStartOffset):
    left above the LEO, the invariant log start <= HW <= LEO broke, and a read at the
    LEO, where the next append lands, was refused as out of range.  Only a target below
    the first segment's base empties the log: above it, a target inside a batch still
    cuts at that batch's base (a batch is never split) and the segment stays, as
    Kafka's does, its older batches left to retention."""
    for i in range(10):
        log.append_as_leader(values(10, 10 * i))
    log.update_high_watermark(100)
    assert log.maybe_increment_log_start_offset(60)
    assert log.truncate_to(target)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (50, 50, 50)
    assert log.segments[0].base_offset == 0 and log.size_in_bytes() > 0
    assert len(log.read(50).view) == 0
    assert log.append_as_leader(values(1, 50)).first_offset == 50
    assert all_records(log)[0].offset == 50


def test_a_log_start_raised_to_where_it_already_is_reports_no_move(log):
    """``maybe_increment_log_start_offset`` answers True only when the start moved: the
    same offset again, or one the HW bounds to the current start, changes nothing."""
    for i in range(10):
        log.append_as_leader(values(10, 10 * i))
    log.update_high_watermark(30)
    assert log.maybe_increment_log_start_offset(30)
    assert not log.maybe_increment_log_start_offset(30)
    assert not log.maybe_increment_log_start_offset(70)  # bounded by the HW, 30: no move
    assert log.log_start_offset == 30


@pytest.mark.parametrize("key", ["retention.bytes", "retention.ms"])
def test_retention_bytes_0_deletes_everything_below_the_hw(tmp_path, clock, key):
    """retention.bytes=0 is a limit (Kafka's ``retentionSize >= 0``): every segment below
    the HW goes, the active one too once a new one is rolled; only -1 switches size
    retention off.  So is retention.ms=0 (``retentionMs >= 0``), for every segment whose
    newest record is older than now: taken as off, a topic set to keep nothing kept all."""
    log = Log.open(tmp_path / "t-0", {**SMALL, key: 0}, clock=clock)
    for i in range(60):
        log.append_as_leader(values(10, 10 * i), timestamp_ms=1000)
    log.update_high_watermark(log.log_end_offset)
    count = len(log.segments)
    assert count >= 3
    assert log.delete_old_segments() == count
    assert log.log_start_offset == log.log_end_offset == 600 and log.size_in_bytes() == 0
    log.close()


def test_flush_policy_counts_from_the_last_flush(tmp_path, clock):
    """flush.ms and flush.messages count from the last flush, not from the open or the
    first record: after a flush, appends under both limits stay unflushed."""
    log = Log.open(tmp_path / "t-0", {"flush.ms": 100, "flush.messages": 10}, clock=clock)
    log.append_as_leader(values(10))                   # flush.messages reached
    assert log.recovery_point == 10
    log.append_as_leader(values(3, 10))                # 3 since the flush
    assert log.recovery_point == 10
    clock.advance(100)
    log.append_as_leader(values(1, 13))                # flush.ms reached
    assert log.recovery_point == 14
    clock.advance(50)
    log.append_as_leader(values(1, 14))                # 50 ms and 1 record since the flush
    assert log.recovery_point == 14
    log.close()


def test_the_periodic_flush_check_leaves_a_flushed_log_alone(tmp_path, clock):
    """``maybe_flush`` flushes only when records wait: an idle log past flush.ms costs no
    fsync and reports none."""
    log = Log.open(tmp_path / "t-0", {"flush.ms": 100}, clock=clock)
    clock.advance(500)
    assert not log.maybe_flush()                       # nothing ever appended
    log.append_as_leader(values(1))                    # past flush.ms: flushed on append
    assert log.recovery_point == 1
    clock.advance(500)
    assert not log.maybe_flush()
    log.close()


def test_an_appends_max_timestamp_is_the_largest_of_its_batches_not_the_last(tmp_path):
    """LogAppendInfo.max_timestamp, as Kafka's, is the largest max timestamp of the batches
    appended, wherever it lies among them, for a follower's append and a leader's."""
    batches = [encode_batch([b"a", b"b"], base_offset=2 * i, timestamp_ms=ts)
               for i, ts in enumerate([1000, 3000, 2000])]
    assert _append_max_timestamps(tmp_path, b"".join(batches)) == (3000, 3000)


def test_an_append_of_batches_with_no_timestamps_reports_no_max_timestamp(tmp_path):
    """Records that carry no timestamp (NO_TIMESTAMP, -1, encode_batch's default) give an
    append a max timestamp of -1, as Kafka's LogAppendInfo has it, for a follower and a
    leader alike: not 0, which is a real time (the epoch)."""
    batches = [encode_batch([b"a", b"b"], base_offset=2 * i) for i in range(3)]
    assert _append_max_timestamps(tmp_path, b"".join(batches)) == (-1, -1)


def _append_max_timestamps(tmp_path, data):
    """LogAppendInfo.max_timestamp of ``data`` appended by a follower, then by a leader, each
    to a new log."""
    follower = Log.open(tmp_path / "t-0")
    leader = Log.open(tmp_path / "t-1")
    try:
        return (follower.append_as_follower(data).max_timestamp,
                leader.append_batches_as_leader(data, leader_epoch=0).max_timestamp)
    finally:
        follower.close()
        leader.close()


def test_a_clean_reopen_keeps_the_index_interval_running(tmp_path):
    """The bytes written since the last index entry are counted again at a clean open:
    the index entries then fall where an unbroken run of appends puts them."""
    cfg = {"segment.bytes": 1 << 20, "index.interval.bytes": 300}
    a, b = Log.open(tmp_path / "a", cfg), Log.open(tmp_path / "b", cfg)
    for i in range(7):
        a.append_as_leader(values(1, i), timestamp_ms=1000)
        b.append_as_leader(values(1, i), timestamp_ms=1000)
    a.close()
    a = Log.open(tmp_path / "a", cfg)
    assert a.last_recovery == []
    for i in range(7, 20):
        a.append_as_leader(values(1, i), timestamp_ms=1000)
        b.append_as_leader(values(1, i), timestamp_ms=1000)
    assert len(b.segments[0].offset_index.array()) >= 3
    assert a.segments[0].offset_index.array().tolist() == b.segments[0].offset_index.array().tolist()
    a.close()
    b.close()


def test_a_truncation_keeps_the_index_interval_running_from_the_last_entry_kept(tmp_path):
    """After a truncation the bytes since the last index entry left are counted from that
    entry, not from the segment's start: the next entries fall where an unbroken run of
    the same appends puts them (counted from the start, the first append after the cut
    took an entry at once)."""
    cfg = {"segment.bytes": 1 << 20, "index.interval.bytes": 300}
    cut, unbroken = Log.open(tmp_path / "a", cfg), Log.open(tmp_path / "b", cfg)
    for i in range(20):
        unbroken.append_as_leader(values(1, i), timestamp_ms=1000)
    for i in range(12):
        cut.append_as_leader(values(1, i), timestamp_ms=1000)
    assert cut.truncate_to(7)
    for i in range(7, 20):
        cut.append_as_leader(values(1, i), timestamp_ms=1000)
    assert len(unbroken.segments[0].offset_index.array()) >= 3
    assert cut.segments[0].offset_index.array().tolist() == unbroken.segments[0].offset_index.array().tolist()
    cut.close()
    unbroken.close()


def test_a_read_after_a_truncation_does_not_start_where_a_cut_batch_began(log):
    """The segment remembers where recent appends began; a truncation forgets them, or a
    read of an offset that began a cut batch starts inside the batch written over it."""
    for i in range(3):
        log.append_as_leader(values(5, 5 * i))
    assert log.truncate_to(5)
    log.append_as_leader(values(10, 5))
    got = log.read(10, 1 << 20)
    assert got.first_offset == 5
    assert [r.offset for r in decode_records(got.view)] == list(range(5, 15))


def test_a_damaged_header_just_before_an_indexed_cut_fails_the_truncation_first(tmp_path):
    """With an index entry at the cut batch itself, the tail the truncation leaves is walked
    from the entry before it: a damaged header there raises before anything is cut or a
    later segment deleted."""
    cfg = {"segment.bytes": 1024, "index.interval.bytes": 0}
    log, second = _reopened_with_batch_1_length_damaged(tmp_path, cfg)
    before = (log.log_end_offset, [s.base_offset for s in log.segments])
    assert log.last_recovery == [] and len(before[1]) > 1 and log.segments[0].next_offset > 3
    with pytest.raises(errors.KafkaStorageError, match=f"damaged batch header at position {second}"):
        log.truncate_to(2)
    assert (log.log_end_offset, [s.base_offset for s in log.segments]) == before
    assert [r.offset for r in decode_records(log.read(2, 1).view)] == [2]
    log.close()


def test_the_earliest_offset_is_the_log_start_not_the_first_segments_base(log):
    for i in range(10):
        log.append_as_leader(values(1, i))
    log.update_high_watermark(10)
    assert log.maybe_increment_log_start_offset(4)
    assert log.segments[0].base_offset == 0
    assert log.offset_for_timestamp(-2) == 4
    log.read(4)


def test_a_newest_record_stamped_0_ages_its_segment_from_the_epoch(tmp_path, clock):
    """Retention ages a segment by its newest record's timestamp whenever it has one, 0
    included (Kafka's ``largestTimestamp``: ``maxTimestampSoFar >= 0``); only a segment
    without one falls back to its creation time.  A record stamped 0 is decades old."""
    log = Log.open(tmp_path / "t-0", {**SMALL, "retention.ms": 500_000}, clock=clock)
    log.append_as_leader(values(10), timestamp_ms=0)
    log.roll()  # created at the clock's 1_000_000: by creation it would be 0 ms old
    log.append_as_leader(values(10, 10))
    log.update_high_watermark(log.log_end_offset)
    assert log.segments[0].max_timestamp == 0
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 10
    log.close()


def test_an_open_refused_by_the_lock_keeps_no_descriptor(tmp_path):
    """A second open of a locked directory is refused with the lock file closed again: a
    broker retrying the open (or a tool probing the directory) leaked one descriptor
    per attempt otherwise."""
    log = Log.open(tmp_path / "t-0")
    held = fds_under(tmp_path)
    for _ in range(3):
        with pytest.raises(errors.KafkaStorageError, match="already open"):
            Log.open(tmp_path / "t-0")
    assert fds_under(tmp_path) == held
    log.close()


def test_closing_an_empty_log_writes_no_time_index_entry(tmp_path):
    """Sealing an empty segment adds nothing to its time index (Kafka's maybeAppend
    compares the max timestamp, -1, with the empty index's own -1): a (-1, base) entry
    took a slot the reopened segment's first record needed, and lies in the file for
    any tool reading it."""
    path = tmp_path / "t-0"
    Log.open(path, SMALL).close()
    assert os.path.getsize(path / ("%020d.timeindex" % 0)) == 0
    log = Log.open(path, SMALL)
    assert log.segments[0].time_index.entries == 0
    log.close()


def test_a_read_whose_first_batch_crosses_the_max_offset_is_empty_at_the_offset_asked(log):
    """A consumer at 3 limited to a HW of 5 inside the batch 0..9 gets nothing (Kafka's
    LogSegment.read: an empty answer at the fetch offset), not an empty view of the
    segment's map starting at the batch's base."""
    log.append_as_leader(values(10))
    empty = log.read(3, 1 << 20, max_offset=5)
    assert len(empty) == 0 and empty.first_offset == 3
    assert not isinstance(empty.view.obj, mmap.mmap)  # holds no map of the segment


def test_an_empty_follower_append_changes_nothing(log):
    """An empty fetch answer (a follower caught up) is no append at all, as in Kafka's
    appendAsFollower with no batches: no error, the LEO and the epochs unchanged."""
    log.append_as_leader(values(2), leader_epoch=1)
    log.update_high_watermark(2)
    assert log.maybe_increment_log_start_offset(1)
    info = log.append_as_follower(b"")
    assert (info.first_offset, info.last_offset, info.num_records, info.num_batches) == (2, 1, 0, 0)
    assert (info.max_timestamp, info.valid_bytes, info.log_start_offset) == (-1, 0, 1)  # the log start, not a base
    assert log.log_end_offset == 2 and log.leader_epoch_cache.entries == [(1, 1)]


@pytest.mark.parametrize("stop", ["close", "crash"])
@pytest.mark.parametrize("query", [lambda log: log.read(0), lambda log: log.offset_for_timestamp(0)],
                         ids=["read", "offset_for_timestamp"])
def test_a_closed_or_crashed_log_refuses_reads(tmp_path, stop, query):
    # A read of a stopped log would map its files again, read-only: a broker answering
    # fetches (or ListOffsets) from a log it has let go of, and a descriptor nobody closes.
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append_as_leader(values(3))
    getattr(log, stop)()
    with pytest.raises(errors.KafkaStorageError, match="closed"):
        query(log)
    assert fds_under(tmp_path) == 0


def test_offset_for_timestamp_walks_on_into_the_next_segment_from_the_log_start(tmp_path, clock):
    # The first segment's records are new enough but all below the log start (retention
    # has not run yet): the search goes on from the log start, which is the next segment's
    # base, and finds the first record new enough there.
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    log.append_as_leader(values(10), timestamp_ms=5000)
    log.roll()
    log.append_as_leader(values(10, 10), timestamp_ms=1000)
    log.append_as_leader(values(10, 20), timestamp_ms=6000)
    log.update_high_watermark(30)
    assert log.maybe_increment_log_start_offset(10) and len(log.segments) == 2
    assert log.offset_for_timestamp(4000) == 20
    assert log.offset_for_timestamp(500) == 10
    assert log.offset_for_timestamp(6001) is None
    log.close()


def test_a_view_outlives_a_truncation_in_a_log_opened_by_a_relative_path(tmp_path, monkeypatch, clock):
    # Maps that readers still hold are found by the file's absolute name: a log dir given
    # relative to the working directory must not lose them (the cut batches zeroed under
    # an answer still on its way).
    monkeypatch.chdir(tmp_path)
    log = Log.open("t-0", SMALL, clock=clock)
    log.append_as_leader(values(10), leader_epoch=1)
    view = log.read(5, 1 << 20).view[:]
    sent = bytes(view)
    assert log.truncate_to(0)
    log.append_as_leader(values(10, 100), leader_epoch=2)
    assert bytes(view) == sent
    assert [r.value[:8] for r in all_records(log)] == [b"%08d" % i for i in range(100, 110)]
    log.close()
    del view


def test_a_roll_whose_trim_failed_trims_the_segment_at_the_next_roll(tmp_path, clock, monkeypatch):
    # The trim of the old segment fails (EIO): the roll raises and the segment is left
    # sealed at its preallocated length.  The next append opens it for write again and
    # rolls properly, trimming it to its data, rather than leave segment.bytes on disk.
    path = tmp_path / "t-0"
    log = Log.open(path, SMALL, clock=clock)
    while len(log.segments) == 1:
        log.append_as_leader(values(10, log.log_end_offset))
    log.truncate_to(log.segments[1].base_offset - 10)  # the first segment active again, one batch short
    log.append_as_leader(values(10, log.log_end_offset))  # full: the next batch rolls
    assert len(log.segments) == 1
    first = log.segments[0]
    real = os.ftruncate
    failures = []

    def failing(fd, length):
        if not failures:
            failures.append(length)
            raise OSError(5, "Input/output error")
        return real(fd, length)

    monkeypatch.setattr(os, "ftruncate", failing)
    leo = log.log_end_offset
    with pytest.raises(errors.KafkaStorageError, match="trimming"):
        log.append_as_leader(values(10, leo))
    assert failures and log.log_end_offset == leo
    log.append_as_leader(values(10, leo))
    assert len(log.segments) == 2 and log.segments[1].base_offset == leo
    assert os.path.getsize(first.log_file.filename) == first.size
    assert [r.value[:8] for r in all_records(log)] == [b"%08d" % i for i in range(leo + 10)]
    log.close()


def test_a_roll_whose_new_segment_cannot_be_made_leaves_no_file_of_it(tmp_path, clock, monkeypatch):
    # The new segment's .log cannot get its preallocated length (ENOSPC): the roll raises
    # and takes the half-made segment's file away with it, so a reopen finds no empty
    # segment at that base; a later roll makes it.
    import errno

    path = tmp_path / "t-0"
    log = Log.open(path, SMALL, clock=clock)
    for i in range(3):
        log.append_as_leader(values(10, 10 * i))
    real = os.ftruncate

    def no_space_for_new_files(fd, length):
        if os.fstat(fd).st_size == 0 and length:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, length)

    monkeypatch.setattr(os, "ftruncate", no_space_for_new_files)
    with pytest.raises(errors.KafkaStorageError, match="No space"):
        log.roll()
    assert sorted(n for n in os.listdir(path) if n.startswith("0")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    monkeypatch.undo()
    log.roll()
    log.append_as_leader(values(10, 30))
    assert [s.base_offset for s in log.segments] == [0, 30]
    assert [r.value[:8] for r in all_records(log)] == [b"%08d" % i for i in range(40)]
    log.close()


def test_a_full_time_index_rolls_the_segment_before_the_offset_index_is_full(tmp_path, clock):
    # The time index's 12-byte entries (one slot kept for the seal) run out before the
    # offset index's 8-byte ones when every indexed batch raises the max timestamp: the
    # segment rolls then, every append is taken and every timestamp found.
    log = Log.open(tmp_path / "t-0", {"segment.index.bytes": 48, "index.interval.bytes": 0}, clock=clock)
    for i in range(30):
        log.append_as_leader(values(1, i), timestamp_ms=1000 + i)
    assert len(log.segments) > 1
    assert all(s.time_index.entries <= 4 for s in log.segments)
    assert [log.offset_for_timestamp(1000 + i) for i in range(30)] == list(range(30))
    log.close()


def test_a_log_restarted_at_an_offset_gives_its_new_segment_the_clocks_age(tmp_path):
    # After truncate_fully_and_start_at the new segment's age counts from now (segment.ms),
    # not from the epoch: appends go on into it.
    from kreplica.runtime import ManualClock

    clock = ManualClock(1_700_000_000_000)
    log = Log.open(tmp_path / "t-0", {"segment.ms": 60_000}, clock=clock)
    log.append_as_leader(values(3))
    log.truncate_fully_and_start_at(100)
    for i in range(3):
        clock.advance(1000)
        log.append_as_leader(values(2, 100 + 2 * i))
    assert [s.base_offset for s in log.segments] == [100] and log.log_end_offset == 106
    log.close()


def test_an_append_answers_with_the_log_start_not_the_first_segments_base(tmp_path, clock):
    # KIP-107: a ProduceResponse carries the partition's log start offset, which a
    # DeleteRecords-style move (or a follower adopting its leader's) may put inside the
    # first segment, before retention removes anything.
    log = Log.open(tmp_path / "t-0", SMALL, clock=clock)
    log.append_as_leader(values(10))
    log.update_high_watermark(10)
    assert log.maybe_increment_log_start_offset(4) and log.segments[0].base_offset == 0
    assert log.append_as_leader(values(2, 10)).log_start_offset == 4
    batch = log.read(10).tobytes()
    assert log.append_batches_as_leader(batch, leader_epoch=0).log_start_offset == 4
    log.close()


def test_offset_for_timestamp_never_answers_a_record_below_the_log_start_in_the_batch_it_starts_in(tmp_path):
    # A producer batch's records carry their own timestamps: the newest may lie below the
    # log start in the batch that holds it, and the answer is then a later record, never
    # one a fetch would refuse.
    from kreplica.records import encode_batch

    log = Log.open(tmp_path / "t-0", {})
    stamps = [3000, 500, 500, 500, 600]
    log.append_batches_as_leader(encode_batch([(None, b"x", None, ts) for ts in stamps]), leader_epoch=0)
    log.append_batches_as_leader(encode_batch([(None, b"y", None, 2500)] * 5), leader_epoch=0)
    log.update_high_watermark(10)
    assert log.maybe_increment_log_start_offset(2)
    assert log.offset_for_timestamp(2000) == 5
    assert log.offset_for_timestamp(550) == 4
    log.close()


@pytest.mark.parametrize("stop", ["close", "crash"])
def test_retention_on_a_stopped_log_is_refused_and_deletes_no_file(tmp_path, clock, stop):
    # A retention pass racing a broker's shutdown must not delete segments of a log it
    # has let go of (the directory may already be open again in another Log).
    log = Log.open(tmp_path / "t-0", {**SMALL, "retention.ms": 1000}, clock=clock)
    for i in range(3):
        log.append_as_leader(values(10, 10 * i))
        log.roll()
    log.update_high_watermark(30)
    log.flush()
    before = sorted(os.listdir(tmp_path / "t-0"))
    getattr(log, stop)()
    with pytest.raises(errors.KafkaStorageError, match="closed"):
        log.delete_old_segments(clock.now_ms() + 10_000)
    assert sorted(p for p in os.listdir(tmp_path / "t-0") if p != ".kafka_cleanshutdown") == before


def test_abandoning_a_log_already_closed_changes_nothing(tmp_path):
    # A broker's crash after a partition's log was closed (its replica stopped) lets go
    # of that log again: a no-op, and its clean shutdown stands (no recovery at the open).
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append_as_leader(values(3))
    log.close()
    log.abandon()
    log.abandon()
    assert (tmp_path / "t-0" / ".kafka_cleanshutdown").exists() and fds_under(tmp_path) == 0
    log = Log.open(tmp_path / "t-0", SMALL)
    assert log.log_end_offset == 3 and not log.last_recovery
    log.close()


def test_a_log_is_never_restarted_at_a_negative_offset(log):
    log.append_as_leader(values(5))
    files = sorted(os.listdir(log.dir))
    with pytest.raises(ValueError):
        log.truncate_fully_and_start_at(-1)
    assert (log.log_start_offset, log.log_end_offset) == (0, 5) and sorted(os.listdir(log.dir)) == files
    assert len(all_records(log)) == 5


def test_a_power_loss_with_the_recovery_point_in_a_sealed_segment_loses_its_unflushed_tail(tmp_path):
    # The recovery point lies in a sealed segment longer than the active one: the power
    # loss zeroes that segment from the recovery point to its own end, so the reopened log
    # ends at the recovery point, not at the sealed segment's end.
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append_as_leader(values(10))
    log.flush()
    rp = log.recovery_point
    for i in range(1, 5):
        log.append_as_leader(values(10, 10 * i))
    log.roll()
    log.append_as_leader(values(1, 50))
    assert rp == 10 and len(log.segments) == 2 and log.segments[1].size < log.segments[0].size
    log.crash()
    log = Log.open(tmp_path / "t-0", SMALL)
    assert log.log_end_offset == rp and [r.offset for r in all_records(log)] == list(range(rp))
    log.close()


def _dir_state(path):
    return {name: (path / name).read_bytes() for name in sorted(os.listdir(path))}


@pytest.mark.parametrize("stop", ["close", "crash"])
@pytest.mark.parametrize("op", [
    lambda log: log.roll(),
    lambda log: log.truncate_to(5),
    lambda log: log.maybe_increment_log_start_offset(15),
    lambda log: log.append_as_follower(encode_batch(values(2), base_offset=log.log_end_offset, leader_epoch=4)),
    lambda log: log.append_batches_as_leader(encode_batch(values(2), base_offset=0), 5),
    lambda log: log.truncate_fully_and_start_at(40),
    lambda log: log.flush(),
    lambda log: log.crash(),
], ids=["roll", "truncate_to", "log_start", "follower_append", "producer_append", "restart", "flush", "crash"])
def test_a_stopped_log_refuses_every_change_and_leaves_its_files_alone(tmp_path, stop, op):
    # A broker's late call on a log it has let go of (a fetch answered, a replica
    # truncated, a log start adopted after the shutdown) must not open its files again
    # and write them: the directory may already belong to another Log.
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append_as_leader(values(10), leader_epoch=1)
    log.append_as_leader(values(10, 10), leader_epoch=3)
    log.update_high_watermark(20)
    log.flush()
    getattr(log, stop)()
    before = _dir_state(tmp_path / "t-0")
    with pytest.raises(errors.KafkaStorageError, match="closed"):
        op(log)
    assert _dir_state(tmp_path / "t-0") == before and fds_under(tmp_path) == 0


def test_an_append_stamped_with_no_leader_epoch_leaves_the_epoch_cache_alone(log):
    # -1 is Kafka's NO_PARTITION_LEADER_EPOCH: the batches go in stamped with it and the
    # cache learns nothing (Kafka's assign ignores an epoch below 0), on both leader paths.
    info = log.append_as_leader(values(3), leader_epoch=-1)
    assert (info.first_offset, info.last_offset) == (0, 2)
    more = log.append_batches_as_leader(encode_batch(values(2), base_offset=0), -1)
    assert (more.first_offset, more.last_offset) == (3, 4) and log.log_end_offset == 5
    assert log.leader_epoch_cache.entries == []
    assert [b.leader_epoch for b in decode_batches(log.read(0).view)] == [-1, -1]
    log.append_as_leader(values(1), leader_epoch=2)
    assert log.leader_epoch_cache.entries == [(2, 5)]


@pytest.mark.parametrize("kwargs, name, kind", [
    ({"recovery_point": 2.5}, "recovery_point", "float"),
    ({"log_start_offset": "3"}, "log_start_offset", "str"),
    ({"log_start_offset": 4.0}, "log_start_offset", "float"),
])
def test_an_open_given_a_checkpoint_offset_that_is_no_int_is_refused_before_any_file_is_made(tmp_path, kwargs,
                                                                                           name, kind):
    # The broker's recovery-point and log-start checkpoints hold ints; anything else is a
    # caller's bug, named before the directory is made, not an offset taken as given.
    with pytest.raises(TypeError, match=f"^{name} must be an int, not {kind}$"):
        Log.open(tmp_path / "t-0", SMALL, **kwargs)
    assert not (tmp_path / "t-0").exists()


def test_rolling_an_empty_active_segment_starts_its_age_over(tmp_path, clock):
    # Kafka's roll makes a new segment, created now, even when the active one is empty:
    # segment.ms then counts from the roll, not from when the empty segment was made.
    log = Log.open(tmp_path / "t-0", {**SMALL, "segment.ms": 10_000}, clock=clock)
    clock.advance(20_000)
    log.roll()
    assert [s.created_ms for s in log.segments] == [clock.now_ms()]
    log.append_as_leader(values(1))
    clock.advance(1_000)
    log.append_as_leader(values(1, 1))
    assert [s.base_offset for s in log.segments] == [0]
    log.close()


def test_a_segment_remembers_where_only_its_latest_appends_began(tmp_path, clock):
    """The follower's shortcut (a fetch from where its previous one began) keeps the
    latest RECENT_APPENDS appends, dropping the oldest: memory stays bounded however
    many batches a segment takes, and the older offsets are still found by the index."""
    from kreplica.log.log_segment import RECENT_APPENDS

    n = RECENT_APPENDS + 10
    lg = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, clock=clock)
    for i in range(n):
        lg.append_as_leader([b"%04d" % i])
    seg = lg.segments[-1]
    assert len(lg.segments) == 1
    assert list(seg._recent) == list(range(10, n))
    assert decode_records(lg.read(3, 1).view)[0].value == b"0003"
    assert decode_records(lg.read(n - 1, 1).view)[0].value == b"%04d" % (n - 1)
    lg.close()
