from kreplica.runtime import ManualClock, SimScheduler


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
    assert c.now_ms() == 8
    try:
        c.advance(-1)
    except ValueError:
        pass
    else:
        raise AssertionError("negative advance accepted")


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
