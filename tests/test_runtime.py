import pytest

from kreplica.runtime import ManualClock, RealScheduler, SimScheduler, SystemClock


def test_same_instant_events_run_in_schedule_order():
    s = SimScheduler(seed=1)
    seen = []
    for i in range(5):
        s.call_later(10, seen.append, i)
    s.call_later(5, seen.append, "early")
    s.advance(10)
    assert seen == ["early", 0, 1, 2, 3, 4]
    assert s.now_ms() == 10


def test_cancel_and_run_until():
    s = SimScheduler()
    hits = []
    t = s.call_later(3, hits.append, "cancelled")
    t.cancel()
    s.call_later(7, hits.append, "kept")
    assert s.run_until(lambda: bool(hits), timeout_ms=100)
    assert hits == ["kept"] and s.now_ms() == 7
    assert not s.run_until(lambda: False, timeout_ms=50)
    assert s.now_ms() == 57


def test_events_scheduled_by_events_and_threadsafe_inbox():
    s = SimScheduler()
    order = []

    def chain(n):
        order.append(n)
        if n < 3:
            s.call_later(1, chain, n + 1)

    s.call_soon(chain, 0)
    s.call_soon_threadsafe(order.append, "inbox")
    s.advance(10)
    assert order == [0, "inbox", 1, 2, 3]


def test_seeded_rng_is_deterministic():
    assert SimScheduler(seed=7).rng.random() == SimScheduler(seed=7).rng.random()


def test_manual_clock_never_goes_backwards():
    c = ManualClock(5)
    c.advance(3)
    c.advance(0)  # no time passing is not time going backwards
    assert c.now_ms() == 8
    assert ManualClock().now_ms() == 0  # left out, the start is 0, as SimScheduler's
    try:
        c.advance(-1)
    except ValueError:
        pass
    else:
        raise AssertionError("negative advance accepted")
    assert c.now_ms() == 8  # refused before it moved the clock, not after taking it back


def test_real_scheduler_checks_its_predicate_and_deadline_while_timers_keep_coming_due():
    """Timers that come due while others run used to keep run_until() and advance() in one
    pass for as long as they came: here three seconds for a predicate true from the start."""
    import time

    from kreplica.runtime import RealScheduler

    sched = RealScheduler()
    stop_at = time.monotonic() + 3.0

    def busy() -> None:
        time.sleep(0.002)
        if time.monotonic() < stop_at:
            sched.call_later(1, busy)

    sched.call_soon(busy)
    sched.call_soon(busy)
    started = time.monotonic()
    assert sched.run_until(lambda: True, 10)
    sched.advance(20)
    assert time.monotonic() - started < 0.5


def test_sim_scheduler_time_never_goes_backwards():
    import pytest

    s = SimScheduler(1)
    with pytest.raises(ValueError):
        s.run_until(lambda: False, -5)
    s.call_later(5, s.advance, 100)  # a callback that drives the scheduler itself (reaches 105)
    s.advance(10)
    assert s.now_ms() == 105
    s.call_later(5, s.advance, 100)
    assert not s.run_until(lambda: False, 10)
    assert s.now_ms() == 210


def _real_scheduler_on_a_held_clock(monkeypatch):
    """A RealScheduler whose wall and monotonic clocks move only when the test moves them:
    ``advance(0)`` then runs exactly what is due at that instant, and never sleeps."""
    from types import SimpleNamespace

    from kreplica import runtime

    clock = SimpleNamespace(s=0.0)
    monkeypatch.setattr(runtime, "time", SimpleNamespace(monotonic=lambda: clock.s, time=lambda: 1_700_000_000.25))
    return runtime.RealScheduler(), clock


def test_real_scheduler_runs_what_is_due_once_in_schedule_order_and_no_cancelled_timer(monkeypatch):
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    assert sched.now_ms() == 1_700_000_000_250  # epoch milliseconds, not time since start, nor whole seconds
    seen = []
    sched.call_later(10, seen.append, "due-1")
    sched.call_later(10, seen.append, "due-2")
    sched.call_later(10, seen.append, "cancelled").cancel()
    sched.call_later(11, seen.append, "later")
    sched.call_soon(seen.append, "soon")
    sched.call_later(-5, seen.append, "negative")  # a negative delay means now, not before now
    sched.call_soon_threadsafe(seen.append, "posted-1")
    sched.call_soon_threadsafe(seen.append, "posted-2")
    sched.advance(0)
    assert seen == ["soon", "negative", "posted-1", "posted-2"]
    clock.s = 0.010
    sched.advance(0)
    assert seen[4:] == ["due-1", "due-2"]  # due exactly now runs now
    assert sched.next_due_ms() == sched.now_ms() + 1
    clock.s = 0.011
    sched.advance(0)
    assert seen[6:] == ["later"] and sched.next_due_ms() is None and sched.events_run == 7


def test_real_scheduler_run_until_asks_its_predicate_before_the_deadline(monkeypatch):
    sched, _ = _real_scheduler_on_a_held_clock(monkeypatch)
    sched.call_soon(lambda: None)
    assert sched.run_until(lambda: sched.events_run == 1, 0)
    assert not sched.run_until(lambda: False, 0)


def test_real_scheduler_wakes_at_once_for_a_callback_posted_from_another_thread():
    """A sleeping advance() is woken by call_soon_threadsafe, not by its next 50 ms poll."""
    import threading
    import time

    from kreplica.runtime import RealScheduler

    sched = RealScheduler()
    waits = []

    def post() -> None:
        for _ in range(10):
            time.sleep(0.013)  # let the loop fall asleep with nothing due
            posted = time.monotonic()
            sched.call_soon_threadsafe(lambda posted=posted: waits.append(time.monotonic() - posted))

    poster = threading.Thread(target=post)
    poster.start()
    assert sched.run_until(lambda: len(waits) == 10, 5000)
    poster.join()
    assert sum(waits) < 0.1, waits  # ten 50 ms polls would take about 0.25 s in all


@pytest.mark.parametrize("scheduler", [SimScheduler, RealScheduler], ids=["sim", "real"])
def test_no_scheduler_takes_a_negative_span(scheduler):
    """advance(-1) or run_until(p, -1) is a caller's arithmetic gone wrong; the wall-clock
    scheduler returned at once where the virtual one raised."""
    s = scheduler(0)
    s.advance(0)
    assert s.run_until(lambda: True, 0)
    with pytest.raises(ValueError, match="never goes backwards"):
        s.advance(-1)
    with pytest.raises(ValueError, match="never goes backwards"):
        s.run_until(lambda: True, -1)


def test_next_due_skips_cancelled_timers(monkeypatch):
    """A cancelled timer is not what the loop sleeps towards: next_due_ms() names the first
    live one, or None when only cancelled timers are left."""
    sched, _ = _real_scheduler_on_a_held_clock(monkeypatch)
    sched.call_later(5, lambda: None).cancel()
    sched.call_later(6, lambda: None).cancel()  # every cancelled timer ahead of it, not only the first
    sched.call_later(20, lambda: None)
    assert sched.next_due_ms() == sched.now_ms() + 20
    only = RealScheduler(0)
    only.call_later(5, lambda: None).cancel()
    assert only.next_due_ms() is None
    # Nor what the loop sleeps towards, also when the timer is cancelled after the pass that
    # ran what was due (a run_until predicate that gives up a retry): with nothing else
    # pending, run_until(p, 30) sleeps its 30 ms in one wait, not 5 ms towards nothing first.
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = sleeps = _SleepMovesTheClock(clock)
    retry = sched.call_later(5, lambda: None)
    assert not sched.run_until(lambda: retry.cancel(), 30)
    assert sleeps.waits == [0.03] and sched.events_run == 0


class _SleepMovesTheClock:
    """Stands in for RealScheduler's wake-up event: a wait moves the held clock on by the
    time asked for and records it, so a test sees every sleep the loop takes."""

    def __init__(self, clock):
        self.clock, self.waits = clock, []

    def wait(self, timeout):
        self.waits.append(round(timeout, 6))
        self.clock.s += timeout

    def set(self):
        pass

    def clear(self):
        pass


def test_real_scheduler_sleeps_until_its_next_timer_not_until_its_deadline(monkeypatch):
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = sleeps = _SleepMovesTheClock(clock)
    start = sched.now_ms()
    ran_at = []
    sched.call_later(10, lambda: ran_at.append(sched.now_ms() - start))
    sched.advance(30)
    assert ran_at == [10]
    assert sleeps.waits == [0.01, 0.02]


def test_real_scheduler_asks_its_predicate_at_least_every_50_ms_with_nothing_due(monkeypatch):
    """A predicate may read what changes outside the loop (Cluster.delete_topic waits on a
    ZooKeeper read): with no timer due, run_until still asks it every 50 ms, not only at
    its deadline a minute later."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = sleeps = _SleepMovesTheClock(clock)
    assert sched.run_until(lambda: clock.s >= 0.2, 60_000)
    assert clock.s < 0.25
    assert sleeps.waits and max(sleeps.waits) <= 0.05
    # Nor when the next timer is far off: a timer a minute away is no reason to stop asking.
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = sleeps = _SleepMovesTheClock(clock)
    sched.call_later(60_000, lambda: None)
    assert sched.run_until(lambda: clock.s >= 0.2, 120_000)
    assert clock.s < 0.25 and max(sleeps.waits) <= 0.05


def test_a_real_schedulers_random_numbers_follow_its_seed():
    """Cluster(seed=...) off virtual time places replicas with RealScheduler(seed).rng."""
    assert RealScheduler(7).rng.random() == RealScheduler(7).rng.random() != RealScheduler(8).rng.random()
    # Left out, the seed is 0, as SimScheduler's: a broker process or a tool built on the
    # wall clock draws the same numbers run after run, not ones seeded from the OS.
    assert RealScheduler().rng.random() == RealScheduler(0).rng.random() == SimScheduler().rng.random()


def test_the_system_clock_reads_epoch_milliseconds():
    """SystemClock stamps what outlives the process (records, znodes), so it is the wall
    clock in milliseconds, not a monotonic count from boot."""
    import time

    before = int(time.time() * 1000)
    now = SystemClock().now_ms()
    assert before <= now <= int(time.time() * 1000)


def test_a_delay_of_minus_one_runs_after_what_is_already_due(monkeypatch):
    """Every negative delay means now: a timer asked for 1 ms ago must not jump ahead of
    the timers already due at this instant."""
    sched, _ = _real_scheduler_on_a_held_clock(monkeypatch)
    seen = []
    sched.call_soon(seen.append, "soon")
    sched.call_later(-1, seen.append, "minus-one")
    assert sched.next_due_ms() == sched.now_ms()
    sched.advance(0)
    assert seen == ["soon", "minus-one"]


class _EventMovesTheClock(_SleepMovesTheClock):
    """As _SleepMovesTheClock, with an event's flag: a wait on a set event returns at once
    (after 1 ms of held time, so a loop that keeps finding it set still ends)."""

    def __init__(self, clock):
        super().__init__(clock)
        self.flag, self.at_once = False, 0

    def wait(self, timeout):
        if self.flag:
            self.at_once += 1
            self.clock.s += 0.001
            return
        super().wait(timeout)

    def set(self):
        self.flag = True

    def clear(self):
        self.flag = False


def test_a_wake_up_from_another_thread_wakes_the_loop_once_not_for_good(monkeypatch):
    """A callback posted from another thread (a ZooKeeper watch) sets the wake-up event;
    once woken, the loop clears it, so its next waits sleep again instead of returning at
    once and spinning a core until the deadline."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = event = _EventMovesTheClock(clock)
    seen = []
    sched.call_soon_threadsafe(seen.append, "posted")
    sched.advance(100)
    assert seen == ["posted"]
    assert event.at_once == 1
    assert event.waits == [0.05, 0.049]


def test_a_callback_posted_while_the_loop_runs_a_timer_runs_in_the_same_pass(monkeypatch):
    """What another thread posts while a due timer runs is due at once: the loop takes it
    from the inbox after each callback, so the same ``advance(0)`` or zero-timeout
    ``run_until`` runs it, after the timers that were already due, instead of leaving it
    in the inbox until the next call."""
    sched, _ = _real_scheduler_on_a_held_clock(monkeypatch)
    seen = []

    def first():
        seen.append("first")
        sched.call_soon_threadsafe(seen.append, "posted")

    sched.call_soon(first)
    sched.call_soon(seen.append, "second")
    assert sched.run_until(lambda: "posted" in seen, 0)
    assert seen == ["first", "second", "posted"] and not sched._inbox
    # Taken after the callback, not only before the next one: also when the last timer
    # due in the pass is the one that posts.
    sched.call_soon(sched.call_soon_threadsafe, seen.append, "posted by the last")
    assert sched.run_until(lambda: "posted by the last" in seen, 0)
    assert not sched._inbox


def test_a_real_scheduler_stops_at_its_deadline_when_its_next_timer_is_later(monkeypatch):
    """advance(30) with the next timer 100 ms away sleeps 30 ms and returns, not the 50 ms
    of a poll aimed at the timer: the deadline bounds every sleep, not only the last."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = sleeps = _SleepMovesTheClock(clock)
    start = sched.now_ms()
    sched.call_later(100, lambda: None)
    sched.advance(30)
    assert sleeps.waits == [0.03] and sched.now_ms() == start + 30 and sched.events_run == 0


def test_a_cancelled_timer_does_not_hold_back_the_one_due_behind_it(monkeypatch):
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    seen = []
    sched.call_later(5, seen.append, "cancelled").cancel()
    sched.call_later(5, seen.append, "due")
    clock.s = 0.005
    sched.advance(0)
    assert seen == ["due"]


def test_a_real_scheduler_reads_the_wall_clock_in_epoch_milliseconds_from_the_start():
    """now_ms() is epoch milliseconds moved on by the monotonic clock since construction,
    not the monotonic clock's own count (time since boot) added to the epoch."""
    import time

    before = int(time.time() * 1000)
    sched = RealScheduler(0)
    now = sched.now_ms()
    assert before <= now <= int(time.time() * 1000) + 1



def test_a_real_timer_never_runs_before_its_delay_has_passed(monkeypatch):
    """now_ms() counts whole milliseconds gone by, as Java's currentTimeMillis() and
    SystemClock do: 0.6 ms after the call a 1 ms timer is not due yet (rounded, the
    clock read a millisecond that had not passed, and the timer ran 0.4 ms early)."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    start = sched.now_ms()
    seen = []
    sched.call_later(1, seen.append, "1 ms")
    clock.s = 0.0006
    sched.advance(0)
    assert seen == [] and sched.now_ms() == start
    clock.s = 0.001
    sched.advance(0)
    assert seen == ["1 ms"] and sched.now_ms() == start + 1


@pytest.mark.parametrize("scheduler", ["sim", "real"])
def test_a_fractional_delay_is_cut_to_whole_milliseconds_on_both_schedulers(monkeypatch, scheduler):
    """A delay computed in floating point (a back-off scaled by a fraction) is cut to its
    whole milliseconds, not rounded as the due time's float happens to round: 2.99999 ms
    is due in 2, on the wall clock as in virtual time."""
    if scheduler == "sim":
        sched = SimScheduler(start_ms=1_700_000_000_250)
    else:
        sched, _ = _real_scheduler_on_a_held_clock(monkeypatch)
    start = sched.now_ms()
    timer = sched.call_later(2.99999, lambda: None)
    assert timer.due_ms == start + 2 and sched.next_due_ms() == start + 2


def test_a_wake_up_is_used_up_even_when_the_loop_finds_work_instead_of_sleeping(monkeypatch):
    """The loop clears its wake-up event at every sleep it considers, also one it skips
    because a timer is already due: the wake-up was for the callback it has just run, and
    left set it would cut the next real sleep short for nothing."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = event = _EventMovesTheClock(clock)
    seen = []

    def posted():
        seen.append("posted")
        clock.s += 0.001  # the callback takes a millisecond ...
        sched.call_soon(seen.append, "scheduled")  # ... so this is due after the pass's now

    sched.call_soon_threadsafe(posted)
    sched.advance(100)
    assert seen == ["posted", "scheduled"]
    assert event.at_once == 0 and event.waits[0] == 0.05


def test_both_wall_clocks_cut_the_epoch_to_the_millisecond_gone_by(monkeypatch):
    """Epoch milliseconds are whole milliseconds that have passed, as Java's
    currentTimeMillis() reads them: 0.9 ms into a millisecond, SystemClock and a
    RealScheduler's start read the millisecond begun, not the next one (rounded, a record
    was stamped, and a scheduler started, in a millisecond that had not come)."""
    from types import SimpleNamespace

    from kreplica import runtime

    monkeypatch.setattr(runtime, "time", SimpleNamespace(monotonic=lambda: 5.0, time=lambda: 1_700_000_000.0009))
    assert SystemClock().now_ms() == 1_700_000_000_000
    sched = runtime.RealScheduler()
    assert sched.started_ms == sched.now_ms() == 1_700_000_000_000


def test_a_real_callback_that_raises_still_counts_and_the_loop_goes_on(monkeypatch):
    """As SimScheduler's: the callback that raised ran, so it is counted in events_run
    before its error reaches the caller, and the next call runs what is still due."""
    sched, _ = _real_scheduler_on_a_held_clock(monkeypatch)
    seen = []
    sched.call_soon(lambda: 1 / 0)
    sched.call_soon(seen.append, "after")
    with pytest.raises(ZeroDivisionError):
        sched.advance(0)
    assert sched.events_run == 1 and seen == []
    sched.advance(0)
    assert sched.events_run == 2 and seen == ["after"]


@pytest.mark.parametrize("scheduler", [SimScheduler, RealScheduler], ids=["sim", "real"])
def test_call_soon_hands_back_a_timer_that_cancels_it(scheduler):
    """call_soon is call_later(0): it returns the Timer, as the Scheduler protocol says, so
    a caller can take back what it asked for before the loop gets to it."""
    s = scheduler(0)
    seen = []
    timer = s.call_soon(seen.append, "cancelled")
    s.call_soon(seen.append, "kept")
    timer.cancel()
    s.advance(0)
    assert seen == ["kept"] and s.events_run == 1


def test_a_real_deadline_counts_from_the_call_not_from_the_schedulers_start(monkeypatch):
    """advance(ms) and run_until(p, ms) end ms after they are called, however long the
    scheduler has been up, and sleep no further than that: not ms after it was built
    (a deadline long past, returning at once), nor a millisecond beyond."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = sleeps = _SleepMovesTheClock(clock)
    clock.s = 0.5  # the scheduler has been up 500 ms
    start = sched.now_ms()
    sched.advance(30)
    assert sched.now_ms() == start + 30
    assert not sched.run_until(lambda: False, 30)
    assert sched.now_ms() == start + 60 and sleeps.waits == [0.03, 0.03]


def test_a_real_deadline_is_fixed_before_the_first_pass_runs(monkeypatch):
    """run_until(p, ms) and advance(ms) end ms after they are called, also when what was
    already due takes a while: a slow first pass (a 40 ms callback) does not move the
    deadline 40 ms later, so a 30 ms wait returns after that pass without sleeping."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    sched._wake = sleeps = _SleepMovesTheClock(clock)
    start = sched.now_ms()

    def slow():
        clock.s += 0.04

    sched.call_soon(slow)
    assert not sched.run_until(lambda: False, 30)
    assert sched.now_ms() == start + 40 and sleeps.waits == []
    sched.call_soon(slow)
    sched.advance(30)
    assert sched.now_ms() == start + 80 and sleeps.waits == []


def test_a_real_scheduler_counts_the_milliseconds_gone_by_since_it_was_built(monkeypatch):
    """now_ms() adds the whole milliseconds gone by since construction, cut once, not the
    monotonic clock's own milliseconds less those of the start (each cut apart): built
    0.98 ms into one of the monotonic clock's milliseconds, 9.77 ms later it reads 9 ms
    on, and a 10 ms timer is not due yet (cut apart, the two read 10 and it ran early)."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    clock.s = 1 / 1024  # 0.9765625 ms: exact in binary, as all the times below
    late = RealScheduler(0)
    start = late.now_ms()
    seen = []
    late.call_later(10, seen.append, "10 ms")
    clock.s = 11 / 1024  # 9.765625 ms after construction
    late.advance(0)
    assert seen == [] and late.now_ms() == start + 9
    clock.s = 12 / 1024  # 10.7421875 ms after
    late.advance(0)
    assert seen == ["10 ms"] and late.now_ms() == start + 10


def test_a_threadsafe_call_is_posted_before_the_loop_is_woken_for_it():
    """call_soon_threadsafe puts the callback in the inbox first and wakes the loop after:
    woken the other way round, a loop running on the other thread could wake, clear the
    event and find the inbox still empty, then sleep up to 50 ms with the callback there
    (the lost wake-up the event exists to prevent)."""
    sched = RealScheduler(0)
    inbox_at_wake = []

    class _Wake:
        def set(self):
            inbox_at_wake.append(len(sched._inbox))

    sched._wake = _Wake()
    sched.call_soon_threadsafe(lambda: None)
    sched.call_soon_threadsafe(lambda: None)
    assert inbox_at_wake == [1, 2]


def test_dropping_cancelled_timers_keeps_the_rest_in_due_order(monkeypatch):
    """next_due_ms() drops the cancelled timers at the head of the heap as a heap pops them:
    taken off the front of the list instead, the heap [1, 3, 2, 5] became [3, 2, 5], the
    loop slept towards the timer due at 3 ms and ran the one due at 2 ms a millisecond late."""
    sched, clock = _real_scheduler_on_a_held_clock(monkeypatch)
    start = sched.now_ms()
    seen = []
    cancelled = sched.call_later(1, seen.append, "cancelled")
    for delay in (5, 2, 3):
        sched.call_later(delay, seen.append, delay)
    cancelled.cancel()
    assert sched.next_due_ms() == start + 2
    clock.s = 0.002
    sched.advance(0)
    assert seen == [2]
    clock.s = 0.005
    sched.advance(0)
    assert seen == [2, 3, 5]
