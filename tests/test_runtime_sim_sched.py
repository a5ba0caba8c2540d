"""The Cython SimScheduler keeps (due, sequence) order through heap growth and cancellation."""
import random

import pytest

from kreplica.runtime import SimScheduler, Timer


def test_many_timers_run_in_due_then_schedule_order():
    s = SimScheduler(seed=3)
    rng = random.Random(5)
    ran = []
    expected = []
    timers = []
    for i in range(5000):  # past the initial heap capacity, so the heap grows
        delay = rng.randrange(50)
        timers.append(s.call_later(delay, ran.append, i))
        expected.append((delay, i))
    cancelled = {i for i in range(0, 5000, 7)}
    for i in cancelled:
        timers[i].cancel()
        timers[i].cancel()  # idempotent
    s.advance(100)
    assert ran == [i for _d, i in sorted(expected) if i not in cancelled]
    assert s.events_run == 5000 - len(cancelled)
    assert isinstance(timers[0], Timer) and timers[0].cancelled


def test_events_during_events_and_limits():
    s = SimScheduler(start_ms=10)
    seen = []
    s.call_later(-5, seen.append, "negative delay runs now")
    s.call_later(2.9, seen.append, "fractional delay truncates")
    assert s.next_due_ms() == 10
    assert s.run_next(until_ms=10) and s.now_ms() == 10
    assert not s.run_next(until_ms=11)
    assert s.run_next() and s.now_ms() == 12
    assert seen == ["negative delay runs now", "fractional delay truncates"]
    assert s.next_due_ms() is None
    with pytest.raises(ValueError):
        s.advance(-1)


def test_run_next_without_a_limit_runs_the_next_timer_however_far_off():
    # No until_ms means no limit: a clock started at a wall-clock epoch time (past any
    # 32-bit count of milliseconds) and a timer days or years ahead still run.
    start = 1_700_000_000_000
    s = SimScheduler(start_ms=start)
    seen = []
    s.call_soon(seen.append, "now")
    s.call_later(2**40, seen.append, "years on")
    assert s.run_next() and s.now_ms() == start
    assert s.run_next() and s.now_ms() == start + 2**40
    assert seen == ["now", "years on"] and not s.run_next()


def test_run_next_until_time_zero_is_a_limit_not_no_limit():
    # A clock at 0 asked to run what is due by 0: a limit of 0 is still a limit, so a
    # timer 5 ms on waits (only None means "however far off").
    s = SimScheduler()
    seen = []
    s.call_later(5, seen.append, "at 5")
    assert not s.run_next(until_ms=0) and seen == [] and s.now_ms() == 0
    assert s.run_next(until_ms=5) and seen == ["at 5"] and s.now_ms() == 5


def test_a_cancelled_timer_leaves_the_heap_when_a_run_meets_it_even_before_it_is_due():
    # As next_due_ms does (and the pure-Python heap's _pop_due): a cancelled timer at the
    # head is dropped when the loop looks at it, whatever the run's limit, not kept until
    # its due time comes round.
    s = SimScheduler()
    s.call_later(100, lambda: None).cancel()
    s.advance(10)
    assert len(s) == 0 and s.events_run == 0 and s.now_ms() == 10


def test_a_raising_callback_still_counts_and_the_loop_goes_on():
    s = SimScheduler()
    s.call_later(1, lambda: 1 / 0)
    s.call_later(2, lambda: None)
    with pytest.raises(ZeroDivisionError):
        s.advance(5)
    assert s.events_run == 1 and s.now_ms() == 1
    s.advance(5)
    assert s.events_run == 2 and s.now_ms() == 6


def test_a_scheduler_in_a_cycle_with_its_timers_is_collected():
    """A finished world (scheduler -> pending timer -> broker -> scheduler) must not leak."""
    import gc
    import weakref

    class Owner:
        pass

    owner = Owner()
    owner.scheduler = SimScheduler()
    owner.scheduler.call_later(1000, lambda: owner)
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("scheduler", [SimScheduler, "real"])
def test_fired_and_cancelled_timers_let_go_of_their_callbacks_without_the_collector(scheduler):
    """A handle kept by its caller, or a cancelled timer waiting in the heap for its due
    time, holds nothing: a callback whose arguments hold the handle itself (as a
    PausableScheduler's trampoline does) is freed by reference counting alone."""
    import gc
    import weakref

    from kreplica.runtime import RealScheduler

    s = SimScheduler() if scheduler is SimScheduler else RealScheduler()

    class Callback:
        def __call__(self, *args):
            pass

    gc.disable()
    try:
        fired, cancelled = Callback(), Callback()
        t1 = s.call_later(0, fired)
        t1.args = (t1, fired)  # a cycle through the handle, until it fires
        t2 = s.call_later(10_000, cancelled)
        refs = weakref.ref(fired), weakref.ref(cancelled)
        del fired, cancelled
        t2.cancel()
        s.advance(1)
        assert refs[0]() is None and refs[1]() is None
        assert t1.fn is None and t2.fn is None and t2.cancelled and not t1.cancelled
    finally:
        gc.enable()


def test_threadsafe_calls_run_in_the_order_they_were_made_after_what_is_already_due():
    s = SimScheduler()
    seen = []
    s.call_soon(seen.append, "scheduled")
    for i in range(4):
        s.call_soon_threadsafe(seen.append, i)
    s.advance(0)
    assert seen == ["scheduled", 0, 1, 2, 3]


def test_next_due_skips_cancelled_timers_to_the_first_live_one():
    s = SimScheduler(start_ms=100)
    early = s.call_later(5, lambda: None)
    s.call_later(20, lambda: None)
    assert s.next_due_ms() == 105
    early.cancel()
    assert s.next_due_ms() == 120
    assert len(s) == 1  # the cancelled timer is gone from the heap, not only skipped


def test_run_until_answers_its_predicate_as_it_stands_at_the_deadline():
    """The deadline passing is not the answer: once the clock is moved to it, a predicate
    that reads the clock (a lease or a timeout expiring with no event due) is asked
    once more, as the wall-clock scheduler asks it before giving up at its deadline."""
    s = SimScheduler(start_ms=100)
    s.call_later(10, lambda: None)
    assert s.run_until(lambda: s.now_ms() >= 150, 50)
    assert s.now_ms() == 150 and s.events_run == 1
    assert not s.run_until(lambda: s.now_ms() >= 201, 50)
    assert s.now_ms() == 200


def test_run_until_runs_a_timer_due_exactly_at_its_deadline():
    """The deadline belongs to the wait, as the end of advance's span does: a timer due
    exactly at it runs before run_until gives up, so the predicate it makes true holds
    (a reply timed to land on a request's timeout is not lost to it); one due a
    millisecond later waits."""
    s = SimScheduler(start_ms=100)
    seen = []
    s.call_later(50, seen.append, "at the deadline")
    s.call_later(51, seen.append, "past it")
    assert s.run_until(lambda: bool(seen), 50)
    assert seen == ["at the deadline"] and s.now_ms() == 150 and s.events_run == 1
    assert not s.run_until(lambda: len(seen) == 2, 0) and s.now_ms() == 150


@pytest.mark.parametrize("scheduler", [SimScheduler, "real"])
def test_every_threadsafe_call_made_so_far_goes_ahead_of_what_the_first_one_schedules(scheduler):
    """The inbox is drained whole before an event: threadsafe calls waiting together get
    consecutive places, so a call_soon made while running the first of them comes after
    all of them, as it would had they been call_soon calls themselves."""
    from kreplica.runtime import RealScheduler

    s = SimScheduler() if scheduler is SimScheduler else RealScheduler()
    seen = []

    def first():
        seen.append("first")
        s.call_soon(seen.append, "scheduled by first")

    s.call_soon_threadsafe(first)
    s.call_soon_threadsafe(seen.append, "second")
    s.call_soon_threadsafe(seen.append, "third")
    assert s.run_until(lambda: len(seen) == 4, 1000)
    assert seen == ["first", "second", "third", "scheduled by first"]


@pytest.mark.parametrize("scheduler", [SimScheduler, "real"])
def test_a_threadsafe_call_made_by_a_callback_queues_behind_what_it_scheduled_directly(scheduler):
    """call_soon_threadsafe only posts to the inbox; the call gets its place in the
    schedule when the loop drains the inbox, after the callback returns, so a call_soon
    the same callback makes afterwards still runs first.  Both schedulers order it so."""
    from kreplica.runtime import RealScheduler

    s = SimScheduler() if scheduler is SimScheduler else RealScheduler()
    seen = []

    def callback():
        s.call_soon_threadsafe(seen.append, "posted")
        s.call_soon(seen.append, "scheduled")

    s.call_soon(callback)
    assert s.run_until(lambda: len(seen) == 2, 1000)
    assert seen == ["scheduled", "posted"]


@pytest.mark.parametrize("scheduler", [SimScheduler, "real"])
def test_run_until_with_a_predicate_that_already_holds_runs_nothing_and_moves_no_time(scheduler):
    """run_until asks its predicate before it runs anything: one that holds at the call
    returns True at once, the timer due later still waiting and (virtual) time unmoved."""
    from kreplica.runtime import RealScheduler

    s = SimScheduler(start_ms=100) if scheduler is SimScheduler else RealScheduler()
    seen = []
    timer = s.call_later(50, seen.append, "later")
    assert s.run_until(lambda: True, 1000)
    assert seen == [] and s.events_run == 0 and s.next_due_ms() == timer.due_ms
    if scheduler is SimScheduler:
        assert s.now_ms() == 100 and timer.due_ms == 150
