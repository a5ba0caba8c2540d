import os
import struct
import subprocess
import sys
import textwrap

import pytest

from fd_count import fds_under
from kreplica import errors
from kreplica.log import Log
from kreplica.records import decode_records


@pytest.mark.parametrize("stranger", ["notes.txt", "notes.tmp", "1.log"])
def test_a_directory_that_is_not_a_log_is_refused_and_left_untouched(tmp_path, stranger):
    """A ``.tmp`` file is a leftover only when it is the temp file of a name a log writes
    (``<checkpoint>.tmp``, ``<segment file>.tmp``): any other is a stranger's, refused and
    kept, not deleted as a leftover."""
    d = tmp_path / "home"
    d.mkdir()
    (d / stranger).write_text("precious")
    (d / "00000000000000000000.log").write_bytes(b"")
    before = sorted(os.listdir(d))
    with pytest.raises(errors.KafkaStorageError, match="not a log directory.*" + stranger):
        Log.open(d)
    assert sorted(os.listdir(d)) == before
    assert (d / stranger).read_text() == "precious"


def test_a_file_is_not_a_log_directory(tmp_path):
    f = tmp_path / "t-0"
    f.write_bytes(b"data")
    with pytest.raises(errors.KafkaStorageError, match="is a file"):
        Log.open(f)
    assert f.read_bytes() == b"data"


def test_a_subdirectory_is_a_stranger_too(tmp_path):
    (tmp_path / "t-0" / "nested").mkdir(parents=True)
    with pytest.raises(errors.KafkaStorageError, match="nested"):
        Log.open(tmp_path / "t-0")


def test_leftover_index_files_and_temp_checkpoints_are_cleaned(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000042.index").write_bytes(b"")
    (d / "leader-epoch-checkpoint.tmp").write_text("0\n")
    log = Log.open(d)
    assert not (d / "00000000000000000042.index").exists()
    assert not (d / "leader-epoch-checkpoint.tmp").exists()
    log.close()


def test_malformed_leader_epoch_checkpoint_is_a_storage_error(tmp_path):
    d = tmp_path / "t-0"
    Log.open(d).close()
    (d / "leader-epoch-checkpoint").write_text("0\n1\nnot numbers\n")
    with pytest.raises(errors.KafkaStorageError, match="malformed"):
        Log.open(d)
    # the failed open released its lock: once the file is fixed the log opens
    (d / "leader-epoch-checkpoint").write_text("0\n0\n")
    Log.open(d).close()


FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys
    from kreplica import errors
    from kreplica.log import Log
    from kreplica.records import decode_records
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    log = Log.open(sys.argv[1], {"segment.bytes": 8 << 20, "flush.messages": 1000})
    value = lambda i: b"%08d" % i + b"x" * 1016
    acked = 0
    for _ in range(1000):  # ~1 MiB before the limit
        acked = log.append_as_leader([value(acked)]).last_offset + 1
    resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, resource.RLIM_INFINITY))
    try:
        while True:
            acked = log.append_as_leader([value(i) for i in range(acked, acked + 10)]).last_offset + 1
    except errors.KafkaStorageError as e:
        print("error", e.name, e, file=sys.stderr)
    try:  # and it keeps failing cleanly, changing nothing
        log.append_as_leader([value(i) for i in range(acked, acked + 10)])
        raise AssertionError("append succeeded past the limit")
    except errors.KafkaStorageError:
        pass
    assert log.log_end_offset == acked
    got, offset = [], 0
    while offset < acked:  # everything acknowledged is still readable
        recs = decode_records(log.read(offset, 1 << 20).view)
        got += [r.value for r in recs if r.offset >= offset]
        offset = recs[-1].offset + 1
    assert got == [value(i) for i in range(acked)], "lost or garbled records"
    log.close()
    print(acked)
    """
)


def test_file_size_limit_raises_kafka_storage_error_and_keeps_what_was_acked(tmp_path):
    path = tmp_path / "t-0"
    out = subprocess.run([sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "KAFKA_STORAGE_ERROR" in out.stderr and "File too large" in out.stderr
    acked = int(out.stdout.split()[-1])
    # The limit bites mid-segment, at 4 MiB of 1 KiB records.
    assert 3700 < acked < 4000
    log = Log.open(path)
    assert log.log_end_offset == acked
    recs = []
    offset = 0
    while offset < acked:
        batch = decode_records(log.read(offset, 1 << 20).view)
        recs += [r for r in batch if r.offset >= offset]
        offset = batch[-1].offset + 1
    assert [r.value[:8] for r in recs] == [b"%08d" % i for i in range(acked)]
    log.close()


def test_a_log_dropped_without_close_releases_its_lock(tmp_path):
    import gc

    log = Log.open(tmp_path / "t-0")
    log.append_as_leader([b"x"])
    assert fds_under(tmp_path) > 0
    del log
    gc.collect()
    assert fds_under(tmp_path) == 0  # no descriptor leaked either
    log = Log.open(tmp_path / "t-0")  # unclean: recovered, and openable
    assert log.log_end_offset == 1
    log.close()


# ---- the leader checks a producer's records before it acknowledges them -----------------------
def _resign(batch: bytearray) -> bytearray:
    """Recompute the CRC (attributes..end), as a buggy producer would over bad records."""
    import struct

    from kreplica.records import crc32c

    batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    return batch


def _gzip_batch(n=20):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        builder.append(i, 1000 + i, None, b"payload" * 10, [])
    return bytearray(builder.build())


@pytest.mark.parametrize("damage, error, message", [
    # A record's length varint says more than the batch holds: no reader could decode it.
    (lambda b: b.__setitem__(61, 0x7e), errors.InvalidRecord, "bad record"),
    # The second record repeats offset delta 0 (zigzag varint at byte 72): deltas must run 0..n-1.
    (lambda b: b.__setitem__(72, 0), errors.InvalidRecord, "bad record 1"),
])
def test_a_leader_refuses_batches_whose_records_no_reader_could_decode(tmp_path, damage, error, message):
    from kreplica.records import encode_batch

    log = Log.open(tmp_path / "t-0")
    log.append_batches_as_leader(encode_batch([b"ok"]), leader_epoch=0)
    bad = bytearray(encode_batch([b"a", b"b", b"c"]))
    damage(bad)
    with pytest.raises(error, match=message):
        log.append_batches_as_leader(bytes(_resign(bytearray(bad))), leader_epoch=0)
    with pytest.raises(errors.CorruptMessage, match="crc mismatch"):  # not re-signed: the CRC speaks first
        log.append_batches_as_leader(bytes(bad), leader_epoch=0)
    assert log.log_end_offset == 1 and [r.value for r in decode_records(log.read(0, 1 << 20).view)] == [b"ok"]
    log.close()


@pytest.mark.parametrize("tail", [20, 100])
def test_zero_bytes_after_the_last_batch_are_a_corrupt_message_on_both_append_paths(tmp_path, tail):
    # Zeros after whole batches end a scan cleanly, but an append's buffer must be
    # batches to its end: Kafka's reader calls such a tail corrupt, on a leader (not an
    # invalid record) and on a follower (not a write of fewer bytes than were given).
    from kreplica.records import encode_batch

    log = Log.open(tmp_path / "t-0")
    data = encode_batch([b"a", b"b"]) + bytes(tail)
    with pytest.raises(errors.CorruptMessage, match=f": {tail} trailing bytes are not a batch"):
        log.append_batches_as_leader(data, leader_epoch=0)
    with pytest.raises(errors.CorruptMessage, match=f": {tail} trailing bytes are not a batch"):
        log.append_as_follower(data)
    assert log.log_end_offset == 0 and not len(log.read(0, 1 << 20).view)
    log.close()


def test_a_leader_refuses_control_batches_from_a_client_and_a_follower_copies_them(tmp_path):
    # Control records (transaction markers) are the broker's to write: a client's batch with
    # the control bit was acknowledged and stored as a marker.
    from kreplica.records import decode_batches, encode_batch

    marker = encode_batch([(b"\x00\x00\x00\x00", b"\x00" * 6)], attributes=0x30, producer_id=7,
                          producer_epoch=0, timestamp_ms=5)
    log = Log.open(tmp_path / "t-0")
    with pytest.raises(errors.InvalidRecord, match="control batch at position 0: clients may not write"):
        log.append_batches_as_leader(marker, leader_epoch=0)
    assert log.log_end_offset == 0
    follower = Log.open(tmp_path / "t-1")
    follower.append_as_follower(marker)  # what a leader wrote, a follower copies
    assert next(decode_batches(follower.read(0).view)).is_control
    log.close(), follower.close()


def _with_header_key(key: bytes) -> bytes:
    """A producer batch whose one record has a header key of these raw bytes."""
    from kreplica.records import encode_batch

    b = bytearray(encode_batch([(None, b"v", [("#" * len(key), b"h")], 10)]))
    at = b.index(b"#" * len(key) + b"\x02h")
    b[at:at + len(key)] = key
    return bytes(_resign(b))


def test_a_leader_refuses_header_keys_no_reader_could_decode(tmp_path):
    # A key that is not UTF-8 was acknowledged, then every read of the batch failed.
    log = Log.open(tmp_path / "t-0")
    with pytest.raises(errors.InvalidRecord, match="header key of record 0 is not UTF-8 in the batch at pos"):
        log.append_batches_as_leader(_with_header_key(b"\xff"), leader_epoch=0)
    assert log.log_end_offset == 0
    log.append_batches_as_leader(_with_header_key("clé-日本-🙂".encode()), leader_epoch=0)
    assert decode_records(log.read(0).view)[0].headers == (("clé-日本-🙂", b"h"),)
    log.close()


def test_a_leader_takes_header_values_that_are_not_utf8(tmp_path):
    # Only a header's key is a string; its value is bytes (Kafka's Header.value() is a
    # byte[]), so a value no UTF-8 decoder takes is the producer's to send, plain or gzip.
    from kreplica.records import encode_batch, scan_batches

    value = b"\xff\xfe\xc0\x80"
    plain = encode_batch([(None, b"v", [("k", value)], 10)])
    assert scan_batches(plain, check_records=True).error is None  # the leader's record checks
    log = Log.open(tmp_path / "t-0")
    assert log.append_batches_as_leader(plain, leader_epoch=0).last_offset == 0
    assert log.append_batches_as_leader(_gzip_of(plain[61:], record_count=1), leader_epoch=0).last_offset == 1
    assert [r.headers for r in decode_records(log.read(0).view)] == [(("k", value),)] * 2
    log.close()


def test_a_leader_takes_gzip_batches_checked_and_refuses_codecs_it_cannot_read(tmp_path):
    log = Log.open(tmp_path / "t-0")
    info = log.append_batches_as_leader(bytes(_gzip_batch()), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (0, 19)
    assert len(decode_records(log.read(0, 1 << 20).view)) == 20
    # codec ids no Kafka codec has (5 to 7) are refused the same way, named by their number
    for codec, name in ((2, "snappy"), (3, "lz4"), (4, "zstd"), (5, "codec 5"), (7, "codec 7")):
        other = _gzip_batch()
        other[22] = (other[22] & ~7) | codec
        with pytest.raises(errors.UnsupportedCompressionType, match=name):
            log.append_batches_as_leader(bytes(_resign(other)), leader_epoch=0)
    # in a run, the refused batch is named by its position in the request's bytes
    from kreplica.records import encode_batch

    plain, snappy = encode_batch([b"a"], timestamp_ms=1), _gzip_batch()
    snappy[22] = (snappy[22] & ~7) | 2
    with pytest.raises(errors.UnsupportedCompressionType,
                       match=f": batch at position {len(plain)} is compressed with snappy;"):
        log.append_batches_as_leader(plain + bytes(_resign(snappy)), leader_epoch=0)
    garbled = _gzip_batch()
    garbled[80:90] = bytes(10)  # inside the compressed records
    with pytest.raises((errors.InvalidRecord, errors.CorruptMessage)):
        log.append_batches_as_leader(bytes(_resign(garbled)), leader_epoch=0)
    assert log.log_end_offset == 20
    log.close()


def test_a_leader_checks_each_batch_of_a_run_by_its_own_codec(tmp_path):
    # One append of several producer batches (Log.append_batches_as_leader takes a run):
    # a plain batch's records are read as they are, a gzip batch's decompressed, whatever
    # codec the batch before or after it has.
    from kreplica.records import encode_batch

    log = Log.open(tmp_path / "t-0")
    info = log.append_batches_as_leader(encode_batch([b"a"]) + bytes(_gzip_batch()), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (0, 20)
    garbled = _gzip_batch()
    garbled[80:90] = bytes(10)  # inside the compressed records
    with pytest.raises((errors.InvalidRecord, errors.CorruptMessage)):
        log.append_batches_as_leader(bytes(_resign(garbled)) + encode_batch([b"b"]), leader_epoch=0)
    assert log.log_end_offset == 21
    log.close()


@pytest.mark.parametrize("damage", [
    lambda b: b.__setitem__(slice(80, 90), bytes(10)),  # inside the compressed records
    # one record fewer in the header (count and lastOffsetDelta agree): the records are fine
    lambda b: struct.pack_into(">i", b, 23, 18) or struct.pack_into(">i", b, 57, 19),
], ids=["payload", "count"])
def test_a_gzip_batch_whose_crc_fails_is_a_corrupt_message_whatever_its_records(tmp_path, damage):
    # The CRC speaks before the records are decompressed and checked, as for any batch.
    log = Log.open(tmp_path / "t-0")
    bad = _gzip_batch()
    damage(bad)  # and not re-signed
    with pytest.raises(errors.CorruptMessage, match="crc mismatch at position 0"):
        log.append_batches_as_leader(bytes(bad), leader_epoch=0)
    assert log.log_end_offset == 0
    log.close()


def _gzip_of(*members: bytes, record_count: int, cut: int = 0, tail: bytes = b"", max_ts: int = 1000) -> bytes:
    """A gzip producer batch of ``record_count`` records whose compressed payload is these
    gzip members, concatenated (less ``cut`` bytes, plus ``tail``); its header says
    ``max_ts`` and its base timestamp is 1000."""
    import gzip
    import struct

    payload = b"".join(gzip.compress(m) for m in members)
    b = bytearray(61) + payload[:len(payload) - cut] + tail
    struct.pack_into(">qiibIhiqqqhii", b, 0, 0, len(b) - 12, 0, 2, 0, 1, record_count - 1,
                     1000, max_ts, -1, -1, -1, record_count)
    return bytes(_resign(b))


def test_a_leader_bounds_what_a_gzip_batch_may_decompress_to(tmp_path):
    # A gzip batch of a few KiB that inflates to far more than a batch may hold was
    # decompressed whole into memory before any record was looked at.
    log = Log.open(tmp_path / "t-0", {"max.message.bytes": 4096})
    assert log.config.max_decompressed_bytes == 1 << 20  # 64 x 4096 is below the 1 MiB floor
    bomb = _gzip_of(bytes(2 << 20), record_count=1)
    assert len(bomb) < 4096
    with pytest.raises(errors.RecordTooLarge, match="decompresses to more than 1048576 bytes"):
        log.append_batches_as_leader(bomb, leader_epoch=0)
    with pytest.raises(errors.CorruptMessage, match="truncated"):
        log.append_batches_as_leader(_gzip_of(b"", record_count=1, cut=10), leader_epoch=0)
    assert log.log_end_offset == 0
    log.close()


def test_every_gzip_member_of_a_batch_is_read(tmp_path, monkeypatch):
    # Only the first member was decompressed: records in a second one were invisible, and
    # the leader refused the batch as if it were short of records.
    import kreplica._records
    from kreplica.records import encode_batch

    records = encode_batch([b"a", b"b", b"c"], timestamp_ms=1000)[61:]
    two_members = _gzip_of(records[:9], records[9:], record_count=3)
    log = Log.open(tmp_path / "t-0")
    log.append_batches_as_leader(two_members, leader_epoch=0)
    assert [r.value for r in decode_records(log.read(0).view)] == [b"a", b"b", b"c"]
    # What follows a member is one if it opens with gzip's magic, and then it must decompress;
    # other bytes end the data, as GZIPInputStream ends its stream at them.
    with pytest.raises(errors.CorruptMessage, match="corrupt"):
        log.append_batches_as_leader(_gzip_of(records, record_count=3, tail=b"\x1f\x8b\x01\x02"), leader_epoch=0)
    assert log.append_batches_as_leader(_gzip_of(records, record_count=3, tail=b"\x01\x02"), 0).last_offset == 5
    # Readers have a bound too: what no leader would take is not decoded into memory either.
    monkeypatch.setattr(kreplica._records, "MAX_DECOMPRESSED_BYTES", len(records) - 1)
    with pytest.raises(errors.RecordTooLarge, match=f"more than {len(records) - 1} bytes"):
        decode_records(log.read(0).view)
    log.close()


def test_a_gzip_batch_gets_its_records_max_timestamp_too(tmp_path):
    from kreplica.records import decode_batches, encode_batch

    records = encode_batch([b"a", b"b"], timestamp_ms=1000)[61:]
    log = Log.open(tmp_path / "t-0")
    assert log.append_batches_as_leader(_gzip_of(records, record_count=2, max_ts=1500), 0).max_timestamp == 1000
    stored = next(decode_batches(log.read(0).view))
    assert stored.max_timestamp == 1000 and stored.valid()
    # In a run of batches each gets its own records' max: a plain batch before the gzip
    # one keeps its 700, the gzip batch gets 1000, not its header's 1500.
    info = log.append_batches_as_leader(encode_batch([b"c"], timestamp_ms=700)
                                        + _gzip_of(records, record_count=2, max_ts=1500), 0)
    assert info.max_timestamp == 1000
    assert [b.max_timestamp for b in decode_batches(log.read(2).view)] == [700, 1000]
    log.close()


def test_a_new_partition_directory_is_made_durable_in_its_parent(tmp_path, monkeypatch):
    import kreplica.log.log as log_module

    synced = []
    real = log_module.fsync_dir
    monkeypatch.setattr(log_module, "fsync_dir", lambda path: (synced.append(path), real(path)))
    Log.open(tmp_path / "data" / "t-0").close()
    assert synced[0] == tmp_path / "data"  # before anything is written into it
    synced.clear()
    Log.open(tmp_path / "data" / "t-0").close()  # reopened: the entry is durable already
    assert tmp_path / "data" not in synced


def test_log_append_time_keeps_the_codec_of_a_gzip_batch(tmp_path):
    """LogAppendTime sets bit 3 of the attributes in place; the codec in the low bits stays,
    or the stamped batch says "uncompressed" over gzip bytes and no reader can decode it."""
    from kreplica.records import decode_batches

    log = Log.open(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"})
    log.append_batches_as_leader(bytes(_gzip_batch()), leader_epoch=0)
    (batch,) = decode_batches(log.read(0, 1 << 20).view)
    assert batch.valid() and batch.timestamp_type == 1 and batch.compression == "gzip"
    assert [r.value for r in decode_records(log.read(0, 1 << 20).view)] == [b"payload" * 10] * 20
    log.close()


def test_a_leader_refuses_a_gzip_batch_whose_payload_is_zlib_framed(tmp_path):
    # Codec 1 is gzip: Kafka's GZIPInputStream and kafka-python's GzipFile want gzip's own
    # header. The same deflate data zlib-framed was acknowledged, then no Kafka reader could
    # decompress what the log held.
    import zlib

    from kreplica.records import encode_batch

    records = encode_batch([b"a", b"b", b"c"], timestamp_ms=1000)[61:]
    zlib_framed = bytearray(_gzip_of(b"", record_count=3))[:61] + zlib.compress(records)
    struct.pack_into(">i", zlib_framed, 8, len(zlib_framed) - 12)
    log = Log.open(tmp_path / "t-0")
    with pytest.raises(errors.CorruptMessage, match="gzip data of the batch at position 0 is corrupt"):
        log.append_batches_as_leader(bytes(_resign(zlib_framed)), leader_epoch=0)
    assert log.log_end_offset == 0
    log.append_batches_as_leader(_gzip_of(records, record_count=3), leader_epoch=0)
    assert [r.value for r in decode_records(log.read(0).view)] == [b"a", b"b", b"c"]
    log.close()


def test_a_gzip_batch_with_a_header_key_no_reader_could_decode_is_an_invalid_record(tmp_path):
    # The records are damaged, not the batch: InvalidRecord, as for an uncompressed batch,
    # never CorruptMessage (which a producer takes for damage in flight and retries).
    from kreplica.records import encode_batch

    records = bytearray(encode_batch([(None, b"v", [("#", b"h")], 1000)])[61:])
    records[records.index(b"#\x02h")] = 0xFF
    log = Log.open(tmp_path / "t-0")
    with pytest.raises(errors.InvalidRecord, match="header key of record 0 is not UTF-8 in the batch at position 0"):
        log.append_batches_as_leader(_gzip_of(bytes(records), record_count=1), leader_epoch=0)
    # After another batch, the message names the gzip batch's own position.
    plain = encode_batch([b"a"], timestamp_ms=1)
    with pytest.raises(errors.InvalidRecord, match=f"record 0 is not UTF-8 in the batch at position {len(plain)}$"):
        log.append_batches_as_leader(plain + _gzip_of(bytes(records), record_count=1), leader_epoch=0)
    assert log.log_end_offset == 0
    log.close()


@pytest.mark.parametrize("damage, bad", [(lambda run: run + b"\x00\x00", 2), (lambda run: run[:-1], 1)],
                         ids=["bytes-after", "cut-short"])
def test_a_gzip_batch_whose_records_are_damaged_is_an_invalid_record(tmp_path, damage, bad):
    # Records no reader could decode inside a sound gzip stream are the producer's
    # records at fault, not damage in flight: INVALID_RECORD, as for an uncompressed
    # batch, never the CORRUPT_MESSAGE a producer retries.
    from kreplica.records import encode_batch

    records = encode_batch([b"a", b"b"], timestamp_ms=1000)[61:]
    log = Log.open(tmp_path / "t-0")
    with pytest.raises(errors.InvalidRecord, match=f"bad record {bad} in the batch at position 0$"):
        log.append_batches_as_leader(_gzip_of(damage(records), record_count=2), leader_epoch=0)
    assert log.log_end_offset == 0
    assert log.append_batches_as_leader(_gzip_of(records, record_count=2), leader_epoch=0).last_offset == 1
    log.close()


def test_a_batch_of_exactly_max_message_bytes_is_taken_on_both_leader_paths(tmp_path):
    """Kafka refuses a batch larger than max.message.bytes, not one of that size."""
    items = [b"v" * 100 for _ in range(5)]
    probe = Log.open(tmp_path / "probe")
    probe.append_as_leader(items, leader_epoch=0, timestamp_ms=1000)
    batch = probe.read(0).tobytes()
    probe.close()
    exact = Log.open(tmp_path / "exact", {"max.message.bytes": len(batch)})
    assert exact.append_as_leader(items, leader_epoch=0, timestamp_ms=1000).valid_bytes == len(batch)
    assert exact.append_batches_as_leader(batch, leader_epoch=0).valid_bytes == len(batch)
    exact.close()
    under = Log.open(tmp_path / "under", {"max.message.bytes": len(batch) - 1})
    with pytest.raises(errors.RecordTooLarge):
        under.append_as_leader(items, leader_epoch=0, timestamp_ms=1000)
    with pytest.raises(errors.RecordTooLarge):
        under.append_batches_as_leader(batch, leader_epoch=0)
    assert under.log_end_offset == 0
    under.close()


def test_the_decompression_bound_stops_at_what_any_reader_decodes(tmp_path):
    from kreplica.log import LogConfig
    from kreplica.records import MAX_DECOMPRESSED_BYTES

    cfg = LogConfig.from_dict({"max.message.bytes": (1 << 31) - 1})
    assert cfg.max_decompressed_bytes == MAX_DECOMPRESSED_BYTES < 64 * cfg.max_message_bytes


def test_a_segment_bytes_too_small_is_refused_naming_the_key_and_the_floor(tmp_path):
    with pytest.raises(errors.InvalidConfig, match=r"segment\.bytes=100: below 1024"):
        Log.open(tmp_path / "t-0", {"segment.bytes": 100})
    assert not (tmp_path / "t-0").exists()


def test_an_open_that_fails_while_loading_releases_the_directory_at_once(tmp_path):
    """An open that fails after taking the lock (here an unreadable recovery-point
    checkpoint) closes what it opened before raising: the directory is free for the next
    open at once, not only when the cycle collector finds the half-built Log."""
    import gc

    path = tmp_path / "t-0"
    log = Log.open(path)
    log.append_as_leader([b"x"])
    log.close()
    (path / "recovery-point-checkpoint").write_text("0\n1\nnot-a-number\n")
    gc.disable()  # what is left open must not depend on when the collector runs
    try:
        with pytest.raises(errors.KafkaStorageError, match="malformed"):
            Log.open(path)
        assert fds_under(tmp_path) == 0
        (path / "recovery-point-checkpoint").write_text("0\n1\n1\n")  # the file repaired
        log = Log.open(path)  # no "already open"
    finally:
        gc.enable()
    assert log.log_end_offset == 1
    log.close()


def test_a_clean_open_makes_the_removal_of_its_shutdown_marker_durable(tmp_path, monkeypatch):
    """The clean-shutdown marker's removal is fsynced before the open returns: left in the
    page cache, a power loss after later appends could bring the marker back, and the
    next open would trust segments that were never flushed."""
    import kreplica.log.log as log_module

    path = tmp_path / "t-0"
    Log.open(path).close()
    synced = []
    real = log_module.fsync_dir
    monkeypatch.setattr(log_module, "fsync_dir",
                        lambda p: (synced.append((p, (p / ".kafka_cleanshutdown").exists())), real(p)))
    log = Log.open(path)
    assert (path, False) in synced
    synced.clear()
    log.close()  # and the marker a clean close leaves is made durable in its turn
    assert synced == [(path, True)]


def test_a_directory_whose_lock_file_cannot_be_opened_is_refused_as_a_storage_error(tmp_path, monkeypatch):
    """The lock file that cannot be opened (here a directory stands in its place) fails
    the open as a KafkaStorageError naming the directory, as every other storage fault
    of an open does: the broker takes the log dir offline instead of crashing.  The lock
    that never got a descriptor is then dropped quietly (its ``__del__`` once failed on
    the missing attribute, an "Exception ignored" on stderr at every such open)."""
    import gc

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    d = tmp_path / "t-0"
    (d / ".lock").mkdir(parents=True)
    with pytest.raises((errors.KafkaStorageError, OSError)) as info:
        Log.open(d)
    assert type(info.value) is errors.KafkaStorageError and f"locking {d}" in str(info.value)
    del info
    gc.collect()
    assert [u.exc_value for u in unraisable] == []
    assert sorted(os.listdir(d)) == [".lock"] and fds_under(tmp_path) == 0


def test_a_shutdown_marker_that_cannot_be_made_durable_fails_the_close_as_a_storage_error(tmp_path, monkeypatch):
    """An I/O error making the clean-shutdown marker durable is a KafkaStorageError naming
    the log, as every other error of a close is; the log can still be let go of as a
    crashed one, and the next open then scans it."""
    import errno

    import kreplica.log.log as log_module

    path = tmp_path / "t-0"
    log = Log.open(path)
    log.append_as_leader([b"x" * 100] * 10, leader_epoch=3)

    def failing(p):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(log_module, "fsync_dir", failing)
    with pytest.raises((errors.KafkaStorageError, OSError)) as info:
        log.close()
    assert type(info.value) is errors.KafkaStorageError and f"marking {path} clean" in str(info.value)
    monkeypatch.undo()
    log.crash(lose_unflushed=False)
    assert fds_under(tmp_path) == 0
    os.unlink(path / ".kafka_cleanshutdown")  # the marker never reached the disk
    log = Log.open(path)
    assert log.log_end_offset == 10 and [r.batches for r in log.last_recovery] == [1]
    log.close()


def test_a_close_whose_flush_fails_leaves_no_shutdown_marker(tmp_path):
    """The clean-shutdown marker is written only once the flush succeeded: written first,
    a close whose flush failed (here the leader-epoch checkpoint cannot be written) left
    it over unflushed batches, and the next open trusted them unscanned."""
    path = tmp_path / "t-0"
    log = Log.open(path)
    log.append_as_leader([b"x" * 100] * 10, leader_epoch=3)
    (path / "leader-epoch-checkpoint.tmp").mkdir()  # the write's open fails: EISDIR
    with pytest.raises(errors.KafkaStorageError, match="leader-epoch-checkpoint"):
        log.close()
    assert not (path / ".kafka_cleanshutdown").exists()
    log.crash(lose_unflushed=False)
    (path / "leader-epoch-checkpoint.tmp").rmdir()
    log = Log.open(path)
    assert [r.batches for r in log.last_recovery] == [1]  # scanned, not trusted
    assert log.leader_epoch_cache.entries == [(3, 0)]
    log.close()


def test_a_leftover_time_index_without_its_log_is_removed_too(tmp_path):
    """Both index files of an interrupted segment creation go, not only the offset index:
    a stale ``.timeindex`` left behind would be taken up by the next segment created at
    its base, its entries naming records that segment never held."""
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000042.timeindex").write_bytes(b"\0" * 12)
    log = Log.open(d)
    assert not (d / "00000000000000000042.timeindex").exists()
    log.close()


def test_a_batch_too_large_or_of_a_codec_kreplica_cannot_read_is_answered_so_whatever_its_crc(tmp_path):
    """Kafka's leader checks a batch's size against max.message.bytes before its CRC
    (Log.analyzeAndValidateRecords: RecordTooLargeException, then CorruptRecordException),
    and a codec the broker cannot take is refused with the request, before the log looks
    at the batch (as Kafka refuses zstd from an old produce version).  A damaged CRC
    changes neither answer, and nothing is appended."""
    from kreplica.records import encode_batch

    log = Log.open(tmp_path / "t-0", {"max.message.bytes": 200})
    big = bytearray(encode_batch([b"x" * 300], timestamp_ms=1))
    big[-2] ^= 1  # inside the value: the records still parse, the CRC no longer matches
    with pytest.raises(errors.RecordTooLarge, match="exceeds max.message.bytes=200"):
        log.append_batches_as_leader(bytes(big), leader_epoch=0)
    snappy = _gzip_batch(1)
    snappy[22] = (snappy[22] & ~7) | 2
    snappy = _resign(snappy)
    snappy[-1] ^= 1
    with pytest.raises(errors.UnsupportedCompressionType, match="snappy"):
        log.append_batches_as_leader(bytes(snappy), leader_epoch=0)
    assert log.log_end_offset == 0
    log.close()


@pytest.mark.parametrize("empty", [b"", bytearray(), memoryview(b"")], ids=["bytes", "bytearray", "memoryview"])
def test_an_empty_producer_append_is_an_invalid_record_not_a_corrupt_one(tmp_path, empty):
    # CorruptMessage is retriable: a producer would send its empty request again and
    # again.  Nothing to append is the request's fault, and the log stays as it was.
    log = Log.open(tmp_path / "t-0", {})
    log.append_as_leader([b"a"])
    with pytest.raises(errors.InvalidRecord, match="no batches"):
        log.append_batches_as_leader(empty, leader_epoch=0)
    assert log.log_end_offset == 1 and log.segments[-1].size == len(bytes(log.read(0)))
    log.close()


def test_a_log_config_gives_back_kafkas_key_names_and_round_trips():
    from kreplica.log import LogConfig

    cfg = LogConfig.from_dict({"segment.bytes": 4096, "retention.ms": 7, "message.timestamp.type": "LogAppendTime"})
    named = cfg.to_dict()
    assert named["segment.bytes"] == 4096 and named["retention.ms"] == 7
    assert named["message.timestamp.type"] == "LogAppendTime" and "segment_bytes" not in named
    assert LogConfig.from_dict(named) == cfg


@pytest.mark.parametrize("path", ["follower", "producer"])
def test_a_full_disk_found_by_the_reservation_refuses_copied_batches_with_the_log_unchanged(tmp_path, monkeypatch, path):
    """Ready batches (a follower's, a producer's) get their disk blocks reserved before a
    byte is copied, as the leader's encoded ones do: a full disk is a KafkaStorageError
    and nothing of the append is in the log."""
    import errno

    from kreplica.records import encode_batch

    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20})

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    batch = encode_batch([b"x" * 100] * 5, base_offset=0, leader_epoch=1, timestamp_ms=1000)
    with pytest.raises(errors.KafkaStorageError, match="reserving space"):
        if path == "follower":
            log.append_as_follower(batch)
        else:
            log.append_batches_as_leader(batch, leader_epoch=1)
    assert log.log_end_offset == 0 and len(log.read(0)) == 0
    monkeypatch.undo()
    log.append_as_follower(batch)
    assert log.log_end_offset == 5
    log.close()


def test_an_open_refused_by_its_leader_epoch_checkpoint_releases_the_directory_at_once(tmp_path):
    """The leader-epoch checkpoint is read while the Log is built, before anything is
    loaded: an open that fails there lets go of the lock before raising too, not when
    the error and its traceback (which hold the lock) are dropped."""
    path = tmp_path / "t-0"
    Log.open(path).close()
    (path / "leader-epoch-checkpoint").write_text("0\n1\nnot numbers\n")
    with pytest.raises(errors.KafkaStorageError, match="malformed") as refused:
        Log.open(path)
    assert fds_under(tmp_path) == 0  # the traceback still alive here
    (path / "leader-epoch-checkpoint").write_text("0\n0\n")
    log = Log.open(path)  # no "already open"
    assert refused.value is not None
    log.close()
