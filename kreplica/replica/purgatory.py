"""Delayed operations and the purgatory that holds them (Kafka's DelayedOperationPurgatory).

An operation that cannot complete at once (an acks=all produce waiting for the
HW, a follower's long-poll fetch waiting for data) is watched under one or more
keys (partitions).  Whoever changes a partition calls ``check_and_complete(key)``
and every watcher re-checks itself.  Each operation completes exactly once:
through ``try_complete``, at its timeout on the scheduler, or by ``cancel_all``.
Single-threaded on the runtime's scheduler, so no locks.
"""
from __future__ import annotations

import abc
from typing import Hashable, Iterable

from ..runtime import Scheduler


class DelayedOperation(abc.ABC):
    __slots__ = ("timeout_ms", "completed", "expired", "_timer")

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.completed = False
        self.expired = False
        self._timer = None

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; call ``force_complete`` and return True if it holds."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Send the answer (``self.expired`` says whether the timeout fired)."""

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.on_complete()
        return True


class Purgatory:
    # Completed operations linger in other keys' lists; sweep them after this many.
    _PURGE_EVERY = 1000

    def __init__(self, scheduler: Scheduler, name: str) -> None:
        self.name = name
        self._scheduler = scheduler
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._completed_since_purge = 0
        self._checking: set[Hashable] = set()
        self._recheck: set[Hashable] = set()

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; otherwise watch it under ``keys`` until its timeout."""
        if op.try_complete():
            return True
        for key in keys:
            self._watchers.setdefault(key, []).append(op)
        op._timer = self._scheduler.call_later(op.timeout_ms, self._expire, op)
        return False

    def _expire(self, op: DelayedOperation) -> None:
        op._timer = None
        if not op.completed:
            op.expired = True
            op.force_complete()
            self._note_completed(1)

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check every operation watching ``key``; returns how many completed."""
        if key in self._checking:
            # Re-entered from a completion (an answer that moved the HW again): the
            # outer call checks this key once more when its pass ends.
            self._recheck.add(key)
            return 0
        ops = self._watchers.pop(key, None)
        if not ops:
            return 0
        done = 0
        self._checking.add(key)
        try:
            while True:
                kept = []
                for op in ops:
                    if op.completed:
                        continue
                    if op.try_complete():
                        done += 1
                    else:
                        kept.append(op)
                if key not in self._recheck or not kept:
                    break
                self._recheck.discard(key)
                ops = kept
        finally:
            self._checking.discard(key)
            self._recheck.discard(key)
        if kept:
            self._watchers.setdefault(key, []).extend(kept)
        self._note_completed(done)
        return done

    def _note_completed(self, n: int) -> None:
        self._completed_since_purge += n
        if self._completed_since_purge >= self._PURGE_EVERY:
            self._completed_since_purge = 0
            for key in list(self._watchers):
                live = [op for op in self._watchers[key] if not op.completed]
                if live:
                    self._watchers[key] = live
                else:
                    del self._watchers[key]

    def watched(self, key: Hashable) -> int:
        return sum(1 for op in self._watchers.get(key, ()) if not op.completed)

    def cancel_all(self) -> None:
        """Shutdown: forget every operation without answering (the connection is going away)."""
        for ops in self._watchers.values():
            for op in ops:
                op.completed = True
                if op._timer is not None:
                    op._timer.cancel()
        self._watchers.clear()
