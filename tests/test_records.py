"""Record batch v2 codec: round trips, layout, scanning, restamping, bad input."""
import mmap
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreplica import errors
from kreplica.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    Record,
    batch_at,
    batch_fingerprints,
    batch_size,
    crc32c,
    decode_batches,
    decode_records,
    encode_batch,
    encode_batch_into,
    restamp_batches,
    scan_batches,
)

HEADER = struct.Struct(">qiibIhiqqqhii")


def header(buf, pos=0):
    return HEADER.unpack_from(buf, pos)


def test_layout_of_a_simple_batch():
    b = encode_batch([b"v0", (b"k1", b"v1")], base_offset=42, leader_epoch=7, timestamp_ms=1000)
    (base, length, epoch, magic, crc, attrs, last_delta, first_ts, max_ts,
     pid, pepoch, seq, count) = header(b)
    assert (base, length, epoch, magic) == (42, len(b) - 12, 7, 2)
    assert crc == crc32c(b[21:])
    assert (attrs, last_delta, first_ts, max_ts) == (0, 1, 1000, 1000)
    assert (pid, pepoch, seq, count) == (-1, -1, -1, 2)
    # first record: length 9 = attrs, ts delta 0, offset delta 0, key -1, value len 2 "v0", 0 headers
    assert b[HEADER_SIZE:HEADER_SIZE + 9] == bytes([16, 0, 0, 0, 1, 4]) + b"v0" + b"\x00"


def test_round_trip_of_every_item_shape():
    items = [
        b"plain",
        None,
        (b"k", b"v"),
        (None, b"v"),
        (b"k", None),
        (b"k", b"v", [("a", b"1"), ("b", None), ("é", b"")]),
        (b"k", b"v", None, 5000),
        (bytearray(b"ba"), memoryview(b"mv")),
    ]
    b = encode_batch(items, base_offset=10, timestamp_ms=4000)
    got = decode_records(b)
    assert [r.offset for r in got] == list(range(10, 18))
    assert [r.timestamp for r in got] == [4000] * 6 + [5000, 4000]
    assert [(r.key, r.value) for r in got] == [
        (None, b"plain"), (None, None), (b"k", b"v"), (None, b"v"), (b"k", None),
        (b"k", b"v"), (b"k", b"v"), (b"ba", b"mv"),
    ]
    assert got[5].headers == (("a", b"1"), ("b", None), ("é", b""))
    assert got[0].headers == ()
    rb = next(decode_batches(b))
    assert (rb.first_timestamp, rb.max_timestamp, rb.record_count) == (4000, 5000, 8)


def test_records_can_be_reencoded():
    first = decode_records(encode_batch([(b"k", b"v", [("h", b"x")], 7)], timestamp_ms=1))
    again = decode_records(encode_batch(first))
    assert again == first
    assert Record(0, 7, b"k", b"v", [("h", b"x")]) == first[0]


def test_no_timestamp_means_kafka_minus_one():
    rb = next(decode_batches(encode_batch([b"x"])))
    assert rb.first_timestamp == rb.max_timestamp == -1
    assert decode_records(encode_batch([b"x"]))[0].timestamp == -1
    # The exported constants say what the codec writes: a caller compares with them.
    assert (NO_TIMESTAMP, LOG_OVERHEAD, HEADER_SIZE) == (-1, 12, 61)
    # 0 is a timestamp (the epoch), not "none".
    assert next(decode_batches(encode_batch([b"x"], timestamp_ms=0))).max_timestamp == 0


def test_negative_timestamp_deltas_use_zigzag():
    items = [(None, b"a", None, 1000), (None, b"b", None, 10), (None, b"c", None, 2**40)]
    recs = decode_records(encode_batch(items))
    assert [r.timestamp for r in recs] == [1000, 10, 2**40]
    assert next(decode_batches(encode_batch(items))).max_timestamp == 2**40


def test_encode_rejects_bad_items():
    with pytest.raises(ValueError):
        encode_batch([])
    with pytest.raises(TypeError, match="record 1: value"):
        encode_batch([b"ok", "text"])
    with pytest.raises(TypeError, match="record 0: key"):
        encode_batch([(1, b"v")])
    with pytest.raises(TypeError, match="header key"):
        encode_batch([(None, b"v", [(b"bytes-key", b"x")])])
    with pytest.raises(TypeError, match="header value"):
        encode_batch([(None, b"v", [("k", "str")])])
    with pytest.raises(TypeError, match="headers must be a list or tuple"):
        encode_batch([(None, b"v", iter([("k", b"x")]))])
    with pytest.raises(TypeError, match="tuple item"):
        encode_batch([(b"only-one",)])
    with pytest.raises(ValueError, match="compression"):
        encode_batch([b"x"], attributes=1)


class _ShiftyHeaders(list):
    """Headers that read short the first two times and long ever after: the encoder
    used to measure them twice and write them on a third walk (a heap overflow)."""

    def __init__(self):
        super().__init__([("k", b"x")])
        self.walks = 0

    def __iter__(self):
        self.walks += 1
        return iter([("k", b"X" * (1 << 20))] if self.walks > 2 else list.__iter__(self))


class _LyingPair(tuple):
    """A header pair whose unpacking says something else than its items."""

    def __iter__(self):
        return iter(("k", b"Y" * (1 << 20)))


@pytest.mark.parametrize("encode", [
    lambda items: encode_batch(items, timestamp_ms=1),
    lambda items: bytes(memoryview(buf := bytearray(1 << 21))[:encode_batch_into(buf, 0, items, 0, -1, 1)]),
])
def test_headers_are_read_once_whatever_their_type_does(encode):
    expected = encode_batch([(None, b"v", [("k", b"x")])], timestamp_ms=1)
    shifty = _ShiftyHeaders()
    assert encode([(None, b"v", shifty)]) == expected
    assert shifty.walks == 2  # one snapshot per pass, each both measured and written
    assert encode([(None, b"v", [_LyingPair(("k", b"x"))])]) == expected
    assert encode([(None, b"v", (_LyingPair(("k", b"x")),))]) == expected

    class Pairs(tuple):  # a tuple subclass of headers is a tuple of headers
        pass

    assert encode([(None, b"v", Pairs([("k", b"x")]))]) == expected
    # A null header value is a header value on the checked path too.
    assert encode([(None, b"v", Pairs([("k", None)]))]) == encode_batch([(None, b"v", [("k", None)])],
                                                                       timestamp_ms=1)

    class Key(str):
        pass

    assert decode_records(encode([(None, b"v", [(Key("k"), b"x")])]))[0].headers == (("k", b"x"),)
    with pytest.raises(TypeError, match="header value must be bytes"):
        encode([(None, b"v", [_LyingPair(("k", 7))])])


def test_headers_that_change_between_the_passes_are_refused_not_overrun():
    class Growing(list):
        walks = 0

        def __iter__(self):
            Growing.walks += 1
            return iter([("k", b"Z" * Growing.walks)])

    with pytest.raises(RuntimeError, match="changed while it was being encoded"):
        encode_batch([(None, b"v", Growing())])

    class Shrinking(list):
        walks = 0

        def __iter__(self):
            Shrinking.walks += 1
            return iter([("k", b"Z" * (3 - Shrinking.walks))])

    # Written shorter than measured: refused too, not returned with a tail never written.
    with pytest.raises(RuntimeError, match="changed while it was being encoded"):
        encode_batch([(None, b"v", Shrinking())])
    assert Shrinking.walks == 2


@pytest.mark.parametrize("encode", [
    lambda items: encode_batch(items, timestamp_ms=1),
    lambda items: encode_batch_into(bytearray(1 << 10), 0, items, 0, -1, 1),
    lambda items: batch_size(items, 1),
])
def test_an_item_list_shortened_while_it_is_encoded_is_refused(encode):
    # A header list whose iteration drops the last item from the list being encoded:
    # every entry point reads the caller's list itself and refuses it, none encodes a copy.
    class Dropping(list):
        def __iter__(self):
            if len(items) > 1:
                items.pop()
            return list.__iter__(self)

    items = [(None, b"v", Dropping([("k", b"x")])), b"tail"]
    with pytest.raises(RuntimeError, match="the item list changed while it was being encoded"):
        encode(items)
    assert items == [items[0]]


def test_a_view_is_judged_by_the_bytes_under_it_now():
    # A view reads through to its buffer: a batch of no records whose magic is later
    # overwritten (a segment's bytes written again under a held view) is no longer valid.
    buf = bytearray(_raw_batch([], count=0, last_offset_delta=0))
    view = batch_at(buf)
    assert view.valid() and view.records() == []
    buf[16] = 1  # the magic, outside the CRC
    assert not view.valid()


def test_encode_into_a_buffer_and_report_the_space_needed():
    items = [b"a" * 100] * 10
    need = batch_size(items, 5)
    buf = bytearray(need + 20)
    assert encode_batch_into(buf, 20, items, 3, 1, 5) == need
    assert bytes(buf[20:]) == encode_batch(items, base_offset=3, leader_epoch=1, timestamp_ms=5)
    untouched = bytes(buf)
    assert encode_batch_into(buf, 21, items, 3, 1, 5) == -need
    assert bytes(buf) == untouched
    with pytest.raises(BufferError):
        encode_batch_into(b"read-only", 0, items, 0, 0, 0)


def test_encode_into_an_mmap(tmp_path):
    path = tmp_path / "seg"
    path.write_bytes(bytes(4096))
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 4096) as m:
        n1 = encode_batch_into(m, 0, [b"x", b"y"], 0, 0, 9)
        n2 = encode_batch_into(m, n1, [b"z"], 2, 0, 9)
        res = scan_batches(m)
        assert (res.count, res.valid_bytes, res.error) == (2, n1 + n2, None)
        assert [r.value for r in decode_records(m)] == [b"x", b"y", b"z"]
        del res


def three_batches():
    return b"".join(
        encode_batch([b"v%d" % i for i in range(n)], base_offset=o, leader_epoch=e,
                     timestamp_ms=ts)
        for n, o, e, ts in [(3, 0, 1, 100), (1, 3, 1, 200), (5, 4, 2, 150)]
    )


def test_scan_reports_every_batch():
    buf = three_batches()
    res = scan_batches(buf)
    assert res.count == 3 and res.error is None and res.valid_bytes == len(buf)
    assert res.base_offsets.tolist() == [0, 3, 4]
    assert res.last_offsets.tolist() == [2, 3, 8]
    assert res.max_timestamps.tolist() == [100, 200, 150]
    assert res.record_counts.tolist() == [3, 1, 5]
    assert res.leader_epochs.tolist() == [1, 1, 2]
    assert res.positions.tolist() == [0, res.sizes[0], res.sizes[0] + res.sizes[1]]
    assert res.sizes.sum() == len(buf)
    # Signed columns, as Kafka's fields are: arithmetic between them stays integral.
    assert [getattr(res, c).dtype for c in ("positions", "base_offsets", "last_offsets", "max_timestamps")] \
        == [np.int64] * 4
    assert [getattr(res, c).dtype for c in ("sizes", "record_counts", "leader_epochs")] == [np.int32] * 3
    assert (res.last_offsets - res.base_offsets).dtype == np.int64
    assert res.next_offset == 9 and type(res.next_offset) is int


def test_batch_fingerprints_are_the_scans_headers_with_each_batchs_stored_crc():
    buf = three_batches()
    res = scan_batches(buf)
    crcs = [header(buf, pos)[4] for pos in res.positions.tolist()]
    assert batch_fingerprints(buf) == list(zip([0, 3, 4], [2, 3, 8], [1, 1, 2], crcs))
    assert [type(x) for x in batch_fingerprints(buf)[0]] == [int] * 4
    # Like the scan it stops at a torn tail or zero fill, and reads any buffer.
    assert batch_fingerprints(buf[:-5]) == batch_fingerprints(buf)[:2]
    assert batch_fingerprints(memoryview(buf + bytes(100))) == batch_fingerprints(buf)
    assert batch_fingerprints(b"") == []
    # It does not check CRCs: a corrupt batch keeps its (stored) fingerprint.
    bad = bytearray(buf)
    bad[HEADER_SIZE + 1] ^= 1
    assert batch_fingerprints(bad) == batch_fingerprints(buf)
    # Nor the leader's record rules: a compacted batch (two records left of offsets 0..2)
    # is a replica's data like any other.
    compacted = _raw_batch([_raw_record(0), _raw_record(2)], last_offset_delta=2)
    assert scan_batches(compacted, check_records=True).count == 0
    assert batch_fingerprints(compacted) == [(0, 2, 0, header(compacted)[4])]


def test_scan_from_a_position_and_to_an_end():
    buf = three_batches()
    first = scan_batches(buf).sizes[0]
    res = scan_batches(buf, position=int(first))
    assert res.count == 2 and res.valid_bytes == len(buf) - first
    assert res.positions[0] == first
    cut = scan_batches(buf, 0, int(first) + 20)
    assert cut.count == 1 and cut.error.startswith("torn batch at position %d" % first)


def test_zero_fill_is_the_end_not_an_error():
    buf = three_batches()
    res = scan_batches(buf + bytes(10_000))
    assert (res.count, res.valid_bytes, res.error) == (3, len(buf), None)
    assert len(decode_records(buf + bytes(7))) == 9
    assert len(list(decode_batches(buf + bytes(100)))) == 3


def test_scan_stops_at_a_crc_mismatch_and_names_it():
    buf = bytearray(three_batches())
    second = scan_batches(buf).positions[1]
    buf[second + HEADER_SIZE + 1] ^= 0x01
    res = scan_batches(buf)
    assert res.count == 1 and res.valid_bytes == second
    assert res.error.startswith(f"crc mismatch at position {second}")
    assert res.error_position == second
    with pytest.raises(errors.CorruptMessage, match=f"crc mismatch at position {second}"):
        decode_records(buf)
    batches = list(decode_batches(buf))  # framing is fine, so iteration continues
    assert [b.valid() for b in batches] == [True, False, True]


@pytest.mark.parametrize("offset,value,reason", [
    (16, 1, "bad magic 1"),
    (11, 10, "bad batch length 10"),
    (57, 0x7f, "bad header"),
])
def test_scan_names_framing_errors(offset, value, reason):
    buf = bytearray(three_batches())
    buf[offset] = value
    res = scan_batches(buf)
    assert res.count == 0 and res.error.startswith(reason) and "position 0" in res.error
    with pytest.raises(errors.CorruptMessage, match=reason):
        decode_records(buf)
    with pytest.raises(errors.CorruptMessage, match=reason):
        list(decode_batches(buf))


def test_records_inside_a_crc_valid_batch_are_checked():
    good = bytearray(encode_batch([b"abc", b"def"], timestamp_ms=1))
    good[HEADER_SIZE] = 30  # first record claims to be longer than it is
    good[17:21] = struct.pack(">I", crc32c(bytes(good[21:])))
    assert scan_batches(good).error is None
    res = scan_batches(good, check_records=True)
    assert res.count == 0 and res.error.startswith("bad record 0")
    with pytest.raises(errors.InvalidRecord, match="position 0"):
        decode_records(good)
    assert not next(decode_batches(good)).valid()


def _sparse_batch(path, batch_length):
    """A file holding one batch header with ``batch_length`` and the rest of that batch as a
    hole (2 GiB files cost no disk); returns it mapped read-only."""
    hdr = bytearray(HEADER_SIZE)
    struct.pack_into(">qiib", hdr, 0, 0, batch_length, 0, 2)
    with open(path, "wb") as f:
        f.truncate(12 + batch_length)
        f.write(hdr)
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def test_a_batch_length_whose_size_overflows_an_int32_is_a_bad_length(tmp_path):
    # 12 + batchLength wrapped negative: sizes went negative and the batch iterator
    # stepped backwards, out of the buffer (a segfault in decode_batches and dump-log).
    with _sparse_batch(tmp_path / "big.log", 0x7FFFFFFF) as mm:
        res = scan_batches(mm, check_crc=False)
        assert (res.count, res.error) == (0, "bad batch length 2147483647 at position 0")
        with pytest.raises(errors.CorruptMessage, match="bad batch length 2147483647"):
            list(decode_batches(mm))
    # The largest batch whose whole size still fits an int32 frames as before.
    with _sparse_batch(tmp_path / "edge.log", 0x7FFFFFFF - 12) as mm:
        assert scan_batches(mm, check_crc=False).sizes.tolist() == [0x7FFFFFFF]
        assert [b.size for b in decode_batches(mm)] == [0x7FFFFFFF]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=6), st.text(max_size=4).map(lambda s: s.encode("utf-8", "surrogatepass")),
                 st.sampled_from([b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe6\x97",
                                  b"\xf0\x9f\x99\x82", b"\xef\xbf\xbf"])))
def test_leader_checks_take_a_header_key_exactly_when_the_decoder_does(key):
    # The leader's C check and the decoder (Python's strict UTF-8) must agree: a key only
    # one of them takes is either refused for nothing or acknowledged and unreadable.
    b = bytearray(encode_batch([(None, b"v", [("#" * len(key), b"h")])], timestamp_ms=1))
    at = b.index(b"#" * len(key) + b"\x02h") if key else 0
    b[at:at + len(key)] = key
    b[17:21] = struct.pack(">I", crc32c(bytes(b[21:])))
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        assert scan_batches(b, check_records=True).error == (
            "header key of record 0 is not UTF-8 in the batch at position 0")
        assert not next(decode_batches(b)).valid()
        with pytest.raises(errors.InvalidRecord, match="not UTF-8"):
            decode_records(b)
    else:
        assert scan_batches(b, check_records=True).error is None and next(decode_batches(b)).valid()
        assert decode_records(b)[0].headers == ((key.decode(), b"h"),)


def test_restamp_assigns_offsets_and_epoch_without_touching_the_crc():
    buf = bytearray(three_batches())
    before = scan_batches(buf)
    assert restamp_batches(buf, 1000, 9) == 1008
    after = scan_batches(buf)
    assert after.error is None
    assert after.base_offsets.tolist() == [1000, 1003, 1004]
    assert after.leader_epochs.tolist() == [9, 9, 9]
    assert [r.offset for r in decode_records(buf)] == list(range(1000, 1009))
    assert after.sizes.tolist() == before.sizes.tolist()


def test_restamp_leaves_bad_input_untouched():
    buf = bytearray(three_batches())
    buf[-1:] = b""  # torn last batch
    snapshot = bytes(buf)
    with pytest.raises(errors.CorruptMessage, match="torn batch at position"):
        restamp_batches(buf, 50, 1)
    assert bytes(buf) == snapshot
    with pytest.raises(BufferError):
        restamp_batches(bytes(buf), 0, 0)


def test_restamp_counts_a_compacted_batchs_offsets_by_its_last_offset_delta():
    # Compaction leaves batches with fewer records than offsets: lastOffsetDelta keeps the
    # batch's last offset, so the next batch is placed after it, not after the records
    # that are left (Kafka's in-place assignment counts offsets the same way).
    compacted = _raw_batch([_raw_record(0, value=b"a"), _raw_record(3, value=b"d")], last_offset_delta=4)
    buf = bytearray(compacted + encode_batch([b"f"], timestamp_ms=1))
    assert restamp_batches(buf, 100, 7) == 105
    after = scan_batches(buf)
    assert (after.error, after.base_offsets.tolist(), after.leader_epochs.tolist()) == (None, [100, 105], [7, 7])
    assert [(r.offset, r.value) for r in decode_records(buf)] == [(100, b"a"), (103, b"d"), (105, b"f")]


def test_batch_views_are_zero_copy_and_carry_the_header():
    buf = three_batches()
    batches = list(decode_batches(buf))
    assert [b.base_offset for b in batches] == [0, 3, 4]
    assert [b.last_offset for b in batches] == [2, 3, 8]
    b = batches[2]
    assert (b.leader_epoch, b.magic, b.record_count, b.compression) == (2, 2, 5, "none")
    assert b.crc == header(buf, b.position)[4]
    assert isinstance(b.data, memoryview) and b.data.obj is buf
    assert bytes(b.data) == buf[b.position:b.position + b.size]
    assert [r.value for r in b.records()] == [b"v%d" % i for i in range(5)]
    assert batch_at(buf, b.position).base_offset == 4


def test_decode_reads_gzip_batches_and_refuses_unknown_codecs():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    for i in range(50):
        builder.append(i, 1000 + i, None, b"payload" * 10, [])
    buf = bytes(builder.build())
    assert next(decode_batches(buf)).compression == "gzip"
    assert [r.offset for r in decode_records(buf)] == list(range(50))
    snappy = bytearray(buf)
    snappy[22] = (snappy[22] & ~7) | 2
    snappy[17:21] = struct.pack(">I", crc32c(bytes(snappy[21:])))
    with pytest.raises(errors.InvalidRecord, match="snappy"):
        decode_records(snappy)


def _outside_crc(starts, pos):
    """baseOffset and partitionLeaderEpoch lie outside the CRC by design (restamped in place)."""
    rel = pos - max(s for s in starts if s <= pos)
    return rel < 8 or 12 <= rel < 16


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_byte_flips_are_detected(data):
    clean = three_batches()
    starts = scan_batches(clean).positions.tolist()
    buf = bytearray(clean)
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(buf) - 1), st.integers(1, 255)),
                               min_size=1, max_size=4, unique_by=lambda f: f[0]))
    for pos, mask in flips:
        buf[pos] ^= mask
    damaged = [pos for pos, _ in flips if not _outside_crc(starts, pos)]
    res = scan_batches(buf)
    if not damaged:
        assert res.count == 3 and res.error is None
        return
    first_bad = max(s for s in starts if s <= min(damaged))
    assert res.error is not None and res.valid_bytes <= first_bad
    assert res.count == starts.index(first_bad)
    with pytest.raises((errors.CorruptMessage, errors.InvalidRecord)):
        decode_records(buf)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300),
                          st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)),
                                   max_size=3)),
                min_size=1, max_size=30),
       st.integers(0, 2**40), st.integers(-1, 2**31 - 1), st.integers(-1, 2**45))
def test_round_trip_property(items, base_offset, epoch, ts):
    b = encode_batch(items, base_offset=base_offset, leader_epoch=epoch, timestamp_ms=ts)
    assert len(b) == batch_size(items, ts)
    res = scan_batches(b, check_records=True)
    assert res.error is None and res.count == 1
    recs = decode_records(b)
    assert [(r.key, r.value, r.headers) for r in recs] == [(k, v, tuple(h)) for k, v, h in items]
    assert [r.offset for r in recs] == list(range(base_offset, base_offset + len(items)))
    assert all(r.timestamp == ts for r in recs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=300),
                          st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300)),
                          st.tuples(st.none() | st.binary(max_size=40), st.binary(max_size=30),
                                    st.none(), st.integers(0, 2**42))),
                min_size=1, max_size=40),
       st.none() | st.integers(-1, 2**42))
def test_plain_items_encode_as_the_general_path_does(items, ts):
    """Bare values and (key, value) pairs take the encoder's inline path; the same records
    spelled as (key, value, headers[, timestamp]) take the general one: same bytes."""
    general = [(None, i, None) if isinstance(i, bytes) else (i[0], i[1], None) if len(i) == 2 else i
               for i in items]
    assert encode_batch(items, base_offset=7, leader_epoch=3, timestamp_ms=ts) == \
        encode_batch(general, base_offset=7, leader_epoch=3, timestamp_ms=ts)


def test_decode_records_keeps_an_offset_range():
    buf = three_batches()  # offsets 0..8 in batches [0-2] [3] [4-8]
    assert [r.offset for r in decode_records(buf, start_offset=2)] == list(range(2, 9))
    assert [r.offset for r in decode_records(buf, stop_offset=5)] == list(range(0, 5))
    assert [r.offset for r in decode_records(buf, start_offset=3, stop_offset=4)] == [3]
    assert decode_records(buf, start_offset=9) == []
    assert decode_records(buf, stop_offset=0) == []  # 0 is a stop like any other, not "none"


def test_record_constructor_checks_types_and_pickles():
    import pickle

    r = Record(5, 6, bytearray(b"k"), memoryview(b"v"), [("h", bytearray(b"x"))])
    assert (r.key, r.value, r.headers) == (b"k", b"v", (("h", b"x"),))
    assert pickle.loads(pickle.dumps(r)) == r
    assert hash(r) == hash(Record(5, 6, b"k", b"v", (("h", b"x"),)))
    assert r != Record(5, 6, b"k", b"v")
    with pytest.raises(TypeError):
        Record(0, 0, "str key", None)
    with pytest.raises(TypeError):
        Record(0, 0, None, None, [(b"bytes header key", b"")])
    with pytest.raises(TypeError, match="^header value must be bytes-like or None, not str$"):
        Record(0, 0, None, None, [("h", "text")])
    assert "offset=5" in repr(r)


def _fix_crcs(buf):
    """Recomputes each batch's CRC so damage reaches the record parser."""
    pos = 0
    while pos + HEADER_SIZE <= len(buf):
        size = 12 + struct.unpack_from(">i", buf, pos + 8)[0]
        if size < HEADER_SIZE or pos + size > len(buf):
            return
        struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21:pos + size])))
        pos += size


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_damaged_records_behind_a_valid_crc_raise_never_crash(data):
    buf = bytearray(encode_batch(
        [(b"key", b"value" * 3, [("h", b"hv")]), None, (None, b"x" * 200)], timestamp_ms=9))
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(HEADER_SIZE, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    _fix_crcs(buf)
    deep = scan_batches(buf, check_records=True)
    try:
        recs = decode_records(buf)
    except errors.InvalidRecord as e:
        # The C framing check and the decoder agree, except that only the decoder
        # (which builds str keys) notices header keys that are not UTF-8.
        if "UTF-8" not in str(e):
            assert deep.error is not None and deep.error.startswith("bad record")
    else:
        # Damage the parser accepts must still frame exactly: 3 records, offsets 0..2.
        assert deep.error is None
        assert [r.offset for r in recs] == [0, 1, 2]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_arbitrary_bytes_raise_kafka_errors_only(blob, with_header):
    buf = bytearray(blob)
    if with_header and len(buf) >= 17:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        buf[16] = 2
        _fix_crcs(buf)
    res = scan_batches(buf, check_records=True)
    assert res.valid_bytes <= len(buf)
    try:
        decode_records(buf)
        list(decode_batches(buf))
    except (errors.CorruptMessage, errors.InvalidRecord) as e:
        assert "position" in str(e)


def test_any_iterable_of_items_encodes_like_a_list():
    items = [b"a", (b"k", b"b")]
    expected = encode_batch(items, timestamp_ms=3)
    assert encode_batch(tuple(items), timestamp_ms=3) == expected
    assert encode_batch(iter(items), timestamp_ms=3) == expected
    assert batch_size(iter(items), 3) == len(expected)
    buf = bytearray(len(expected))
    assert encode_batch_into(buf, 0, iter(items), 0, -1, 3) == len(expected) and buf == expected

    class Lazy(list):
        """A list subclass whose iteration gives its items (a lazy view, say)."""

        def __iter__(self):
            return iter([b"a", (b"k", b"b")])

    assert encode_batch(Lazy([1]), timestamp_ms=3) == expected


def test_log_append_time_gives_every_record_the_max_timestamp():
    b = encode_batch([(None, b"a", None, 5), (None, b"b", None, 9)], attributes=0x08)
    rb = next(decode_batches(b))
    assert rb.timestamp_type == 1 and rb.max_timestamp == 9
    assert [r.timestamp for r in decode_records(b)] == [9, 9]


def test_leader_checks_want_the_count_to_match_the_offset_range():
    # A compacted batch keeps its offset range but fewer records: readable, yet not
    # something a producer may send (Kafka's leader refuses it).
    buf = bytearray(encode_batch([b"a", b"b", b"c"], timestamp_ms=1))
    struct.pack_into(">i", buf, 23, 5)  # lastOffsetDelta 5 for 3 records
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    assert scan_batches(buf).error is None
    assert scan_batches(buf).last_offsets.tolist() == [5]
    res = scan_batches(buf, check_records=True)
    assert res.count == 0 and res.error.startswith("bad header at position 0: record count 3")
    assert [r.offset for r in decode_records(buf)] == [0, 1, 2]
    assert next(decode_batches(buf)).valid()


# ---- hand-built batches: fields the encoder never writes wrong, written wrong on purpose

def _varint(n):
    """Kafka's varint by hand: zigzag to unsigned, then 7 bits a byte, low group first."""
    z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


def _field(b):
    return _varint(-1) if b is None else _varint(len(b)) + b


def _raw_record(offset_delta, ts_delta=0, value=b"v", headers=(), body=None):
    """One record (its length varint first); ``headers`` are (raw key bytes, value) pairs."""
    if body is None:
        body = (b"\x00" + _varint(ts_delta) + _varint(offset_delta) + _field(None) + _field(value)
                + _varint(len(headers)) + b"".join(_field(k) + _field(v) for k, v in headers))
    return _varint(len(body)) + body


def _raw_batch(pieces, count=None, last_offset_delta=None, base_timestamp=0, max_timestamp=0,
               attributes=0):
    """A v2 batch around these record bytes, its CRC right whatever they say."""
    run = b"".join(pieces)
    n = len(pieces) if count is None else count
    lod = n - 1 if last_offset_delta is None else last_offset_delta
    b = bytearray(HEADER.pack(0, HEADER_SIZE - 12 + len(run), 0, 2, 0, attributes, lod,
                              base_timestamp, max_timestamp, -1, -1, -1, n) + run)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


def test_the_hand_built_batches_are_the_encoders_bytes():
    assert _raw_batch([_raw_record(0, value=b"a"), _raw_record(1, value=b"b", headers=[(b"h", None)])],
                      base_timestamp=5, max_timestamp=5) == \
        encode_batch([b"a", (None, b"b", [("h", None)])], leader_epoch=0, timestamp_ms=5)
    assert _varint(-1) == b"\x01" and _varint(63) == b"\x7e" and _varint(64) == b"\x80\x01"


@pytest.mark.parametrize("n", [63, 64, 8191, 8192])
def test_a_length_at_a_varint_width_boundary_encodes_as_kafka_spells_it(n):
    # 63 and 8191 are the longest values whose zigzag varint takes one and two bytes.
    assert encode_batch([b"x" * n], leader_epoch=0, timestamp_ms=0) == \
        _raw_batch([_raw_record(0, value=b"x" * n)])
    assert batch_size([b"x" * n], 0) == len(_raw_batch([_raw_record(0, value=b"x" * n)]))


def test_a_general_records_offset_delta_past_63_takes_two_bytes():
    # Records with headers (or given as Record objects) take the encoder's general path;
    # from the 65th on, the offset delta's zigzag varint is two bytes long, as Kafka spells it.
    items = [(None, b"v", [("h", None)])] * 65
    raw = _raw_batch([_raw_record(i, headers=[(b"h", None)]) for i in range(65)],
                     base_timestamp=5, max_timestamp=5)
    assert batch_size(items, 5) == len(raw)
    assert encode_batch(items, leader_epoch=0, timestamp_ms=5) == raw
    records = [Record(0, 5, None, b"v", [("h", None)])] * 65
    assert encode_batch(records, leader_epoch=0) == raw


def test_a_record_subclass_is_encoded_as_the_record_it_is():
    class Tagged(Record):
        pass

    item = Tagged(0, 9, b"k", b"v", [("h", b"x")])
    assert encode_batch([item], timestamp_ms=1) == encode_batch([Record(0, 9, b"k", b"v", [("h", b"x")])],
                                                                timestamp_ms=1)
    assert decode_records(encode_batch([item, b"w"], timestamp_ms=1))[0] == Record(0, 9, b"k", b"v",
                                                                                   [("h", b"x")])


def test_a_batch_of_records_of_the_least_size_frames():
    # Null key and value, no headers, deltas below 64: seven bytes a record, the least the
    # header check allows for its record count.
    buf = encode_batch([None] * 3, timestamp_ms=1)
    assert len(buf) == HEADER_SIZE + 3 * 7
    assert scan_batches(buf, check_records=True).error is None
    assert [r.value for r in decode_records(buf)] == [None] * 3


@pytest.mark.parametrize("keep", [61, 30, 17])
def test_another_magic_is_named_however_little_of_the_batch_is_there(keep):
    # The magic byte is checked as soon as it is there: a header-only batch (61 bytes, as
    # compaction leaves them) of another magic at the end of the data is not a v2 batch, and
    # neither is a cut-off header whose magic byte made it; both are "bad magic", not a
    # batch taken or a torn one.
    first = encode_batch([b"a"], timestamp_ms=1)
    empty = bytearray(encode_batch([b"x"], base_offset=1, timestamp_ms=1)[:HEADER_SIZE])
    struct.pack_into(">i", empty, 8, HEADER_SIZE - 12)
    struct.pack_into(">i", empty, 57, 0)
    empty[16] = 1
    struct.pack_into(">I", empty, 17, crc32c(bytes(empty[21:])))
    buf = first + bytes(empty[:keep])
    for check_crc in (False, True):
        res = scan_batches(buf, check_crc=check_crc)
        assert res.count == 1 and res.error.startswith(f"bad magic 1 at position {len(first)}")


@pytest.mark.parametrize("count", [4, 5, 10, 2**30, 2**31 - 1])
def test_a_record_count_more_records_than_the_batch_could_hold_is_a_bad_header(count):
    # Three records of the least size (21 bytes after the 61-byte header): a CRC-valid
    # header claiming even one more is refused by framing alone, before any reader sizes
    # anything by the count.  The bound is on the bytes after the whole header, not after
    # the 12 bytes before batchLength (which would let seven records more through), and
    # the least bytes a count needs are counted past 32 bits (2**30 records need 7 GiB,
    # which in 32 bits wraps negative and would pass any batch).
    buf = bytearray(encode_batch([None] * 3, timestamp_ms=1))
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, count - 1)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    res = scan_batches(buf)
    assert res.count == 0 and res.error.startswith(f"bad header at position 0: record count {count}")
    with pytest.raises(errors.CorruptMessage, match="bad header at position 0"):
        decode_records(buf)


def _refused_by_leader_and_decoder(buf: bytes, scan_error: str, decode_match: str) -> None:
    """The leader's record check names ``scan_error``; the lazy decoder marks the batch
    invalid; decoding its records raises InvalidRecord matching ``decode_match``."""
    assert scan_batches(buf, check_records=True).error == scan_error
    assert not next(decode_batches(buf)).valid()
    with pytest.raises(errors.InvalidRecord, match=decode_match):
        decode_records(buf)


@pytest.mark.parametrize("body", [
    # offsetDelta 0 spelled in six bytes: an int32 varint takes at most five
    b"\x00\x00" + b"\x80\x80\x80\x80\x80\x00" + _field(None) + _field(b"v") + b"\x00",
    # timestampDelta 0 spelled in eleven bytes: an int64 varint takes at most ten
    b"\x00" + b"\x80" * 10 + b"\x00" + b"\x00" + _field(None) + _field(b"v") + b"\x00",
], ids=["varint", "varlong"])
def test_an_overlong_varint_is_a_bad_record(body):
    buf = _raw_batch([_raw_record(0, body=body)])
    _refused_by_leader_and_decoder(buf, "bad record 0 in the batch at position 0", "bad record 0")


def test_a_timestamp_delta_of_ten_bytes_and_an_offset_delta_of_five_are_read():
    # The widest varints the types allow: an int64 timestampDelta past 2**62 takes all ten
    # bytes of a varlong, an int32 offsetDelta past 2**27 all five of a varint (a compacted
    # batch keeps such gaps).  Kafka's reader takes both; so do the leader and the decoder.
    far = 2**62
    assert len(_varint(far)) == 10
    buf = _raw_batch([_raw_record(0, ts_delta=far)], base_timestamp=1, max_timestamp=far + 1)
    assert scan_batches(buf, check_records=True).error is None
    assert [r.timestamp for r in decode_records(buf)] == [far + 1]
    gap = 2**28
    assert len(_varint(gap)) == 5
    buf = _raw_batch([_raw_record(0), _raw_record(gap)], last_offset_delta=gap)
    assert scan_batches(buf).error is None and next(decode_batches(buf)).valid()
    assert [r.offset for r in decode_records(buf)] == [0, gap]


@pytest.mark.parametrize("record, header", [(0, 1), (1, 0), (2, 2)])
def test_the_leader_checks_every_header_key_of_every_record(record, header):
    keys = [[b"a", b"b", b"c"] for _ in range(3)]
    keys[record][header] = b"\xff"
    buf = _raw_batch([_raw_record(i, headers=[(k, b"h") for k in ks]) for i, ks in enumerate(keys)])
    _refused_by_leader_and_decoder(buf, f"header key of record {record} is not UTF-8 in the batch at position 0",
                                   "not UTF-8")


def test_bytes_after_the_last_record_are_refused_by_the_leader_and_the_decoder():
    buf = _raw_batch([_raw_record(0), _raw_record(1), b"\x00\x00"], count=2)
    assert scan_batches(buf).error is None  # the framing and the CRC are fine
    _refused_by_leader_and_decoder(buf, "bad record 2 in the batch at position 0",
                                   "2 bytes after the last record of the batch at position 0")


def test_an_offset_delta_past_the_last_offset_delta_is_refused():
    # A compacted batch may skip deltas (0, 2 of 0..2), never go past lastOffsetDelta.
    assert [r.offset for r in decode_records(_raw_batch([_raw_record(0), _raw_record(2)], last_offset_delta=2))] == [0, 2]
    buf = _raw_batch([_raw_record(0), _raw_record(2)], last_offset_delta=1)
    _refused_by_leader_and_decoder(buf, "bad record 1 in the batch at position 0",
                                   "bad record 1 in the batch at position 0")


def test_the_leaders_max_timestamp_is_the_records_own_even_below_the_base_timestamp():
    # The header's baseTimestamp (1000) is above every record: deltas -100 and -50.
    buf = _raw_batch([_raw_record(0, ts_delta=-100), _raw_record(1, ts_delta=-50)],
                     base_timestamp=1000, max_timestamp=1000)
    assert [r.timestamp for r in decode_records(buf)] == [900, 950]
    assert scan_batches(buf).max_timestamps.tolist() == [1000]  # the header's, unchecked
    assert scan_batches(buf, check_records=True).max_timestamps.tolist() == [950]


def test_a_negative_last_offset_delta_is_a_bad_header():
    buf = bytearray(encode_batch([b"a"], base_offset=10, timestamp_ms=1))
    struct.pack_into(">i", buf, 23, -1)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    res = scan_batches(buf)
    assert (res.count, res.error) == (0, "bad header at position 0: record count 1, batch length or last offset delta -1")
    with pytest.raises(errors.CorruptMessage, match="bad header at position 0"):
        decode_records(buf)
    with pytest.raises(errors.CorruptMessage, match="bad header at position 0"):
        list(decode_batches(buf))


def test_a_header_whose_offset_and_length_were_zeroed_is_corrupt_not_zero_fill():
    # Zero fill is a whole header of zeros; here magic, CRC and the rest are still there.
    buf = bytearray(three_batches())
    second = int(scan_batches(buf).positions[1])
    buf[second:second + 12] = bytes(12)
    res = scan_batches(buf)
    assert (res.count, res.error) == (1, f"bad batch length 0 at position {second}")
    with pytest.raises(errors.CorruptMessage, match=f"bad batch length 0 at position {second}"):
        decode_records(buf)


def test_a_partial_trailing_batch_is_refused_not_dropped():
    buf = three_batches()
    res = scan_batches(buf)
    last, size = int(res.positions[2]), int(res.sizes[2])
    torn = f"torn batch at position {last}: needs {size} bytes, {size - 1} available"
    assert scan_batches(buf[:-1]).error == torn
    with pytest.raises(errors.CorruptMessage, match=torn):
        decode_records(buf[:-1])
    with pytest.raises(errors.CorruptMessage, match=torn):
        list(decode_batches(buf[:-1]))


def test_the_crc_of_a_gzip_batch_is_checked_like_any_other():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    for i in range(20):
        builder.append(i, 1000 + i, None, b"payload" * 10, [])
    buf = bytearray(builder.build())
    buf[-12] ^= 0x40  # inside the compressed records (before gzip's own CRC and size)
    res = scan_batches(buf)
    assert res.count == 0 and res.error.startswith("crc mismatch at position 0")
    with pytest.raises(errors.CorruptMessage, match="crc mismatch at position 0"):
        decode_records(buf)
    assert not next(decode_batches(buf)).valid()


def test_a_leader_takes_transactional_batches_and_refuses_any_control_batch():
    # The transactional bit (0x10) is a producer's to set; the control bit (0x20) is not,
    # with or without the transactional one.
    txn = encode_batch([b"a", b"b"], attributes=0x10, producer_id=7, producer_epoch=0,
                       base_sequence=0, timestamp_ms=5)
    assert scan_batches(txn, check_records=True).error is None
    for attributes in (0x20, 0x30):
        control = encode_batch([(b"\x00\x00\x00\x00", b"\x00" * 6)], attributes=attributes,
                               producer_id=7, producer_epoch=0, timestamp_ms=5)
        assert scan_batches(control).error is None
        assert scan_batches(control, check_records=True).error == (
            "control batch at position 0: clients may not write control records")


# ---- thirty-fourth review: record codec mutants, second pass

def _at_offset(batch, base_offset):
    """``batch`` moved to ``base_offset`` (outside the CRC, as a leader restamps it)."""
    b = bytearray(batch)
    struct.pack_into(">q", b, 0, base_offset)
    return bytes(b)


def test_a_batch_from_stop_offset_on_is_skipped_without_parsing_its_records():
    good = encode_batch([b"a", b"b", b"c"], timestamp_ms=1)  # offsets 0..2
    bad = _at_offset(_raw_batch([_raw_record(0), b"\x00\x00"], count=1), 3)  # CRC right, records not
    assert [r.value for r in decode_records(good + bad, stop_offset=3)] == [b"a", b"b", b"c"]
    with pytest.raises(errors.InvalidRecord, match="after the last record of the batch at position"):
        decode_records(good + bad, stop_offset=4)


@pytest.mark.parametrize("n", [63, 64, 200])
def test_a_header_count_at_a_varint_width_boundary_encodes_as_kafka_spells_it(n):
    # A header count of 64 is the first whose zigzag varint takes two bytes.
    headers = [("h%d" % i, b"") for i in range(n)]
    buf = encode_batch([(None, b"v", headers)], leader_epoch=0, timestamp_ms=0)
    assert buf == _raw_batch([_raw_record(0, headers=[(k.encode(), v) for k, v in headers])])
    assert batch_size([(None, b"v", headers)], 0) == len(buf)
    assert decode_records(buf)[0].headers == tuple(headers)


def _gzip_batch(run, count, cut=0):
    import gzip

    data = gzip.compress(run)
    return _raw_batch([data[:len(data) - cut]], count=count, attributes=1)


def test_a_gzip_stream_cut_before_its_trailer_is_corrupt():
    # Every record is in the deflate data; only gzip's CRC-32 and size (8 bytes) are missing,
    # which Kafka's GZIPInputStream reads as an unexpected end of the stream.
    run = b"".join(_raw_record(i, value=b"v%d" % i) for i in range(3))
    assert [r.value for r in decode_records(_gzip_batch(run, 3))] == [b"v0", b"v1", b"v2"]
    cut = _gzip_batch(run, 3, cut=8)
    with pytest.raises(errors.CorruptMessage, match="gzip data of the batch at position 0 is truncated"):
        decode_records(cut)
    with pytest.raises(errors.CorruptMessage, match="truncated"):
        next(decode_batches(cut)).records()


def test_every_batch_view_is_exactly_its_own_bytes():
    buf = three_batches() + bytes(50)
    views = list(decode_batches(buf))
    assert [len(b.data) for b in views] == [b.size for b in views]
    assert b"".join(bytes(b.data) for b in views) == buf[:-50]
    assert all(b.data.obj is buf for b in views)


def test_a_compacted_batch_ends_at_its_last_offset_delta_not_its_record_count():
    # Compaction keeps lastOffsetDelta: offsets 10 and 12 of 10..12, two records.
    buf = _at_offset(_raw_batch([_raw_record(0), _raw_record(2)], last_offset_delta=2), 10)
    rb = batch_at(buf)
    assert (rb.record_count, rb.last_offset, rb.next_offset) == (2, 12, 13)
    assert [r.offset for r in rb.records()] == [10, 12]


def test_decode_batches_stops_at_its_end():
    buf = three_batches()
    sizes = scan_batches(buf).sizes.tolist()
    assert [b.base_offset for b in decode_batches(buf, 0, sizes[0] + sizes[1])] == [0, 3]
    assert [b.base_offset for b in decode_batches(buf, sizes[0], sizes[0] + sizes[1])] == [3]
    with pytest.raises(errors.CorruptMessage, match=f"torn batch at position {sizes[0]}"):
        list(decode_batches(buf, 0, sizes[0] + 20))
    # An end of 0 is an end like any other (not "no end"), for the scan too.
    assert list(decode_batches(buf, 0, 0)) == []
    assert (scan_batches(buf, 0, 0).count, scan_batches(buf, 0, 0).end_position) == (0, 0)
    assert scan_batches(buf, 0, sizes[0]).count == 1


@pytest.mark.parametrize("position", [-1, -61])
def test_a_negative_position_is_refused_not_read_before_the_buffer(position):
    buf = three_batches()
    with pytest.raises(ValueError, match=f"position {position} is outside the buffer"):
        decode_batches(buf, position)
    with pytest.raises(ValueError, match="outside"):
        batch_at(buf, position)
    with pytest.raises(ValueError, match=f"position {position} is outside 0..{len(buf)}"):
        scan_batches(buf, position)


def test_a_scan_from_the_end_finds_nothing_and_no_error():
    buf = three_batches()
    for data, position in ((b"", 0), (buf, len(buf))):
        res = scan_batches(data, position)
        assert (res.count, res.valid_bytes, res.end_position, res.error, res.error_position) == \
            (0, 0, position, None, -1)
        assert res.next_offset is None
        assert list(decode_batches(data, position)) == []
        with pytest.raises(errors.CorruptMessage, match=f"no batch at position {position} \\(end of data\\)$"):
            batch_at(data, position)


def test_restamping_nothing_is_refused():
    with pytest.raises(errors.CorruptMessage, match="no batches to restamp"):
        restamp_batches(bytearray(), 5, 1)


def test_encode_into_at_the_very_end_of_a_buffer_asks_for_room():
    buf = bytearray(10)
    need = batch_size([b"x"], 1)
    assert encode_batch_into(buf, 10, [b"x"], 0, 0, 1) == -need
    assert buf == bytearray(10)
    with pytest.raises(ValueError, match="position 11 is outside the buffer of 10 bytes"):
        encode_batch_into(buf, 11, [b"x"], 0, 0, 1)


@pytest.mark.parametrize("attributes", [-1, -0x8000, 0x8000])
def test_attributes_outside_an_int16_are_refused(attributes):
    with pytest.raises(ValueError, match="do not fit in an int16"):
        encode_batch([b"a"], attributes=attributes)


@pytest.mark.parametrize("attributes", [0x0100, 0x7FFF & ~0x07])
def test_attributes_are_read_back_as_the_int16_they_were_written_high_byte_too(attributes):
    # Kafka's DefaultRecordBatch reads attributes as a short: bits above the low byte,
    # unused so far, are still part of what a batch view reports.
    buf = encode_batch([b"a"], attributes=attributes)
    assert batch_at(buf).attributes == attributes
    assert next(decode_batches(buf)).attributes == attributes


def test_a_four_tuple_with_no_timestamp_takes_the_batch_timestamp():
    recs = decode_records(encode_batch([(b"k", b"v", None, None), (b"k", b"w", [], 7)], timestamp_ms=3))
    assert [(r.value, r.timestamp) for r in recs] == [(b"v", 3), (b"w", 7)]


def test_a_crc_mismatch_quotes_the_stored_and_the_computed_crc():
    buf = bytearray(encode_batch([b"a"], timestamp_ms=1))
    stored = header(buf)[4]
    buf[HEADER_SIZE + 1] ^= 1
    computed = crc32c(bytes(buf[21:]))
    msg = f"crc mismatch at position 0: stored 0x{stored:08x}, computed 0x{computed:08x}"
    assert scan_batches(buf).error == msg
    with pytest.raises(errors.CorruptMessage, match=msg):
        decode_records(buf)
    # A CRC is four bytes, quoted as eight hex digits whatever its value: this batch's
    # stored CRC and the one computed after the flip both start with zero digits.
    buf = bytearray(encode_batch([b"a"], timestamp_ms=62))
    buf[HEADER_SIZE + 1] ^= 26
    assert scan_batches(buf).error == "crc mismatch at position 0: stored 0x0002755e, computed 0x02722b3b"


@pytest.mark.parametrize("codec", [1, 2, 3, 4, 7])
def test_encode_batch_refuses_every_codec_in_the_three_bits(codec):
    with pytest.raises(ValueError, match="must not carry a compression codec"):
        encode_batch([b"a"], attributes=0x10 | codec)
    assert next(decode_batches(encode_batch([b"a"], attributes=0x18))).attributes == 0x18


def test_empty_keys_values_and_header_values_stay_empty_not_null():
    recs = decode_records(encode_batch([(b"", b"", [("h", b"")]), (b"", None), b""], timestamp_ms=1))
    assert [(r.key, r.value, r.headers) for r in recs] == [
        (b"", b"", (("h", b""),)), (b"", None, ()), (None, b"", ())]


def test_a_plain_item_after_an_older_timestamped_one_raises_the_max_timestamp():
    # The first item sets baseTimestamp (1000); the bare value after it is at the batch's 2000.
    buf = encode_batch([(None, b"a", None, 1000), b"b"], timestamp_ms=2000)
    rb = next(decode_batches(buf))
    assert (rb.first_timestamp, rb.max_timestamp) == (1000, 2000)
    assert [r.timestamp for r in decode_records(buf)] == [1000, 2000]
    # With no record at the batch's timestamp, it is no record's max: the first item's own is.
    alone = next(decode_batches(encode_batch([(None, b"a", None, 1000)], timestamp_ms=2000)))
    assert (alone.first_timestamp, alone.max_timestamp) == (1000, 1000)


def test_a_repeated_offset_delta_is_refused_by_the_decoder():
    buf = _raw_batch([_raw_record(0), _raw_record(0)], last_offset_delta=1)
    with pytest.raises(errors.InvalidRecord, match="bad record 1 in the batch at position 0"):
        decode_records(buf)
    with pytest.raises(errors.InvalidRecord, match="bad record 1"):
        next(decode_batches(buf)).records()


@pytest.mark.parametrize("deltas", [[0, 1, 1], [0, 2, 1]], ids=["repeat", "back"])
def test_each_offset_delta_must_rise_above_the_one_just_before_it_not_only_the_first(deltas):
    # Offsets inside a batch rise strictly record by record: a third record repeating or
    # going back below the second's delta is refused by the leader and the decoder, though
    # it is above the first record's.
    buf = _raw_batch([_raw_record(d) for d in deltas], last_offset_delta=2)
    _refused_by_leader_and_decoder(buf, "bad record 2 in the batch at position 0",
                                   "bad record 2 in the batch at position 0")


def test_a_first_record_below_the_batchs_base_offset_is_refused():
    # The first offset delta must be 0 or more too: -1 would give a record the offset
    # before the batch's base offset, below the range its header claims.
    buf = _raw_batch([_raw_record(-1), _raw_record(0)], last_offset_delta=1)
    _refused_by_leader_and_decoder(buf, "bad record 0 in the batch at position 0",
                                   "bad record 0 in the batch at position 0")
    with pytest.raises(errors.InvalidRecord, match="bad record 0 in the batch at position 0"):
        batch_at(buf).records()


def test_an_offset_delta_outside_an_int32_is_a_bad_record():
    # A five-byte varint holds 35 bits: 2**32 fits the varint but not an int32, and cut to
    # 32 bits it would read as delta 0, a record the batch never held at that offset.
    buf = _raw_batch([_raw_record(2**32)], last_offset_delta=0)
    assert scan_batches(buf).error is None  # the framing and the CRC are fine
    _refused_by_leader_and_decoder(buf, "bad record 0 in the batch at position 0",
                                   "bad record 0 in the batch at position 0")


def test_a_null_header_key_is_a_bad_record():
    # A header key has no null form (Kafka's reader refuses a negative key size); its value
    # does, and -1 there stays a null value.
    ok = _raw_batch([_raw_record(0, headers=[(b"k", None)])])
    assert decode_records(ok)[0].headers == (("k", None),)
    # the least header, an empty key with a null value, takes two bytes: a record of
    # nothing else after its header count is read, by the leader's check too
    least = _raw_batch([_raw_record(0, headers=[(b"", None)] * 2)])
    assert scan_batches(least, check_records=True).error is None
    assert decode_records(least)[0].headers == (("", None),) * 2
    buf = _raw_batch([_raw_record(0, headers=[(None, b"h")])])
    _refused_by_leader_and_decoder(buf, "bad record 0 in the batch at position 0",
                                   "bad record 0 in the batch at position 0")


def test_a_negative_header_count_is_a_bad_record():
    # Kafka's reader refuses a negative header count ("Found invalid number of record
    # headers"): -1 is not a way to spell "no headers", as it is for a key or a value.
    body = b"\x00" + _varint(0) + _varint(0) + _field(None) + _field(b"v") + _varint(-1)
    buf = _raw_batch([_raw_record(0, body=body)])
    _refused_by_leader_and_decoder(buf, "bad record 0 in the batch at position 0", "bad record 0")


@pytest.mark.parametrize("field", ["key", "value", "header value"])
def test_a_length_below_minus_one_is_a_bad_record_not_a_null(field):
    # kreplica's contract: -1 is the one spelling of null for a key, a value or a header
    # value, and -2 (varint 0x03) no length at all.  (Kafka's Java reader takes any
    # negative size as null; no client writes one.)  Read as null, it would be
    # acknowledged by the leader and handed to consumers as a null nobody wrote.
    def body(length):
        key = length if field == "key" else _field(None)
        value = length if field == "value" else _field(b"v")
        headers = _varint(1) + _field(b"h") + length if field == "header value" else _varint(0)
        return b"\x00" + _varint(0) + _varint(0) + key + value + headers
    null = decode_records(_raw_batch([_raw_record(0, body=body(_varint(-1)))]))[0]
    assert {"key": null.key, "value": null.value, "header value": dict(null.headers).get("h", 0)}[field] is None
    buf = _raw_batch([_raw_record(0, body=body(_varint(-2)))])
    _refused_by_leader_and_decoder(buf, "bad record 0 in the batch at position 0", "bad record 0")


@pytest.mark.parametrize("key", [b"\xf8\x90\x80\x80", b"\xfc\x90\x80\x80", b"\xff\x90\x80\x80"])
def test_a_header_key_with_a_lead_byte_no_utf8_has_is_refused_by_the_leader(key):
    # 0xF8-0xFF never start a UTF-8 sequence; read with a four-byte lead's low bits these
    # spell U+10000, in range, so only the lead byte itself tells them apart.
    with pytest.raises(UnicodeDecodeError):
        key.decode("utf-8")
    buf = _raw_batch([_raw_record(0, headers=[(key, b"h")])])
    _refused_by_leader_and_decoder(buf, "header key of record 0 is not UTF-8 in the batch at position 0",
                                   "not UTF-8")


def test_a_continuation_byte_must_be_10xxxxxx_for_the_leader_as_for_the_decoder():
    # A byte 11xxxxxx where a sequence needs a continuation byte ends the sequence early:
    # read by its low six bits instead, each of these keys spells a code point in range.
    for key in (b"\xc2\xc0", b"\xe2\x82\xff", b"\xf0\x9f\x99\xc2"):
        with pytest.raises(UnicodeDecodeError):
            key.decode("utf-8")
        _refused_by_leader_and_decoder(_raw_batch([_raw_record(0, headers=[(key, b"h")])]),
                                       "header key of record 0 is not UTF-8 in the batch at position 0", "not UTF-8")


@pytest.mark.parametrize("key", [b"\xc3", b"\xe2\x82", b"\xf0\x9f\x99"])
def test_a_header_key_cut_inside_a_character_is_refused_though_a_continuation_byte_follows_it(key):
    # A character must end inside its key.  Here the byte after the key, the first byte of
    # the 64-byte value's length varint (0x80), has a continuation byte's form: taken as
    # the character's last byte it would complete one in range.
    value = b"h" * 64
    assert _field(value)[:2] == b"\x80\x01"
    with pytest.raises(UnicodeDecodeError):
        key.decode("utf-8")
    _refused_by_leader_and_decoder(_raw_batch([_raw_record(0, headers=[(key, value)])]),
                                   "header key of record 0 is not UTF-8 in the batch at position 0", "not UTF-8")


def test_a_negative_record_count_is_a_bad_header():
    buf = bytearray(encode_batch([b"a"], timestamp_ms=1))
    struct.pack_into(">i", buf, 57, -1)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    bad = "bad header at position 0: record count -1, batch length or last offset delta 0"
    assert scan_batches(buf).error == bad
    with pytest.raises(errors.CorruptMessage, match=bad):
        decode_records(buf)
    with pytest.raises(errors.CorruptMessage, match=bad):
        list(decode_batches(buf))


def test_a_batch_cut_to_its_first_twelve_bytes_is_torn_at_its_own_size():
    # Twelve bytes hold baseOffset and batchLength, enough to know the size the batch
    # needs: the message quotes it, not the twelve bytes of the overhead.
    buf = encode_batch([b"abc"], base_offset=5, timestamp_ms=1)
    for keep in (12, 16):
        torn = f"torn batch at position 0: needs {len(buf)} bytes, {keep} available"
        assert scan_batches(buf[:keep]).error == torn
        with pytest.raises(errors.CorruptMessage, match=torn):
            decode_records(buf[:keep])
    assert scan_batches(buf[:11]).error == "torn batch at position 0: needs 12 bytes, 11 available"


@pytest.mark.parametrize("magic", [-1, -128, 0, 127])
def test_a_bad_magic_is_quoted_as_the_signed_byte_kafka_reads(magic):
    buf = bytearray(encode_batch([b"a"], timestamp_ms=1))
    struct.pack_into(">b", buf, 16, magic)
    bad = f"bad magic {magic} at position 0 (only magic 2 batches are supported)"
    assert scan_batches(buf).error == bad
    with pytest.raises(errors.CorruptMessage, match=bad.split(" (")[0]):
        decode_records(buf)


@pytest.mark.parametrize("key", [b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xee\x80\x80"],
                         ids=["U+D7FF", "U+D800", "U+DFFF", "U+E000"])
def test_the_surrogate_range_is_refused_to_its_last_code_point(key):
    # Both ends of U+D800..U+DFFF are surrogates no strict UTF-8 reader takes; the code
    # points either side of the range are ordinary text.
    buf = _raw_batch([_raw_record(0, headers=[(key, b"h")])])
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        assert scan_batches(buf, check_records=True).error == (
            "header key of record 0 is not UTF-8 in the batch at position 0")
        assert not next(decode_batches(buf)).valid()
    else:
        assert scan_batches(buf, check_records=True).error is None
        assert decode_records(buf)[0].headers == ((text, b"h"),)


def _a_header_key_is_read_exactly_as_python_decodes_it(key: bytes, text: str | None) -> None:
    """A record whose header key is ``key``: taken by the leader and read back as ``text``,
    or (``text`` None: not UTF-8 to Python's strict decoder) refused by both."""
    buf = _raw_batch([_raw_record(0, headers=[(key, b"h")])])
    if text is None:
        with pytest.raises(UnicodeDecodeError):
            key.decode("utf-8")
        _refused_by_leader_and_decoder(buf, "header key of record 0 is not UTF-8 in the batch at position 0",
                                       "not UTF-8")
    else:
        assert key.decode("utf-8") == text
        assert scan_batches(buf, check_records=True).error is None
        assert decode_records(buf)[0].headers == ((text, b"h"),)


@pytest.mark.parametrize("key, text", [(b"\x7f", "\x7f"), (b"\x80", None),
                                       (b"\xc2\x80", "\x80"), (b"\xc1\xbf", None),
                                       (b"\xe0\xa0\x80", "\u0800"), (b"\xe0\x9f\xbf", None),
                                       (b"\xf0\x90\x80\x80", "\U00010000"), (b"\xf0\x8f\xbf\xbf", None)],
                         ids=["1-byte U+007F", "1-byte 0x80", "2-byte U+0080", "2-byte overlong U+007F",
                              "3-byte U+0800", "3-byte overlong U+07FF", "4-byte U+10000", "4-byte overlong U+FFFF"])
def test_each_sequence_length_takes_its_least_code_point_and_refuses_the_overlong_one_below(key, text):
    # Strict UTF-8 spells every code point in its shortest form: each length's least code
    # point is text, and the one just below it in the same length (an overlong form, which
    # a shorter sequence spells) is not, for the leader as for Python's decoder.  A single
    # byte is text up to 0x7f; 0x80, one past it, is a continuation byte and starts nothing.
    _a_header_key_is_read_exactly_as_python_decodes_it(key, text)


@pytest.mark.parametrize("key, text", [(b"\xf4\x8f\xbf\xbf", "\U0010ffff"), (b"\xf4\x90\x80\x80", None)],
                         ids=["U+10FFFF", "U+110000"])
def test_the_last_code_point_is_a_header_key_and_the_four_bytes_past_it_are_not(key, text):
    # U+10FFFF, the last code point, is text Python's strict decoder reads, so the leader
    # takes it; the same four-byte form one step higher spells no code point.
    _a_header_key_is_read_exactly_as_python_decodes_it(key, text)


def test_an_end_past_the_buffer_is_the_buffers_end():
    # An `end` beyond the data is clamped to it: a torn last batch stays torn, however far
    # the caller's end reaches, and nothing past the buffer is read.
    buf = three_batches()[:-1]
    res = scan_batches(buf)
    torn = res.error
    assert torn.startswith("torn batch at position")
    far = scan_batches(buf, end=len(buf) + 4096)
    assert (far.count, far.error, far.end_position) == (res.count, torn, res.end_position)
    with pytest.raises(errors.CorruptMessage, match=torn):
        list(decode_batches(buf, end=len(buf) + 4096))
    assert [b.position for b in decode_batches(three_batches(), end=10**9)] == res.positions.tolist() + [
        int(res.end_position)]


def test_restamping_a_buffer_that_ends_in_zero_fill_names_the_zeros():
    buf = bytearray(encode_batch([b"a"], timestamp_ms=1) + bytes(HEADER_SIZE))
    snapshot = bytes(buf)
    with pytest.raises(errors.CorruptMessage,
                       match=f"zero bytes where a batch should start at position {len(buf) - HEADER_SIZE}$"):
        restamp_batches(buf, 7, 3)
    assert bytes(buf) == snapshot


@pytest.mark.parametrize("epoch", [0x12345, 2**31 - 1, 0])
def test_restamp_writes_all_four_bytes_of_the_leader_epoch(epoch):
    buf = bytearray(encode_batch([b"a", b"b"], leader_epoch=-1, timestamp_ms=1))
    assert restamp_batches(buf, 10, epoch) == 11
    assert scan_batches(buf).leader_epochs.tolist() == [epoch]
    assert next(decode_batches(buf)).leader_epoch == epoch
    into = bytearray(len(buf))  # and so does encoding into a buffer
    assert encode_batch_into(into, 0, [b"a", b"b"], 10, epoch, 1) == len(into)
    assert bytes(into) == bytes(buf)


@pytest.mark.parametrize("codec, name", [(2, "snappy"), (3, "lz4"), (4, "zstd"), (5, "5"), (6, "6"), (7, "7")])
def test_every_codec_but_gzip_is_refused_by_name_not_read_as_gzip(codec, name):
    # The gzip payload under codec 5-7 (no codec Kafka defines) must not be decompressed:
    # the codec is refused, an InvalidRecord, not a gzip read or a CorruptMessage.
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    builder.append(0, 1000, None, b"payload", [])
    buf = bytearray(builder.build())
    buf[22] = (buf[22] & ~7) | codec
    buf[17:21] = struct.pack(">I", crc32c(bytes(buf[21:])))
    with pytest.raises(errors.InvalidRecord,
                       match=f"compression codec {name} of the batch at position 0 is not supported"):
        decode_records(buf)
    with pytest.raises(errors.InvalidRecord, match=f"compression codec {name}"):
        next(decode_batches(buf)).records()
    # A view names the codecs Kafka defines and no other: 5-7 are "unknown", not "none".
    assert next(decode_batches(buf)).compression == (name if codec < 5 else "unknown")


# ---- seventy-second review: paths the earlier codec passes left alone


@pytest.mark.parametrize("items", [[b"a"], [(None, b"a", None, 64), b"x"]], ids=["plain", "older-default"])
def test_no_timestamp_is_minus_one_for_encode_into_and_batch_size_too(items):
    # Without a timestamp every encoder writes NO_TIMESTAMP (-1).  After a record stamped
    # 64, a default record's delta is then -65, a two-byte varint where -64 takes one:
    # batch_size must count the same default as encode_batch, or the leader's scratch
    # buffer is measured for a batch it does not write.
    want = encode_batch(items)
    assert batch_size(items) == len(want)
    buf = bytearray(len(want))
    assert encode_batch_into(buf, 0, items) == len(want)
    assert bytes(buf) == want


@pytest.mark.parametrize("deltas, kept", [([0, 0, 1], {"start_offset": 1}), ([0, 1, 1], {"stop_offset": 1})],
                         ids=["repeat-below-start", "repeat-from-stop"])
def test_a_repeated_offset_delta_is_refused_whatever_offset_range_is_kept(deltas, kept):
    # Records outside the range are not built, but their deltas still count: a fetch from
    # mid-batch must refuse the batch a whole read refuses.
    buf = _raw_batch([_raw_record(d) for d in deltas], last_offset_delta=2)
    with pytest.raises(errors.InvalidRecord, match="bad record 2 in the batch at position 0"
                       if kept.get("stop_offset") else "bad record 1 in the batch at position 0"):
        decode_records(buf, **kept)


@pytest.mark.parametrize("fmt", ["Q", "I", "H"])
def test_batches_are_read_from_a_view_of_wider_items_by_their_bytes(fmt):
    # A buffer exported with items wider than a byte (an mmap cast, a numpy column) is
    # still read by bytes: positions, ends and each view's data.
    buf = three_batches()
    buf += bytes(-len(buf) % 8)  # whole items; the zero fill ends the walk
    want = [(b.base_offset, b.position, bytes(b.data)) for b in decode_batches(buf)]
    wide = memoryview(buf).cast(fmt)
    assert [(b.base_offset, b.position, bytes(b.data)) for b in decode_batches(wide)] == want
    assert batch_at(wide, want[1][1]).base_offset == want[1][0]


@pytest.mark.parametrize("fmt", ["b", "c"])
def test_a_view_of_one_byte_items_of_another_format_gives_batches_of_unsigned_bytes(fmt):
    # Signed chars or chars are bytes too, but a batch's data is a view of unsigned bytes
    # whatever the buffer said: its items read as ints 0..255, as from bytes.
    buf = three_batches()
    views = list(decode_batches(memoryview(buf).cast(fmt)))
    assert [(b.base_offset, bytes(b.data)) for b in views] == [(b.base_offset, bytes(b.data))
                                                                 for b in decode_batches(buf)]
    assert [b.data.format for b in views] == ["B"] * 3
    assert [b.data.tolist() for b in views] == [list(bytes(b.data)) for b in views]


def _second_batch_with_magic_1():
    """three_batches() with the second batch's magic 1, and where that batch starts."""
    buf = bytearray(three_batches())
    second = scan_batches(buf).positions.tolist()[1]
    buf[second + 16] = 1
    return buf, second


def test_a_batch_iteration_ends_at_its_first_error():
    buf, second = _second_batch_with_magic_1()
    it = decode_batches(buf)
    assert next(it).base_offset == 0
    with pytest.raises(errors.CorruptMessage, match=f"bad magic 1 at position {second}"):
        next(it)
    assert list(it) == []  # the error is told once, then the iteration is over


def test_a_refused_restamp_quotes_the_numbers_of_the_batch_it_refuses():
    # The framing is checked again for the message: at the bad batch, not at the first.
    buf, second = _second_batch_with_magic_1()
    with pytest.raises(errors.CorruptMessage, match=f"bad magic 1 at position {second} "):
        restamp_batches(buf, 50, 1)
    torn = bytearray(three_batches()[:-1])
    whole = scan_batches(three_batches())
    third, size = int(whole.positions[2]), int(whole.sizes[2])
    with pytest.raises(errors.CorruptMessage,
                       match=f"torn batch at position {third}: needs {size} bytes, {size - 1} available$"):
        restamp_batches(torn, 50, 1)


# ---- ninety-second review: more paths the earlier codec passes left alone


def test_records_are_equal_only_with_the_same_timestamp_and_defer_to_other_types():
    from unittest import mock

    r = Record(5, 6, b"k", b"v", [("h", b"x")])
    assert r != Record(5, 7, b"k", b"v", [("h", b"x")])
    assert r == Record(5, 6, b"k", b"v", [("h", b"x")])
    # Another type gets its say (NotImplemented), as for any Python value: ANY matches.
    assert r.__eq__(object()) is NotImplemented
    assert r == mock.ANY and [r] == [mock.ANY]


def test_a_tuple_subclass_item_is_read_as_the_tuple_it_is():
    from collections import namedtuple

    Item = namedtuple("Item", "key value headers timestamp")
    Pair = namedtuple("Pair", "key value")
    items = [Item(b"k", b"v", [("h", b"x")], 7), Pair(None, b"w")]
    assert encode_batch(items, timestamp_ms=3) == encode_batch([tuple(i) for i in items], timestamp_ms=3)


class _Blob(bytes):
    """A bytes subclass. The encoder's header values are exact bytes or None, as its
    message says: a subclass is refused by the fast path's check and the checked path
    alike (Record() instead copies one to bytes)."""


@pytest.mark.parametrize("headers, message", [
    ([("a", b"1"), ("b", bytearray(b"2"))], "record 0: header value must be bytes or None"),
    ([("a", b"1"), ("b", _Blob(b"2"))], "record 0: header value must be bytes or None, not _Blob"),
    ([("a", b"1"), (b"b", b"2")], "record 0: header key must be str"),
], ids=["bytearray-value", "bytes-subclass-value", "bytes-key"])
def test_every_header_pair_is_checked_not_only_the_first(headers, message):
    # The fast path takes a list of exact (str, bytes | None) pairs as it is: one pair
    # that is not must send the whole list through the checks, wherever it stands.
    with pytest.raises(TypeError, match=message):
        encode_batch([(None, b"v", headers)], timestamp_ms=1)


def test_encode_into_refuses_a_negative_position():
    with pytest.raises(ValueError, match="position -1 is outside the buffer of 10 bytes"):
        encode_batch_into(bytearray(10), -1, [b"x"])


def test_a_record_count_beyond_the_records_there_is_a_bad_record_not_a_shorter_batch():
    # Two records of 27 bytes under a count (and lastOffsetDelta) of 3: the header's count
    # bound lets it through, so the decoder must find the third record missing, as
    # Kafka's and kafka-python's iterators do (an underflow), not stop at the end.
    b = bytearray(encode_batch([b"a" * 20, b"b" * 20], timestamp_ms=1))
    struct.pack_into(">i", b, 23, 2)  # lastOffsetDelta
    struct.pack_into(">i", b, 57, 3)  # record count
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    assert scan_batches(b).error is None
    with pytest.raises(errors.InvalidRecord, match="bad record 2 in the batch at position 0"):
        decode_records(b)
    with pytest.raises(errors.InvalidRecord, match="bad record 2 in the batch at position 0"):
        next(decode_batches(b)).records()


def _gzip_batch_of_five():
    """kafka-python's gzip batch of five records (offsets 0-4), big enough to stay gzip."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    for i in range(5):
        builder.append(i, 1000 + i, None, b"payload %d " % i * 10, [])
    buf = bytes(builder.build())
    assert next(decode_batches(buf)).compression == "gzip"  # kafka-python keeps it only if smaller
    return buf


def test_a_gzip_batch_keeps_only_the_offset_range_asked_for():
    buf = _gzip_batch_of_five()
    assert [r.offset for r in decode_records(buf, start_offset=2, stop_offset=4)] == [2, 3]
    assert [r.value for r in decode_records(buf, start_offset=4)] == [b"payload 4 " * 10]


def test_a_views_records_name_the_batchs_own_position():
    buf = bytearray(three_batches())
    second = scan_batches(buf).positions.tolist()[1]
    buf[second + HEADER_SIZE] = 30  # its one record claims to be longer than it is
    _fix_crcs(buf)
    with pytest.raises(errors.InvalidRecord, match=f"bad record 0 in the batch at position {second}$"):
        batch_at(buf, second).records()
    with pytest.raises(errors.InvalidRecord, match=f"bad record 0 in the batch at position {second}$"):
        decode_records(buf)


def test_batches_are_read_from_a_two_dimensional_byte_view_by_its_bytes():
    # A byte buffer exported with two dimensions (a numpy array of rows, a memoryview cast
    # to a shape) is read by its bytes, not by its rows.
    buf = three_batches()
    buf += bytes(len(buf) % 2)
    want = [(b.base_offset, b.position, bytes(b.data)) for b in decode_batches(buf)]
    for grid in (np.frombuffer(buf, dtype=np.uint8).reshape(2, -1),
                 memoryview(buf).cast("B", (2, len(buf) // 2))):
        assert [(b.base_offset, b.position, bytes(b.data)) for b in decode_batches(grid)] == want


def test_a_record_holds_exact_bytes_and_str_whatever_subclass_it_was_given():
    # Records are left out of the cycle collector (no_gc) because they can only hold exact
    # bytes, str and tuples; a subclass instance has a __dict__ that could point back.
    class B(bytes):
        pass

    class S(str):
        pass

    r = Record(0, 0, B(b"k"), B(b"v"), [(S("h"), B(b"x"))])
    assert (type(r.key), type(r.value)) == (bytes, bytes)
    assert [(type(k), type(v)) for k, v in r.headers] == [(str, bytes)]
    assert r == Record(0, 0, b"k", b"v", [("h", b"x")])


def test_gzip_records_of_exactly_the_bound_are_read_and_a_byte_more_are_too_large(monkeypatch):
    # "At most MAX_DECOMPRESSED_BYTES of records": the bound itself is allowed.
    import gzip

    import kreplica._records

    buf = _gzip_batch_of_five()
    plain = len(gzip.decompress(buf[HEADER_SIZE:]))
    monkeypatch.setattr(kreplica._records, "MAX_DECOMPRESSED_BYTES", plain)
    assert len(decode_records(buf)) == 5
    monkeypatch.setattr(kreplica._records, "MAX_DECOMPRESSED_BYTES", plain - 1)
    with pytest.raises(errors.RecordTooLarge, match=f"decompresses to more than {plain - 1} bytes$"):
        decode_records(buf)


# ---- hundred-and-eleventh review: what the five earlier codec passes left alone


def test_the_encoder_lets_go_of_every_buffer_it_reads():
    # A bytearray key or value is read through a buffer export, and a bytearray cannot be
    # resized while one is open: every path must let go of it, after measuring, after
    # writing, and when a later field of the same item is refused.
    key, value = bytearray(b"k"), bytearray(b"v")
    assert batch_size([(key, value, None, 5)]) == len(encode_batch([(b"k", b"v", None, 5)]))
    assert decode_records(encode_batch([(key, value, [("h", b"x")])], timestamp_ms=1))[0].value == b"v"
    assert encode_batch_into(bytearray(200), 0, [(key, value)], 0, -1, 1) > 0
    with pytest.raises(TypeError, match="record 0: value must be bytes-like or None, not str"):
        encode_batch([(key, "text")])
    key += b"2"  # BufferError ("Existing exports of data") if an export were left open
    value += b"2"
    assert (key, value) == (b"k2", b"v2")


def test_a_batch_may_be_as_long_as_an_int32_holds_and_not_a_byte_longer():
    # batchLength (the bytes after the first 12) is an int32: INT32_MAX is the longest.
    # Measured only, from one shared 16 MiB value: nothing near 2 GiB is allocated.
    big = bytes(1 << 24)
    extra = bytes(1 << 25)
    items = [big] * 127
    longest = 2**31 - 1 + 12  # the whole batch, its first 12 bytes included
    m = (1 << 21) + longest - batch_size(items + [memoryview(extra)[:1 << 21]], 0)
    assert batch_size(items + [memoryview(extra)[:m]], 0) == longest
    for encode in (lambda i: batch_size(i, 0), lambda i: encode_batch(i, timestamp_ms=0)):
        with pytest.raises(errors.RecordListTooLarge, match=f"a batch of 128 records would take {longest + 1} bytes"):
            encode(items + [memoryview(extra)[:m + 1]])


@pytest.mark.parametrize("headers", [[("k", b"v", b"x")], (("a", b"1"), ("k", b"v", b"x")), [("k",)]],
                         ids=["three-alone", "three-after-a-pair", "one"])
def test_a_header_is_a_pair_and_nothing_longer_or_shorter(headers):
    # A header is a key and a value (Kafka's Header); a third item is refused, not dropped.
    with pytest.raises(TypeError, match=r"record 0: a header is a \(str, bytes\) pair, got \('k'"):
        encode_batch([(None, b"v", headers)], timestamp_ms=1)


def test_an_item_of_five_elements_is_refused_not_cut_to_four():
    with pytest.raises(TypeError, match="record 1: a tuple item is .* got 5 elements"):
        encode_batch([b"a", (b"k", b"v", None, 7, b"extra")], timestamp_ms=1)
    with pytest.raises(TypeError, match="got 5 elements"):
        batch_size([(b"k", b"v", None, 7, None)])


def test_a_record_is_a_value_of_every_field_and_holds_kafkas_int64s():
    # Offsets and timestamps are int64 in Kafka; a record compares, hashes and prints by
    # all five fields, and none of them can be reassigned.
    ts = 1_700_000_000_000  # milliseconds: well past an int32
    r = Record(2**40, ts, b"k", b"v", [("h", b"x")])
    assert (r.offset, r.timestamp) == (2**40, ts)
    same = Record(2**40, ts, b"k", b"v", (("h", b"x"),))
    assert r == same and hash(r) == hash(same) and len({r, same}) == 1
    for other in (Record(2**40 + 1, ts, b"k", b"v", [("h", b"x")]), Record(2**40, ts, b"K", b"v", [("h", b"x")]),
                  Record(2**40, ts, b"k", b"V", [("h", b"x")])):
        assert r != other and not r == other
    assert repr(r) == ("Record(offset=1099511627776, timestamp=1700000000000, key=b'k', value=b'v', "
                       "headers=(('h', b'x'),))")
    for field in ("offset", "timestamp", "key", "value", "headers"):
        with pytest.raises(AttributeError):
            setattr(r, field, getattr(same, field))
    with pytest.raises(TypeError, match="^key must be bytes-like or None, not str$"):
        Record(0, 0, "k", None)
    with pytest.raises(TypeError, match="^value must be bytes-like or None, not int$"):
        Record(0, 0, None, 5)


def test_a_position_past_the_end_asked_for_is_refused():
    buf = three_batches()
    with pytest.raises(ValueError, match="position 50 is outside the buffer"):
        decode_batches(buf, 50, 40)
    with pytest.raises(ValueError, match=r"position 50 is outside 0\.\.40$"):
        scan_batches(buf, 50, 40)
    assert list(decode_batches(buf, 40, 40)) == [] and scan_batches(buf, 40, 40).count == 0


def test_views_and_scan_results_come_only_from_the_codec_and_say_what_they_hold():
    from kreplica.records import RecordBatch, ScanResult

    with pytest.raises(TypeError, match=r"come from decode_batches\(\) or batch_at\(\)"):
        RecordBatch()
    with pytest.raises(TypeError, match=r"come from scan_batches\(\)"):
        ScanResult()
    buf = three_batches()
    first = batch_at(buf)
    assert repr(first) == (f"RecordBatch(base_offset=0, last_offset=2, leader_epoch=1, records=3, "
                           f"size={first.size}, position=0)")
    res = scan_batches(buf, first.size)
    assert repr(res) == f"ScanResult(count=2, valid_bytes={len(buf) - first.size}, error=None)"
    # A scan stopped by an error shows the error quoted, as the string it is.
    sizes = [b.size for b in decode_batches(buf)]
    stop = sizes[0] + sizes[1]  # the third batch, one byte short
    assert repr(scan_batches(buf[:-1])) == (
        f"ScanResult(count=2, valid_bytes={stop}, "
        f"error='torn batch at position {stop}: needs {sizes[2]} bytes, {sizes[2] - 1} available')")
    # A compacted batch (offsets 0 and 2 of 0..2) holds two records, not its offset range.
    compacted = batch_at(_raw_batch([_raw_record(0), _raw_record(2)], last_offset_delta=2))
    assert repr(compacted) == (f"RecordBatch(base_offset=0, last_offset=2, leader_epoch=0, records=2, "
                               f"size={compacted.size}, position=0)")


def test_a_header_key_no_reader_could_decode_is_named_at_its_batchs_position():
    bad = _raw_batch([_raw_record(0, headers=[(b"\xff", b"h")])])
    buf = encode_batch([b"a", b"b"], timestamp_ms=1) + _at_offset(bad, 2)
    second = len(buf) - len(bad)
    with pytest.raises(errors.InvalidRecord, match=f"header key is not UTF-8 in the batch at position {second}$"):
        decode_records(buf)
    with pytest.raises(errors.InvalidRecord, match=f"at position {second}$"):
        batch_at(buf, second).records()


@pytest.mark.parametrize("base", [2**31, 2**40])
def test_offsets_past_an_int32_are_written_encoded_into_and_restamped(base):
    # Kafka's offsets are int64: every entry point that takes one takes all of it.
    buf = bytearray(three_batches())
    assert restamp_batches(buf, base, 4) == base + 8
    assert scan_batches(buf).base_offsets.tolist() == [base, base + 3, base + 4]
    into = bytearray(batch_size([b"x"], 1))
    assert encode_batch_into(into, 0, [b"x"], base, 0, 1) == len(into)
    assert bytes(into) == encode_batch([b"x"], base_offset=base, leader_epoch=0, timestamp_ms=1)
    assert decode_records(into)[0].offset == base


# ---- hundred-and-thirty-second review: what the six earlier codec passes left alone


@pytest.mark.parametrize("bad", [("h", b"x", b"y"), ("h",)], ids=["three", "one"])
def test_a_records_header_is_a_key_and_a_value_and_nothing_more(bad):
    # Kafka's Header is a key and a value: a Record refuses a header of another size, as
    # the encoder does, rather than keep its first two items and drop the rest.
    with pytest.raises(ValueError):
        Record(0, 0, None, b"v", [("a", b"1"), bad])
    assert Record(0, 0, None, b"v", [("a", b"1"), ("h", None)]).headers == (("a", b"1"), ("h", None))


def test_a_leaders_check_of_a_gzip_batch_starts_with_its_crc():
    # frame_producer_append walks a producer's batches without CRCs and leaves a gzip
    # batch's CRC to check_compressed_records: with sound records and a wrong stored CRC
    # the batch is still CORRUPT_MESSAGE, as Kafka's leader checks the CRC first.
    from kreplica.log._batch_run import frame_producer_append

    good = _gzip_batch(_raw_record(0) + _raw_record(1), 2)
    assert frame_producer_append(good).count == 1
    bad = bytearray(good)
    bad[17] ^= 0x01  # the stored CRC, nothing it covers
    with pytest.raises(errors.CorruptMessage, match="crc mismatch at position 0"):
        frame_producer_append(bytes(bad))


def test_a_scan_reads_an_unstamped_leader_epoch_as_kafkas_minus_one():
    # partitionLeaderEpoch is a signed int32: -1 (NO_PARTITION_LEADER_EPOCH) is a
    # producer's batch before a leader stamps it, not 2**32 - 1.
    buf = (encode_batch([b"a"], timestamp_ms=1)
           + encode_batch([b"b"], base_offset=1, leader_epoch=2**31 - 1, timestamp_ms=1))
    res = scan_batches(buf)
    assert res.leader_epochs.dtype == np.int32
    assert res.leader_epochs.tolist() == [-1, 2**31 - 1]
    assert [f[2] for f in batch_fingerprints(buf)] == res.leader_epochs.tolist()


def test_a_scan_reads_a_batch_without_a_timestamp_as_a_max_timestamp_of_minus_one():
    # maxTimestamp is a signed int64: NO_TIMESTAMP (-1) stays below every real time, as
    # the Spark reader's `scan.max_timestamps >= timestamp_lo` batch filter needs it to.
    buf = encode_batch([b"a"]) + encode_batch([b"b"], base_offset=1, timestamp_ms=1)
    res = scan_batches(buf)
    assert res.max_timestamps.dtype == np.int64
    assert res.max_timestamps.tolist() == [-1, 1]
    assert (res.max_timestamps >= 0).tolist() == [False, True]


@pytest.mark.parametrize("keep", [HEADER_SIZE - 1, 40])
def test_restamping_a_torn_first_batch_says_torn_not_empty(keep):
    whole = encode_batch([b"a"], base_offset=5, timestamp_ms=1)
    buf = bytearray(whole[:keep])
    with pytest.raises(errors.CorruptMessage,
                       match=f"torn batch at position 0: needs {len(whole)} bytes, {keep} available$"):
        restamp_batches(buf, 7, 3)
    assert bytes(buf) == whole[:keep]


def test_a_key_or_value_of_wider_items_is_encoded_as_all_its_bytes():
    # A bytes-like key or value is its bytes, whatever its item size, as Record() keeps
    # bytes(o): an array('H') of two items is four bytes, not two.
    from array import array

    key, value = array("H", [1, 2]), memoryview(array("I", [7, 8, 9]))
    buf = encode_batch([(key, value), (key, value, [("h", b"x")])], timestamp_ms=1)
    got = decode_records(buf)
    assert [(r.key, r.value) for r in got] == [(key.tobytes(), value.tobytes())] * 2
    assert buf == encode_batch([Record(0, 1, key, value), Record(1, 1, key, value, [("h", b"x")])],
                               timestamp_ms=1)


def test_batch_size_at_timestamp_zero_is_the_size_of_the_batch_written_at_zero():
    # 0 is a timestamp, not "none" (-1): a record's own timestamp 63 is a one-byte delta
    # from a base of 0, a two-byte one from -1.
    items = [b"a", (None, b"b", None, 63)]
    assert batch_size(items, 0) == len(encode_batch(items, timestamp_ms=0))
    assert batch_size(items, 0) == batch_size(items, -1) - 1


def test_encode_into_at_timestamp_zero_writes_zero_not_no_timestamp():
    items = [b"a", (None, b"b", None, 63)]
    buf = bytearray(200)
    n = encode_batch_into(buf, 0, items, 0, -1, 0)
    assert bytes(buf[:n]) == encode_batch(items, timestamp_ms=0)
    rb = batch_at(buf)
    assert (rb.first_timestamp, rb.max_timestamp) == (0, 63)
    assert [r.timestamp for r in decode_records(buf[:n])] == [0, 63]


@pytest.mark.parametrize("second, message", [
    (_raw_record(0), "bad record 1 in the batch at position 0"),
    (_raw_record(1, headers=[(b"\xff", b"x")]),
     "header key of record 1 is not UTF-8 in the batch at position 0"),
], ids=["repeated-delta", "header-key"])
def test_a_leaders_check_of_a_gzip_batch_names_the_record_it_refuses(second, message):
    # The leader decompresses a producer's gzip batch to check its records: the refusal
    # names the bad record's index, as it does for an uncompressed batch, not record 0.
    from kreplica.log._batch_run import frame_producer_append

    gz = _gzip_batch(_raw_record(0) + second + _raw_record(2), 3)
    with pytest.raises(errors.InvalidRecord, match=f"{message}$"):
        frame_producer_append(gz)
    plain = _raw_batch([_raw_record(0), second, _raw_record(2)])
    assert scan_batches(plain, check_records=True).error == message


def test_a_fetch_from_a_compacted_batchs_last_offset_finds_its_last_record():
    # Compaction keeps lastOffsetDelta: a batch holding offsets 10 and 12 (of 10..12) ends
    # at 12, so a fetch from 12 must parse it, though base + count - 1 is 11.
    buf = _at_offset(_raw_batch([_raw_record(0, value=b"a"), _raw_record(2, value=b"c")],
                                last_offset_delta=2), 10)
    assert [(r.offset, r.value) for r in decode_records(buf, start_offset=12)] == [(12, b"c")]
    assert decode_records(buf, start_offset=13) == []


def test_a_gzip_batch_may_decompress_to_far_more_than_a_mebibyte():
    # MAX_DECOMPRESSED_BYTES is a gibibyte: a 3 MiB record that gzip takes to a few KiB
    # is read whole, not refused as too large.
    from kreplica.records import MAX_DECOMPRESSED_BYTES

    [rec] = decode_records(_gzip_batch(_raw_record(0, value=bytes(3 << 20)), 1))
    assert rec.value == bytes(3 << 20)
    assert MAX_DECOMPRESSED_BYTES == 1 << 30


def test_the_public_module_exports_every_name_it_takes_from_the_compiled_one():
    # records.py is the public face of the compiled module: every name it re-exports
    # from kreplica._records is in __all__ (what `import *` gives), and nothing else is.
    import kreplica._records as compiled
    import kreplica.records as records

    taken = {n for n, v in vars(records).items()
             if not n.startswith("_") and getattr(compiled, n, None) is v}
    assert "batch_fingerprints" in taken and "encode_batch" in taken
    namespace = {}
    exec("from kreplica.records import *", namespace)
    assert set(namespace) - {"__builtins__"} == taken
    assert sorted(records.__all__) == sorted(taken)


# ---- two-hundred-and-thirty-second review: what the eleven earlier codec passes left alone

def test_a_header_key_that_is_not_utf8_is_refused_without_the_decoders_own_error_behind_it():
    # The InvalidRecord replaces the UnicodeDecodeError it was raised from: a traceback
    # shows the batch's position, not "during handling of the above exception".
    bad = _raw_batch([_raw_record(0, headers=[(b"\xff", b"h")])])
    for decode in (decode_records, lambda buf: batch_at(buf).records()):
        with pytest.raises(errors.InvalidRecord, match="header key is not UTF-8") as info:
            decode(bad)
        assert info.value.__cause__ is None and info.value.__suppress_context__ is True


def test_a_batch_iteration_that_reached_zero_fill_stays_over_when_a_batch_is_written_there():
    # An iterator that has said StopIteration says it again (Python's iterator protocol),
    # even when a batch is later written into the zero fill it stopped at (a mapped
    # segment being appended to); a new iteration reads the new batch.
    first = encode_batch([b"a"], timestamp_ms=1)
    second = encode_batch([b"b"], base_offset=1, timestamp_ms=1)
    buf = bytearray(first + bytes(len(second)))
    it = decode_batches(buf)
    assert [b.base_offset for b in it] == [0]
    buf[len(first):] = second
    assert list(it) == []
    assert [b.base_offset for b in decode_batches(buf)] == [0, 1]


def test_record_subclasses_compare_and_hash_as_the_records_they_are():
    class Tagged(Record):
        pass

    a, b = Tagged(0, 9, b"k", b"v", [("h", b"x")]), Tagged(0, 9, b"k", b"v", [("h", b"x")])
    plain = Record(0, 9, b"k", b"v", [("h", b"x")])
    assert a == b and a == plain and plain == a and not a != b
    assert hash(a) == hash(b) == hash(plain) and len({a, b, plain}) == 1
    assert a != Tagged(1, 9, b"k", b"v", [("h", b"x")])


def test_a_gzip_batch_the_leader_or_a_reader_cannot_inflate_is_named_at_its_own_position():
    # A producer's run (or a log) of an uncompressed batch then a gzip batch whose stream
    # is cut before its trailer (the CRC is right): the refusal names the second batch.
    from kreplica.log._batch_run import frame_producer_append

    first = encode_batch([b"a"], timestamp_ms=1)
    buf = first + _at_offset(_gzip_batch(_raw_record(0), 1, cut=8), 1)
    message = f"gzip data of the batch at position {len(first)} is truncated$"
    with pytest.raises(errors.CorruptMessage, match=message):
        decode_records(buf)
    with pytest.raises(errors.CorruptMessage, match=message):
        batch_at(buf, len(first)).records()
    with pytest.raises(errors.CorruptMessage, match=message):
        frame_producer_append(buf)


def test_records_that_differ_only_in_their_headers_hash_apart():
    # The hash covers every field __eq__ compares: records told apart by their headers
    # alone (a trace header per message) spread over a set or a dict instead of all
    # landing on one hash.  256 distinct 64-bit hashes collide with odds near 2**-49.
    records = [Record(0, 0, None, b"v", [("trace", bytes([i]))]) for i in range(256)]
    assert len({hash(r) for r in records}) == 256
    assert len(set(records)) == 256
