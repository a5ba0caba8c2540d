"""PausableScheduler: one broker process's view of the simulator's shared clock.

Theory of operation (issue 5, "pause, in the manner of a GC pause").  A
stop-the-world pause freezes a whole JVM: no thread of it runs -- not the
ISR-expiration task, not the HW checkpoint, not the purgatories' expiry reaper,
not the fetcher threads, not the controller's -- while the rest of the cluster
and the wall clock go on.  When the pause ends, everything that came due runs
at once and late, seeing the real, later time: the leader's overdue ISR check
finds followers whose fetches it has not read yet, delayed produces expire.

Every broker is built on its own view.  It implements the runtime ``Scheduler``
protocol by delegating to the one shared :class:`~kreplica.runtime.SimScheduler`
(the same virtual time, the same seeded ``rng``, so a seed still fixes the whole
history), but each callback goes through a trampoline that, while the process
is paused, holds it instead of running it.  ``resume()`` hands the held
callbacks back to the shared scheduler, in the order they came due (their
(due, seq) order in the shared heap), to run at the resume instant; one of the
process's timers due at that very instant may run before them (its heap entry is
older), an interleaving a process whose threads race at resume allows.  The
released callbacks wait in one queue, each resume-instant event running the queue's
head: a pause that begins before all of them ran holds the rest again, and the next
resume puts those back at the head, ahead of any still queued, so the order they first
came due is kept however pauses and resumes interleave with them.  A timer
cancelled while held never runs: the handle callers keep is the shared
scheduler's own ``Timer``, checked again when the held callback is run.
``kill()`` is a crash: held callbacks are dropped and nothing the process
scheduled runs any more (a restart builds a new broker on a new view).

Unpaused, the cost is one extra Python call per callback and one small tuple
per ``call_later``.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

from ..runtime import SimScheduler, Timer

# The handle of a call_soon_threadsafe callback: nobody can cancel it.
_UNCANCELLABLE = Timer(0, 0, None, ())  # type: ignore[arg-type]


class PausableScheduler:
    """A process's Scheduler over a shared SimScheduler; ``pause``/``resume``/``kill`` the process."""

    __slots__ = ("shared", "rng", "now_ms", "_stopped", "paused", "dead", "_held", "_reheld", "_released",
                 "_later", "_trampoline")

    def __init__(self, shared: SimScheduler) -> None:
        self.shared = shared
        self.rng = shared.rng
        self.now_ms: Callable[[], int] = shared.now_ms  # the same clock: a pause shows as lateness
        self._stopped = False  # paused or dead: the trampoline's one check on the hot path
        self.paused = False
        self.dead = False
        self._held: list[tuple[Timer, Callable[..., Any], tuple[Any, ...]]] = []
        # Released by a resume, not run yet: one resume-instant event each, in order.
        self._released: deque[tuple[Timer, Callable[..., Any], tuple[Any, ...]]] = deque()
        # Released, then held again by a pause before their turn: older than anything queued.
        self._reheld: list[tuple[Timer, Callable[..., Any], tuple[Any, ...]]] = []
        # Bound once: looked up on every call_later otherwise.
        self._later = shared.call_later
        self._trampoline = self._fire

    # ---- the Scheduler protocol -----------------------------------------------------------
    def call_later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> Timer:
        t = self._later(delay_ms, self._trampoline)
        # The trampoline needs the caller's handle to honour a cancel made while held.
        t.args = (t, fn, args)
        return t

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> Timer:
        return self.call_later(0, fn, *args)

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        self.shared.call_soon_threadsafe(self._fire, _UNCANCELLABLE, fn, args)

    def _fire(self, t: Timer, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if self._stopped:
            if not self.dead:
                self._held.append((t, fn, args))
            return
        # Not cancelled: the shared scheduler skips a cancelled timer; a held one is
        # checked when its resume releases it (_fire_released).
        fn(*args)

    def _fire_released(self) -> None:
        """One resume-instant event: run the head of what resumes released."""
        t, fn, args = entry = self._released.popleft()
        if self._stopped:
            if not self.dead:
                self._reheld.append(entry)
            return
        if t.cancelled:
            return
        fn(*args)

    # ---- the process ---------------------------------------------------------------------
    @property
    def held(self) -> int:
        """Callbacks that came due during the current pause and wait for the resume."""
        return sum(1 for held in (self._reheld, self._held) for t, _, _ in held if not t.cancelled)

    def pause(self) -> None:
        """Stop the world: from now on nothing this process scheduled runs until ``resume``."""
        if not self.dead:
            self.paused = self._stopped = True

    def resume(self) -> int:
        """Run what came due during the pause, in due order, now; returns how many were held."""
        if not self.paused:
            return 0
        self.paused = self._stopped = False
        reheld = [e for e in self._reheld if not e[0].cancelled]
        held = [e for e in self._held if not e[0].cancelled]
        self._reheld, self._held = [], []
        if reheld:  # released before, so due before anything still queued or held since
            self._released.extendleft(reversed(reheld))
        self._released.extend(held)
        call_soon = self.shared.call_soon
        fire = self._fire_released
        # Through the queue again: a pause beginning at this same instant holds them anew.
        for _ in range(len(reheld) + len(held)):
            call_soon(fire)
        return len(reheld) + len(held)

    def kill(self) -> int:
        """The process is gone: held callbacks are dropped, later ones never run; returns the drop count."""
        dropped = self.held
        self.dead = self._stopped = True
        self.paused = False
        self._held, self._reheld = [], []
        return dropped
