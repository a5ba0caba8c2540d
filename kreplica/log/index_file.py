"""The mmap-backed, preallocated, sparse index file both segment indexes share.

Theory of operation (Kafka's AbstractIndex).  An active index is preallocated to
``segment.index.bytes`` and mapped for write; entries are fixed-size records whose
first field is the search key, appended in increasing key order.  On close or
roll the file is trimmed to its entries, so a clean reopen counts entries from the
file size.  After a crash the active index is not trusted: the log rebuilds it
from the batches.  Sealed indexes are mapped read-only, and only once used.
Lookups are binary searches that try the newest (warm) entries first, in Cython.
"""
from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np

from ..errors import KafkaStorageError
from ._segment import index_slot, put_entries
from .mapped_file import MappedFile

# Kafka keeps the last 8 KiB of entries as the warm section (one or two pages).
WARM_BYTES = 8192


class IndexFile:
    ENTRY_BYTES = 8
    KEY_BYTES = 4
    # Slots appends leave free: the time index keeps one for the entry sealing adds on
    # roll and close (Kafka's TimeIndex does the same).
    RESERVED = 0
    DTYPE: np.dtype = np.dtype([("key", ">u4"), ("value", ">u4")])
    FORMAT = ">II"

    def __init__(self, path: str | os.PathLike[str], base_offset: int, max_index_bytes: int,
                 writable: bool) -> None:
        self.file = MappedFile(path)
        self.base_offset = base_offset
        self._max_bytes = max_index_bytes - max_index_bytes % self.ENTRY_BYTES
        try:
            size = os.path.getsize(self.file.filename)
        except FileNotFoundError:
            size = 0
        except OSError as e:
            raise KafkaStorageError(f"opening index {self.path}: {e}") from e
        self.entries = size // self.ENTRY_BYTES
        if writable:
            self.open_for_append()
        self._warm = WARM_BYTES // self.ENTRY_BYTES

    @property
    def path(self) -> Path:
        return self.file.path

    def open_for_append(self) -> None:
        mm = self.file.open_for_write(self.size_bytes(), max(self._max_bytes, self.size_bytes()), keep_fd=False)
        # Entries land a few bytes at a time at the tail.  Without this the first write
        # fault reads ahead read_ahead_kb (8 MiB here) of the sparse file, zero-filling
        # megabytes of page cache: about 2 ms per index each time a segment is created.
        mm.madvise(mmap.MADV_RANDOM)

    @property
    def writable(self) -> bool:
        return self.file.writable

    @property
    def max_entries(self) -> int:
        return self.file.length // self.ENTRY_BYTES if self.writable else self.entries

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries - self.RESERVED

    def room_bytes(self) -> int:
        """Bytes of entries an append may still add (the reserved slots kept free)."""
        return max(0, self.max_entries - self.RESERVED - self.entries) * self.ENTRY_BYTES

    def size_bytes(self) -> int:
        return self.entries * self.ENTRY_BYTES

    # -- reading -------------------------------------------------------------------------

    def _slot(self, key: int) -> int:
        mm = self.file.map(self.size_bytes())
        if mm is None or not self.entries:
            return -1
        return index_slot(mm, self.entries, self.ENTRY_BYTES, self.KEY_BYTES, key, self._warm)

    def array(self) -> np.ndarray:
        """All entries as a structured array (a copy: callers may keep it)."""
        mm = self.file.map(self.size_bytes())
        if mm is None or not self.entries:
            return np.empty(0, dtype=self.DTYPE)
        return np.frombuffer(mm, dtype=self.DTYPE, count=self.entries).copy()

    def _entry(self, slot: int) -> tuple[int, int]:
        mm = self.file.map(self.size_bytes())
        assert mm is not None
        return struct.unpack_from(self.FORMAT, mm, slot * self.ENTRY_BYTES)

    # -- writing -------------------------------------------------------------------------

    def _write(self, keys: np.ndarray, values: np.ndarray, floor: int) -> None:
        """Append entries (in Cython): keys must rise strictly from above ``floor``."""
        if not self.writable:
            raise KafkaStorageError(f"index {self.path} is not open for append")
        if self.entries + len(keys) > self.max_entries:
            raise KafkaStorageError(f"index {self.path} is full ({self.entries} entries)")
        start = self.size_bytes()
        end = start + len(keys) * self.ENTRY_BYTES
        self.file.reserve(end)
        mm = self.file.map(end)
        assert mm is not None
        done = put_entries(mm, start, np.ascontiguousarray(keys, np.int64), np.ascontiguousarray(values, np.int64),
                           self.KEY_BYTES, floor)
        if done < 0:
            i = -done - 1
            raise KafkaStorageError(
                f"index {self.path}: entry ({int(keys[i])}, {int(values[i])}) does not follow {floor if i == 0 else int(keys[i - 1])}"
            )
        self.entries += done

    def check_room(self, nbytes: int) -> None:
        """KafkaStorageError unless ``nbytes`` of encoded entries can be appended."""
        if nbytes and not self.writable:
            raise KafkaStorageError(f"index {self.path} is not open for append")
        if self.entries + nbytes // self.ENTRY_BYTES > self.max_entries - self.RESERVED:
            raise KafkaStorageError(f"index {self.path} is full ({self.entries} entries)")

    def append_encoded(self, data: bytes | bytearray) -> None:
        """Append entries already encoded and checked to follow the last one (a segment's
        whole append plans them in one Cython call)."""
        if not data:
            return
        self.check_room(len(data))
        start = self.size_bytes()
        end = start + len(data)
        self.file.reserve(end)
        mm = self.file.map(end)
        assert mm is not None
        mm[start:end] = data
        self.entries += len(data) // self.ENTRY_BYTES

    def _write_one(self, *fields: int) -> None:
        """One entry without numpy (the leader appends one batch at a time)."""
        if not self.writable:
            raise KafkaStorageError(f"index {self.path} is not open for append")
        if self.entries >= self.max_entries:
            raise KafkaStorageError(f"index {self.path} is full ({self.entries} entries)")
        start = self.size_bytes()
        self.file.reserve(start + self.ENTRY_BYTES)
        struct.pack_into(self.FORMAT, self.file.map(start + self.ENTRY_BYTES), start, *fields)
        self.entries += 1

    def truncate_entries(self, entries: int) -> None:
        entries = min(self.entries, max(0, entries))
        if entries < self.entries and not self.writable:
            self.file.truncate_file(entries * self.ENTRY_BYTES)
        self.entries = entries
        self.file.flushed = min(self.file.flushed, self.size_bytes())

    def reset(self) -> None:
        self.truncate_entries(0)

    def flush(self) -> None:
        self.file.flush(self.size_bytes())

    def seal(self) -> None:
        """Trim to the entries and keep only a lazy read-only map."""
        self.file.seal(self.size_bytes())

    def close(self) -> None:
        self.seal()
        self.file.close()

    def delete(self) -> None:
        self.file.delete()
