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
from ._segment import index_slot

# Kafka keeps the last 8 KiB of entries as the warm section (one or two pages).
WARM_BYTES = 8192


class IndexFile:
    ENTRY_BYTES = 8
    KEY_BYTES = 4
    DTYPE: np.dtype = np.dtype([("key", ">u4"), ("value", ">u4")])
    FORMAT = ">II"

    def __init__(self, path: str | os.PathLike[str], base_offset: int, max_index_bytes: int,
                 writable: bool) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._max_bytes = max_index_bytes - max_index_bytes % self.ENTRY_BYTES
        self._mm: mmap.mmap | None = None
        self.writable = writable
        try:
            fd = os.open(self.path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
            try:
                size = os.fstat(fd).st_size
                self.entries = size // self.ENTRY_BYTES
                if writable:
                    length = max(self._max_bytes, self.entries * self.ENTRY_BYTES)
                    if size != length:
                        os.ftruncate(fd, length)
                    self._mm = mmap.mmap(fd, length, access=mmap.ACCESS_WRITE)
            finally:
                os.close(fd)
        except OSError as e:
            raise KafkaStorageError(f"opening index {self.path}: {e}") from e
        self._warm = WARM_BYTES // self.ENTRY_BYTES

    # -- mapping -------------------------------------------------------------------------

    def _map(self) -> mmap.mmap | None:
        if self._mm is None and self.entries:
            with open(self.path, "rb") as f:
                self._mm = mmap.mmap(f.fileno(), self.entries * self.ENTRY_BYTES, access=mmap.ACCESS_READ)
        return self._mm

    @property
    def max_entries(self) -> int:
        return self._max_bytes // self.ENTRY_BYTES if self.writable else self.entries

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def size_bytes(self) -> int:
        return self.entries * self.ENTRY_BYTES

    # -- reading -------------------------------------------------------------------------

    def _slot(self, key: int) -> int:
        mm = self._map()
        if mm is None:
            return -1
        return index_slot(mm, self.entries, self.ENTRY_BYTES, self.KEY_BYTES, key, self._warm)

    def array(self) -> np.ndarray:
        """All entries as a structured array (a copy: callers may keep it)."""
        mm = self._map()
        if mm is None:
            return np.empty(0, dtype=self.DTYPE)
        return np.frombuffer(mm, dtype=self.DTYPE, count=self.entries).copy()

    def _entry(self, slot: int) -> tuple[int, int]:
        mm = self._map()
        assert mm is not None
        return struct.unpack_from(self.FORMAT, mm, slot * self.ENTRY_BYTES)

    # -- writing -------------------------------------------------------------------------

    def _write(self, rows: np.ndarray) -> None:
        if not self.writable or self._mm is None:
            raise KafkaStorageError(f"index {self.path} is not open for append")
        if self.entries + len(rows) > self.max_entries:
            raise KafkaStorageError(f"index {self.path} is full ({self.entries} entries)")
        start = self.entries * self.ENTRY_BYTES
        self._mm[start:start + len(rows) * self.ENTRY_BYTES] = rows.tobytes()
        self.entries += len(rows)

    def truncate_entries(self, entries: int) -> None:
        self.entries = min(self.entries, max(0, entries))

    def flush(self) -> None:
        if self._mm is not None and self.writable:
            self._mm.flush()

    def _release(self) -> None:
        mm, self._mm = self._mm, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a caller still holds a view; the map goes when the view does

    def seal(self) -> None:
        """Trim to the entries, fsync, and keep only a lazy read-only map."""
        if not self.writable:
            return
        self.flush()
        self._release()
        try:
            with open(self.path, "r+b") as f:
                os.ftruncate(f.fileno(), self.size_bytes())
                os.fsync(f.fileno())
        except OSError as e:
            raise KafkaStorageError(f"trimming index {self.path}: {e}") from e
        self.writable = False

    def close(self) -> None:
        self.seal()
        self._release()

    def reset(self) -> None:
        self.entries = 0

    def delete(self) -> None:
        self._release()
        self.path.unlink(missing_ok=True)
