# cython: language_level=3, boundscheck=False, wraparound=False
"""SimScheduler in Cython: virtual time, a seeded RNG, and a heap of timers in C.

Theory of operation.  The simulator runs every event through this loop, so its
own cost bounds the whole-cluster event rate (issue 5, Performance).  The
semantics are exactly those :mod:`kreplica.runtime` documents: events run in
(due time, schedule sequence) order -- the pair is unique, so any correct heap
pops the same sequence and a seed replays byte for byte -- cancelled timers are
skipped without counting as events, and ``call_soon_threadsafe`` feeds an inbox
the loop drains before each event.  The heap is sifted in C, comparing the
timers' C fields (due, seq) -- no tuples, no rich comparisons.
"""
from collections import deque
import random


cdef long long _NO_LIMIT = 1LL << 62


cdef class Timer:
    """A scheduled callback; ``cancel()`` is idempotent."""

    cdef public long long due_ms
    cdef public long long seq
    cdef public object fn
    cdef public tuple args
    cdef public bint cancelled

    def __init__(self, long long due_ms, long long seq, fn, tuple args):
        self.due_ms = due_ms
        self.seq = seq
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self):
        # A cancelled timer waits in the heap until it comes due (lazy deletion); it lets go
        # of its callback now, so what it would have called is not kept alive meanwhile.
        self.cancelled = True
        self.take()

    cpdef tuple take(self):
        """(callback, arguments) for the loop about to run them, which the handle no longer
        holds: a caller may keep the handle (to cancel it), and a callback whose arguments
        hold the handle itself (a PausableScheduler's trampoline) would otherwise be a cycle
        only the collector frees."""
        taken = (self.fn, self.args)
        self.fn = None
        self.args = ()
        return taken


cdef inline bint _before(Timer a, Timer b):
    return a.due_ms < b.due_ms or (a.due_ms == b.due_ms and a.seq < b.seq)


cdef class SimScheduler:
    """Virtual time.  Nothing happens until ``advance``/``run_until`` is called."""

    cdef public object rng
    cdef public long long events_run
    cdef long long _now
    cdef long long _seq
    # A binary heap of Timers by (due, seq).  A Python list, not a C array, so the cycle
    # collector sees the timers: a finished world (scheduler -> timer -> broker ->
    # scheduler) is freed instead of leaking its logs.
    cdef list _heap
    cdef object _inbox

    def __init__(self, seed=0, start_ms=0):
        self.rng = random.Random(seed)
        self._now = start_ms
        self._seq = 0
        self.events_run = 0
        self._heap = []
        self._inbox = deque()

    def __len__(self):
        return len(self._heap)

    cpdef long long now_ms(self):
        return self._now

    # ---- the heap ---------------------------------------------------------------------------
    cdef int _push(self, Timer t) except -1:
        cdef list heap = self._heap
        cdef Py_ssize_t i, parent
        cdef Timer up
        heap.append(t)
        i = len(heap) - 1
        while i > 0:
            parent = (i - 1) >> 1
            up = <Timer>heap[parent]
            if not _before(t, up):
                break
            heap[i] = up
            i = parent
        heap[i] = t
        return 0

    cdef Timer _pop(self):
        """Remove and return the first timer."""
        cdef list heap = self._heap
        cdef Timer last = <Timer>heap.pop()
        cdef Py_ssize_t n = len(heap)
        cdef Py_ssize_t i = 0, child
        cdef Timer top, c, c2
        if n == 0:
            return last
        top = <Timer>heap[0]
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            c = <Timer>heap[child]
            if child + 1 < n:
                c2 = <Timer>heap[child + 1]
                if _before(c2, c):
                    child += 1
                    c = c2
            if not _before(c, last):
                break
            heap[i] = c
            i = child
        heap[i] = last
        return top

    cdef Timer _pop_due(self, long long until_ms):
        cdef Timer t
        while self._heap:
            t = <Timer>self._heap[0]
            if t.cancelled:
                self._pop()
                continue
            if t.due_ms > until_ms:
                return None
            return self._pop()
        return None

    # ---- scheduling -------------------------------------------------------------------------
    cdef Timer _later(self, long long delay_ms, fn, tuple args):
        if delay_ms < 0:
            delay_ms = 0
        self._seq += 1
        t = Timer.__new__(Timer)
        t.due_ms = self._now + delay_ms
        t.seq = self._seq
        t.fn = fn
        t.args = args
        t.cancelled = False
        self._push(t)
        return t

    def call_later(self, delay_ms, fn, *args):
        return self._later(int(delay_ms), fn, args)

    def call_soon(self, fn, *args):
        return self._later(0, fn, args)

    def call_soon_threadsafe(self, fn, *args):
        # deque.append is atomic; the loop drains it into the heap.
        self._inbox.append((fn, args))

    cdef int _drain_inbox(self) except -1:
        inbox = self._inbox
        while inbox:
            fn, args = inbox.popleft()
            self._later(0, fn, args)
        return 0

    def next_due_ms(self):
        cdef Timer t
        while self._heap:
            t = <Timer>self._heap[0]
            if not t.cancelled:
                return t.due_ms
            self._pop()
        return None

    # ---- running ----------------------------------------------------------------------------
    cdef bint _run_next(self, long long until_ms) except -1:
        if self._inbox:
            self._drain_inbox()
        cdef Timer t = self._pop_due(until_ms)
        if t is None:
            return False
        if t.due_ms > self._now:
            self._now = t.due_ms
        self.events_run += 1
        fn, args = t.take()
        fn(*args)
        return True

    def run_next(self, until_ms=None):
        """Run the next due event (not beyond ``until_ms``); False when there is none."""
        return self._run_next(_NO_LIMIT if until_ms is None else until_ms)

    def advance(self, long long ms):
        """Run every event due in the next ``ms`` of virtual time, then set the clock there."""
        if ms < 0:
            raise ValueError("time never goes backwards")
        cdef long long end = self._now + ms
        while self._run_next(end):
            pass
        if end > self._now:  # an event may have advanced the clock further itself
            self._now = end

    def run_until(self, predicate, long long timeout_ms):
        """Run events until ``predicate()`` holds; False if ``timeout_ms`` passes first."""
        if timeout_ms < 0:
            raise ValueError("time never goes backwards")
        cdef long long end = self._now + timeout_ms
        while not predicate():
            if not self._run_next(end):
                if end > self._now:
                    self._now = end
                return predicate()
        return True
