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


def _bounded():
    """A scheduler and a purgatory whose every key is bounded by ``state["bound"]``;
    ``state["level"]`` is what the ``Counted`` operations wait for."""
    s = SimScheduler()
    state = {"level": 0, "bound": 0}
    return s, Purgatory(s, "t", bound=lambda key: state["bound"]), state


def test_an_ordered_key_rechecks_with_the_bound_a_completion_moved():
    _, p, state = _bounded()
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


# ---- eleventh replica-layer mutant pass (hundred-and-ninety-ninth review) ----------------------
def test_a_re_entry_during_a_bounded_pass_that_empties_the_key_ends_the_check():
    """A completion re-enters ``check_and_complete`` for its key (its answer moved the HW
    again) and the same bounded pass then completes the key's last watcher: the key is
    gone from the table, so the second pass the re-entry asked for has nothing to look
    at and must not look the key up."""
    _, p, state = _bounded()
    answers = []
    first = Counted(1, state, answers)
    last = Counted(1, state, answers)
    first.on_done = lambda: p.check_and_complete("k")  # re-entrant: noted for a second pass
    p.try_complete_else_watch(first, ["k"])
    p.try_complete_else_watch(last, ["k"])
    state["level"] = state["bound"] = 1
    try:
        done = p.check_and_complete("k")
    except KeyError as gone:  # the second pass looked up the key the first one removed
        done = gone
    assert done == 2
    assert [op for _, op in answers] == [first, last]
    assert p.watched("k") == 0
    # The key works as before: a new watcher is found by the next check.
    again = Counted(2, state, answers)
    p.try_complete_else_watch(again, ["k"])
    state["level"] = state["bound"] = 2
    assert p.check_and_complete("k") == 1


def test_the_purge_leaves_each_key_ordered_for_the_next_bounded_pass():
    """The sweep drops completed entries from the middle of a key's heap; what is left must
    be a heap again, or a bounded pass stops at a larger order in front and never reaches
    an operation its bound covers.  Expirations count towards the sweep like completions."""
    s, p, state = _bounded()
    p._PURGE_EVERY = 1
    answers = []
    expiring = Counted(1, state, answers)
    expiring.timeout_ms = 10
    p.try_complete_else_watch(expiring, ["k"])
    late, covered = Counted(5, state, answers), Counted(2, state, answers)
    p.try_complete_else_watch(late, ["k"])
    p.try_complete_else_watch(covered, ["k"])
    s.advance(10)  # the first expires: the sweep runs and drops it from the heap's top
    assert answers == [("expired", expiring)]
    assert sorted(e[0] for e in p._watchers["k"]) == [2, 5]  # swept: only the live are left
    state["level"] = state["bound"] = 2
    assert p.check_and_complete("k") == 1
    assert answers[-1] == ("done", covered) and p.watched("k") == 1


def test_an_operation_completed_by_a_check_leaves_no_timer_behind():
    """Completion cancels the timeout at once: nothing of the answered operation stays due on
    the scheduler (an acks=all produce's timer would otherwise keep it, and its answer's
    callback, until ``timeout.ms``, and wake the loop then for nothing)."""
    s = SimScheduler()
    p = Purgatory(s, "t")
    flag = {"ready": False}
    answers = []
    op = Op(30_000, lambda: flag["ready"], answers)
    p.try_complete_else_watch(op, ["k"])
    assert s.next_due_ms() == 30_000
    flag["ready"] = True
    assert p.check_and_complete("k") == 1
    assert s.next_due_ms() is None and op._timer is None
    assert answers == [("done", op)]


def test_a_re_entry_asks_for_one_more_pass_not_for_passes_until_the_key_is_empty():
    """A completion re-enters for its key: the outer call makes exactly one more pass, so
    an operation that stays waiting is checked once more and the call returns (a pass
    that kept the re-entry's mark would go round as long as anything waits)."""
    s = SimScheduler()
    p = Purgatory(s, "t")
    answers = []
    flags = {"first": False}
    waiting = Counted(1, {"level": 0}, answers)

    def counted_try_complete(op=waiting, check=Counted.try_complete):
        assert op.checks < 10, "the key is checked round and round"
        return check(op)

    waiting.try_complete = counted_try_complete
    first = Op(1000, lambda: flags["first"], answers, on_done=lambda: p.check_and_complete("k"))
    p.try_complete_else_watch(first, ["k"])
    p.try_complete_else_watch(waiting, ["k"])
    assert waiting.checks == 1  # its first try, when it was watched
    flags["first"] = True
    assert p.check_and_complete("k") == 1
    assert waiting.checks == 3  # the pass, and the one more the re-entry asked for
    assert answers == [("done", first)] and p.watched("k") == 1
