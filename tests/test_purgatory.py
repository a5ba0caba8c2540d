"""Purgatory: watch, complete once, expire on the scheduler, re-entrant checks."""
from kreplica.replica.purgatory import DelayedOperation, Purgatory
from kreplica.runtime import SimScheduler


class Op(DelayedOperation):
    def __init__(self, timeout_ms, ready, answers, on_done=None):
        super().__init__(timeout_ms)
        self.ready = ready
        self.answers = answers
        self.on_done = on_done

    def try_complete(self):
        return self.ready() and self.force_complete()

    def on_complete(self):
        self.answers.append(("expired" if self.expired else "done", self))
        if self.on_done:
            self.on_done()


def test_completes_once_by_check_or_by_timeout():
    s = SimScheduler()
    p = Purgatory(s, "t")
    flag = {"ready": False}
    answers = []
    a = Op(100, lambda: flag["ready"], answers)
    b = Op(100, lambda: flag["ready"], answers)
    assert p.try_complete_else_watch(a, ["k1", "k2"]) is False
    assert p.try_complete_else_watch(b, ["k2"]) is False
    assert p.watched("k2") == 2
    flag["ready"] = True
    assert p.check_and_complete("k1") == 1
    assert p.watched("k2") == 1  # a is done: it no longer counts under k2
    s.advance(100)
    assert answers == [("done", a), ("expired", b)]
    assert p.check_and_complete("k2") == 0


def test_ready_at_once_is_never_watched():
    s = SimScheduler()
    p = Purgatory(s, "t")
    answers = []
    assert p.try_complete_else_watch(Op(10, lambda: True, answers), ["k"]) is True
    assert p.watched("k") == 0 and len(answers) == 1


def test_a_completion_that_changes_the_state_rechecks_the_key():
    """The first op's answer makes the second ready (as a re-read moving the HW would)."""
    s = SimScheduler()
    p = Purgatory(s, "t")
    state = {"level": 0}
    answers = []
    second = Op(1000, lambda: state["level"] >= 2, answers)

    def bump():
        state["level"] = 2
        p.check_and_complete("k")  # re-entrant

    p.try_complete_else_watch(second, ["k"])
    first = Op(1000, lambda: state["level"] >= 1, answers, on_done=bump)
    p.try_complete_else_watch(first, ["k"])
    state["level"] = 1
    assert p.check_and_complete("k") == 2
    assert [op for _, op in answers] == [first, second]


def test_cancel_all_forgets_without_answering():
    s = SimScheduler()
    p = Purgatory(s, "t")
    answers = []
    p.try_complete_else_watch(Op(10, lambda: False, answers), ["k"])
    p.cancel_all()
    s.advance(100)
    assert answers == [] and p.watched("k") == 0


class Counted(Op):
    """Ready once the level reaches ``need``; counts how often it was checked."""

    def __init__(self, need, state, answers):
        super().__init__(1000, lambda: state["level"] >= need, answers)
        self.need = need
        self.checks = 0

    def order(self, key):
        return self.need

    def try_complete(self):
        self.checks += 1
        return super().try_complete()


def test_an_ordered_key_rechecks_only_operations_the_bound_covers():
    s = SimScheduler()
    state = {"level": 0, "bound": 0}
    p = Purgatory(s, "t", bound=lambda key: state["bound"])
    answers = []
    ops = [Counted(need, state, answers) for need in (30, 10, 20, 40)]
    for op in ops:
        p.try_complete_else_watch(op, ["k"])
    state["level"] = state["bound"] = 20
    assert p.check_and_complete("k") == 2
    assert [op.need for _, op in answers] == [10, 20]  # in required order
    assert [op.checks for op in ops] == [1, 2, 2, 1]  # 30 and 40 were not looked at
    assert p.watched("k") == 2
    # No bound (leadership lost): every watcher re-checks.
    state["bound"] = None
    state["level"] = 40
    assert p.check_and_complete("k") == 2
    assert p.watched("k") == 0


def test_an_ordered_key_rechecks_with_the_bound_a_completion_moved():
    s = SimScheduler()
    state = {"level": 0, "bound": 0}
    p = Purgatory(s, "t", bound=lambda key: state["bound"])
    answers = []
    second = Counted(2, state, answers)
    first = Counted(1, state, answers)

    def bump():
        state["level"] = state["bound"] = 2
        p.check_and_complete("k")  # re-entrant

    first.on_done = bump
    p.try_complete_else_watch(second, ["k"])
    p.try_complete_else_watch(first, ["k"])
    state["level"] = state["bound"] = 1
    assert p.check_and_complete("k") == 2
    assert [op for _, op in answers] == [first, second]
