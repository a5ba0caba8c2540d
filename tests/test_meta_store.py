"""The metadata-store contract, one suite run against MemoryStore and a real ZooKeeper."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kreplica.meta.store import (
    BadVersion,
    ConnectionLoss,
    EventType,
    InvalidPath,
    NoChildrenForEphemerals,
    NoNode,
    NodeExists,
    NotEmpty,
    Op,
    Session,
    SessionExpired,
    StoreError,
)
from meta_env import Recorder, StoreEnv, expire_from_a_twin, killed_with_an_ephemeral_and_a_watch, meanwhile


def test_create_get_set_versions(store_env: StoreEnv) -> None:
    s = store_env.store.session("a")
    assert s.create("/x", b"one") == "/x"
    data, stat = s.get("/x")
    assert data == b"one" and stat.version == 0 and stat.ephemeral_owner == 0
    assert s.set("/x", b"two").version == 1
    assert s.set("/x", b"three", version=1).version == 2
    with pytest.raises(BadVersion):
        s.set("/x", b"stale", version=1)
    assert s.get("/x")[0] == b"three"
    with pytest.raises(NodeExists):
        s.create("/x")
    with pytest.raises(NoNode):
        s.create("/missing/child")
    with pytest.raises(NoNode):
        s.get("/nope")
    with pytest.raises(NoNode):
        s.set("/nope", b"")
    assert s.exists("/nope") is None
    assert s.exists("/x").version == 2


def test_makepath_children_and_delete(store_env: StoreEnv) -> None:
    s = store_env.store.session("a")
    s.create("/a/b/c", b"leaf", makepath=True)
    s.create("/a/b/d")
    assert s.get_children("/a/b") == ["c", "d"]
    assert s.get("/a/b")[1].num_children == 2
    with pytest.raises(NotEmpty):
        s.delete("/a/b")
    with pytest.raises(BadVersion):
        s.delete("/a/b/c", version=3)
    s.delete("/a/b/c", version=0)
    assert s.get_children("/a/b") == ["d"]
    s.delete("/a", recursive=True)
    assert s.exists("/a") is None
    with pytest.raises(NoNode):
        s.delete("/a")
    with pytest.raises(NoNode):
        s.get_children("/a")
    s.ensure_path("/e/f")
    s.ensure_path("/e/f")
    assert s.exists("/e/f") is not None


def test_sequential_nodes_have_ten_digit_suffixes(store_env: StoreEnv) -> None:
    s = store_env.store.session("a")
    s.create("/q")
    first = s.create("/q/isr_change_", b"1", sequential=True)
    second = s.create("/q/isr_change_", b"2", sequential=True)
    assert first == "/q/isr_change_0000000000"
    assert second == "/q/isr_change_0000000001"
    s.delete(second)
    # The counter counts the parent's child creations: deleting the newest does not
    # make its number be handed out again.
    assert s.create("/q/isr_change_", sequential=True) == "/q/isr_change_0000000002"
    assert s.create("/q/other-", sequential=True) == "/q/other-0000000003"
    # Every child creation counts, a plain (not sequential) one too.
    s.create("/q/plain")
    assert s.create("/q/isr_change_", sequential=True) == "/q/isr_change_0000000005"


def test_ephemeral_nodes_vanish_on_close_and_take_no_children(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/eph", b"me", ephemeral=True)
    assert b.get("/eph")[1].ephemeral_owner == a.session_id != 0
    with pytest.raises(NoChildrenForEphemerals):
        a.create("/eph/child")
    seen = Recorder()
    b.exists("/eph", seen)
    a.close()
    assert b.exists("/eph") is None
    assert store_env.wait(lambda: seen.types() == ["DELETED"])


def test_a_closed_session_is_closed_not_expired(store_env: StoreEnv) -> None:
    # Closing stops kazoo's client, which reports its session LOST: that is not an expiry,
    # so the owner's calls say the session is closed (ConnectionLoss), never SessionExpired.
    told: list[bool] = []
    a = store_env.store.session("a", on_expired=lambda: told.append(True))
    a.close()
    store_env.quiesce()
    assert not a.expired and told == []
    with pytest.raises(ConnectionLoss):
        a.get("/")


def _sessions_and_w(store_env: StoreEnv) -> tuple[Session, Session]:
    """Sessions ``a`` and ``b``, and the node ``/w`` (``b"0"``) that ``a`` created."""
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/w", b"0")
    return a, b


def test_data_watches_are_one_shot(store_env: StoreEnv) -> None:
    a, b = _sessions_and_w(store_env)
    seen = Recorder()
    b.get("/w", seen)
    a.set("/w", b"1")
    # Delivered later on the scheduler, never inside the call that changed the node.
    assert seen.events == []
    assert store_env.wait(lambda: len(seen.events) == 1)
    assert seen.events[0].type is EventType.CHANGED and seen.events[0].path == "/w"
    a.set("/w", b"2")
    store_env.quiesce()
    assert len(seen.events) == 1
    b.get("/w", seen)
    a.delete("/w")
    assert store_env.wait(lambda: seen.types() == ["CHANGED", "DELETED"])


def test_exists_watch_fires_on_creation(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    seen = Recorder()
    assert b.exists("/later", seen) is None
    a.create("/later")
    assert store_env.wait(lambda: seen.types() == ["CREATED"])


def test_child_watches(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/ids")
    seen = Recorder()
    assert b.get_children("/ids", seen) == []
    a.create("/ids/1", ephemeral=True)
    assert store_env.wait(lambda: seen.types() == ["CHILD"])
    assert seen.events[0].path == "/ids"
    assert b.get_children("/ids", seen) == ["1"]
    a.set("/ids/1", b"data change is not a child change")
    store_env.quiesce()
    assert seen.types() == ["CHILD"]
    a.delete("/ids/1")
    assert store_env.wait(lambda: seen.types() == ["CHILD", "CHILD"])


def test_multi_is_all_or_nothing(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/m", b"v0")
    a.set("/m", b"v1")
    seen = Recorder()
    b.get("/m", seen)
    with pytest.raises(BadVersion) as info:
        a.multi([Op.create("/m-new", b"x"), Op.set("/m", b"v2", 1), Op.check("/m", 0)])
    assert info.value.op_index == 2
    assert a.exists("/m-new") is None
    assert a.get("/m") == (b"v1", a.get("/m")[1]) and a.get("/m")[1].version == 1
    store_env.quiesce()
    assert seen.events == []
    results = a.multi([Op.check("/m", 1), Op.create("/m-new", b"x"), Op.create("/m-new/c"),
                       Op.set("/m", b"v2", 1), Op.delete("/m-new/c")])
    assert results[0] is True and results[1] == "/m-new" and results[2] == "/m-new/c"
    assert results[3].version == 2 and results[4] is True
    assert a.get("/m")[0] == b"v2" and a.get_children("/m-new") == []
    assert store_env.wait(lambda: seen.types() == ["CHANGED"])
    with pytest.raises(NodeExists) as info:
        a.multi([Op.set("/m", b"v3"), Op.create("/m-new")])
    assert info.value.op_index == 1
    assert a.get("/m")[0] == b"v2"
    # A transaction's delete is conditional on its version, as a plain delete is.
    with pytest.raises(BadVersion) as info:
        a.multi([Op.delete("/m", 1)])
    assert info.value.op_index == 0 and a.exists("/m").version == 2
    assert a.multi([Op.delete("/m", 2)]) == [True] and a.exists("/m") is None


def test_get_many_is_one_round_trip(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    for i in range(5):
        a.create(f"/g{i}", str(i).encode())
    before = store_env.store.round_trips
    got = a.get_many([f"/g{i}" for i in range(5)] + ["/absent"])
    assert store_env.store.round_trips - before == 1
    assert [g[0] for g in got[:5]] == [b"0", b"1", b"2", b"3", b"4"]
    assert got[5] is None


def test_killed_session_expires_after_the_timeout(store_env: StoreEnv) -> None:
    store = store_env.store
    broker = store.session("broker")
    watcher = store.session("controller")
    broker.create("/ids", b"")
    broker.create("/ids/1001", b"", ephemeral=True)
    seen = Recorder()
    watcher.get_children("/ids", seen)
    start = store_env.sched.now_ms()
    broker.kill()
    assert store_env.wait(lambda: seen.types() == ["CHILD"], timeout_ms=4 * store_env.session_timeout_ms)
    elapsed = store_env.sched.now_ms() - start
    # Not before ZooKeeper could have expired it (its ping may have been up to a third
    # of the timeout before the kill), and within a couple of server ticks after.
    assert elapsed >= store_env.session_timeout_ms * 2 // 3
    assert watcher.get_children("/ids") == []


def test_a_recursive_delete_of_the_root_empties_the_tree_and_keeps_the_root(store_env: StoreEnv) -> None:
    # The root cannot be deleted; on ZooKeeper it is the store's chroot, which the store's
    # sessions need to exist for every path under it.
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/x/y", b"", makepath=True)
    a.create("/z", ephemeral=True)
    a.delete("/", recursive=True)
    assert a.get_children("/") == [] and a.exists("/") is not None
    a.create("/again")
    assert b.get_children("/") == ["again"]


def test_a_transaction_creates_ephemeral_nodes_owned_by_its_session(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.multi([Op.create("/p"), Op.create("/p/e", ephemeral=True)])
    assert b.exists("/p/e").ephemeral_owner == a.session_id != 0
    assert b.exists("/p").ephemeral_owner == 0
    a.close()
    assert b.exists("/p/e") is None and b.exists("/p") is not None


def test_recursive_delete_checks_the_version_before_deleting_anything(store_env: StoreEnv) -> None:
    s = store_env.store.session("a")
    s.create("/t/partitions/0", b"", makepath=True)
    s.set("/t", b"assignment")
    with pytest.raises(BadVersion):
        s.delete("/t", version=0, recursive=True)
    assert s.get_children("/t/partitions") == ["0"]  # nothing under it went either
    with pytest.raises(NoNode):
        s.delete("/absent", version=0, recursive=True)
    s.delete("/t", version=1, recursive=True)
    assert s.exists("/t") is None


def test_versions_below_minus_one_match_no_node(store_env: StoreEnv) -> None:
    # Only -1 means "any version"; ZooKeeper's server compares any other number, so -2
    # matches no node (ZOOKEEPER-3773).
    s = store_env.store.session("a")
    s.create("/v", b"0")
    with pytest.raises(BadVersion):
        s.set("/v", b"1", version=-2)
    with pytest.raises(BadVersion):
        s.delete("/v", version=-2)
    with pytest.raises(BadVersion):
        s.delete("/v", version=-2, recursive=True)
    with pytest.raises(BadVersion) as info:
        s.multi([Op.check("/v", -2)])
    assert info.value.op_index == 0
    assert s.get("/v") == (b"0", s.get("/v")[1]) and s.get("/v")[1].version == 0


def test_a_rolled_back_transaction_takes_no_sequence_number(store_env: StoreEnv) -> None:
    s = store_env.store.session("a")
    s.create("/q")
    with pytest.raises(NoNode):
        s.multi([Op.create("/q/n-", sequential=True), Op.create("/q/n-", sequential=True), Op.check("/nope")])
    assert s.get("/q")[1].num_children == 0
    assert s.create("/q/n-", sequential=True) == "/q/n-0000000000"


def test_an_ephemeral_kept_by_a_rolled_back_delete_still_goes_with_its_session(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/eph", ephemeral=True)
    with pytest.raises(NoNode):
        a.multi([Op.delete("/eph"), Op.check("/nope")])
    assert b.exists("/eph").ephemeral_owner == a.session_id
    a.close()
    assert b.exists("/eph") is None


def test_a_child_watch_fires_when_its_node_is_deleted(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/p")
    seen = Recorder()
    assert b.get_children("/p", seen) == []
    a.delete("/p")
    assert store_env.wait(lambda: seen.types() == ["DELETED"])
    assert seen.events[0].path == "/p"


def test_reads_of_a_missing_node_leave_no_watch(store_env: StoreEnv) -> None:
    # Unlike exists, a get or get_children that fails with NoNode sets no watch.
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    seen = Recorder()
    with pytest.raises(NoNode):
        b.get("/later", seen)
    with pytest.raises(NoNode):
        b.get_children("/later", seen)
    a.create("/later")
    a.create("/later/child")
    a.set("/later", b"1")
    store_env.quiesce()
    assert seen.events == []



def test_a_create_with_data_of_the_wrong_type_makes_no_parents(store_env: StoreEnv) -> None:
    # kazoo refuses a value that is not bytes before it sends anything, makepath or not.
    s = store_env.store.session("a")
    for value in ("text", bytearray(b"x")):  # kazoo takes bytes only, not even a bytearray
        with pytest.raises(TypeError):
            s.create("/wrong/type/node", value, makepath=True)  # type: ignore[arg-type]
        assert s.exists("/wrong") is None


def test_a_rolled_back_transaction_restores_a_node_it_changed_twice(store_env: StoreEnv) -> None:
    # The undo runs newest first: the first set's old value is the one that stays.
    s = store_env.store.session("a")
    s.create("/r", b"0")
    with pytest.raises(NoNode):
        s.multi([Op.set("/r", b"1"), Op.set("/r", b"2"), Op.create("/r/c"), Op.delete("/r/c"),
                 Op.check("/nope")])
    data, stat = s.get("/r")
    assert (data, stat.version, stat.num_children) == (b"0", 0, 0)
    assert s.get_children("/r") == []


def test_a_transaction_with_an_op_of_the_wrong_type_or_kind_changes_nothing(store_env: StoreEnv) -> None:
    s = store_env.store.session("a")
    s.create("/t", b"0")
    with pytest.raises(TypeError):
        s.multi([Op.create("/t-new"), Op.set("/t", "text")])  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # a create's data is checked too (kazoo's transaction refuses it)
        s.multi([Op.set("/t", b"1"), Op.create("/t-new", "text")])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        s.multi([Op.create("/t-new"), Op.set("/t", b"1"), Op("frob", "/t")])
    assert s.exists("/t-new") is None
    # The data is checked before the node is looked up, as kazoo checks it before sending:
    # TypeError, not NoNode or BadVersion, whether or not the node is there at that version.
    for call in (lambda: s.set("/none", "text"), lambda: s.set("/t", "text", 5),  # type: ignore[arg-type]
                 lambda: s.multi([Op.set("/none", "text")])):  # type: ignore[arg-type]
        with pytest.raises((TypeError, NoNode, BadVersion)) as refused:
            call()
        assert refused.type is TypeError
    data, stat = s.get("/t")
    assert (data, stat.version) == (b"0", 0)


def test_children_are_listed_in_name_order_not_creation_order(store_env: StoreEnv) -> None:
    s = store_env.store.session("a")
    for name in ("b", "a", "c", "a0"):
        s.create(f"/k/{name}", makepath=True)
    assert s.get_children("/k") == ["a", "a0", "b", "c"]


def test_a_recursive_delete_fires_the_watches_of_every_node_it_removes(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/t/a/b", b"x", makepath=True)
    leaf_data, mid_children, mid_data = Recorder(), Recorder(), Recorder()
    b.get("/t/a/b", leaf_data)
    assert b.get_children("/t/a", mid_children) == ["b"]
    assert b.exists("/t/a", mid_data) is not None
    a.delete("/t", recursive=True)
    assert store_env.wait(lambda: leaf_data.types() == ["DELETED"] and mid_data.types() == ["DELETED"]
                          and mid_children.types() == ["CHILD"])
    assert [e.path for e in leaf_data.events + mid_children.events] == ["/t/a/b", "/t/a"]


# ---- MemoryStore only: the simulator's levers (pauses, partitions, determinism) ----

def _memory(timeout_ms: int = 3000):
    from kreplica.meta.memory_store import MemoryStore
    from kreplica.runtime import SimScheduler

    sched = SimScheduler(seed=1)
    return sched, MemoryStore(sched, session_timeout_ms=timeout_ms)


def test_memory_session_lives_while_pinging_and_expires_when_paused() -> None:
    sched, store = _memory(3000)
    expired: list[int] = []
    s = store.session("b1", on_expired=lambda: expired.append(sched.now_ms()))
    s.create("/e", ephemeral=True)
    sched.advance(60_000)
    assert not s.expired and s.exists("/e") is not None
    lost = Recorder()
    s.get("/e", lost)
    paused_at = sched.now_ms()
    s.pause_heartbeats()
    sched.advance(1500)
    s.resume_heartbeats()  # a short pause survives
    sched.advance(10_000)
    assert not s.expired
    s.pause_heartbeats()
    paused_at = sched.now_ms()
    assert sched.run_until(lambda: bool(expired), 10_000)
    assert 2000 <= expired[0] - paused_at <= 3000
    assert s.expired and lost.types() == ["SESSION_EXPIRED"]
    assert lost.events[0].path == "/e"  # the path the watch was left on, as ZooKeeperStore tells it
    other = store.session("b2")
    assert other.exists("/e") is None
    with pytest.raises(SessionExpired):
        s.get("/")


def test_memory_session_survives_a_pause_that_ends_before_the_timeout() -> None:
    """A stalled client that wakes before its session timeout pings at once: its session
    lives, even when no regular ping falls between the wake-up and the deadline."""
    sched, store = _memory(3000)
    s = store.session("b1")
    sched.advance(10_500)          # pings every 1000 ms: the last one was at 10_000
    s.pause_heartbeats()
    sched.advance(1900)            # wakes at 12_400, 600 ms before the 13_000 deadline
    s.resume_heartbeats()
    sched.advance(10_000)
    assert not s.expired



def test_memory_session_that_reconnects_is_heard_at_once() -> None:
    """A session cut off for most of its timeout is good for a whole timeout from the
    reconnection (the client re-establishes its session there), even when no regular
    ping falls between the reconnection and the old deadline."""
    sched, store = _memory(3000)
    s = store.session("b1")
    sched.advance(100)
    s.set_reachable(False)         # last heard at 0: the old deadline is 3000
    sched.advance(2800)
    s.set_reachable(True)          # 2900: the next ping is at 3000, the deadline's instant
    sched.advance(600)
    assert not s.expired
    sched.advance(10_000)
    assert not s.expired


@pytest.mark.parametrize("ends", ["pause", "cut"])
def test_memory_a_paused_and_cut_off_session_is_not_heard_when_only_one_ends(ends: str) -> None:
    """Waking up does not reach the store while the session is cut off from it; and
    reconnecting is the client's doing, so a stalled client is not heard when its cut
    heals.  Either way its deadline stays where its last ping put it."""
    sched, store = _memory(3000)
    s = store.session("b1")
    s.create("/e", ephemeral=True)
    sched.advance(100)
    s.pause_heartbeats()
    s.set_reachable(False)
    sched.advance(2700)
    if ends == "pause":
        s.resume_heartbeats()      # 2800, still cut off: the deadline stays at 3000
    else:
        s.set_reachable(True)      # 2800, still paused: last heard at 0
    sched.advance(300)
    assert s.expired
    assert store.session("b2").exists("/e") is None

def test_memory_partition_gives_connection_loss_and_late_expiry_notice() -> None:
    sched, store = _memory(3000)
    expired: list[int] = []
    s = store.session("b1", on_expired=lambda: expired.append(sched.now_ms()))
    s.create("/e", ephemeral=True)
    watch = Recorder()
    s.get("/e", watch)
    s.set_reachable(False)
    with pytest.raises(ConnectionLoss):
        s.get("/e")
    sched.advance(1000)
    s.set_reachable(True)  # healed in time: nothing lost
    sched.advance(10_000)
    assert not s.expired and s.get("/e")
    s.set_reachable(False)
    sched.advance(10_000)
    other = store.session("b2")
    assert other.exists("/e") is None  # the store expired it
    assert expired == [] and watch.events == []  # but the partitioned client cannot know yet
    with pytest.raises(ConnectionLoss):  # not SessionExpired: the store's word cannot reach it
        s.get("/")
    s.set_reachable(True)
    sched.advance(0)
    assert expired == [sched.now_ms()] and watch.types() == ["SESSION_EXPIRED"]
    with pytest.raises(SessionExpired):
        s.get("/")


def test_memory_killed_session_gets_no_callbacks() -> None:
    sched, store = _memory(3000)
    s, called = killed_with_an_ephemeral_and_a_watch(store)
    sched.advance(10_000)
    assert s.expired and called == []
    assert store.session("b2").exists("/e") is None


def test_memory_a_session_expires_a_whole_timeout_after_it_was_last_heard() -> None:
    # 1000 ms is no multiple of 3: the pings are 333 ms apart, and three of them (999 ms)
    # fall short of the timeout. Heard last at 333, killed at 400: expired at 1333, no sooner.
    sched, store = _memory(1000)
    s = store.session("a")
    sched.advance(400)
    s.kill()
    sched.advance(932)
    assert sched.now_ms() == 1332 and not s.expired
    sched.advance(1)
    assert s.expired


def test_memory_a_fractional_session_timeout_counts_whole_milliseconds() -> None:
    # Kept as a float, the deadline fell half a millisecond after the instant the timer
    # can name: the expiry check came round again at that instant for ever.
    sched, store = _memory(1000.5)  # type: ignore[arg-type]
    assert store.session_timeout_ms == 1000
    s = store.session("a")
    s.kill()
    for _ in range(20):
        if s.expired or not sched.run_next():
            break
    assert s.expired and sched.now_ms() == 1000


@pytest.mark.parametrize("timeout_ms", [1, 2])
def test_memory_a_session_timeout_under_three_ms_pings_every_ms(timeout_ms: int) -> None:
    # A third of the timeout rounds down to 0 here: the ping interval is held at 1 ms, or
    # the ping would come round again at the same instant for ever and the clock never move.
    sched, store = _memory(timeout_ms)
    s = store.session("a")
    for _ in range(60):
        assert sched.run_next()
    assert sched.now_ms() >= 20
    assert not s.expired and s.exists("/") is not None


def test_memory_a_call_refused_before_it_reaches_the_store_is_no_round_trip() -> None:
    # round_trips counts the requests sent (bench_failover reports them): a cut-off, killed,
    # closed or expired session's call is refused on the client's side and sends nothing.
    sched, store = _memory(3000)
    cut, killed, closed, expired = (store.session(n) for n in ("cut", "killed", "closed", "expired"))
    cut.set_reachable(False)
    killed.kill()
    closed.close()
    expired.pause_heartbeats()
    sched.advance(3000)
    assert expired.expired
    before = store.round_trips
    for s, error in ((cut, ConnectionLoss), (killed, ConnectionLoss), (closed, ConnectionLoss),
                     (expired, SessionExpired)):
        for call in (lambda: s.get("/"), lambda: s.multi([]), lambda: s.get_many(["/"]),
                     lambda: s.create("/x")):
            with pytest.raises(error):
                call()
    assert store.round_trips == before
    assert store.session("live").get_many(["/"])[0] is not None and store.round_trips == before + 1


def test_memory_each_store_error_reads_as_the_servers_code_name() -> None:
    # The names are KeeperException's code names, which ZooKeeper's own tools and logs
    # print, and each message starts with its name: a log tells a BADVERSION from a NONODE.
    sched, store = _memory(3000)
    s = store.session("a")
    s.create("/v")
    s.create("/e", ephemeral=True)
    s.create("/p/c", makepath=True)
    cut, gone = store.session("cut"), store.session("gone")
    cut.set_reachable(False)
    gone.pause_heartbeats()
    sched.advance(3000)
    for call, name in ((lambda: s.get("/none"), "NONODE"), (lambda: s.create("/v"), "NODEEXISTS"),
                       (lambda: s.set("/v", b"", 3), "BADVERSION"), (lambda: s.delete("/p"), "NOTEMPTY"),
                       (lambda: s.create("/e/c"), "NOCHILDRENFOREPHEMERALS"),
                       (lambda: cut.get("/"), "CONNECTIONLOSS"), (lambda: gone.get("/"), "SESSIONEXPIRED")):
        with pytest.raises(StoreError) as failed:
            call()
        assert failed.value.name == name and str(failed.value).startswith(f"{name}: ")


def test_memory_store_is_deterministic() -> None:
    def run() -> list[tuple[int, str, str]]:
        sched, store = _memory(2000)
        log: list[tuple[int, str, str]] = []
        sessions = [store.session(f"s{i}") for i in range(3)]
        sessions[0].create("/ids")
        for i, s in enumerate(sessions):
            s.create(f"/ids/{i}", ephemeral=True)

        def rearm(i: int) -> None:
            def watch(ev) -> None:
                log.append((sched.now_ms(), f"s{i}", ev.type.value))
                if ev.type is EventType.CHILD:
                    rearm(i)
            sessions[i].get_children("/ids", watch)

        for i in range(3):
            rearm(i)
        sessions[1].pause_heartbeats()
        sessions[2].kill()
        sched.advance(5000)
        return log

    first = run()
    assert first == run()
    # s1 and s2 fall silent together and expire at the same tick, s1 first (its expiry
    # check was scheduled first): s1's own watch learns of its expiry, s0's one-shot
    # watch fires once for both deletions, and the dead s2 hears nothing.
    assert [(who, t) for _, who, t in first] == [("s0", "CHILD"), ("s1", "SESSION_EXPIRED")]
    assert first[0][0] == first[1][0] > 0


# ---- ZooKeeper only: expiry seen by a live client ----

@pytest.mark.zookeeper
def test_zookeeper_expired_session_tells_its_owner(zk_store_factory, zk_server) -> None:
    from kreplica.runtime import RealScheduler

    sched = RealScheduler()
    store = zk_store_factory(sched)
    expired: list[bool] = []
    s = store.session("b1", on_expired=lambda: expired.append(True))
    s.create("/e", ephemeral=True)
    watch = Recorder()
    s.exists("/e", watch)
    expire_from_a_twin(s, zk_server.hosts + zk_store_factory.chroot)
    assert sched.run_until(lambda: bool(expired), 20_000)
    assert "SESSION_EXPIRED" in watch.types() or "DELETED" in watch.types()
    with pytest.raises(SessionExpired):
        s.get("/")
    assert store.session("b2").exists("/e") is None


@pytest.mark.zookeeper
def test_a_chroot_is_slash_name_or_the_root(zk_server) -> None:
    from kreplica.meta.zookeeper_store import ZooKeeperStore
    from kreplica.runtime import RealScheduler

    # The whole path rule, as ZooKeeper's own client checks a chroot: kazoo took "/a//b"
    # for /a/b, and the rest came back as ConnectionLoss ("cannot reach ZooKeeper") from a
    # server that was reached.
    for bad in ["kreplica", "/kreplica/", "/a/b/", "//", "/bad-chroot//b", "/bad-chroot/./b",
                "/bad-chroot/..", "/bad-chroot\x01"]:
        with pytest.raises(ValueError, match="chroot must look like /name") as refused:
            ZooKeeperStore(zk_server.hosts, bad, RealScheduler())
        # ...and says which rule it breaks, as the path rule says it for a call's path.
        assert f"invalid path {bad!r}" in str(refused.value), str(refused.value)
    for bad, why in [("/bad-chroot/./b", "relative paths not allowed"),
                     ("/bad-chroot\x01", "invalid character '\\x01' at 11")]:
        with pytest.raises(ValueError) as refused:
            ZooKeeperStore(zk_server.hosts, bad, RealScheduler())
        assert str(refused.value) == f"chroot must look like /name, got {bad!r}: invalid path {bad!r}: {why}"
    for root in ["", "/"]:
        store = ZooKeeperStore(zk_server.hosts, root, RealScheduler())
        try:
            assert store.chroot == "" and "zookeeper" in store.session("x").get_children("/")
            assert "bad-chroot" not in store.session("y").get_children("/")
        finally:
            store.close()


@pytest.mark.zookeeper
def test_a_store_at_zookeepers_root_connects_only_for_its_sessions(zk_server, monkeypatch) -> None:
    # Only a chroot has to be made before the first session: a store at ZooKeeper's root
    # ("" or "/") opens no client of its own, where each such client is one more session
    # the server creates and closes.
    from kreplica.meta import zookeeper_store as zs
    from kreplica.runtime import RealScheduler

    made: list[str] = []
    real = zs.KazooClient

    def counted(*args: object, **kwargs: object) -> object:
        made.append(str(kwargs["hosts"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(zs, "KazooClient", counted)
    for root in ["", "/"]:
        zs.ZooKeeperStore(zk_server.hosts, root, RealScheduler()).close()
    assert made == []
    zs.ZooKeeperStore(zk_server.hosts, "/made-by-its-own-client", RealScheduler()).close()
    assert made == [zk_server.hosts]


@pytest.mark.zookeeper
def test_the_test_server_listens_on_loopback_only_and_grants_short_sessions(zk_server, zk_store_factory) -> None:
    import socket

    from meta_env import negotiated_timeout_ms

    with pytest.raises(ConnectionRefusedError):  # 127.0.0.2 is loopback too, but not the bound address
        socket.create_connection(("127.0.0.2", zk_server.port), timeout=2).close()
    # The suites' 1.5 s sessions are granted as asked (ZooKeeper's default floor is 2 ticks).
    session = zk_store_factory().session("short")
    assert negotiated_timeout_ms(zk_server, session) == 1500
    # ...and Kafka's 18 s default too (ZooKeeper's default ceiling, 20 ticks, is 4 s).
    from kreplica.meta.zookeeper_store import DEFAULT_SESSION_TIMEOUT_MS

    long_session = zk_store_factory(session_timeout_ms=DEFAULT_SESSION_TIMEOUT_MS).session("long")
    assert negotiated_timeout_ms(zk_server, long_session) == DEFAULT_SESSION_TIMEOUT_MS == 18000
    # ZooKeeper looks for expired sessions once a tick: on its default 2 s tick a 1.5 s
    # session would be found dead up to 2 s late, whatever it was granted.
    from kreplica.meta.zk_server import four_letter_word

    conf = four_letter_word(zk_server.host, zk_server.port, "conf", timeout_s=5).splitlines()
    assert "tickTime=200" in conf and zk_server.tick_time_ms == 200


# ---- MemoryStore against the oracle: the same random operations on a real ZooKeeper ----

def _differential_ops():
    from hypothesis import strategies as st

    paths = st.sampled_from(["/a", "/a", "/b", "/a/b", "/a/c", "/b/x", "/a/b/y"])
    data = st.sampled_from([b"", b"1", b"22"])
    version = st.sampled_from([-2, -1, 0, 1, 2])
    create = st.tuples(st.just("create"), paths, data, st.booleans(), st.booleans())
    set_ = st.tuples(st.just("set"), paths, data, version)
    delete = st.tuples(st.just("delete"), paths, version)
    check = st.tuples(st.just("check"), paths, version)
    read = st.tuples(st.sampled_from(["get", "exists", "get_children"]), paths)
    multi = st.tuples(st.just("multi"), st.lists(st.one_of(create, set_, delete, check), min_size=1, max_size=4))
    # Creations weigh more so that trees grow deep enough for the interesting errors.
    return st.lists(st.one_of(create, create, create, set_, set_, delete, read, multi), min_size=1, max_size=40)


def _as_op(prefix: str, step: tuple) -> Op:
    kind, path = step[0], prefix + step[1]
    if kind == "create":
        return Op.create(path, step[2], ephemeral=step[3], sequential=step[4])
    if kind == "set":
        return Op.set(path, step[2], step[3])
    if kind == "delete":
        return Op.delete(path, step[2])
    return Op.check(path, step[2])


def _apply(session, prefix: str, step: tuple) -> object:
    def norm(value):
        if isinstance(value, str) and value.startswith(prefix):
            return value[len(prefix):]
        if hasattr(value, "version") and hasattr(value, "num_children"):
            return ("stat", value.version, value.num_children, value.ephemeral_owner != 0)
        if isinstance(value, tuple):
            return tuple(norm(v) for v in value)
        if isinstance(value, list):
            return [norm(v) for v in value]
        return value

    kind = step[0]
    try:
        if kind in ("get", "exists", "get_children"):
            return norm(getattr(session, kind)(prefix + step[1]))
        if kind == "multi":
            return norm(session.multi([_as_op(prefix, s) for s in step[1]]))
        op = _as_op(prefix, step)
        if kind == "create":
            return norm(session.create(op.path, op.data, ephemeral=op.ephemeral, sequential=op.sequential))
        if kind == "set":
            return norm(session.set(op.path, op.data, op.version))
        return norm(session.delete(op.path, op.version))
    except Exception as exc:  # the outcome compared is the error's type and failing op
        return (type(exc).__name__, getattr(exc, "op_index", None))


@pytest.mark.zookeeper
def test_memory_store_matches_zookeeper(zk_store_factory) -> None:
    from hypothesis import HealthCheck, given, settings

    from kreplica.meta.memory_store import MemoryStore
    from kreplica.runtime import RealScheduler, SimScheduler

    zk_store = zk_store_factory(RealScheduler())
    zk = zk_store.session("oracle")
    examples = iter(range(10**9))

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_differential_ops())
    def check(steps) -> None:
        prefix = f"/ex{next(examples)}"
        zk.create(prefix)
        mem_store = MemoryStore(SimScheduler())
        mem = mem_store.session("model")
        mem.create(prefix)
        for step in steps:
            expected = _apply(zk, prefix, step)
            assert _apply(mem, prefix, step) == expected, step
        for path in ["", "/a", "/b", "/a/b"]:
            assert _apply(mem, prefix, ("get_children", path)) == _apply(zk, prefix, ("get_children", path))

    check()


# ---- the server fixture: skipped without ZooKeeper, a failure when CI requires it ----

def _run_zk_test_without_zookeeper(require: bool) -> "subprocess.CompletedProcess[str]":
    import os
    import subprocess
    import sys

    env = dict(os.environ, KREPLICA_ZK_JAR="/nonexistent/zookeeper.jar")
    env.pop("KREPLICA_REQUIRE_ZK", None)
    if require:
        env["KREPLICA_REQUIRE_ZK"] = "1"
    here = os.path.dirname(__file__)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
         os.path.join(here, "test_meta_store.py"), "-k", "test_create_get_set_versions and zookeeper"],
        env=env, capture_output=True, text=True, timeout=120, cwd=os.path.dirname(here))


def test_missing_zookeeper_skips_unless_required() -> None:
    skipped = _run_zk_test_without_zookeeper(require=False)
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout
    required = _run_zk_test_without_zookeeper(require=True)
    assert required.returncode != 0 and "KREPLICA_REQUIRE_ZK=1" in required.stdout, required.stdout


def test_kazoo_errors_are_translated() -> None:
    from kazoo import exceptions as kz
    from kazoo.handlers.threading import KazooTimeoutError

    from kreplica.meta.store import StoreError
    from kreplica.meta.zookeeper_store import _translate

    expected = {
        kz.BadVersionError: BadVersion, kz.NoNodeError: NoNode, kz.NodeExistsError: NodeExists,
        kz.NotEmptyError: NotEmpty, kz.SessionExpiredError: SessionExpired,
        kz.ConnectionClosedError: ConnectionLoss, kz.ConnectionLoss: ConnectionLoss,
        kz.NoChildrenForEphemeralsError: NoChildrenForEphemerals, KazooTimeoutError: ConnectionLoss,
        # the server's own timeout and kazoo's client-side failures: the call may or may not
        # have been applied, which is what ConnectionLoss says
        kz.OperationTimeoutError: ConnectionLoss, kz.ConnectionDropped: ConnectionLoss,
        kz.ZookeeperStoppedError: ConnectionLoss,
    }
    for kazoo_error, ours in expected.items():
        assert type(_translate(kazoo_error(), "/p")) is ours
    assert type(_translate(kz.BadArgumentsError(), "/p")) is StoreError
    assert _translate(ValueError("bad path"), "/p") is None


@pytest.mark.parametrize("cut_first", [True, False], ids=["cut-then-change", "change-then-cut"])
def test_memory_partitioned_session_gets_its_watch_events_after_healing(cut_first: bool) -> None:
    # change-then-cut: the notice is already queued (call_soon) when the session loses the
    # store in the same instant -- a pause or cut must hold it, not deliver it to a
    # stopped process.
    sched, store = _memory(3000)
    s, other = store.session("b1"), store.session("b2")
    other.create("/n", b"0")
    watch = Recorder()
    s.get("/n", watch)
    if cut_first:
        s.set_reachable(False)
    other.set("/n", b"1")
    s.set_reachable(False)
    sched.advance(1000)
    assert watch.events == []  # the notification cannot reach it
    s.set_reachable(True)
    sched.advance(0)
    assert watch.types() == ["CHANGED"] and not s.expired
    s.kill()
    other.set("/n", b"2")
    sched.advance(0)
    assert watch.types() == ["CHANGED"]  # one-shot, and a killed session hears nothing


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(st.sampled_from(["notice", "cut", "heal", "step", "tick"]), max_size=60))
# Two cuts, each with notices still on their way when it began: the held ones wait in
# number order whatever order they came back in (3 and 4 must not block behind 5).
@example(ops=["notice", "notice", "notice", "cut", "notice", "tick", "heal", "cut", "notice", "tick", "heal"])
def test_memory_session_notices_run_once_each_in_order_through_cuts(ops) -> None:
    """ZooKeeper's promise to one client: watch notifications arrive in the order the
    server sent them, and a client cut off learns of them after it reconnects. A notice
    still on its way (same instant) when the cut begins must not fall behind one sent
    after the cut, nor one held before a reconnect overtake it."""
    sched, store = _memory(1_000_000)             # no expiry in this test
    s = store.session("b1")
    ran: list[int] = []
    sent = 0
    for op in ops:
        if op == "notice":
            sent += 1
            s._deliver(ran.append, sent)
        elif op == "cut":
            s.set_reachable(False)
        elif op == "heal":
            s.set_reachable(True)
        elif op == "step":
            sched.run_next(sched.now_ms())          # one event due now, if any
        else:
            sched.advance(1)
    s.set_reachable(True)
    sched.advance(10)
    assert ran == list(range(1, sent + 1))


def test_a_recursive_delete_of_zookeepers_own_root_spares_its_reserved_node(zk_server) -> None:
    """With no chroot the store's `/` is ZooKeeper's root, which also holds ZooKeeper's
    own `/zookeeper` (quotas, config); the server refuses to delete that, so emptying
    the root must leave it.  A private server: the shared one holds other tests' chroots."""
    from kreplica.meta.zk_server import ZooKeeperServer
    from kreplica.meta.zookeeper_store import ZooKeeperStore
    from kreplica.runtime import RealScheduler

    server = ZooKeeperServer().start()
    try:
        store = ZooKeeperStore(server.hosts, "", RealScheduler(), session_timeout_ms=4000)
        s = store.session("a")
        s.create("/x/y", b"", makepath=True)
        # Nodes on both sides of /zookeeper in the server's listing (a hash order, not the
        # names'): skipping it must not end the listing's walk.
        for name in "abcdefghij":
            s.create(f"/{name}")
        s.delete("/", recursive=True)
        assert s.get_children("/") == ["zookeeper"]
        store.close()
    finally:
        server.stop()


# ---- the thirty-sixth review: ZooKeeperStore mutants the suites above did not see ----

def test_a_stat_counts_the_children_a_node_has_now(store_env: StoreEnv) -> None:
    # ZooKeeper's stat also has cversion, the count of child changes ever made; num_children
    # is the children there now (3 creations and a deletion: cversion 4, numChildren 2).
    a = store_env.store.session("a")
    a.create("/p")
    for name in ("x", "y", "z"):
        a.create(f"/p/{name}")
    a.delete("/p/y")
    assert a.get("/p")[1].num_children == 2
    assert a.exists("/p").num_children == 2


def test_a_set_answers_the_stat_a_read_gives(store_env: StoreEnv) -> None:
    # ZooKeeper's setData answers the node's whole stat: an ephemeral node's owner and a
    # parent's children count, as a read right after the write gives them.
    a = store_env.store.session("a")
    a.create("/s")
    a.create("/s/c1")
    a.create("/s/c2")
    a.create("/eph", ephemeral=True)
    for path in ("/s", "/eph"):
        assert a.set(path, b"new") == a.get(path)[1]
    assert a.set("/eph", b"again").ephemeral_owner == a.session_id != 0
    assert a.set("/s", b"again").num_children == 2
    assert a.multi([Op.set("/eph", b"in a transaction")])[0].ephemeral_owner == a.session_id


def test_makepath_fires_the_watches_of_the_parents_it_makes(store_env: StoreEnv) -> None:
    # makepath creates the missing parents one by one (kazoo's ensure_path): a watch on a
    # missing parent hears it created, and the parent above it hears of a new child.
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/top")
    made, children = Recorder(), Recorder()
    assert b.exists("/top/mid", made) is None
    assert b.get_children("/top", children) == []
    a.create("/top/mid/leaf", makepath=True)
    assert store_env.wait(lambda: made.types() == ["CREATED"] and children.types() == ["CHILD"])
    assert made.events[0].path == "/top/mid" and children.events[0].path == "/top"


def test_a_watch_registered_twice_on_a_node_fires_once(store_env: StoreEnv) -> None:
    # As ZooKeeper's own client: one watcher object on one path and kind is one watch,
    # however many reads left it.
    a, b = _sessions_and_w(store_env)
    seen = Recorder()
    b.get("/w", seen)
    b.get("/w", seen)
    b.exists("/w", seen)
    a.set("/w", b"1")
    assert store_env.wait(lambda: bool(seen.events))
    store_env.quiesce()
    assert seen.types() == ["CHANGED"]


@pytest.mark.parametrize("ending", ["close", "kill"])
def test_a_notice_still_queued_when_its_session_closes_is_not_delivered(store_env: StoreEnv, ending: str) -> None:
    # The watch fired while its session was open, but its owner closed the session (or
    # crashed: kill) before the scheduler ran the notice: its owner hears nothing more.
    import time

    a, b = _sessions_and_w(store_env)
    seen = Recorder()
    b.get("/w", seen)
    a.set("/w", b"1")
    if store_env.kind == "zookeeper":
        time.sleep(0.5)  # kazoo's thread hands the notice to the scheduler, which does not run
    getattr(b, ending)()
    store_env.quiesce()
    assert seen.events == []


def test_watches_run_on_the_schedulers_thread_only_when_it_runs(store_env: StoreEnv) -> None:
    import threading
    import time

    a, b = _sessions_and_w(store_env)
    threads: list[int] = []
    b.get("/w", lambda event: threads.append(threading.get_ident()))
    a.set("/w", b"1")
    if store_env.kind == "zookeeper":
        time.sleep(0.5)  # long enough for kazoo to have the event
    assert threads == []
    assert store_env.wait(lambda: bool(threads))
    assert threads == [threading.get_ident()]


def test_an_ephemeral_create_with_makepath_is_ephemeral_and_its_parents_are_not(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/p/q/e", b"", ephemeral=True, makepath=True)
    assert b.exists("/p/q/e").ephemeral_owner == a.session_id != 0
    assert b.exists("/p/q").ephemeral_owner == 0
    a.close()
    assert b.exists("/p/q/e") is None and b.exists("/p/q") is not None


def test_memory_an_expired_session_stays_expired_once_closed() -> None:
    sched, store = _memory(3000)
    s = store.session("b1")
    s.pause_heartbeats()
    assert sched.run_until(lambda: s.expired, 10_000)
    s.close()
    with pytest.raises(SessionExpired):
        s.get("/")


@pytest.mark.zookeeper
def test_zookeeper_an_expired_session_stays_expired_once_closed(zk_store_factory, zk_server) -> None:
    # Its owner closes it in its expiry callback (as a broker does before it opens a new
    # session); a call that races in afterwards must still say the session expired.
    from kreplica.runtime import RealScheduler

    sched = RealScheduler()
    expired: list[bool] = []
    s = zk_store_factory(sched).session("b1", on_expired=lambda: expired.append(True))
    expire_from_a_twin(s, zk_server.hosts + zk_store_factory.chroot)
    assert sched.run_until(lambda: bool(expired), 20_000)
    s.close()
    with pytest.raises(SessionExpired):
        s.get("/")


def test_a_transactions_set_result_is_the_stat_a_read_gives(store_env: StoreEnv) -> None:
    # The store's own Stat, equal to the one get() returns: not the client library's type.
    a = store_env.store.session("a")
    a.create("/m", b"v0")
    results = a.multi([Op.set("/m", b"v1", 0)])
    assert results == [a.get("/m")[1]]
    assert a.exists("/m") == results[0]


def test_a_recursive_delete_under_a_chroot_removes_a_node_named_as_the_servers_own(store_env: StoreEnv) -> None:
    # Only ZooKeeper's own root has a reserved /zookeeper; under a chroot it is a node
    # like any other (the ZooKeeper suite's stores all have a chroot).
    a = store_env.store.session("a")
    a.create("/zookeeper/config", b"mine", makepath=True)
    a.create("/other")
    a.delete("/", recursive=True)
    assert a.get_children("/") == []


class _FourLetterServer:
    """A plain socket that answers each four-letter word with ``answers[word]``: a list
    of pieces sent one after another (a short pause between them), then it hangs up."""

    def __init__(self, answers: dict[str, list[bytes]]) -> None:
        import socket
        import threading

        self.answers = answers
        self.words: list[str] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import time

        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with conn:
                word = conn.recv(4).decode()
                self.words.append(word)
                for i, piece in enumerate(self.answers.get(word, [])):
                    if i:
                        time.sleep(0.2)
                    conn.sendall(piece)

    def close(self) -> None:
        import contextlib
        import socket

        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(10)

    def __enter__(self) -> "_FourLetterServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def test_a_four_letter_word_answer_is_read_to_its_end() -> None:
    # The server may send its answer (`cons` lists every connection) in several pieces.
    from kreplica.meta.zk_server import four_letter_word

    with _FourLetterServer({"cons": [b"first part;", b"second part"]}) as fake:
        assert four_letter_word("127.0.0.1", fake.port, "cons") == "first part;second part"
        assert fake.words == ["cons"]


@pytest.mark.zookeeper
def test_a_server_start_that_is_retried_stops_the_try_that_failed(zk_server, monkeypatch) -> None:
    # start() tries again on a fresh port when the JVM does not become ready; the failed
    # try's JVM and directory must not be left behind.
    from kreplica.meta.zk_server import ZooKeeperServer

    failed: list = []
    real_wait = ZooKeeperServer._wait_ready

    def first_try_fails(self, timeout_s):
        if not failed:
            failed.append((self._proc, self.data_dir))
            return False
        return real_wait(self, timeout_s)

    monkeypatch.setattr(ZooKeeperServer, "_wait_ready", first_try_fails)
    server = ZooKeeperServer().start()
    try:
        proc, data_dir = failed[0]
        assert proc.poll() is not None and not data_dir.exists()
        assert server.data_dir != data_dir
    finally:
        server.stop()


# ---- the fifty-second review: store mutants the suites above did not see ----

def test_a_sequential_child_of_an_ephemeral_node_is_refused_too(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    a.create("/eph", ephemeral=True)
    with pytest.raises(NoChildrenForEphemerals):
        a.create("/eph/n-", sequential=True)
    with pytest.raises(NoChildrenForEphemerals) as info:
        a.multi([Op.create("/eph/m-", sequential=True)])
    assert info.value.op_index == 0
    assert a.get_children("/eph") == []


def test_one_sessions_watches_hear_a_change_in_the_servers_order(store_env: StoreEnv) -> None:
    # ZooKeeper's DataTree fires the node's own data watches before its parent's child
    # watch on a creation, and on a deletion the node's data watch, then its child watch,
    # then the parent's; one session hears them in that order.
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/p")
    seen = Recorder()
    assert b.exists("/p/c", seen) is None
    assert b.get_children("/p", seen) == []
    a.create("/p/c")
    assert store_env.wait(lambda: len(seen.events) == 2)
    assert [(e.type.value, e.path) for e in seen.events] == [("CREATED", "/p/c"), ("CHILD", "/p")]
    order: list[str] = []
    b.get("/p/c", lambda e: order.append("data " + e.type.value))
    b.get_children("/p/c", lambda e: order.append("children " + e.type.value))
    b.get_children("/p", lambda e: order.append("parent " + e.type.value))
    a.delete("/p/c")
    assert store_env.wait(lambda: len(order) == 3)
    assert order == ["data DELETED", "children DELETED", "parent CHILD"]


def test_an_ephemeral_create_that_was_rolled_back_owns_nothing_at_close(store_env: StoreEnv) -> None:
    # The node the rolled-back create would have made is later made, persistent, by
    # another session: the first session's close must leave it alone.
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    with pytest.raises(NoNode):
        a.multi([Op.create("/e", ephemeral=True), Op.check("/nope")])
    b.create("/e", b"b's")
    a.close()
    assert b.get("/e")[0] == b"b's" and b.exists("/e").ephemeral_owner == 0


def test_a_batched_read_gives_the_stat_a_single_read_gives(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    a.create("/p", b"1")
    a.create("/p/e", b"2", ephemeral=True)
    a.set("/p", b"3")
    got = a.get_many(["/p", "/p/e"])
    assert got == [a.get("/p"), a.get("/p/e")]
    assert got[1][1].ephemeral_owner == a.session_id != 0 and got[0][1].num_children == 1


def test_memory_a_session_that_dies_just_before_a_ping_lives_two_thirds_of_its_timeout() -> None:
    """The client pings every third of the timeout when idle (as ZooKeeper's, whose read
    timeout is two thirds of the session's and which pings at half of that): a session
    killed just before a ping was last heard a third of the timeout earlier."""
    sched, store = _memory(3000)
    s = store.session("b1")
    expired_at: list[int] = []
    watcher = store.session("w")
    s.create("/e", ephemeral=True)
    watcher.exists("/e", lambda e: expired_at.append(sched.now_ms()))
    sched.advance(2990)            # pings at 1000 and 2000
    s.kill()
    assert sched.run_until(lambda: bool(expired_at), 10_000)
    assert expired_at[0] - 2990 >= 2000 and expired_at[0] == 5000


def test_memory_a_killed_session_that_is_woken_still_expires() -> None:
    """A crashed process does not wake: resume_heartbeats on a killed session (a pause
    fault ending after a crash fault) changes nothing."""
    sched, store = _memory(3000)
    s = store.session("b1")
    s.create("/e", ephemeral=True)
    s.pause_heartbeats()
    s.kill()
    sched.advance(1000)
    s.resume_heartbeats()
    sched.advance(2500)
    assert s.expired
    assert store.session("b2").exists("/e") is None


def test_memory_a_session_timeout_must_be_positive() -> None:
    from kreplica.meta.memory_store import MemoryStore
    from kreplica.runtime import SimScheduler

    for bad in (0, -1):
        with pytest.raises(ValueError, match="session_timeout_ms must be positive"):
            MemoryStore(SimScheduler(), session_timeout_ms=bad)


def test_memory_closing_the_store_closes_its_sessions_at_once() -> None:
    # As ZooKeeperStore.close: each live session is closed, so its ephemerals go now,
    # not a session timeout later.
    sched, store = _memory(3000)
    a = store.session("a")
    a.create("/e", ephemeral=True)
    seen = Recorder()
    b = store.session("b")
    b.exists("/e", seen)
    store.close()
    assert a.state.value == "CLOSED" and b.state.value == "CLOSED"
    assert store.session("c").exists("/e") is None


@pytest.mark.parametrize("path", ["/mk/a/", "/mk//b", "/mk/a/b/", "mk/a"])
def test_memory_a_malformed_path_is_refused_before_any_parent_is_made(path: str) -> None:
    # The embedded store refuses a malformed path outright (kazoo would normalize some of
    # them: the fifty-second review's S3-13); refusing must not leave parents behind.
    sched, store = _memory(3000)
    s = store.session("a")
    with pytest.raises(ValueError, match="invalid path"):
        s.create(path, b"x", makepath=True)
    assert s.exists("/mk") is None and s.get_children("/") == []


def test_an_empty_transaction_and_an_empty_batched_read_answer_empty(store_env: StoreEnv) -> None:
    # A caller splitting work into batches may hand over an empty one; ZooKeeper commits an
    # empty multi, and there is nothing to name in an error.
    a = store_env.store.session("a")
    assert a.multi([]) == []
    assert a.get_many([]) == []


def test_the_error_of_a_transaction_names_the_op_that_failed(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    a.create("/here", b"")
    with pytest.raises(NoNode) as info:
        a.multi([Op.create("/made"), Op.set("/here", b"x"), Op.set("/absent", b"x")])
    assert info.value.op_index == 2 and "/absent" in str(info.value)
    # The failing op in the middle: named, not the op after it.
    with pytest.raises(NoNode) as middle:
        a.multi([Op.create("/made"), Op.set("/absent", b"x"), Op.set("/here", b"x")])
    assert middle.value.op_index == 1 and str(middle.value) == "NONODE: /absent"
    assert a.exists("/made") is None
    with pytest.raises(NoNode) as single:
        a.get("/absent")
    assert "/absent" in str(single.value)


def test_an_ephemeral_sequential_create_gets_its_number_and_goes_with_its_session(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/seq")
    first = a.create("/seq/member-", ephemeral=True, sequential=True)
    second = a.create("/seq/member-", ephemeral=True, sequential=True)
    assert (first, second) == ("/seq/member-0000000000", "/seq/member-0000000001")
    assert b.exists(first).ephemeral_owner == a.session_id != 0
    a.close()
    assert store_env.wait(lambda: b.get_children("/seq") == [])


@pytest.mark.zookeeper
def test_a_nested_chroot_is_made_with_its_parents(zk_server) -> None:
    from kreplica.meta.zookeeper_store import ZooKeeperStore
    from kreplica.runtime import RealScheduler

    top = f"/nested-{id(zk_server)}"
    store = ZooKeeperStore(zk_server.hosts, f"{top}/a/b", RealScheduler())
    try:
        s = store.session("x")
        s.create("/n", b"1")
        assert s.get_children("/") == ["n"]
    finally:
        store.close()
    root = ZooKeeperStore(zk_server.hosts, "", RealScheduler())
    try:
        assert root.session("r").get(f"{top}/a/b/n")[0] == b"1"
    finally:
        root.close()


@pytest.mark.zookeeper
def test_a_full_batch_of_partition_state_writes_fits_one_zookeeper_request(zk_store_factory) -> None:
    # max_batch_ops bounds a transaction so that it stays under ZooKeeper's 1 MB request
    # limit (jute.maxbuffer) with room to spare: a full batch of creates with twice a
    # typical leaderAndIsr payload each commits in one request.
    store = zk_store_factory()
    s = store.session("controller")
    s.create("/brokers/topics/t/partitions", makepath=True)
    state = (b'{"controller_epoch":12,"leader":3,"version":1,"leader_epoch":7,'
             b'"isr":[3,1,2,4,5]}' * 2).ljust(200, b" ")
    n = s.max_batch_ops
    before = store.round_trips
    results = s.multi([Op.create(f"/brokers/topics/t/partitions/{i}", state) for i in range(n)])
    assert store.round_trips - before == 1 and len(results) == n
    assert s.get_many([f"/brokers/topics/t/partitions/{n - 1}"])[0][0] == state


def test_makepath_makes_empty_parents_whatever_the_nodes_own_data(store_env: StoreEnv) -> None:
    # As kazoo's ensure_path: the parents a create makes hold nothing; only the node
    # asked for holds the data (a partition's state must not reappear in its parents).
    a = store_env.store.session("a")
    a.create("/p/q/state", b"payload", makepath=True)
    assert [a.get(p)[0] for p in ("/p", "/p/q", "/p/q/state")] == [b"", b"", b"payload"]


def test_a_transactions_sequential_create_answers_the_name_it_made(store_env: StoreEnv) -> None:
    a = store_env.store.session("a")
    results = a.multi([Op.create("/q"), Op.create("/q/n-", sequential=True)])
    assert results == ["/q", "/q/n-0000000000"]
    assert a.get_children("/q") == ["n-0000000000"]


def test_a_recursive_delete_of_a_missing_node_is_done_unless_a_version_is_named(store_env: StoreEnv) -> None:
    # kazoo's rule, which ZooKeeperStore follows: with any version the tree is already
    # gone (another client removed it first); a named version cannot match a missing node.
    a = store_env.store.session("a")
    a.delete("/gone", recursive=True)
    with pytest.raises(NoNode):
        a.delete("/gone", version=0, recursive=True)
    with pytest.raises(NoNode):
        a.delete("/gone")
    assert a.get_children("/") == []


def test_ensuring_a_path_another_client_makes_meanwhile_is_fine(store_env: StoreEnv) -> None:
    # Two brokers starting together both ensure /brokers/ids: whoever comes second gets
    # NodeExists from its create, which means done -- not an error, and no extra read.
    a, b = store_env.store.session("a"), store_env.store.session("b")
    meanwhile(a, "create", lambda: b.create("/brokers/ids", makepath=True))
    a.ensure_path("/brokers/ids")
    del a.create
    assert b.exists("/brokers/ids") is not None and b.exists("/brokers/ids").ephemeral_owner == 0
    before = store_env.store.round_trips
    a.ensure_path("/brokers/ids")  # already there: one round trip, the create that says so
    assert store_env.store.round_trips - before == 1


def test_memory_a_killed_session_that_is_closed_keeps_its_ephemerals_until_it_expires() -> None:
    # A crashed broker's process runs nothing: a close() reaching its dead session object
    # (a harness tearing the broker down) must not take its registration away early.
    sched, store = _memory(3000)
    s, called = killed_with_an_ephemeral_and_a_watch(store)
    s.close()
    other = store.session("b2")
    sched.advance(2900)
    assert other.exists("/e") is not None and not s.expired
    sched.advance(200)
    assert other.exists("/e") is None and s.expired and called == []


def test_memory_the_root_cannot_be_deleted() -> None:
    # ZooKeeper's own root cannot go; the embedded store's tree keeps its root even empty.
    sched, store = _memory(3000)
    s = store.session("a")
    with pytest.raises(ValueError, match="root"):
        s.delete("/")
    assert s.exists("/") is not None and s.create("/after") == "/after"


# ---- the seventy-seventh review: ZooKeeper store mutants the suites above did not see ----

def _multiread_answer(*results: tuple) -> bytes:
    """A multiRead answer as ZooKeeper sends it: ("data", bytes, version), ("error", code)
    or (op type, body bytes) sub-results, then the closing header."""
    from kazoo.protocol.serialization import int_struct, multiheader_struct, stat_struct

    out = bytearray()
    for result in results:
        if result[0] == "data":
            stat = stat_struct.pack(1, 2, 3, 4, result[2], 0, 0, 0, len(result[1]), 0, 2)
            out += multiheader_struct.pack(4, False, 0) + int_struct.pack(len(result[1])) + result[1] + stat
        elif result[0] == "error":
            out += multiheader_struct.pack(-1, False, result[1]) + int_struct.pack(result[1])
        else:
            out += multiheader_struct.pack(result[0], False, 0) + result[1]
    return bytes(out + multiheader_struct.pack(-1, True, -1))


def test_a_batched_read_answer_is_parsed_in_order_and_an_unknown_result_kind_refused() -> None:
    from kazoo import exceptions as kz

    from kreplica.meta.zookeeper_store import _MultiRead

    got = _MultiRead.deserialize(_multiread_answer(
        ("error", kz.NoNodeError.code), ("data", b"v1", 7), ("error", kz.NoNodeError.code), ("data", b"", 0)), 0)
    assert [type(r) for r in got] == [kz.NoNodeError, tuple, kz.NoNodeError, tuple]
    assert (got[1][0], got[1][1].version, got[3][0]) == (b"v1", 7, b"")
    # A setData result (type 5: a stat) has no place in a read-only batch: never dropped
    # quietly, or get_many would answer fewer entries than it was asked for.
    from kazoo.protocol.serialization import stat_struct

    with pytest.raises(ValueError, match="unexpected multiRead result type 5"):
        _MultiRead.deserialize(_multiread_answer(("data", b"x", 0), (5, bytes(stat_struct.size))), 0)


@pytest.mark.zookeeper
def test_a_batched_read_the_servers_acl_refuses_is_an_error_not_an_absent_node(zk_store_factory, kazoo_client) -> None:
    # Only a missing node reads as None; any other refusal (here NOAUTH: the node may be
    # read by nobody) is an error, as a single get() of it is.
    from kazoo.security import make_acl

    from kreplica.meta.store import StoreError

    kazoo_client.ensure_path(zk_store_factory.chroot)
    a = zk_store_factory().session("a")
    kazoo_client.create(zk_store_factory.chroot + "/secret", b"s",
                        acl=[make_acl("world", "anyone", write=True, delete=True, admin=True)])
    a.create("/open", b"o")
    with pytest.raises(StoreError, match="/secret") as single:
        a.get("/secret")
    with pytest.raises(StoreError, match="/secret") as batched:
        a.get_many(["/open", "/secret"])
    assert type(batched.value) is type(single.value) is StoreError
    # the server's answer is named, or the caller could not tell a refusal from any other
    assert "NoAuthError" in str(single.value) and "NoAuthError" in str(batched.value)


@pytest.mark.zookeeper
def test_fired_watches_are_not_kept_by_their_session(zk_store_factory) -> None:
    # A controller watches with a fresh callable on every re-read: once a watch has fired,
    # its session must not keep it, or a long-running broker holds every watch it ever set.
    from kreplica.runtime import RealScheduler

    sched = RealScheduler()
    a = zk_store_factory(sched).session("a")
    a.create("/n", b"0")
    fired: list[int] = []
    for i in range(20):
        a.get("/n", lambda ev, i=i: fired.append(i))
        a.get_children("/n", lambda ev, i=i: fired.append(100 + i))
    assert len(a._wrappers) == 40
    a.set("/n", b"1")
    a.create("/n/c")
    assert sched.run_until(lambda: len(fired) == 40, 15_000)
    assert a._wrappers == {}


@pytest.mark.zookeeper
def test_a_recursive_delete_takes_a_node_another_client_removed_meanwhile_as_done(zk_store_factory) -> None:
    store = zk_store_factory()
    a, other = store.session("a"), store.session("other")
    a.create("/t/c/leaf", makepath=True)  # one chain: the first node a deletes is the leaf
    # Between a's listing of /t/c and its delete of /t/c/leaf, another client deletes it.
    meanwhile(a.client, "delete_async", lambda: other.delete("/t/c/leaf"))
    a.delete("/t", recursive=True)
    assert other.exists("/t") is None


@pytest.mark.zookeeper
def test_the_test_server_takes_more_than_sixty_connections_from_one_address(zk_server) -> None:
    # A cluster of brokers, clients and admin sessions all connect from 127.0.0.1;
    # ZooKeeper's default would drop the 61st connection from one address.
    import contextlib
    import socket

    from kreplica.meta.zk_server import four_letter_word

    with contextlib.ExitStack() as held:
        for _ in range(70):
            held.enter_context(socket.create_connection((zk_server.host, zk_server.port), timeout=5))
        assert four_letter_word(zk_server.host, zk_server.port, "ruok", timeout_s=5) == "imok"


class _AliveProcess:
    """Stands in for the JVM's Popen: poll() answers ``code`` (None: still running)."""

    def __init__(self, code: int | None = None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def _server_on(port: int, proc: _AliveProcess):
    from kreplica.meta.zk_server import ZooKeeperServer

    server = ZooKeeperServer()
    server.port, server._proc = port, proc
    return server


def test_a_server_that_answers_imok_is_ready_only_once_it_serves() -> None:
    # ZooKeeper says imok before it serves requests; srvr tells the two apart.
    not_yet = [b"This ZooKeeper instance is not currently serving requests\n"]
    with _FourLetterServer({"ruok": [b"imok"], "srvr": not_yet}) as fake:
        server = _server_on(fake.port, _AliveProcess())
        assert server._wait_ready(1.0) is False
        assert "srvr" in fake.words
        fake.answers["srvr"] = [b"Zookeeper version: 3.8.0\nMode: standalone\n"]
        assert server._wait_ready(30.0) is True


def test_a_server_whose_process_has_exited_is_not_ready_whatever_answers_on_its_port() -> None:
    # A JVM that died at once (a port taken meanwhile) is a failed try, found at once:
    # whatever else answers on that port is not it.
    import time

    ready = {"ruok": [b"imok"], "srvr": [b"Zookeeper version: 3.8.0\n"]}
    with _FourLetterServer(ready) as fake:
        assert _server_on(fake.port, _AliveProcess())._wait_ready(30.0) is True
        started = time.monotonic()
        assert _server_on(fake.port, _AliveProcess(1))._wait_ready(30.0) is False
        assert time.monotonic() - started < 20


@pytest.mark.zookeeper
def test_an_interrupt_while_the_server_starts_stops_its_process_and_removes_its_directory(zk_server, monkeypatch) -> None:
    from kreplica.meta.zk_server import ZooKeeperServer

    started: list = []

    def interrupted(self, timeout_s):
        started.append((self._proc, self.data_dir))
        raise KeyboardInterrupt

    monkeypatch.setattr(ZooKeeperServer, "_wait_ready", interrupted)
    server = ZooKeeperServer()
    try:
        with pytest.raises(KeyboardInterrupt):
            server.start()
        proc, data_dir = started[0]
        assert proc.poll() is not None and not data_dir.exists()
    finally:
        if started and started[0][0].poll() is None:  # the mutant's leftover JVM
            started[0][0].kill()
            started[0][0].wait()


def test_a_store_that_cannot_reach_its_server_says_connection_loss() -> None:
    # Nothing listens on the port: the store's start (which makes its chroot) and a
    # session at ZooKeeper's root both fail with the store's own error, not kazoo's.
    import time

    from kreplica.meta.zk_server import free_port
    from kreplica.meta.zookeeper_store import ZooKeeperStore
    from kreplica.runtime import RealScheduler

    hosts = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ConnectionLoss, match=f"cannot reach ZooKeeper at {hosts}"):
        ZooKeeperStore(hosts, "/kreplica", RealScheduler(), connect_timeout_s=0.5)
    root = ZooKeeperStore(hosts, "", RealScheduler(), connect_timeout_s=0.5)
    with pytest.raises(ConnectionLoss, match=f"cannot reach ZooKeeper at {hosts}"):
        root.session("a")
    assert root._sessions == []
    # Both gave up after the connect timeout asked for, not kazoo's own 15 s.
    assert time.monotonic() - started < 5.0


# ---- the ninety-sixth review: ZooKeeper store mutants, fifth pass ----

def test_one_watch_on_a_nodes_data_and_children_re_registered_hears_each_change_once(store_env: StoreEnv) -> None:
    # An owner watching a node's data and its children with one callable, re-reading both
    # after each notice (the controller's way): a data watch and a child watch are two
    # watches, so the second change is told once, not once per registration kazoo kept.
    a, b = _sessions_and_w(store_env)
    seen = Recorder()
    b.get("/w", seen)
    b.get_children("/w", seen)
    a.set("/w", b"1")
    assert store_env.wait(lambda: seen.events)
    b.get("/w", seen)
    b.get_children("/w", seen)
    a.create("/w/c")
    assert store_env.wait(lambda: len(seen.events) >= 2)
    store_env.quiesce()
    assert seen.types() == ["CHANGED", "CHILD"]


def test_a_closed_sessions_empty_batched_read_is_refused_as_any_call(store_env: StoreEnv) -> None:
    # Nothing to read is no exception to the session's state: a closed session refuses.
    s = store_env.store.session("a")
    s.close()
    with pytest.raises(ConnectionLoss):
        s.get_many([])
    with pytest.raises(ConnectionLoss):
        s.multi([])


@pytest.mark.zookeeper
def test_closing_a_store_ends_every_session_it_holds(zk_store_factory) -> None:
    # Each session forgets itself as it closes; the store's close must still reach them all.
    store, observer = zk_store_factory(), zk_store_factory().session("observer")
    sessions = [store.session(f"broker-{i}") for i in range(4)]
    for i, s in enumerate(sessions):
        s.create(f"/eph-{i}", ephemeral=True)
    store.close()
    assert [s.closed for s in sessions] == [True] * 4
    assert observer.get_children("/") == []  # closed, not left to time out


@pytest.mark.zookeeper
def test_a_recursive_delete_at_zookeepers_root_removes_a_node_named_zookeeper_deeper_down(zk_server) -> None:
    # Only ZooKeeper's own /zookeeper is spared; /t/zookeeper is any other node.
    import os

    from kreplica.meta.zookeeper_store import ZooKeeperStore
    from kreplica.runtime import RealScheduler

    store = ZooKeeperStore(zk_server.hosts, "", RealScheduler())
    try:
        s = store.session("admin")
        top = f"/deep-zookeeper-{os.getpid()}"
        s.create(f"{top}/zookeeper/x", makepath=True)
        s.delete(top, recursive=True)
        assert s.exists(top) is None and "zookeeper" in s.get_children("/")
    finally:
        store.close()


def test_an_error_the_store_has_no_name_for_is_raised_as_it_is() -> None:
    # Only kazoo's errors are translated: anything else (a malformed answer's ValueError)
    # is a bug to see, not a ConnectionLoss a caller would retry for ever.
    from kazoo.handlers.threading import SequentialThreadingHandler

    from kreplica.meta.zookeeper_store import ZooKeeperSession

    result = SequentialThreadingHandler().async_result()
    result.set_exception(ValueError("unexpected multiRead result type 5"))
    session = object.__new__(ZooKeeperSession)
    session.store = type("S", (), {"op_timeout_s": 1.0})()
    with pytest.raises(ValueError, match="unexpected multiRead result type 5"):
        session._wait(result, "/p")


def test_a_four_letter_word_to_a_server_that_never_answers_gives_up_and_readiness_waits_on() -> None:
    # A port that accepts and says nothing (a JVM still starting, or hung): the word gives
    # up after its timeout, and the readiness loop takes that as "not yet" until its own
    # deadline instead of hanging or failing.
    import socket
    import threading
    import time

    from kreplica.meta.zk_server import four_letter_word

    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody reads
        port = silent.getsockname()[1]
        outcome: list[object] = []

        def ask() -> None:
            try:
                outcome.append(four_letter_word("127.0.0.1", port, "ruok", timeout_s=0.3))
            except OSError as exc:
                outcome.append(exc)

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        asker.join(5)
        assert len(outcome) == 1 and isinstance(outcome[0], TimeoutError)
        started = time.monotonic()
        assert _server_on(port, _AliveProcess())._wait_ready(1.5) is False
        assert 1.4 < time.monotonic() - started < 5


def test_a_server_without_its_jar_is_unavailable_before_anything_runs(tmp_path) -> None:
    from kreplica.meta.zk_server import ZooKeeperServer, ZooKeeperUnavailable

    server = ZooKeeperServer(jar=str(tmp_path / "zookeeper.jar"))
    with pytest.raises(ZooKeeperUnavailable, match="apt-get install zookeeper"):
        server.start()
    assert server._proc is None and server.data_dir is None


def test_a_jar_path_naming_a_directory_is_no_zookeeper(tmp_path) -> None:
    # KREPLICA_ZK_JAR pointed at the install's directory, not its jar: ZooKeeper is not
    # there to run (the ZooKeeper tests skip), not three JVMs failing on a class path.
    from kreplica.meta.zk_server import ZooKeeperServer, ZooKeeperUnavailable, zookeeper_available

    (tmp_path / "zookeeper.jar").mkdir()
    for directory in [tmp_path, tmp_path / "zookeeper.jar"]:
        assert zookeeper_available(str(directory)) is False
        server = ZooKeeperServer(jar=str(directory))
        with pytest.raises(ZooKeeperUnavailable, match="apt-get install zookeeper"):
            server.start()
        assert server._proc is None and server.data_dir is None


@pytest.mark.zookeeper
def test_a_server_that_cannot_start_says_why_from_the_end_of_its_log(zk_server, monkeypatch) -> None:
    # Every try finds its port taken: the error quotes the JVM's last log lines, where
    # ZooKeeper (through slf4j-simple) says why it exited.
    import socket

    import kreplica.meta.zk_server as zk

    with socket.create_server(("127.0.0.1", 0)) as taken:
        monkeypatch.setattr(zk, "free_port", lambda host="127.0.0.1": taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="ZooKeeper did not start") as failed:
            zk.ZooKeeperServer().start()
    assert "BindException: Address already in use" in str(failed.value)


@pytest.mark.zookeeper
def test_a_server_used_as_a_context_manager_is_stopped_and_removed_at_its_end(zk_server) -> None:
    from kreplica.meta.zk_server import ZooKeeperServer, four_letter_word

    with ZooKeeperServer() as server:
        proc, data_dir = server._proc, server.data_dir
        assert four_letter_word(server.host, server.port, "ruok", timeout_s=5) == "imok"
    try:
        assert proc.poll() is not None and not data_dir.exists()
    finally:
        if proc.poll() is None:  # the mutant's leftover JVM
            proc.kill()
            proc.wait()


@pytest.mark.zookeeper
def test_a_server_whose_port_is_taken_before_its_jvm_binds_it_starts_on_another(zk_server, monkeypatch) -> None:
    # The port is free when picked, and another process may take it before the JVM binds
    # it: the next try picks a fresh one.
    import socket

    import kreplica.meta.zk_server as zk

    picked: list[int] = []
    real_free_port = zk.free_port
    with socket.create_server(("127.0.0.1", 0)) as taken:
        def first_one_taken(host: str = "127.0.0.1") -> int:
            picked.append(taken.getsockname()[1] if not picked else real_free_port(host))
            return picked[-1]

        monkeypatch.setattr(zk, "free_port", first_one_taken)
        server = zk.ZooKeeperServer().start()
        try:
            assert server.port == picked[-1] != taken.getsockname()[1] and len(picked) == 2
            assert zk.four_letter_word(server.host, server.port, "ruok", timeout_s=5) == "imok"
        finally:
            server.stop()


# ---- the hundred-and-tenth review: store mutants, sixth pass ----

def test_a_conditional_delete_of_a_node_with_children_checks_the_version_first(store_env: StoreEnv) -> None:
    # ZooKeeper's PrepRequestProcessor checks the version before the children: a stale
    # conditional delete is BadVersion whether or not the node is empty.
    s = store_env.store.session("a")
    s.create("/d/c", makepath=True)
    with pytest.raises(BadVersion):
        s.delete("/d", version=4)
    with pytest.raises(BadVersion) as info:
        s.multi([Op.delete("/d", 4)])
    assert info.value.op_index == 0
    with pytest.raises(NotEmpty):
        s.delete("/d", version=0)


def test_a_sequential_create_beside_a_node_named_as_its_prefix_gets_its_number(store_env: StoreEnv) -> None:
    # Only the name with its number appended must be free; the bare prefix may be taken.
    s = store_env.store.session("a")
    s.create("/q")
    s.create("/q/n-")
    assert s.create("/q/n-", sequential=True) == "/q/n-0000000001"
    assert s.multi([Op.create("/q/n-", sequential=True)]) == ["/q/n-0000000002"]


def test_memory_a_session_closed_while_cut_off_stays_unheard_when_the_cut_heals() -> None:
    # Its close never reached the store and its process is gone: healing the cut brings
    # no pings back, so it expires on time and its ephemerals go with it.
    sched, store = _memory(3000)
    s = store.session("b1")
    s.create("/e", ephemeral=True)
    seen = Recorder()
    s.exists("/later", seen)
    s.set_reachable(False)
    s.close()
    sched.advance(1000)
    s.set_reachable(True)
    with pytest.raises(ConnectionLoss):  # closed by its owner: refused after the heal as before it
        s.exists("/e")
    other = store.session("b2")
    assert other.exists("/e") is not None
    other.create("/later")
    sched.advance(2500)
    assert other.exists("/e") is None
    assert seen.events == []  # neither the creation nor the expiry reaches a closed client


# ---- the hundred-and-fifteenth review: ZooKeeper store mutants, sixth pass ----

@pytest.mark.zookeeper
def test_the_test_server_grants_no_session_shorter_than_two_ticks(zk_server, zk_store_factory) -> None:
    # ZooKeeper's own floor (minSessionTimeout defaults to 2 ticks): a session asking for
    # less gets two ticks, 400 ms on the test server's 200 ms tick, not one tick.
    from meta_env import negotiated_timeout_ms

    session = zk_store_factory(session_timeout_ms=100).session("too-short")
    assert negotiated_timeout_ms(zk_server, session) == 2 * zk_server.tick_time_ms == 400
    session.close()


# ---- the hundred-and-twenty-ninth review: metadata store mutants, seventh pass ----

def test_a_sequential_create_at_the_root_is_numbered_among_its_children(store_env: StoreEnv) -> None:
    # Only a plain create of "/" is NodeExists: a sequential one names a new child of the
    # root, numbered by the root's child creations like any parent's.
    s = store_env.store.session("a")
    s.create("/a")
    assert s.create("/", sequential=True) == "/0000000001"
    assert "0000000001" in s.get_children("/")
    with pytest.raises(NodeExists):
        s.create("/")


def test_a_sequential_create_at_the_root_in_a_transaction_lands_where_a_plain_one_does(
        store_env: StoreEnv) -> None:
    # Under a chroot the transaction's create must keep the root's trailing slash, as a
    # plain sequential create does: the node is the chroot's child, not its sibling.
    s = store_env.store.session("a")
    s.create("/a")
    assert s.multi([Op.create("/", b"t", sequential=True)]) == ["/0000000001"]
    assert s.get("/0000000001")[0] == b"t"
    assert sorted(s.get_children("/")) == ["0000000001", "a"]


def test_one_watch_on_two_nodes_is_told_which_node_changed(store_env: StoreEnv) -> None:
    # As ZooKeeper's own client: a watcher is one watch per path (and kind), and each
    # event names the path that fired it, not the first one the watcher was left on.
    a, b = _sessions_and_w(store_env)
    a.create("/v", b"0")
    seen = Recorder()
    b.get("/w", seen)
    b.get("/v", seen)
    a.set("/v", b"1")
    assert store_env.wait(lambda: len(seen.events) == 1)
    a.set("/w", b"1")
    assert store_env.wait(lambda: len(seen.events) == 2)
    store_env.quiesce()
    assert [(e.type.value, e.path) for e in seen.events] == [("CHANGED", "/v"), ("CHANGED", "/w")]


@pytest.mark.zookeeper
def test_a_server_runs_its_jvm_under_the_heap_asked_for_and_leaves_its_log_to_it(zk_server) -> None:
    # The JVM's heap is bounded as asked (without -Xmx a JVM takes a quarter of the
    # machine's memory), and the log file the JVM writes is not also held open by us
    # until the garbage collector finds it.
    import gc
    import os
    import warnings

    from kreplica.meta.zk_server import ZooKeeperServer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with ZooKeeperServer(heap_mb=128) as server:
            with open(f"/proc/{server._proc.pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            log_path = str(server.log_path)
            ours = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    ours.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    pass
        gc.collect()
    assert b"-Xmx128m" in argv
    assert log_path not in ours
    assert not [w for w in caught if issubclass(w.category, ResourceWarning) and "zookeeper.log" in str(w.message)]


@pytest.mark.zookeeper
def test_a_server_whose_jvm_died_on_its_own_still_removes_its_directory_at_stop(zk_server) -> None:
    # A JVM killed from outside (the OOM killer, an operator) leaves nothing to signal;
    # stop() must still take the server's data directory away.
    import signal

    from kreplica.meta.zk_server import ZooKeeperServer

    server = ZooKeeperServer().start()
    data_dir = server.data_dir
    server._proc.send_signal(signal.SIGKILL)
    server._proc.wait()
    server.stop()
    assert server.data_dir is None and not data_dir.exists()


def test_the_interfaces_batched_read_answers_none_in_place_of_a_missing_node() -> None:
    # Session.get_many's one-get-per-path fallback (for a store without a batched read)
    # keeps the answers in the order of the paths: a missing node is None, not left out.
    sched, store = _memory(3000)
    s = store.session("a")
    s.create("/a", b"1")
    s.create("/b", b"2")
    got = Session.get_many(s, ["/a", "/nope", "/b"])
    assert got == s.get_many(["/a", "/nope", "/b"])
    assert [g and g[0] for g in got] == [b"1", None, b"2"]


# ---- the hundred-and-fifty-first review: ZooKeeper store mutants, eighth pass ----

def test_a_transactions_sequential_create_with_a_trailing_slash_names_a_child(store_env: StoreEnv) -> None:
    # ZooKeeper appends the number to the path as given (it validates a sequential path
    # with a digit after it): "/p/" names a child of /p, in a transaction as in a plain
    # create, ephemeral or not; "/" a child of the root. The memory store does the same.
    s = store_env.store.session("a")
    s.create("/p")
    assert s.create("/p/", b"c", sequential=True) == "/p/0000000000"
    assert s.multi([Op.create("/p/", b"t", sequential=True),
                    Op.create("/p/", b"e", ephemeral=True, sequential=True),
                    Op.create("/", b"r", ephemeral=True, sequential=True)]) == [
        "/p/0000000001", "/p/0000000002", "/0000000001"]
    assert s.get_children("/p") == ["0000000000", "0000000001", "0000000002"]
    assert s.get_children("/") == ["0000000001", "p"]
    assert [s.get(f"/p/000000000{i}")[1].ephemeral_owner != 0 for i in range(3)] == [False, False, True]
    assert s.get("/0000000001")[1].ephemeral_owner == s.session_id


@pytest.mark.zookeeper
def test_a_zookeeper_store_at_zookeepers_root_names_a_transactions_sequential_child_as_a_plain_create(
        zk_server) -> None:
    # Without a chroot kazoo's transaction create still drops a trailing slash ("/p/" would
    # make /p's sibling /p0000000000); the store keeps it, as kazoo's plain create does.
    import os

    from kreplica.meta.zookeeper_store import ZooKeeperStore
    from kreplica.runtime import RealScheduler

    parent = f"/seq-at-root-{os.getpid()}"
    store = ZooKeeperStore(zk_server.hosts, "", RealScheduler())
    try:
        s = store.session("a")
        s.create(parent)
        assert s.multi([Op.create(parent + "/", b"t", sequential=True)]) == [parent + "/0000000000"]
        assert s.get_children(parent) == ["0000000000"]
        assert parent.lstrip("/") + "0000000000" not in s.get_children("/")
        s.delete(parent, recursive=True)
    finally:
        store.close()


def test_a_server_whose_jvm_ignores_sigterm_is_killed_after_its_grace() -> None:
    # A JVM that lingers after SIGTERM (a hung shutdown hook) gets SIGKILL after 10 s and
    # is reaped; stop() must not wait for it for ever. A stand-in process: no JVM needed.
    import signal
    import subprocess

    from kreplica.meta.zk_server import ZooKeeperServer

    class Lingering:
        def __init__(self) -> None:
            self.calls: list[object] = []
            self.killed = False

        def poll(self) -> int | None:
            return -9 if self.killed else None

        def send_signal(self, sig: int) -> None:
            self.calls.append(("signal", sig))

        def kill(self) -> None:
            self.calls.append("kill")
            self.killed = True

        def wait(self, timeout: float | None = None) -> int:
            self.calls.append(("wait", timeout))
            if self.killed:
                return -9
            if timeout is None:
                raise AssertionError("waited without a bound for a JVM never killed")
            raise subprocess.TimeoutExpired("java", timeout)

    server = ZooKeeperServer()
    server._proc = proc = Lingering()  # type: ignore[assignment]
    server.stop()
    assert proc.calls == [("signal", signal.SIGTERM), ("wait", 10), "kill", ("wait", None)]
    assert server._proc is None


@pytest.mark.zookeeper
def test_a_zookeeper_jvm_reads_nothing_from_the_stdin_of_whoever_started_it(zk_server) -> None:
    # The JVM's stdin is /dev/null, not the terminal or pipe the starting command reads
    # from: a JVM holding a pipe's read end keeps it open after the command is gone.
    import os

    from kreplica.meta.zk_server import ZooKeeperServer

    r, w = os.pipe()
    saved = os.dup(0)
    try:
        os.dup2(r, 0)
        server = ZooKeeperServer().start()
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(r)
    try:
        assert os.readlink(f"/proc/{server._proc.pid}/fd/0") == "/dev/null"
    finally:
        server.stop()
        os.close(w)


@pytest.mark.zookeeper
def test_a_zookeeper_session_lost_right_after_connecting_leaves_no_open_sockets(
        zk_store_factory, monkeypatch) -> None:
    # kazoo cleans up after its own connect timeout, not after a connection lost during
    # its chroot check that follows: the session's start must close the client it stops,
    # or its wake-up socket pair waits for the collector (a broker retrying its store
    # would run out of descriptors).
    import gc
    import os
    import warnings

    from kazoo import exceptions as kz
    from kazoo.client import KazooClient

    store = zk_store_factory()
    store.session("warm-up").close()

    def lost(self, path, watch=None):
        raise kz.ConnectionLoss()

    monkeypatch.setattr(KazooClient, "exists", lost)
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for i in range(3):
            with pytest.raises(ConnectionLoss, match="cannot reach ZooKeeper"):
                store.session(f"s{i}")
        assert len(os.listdir("/proc/self/fd")) <= before + 1
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert store._sessions == []


# ---- the hundred-and-sixty-seventh review: metadata store mutants, ninth pass ----

def test_an_exists_watch_on_a_sequential_nodes_name_hears_its_creation(store_env: StoreEnv) -> None:
    # ZooKeeper fires NodeCreated for the node it made, the name with its number: a watch
    # on that name hears it, a watch on the bare prefix does not.
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/s")
    numbered, prefix = Recorder(), Recorder()
    assert b.exists("/s/n0000000000", numbered) is None
    assert b.exists("/s/n", prefix) is None
    assert a.create("/s/n", b"x", sequential=True) == "/s/n0000000000"
    assert store_env.wait(lambda: numbered.types() == ["CREATED"])
    assert numbered.events[0].path == "/s/n0000000000"
    store_env.quiesce()
    assert prefix.events == []


def test_a_create_that_fails_takes_no_sequence_number(store_env: StoreEnv) -> None:
    # ZooKeeper 3.4's PrepRequestProcessor refuses an existing node before it bumps the
    # parent's cversion: a failed create (plain or sequential) hands out no number.
    s = store_env.store.session("a")
    s.create("/q")
    s.create("/q/a")
    with pytest.raises(NodeExists):
        s.create("/q/a")
    s.create("/q/x0000000002")
    with pytest.raises(NodeExists):
        s.create("/q/x", sequential=True)  # cversion 2: the name is taken
    assert s.create("/q/y", sequential=True) == "/q/y0000000002"
    assert s.create("/q/x", sequential=True) == "/q/x0000000003"


def test_memory_the_interfaces_batched_read_on_a_cut_off_session_is_a_connection_loss() -> None:
    # The fallback answers None only for a missing node; any other failure of a read is
    # the caller's to see, as the stores' own batched reads raise it.
    sched, store = _memory(3000)
    s = store.session("a")
    s.create("/a", b"1")
    s.set_reachable(False)
    with pytest.raises(ConnectionLoss):
        Session.get_many(s, ["/a", "/nope"])
    with pytest.raises(ConnectionLoss):
        s.get_many(["/a", "/nope"])


def test_memory_notices_held_across_a_cut_run_on_the_scheduler_not_inside_the_heal() -> None:
    # As every watch, a notice held while the session was cut off runs later on the
    # scheduler (ZooKeeper's event thread), never inside the call that reconnects it.
    sched, store = _memory(3000)
    s = store.session("a")
    other = store.session("b")
    s.create("/h", b"0")
    seen = Recorder()
    s.get("/h", seen)
    s.set_reachable(False)
    other.set("/h", b"1")
    sched.advance(0)
    assert seen.events == []
    s.set_reachable(True)
    assert seen.events == []
    sched.advance(0)
    assert seen.types() == ["CHANGED"]


def test_memory_a_session_woken_between_pings_expires_a_whole_timeout_after_waking() -> None:
    # Woken at 1500 (a ping heard then), paused again before the ping at 2000: last heard
    # at 1500, the session expires at 4500 -- its deadline, not the next ping's instant.
    sched, store = _memory(3000)
    expired: list[int] = []
    s = store.session("b1", on_expired=lambda: expired.append(sched.now_ms()))
    sched.advance(100)
    s.pause_heartbeats()
    sched.advance(1400)
    s.resume_heartbeats()
    sched.advance(100)
    s.pause_heartbeats()
    assert sched.run_until(lambda: bool(expired), 10_000)
    assert expired == [4500]


def test_memory_a_watched_read_that_cannot_reach_the_store_leaves_no_watch() -> None:
    # A request that never reached the server registers no watch (kazoo keeps a watcher
    # only for an answered request): after the heal, changes tell nothing to those reads.
    sched, store = _memory(3000)
    s = store.session("a")
    other = store.session("b")
    other.create("/r", b"0")
    seen = Recorder()
    s.set_reachable(False)
    for read in (s.exists, s.get, s.get_children):
        with pytest.raises(ConnectionLoss):
            read("/r", seen)
    with pytest.raises(ConnectionLoss):
        s.exists("/later", seen)
    s.set_reachable(True)
    other.set("/r", b"1")
    other.create("/r/c")
    other.create("/later")
    sched.advance(0)
    assert seen.events == []


# ---- the hundred-and-sixty-seventh review's notes: the memory store against ZooKeeper ----

def test_a_sequential_create_with_makepath_and_a_trailing_slash_makes_the_parent_first(store_env: StoreEnv) -> None:
    # "/q/r/" sequential names a child of /q/r; with makepath the missing /q and /q/r are
    # made first, as ZooKeeper (through kazoo) makes them. The memory store refused the
    # path, checking it for its parents without the digit the create adds.
    s = store_env.store.session("a")
    assert s.create("/q/r/", b"c", sequential=True, makepath=True) == "/q/r/0000000000"
    assert s.get_children("/q") == ["r"] and s.get_children("/q/r") == ["0000000000"]
    assert s.get("/q/r/0000000000")[0] == b"c"


def _made(create) -> str:
    """What a create answered: the path made, or the refusal's message (so a path refused
    wrongly fails the assertion that names it, not the call)."""
    try:
        return create()
    except InvalidPath as refused:
        return f"refused: {refused}"


@pytest.mark.parametrize("path", ["/d/./e", "/d/../e", "/d/.", "/.."])
def test_a_path_naming_a_node_dot_or_dot_dot_is_refused_and_makes_nothing(store_env: StoreEnv, path: str) -> None:
    # No node is named . or ..: kazoo refuses such a path ("relative paths not allowed")
    # before anything reaches ZooKeeper, parents included. The memory store made them.
    s = store_env.store.session("a")
    # Refused by name (InvalidPath, which KafkaZkClient's reads take for an absent node).
    for call in (lambda: s.create(path, b"x", makepath=True), lambda: s.multi([Op.create(path, b"x")])):
        with pytest.raises(InvalidPath) as refused:
            call()
        assert str(refused.value) == f"invalid path {path!r}: relative paths not allowed"
    assert s.exists("/d") is None and s.get_children("/") == []
    assert s.create("/d/.e..", b"y", makepath=True) == "/d/.e.."  # dots inside a name are fine
    # Only "." and ".." are relative: a name of three dots is a name (ZooKeeper and kazoo take it).
    assert _made(lambda: s.create("/d/...", b"z")) == "/d/..." and s.get("/d/...")[0] == b"z"


# Each refused range's first and last character (and some inside); the name avoids the
# word `-k "not zookeeper"` deselects, so the memory store's run stays in that one.
@pytest.mark.parametrize("path", ["/a\x01b", "/a\x00", "/a\x1f", "/a\x7f", "/a\x85", "/a\x9f", "/a\ue000",
                                  "/a\uf8ff", "/a\ufff0", "/a\ufffe", "/a\U0001f600", "/a\U0010ffff",
                                  "/a\ud800"])
def test_a_path_with_a_character_the_server_refuses_is_refused_by_name(store_env: StoreEnv, path: str) -> None:
    # ZooKeeper's server refuses control characters, U+D800-U+F8FF and U+FFF0 up, counted in
    # UTF-16 (so anything past U+FFFF too): the memory store made such nodes, and through
    # kazoo it was an UNKNOWN_SERVER_ERROR, a lone surrogate even a lost connection.
    s = store_env.store.session("a")
    # The error names the character and where it is (index 2 in each of these paths).
    told = f"invalid path {path!r}: invalid character {path[2]!r} at 2"
    with pytest.raises(ValueError) as made:
        s.create(path, b"x")
    assert str(made.value) == told
    with pytest.raises(ValueError) as sent:
        s.multi([Op.create(path, b"x")])
    assert str(sent.value) == told
    assert s.get_children("/") == []
    # What ZooKeeper takes: accents, a no-break space, CJK compatibility, a plain space, and
    # the characters just outside each refused range.
    for ok in ("/\u00e9", "/\u00a0", "/\uf900", "/a b", "/~", "/\ud7ff", "/\uffef"):
        assert s.create(ok, b"y") == ok and s.get(ok)[0] == b"y"


def test_every_call_naming_a_path_the_server_refuses_is_refused_by_name(store_env: StoreEnv) -> None:
    # Not creates alone: the ZooKeeper store refuses such a path for every call before
    # anything is sent (a lone surrogate dropped kazoo's connection whatever the call).
    # The embedded store answered NoNode, None or "done" instead, and left an exists
    # watch on a node that no create could ever make.
    s = store_env.store.session("a")
    bad = "/a\x01b"
    told = "invalid path '/a\\x01b': invalid character '\\x01' at 2"
    for call in (lambda: s.get(bad), lambda: s.get(bad, Recorder()), lambda: s.exists(bad),
                 lambda: s.exists(bad, Recorder()), lambda: s.get_children(bad), lambda: s.get_many(["/", bad]),
                 lambda: s.set(bad, b"x"), lambda: s.set(bad, b"x", 0), lambda: s.delete(bad),
                 lambda: s.delete(bad, recursive=True), lambda: s.delete(bad, 0, recursive=True),
                 lambda: s.multi([Op.check(bad)]), lambda: s.multi([Op.set(bad, b"x")]),
                 lambda: s.multi([Op.delete(bad)])):
        with pytest.raises(ValueError) as refused:
            call()
        assert str(refused.value) == told
    assert s.get_children("/") == []


@pytest.mark.zookeeper
def test_a_node_another_zookeeper_client_made_with_null_data_reads_as_empty_bytes(
        zk_store_factory, kazoo_client) -> None:
    # A client other than ours (kazoo given None, a Java client given null) can make a
    # node whose data is null on the wire, not empty: the store answers bytes for it all
    # the same, from a plain read and from a batched one.
    from kreplica.meta.store import Stat

    store = zk_store_factory()
    kazoo_client.create(f"{zk_store_factory.chroot}/blank", None)
    assert kazoo_client.get(f"{zk_store_factory.chroot}/blank")[0] is None  # null, as sent
    s = store.session("reader")
    data, stat = s.get("/blank")
    assert data == b"" and stat == Stat(0, 0, 0)
    assert s.get_many(["/blank"]) == [(b"", Stat(0, 0, 0))]


@pytest.mark.zookeeper
def test_a_zookeeper_server_grants_sessions_of_up_to_a_minute_by_default(zk_server, zk_store_factory) -> None:
    # The server widens ZooKeeper's 20-tick ceiling (4 s on a 200 ms tick) to a minute, not
    # only to Kafka's 18 s default: a 45 s session is granted as asked, a 90 s one is cut
    # to the minute.
    from meta_env import negotiated_timeout_ms

    long_session = zk_store_factory(session_timeout_ms=45_000).session("45s")
    assert negotiated_timeout_ms(zk_server, long_session) == 45_000
    too_long = zk_store_factory(session_timeout_ms=90_000).session("90s")
    assert negotiated_timeout_ms(zk_server, too_long) == 60_000


def test_a_server_waits_half_a_minute_for_a_slow_jvm_before_trying_again(monkeypatch) -> None:
    # A loaded machine (two cores, a sweep's workers) can take well over 5 s to bring a
    # JVM up: start() waits up to 30 s for one to serve before it starts another, and
    # gives up after three. A stand-in process and clock: no JVM needed.
    from kreplica.meta import zk_server as zs

    class Clock:
        now = 0.0

        def monotonic(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            self.now += seconds

    class Starting:
        def poll(self) -> int | None:
            return None

        def send_signal(self, sig: int) -> None:
            pass

        def wait(self, timeout: float | None = None) -> int:
            return 0

        def kill(self) -> None:
            pass

    clock = Clock()
    started: list[float] = []
    ready_at = [25.02]

    def popen(*args: object, **kwargs: object) -> Starting:
        started.append(clock.now)
        return Starting()

    def answer(host: str, port: int, word: str = "ruok", timeout_s: float = 1.0) -> str:
        if host != "127.0.0.2" or clock.now < ready_at[0]:  # it listens on the address it was given
            raise ConnectionRefusedError(111, "Connection refused")
        return "imok" if word == "ruok" else "Zookeeper version: 3.8.0"

    monkeypatch.setattr(zs, "time", clock)
    monkeypatch.setattr(zs.subprocess, "Popen", popen)
    monkeypatch.setattr(zs, "four_letter_word", answer)
    monkeypatch.setattr(zs, "zookeeper_available", lambda jar: True)
    server = zs.ZooKeeperServer(host="127.0.0.2")
    try:
        assert server.start() is server and started == [0.0]  # serving after 25 s: one JVM
        # It asks again every 50 ms: a JVM serving at 25.02 s is in use by 25.1 s, not a
        # second later (each start of a test server, or of `zookeeper+local://`, waited).
        assert 25.02 <= clock.now < 25.1
    finally:
        server.stop()
    started.clear()
    clock.now = 0.0
    ready_at[0] = float("inf")
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
    assert started == [0.0, pytest.approx(30.0, abs=0.1), pytest.approx(60.0, abs=0.1)]
    assert server.data_dir is None and server._proc is None
    # A caller's own bound is each try's, in place of the half minute.
    started.clear()
    clock.now = 0.0
    with pytest.raises(RuntimeError, match="did not start"):
        server.start(timeout_s=5.0)
    assert started == [0.0, pytest.approx(5.0, abs=0.1), pytest.approx(10.0, abs=0.1)]


# ---- the hundred-and-eighty-sixth review: metadata store mutants, tenth pass ----

def test_no_session_may_make_a_child_under_another_sessions_ephemeral_node(store_env: StoreEnv) -> None:
    # ZooKeeper refuses a child of any ephemeral node, whichever session asks: the check is
    # that the parent has an owner, not who the owner is.
    a = store_env.store.session("a")
    b = store_env.store.session("b")
    a.create("/eph", ephemeral=True)
    with pytest.raises(NoChildrenForEphemerals):
        b.create("/eph/child")
    with pytest.raises(NoChildrenForEphemerals):
        b.create("/eph/n-", sequential=True)
    with pytest.raises(NoChildrenForEphemerals) as info:
        b.multi([Op.create("/b-own"), Op.create("/eph/m")])
    assert info.value.op_index == 1
    assert b.get_children("/eph") == [] and b.exists("/b-own") is None


def test_memory_every_watch_a_session_left_on_one_node_hears_its_expiry_and_nothing_after() -> None:
    # Two data watches and two child watches of one session on one node: at the expiry each
    # is told SESSION_EXPIRED once and then forgotten, so later changes tell none of them.
    sched, store = _memory(3000)
    s = store.session("b1")
    other = store.session("b2")
    other.create("/w", b"0")
    watches = [Recorder() for _ in range(4)]
    s.get("/w", watches[0])
    s.exists("/w", watches[1])
    s.get_children("/w", watches[2])
    s.get_children("/w", watches[3])
    s.pause_heartbeats()
    assert sched.run_until(lambda: s.expired, 10_000)
    other.set("/w", b"1")
    other.create("/w/c")
    sched.advance(0)
    assert [w.types() for w in watches] == [["SESSION_EXPIRED"]] * 4


def test_an_op_named_without_a_version_matches_any_version(store_env: StoreEnv) -> None:
    # -1, the default, is "any version" for an op made with Op.check and for set, check and
    # delete ops built straight from the dataclass, as it is for the session's own calls.
    s = store_env.store.session("a")
    s.create("/v", b"0")
    s.set("/v", b"1")
    s.set("/v", b"2")
    s.create("/d")
    s.set("/d", b"1")
    assert s.multi([Op.check("/v"), Op("check", "/v")]) == [True, True]
    assert s.multi([Op("set", "/v", b"3")])[0].version == 3
    assert s.multi([Op("delete", "/d")]) == [True]
    assert s.exists("/d") is None and s.get("/v")[0] == b"3"


def test_memory_a_plain_create_of_a_path_ending_in_a_slash_is_refused() -> None:
    # Only a sequential create may end in "/" (it names a numbered child); a plain one,
    # alone or in a transaction, is a malformed path and makes no node named "".
    sched, store = _memory(3000)
    s = store.session("a")
    s.create("/p")
    with pytest.raises(ValueError, match="invalid path"):
        s.create("/p/", b"x")
    with pytest.raises(ValueError, match="invalid path"):
        s.multi([Op.create("/p/", b"x")])
    assert s.get_children("/p") == [] and s.get("/p")[1].num_children == 0
    assert s.create("/p/", b"x", sequential=True) == "/p/0000000000"


# ---- the hundred-and-ninety-fourth review: ZooKeeper store mutants, tenth pass ----

def test_a_jar_is_not_enough_without_java_on_the_path(tmp_path, monkeypatch) -> None:
    # The package's jar may outlive the JRE it needs (java removed, or a PATH without it):
    # that is as unavailable as a missing jar, so the suites skip instead of failing on a
    # missing `java` executable, and start() runs nothing.
    from kreplica.meta import zk_server as zs

    jar = tmp_path / "zookeeper.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("PATH", str(tmp_path / "no-java-here"))
    assert not zs.zookeeper_available(str(jar))
    server = zs.ZooKeeperServer(jar=str(jar))
    with pytest.raises(zs.ZooKeeperUnavailable, match="or java not found"):
        server.start()
    assert server._proc is None and server.data_dir is None


def test_a_port_that_answers_bytes_that_are_not_text_is_read_with_replacements_and_not_ready() -> None:
    # Whatever answers on the port (another service that took it, a JVM half up) may send
    # any bytes: the word's answer is read with replacement characters, and readiness
    # takes it as "not yet" until its deadline instead of failing on a decoding error.
    from kreplica.meta.zk_server import four_letter_word

    with _FourLetterServer({"ruok": [b"\xffimok"], "srvr": [b"\xfe\xff"]}) as fake:
        assert four_letter_word("127.0.0.1", fake.port, "ruok") == "\ufffdimok"
        assert _server_on(fake.port, _AliveProcess())._wait_ready(0.5) is False


def test_a_server_whose_directory_was_removed_meanwhile_stops_quietly_and_has_no_log(tmp_path) -> None:
    # A temporary-files cleaner (systemd-tmpfiles, tmpreaper) may take a long-running
    # server's directory away; stop() still ends it without an error. A server without a
    # directory (never started, or stopped) names no log file.
    from kreplica.meta.zk_server import ZooKeeperServer

    server = ZooKeeperServer()
    assert server.log_path is None
    server.data_dir = tmp_path / "kreplica-zk-gone"
    assert server.log_path == tmp_path / "kreplica-zk-gone" / "zookeeper.log"
    server._proc = _AliveProcess(0)  # type: ignore[assignment]  # its JVM has ended too
    server.stop()
    assert server.data_dir is None and server.log_path is None and server._proc is None


def test_a_server_that_cannot_start_quotes_a_log_that_is_not_text_with_replacements(monkeypatch) -> None:
    # A JVM's log may hold bytes that are not UTF-8 (a file name in another locale, a
    # crash report): the error still quotes the log's end, with replacement characters,
    # instead of failing on a decoding error. A stand-in process that exits at once.
    from kreplica.meta import zk_server as zs

    class Exited:
        def poll(self) -> int:
            return 1

    def popen(*args: object, stdout, **kwargs: object) -> Exited:
        stdout.write(b"\xfe/var/lib/\xff: java.net.BindException: Address already in use\n")
        return Exited()

    monkeypatch.setattr(zs.subprocess, "Popen", popen)
    monkeypatch.setattr(zs, "zookeeper_available", lambda jar: True)
    server = zs.ZooKeeperServer()
    with pytest.raises(RuntimeError, match="did not start") as failed:
        server.start()
    assert "\ufffd/var/lib/\ufffd: java.net.BindException" in str(failed.value)
    assert server.data_dir is None and server._proc is None

@pytest.mark.zookeeper
def test_a_zookeeper_error_keeps_kazoos_own_as_its_cause_and_a_session_shows_its_name(zk_store_factory) -> None:
    # A traceback shows what kazoo (and the server) answered under the store's error; a
    # session's repr names its id, as the server's `cons` does, and its owner's name.
    from kazoo import exceptions as kz

    s = zk_store_factory().session("broker-1001")
    with pytest.raises(NoNode, match="/missing") as missing:
        s.get("/missing")
    assert isinstance(missing.value.__cause__, kz.NoNodeError)
    assert repr(s) == f"ZooKeeperSession(id={s.session_id:#x}, name='broker-1001')"


@pytest.mark.parametrize("path", ["/p/", "/q/p/", "/a//b", "//", "//q", "p", ""])
def test_a_path_with_an_empty_node_name_is_refused_by_every_call_on_both_stores(store_env: StoreEnv,
                                                                              path: str) -> None:
    # ZooKeeper's own client refuses a path that does not start with "/", ends with one or
    # names an empty node ("//"). kazoo normalises some instead (create("/p/") made /p, and
    # get, set and delete took "/p/" for /p), where the embedded store refused them all:
    # the same call now fails the same way on both, before anything is sent.
    s = store_env.store.session("a")
    s.create("/q", b"q")
    s.create("/q/p", b"p")
    calls = {"create": lambda: s.create(path, b"x"), "makepath": lambda: s.create(path, b"x", makepath=True),
             "get": lambda: s.get(path), "exists": lambda: s.exists(path),
             "get_children": lambda: s.get_children(path), "get_many": lambda: s.get_many([path]),
             "set": lambda: s.set(path, b"x"), "delete": lambda: s.delete(path),
             "delete_tree": lambda: s.delete(path, recursive=True),
             "multi_create": lambda: s.multi([Op.create(path, b"x")]), "multi_check": lambda: s.multi([Op.check(path)]),
             "multi_set": lambda: s.multi([Op.set(path, b"x")]), "multi_delete": lambda: s.multi([Op.delete(path)])}
    answered = {}
    for name, call in calls.items():
        try:
            answered[name] = repr(call())
        except ValueError as e:
            assert str(e).startswith(f"invalid path {path!r}"), e
        except Exception as e:  # noqa: BLE001 -- collected: the assertion below names every call
            answered[name] = type(e).__name__
    assert answered == {}
    assert [c for c in s.get_children("/") if c != "zookeeper"] == ["q"]
    assert s.get_children("/q") == ["p"] and s.get("/q/p")[0] == b"p"


def _sequential_create_refusals(s: Session, path: str) -> list[str]:
    """The InvalidPath message of each way a sequential create of ``path`` can be asked for:
    plain, ephemeral, with makepath, and as a transaction's op."""
    told = []
    for call in (lambda: s.create(path, b"x", sequential=True),
                 lambda: s.create(path, b"x", ephemeral=True, sequential=True),
                 lambda: s.create(path, b"x", sequential=True, makepath=True),
                 lambda: s.multi([Op.create(path, b"x", sequential=True)])):
        with pytest.raises(InvalidPath) as refused:
            call()
        told.append(str(refused.value))
    return told


@pytest.mark.parametrize("path", ["/d/.", "/d/..", "/.."])
def test_a_sequential_create_whose_last_name_is_dot_or_dot_dot_is_refused_by_name_on_both_stores(
        store_env: StoreEnv, path: str) -> None:
    # ZooKeeper checks a sequential path with a digit after it and would number "/d/." as
    # "/d/.0000000000", but kazoo refuses the path (a bare ValueError naming no path), so
    # the ZooKeeper store could not make what the memory store made: both refuse it by
    # name, whichever way the create is asked for, and make nothing.
    s = store_env.store.session("a")
    told = f"invalid path {path!r}: relative paths not allowed"
    assert _sequential_create_refusals(s, path) == [told] * 4
    # Refused before anything is made: makepath made no missing /d on its way.
    assert s.get_children("/") == []
    s.create("/d")
    # A name that only begins or ends with dots is numbered as any other.
    made = [_made(lambda: s.create(prefix, sequential=True)) for prefix in ("/d/..x", "/d/x.", "/d/x..")]
    assert made == ["/d/..x0000000000", "/d/x.0000000001", "/d/x..0000000002"]
    assert s.get_children("/") == ["d"]


@pytest.mark.parametrize("kind", ["check", "set", "delete"])
def test_an_op_that_is_no_create_is_checked_as_its_path_whatever_its_sequential_flag(
        store_env: StoreEnv, kind: str) -> None:
    # Only a create is numbered, so only a create's path is checked with a digit after it.
    # An op built by hand (Op is a plain dataclass) with sequential=True on a check, set or
    # delete names "/p/" as given: refused as for any op, not taken for /p (as kazoo would
    # take it), which would have deleted /p, rewritten it or passed its check.
    s = store_env.store.session("a")
    s.create("/p", b"p")
    with pytest.raises(InvalidPath, match="invalid path '/p/'"):
        s.multi([Op(kind, "/p/", b"x", sequential=True)])
    assert s.get("/p")[0] == b"p" and s.get("/p")[1].version == 0


# ---- the two-hundred-and-twenty-fourth review: metadata store mutants, twelfth pass ----

def test_memory_an_exists_refused_for_its_path_leaves_no_watch_to_hear_the_expiry() -> None:
    # ZooKeeperStore refuses such a path before anything is sent, so its exists leaves no
    # watch. The embedded store must not leave one either: the session's expiry tells every
    # watch it holds, and would tell this one of a node no create could ever make.
    sched, store = _memory(3000)
    s = store.session("b1")
    refused, kept = Recorder(), Recorder()
    for bad in ("/a\x01b", "/p/", "/d/.."):
        with pytest.raises(InvalidPath):
            s.exists(bad, refused)
    assert s.exists("/absent", kept) is None  # an absent node's exists watch is left
    s.pause_heartbeats()
    assert sched.run_until(lambda: bool(kept.events), 10_000)
    sched.advance(100)
    assert s.expired and kept.types() == ["SESSION_EXPIRED"] and refused.events == []


@pytest.mark.parametrize("path, reason", [("/a//b", ""), ("/d/./e", ": relative paths not allowed"),
                                          ("/a\x01", ": invalid character '\\x01' at 2")])
def test_a_refused_sequential_create_names_the_path_it_was_given(store_env: StoreEnv, path: str,
                                                                 reason: str) -> None:
    # A sequential path is checked with a digit after it, as ZooKeeper checks it, but the
    # refusal names the path as given, as every other refusal does: "/a//b", not "/a//b1",
    # a path the caller never named.
    s = store_env.store.session("a")
    told = f"invalid path {path!r}{reason}"
    assert _sequential_create_refusals(s, path) == [told] * 4
    assert s.get_children("/") == []
