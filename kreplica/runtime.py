"""Clock and Scheduler: the only way replica/ and controller/ learn the time.

Theory of operation.  Sans-I/O code never sleeps, reads the wall clock or starts
threads; it is handed ``now_ms`` and returns what must be sent or scheduled.  A
runtime carries that out.  :class:`SimScheduler` is the deterministic one: virtual
time, a seeded ``random.Random``, and a heap ordered by (time, sequence) so events
due at the same instant run in the order they were scheduled, byte for byte the
same on every run with the same seed.  :class:`RealScheduler` runs the same
callbacks on the wall clock (used with a real ZooKeeper).
"""
from __future__ import annotations

import heapq
import random
import threading
import time
from collections import deque
from typing import Any, Callable, Protocol

# The deterministic scheduler runs every simulated event, so it lives in Cython;
# RealScheduler shares its Timer.
from ._sim_sched import SimScheduler, Timer

__all__ = ["Cancellable", "Clock", "ManualClock", "RealScheduler", "Scheduler", "SimScheduler",
           "SystemClock", "Timer"]


class Clock(Protocol):
    def now_ms(self) -> int: ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    rng: random.Random

    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> "Timer": ...

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> "Timer": ...

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None: ...


class ManualClock:
    """A clock that moves only when told to (tests, sans-I/O harnesses)."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time never goes backwards")
        self._now += ms


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class _HeapScheduler:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        # Entries are (due_ms, seq, timer): tuples compare in C, and seq is unique,
        # so the timer itself is never compared.
        self._heap: list[tuple[int, int, Timer]] = []
        self._seq = 0
        self._inbox: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.events_run = 0

    def now_ms(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def call_later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> Timer:
        if delay_ms < 0:
            delay_ms = 0
        self._seq += 1
        t = Timer(self.now_ms() + int(delay_ms), self._seq, fn, args)
        heapq.heappush(self._heap, (t.due_ms, t.seq, t))
        return t

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.call_later(0, fn, *args)

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        # deque.append is atomic; the loop drains it into the heap.
        self._inbox.append((fn, args))

    def _drain_inbox(self) -> None:
        while self._inbox:
            fn, args = self._inbox.popleft()
            self.call_soon(fn, *args)

    def next_due_ms(self) -> int | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _pop_due(self, until_ms: int) -> Timer | None:
        while self._heap:
            due, _, t = self._heap[0]
            if t.cancelled:
                heapq.heappop(self._heap)
                continue
            if due > until_ms:
                return None
            heapq.heappop(self._heap)
            return t
        return None


class RealScheduler(_HeapScheduler):
    """Wall-clock time; callbacks from other threads arrive via call_soon_threadsafe.

    ``now_ms`` is epoch milliseconds, as Kafka's record timestamps, retention and znode
    timestamps read them: the wall clock at construction (``started_ms``), moved on by
    the monotonic clock, so a wall-clock step never runs timers early or late.  Counted
    from 0 instead, a restarted process stamped records older than the ones its logs
    already held, and time-based retention waited out the previous process's uptime."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self._t0 = time.monotonic()
        self.started_ms = int(time.time() * 1000)
        self._wake = threading.Event()

    def now_ms(self) -> int:
        return self.started_ms + int((time.monotonic() - self._t0) * 1000)

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        super().call_soon_threadsafe(fn, *args)
        self._wake.set()

    def _run_due(self) -> None:
        # What is due now, not what comes due while it runs: timers that keep coming due
        # must not keep advance() and run_until() from checking their deadline and predicate.
        now = self.now_ms()
        self._drain_inbox()
        while (t := self._pop_due(now)) is not None:
            self.events_run += 1
            fn, args = t.take()
            fn(*args)
            self._drain_inbox()

    def _sleep_until_next(self, end_ms: int) -> None:
        nxt = self.next_due_ms()
        wake = end_ms if nxt is None else min(nxt, end_ms)
        delay = (wake - self.now_ms()) / 1000.0
        if delay > 0 and not self._inbox:
            self._wake.wait(min(delay, 0.05))
        self._wake.clear()

    def advance(self, ms: int) -> None:
        if ms < 0:  # as SimScheduler and ManualClock: a negative span is a caller's bug
            raise ValueError("time never goes backwards")
        end = self.now_ms() + ms
        while True:
            self._run_due()
            if self.now_ms() >= end:
                return
            self._sleep_until_next(end)

    def run_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        if timeout_ms < 0:
            raise ValueError("time never goes backwards")
        end = self.now_ms() + timeout_ms
        while True:
            self._run_due()
            if predicate():
                return True
            if self.now_ms() >= end:
                return False
            self._sleep_until_next(end)
