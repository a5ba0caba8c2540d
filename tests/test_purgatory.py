"""Purgatory: watch, complete once, expire on the scheduler, re-entrant checks."""
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---- property: ordered keys never strand an operation whose condition holds ---------------------
KEYS = ("a", "b", "c")


class MultiKey(DelayedOperation):
    """An acks=all produce over several partitions: done when every key's level (the
    HW) reached what it needs there, or that key was lost (leadership gone)."""

    def __init__(self, timeout_ms, need, world):
        super().__init__(timeout_ms)
        self.need, self.world, self.answers = need, world, 0

    def order(self, key):
        return self.need[key]

    def ready(self):
        w = self.world
        return all(w["lost"][k] or w["level"][k] >= n for k, n in self.need.items())

    def try_complete(self):
        return self.ready() and self.force_complete()

    def on_complete(self):
        self.answers += 1


_pop = st.one_of(
    st.tuples(st.just("add"), st.dictionaries(st.sampled_from(KEYS), st.integers(0, 12), min_size=1),
              st.integers(1, 50)),
    st.tuples(st.just("raise"), st.sampled_from(KEYS), st.integers(0, 4)),
    st.tuples(st.just("lose"), st.sampled_from(KEYS)),
    st.tuples(st.just("regain"), st.sampled_from(KEYS)),
    st.tuples(st.just("tick"), st.integers(1, 20)),
)


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(_pop, max_size=60), purge_every=st.sampled_from([1, 3, 1000]))
def test_ordered_keys_complete_every_ready_operation_once(ops, purge_every):
    """Whatever the order of HW moves, leadership losses and timeouts: an operation is
    answered exactly once, and none stays waiting once every key it watches was
    re-checked after its condition came to hold."""
    s = SimScheduler()
    world = {"level": dict.fromkeys(KEYS, 0), "lost": dict.fromkeys(KEYS, False)}
    p = Purgatory(s, "t", bound=lambda k: None if world["lost"][k] else world["level"][k])
    p._PURGE_EVERY = purge_every
    made = []
    for op in ops:
        if op[0] == "add":
            d = MultiKey(op[2], dict(op[1]), world)
            made.append(d)
            p.try_complete_else_watch(d, list(d.need))
        elif op[0] == "raise":
            world["level"][op[1]] += op[2]
            p.check_and_complete(op[1])
        elif op[0] == "lose":
            world["lost"][op[1]] = True
            p.check_and_complete(op[1])
        elif op[0] == "regain":
            world["lost"][op[1]] = False       # a new leader: its level only grows from here
            p.check_and_complete(op[1])
        else:
            s.advance(op[1])
        assert all(d.answers <= 1 for d in made)
        # Every operation whose condition holds has been answered: each change was
        # followed by a check of its key.
        stranded = [d for d in made if not d.completed and d.ready()]
        assert not stranded, [(d.need, world) for d in stranded]
    s.advance(100)
    assert all(d.answers == 1 for d in made)


def test_the_periodic_purge_keeps_the_operations_still_waiting():
    """The sweep of completed operations must keep every live watcher: one still waiting
    on another key completes when that key is checked after the purge ran."""
    s = SimScheduler()
    p = Purgatory(s, "t")
    p._PURGE_EVERY = 1
    flags = {"k1": False, "k2": False}
    answers = []
    waiting = Op(1000, lambda: flags["k2"], answers)
    done_first = Op(1000, lambda: flags["k1"], answers)
    p.try_complete_else_watch(waiting, ["k2"])
    p.try_complete_else_watch(done_first, ["k1"])
    flags["k1"] = True
    assert p.check_and_complete("k1") == 1  # one completion: the purge runs
    assert p.watched("k2") == 1
    flags["k2"] = True
    assert p.check_and_complete("k2") == 1
    assert answers == [("done", done_first), ("done", waiting)]


def test_an_unbounded_pass_leaves_the_survivors_ordered_for_the_next_bounded_one():
    """A pass over every watcher (leadership lost) puts those still waiting back as a heap:
    a later bounded pass must find the smallest order first, or it stops short of an
    operation its bound covers."""
    s = SimScheduler()
    state = {"level": 0, "bound": 0}
    p = Purgatory(s, "t", bound=lambda key: state["bound"])
    answers = []
    ops = [Counted(need, state, answers) for need in (10, 30, 20)]
    for op in ops:
        p.try_complete_else_watch(op, ["k"])
    state["bound"], state["level"] = None, 10
    assert p.check_and_complete("k") == 1  # 10 completes; 30 and 20 stay
    state["bound"] = state["level"] = 20
    assert p.check_and_complete("k") == 1
    assert [op.need for _, op in answers] == [10, 20]
    assert p.watched("k") == 1


# ---- tenth replica-layer mutant pass (hundred-and-eightieth review) -------------------------------
def test_an_operation_watched_during_a_pass_over_every_watcher_waits_for_the_next_pass():
    """A pass over all of a key's watchers takes the list out of the table: an operation
    watched under the key meanwhile (here by a watcher's own check) is not looked at in
    that pass, and is still watched, beside the survivors, when the pass ends."""
    s = SimScheduler()
    p = Purgatory(s, "t")
    answers = []
    flags = {"during_pass": False, "late_ready": False}
    late = Op(1000, lambda: flags["late_ready"], answers)

    def early_ready():
        if flags["during_pass"]:
            flags["during_pass"] = False
            p.try_complete_else_watch(late, ["k"])
        return False

    early = Op(1000, early_ready, answers)
    p.try_complete_else_watch(early, ["k"])
    flags["during_pass"] = True
    assert p.check_and_complete("k") == 0
    assert p.watched("k") == 2
    flags["late_ready"] = True
    assert p.check_and_complete("k") == 1
    assert answers == [("done", late)] and p.watched("k") == 1
