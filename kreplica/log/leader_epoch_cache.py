"""LeaderEpochCache: which leader epoch wrote which offsets (KIP-101, KIP-279).

Theory of operation.  The cache is an ordered list of ``(epoch, start_offset)``:
epoch ``e`` covers ``[start_offset(e), start_offset(next))``, and the latest epoch
runs to the log end offset.  Both epochs and start offsets strictly increase.
A leader assigns its epoch at its first append; a follower assigns the epoch of
each batch it copies.  ``end_offset_for(epoch)`` answers OffsetsForLeaderEpoch,
which a follower uses to truncate to the point where its log and the leader's
diverge instead of to its HW.  Every change is persisted to
``leader-epoch-checkpoint`` before the call returns (Kafka's LeaderEpochFileCache),
except an epoch the log learns from the batches it appends (``durable=False``):
that one is persisted by ``flush``, which the log calls before it moves its
recovery point, and until then a crash cannot lose it, because recovery re-reads
every batch after the recovery point and finds the epoch in their headers again.
That keeps an fsync of the checkpoint file and of its directory (~8 ms here) off
the append path, as Kafka did for its checkpoint writes in KAFKA-15046.
"""
from __future__ import annotations

import bisect
from typing import Callable

from .checkpoints import LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, checkpoint: LeaderEpochCheckpointFile, log_end_offset: Callable[[], int]) -> None:
        self._checkpoint = checkpoint
        self._log_end_offset = log_end_offset
        entries = checkpoint.read()
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]
        self._dirty = False

    # -- queries -------------------------------------------------------------------------

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or ``UNDEFINED_EPOCH`` (-1) when empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_epoch(self) -> int:
        return self._epochs[0] if self._epochs else UNDEFINED_EPOCH

    def start_offset_for(self, epoch: int) -> int:
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return self._starts[i]
        return UNDEFINED_EPOCH_OFFSET

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """``(epoch', end_offset)``: the largest known epoch <= ``epoch`` and where it ends.

        The end is the start of the next larger epoch, or the LEO for the latest one.
        An epoch older than all known ones answers ``(epoch, start of the first)``;
        an unknown newer one (or -1) answers ``(-1, -1)``.
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, self._log_end_offset()
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # -- changes (each persisted before returning) ----------------------------------------

    def assign(self, epoch: int, start_offset: int, durable: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Re-assigning the latest epoch at a later offset is a no-op.  Entries that
        conflict (an epoch >= ``epoch`` or a start >= ``start_offset``) are dropped:
        they were written by a leader whose log this one no longer follows.
        ``durable=False`` (an epoch read from appended batches) leaves the write to
        ``flush``.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch {epoch} / start offset {start_offset} must be >= 0")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return False
        keep = len(self._epochs)
        while keep and (self._epochs[keep - 1] >= epoch or self._starts[keep - 1] >= start_offset):
            keep -= 1
        del self._epochs[keep:], self._starts[keep:]
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if durable:
            self._flush()
        else:
            self._dirty = True
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the epochs starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._starts or end_offset > self._starts[-1]:
            return
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget what lies below ``start_offset`` (the log start moved up).

        The epoch covering ``start_offset`` survives with its start clamped to it.
        """
        covering = bisect.bisect_right(self._starts, start_offset) - 1
        if covering < 0:
            return
        if covering == 0 and self._starts[0] == start_offset:
            return
        del self._epochs[:covering], self._starts[:covering]
        self._starts[0] = start_offset
        self._flush()

    def clear(self) -> None:
        """Forget everything (the log was emptied and restarted at a new offset)."""
        self._epochs.clear()
        self._starts.clear()
        self._flush()

    def flush(self) -> None:
        """Persist the entries ``assign(..., durable=False)`` left in memory, if any."""
        if self._dirty:
            self._flush()

    def _flush(self) -> None:
        self._checkpoint.write(zip(self._epochs, self._starts))
        self._dirty = False

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries})"
