"""OffsetIndex: sparse map from offset to file position within one segment.

Kafka's ``.index`` format: 8-byte entries, a 4-byte offset relative to the
segment's base offset and a 4-byte position in the ``.log`` file, both
big-endian, one entry per ``index.interval.bytes`` of appended batches.
``lookup(offset)`` gives the greatest entry at or below ``offset``: the place to
start walking batch headers.
"""
from __future__ import annotations

import numpy as np

from ..errors import KafkaStorageError
from .index_file import IndexFile


class OffsetIndex(IndexFile):
    ENTRY_BYTES = 8
    KEY_BYTES = 4
    DTYPE = np.dtype([("relative_offset", ">u4"), ("position", ">u4")])

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the greatest entry <= ``offset``, else ``(base, 0)``."""
        rel = offset - self.base_offset
        if rel < 0:
            return self.base_offset, 0
        slot = self._slot(min(rel, 0xFFFFFFFF))
        if slot < 0:
            return self.base_offset, 0
        r, pos = self._entry(slot)
        return self.base_offset + r, pos

    def last_entry(self) -> tuple[int, int]:
        if not self.entries:
            return self.base_offset, 0
        r, pos = self._entry(self.entries - 1)
        return self.base_offset + r, pos

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if (self.entries and rel <= self._entry(self.entries - 1)[0]) or not 0 <= rel <= 0xFFFFFFFF:
            raise KafkaStorageError(f"index {self.path}: offset {offset} does not follow {self.last_entry()[0]}")
        self._write_one(rel, position)

    def append_many(self, offsets: np.ndarray, positions: np.ndarray) -> None:
        """Append entries; offsets must increase past the last entry."""
        if not len(offsets):
            return
        last = self.last_entry()[0] - self.base_offset if self.entries else -1
        self._write(offsets - self.base_offset, positions, last)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for offsets >= ``offset``."""
        slot = self._slot(max(offset - self.base_offset, 0)) if offset > self.base_offset else -1
        if slot >= 0 and self._entry(slot)[0] + self.base_offset == offset:
            slot -= 1
        self.truncate_entries(slot + 1)
