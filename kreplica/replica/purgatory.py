"""Delayed operations and the purgatory that holds them (Kafka's DelayedOperationPurgatory).

An operation that cannot complete at once (an acks=all produce waiting for the
HW, a follower's long-poll fetch waiting for data) is watched under one or more
keys (partitions).  Whoever changes a partition calls ``check_and_complete(key)``
and the watchers re-check themselves.  Each operation completes exactly once:
through ``try_complete``, at its timeout on the scheduler, or by ``cancel_all``.
Single-threaded on the runtime's scheduler, so no locks.

Ordered keys.  A purgatory built with ``bound`` keeps each key's watchers in a
heap by ``op.order(key)`` (an acks=all produce's required offset).  When
``bound(key)`` gives a number (the leader's HW) only operations with
``order(key) <= bound`` are re-checked; the contract is that the others cannot
complete through this key yet, and that those re-checked no longer wait on it
(their part for this key is settled even if other keys keep them pending).
When ``bound(key)`` is None (leadership lost, partition gone) every watcher is
re-checked, as in an unordered purgatory.  So an HW move costs the requests it
completes, not the ~32 still waiting.
"""
from __future__ import annotations

import abc
import heapq
import itertools
from typing import Callable, Hashable, Iterable

from ..runtime import Scheduler

# One watcher entry: (order, insertion sequence, operation); the sequence keeps
# equal orders first-come first-checked and never lets a comparison reach the op.
_Entry = tuple[int, int, "DelayedOperation"]


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

    def order(self, key: Hashable) -> int:
        """Where this operation sorts among ``key``'s watchers (see the module doc)."""
        return 0

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
    # Completed operations linger in other keys' heaps; sweep them after this many.
    _PURGE_EVERY = 1000

    def __init__(
        self, scheduler: Scheduler, name: str, bound: Callable[[Hashable], int | None] | None = None
    ) -> None:
        self.name = name
        self._scheduler = scheduler
        self._bound = bound
        self._watchers: dict[Hashable, list[_Entry]] = {}
        self._seq = itertools.count()
        self._completed_since_purge = 0
        self._checking: set[Hashable] = set()
        self._recheck: set[Hashable] = set()

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; otherwise watch it under ``keys`` until its timeout."""
        if op.try_complete():
            return True
        seq = next(self._seq)
        for key in keys:
            heapq.heappush(self._watchers.setdefault(key, []), (op.order(key), seq, op))
        op._timer = self._scheduler.call_later(op.timeout_ms, self._expire, op)
        return False

    def _expire(self, op: DelayedOperation) -> None:
        op._timer = None
        if not op.completed:
            op.expired = True
            op.force_complete()
            self._note_completed(1)

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watching ``key`` that may complete; returns how many did."""
        if key in self._checking:
            # Re-entered from a completion (an answer that moved the HW again): the
            # outer call checks this key once more when its pass ends.
            self._recheck.add(key)
            return 0
        if not self._watchers.get(key):
            return 0
        done = 0
        self._checking.add(key)
        try:
            while True:
                bound = self._bound(key) if self._bound is not None else None
                if bound is None:
                    done += self._check_all(key)
                else:
                    done += self._check_up_to(key, bound)
                if key not in self._recheck or not self._watchers.get(key):
                    break
                self._recheck.discard(key)
        finally:
            self._checking.discard(key)
            self._recheck.discard(key)
        self._note_completed(done)
        return done

    def _check_all(self, key: Hashable) -> int:
        # Taken out of the table so operations added meanwhile wait for the next pass.
        entries = self._watchers.pop(key, None) or []
        done = 0
        kept = []
        for entry in entries:
            op = entry[2]
            if op.completed:
                continue
            if op.try_complete():
                done += 1
            else:
                kept.append(entry)
        if kept:
            heap = self._watchers.setdefault(key, [])
            heap.extend(kept)
            heapq.heapify(heap)
        return done

    def _check_up_to(self, key: Hashable, bound: int) -> int:
        heap = self._watchers[key]
        done = 0
        while heap and heap[0][0] <= bound:
            op = heapq.heappop(heap)[2]
            if not op.completed and op.try_complete():
                done += 1
        if not heap and self._watchers.get(key) is heap:
            del self._watchers[key]
        return done

    def _note_completed(self, n: int) -> None:
        self._completed_since_purge += n
        if self._completed_since_purge >= self._PURGE_EVERY:
            self._completed_since_purge = 0
            for key in list(self._watchers):
                if key in self._checking:
                    continue  # a pass over this key holds its heap
                live = [e for e in self._watchers[key] if not e[2].completed]
                if live:
                    heapq.heapify(live)
                    self._watchers[key] = live
                else:
                    del self._watchers[key]

    def watched(self, key: Hashable) -> int:
        return sum(1 for e in self._watchers.get(key, ()) if not e[2].completed)

    def cancel_all(self) -> None:
        """Shutdown: forget every operation without answering (the connection is going away)."""
        for entries in self._watchers.values():
            for _, _, op in entries:
                op.completed = True
                if op._timer is not None:
                    op._timer.cancel()
        self._watchers.clear()
