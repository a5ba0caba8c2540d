"""Independent oracle: kafka-python's v2 codec reads our batches and we read its batches.

kafka-python 3.x (``kafka.record.default_records``) is a separate implementation of
Kafka's DefaultRecordBatch, so agreement in both directions, byte for byte, on random
data is evidence that we write and read the real format.
"""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kreplica import errors
from kreplica.records import crc32c, decode_batches, decode_records, encode_batch, scan_batches

keys = st.none() | st.binary(max_size=50)
values = st.none() | st.binary(max_size=400)
headers = st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3)
timestamps = st.integers(0, 2**42)
records = st.lists(st.tuples(keys, values, headers, timestamps), min_size=1, max_size=40)


def kafka_view(batch):
    return [(m.offset, m.timestamp, m.key, m.value, [tuple(h) for h in m.headers]) for m in batch]


def our_view(recs):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs]


def kafka_build(items, compression=0):
    builder = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 30)
    for i, (k, v, h, ts) in enumerate(items):
        assert builder.append(i, ts, k, v, h) is not None
    return bytes(builder.build())


@settings(max_examples=150, deadline=None)
@given(records, st.integers(0, 2**50), st.integers(0, 2**31 - 1))
def test_kafka_python_reads_our_batches(items, base_offset, leader_epoch):
    buf = encode_batch(items, base_offset=base_offset, leader_epoch=leader_epoch)
    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.leader_epoch, batch.magic) == (base_offset, leader_epoch, 2)
    assert batch.last_offset_delta == len(items) - 1
    assert batch.first_timestamp == items[0][3]
    assert batch.max_timestamp == max(ts for *_, ts in items)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert kafka_view(batch) == [
        (base_offset + i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(items)
    ]


@settings(max_examples=150, deadline=None)
@given(records)
def test_we_write_the_same_bytes_as_kafka_python(items):
    # kafka-python's producer-side builder leaves baseOffset and leaderEpoch at 0.
    assert encode_batch(items, base_offset=0, leader_epoch=0) == kafka_build(items)


@settings(max_examples=150, deadline=None)
@given(records, st.sampled_from([0, 1]), st.integers(0, 2**40), st.integers(0, 1000))
def test_we_read_kafka_python_batches(items, compression, base_offset, leader_epoch):
    buf = bytearray(kafka_build(items, compression))
    # A broker stamps these two fields; they lie outside the CRC.
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    assert scan_batches(buf, check_records=True).error is None
    expected = kafka_view(DefaultRecordBatch(bytes(buf)))
    assert our_view(decode_records(buf)) == expected
    (batch,) = list(decode_batches(buf))
    assert batch.valid() and batch.leader_epoch == leader_epoch
    assert our_view(batch.records()) == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(records, min_size=1, max_size=5))
def test_memory_records_iterates_our_concatenated_batches(runs):
    buf, offset, expected = b"", 0, []
    for items in runs:
        buf += encode_batch(items, base_offset=offset, leader_epoch=1)
        expected += [(offset + i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(items)]
        offset += len(items)
    mem = MemoryRecords(buf)
    got = []
    while mem.has_next():
        batch = mem.next_batch()
        assert batch.validate_crc()
        got += kafka_view(batch)
    assert got == expected
    assert mem.valid_bytes() == len(buf) == scan_batches(buf).valid_bytes


def test_log_append_time_reads_the_same_in_kafka_python():
    buf = encode_batch([(None, b"a", None, 5), (None, b"b", None, 9)], attributes=0x08)
    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc() and batch.timestamp_type == 1
    assert [m.timestamp for m in batch] == [r.timestamp for r in decode_records(buf)] == [9, 9]


# ---- the Log's segment files, read by kafka-python (the "Independent oracle")

def _kafka_read_dir(directory):
    """Every record of every .log segment, as kafka-python sees the raw files."""
    import os

    seen = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            mem = MemoryRecords(f.read())
        while mem.has_next():
            batch = mem.next_batch()
            assert batch.validate_crc()
            seen += kafka_view(batch)
    return seen


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), records), min_size=1, max_size=8),
       st.integers(0, 50))
def test_kafka_python_reads_our_log_segments_and_we_read_its_batches(runs, epoch):
    import tempfile

    from kreplica.log import Log
    from kreplica.runtime import ManualClock

    expected = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(f"{tmp}/t-0", {"segment.bytes": 8 * 1024}, ManualClock(1000))
        for from_kafka, items in runs:
            base = log.log_end_offset
            if from_kafka:
                # a leader's batch built by kafka-python, replicated with its offsets
                buf = bytearray(kafka_build(items))
                struct.pack_into(">q", buf, 0, base)
                struct.pack_into(">i", buf, 12, epoch)
                log.append_as_follower(bytes(buf))
                stamped = items
            else:
                log.append_as_leader([(k, v, h) for k, v, h, _ in items], leader_epoch=epoch,
                                     timestamp_ms=7000)
                stamped = [(k, v, h, 7000) for k, v, h, _ in items]
            expected += [(base + i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(stamped)]
        # a read stops at a segment boundary, so walk the segments
        offset, ours = 0, []
        while offset < log.log_end_offset:
            chunk = decode_records(log.read(offset, 1 << 30).view)
            ours += our_view(chunk)
            offset = chunk[-1].offset + 1
        log.close()
        assert _kafka_read_dir(f"{tmp}/t-0") == expected
        assert ours == expected


# ---- the header fields the codec does not interpret: producer state and attribute bits

@settings(max_examples=100, deadline=None)
@given(records, st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(0, 2**31 - 1),
       st.booleans())
def test_producer_state_and_the_transactional_bit_match_kafka_python(items, pid, pepoch, seq, txn):
    builder = DefaultRecordBatchBuilder(2, 0, txn, pid, pepoch, seq, 1 << 30)
    for i, (k, v, h, ts) in enumerate(items):
        assert builder.append(i, ts, k, v, h) is not None
    theirs = bytes(builder.build())
    ours = encode_batch(items, base_offset=0, leader_epoch=0, attributes=0x10 if txn else 0,
                        producer_id=pid, producer_epoch=pepoch, base_sequence=seq)
    assert ours == theirs
    (batch,) = list(decode_batches(theirs))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, pepoch, seq)
    assert (batch.is_transactional, batch.is_control) == (txn, False)


CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@pytest.mark.parametrize("attributes", [0, 1, 2, 3, 4, 0x08, 0x10, 0x20, 0x30, 0x0C, 0x1B, 0x2C, 0x3C])
def test_attribute_bits_read_as_kafka_python_reads_them(attributes):
    buf = bytearray(encode_batch([b"x"], timestamp_ms=1))
    struct.pack_into(">h", buf, 21, attributes)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    theirs = DefaultRecordBatch(bytes(buf))
    (ours,) = list(decode_batches(buf))
    assert ours.compression == CODEC_NAMES[theirs.compression_type]
    assert ours.timestamp_type == theirs.timestamp_type
    assert ours.is_transactional == theirs.is_transactional
    assert ours.is_control == theirs.is_control_batch


def test_a_gzip_batch_in_zlib_framing_is_refused_as_kafka_python_refuses_it():
    # Kafka reads codec 1 with GZIPInputStream, kafka-python with gzip.GzipFile: both want
    # gzip's own header (1f 8b), and neither can read the same deflate data zlib-framed.
    import gzip
    import zlib

    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    for i in range(5):
        builder.append(i, 1000 + i, None, b"payload %d" % i, [])
    good = bytes(builder.build())
    assert [r.value for r in decode_records(good)] == [b"payload %d" % i for i in range(5)]
    run = gzip.decompress(good[61:])
    zlib_framed = bytearray(good[:61] + zlib.compress(run))
    struct.pack_into(">i", zlib_framed, 8, len(zlib_framed) - 12)
    struct.pack_into(">I", zlib_framed, 17, crc32c(bytes(zlib_framed[21:])))
    assert scan_batches(zlib_framed).error is None  # the framing and the CRC are fine
    with pytest.raises(Exception):
        list(DefaultRecordBatch(bytes(zlib_framed)))
    with pytest.raises(errors.CorruptMessage, match="gzip data of the batch at position 0 is corrupt"):
        decode_records(zlib_framed)


def _gzip_payload_padded(padding: bytes) -> bytes:
    """kafka-python's gzip batch of five records with ``padding`` after its one member,
    length and CRC made right again (a writer padding its output would do the same)."""
    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    for i in range(5):
        builder.append(i, 1000 + i, None, b"payload %d" % i, [])
    buf = bytearray(bytes(builder.build()) + padding)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_zero_padding_after_a_gzip_member_is_read_past_as_kafka_python_reads_it():
    # GZIPInputStream (Kafka's reader of codec 1) ends the stream at bytes after a member
    # that open no other member; kafka-python's GzipFile skips zero padding.  The records
    # are the member's, and the CRC covers the padding.
    padded = _gzip_payload_padded(bytes(16))
    theirs = [r.value for r in DefaultRecordBatch(padded)]
    assert theirs == [b"payload %d" % i for i in range(5)]
    assert [r.value for r in decode_records(padded)] == theirs
    assert [r.value for r in next(decode_batches(padded)).records()] == theirs


def test_bytes_after_a_gzip_member_end_it_unless_they_open_another_member():
    import gzip

    # Not zeros: still no member, so still the end (as GZIPInputStream; kafka-python refuses).
    assert len(decode_records(_gzip_payload_padded(b"trailing junk"))) == 5
    # Only the magic's two bytes open one (GZIPInputStream reads them as one short): its
    # first byte alone, or followed by another, is still the end.
    assert len(decode_records(_gzip_payload_padded(b"\x1f"))) == 5
    assert len(decode_records(_gzip_payload_padded(b"\x1f\x00" + bytes(14)))) == 5
    # The gzip magic opens a member, and one that does not decompress is corrupt.
    with pytest.raises(errors.CorruptMessage, match="gzip data of the batch at position 0 is corrupt"):
        decode_records(_gzip_payload_padded(b"\x1f\x8b" + bytes(14)))
    # A whole second member is read too (a writer may concatenate them).
    assert len(decode_records(_gzip_payload_padded(gzip.compress(b"")))) == 5
