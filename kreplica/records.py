"""Kafka record batch v2 (magic 2): the public, typed codec API.

Everything here is implemented in the compiled ``kreplica._records`` (Cython over
``csrc/batch.c`` and ``csrc/crc32c.c``); there is no pure-Python fallback.  The
format is Kafka's DefaultRecordBatch: a 61-byte big-endian header (base offset,
batch length, partition leader epoch, magic 2, CRC32C over attributes..end,
attributes, last offset delta, base/max timestamp, producer id/epoch, base
sequence, record count) followed by varint-framed records.  Kafka v2 decoders
(kafka-python's ``DefaultRecordBatch``) read what we write and the reverse; the
oracle tests check it.

- ``encode_batch(items, *, base_offset=0, leader_epoch=-1, timestamp_ms=None, attributes=0)``
  builds one uncompressed batch.  Items are values (bytes-like or None),
  ``(key, value)``, ``(key, value, headers)`` or ``(key, value, headers, timestamp_ms)``
  tuples, or ``Record`` objects; headers are ``(str, bytes | None)`` pairs.  Offset
  deltas run 0..n-1.  Time is injected: ``timestamp_ms=None`` writes Kafka's
  NO_TIMESTAMP (-1) unless an item carries its own timestamp.
- ``encode_batch_into(buffer, position, items, base_offset, leader_epoch, timestamp_ms)``
  writes straight into a writable buffer (an mmap) and returns the bytes written, or
  ``-needed`` when there is not room.  ``batch_size(items, timestamp_ms)`` measures.
- ``scan_batches(buf, position=0, end=None, *, check_crc=True, check_records=False)``
  validates consecutive batches in C without the GIL (magic, lengths, CRC; with
  ``check_records`` also the leader's producer-batch rules: no control batch, count ==
  lastOffsetDelta + 1, well-framed records with deltas 0..n-1 and UTF-8 header keys) and
  returns a ``ScanResult`` of numpy columns.
  It stops at the first torn or corrupt batch (``error`` names it and its position) or
  at zero fill, which is a preallocated tail and not an error.
- ``batch_fingerprints(buf)`` walks the same headers (no CRC check) straight into
  ``(base offset, last offset, leader epoch, stored CRC)`` tuples: the simulator's checker
  compares replicas by them.
- ``restamp_batches(buf, base_offset, leader_epoch)`` assigns offsets and the leader
  epoch in place (both outside the CRC) and returns the last offset.
- ``decode_batches(buf)`` iterates zero-copy ``RecordBatch`` views (``batch_at`` gives
  one); ``decode_records(buf, *, start_offset=None, stop_offset=None)`` returns the
  ``Record`` objects of every batch, CRCs checked, optionally only an offset range.
  Gzip batches are read (every gzip member; at most ``MAX_DECOMPRESSED_BYTES`` of records
  each, else ``RecordTooLarge``); other codecs raise ``InvalidRecord``.
- ``kreplica/_records.pxd`` declares the C level for other .pyx modules: the log's
  ``_batch_run.pyx`` cimports the scan, CRC-32C and byte-order helpers from it;
  ``encode_into`` / ``decode_into`` are declared there too, though nothing cimports them yet.

Bad input raises ``errors.CorruptMessage`` (framing, CRC) or ``errors.InvalidRecord``
(record contents), with the byte position in the message.
"""
from __future__ import annotations

from kreplica._records import (
    COMPILED,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_DECOMPRESSED_BYTES,
    NO_TIMESTAMP,
    Record,
    RecordBatch,
    ScanResult,
    batch_at,
    batch_fingerprints,
    batch_size,
    crc32c,
    crc32c_backend,
    crc32c_hw,
    crc32c_hw_lanes,
    crc32c_sw,
    decode_batches,
    decode_records,
    encode_batch,
    encode_batch_into,
    restamp_batches,
    scan_batches,
)

__all__ = [
    "COMPILED",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAX_DECOMPRESSED_BYTES",
    "NO_TIMESTAMP",
    "Record",
    "RecordBatch",
    "ScanResult",
    "batch_at",
    "batch_fingerprints",
    "batch_size",
    "crc32c",
    "crc32c_backend",
    "crc32c_hw",
    "crc32c_hw_lanes",
    "crc32c_sw",
    "decode_batches",
    "decode_records",
    "encode_batch",
    "encode_batch_into",
    "restamp_batches",
    "scan_batches",
]
