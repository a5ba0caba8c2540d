"""TimeIndex: sparse map from timestamp to offset within one segment.

Kafka's ``.timeindex`` format: 12-byte entries, an 8-byte timestamp and a 4-byte
offset relative to the segment's base offset, big-endian.  An entry is added at
the offset index's interval, and only when the segment's max timestamp grew, so
both fields increase.  ``lookup(ts)`` gives the greatest entry with timestamp
<= ``ts``: batches before its offset are all older than ``ts``.
"""
from __future__ import annotations

import numpy as np

from .index_file import IndexFile


class TimeIndex(IndexFile):
    ENTRY_BYTES = 12
    KEY_BYTES = 8
    RESERVED = 1
    DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">u4")])
    FORMAT = ">qI"

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the greatest entry with timestamp <= ``timestamp``,
        else ``(-1, base_offset)``."""
        slot = self._slot(timestamp)
        if slot < 0:
            return -1, self.base_offset
        ts, rel = self._entry(slot)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        if not self.entries:
            return -1, self.base_offset
        ts, rel = self._entry(self.entries - 1)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append when ``timestamp`` is newer than the last entry's; True if appended."""
        if self.entries:
            last_ts, last_rel = self._entry(self.entries - 1)
            if timestamp <= last_ts or offset - self.base_offset < last_rel:
                return False
        self._write_one(timestamp, offset - self.base_offset)
        return True

    def maybe_append_many(self, timestamps: np.ndarray, offsets: np.ndarray) -> int:
        if not len(timestamps):
            return 0
        last_ts, last_off = self.last_entry() if self.entries else (-1, -1)
        # keep only entries whose timestamp beats every earlier one (and the file's last)
        running = np.maximum.accumulate(np.concatenate(([last_ts], timestamps)))
        keep = (timestamps > running[:-1]) & (offsets >= last_off)
        if not keep.any():
            return 0
        kept = timestamps[keep]
        self._write(kept, offsets[keep] - self.base_offset, last_ts)
        return len(kept)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for offsets >= ``offset``."""
        rel = self.array()["relative_offset"].astype(np.int64)
        self.truncate_entries(int(np.searchsorted(rel, offset - self.base_offset, side="left")))
