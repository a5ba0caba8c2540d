"""The stores ``kreplica bench log`` runs side by side: kreplica's Log and its peers.

Every peer gets the same records (the same 1,000 values per batch, the same
offsets) and the same durability: nobody forces an fsync.  The Log runs with its
default flush policy (``flush.messages``/``flush.ms`` unset: the page cache
decides, as in Kafka); sqlite3 runs in WAL mode with ``synchronous=OFF``; lmdb
with ``sync=False, metasync=False``; raw and plain-Python writes never fsync.

Each peer is opened on a fresh path, driven, then closed; the caller times only
the work between open and close, so nobody pays for creating files or for
trimming them.  A peer has a method only for the workloads it can do:

- ``append(work)``: every batch of ``work`` (1,000 records each);
- ``read_all()``: the whole store to Python objects, returns the record count;
- ``lookup(offsets)``: fetch each offset, one call per offset;
- ``follow(chunks)`` / ``read_bytes()`` (the Log and raw file): append ready fetches,
  and read every byte back in 1 MiB pieces.
"""
from __future__ import annotations

import itertools
import os
import random
import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path

from ..log import Log
from ..records import decode_records, encode_batch

#: One timestamp for every record of every peer (time is an input, not a measurement).
TIMESTAMP_MS = 1_700_000_000_000
BATCH_RECORDS = 1000
FSYNC_POLICY = ("no forced fsync anywhere: the Log's default flush policy (like Kafka's), "
                "sqlite3 WAL + synchronous=OFF, lmdb sync=False, raw and plain writes unsynced")


@dataclass(frozen=True, slots=True)
class AppendWork:
    """``batches`` batches of 1,000 records: ``batch_values`` holds each batch's own
    values (fresh data, as a producer sends: no store finds its input in the CPU caches
    because it read the same values a batch ago, which the raw peer, writing distinct
    encoded bytes, never could); when it is None, the one list ``values`` is reused for
    every batch (only the memory run does that).  ``values`` is the first batch's list.
    ``encoded``: the exact bytes the Log writes for them, for the raw-write peer (empty
    when the workload has no raw peer)."""

    values: list[bytes]
    batches: int
    encoded: list[bytes]
    batch_values: list[list[bytes]] | None = None

    def each_batch(self):
        """Every batch's values, in order."""
        return self.batch_values if self.batch_values is not None else itertools.repeat(self.values, self.batches)

    def pieces(self, count: int) -> list["AppendWork"]:
        """The same batches cut into about ``count`` consecutive runs (for taking turns)."""
        step = max(1, -(-self.batches // count))
        return [AppendWork(self.values if self.batch_values is None else self.batch_values[start],
                           min(step, self.batches - start), self.encoded[start:start + step],
                           None if self.batch_values is None else self.batch_values[start:start + step])
                for start in range(0, self.batches, step)]

    @property
    def records(self) -> int:
        return self.batches * len(self.values)

    @property
    def value_bytes(self) -> int:
        return self.records * len(self.values[0])

    @property
    def log_bytes(self) -> int:
        return sum(len(b) for b in self.encoded)


def append_work(value_size: int, batches: int, batch_records: int = BATCH_RECORDS, *,
                encode: bool = True, seed: int = 0) -> AppendWork:
    """The records of one append workload, each batch its own values; ``encode=False``
    skips the raw peer's bytes."""
    rng = random.Random(seed)  # reproducible, incompressible-looking values
    per_batch = [[rng.randbytes(value_size) for _ in range(batch_records)] for _ in range(max(batches, 1))]
    encoded = [encode_batch(per_batch[b], base_offset=b * batch_records, leader_epoch=0, timestamp_ms=TIMESTAMP_MS)
               for b in range(batches)] if encode else []
    return AppendWork(per_batch[0], batches, encoded, per_batch[:batches])


def fetch_chunks(encoded: list[bytes], max_bytes: int = 1 << 20) -> list[bytes]:
    """Consecutive batches grouped as a follower's fetches of at most ``max_bytes`` would be."""
    chunks, current, size = [], [], 0
    for batch in encoded:
        if current and size + len(batch) > max_bytes:
            chunks.append(b"".join(current))
            current, size = [], 0
        current.append(batch)
        size += len(batch)
    if current:
        chunks.append(b"".join(current))
    return chunks


class KReplica:
    name = "kreplica"

    def __init__(self, path: Path, segment_bytes: int = 1 << 30) -> None:
        self.log = Log.open(path, {"segment.bytes": segment_bytes})

    def append(self, work: AppendWork) -> None:
        append = self.log.append_as_leader
        for values in work.each_batch():
            append(values, 0, TIMESTAMP_MS)

    def follow(self, chunks: list[bytes]) -> None:
        append = self.log.append_as_follower
        for chunk in chunks:
            append(chunk)

    def read_bytes(self, max_bytes: int = 1 << 20) -> int:
        """Sequential ``read()`` of the whole log in fetch-sized slices; returns the bytes.
        The views' bytes are not touched (zero-copy): see ``read_bytes_copied``."""
        from ..log._segment import walk_to_end  # header walk: where the next fetch starts

        log, offset, total = self.log, self.log.log_start_offset, 0
        end = log.log_end_offset
        while offset < end:
            view = log.read(offset, max_bytes).view
            total += len(view)
            offset = walk_to_end(view, 0, len(view))[1] + 1
        return total

    def read_bytes_copied(self, max_bytes: int = 1 << 20) -> int:
        """``read_bytes`` that also copies every view into a reused buffer: the raw
        peer's job (``readinto``), so the two figures compare like with like."""
        from ..log._segment import walk_to_end

        log, offset, total = self.log, self.log.log_start_offset, 0
        end = log.log_end_offset
        buf = bytearray(2 * max_bytes)
        while offset < end:
            view = log.read(offset, max_bytes).view
            n = len(view)
            buf[:n] = view
            total += n
            offset = walk_to_end(view, 0, n)[1] + 1
        return total

    def read_all(self) -> int:
        log, offset, count = self.log, self.log.log_start_offset, 0
        end = log.log_end_offset
        while offset < end:
            records = decode_records(log.read(offset, 1 << 20).view)
            count += len(records)
            offset = records[-1].offset + 1
        return count

    def lookup(self, offsets: list[int]) -> None:
        read = self.log.read
        for offset in offsets:
            read(offset, 1)

    def close(self) -> None:
        self.log.close()


class RawWrite:
    """``os.write`` of the Log's own bytes, one call per batch: the limit for an append."""

    name = "raw os.write"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, work: AppendWork) -> None:
        self.follow(work.encoded)

    def follow(self, chunks: list[bytes]) -> None:
        write, fd = os.write, self.fd
        for chunk in chunks:
            write(fd, chunk)

    def read_bytes(self, max_bytes: int = 1 << 20) -> int:
        """``readinto`` a reused buffer: one copy from the page cache, nothing else."""
        buf = bytearray(max_bytes)
        total = 0
        with open(self.path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
        return total

    def close(self) -> None:
        os.close(self.fd)


class Sqlite:
    name = "sqlite3"

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("CREATE TABLE IF NOT EXISTS log (offset INTEGER PRIMARY KEY, value BLOB)")
        self.next = 0

    def append(self, work: AppendWork) -> None:
        db, n = self.db, len(work.values)
        for values in work.each_batch():
            db.execute("BEGIN")
            db.executemany("INSERT INTO log VALUES (?, ?)", zip(range(self.next, self.next + n), values))
            db.execute("COMMIT")
            self.next += n

    def read_all(self) -> int:
        cur = self.db.execute("SELECT offset, value FROM log ORDER BY offset")
        count = 0
        while rows := cur.fetchmany(BATCH_RECORDS):
            count += len(rows)
        return count

    def lookup(self, offsets: list[int]) -> None:
        execute = self.db.execute
        for offset in offsets:
            execute("SELECT value FROM log WHERE offset = ?", (offset,)).fetchone()

    def close(self) -> None:
        self.db.close()


class Lmdb:
    name = "lmdb"
    _key = struct.Struct(">Q").pack

    def __init__(self, path: Path, map_size: int = 8 << 30) -> None:
        import lmdb

        self.env = lmdb.open(str(path), map_size=map_size, sync=False, metasync=False)
        self.next = 0

    def append(self, work: AppendWork) -> None:
        key, n = self._key, len(work.values)
        for values in work.each_batch():
            with self.env.begin(write=True) as txn:
                keys = [key(o) for o in range(self.next, self.next + n)]
                txn.cursor().putmulti(zip(keys, values), append=True)
            self.next += n

    def read_all(self) -> int:
        with self.env.begin() as txn:
            return len(list(txn.cursor().iternext()))

    def lookup(self, offsets: list[int]) -> None:
        key = self._key
        with self.env.begin() as txn:
            get = txn.get
            for offset in offsets:
                get(key(offset))

    def close(self) -> None:
        self.env.close()


class PlainPython:
    """What one would write without a native core: a per-record loop packing a 12-byte
    (offset, length) header before each value, one ``b"".join`` and write per batch."""

    name = "plain Python"
    _header = struct.Struct(">qi")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.next = 0

    def append(self, work: AppendWork) -> None:
        pack, fd = self._header.pack, self.fd
        for values in work.each_batch():
            parts = []
            offset = self.next
            for v in values:
                parts.append(pack(offset, len(v)))
                parts.append(v)
                offset += 1
            os.write(fd, b"".join(parts))
            self.next = offset

    def read_all(self) -> int:
        data = Path(self.path).read_bytes()
        unpack, size = self._header.unpack_from, self._header.size
        records, pos = [], 0
        while pos < len(data):
            offset, n = unpack(data, pos)
            records.append((offset, data[pos + size:pos + size + n]))
            pos += size + n
        return len(records)

    def close(self) -> None:
        os.close(self.fd)


#: Every store by its column name; each class opens (or creates) its store at a path.
STORES: dict[str, type] = {cls.name: cls for cls in (KReplica, RawWrite, Sqlite, Lmdb, PlainPython)}
