"""Disconnections between one client and a real ZooKeeper, and the sessions' endings.

A broker's store session can lose its connection while the session lives on in the
server.  What the store promises then, on ZooKeeper as on the embedded store: a call
that fails is not applied later behind the caller's back; watches are not lost, and
their owners learn to re-read once the session is back; a session closed while cut
off keeps its ephemeral nodes until it times out; ending sessions leaks no threads.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from types import SimpleNamespace

import pytest

from kreplica.meta.memory_store import MemoryStore
from kreplica.meta.store import ConnectionLoss
from kreplica.runtime import RealScheduler, SimScheduler
from meta_env import Recorder, expire_from_a_twin, killed_with_an_ephemeral_and_a_watch
from tcp_cut import CuttableRelay

_chroots = itertools.count()


def _wait(predicate, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


@pytest.fixture
def relayed(zk_server):
    """Stores on one chroot: ``via`` reaches ZooKeeper through a cuttable relay, ``direct`` not."""
    from kreplica.meta.zookeeper_store import ZooKeeperStore

    relay = CuttableRelay(zk_server.port)
    sched = RealScheduler()
    chroot = f"/disconnects-{os.getpid()}-{next(_chroots)}"
    via = ZooKeeperStore(relay.hosts, chroot, sched, session_timeout_ms=10_000, op_timeout_s=1.0)
    direct = ZooKeeperStore(zk_server.hosts, chroot, sched, session_timeout_ms=10_000)
    yield SimpleNamespace(relay=relay, sched=sched, via=via, direct=direct)
    via.close()
    direct.close()
    relay.close()


def _cut(env, session) -> None:
    env.relay.cut()
    _wait(lambda: not session.client.connected)


def _killed_at_once_keeping_its_ephemeral(session, observer) -> None:
    """``session.kill()`` ends the client within 3 s, and the server keeps its "/eph" (the
    session lives on there until it times out), as a crashed broker's would."""
    started = time.monotonic()
    session.kill()
    assert time.monotonic() - started < 3.0
    assert session.client._connection.connection_stopped.is_set()
    assert observer.exists("/eph") is not None


def _told_within(call, seconds: float) -> list[object]:
    """What ``call`` told its caller ("answered" or the exception it raised), run on a
    thread of its own for at most ``seconds``: an empty list if it had not returned."""
    outcome: list[object] = []

    def run() -> None:
        try:
            call()
            outcome.append("answered")
        except Exception as exc:  # noqa: BLE001 -- what the caller was told
            outcome.append(exc)

    caller = threading.Thread(target=run, daemon=True)
    caller.start()
    caller.join(seconds)
    return outcome


def _heal(env, session) -> None:
    env.relay.heal()
    _wait(lambda: session.client.connected)
    session.exists("/")  # a round trip: whatever the client still had queued has been sent


@pytest.mark.zookeeper
def test_a_call_while_disconnected_fails_at_once_and_is_never_applied(relayed) -> None:
    a, b = relayed.via.session("controller"), relayed.direct.session("admin")
    a.create("/request", b"old")
    _cut(relayed, a)
    started = time.monotonic()
    with pytest.raises(ConnectionLoss):
        a.delete("/request")
    assert time.monotonic() - started < 0.5
    b.set("/request", b"new")  # a newer request, written while the first client was away
    _heal(relayed, a)
    assert b.get("/request")[0] == b"new"


@pytest.mark.zookeeper
def test_a_timed_out_call_is_taken_back_and_not_sent_at_the_reconnection(relayed) -> None:
    a, b = relayed.via.session("controller"), relayed.direct.session("admin")
    a.create("/request", b"old")
    _cut(relayed, a)
    # A call that passed the connected check just as the connection dropped: kazoo
    # queues it for the reconnection; the timeout must take it back out.
    with pytest.raises(ConnectionLoss):
        a._wait(a.client.delete_async("/request"), "/request")
    assert not a.client._queue
    b.set("/request", b"new")
    _heal(relayed, a)
    assert b.get("/request")[0] == b"new"


@pytest.mark.zookeeper
def test_watches_dropped_by_a_disconnection_are_told_to_re_read_once_back(relayed) -> None:
    a, b = relayed.via.session("broker"), relayed.direct.session("other")
    a.create("/n", b"1")
    data_watch, child_watch = Recorder(), Recorder()
    a.get("/n", data_watch)
    a.get_children("/", child_watch)
    _cut(relayed, a)
    relayed.sched.run_until(lambda: False, 300)
    assert data_watch.types() == [] and child_watch.types() == []  # nothing to re-read while away
    b.set("/n", b"2")  # changed meanwhile: the owner must not miss it
    relayed.relay.heal()
    assert relayed.sched.run_until(lambda: data_watch.events and child_watch.events, 15_000)
    assert data_watch.types() == ["RECONNECTED"] and child_watch.types() == ["RECONNECTED"]
    assert not a.expired
    assert a.get("/n")[0] == b"2"


@pytest.mark.zookeeper
def test_recursive_delete_of_an_unreachable_store_fails_instead_of_hanging(relayed) -> None:
    a = relayed.via.session("controller")
    a.create("/topic/partitions/0", b"", makepath=True)
    _cut(relayed, a)
    started = time.monotonic()
    with pytest.raises(ConnectionLoss):
        a.delete("/topic", recursive=True)
    assert time.monotonic() - started < 2.0
    _heal(relayed, a)
    a.delete("/topic", recursive=True)
    assert a.exists("/topic") is None


@pytest.mark.zookeeper
def test_killed_and_closed_sessions_leave_no_threads(zk_server) -> None:
    from kreplica.meta.zookeeper_store import ZooKeeperStore

    before = threading.active_count()
    store = ZooKeeperStore(zk_server.hosts, f"/threads-{os.getpid()}", RealScheduler())
    for i in range(3):
        store.session(f"crashed-{i}").kill()
    store.session("clean")
    store.close()
    _wait(lambda: threading.active_count() <= before, 10.0)


@pytest.mark.zookeeper
def test_closing_an_expired_session_stops_its_client(zk_store_factory, zk_server) -> None:
    sched = RealScheduler()
    store = zk_store_factory(sched)
    told: list[bool] = []
    s = store.session("b1", on_expired=lambda: told.append(True))
    expire_from_a_twin(s, zk_server.hosts + zk_store_factory.chroot)
    _wait(lambda: s.expired)
    s.close()  # before the scheduler ran the expiry's own clean-up
    assert s.client._stopped.is_set()  # kazoo would otherwise open a fresh session
    sched.run_until(lambda: False, 200)
    assert told == []  # a closed session tells its owner nothing more


@pytest.mark.zookeeper
def test_a_store_holds_only_the_sessions_that_have_not_ended(zk_store_factory, zk_server) -> None:
    """A long-running cluster opens sessions for good (an expiry, a restart, each a new
    one); the store keeps the live ones for its close(), not every one it ever made."""
    sched = RealScheduler()
    store = zk_store_factory(sched)
    live = store.session("live")
    for i in range(5):
        store.session(f"closed-{i}").close()
        store.session(f"killed-{i}").kill()
    expired = store.session("expired")
    expire_from_a_twin(expired, zk_server.hosts + zk_store_factory.chroot)
    _wait(lambda: expired.expired)
    sched.run_until(lambda: False, 200)  # the expiry's clean-up runs on the scheduler
    assert store._sessions == [live]
    store.close()
    assert live.closed and store._sessions == []


def test_memory_session_closed_while_cut_off_keeps_its_ephemerals_until_it_times_out() -> None:
    sched = SimScheduler(1)
    store = MemoryStore(sched, session_timeout_ms=6000)
    a, b = store.session("broker-1"), store.session("observer")
    a.create("/eph", ephemeral=True)
    a.set_reachable(False)
    a.close()  # its close-session request cannot reach the store
    assert b.exists("/eph") is not None
    sched.advance(5_000)
    assert b.exists("/eph") is not None
    sched.advance(2_000)
    assert b.exists("/eph") is None


@pytest.mark.zookeeper
def test_zookeeper_session_closed_while_cut_off_keeps_its_ephemerals_until_it_times_out(zk_server) -> None:
    from kreplica.meta.zookeeper_store import ZooKeeperStore

    relay = CuttableRelay(zk_server.port)
    chroot = f"/close-cut-{os.getpid()}"
    via = ZooKeeperStore(relay.hosts, chroot, RealScheduler(), session_timeout_ms=2_000, op_timeout_s=1.0)
    direct = ZooKeeperStore(zk_server.hosts, chroot, RealScheduler())
    try:
        a, b = via.session("broker-1"), direct.session("observer")
        a.create("/eph", ephemeral=True)
        relay.cut()
        _wait(lambda: not a.client.connected)
        a.close()
        assert b.exists("/eph") is not None
        _wait(lambda: b.exists("/eph") is None, 10.0)
    finally:
        via.close()
        direct.close()
        relay.close()


@pytest.mark.zookeeper
def test_a_session_reconnects_promptly_after_a_long_outage(zk_server, monkeypatch) -> None:
    """ZooKeeper's own client tries again within a second, however long the outage. kazoo's
    default pause doubles up to an hour: without jitter, after a 14 s outage it next tried
    at 25.5 s, 11 s after the store was back (a 20 s outage once ended past a 30 s session
    timeout, expiring a session the outage alone would not have)."""
    assert _reconnection_delay_s(zk_server, monkeypatch, 14.0, "reconnect") < 3.0


def _reconnection_delay_s(zk_server, monkeypatch, outage_s: float, chroot: str,
                          tries: list[float] | None = None) -> float:
    """How long after its link to ZooKeeper is back a session cut off for ``outage_s``
    takes to be connected again (kazoo's retry pauses without jitter). ``tries``, when
    given, gets the time of each failed try, in seconds from when the cut was seen."""
    import kazoo.retry

    from kreplica.meta.zookeeper_store import ZooKeeperStore

    seen_cut = [float("inf")]

    def no_jitter(a: float, b: float) -> float:  # the same pauses every run; called once per failed try
        if tries is not None:
            tries.append(time.monotonic() - seen_cut[0])
        return 1.0

    monkeypatch.setattr(kazoo.retry.random, "uniform", no_jitter)
    relay = CuttableRelay(zk_server.port)
    store = ZooKeeperStore(relay.hosts, f"/{chroot}-{os.getpid()}", RealScheduler(), session_timeout_ms=30_000)
    try:
        session = store.session("broker-1")
        relay.cut()
        _wait(lambda: not session.client.connected)
        seen_cut[0] = time.monotonic()
        time.sleep(outage_s)
        relay.heal()
        healed = time.monotonic()
        _wait(lambda: session.client.connected, 30.0)
        delay = time.monotonic() - healed
        assert not session.expired and session.exists("/") is not None
        return delay
    finally:
        store.close()
        relay.close()


@pytest.mark.zookeeper
def test_a_drop_notice_delivered_after_the_reconnection_is_told_to_re_read_at_once(zk_store_factory) -> None:
    """kazoo hands a dropped watch its notice on its callback thread, which can run after
    the connection is back: the flush at CONNECTED has happened, so the watch must be told
    RECONNECTED then and there, not parked for a reconnection that may never come."""
    from kazoo.protocol.states import EventType as KzEventType, KeeperState, WatchedEvent

    sched = RealScheduler()
    s = zk_store_factory(sched).session("broker")
    watch = Recorder()
    wrapper = s._wrap(watch, "/w", False)
    assert s.client.connected
    wrapper(WatchedEvent(KzEventType.NONE, KeeperState.CONNECTING, None))  # the late notice
    assert sched.run_until(lambda: watch.events, 2_000)
    assert watch.types() == ["RECONNECTED"] and not s._dropped
    # ...for the node it watched, though kazoo's notice of a drop names none.
    assert watch.events[0].path == "/w"


@pytest.mark.zookeeper
def test_a_kill_ends_the_connection_at_once_and_cleanly(zk_store_factory, monkeypatch) -> None:
    """kill() shuts the socket down, which wakes kazoo's connection thread: it ends at once
    without an error (closing the descriptor instead leaves the thread in its select on a
    dead descriptor until the operation timeout, then failing in it)."""
    failures: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(repr(args.exc_value)))
    s = zk_store_factory(RealScheduler()).session("broker")
    s.create("/eph", ephemeral=True)
    started = time.monotonic()
    s.kill()
    assert time.monotonic() - started < 2.0
    assert s.client._connection.connection_stopped.is_set()
    time.sleep(0.2)
    assert failures == []


@pytest.mark.zookeeper
def test_the_re_read_notice_of_a_dropped_watch_runs_on_the_schedulers_thread(relayed) -> None:
    """kazoo tells of the reconnection on its own thread; the dropped watch's RECONNECTED
    must wait for the scheduler, as every other notice does, and run on its thread."""
    a = relayed.via.session("broker")
    a.create("/n", b"1")
    threads: list[int] = []
    a.get("/n", lambda event: threads.append(threading.get_ident()))
    _cut(relayed, a)
    relayed.sched.run_until(lambda: False, 300)
    relayed.relay.heal()
    _wait(lambda: a.client.connected)
    time.sleep(0.5)  # kazoo's CONNECTED listener has run; the scheduler has not
    assert threads == []
    assert relayed.sched.run_until(lambda: bool(threads), 5_000)
    assert threads == [threading.get_ident()]


# ---- the relay itself, against a plain socket server (2026-11-27, third net mutation review) ----
def test_the_relay_refuses_while_cut_and_relays_and_closes_both_ends_once_healed():
    """While cut, a new connection is closed before it reaches the server; once healed,
    bytes cross both ways, and a client hanging up closes the server's side as it goes
    (not later, by the collector: "unclosed <socket.socket>")."""
    import socket
    import warnings

    server = socket.create_server(("127.0.0.1", 0))
    relay = CuttableRelay(server.getsockname()[1])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            relay.cut()
            with socket.create_connection(("127.0.0.1", relay.port)) as client:
                client.settimeout(5)
                assert client.recv(10) == b""
            server.settimeout(0.2)
            with pytest.raises(TimeoutError):
                server.accept()  # nothing was relayed
            relay.heal()
            server.settimeout(5)
            with socket.create_connection(("127.0.0.1", relay.port)) as client:
                client.settimeout(5)
                client.sendall(b"ping")
                upstream, _ = server.accept()
            with upstream:
                upstream.settimeout(5)
                assert upstream.recv(10) == b"ping"
                assert upstream.recv(10) == b""  # the client's hang-up reached the server
            for t in relay._threads[1:]:
                t.join(5)
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    finally:
        relay.close()
        server.close()


@pytest.mark.zookeeper
def test_zookeeper_killed_session_gets_no_callbacks(zk_store_factory) -> None:
    """As test_memory_killed_session_gets_no_callbacks: a crashed broker hears nothing.
    kazoo reports LOST when kill() stops its connection; that is not an expiry."""
    sched = RealScheduler()
    s, called = killed_with_an_ephemeral_and_a_watch(zk_store_factory(sched))
    sched.run_until(lambda: False, 500)
    assert called == [] and not s.expired


# ---- the ninety-sixth review: ZooKeeper store mutants, fifth pass ----

@pytest.mark.zookeeper
def test_ended_sessions_leave_no_open_sockets(zk_store_factory) -> None:
    """Each session's kazoo client holds a connection and a wake-up socket pair; closing
    or killing the session frees them, or a long-running cluster (a session per expiry
    and restart) runs out of descriptors."""
    import gc

    store = zk_store_factory(RealScheduler())
    store.session("warm-up").close()  # whatever kazoo opens once per process
    gc.collect()  # what earlier tests left for the collector is not counted either way
    before = len(os.listdir("/proc/self/fd"))
    ended = []  # their owners still hold them (a broker keeps its last session object)
    for i in range(5):
        ended.append(store.session(f"closed-{i}"))
        ended[-1].close()
        ended.append(store.session(f"killed-{i}"))
        ended[-1].kill()
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before + 2


@pytest.mark.zookeeper
def test_an_expired_session_tells_its_owner_once_and_keeps_no_new_session(zk_store_factory, zk_server) -> None:
    """kazoo opens a fresh session after an expiry, and reports LOST again when the store
    then stops it: the owner is told of its expiry once, and no fresh session is kept.
    The owner's scheduler is busy meanwhile (a controller in a long step), so kazoo's
    fresh session is up before the store's clean-up runs."""
    sched = RealScheduler()
    store = zk_store_factory(sched)
    told: list[bool] = []
    s = store.session("b1", on_expired=lambda: told.append(True))
    old_id = s.client.client_id[0]
    expire_from_a_twin(s, zk_server.hosts + zk_store_factory.chroot)
    _wait(lambda: s.expired and s.client.connected and s.client.client_id[0] != old_id)
    assert sched.run_until(lambda: bool(told), 20_000)
    sched.run_until(lambda: False, 1_000)  # the stopped client's own LOST, and any late notice
    assert told == [True]
    assert s.client._stopped.is_set() and not s.client.connected


@pytest.mark.zookeeper
def test_a_watch_parked_by_a_disconnection_hears_of_the_expiry_before_the_owner(relayed, zk_server) -> None:
    """As on the embedded store (and kazoo's live watches): outstanding watches learn of
    the expiry before the owner's on_expired, which may close the session and with it
    every notice still queued."""
    heard: list[str] = []
    a = relayed.via.session("broker", on_expired=lambda: heard.append("on_expired"))
    a.create("/n", b"1")
    a.get("/n", lambda event: heard.append(event.type.value))
    ident = SimpleNamespace(client=SimpleNamespace(client_id=a.client.client_id))  # kazoo forgets it while away
    _cut(relayed, a)
    relayed.sched.run_until(lambda: False, 300)
    assert a._dropped  # parked until the session is back
    expire_from_a_twin(ident, zk_server.hosts + relayed.via.chroot)
    relayed.relay.heal()
    assert relayed.sched.run_until(lambda: "on_expired" in heard, 15_000)
    relayed.sched.run_until(lambda: False, 300)
    assert heard == ["SESSION_EXPIRED", "on_expired"]


@pytest.mark.zookeeper
def test_a_watch_told_to_re_read_is_not_told_again_at_the_next_reconnection(relayed) -> None:
    """A dropped watch is told RECONNECTED once; an owner that has not watched again has
    nothing outstanding, and a later disconnection tells it nothing."""
    a = relayed.via.session("broker")
    a.create("/n", b"1")
    watch = Recorder()
    a.get("/n", watch)
    for _ in range(2):
        _cut(relayed, a)
        relayed.sched.run_until(lambda: False, 300)
        _heal(relayed, a)
        relayed.sched.run_until(lambda: False, 500)
    assert watch.types() == ["RECONNECTED"]


@pytest.mark.zookeeper
def test_a_session_killed_while_cut_off_ends_quietly_and_keeps_its_ephemerals(relayed) -> None:
    """A broker crashing while its connection is down: kazoo has closed the socket it was
    using and waits to try again; kill() must still end the client at once, without an
    error, and the server keeps the session's ephemeral nodes until it times out."""
    a, b = relayed.via.session("broker"), relayed.direct.session("observer")
    a.create("/eph", ephemeral=True)
    _cut(relayed, a)
    time.sleep(0.3)  # between two of kazoo's tries
    _killed_at_once_keeping_its_ephemeral(a, b)


@pytest.mark.zookeeper
def test_an_application_that_configures_no_logging_hears_nothing_from_a_killed_session(zk_server) -> None:
    """kill() makes kazoo warn that its connection dropped, by design. Those warnings go to
    the store's logger, which stays quiet unless the application configures logging;
    kazoo's own logger would reach Python's last-resort handler and print to stderr."""
    code = (
        "from kreplica.meta.zookeeper_store import ZooKeeperStore\n"
        "from kreplica.runtime import RealScheduler\n"
        f"store = ZooKeeperStore({zk_server.hosts!r}, '/quiet-{os.getpid()}', RealScheduler())\n"
        "s = store.session('broker')\n"
        "s.create('/eph', ephemeral=True)\n"
        "s.kill()\n"
        "store.close()\n"
        "print('done')\n"
    )
    assert _run_without_logging_configured(code) == (0, "done\n", "")


def _run_without_logging_configured(code: str) -> tuple[int, str, str]:
    """Run ``code`` in a fresh interpreter that configures no logging, from the tree's
    top: (exit status, stdout, stderr)."""
    import subprocess
    import sys

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=here)
    return ran.returncode, ran.stdout, ran.stderr


@pytest.mark.zookeeper
def test_a_store_with_its_own_server_ends_its_sessions_before_the_server(zk_server, caplog) -> None:
    """zookeeper+local:// : close() ends every session while its server still answers
    (each close-session request is answered), then stops the server. The other way round,
    every session first finds its server gone and tries to reconnect to it."""
    import logging

    from kreplica.meta.uri import open_store

    store = open_store("zookeeper+local:///own", RealScheduler(), 4000)
    sessions = [store.session(f"s{i}") for i in range(3)]
    sessions[0].create("/eph", ephemeral=True)
    with caplog.at_level(logging.INFO, logger="kreplica.meta.zookeeper_store"):
        store.close()
    assert all(s.closed for s in sessions) and store.owned_server is None
    troubles = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert troubles == []


@pytest.mark.zookeeper
def test_a_transaction_cut_off_once_let_through_fails_in_time_and_is_never_applied(relayed) -> None:
    """As test_a_timed_out_call_is_taken_back_and_not_sent_at_the_reconnection, through
    multi(): the connection drops just after the session's connected check. The caller
    hears ConnectionLoss within the operation timeout, not whenever the store is back,
    and the transaction is not sent behind its back at the reconnection."""
    from kreplica.meta.store import Op
    from meta_env import meanwhile

    a, b = relayed.via.session("controller"), relayed.direct.session("admin")
    a.create("/request", b"old")
    meanwhile(a, "_enter", lambda: _cut(relayed, a), after=True)
    outcome = _told_within(lambda: a.multi([Op.check("/request", 0), Op.set("/request", b"mine")]), 5.0)
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionLoss)
    del a._enter
    b.set("/request", b"new")
    _heal(relayed, a)
    assert b.get("/request")[0] == b"new"


# ---- the hundred-and-fifteenth review: ZooKeeper store mutants, sixth pass ----

@pytest.mark.zookeeper
def test_a_session_that_fails_after_connecting_leaves_no_client_running(zk_store_factory, kazoo_client) -> None:
    # kazoo's start() connects, then checks the chroot and warns if it is gone (another
    # client removed it); where warnings are errors, the start fails after the connection
    # was made. The session is refused with the store's error, and its client is stopped:
    # no connection thread keeps the refused session alive on the server.
    import warnings

    store = zk_store_factory()
    kazoo_client.delete(zk_store_factory.chroot, recursive=True)
    before = threading.active_count()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConnectionLoss, match="cannot reach ZooKeeper"):
            store.session("refused")
    assert store._sessions == []
    _wait(lambda: threading.active_count() <= before, 10.0)


@pytest.mark.zookeeper
def test_a_session_killed_while_its_server_refuses_connections_ends_quietly(relayed) -> None:
    """A broker crashing while its ZooKeeper is down (the port refuses): kazoo, between
    two tries, holds no socket at all. kill() still ends the client at once, without an
    error, and the session lives on in the server until it times out."""
    a, b = relayed.via.session("broker"), relayed.direct.session("observer")
    a.create("/eph", ephemeral=True)
    relayed.relay.close()  # nothing listens on the address the session uses any more
    _wait(lambda: not a.client.connected and a.client._connection._socket is None)
    _killed_at_once_keeping_its_ephemeral(a, b)


@pytest.mark.zookeeper
def test_making_a_store_under_a_chroot_leaves_no_open_sockets(zk_server) -> None:
    """The short-lived client that makes the chroot holds a connection and a wake-up socket
    pair, as a session's does: a process that opens stores again and again (a tool, a
    restarted controller) must not run out of descriptors, nor leave them to the collector."""
    import gc
    import warnings

    from kreplica.meta.zookeeper_store import ZooKeeperStore

    ZooKeeperStore(zk_server.hosts, "/sockets-warm-up", RealScheduler()).close()
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        stores = [ZooKeeperStore(zk_server.hosts, f"/sockets-{i}", RealScheduler()) for i in range(5)]
        assert len(os.listdir("/proc/self/fd")) <= before + 2
        for store in stores:
            store.close()
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.zookeeper
def test_a_session_cut_off_briefly_is_back_well_within_a_second(zk_server, monkeypatch) -> None:
    """ZooKeeper's own client tries the next server at once after a short pause; a broker
    whose link to ZooKeeper blinked must not sit a whole second (or more) without it.
    The first pause is 0.1 s and doubles (1 s at most), so a link back 0.2 s after the
    drop is found by the try at 0.3 s."""
    assert _reconnection_delay_s(zk_server, monkeypatch, 0.2, "blink") < 0.6


# ---- the hundred-and-ninety-fourth review: ZooKeeper store mutants, tenth pass ----

@pytest.mark.zookeeper
def test_a_kill_between_an_expiry_and_its_clean_up_leaves_kazoos_fresh_session_to_be_closed(
        zk_store_factory, zk_server) -> None:
    """kazoo opens a fresh session once the old one expired, before the owner's scheduler
    runs the expiry's clean-up. An expired session is over, so a kill() then (its owner
    crashing) does nothing: the clean-up still closes the fresh session at once, rather
    than the kill dropping its connection and leaving it on the server for a timeout."""
    from kazoo.client import KazooClient

    sched = RealScheduler()
    store = zk_store_factory(sched, session_timeout_ms=10_000)
    told: list[bool] = []
    s = store.session("b1", on_expired=lambda: told.append(True))
    old_id = s.client.client_id[0]
    expire_from_a_twin(s, zk_server.hosts + zk_store_factory.chroot)
    _wait(lambda: s.expired and s.client.connected and s.client.client_id[0] != old_id)
    fresh = s.client.client_id
    s.kill()
    assert sched.run_until(lambda: bool(told), 20_000)
    # Presenting the fresh session's id and password: the server no longer knows it, so
    # the presenter is given a session of its own.
    presenter = KazooClient(hosts=zk_server.hosts, client_id=fresh)
    presenter.start(timeout=15)
    try:
        assert presenter.client_id[0] != fresh[0]
    finally:
        presenter.stop()
        presenter.close()


@pytest.mark.zookeeper
def test_an_application_that_configures_no_logging_hears_nothing_from_a_store_that_cannot_connect() -> None:
    """A store made while its server is down (a CLI run against a stopped ensemble) fails
    with ConnectionLoss; the client that makes its chroot warns of each refused try too,
    and those warnings go to the store's quiet logger, not to stderr through kazoo's."""
    from kreplica.meta.zk_server import free_port

    code = (
        "from kreplica.meta.store import ConnectionLoss\n"
        "from kreplica.meta.zookeeper_store import ZooKeeperStore\n"
        "from kreplica.runtime import RealScheduler\n"
        "try:\n"
        f"    ZooKeeperStore('127.0.0.1:{free_port()}', '/down', RealScheduler(), connect_timeout_s=1.0)\n"
        "except ConnectionLoss:\n"
        "    print('connection loss')\n"
    )
    assert _run_without_logging_configured(code) == (0, "connection loss\n", "")


@pytest.mark.zookeeper
def test_a_session_cut_off_for_long_tries_about_once_a_second_not_ten_times(zk_server, monkeypatch) -> None:
    """The pause between tries starts at 0.1 s and doubles to its 1 s ceiling, as
    ZooKeeper's own client waits up to a second before its next server: over 3 s cut off
    a session tries about five times, not thirty (a hundred brokers each trying ten times
    a second would hammer an ensemble that is coming back)."""
    tries: list[float] = []
    _reconnection_delay_s(zk_server, monkeypatch, 3.0, "tries", tries)
    assert 3 <= len([t for t in tries if 0.0 <= t <= 3.0]) <= 9, tries


# ---- the two-hundred-and-thirtieth review: ZooKeeper store mutants, twelfth pass ----

@pytest.mark.zookeeper
def test_a_batched_read_cut_off_after_its_connected_check_names_its_batch(relayed) -> None:
    """As the transaction above, through get_many(): the ConnectionLoss the caller hears
    names the batch by its first path, as every other call's error names its path."""
    from meta_env import meanwhile

    a = relayed.via.session("controller")
    a.create("/p0", b"0")
    a.create("/p1", b"1")
    meanwhile(a, "_enter", lambda: _cut(relayed, a), after=True)
    with pytest.raises(ConnectionLoss) as lost:
        a.get_many(["/p0", "/p1"])
    assert "/p0" in str(lost.value), str(lost.value)
    del a._enter
    _heal(relayed, a)
    assert [data for data, _ in a.get_many(["/p0", "/p1"])] == [b"0", b"1"]


@pytest.mark.zookeeper
def test_a_store_whose_server_accepts_but_never_answers_gives_up_within_its_own_session_timeout() -> None:
    """A port that accepts connections and says nothing (a hung JVM, another service):
    the client that makes the chroot waits for the server's answer to its connect request
    one session timeout, then the store refuses with ConnectionLoss.  The session timeout
    is the store's, in seconds to kazoo: read as milliseconds it would be a thousand times
    longer, and stopping that client would wait it out."""
    import socket

    from kreplica.meta.zookeeper_store import ZooKeeperStore

    with socket.create_server(("127.0.0.1", 0)) as mute:  # the kernel accepts; nobody reads
        hosts = f"127.0.0.1:{mute.getsockname()[1]}"
        outcome = _told_within(lambda: ZooKeeperStore(
            hosts, "/never", RealScheduler(), session_timeout_ms=1000, connect_timeout_s=0.3).close(), 8.0)
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionLoss), outcome
    assert f"cannot reach ZooKeeper at {hosts}" in str(outcome[0])
