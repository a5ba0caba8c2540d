"""ZooKeeperStore: the metadata-store interface over a real ZooKeeper, through kazoo.

Theory of operation.  Each :meth:`ZooKeeperStore.session` is its own
``KazooClient`` (its own ZooKeeper session), all rooted at the store's chroot.
Calls block on kazoo's async results with a timeout, and kazoo's exceptions are
translated to ours.  kazoo runs watches and state changes on its own threads;
they are handed to ``scheduler.call_soon_threadsafe`` so that all of our code
runs on the scheduler's thread.

Batched reads use ZooKeeper's ``multiRead`` (opcode 22, ZooKeeper 3.6+), which
kazoo does not expose: :class:`_MultiRead` is that request in kazoo's own
serialisation style, so ``get_many`` of a thousand partition states is one round
trip.  Every request a session sends passes through kazoo's ``_call``; counting
there gives the store's ``round_trips``.

``kill()`` imitates a crashed broker: the client stops reconnecting and its
socket is shut down without ZooKeeper's close-session request, so the server
keeps the session (and its ephemeral nodes) until the session timeout passes.

Disconnections.  kazoo queues a request made while it is reconnecting and sends it
once it is back, however late; it also drops every watch at a disconnection.  So a
session that is not connected refuses at once with ``ConnectionLoss`` (as the
embedded store does for a cut session), a request that times out is taken back
out of kazoo's queue if it never left, and a watch dropped by a disconnection is
told ``RECONNECTED`` once the session is back: its owner re-reads and watches
again, and misses no change made meanwhile.
"""
from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections import namedtuple
from typing import Any, Callable, Sequence

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.serialization import (
    EXCEPTIONS,
    GetData,
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
)
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.states import EventType as KzEventType, KazooState, KeeperState, ZnodeStat

from ..runtime import RealScheduler, Scheduler
from .store import (
    BadVersion,
    ConnectionLoss,
    EventType,
    InvalidPath,
    MetadataStore,
    NoChildrenForEphemerals,
    NoNode,
    NodeExists,
    NotEmpty,
    Op,
    Session,
    SessionExpired,
    Stat,
    StoreError,
    Watch,
    WatchEvent,
    check_create_path,
    check_path,
)

# kazoo's connection warnings (e.g. on kill(), by design) go here; a library stays quiet
# unless the application configures logging.
_LOG = logging.getLogger(__name__)
_LOG.addHandler(logging.NullHandler())

DEFAULT_SESSION_TIMEOUT_MS = 18000
OP_TIMEOUT_S = 15.0
# A 1 MB request (jute.maxbuffer) holds about 5,000 leaderAndIsr writes; stay well under.
ZK_MAX_BATCH_OPS = 1000
# ZooKeeper's own node under its root (quotas, dynamic config): never the store's to delete.
_RESERVED = "zookeeper"
# How a session reconnects after its connection drops: ZooKeeper's own client tries the next
# server at most a second later, however long the outage.  kazoo's default doubles its pause
# from 0.1 s up to an hour, so a 20 s outage was seen to end 14 s late -- past a 30 s session
# timeout the outage alone would not have reached.
RECONNECT_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}

_EVENT_TYPES = {
    KzEventType.CREATED: EventType.CREATED,
    KzEventType.DELETED: EventType.DELETED,
    KzEventType.CHANGED: EventType.CHANGED,
    KzEventType.CHILD: EventType.CHILD,
}

# Order matters: kazoo's ConnectionClosedError subclasses SessionExpiredError.
_ERRORS: tuple[tuple[type[Exception], type[StoreError]], ...] = (
    (kz.BadVersionError, BadVersion),
    (kz.NoNodeError, NoNode),
    (kz.NodeExistsError, NodeExists),
    (kz.NotEmptyError, NotEmpty),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemerals),
    (kz.ConnectionClosedError, ConnectionLoss),
    (kz.SessionExpiredError, SessionExpired),
    (kz.ConnectionLoss, ConnectionLoss),
    (kz.OperationTimeoutError, ConnectionLoss),
)


def _translate(exc: BaseException, path: str = "") -> StoreError | None:
    for kz_type, ours in _ERRORS:
        if isinstance(exc, kz_type):
            return ours(path or type(exc).__name__)
    if isinstance(exc, kz.ZookeeperError):  # a server answer we have no name for
        return StoreError(f"{path}: {type(exc).__name__}")
    if isinstance(exc, kz.KazooException) or type(exc).__name__ == "KazooTimeoutError":
        return ConnectionLoss(f"{path}: {type(exc).__name__}")
    return None


def _stat(s: ZnodeStat) -> Stat:
    return Stat(s.version, s.ephemeralOwner, s.numChildren)


class _MultiRead(namedtuple("_MultiRead", "operations")):
    """ZooKeeper's multiRead request (getData sub-ops; each answers or fails on its own)."""

    type = 22

    def serialize(self) -> bytearray:
        b = bytearray()
        for op in self.operations:
            b.extend(MultiHeader(op.type, False, -1).serialize() + op.serialize())
        return b + multiheader_struct.pack(-1, True, -1)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        header, offset = MultiHeader.deserialize(buf, offset)
        while not header.done:
            if header.type == GetData.type:
                data, offset = read_buffer(buf, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(buf, offset))
                offset += stat_struct.size
                results.append((data or b"", stat))
            elif header.type == -1:
                err = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            else:
                raise ValueError(f"unexpected multiRead result type {header.type}")
            header, offset = MultiHeader.deserialize(buf, offset)
        return results


class ZooKeeperStore(MetadataStore):
    """Sessions against one ZooKeeper ensemble under ``chroot`` (created if missing; ``""``
    or ``"/"`` for ZooKeeper's own root)."""

    def __init__(self, hosts: str, chroot: str = "/kreplica", scheduler: Scheduler | None = None,
                 session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 connect_timeout_s: float = 15.0, op_timeout_s: float = OP_TIMEOUT_S) -> None:
        if chroot not in ("", "/"):
            # As ZooKeeper's own client checks a connect string's chroot.  kazoo took "/a//b"
            # for /a/b, and a "." or ".." name or a character the server refuses came back
            # as ConnectionLoss ("cannot reach ZooKeeper"), though the server was reached.
            try:
                check_path(chroot)
            except InvalidPath as exc:
                raise InvalidPath(f"chroot must look like /name, got {chroot!r}: {exc}") from None
        self.hosts = hosts
        self.chroot = chroot if chroot != "/" else ""
        self.scheduler = scheduler if scheduler is not None else RealScheduler()
        self.session_timeout_ms = int(session_timeout_ms)
        self.connect_timeout_s = connect_timeout_s
        #: how long one call waits for its answer before it is a ConnectionLoss
        self.op_timeout_s = op_timeout_s
        self.round_trips = 0
        self._count_lock = threading.Lock()
        # Sessions not yet ended (closed, killed or expired), for close() to end.
        self._sessions: list[ZooKeeperSession] = []
        self._sessions_lock = threading.Lock()
        #: a server this store started itself (``zookeeper+local://``), stopped on close
        self.owned_server: Any = None
        if self.chroot:
            boot = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000.0, logger=_LOG)
            try:
                boot.start(timeout=connect_timeout_s)
                boot.ensure_path(self.chroot)
            except Exception as exc:
                raise ConnectionLoss(f"cannot reach ZooKeeper at {hosts}: {exc}") from exc
            finally:
                boot.stop()
                boot.close()

    def _count(self) -> None:
        with self._count_lock:
            self.round_trips += 1

    def session(self, name: str = "", on_expired: Callable[[], None] | None = None) -> "ZooKeeperSession":
        s = ZooKeeperSession(self, name, on_expired)
        with self._sessions_lock:
            self._sessions.append(s)
        return s

    def _forget(self, session: "ZooKeeperSession") -> None:
        """An ended session: a long-running cluster opens new ones for good (expiries,
        restarts), and the store must not hold every one it ever made."""
        with self._sessions_lock:
            if session in self._sessions:
                self._sessions.remove(session)

    def close(self) -> None:
        with self._sessions_lock:
            live, self._sessions = self._sessions, []
        for s in live:
            s.close()
        if self.owned_server is not None:
            self.owned_server.stop()
            self.owned_server = None


class ZooKeeperSession(Session):
    max_batch_ops = ZK_MAX_BATCH_OPS

    def __init__(self, store: ZooKeeperStore, name: str, on_expired: Callable[[], None] | None) -> None:
        self.store = store
        self.name = name
        self.on_expired = on_expired
        self.expired = False
        self.closed = False
        self.killed = False
        self._sched = store.scheduler
        self._wrappers: dict[tuple[Watch, str, bool], Callable[[Any], None]] = {}
        # watches a disconnection dropped, told RECONNECTED when the session is back
        self._dropped: list[tuple[Watch, str]] = []
        self._dropped_lock = threading.Lock()
        self._client_done = False
        self._chrooted = bool(store.chroot)
        client = KazooClient(hosts=store.hosts + store.chroot, timeout=store.session_timeout_ms / 1000.0,
                             connection_retry=dict(RECONNECT_RETRY), logger=_LOG)
        self.client = client
        raw_call = client._call

        def counted_call(request: Any, async_object: Any) -> Any:
            store._count()
            return raw_call(request, async_object)

        client._call = counted_call  # type: ignore[method-assign]
        client.add_listener(self._on_state)
        try:
            client.start(timeout=store.connect_timeout_s)
        except Exception as exc:
            client.stop()
            client.close()
            raise ConnectionLoss(f"cannot reach ZooKeeper at {store.hosts}: {exc}") from exc
        self.session_id = int(client.client_id[0])

    # -- state and watches (kazoo threads -> scheduler thread)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST and not (self.closed or self.killed or self.expired):
            self.expired = True
            # Watches a disconnection dropped learn of the expiry, as the live ones do, first.
            self._flush_dropped(EventType.SESSION_EXPIRED)
            self._sched.call_soon_threadsafe(self._after_expiry)
        elif state == KazooState.CONNECTED:
            self._flush_dropped(EventType.RECONNECTED)

    def _flush_dropped(self, etype: EventType) -> None:
        with self._dropped_lock:
            dropped, self._dropped = self._dropped, []
        for watch, path in dropped:
            self._sched.call_soon_threadsafe(self._notify, watch, WatchEvent(etype, path))

    def _after_expiry(self) -> None:
        # kazoo would quietly open a fresh session; ours is over, as ZooKeeper's is.
        self._release_client()
        self.store._forget(self)
        if self.on_expired is not None and not self.closed:
            self.on_expired()

    def _release_client(self) -> None:
        """Stop the kazoo client (no reconnection, no new session) and free its sockets; once."""
        if self._client_done:
            return
        self._client_done = True
        self.client.stop()
        self.client.close()

    def _notify(self, watch: Watch, event: WatchEvent) -> None:
        if not (self.killed or self.closed):
            watch(event)

    def _wrap(self, watch: Watch, path: str, child: bool) -> Callable[[Any], None]:
        """One kazoo watcher per (watch, path, kind), so a re-registration is not doubled."""
        key = (watch, path, child)
        wrapper = self._wrappers.get(key)
        if wrapper is None:
            def wrapper(event: Any) -> None:
                self._wrappers.pop(key, None)
                if self.killed or self.closed:
                    return
                etype = _EVENT_TYPES.get(event.type)
                if etype is None and event.state == KeeperState.CONNECTING:
                    # Dropped by a disconnection, not fired: the session lives on. Told once
                    # it is back (at once if it already is), so the owner's re-read can work.
                    with self._dropped_lock:
                        if not self.client.connected:
                            self._dropped.append((watch, path))
                            return
                    etype = EventType.RECONNECTED
                elif etype is None:
                    etype = EventType.SESSION_EXPIRED
                self._sched.call_soon_threadsafe(self._notify, watch, WatchEvent(etype, path))
            self._wrappers[key] = wrapper
        return wrapper

    def _wait(self, async_result: Any, path: str) -> Any:
        try:
            return async_result.get(timeout=self.store.op_timeout_s)
        except Exception as exc:
            if not async_result.ready():
                self._withdraw(async_result)
            ours = _translate(exc, path)
            if ours is None:
                raise
            raise ours from exc

    def _withdraw(self, async_result: Any) -> None:
        """Take a timed-out request back out of kazoo's queue, so that a call reported as
        failed is not sent when the connection returns.  Only while disconnected: kazoo's
        connection thread sends from the head of the queue only while connected."""
        client = self.client
        if client.connected:
            return  # on the wire or about to be: ZooKeeper's ConnectionLoss allows either outcome
        for entry in list(client._queue):
            if entry[1] is async_result:
                with contextlib.suppress(ValueError):  # kazoo failed it meanwhile
                    client._queue.remove(entry)
                return

    def _enter(self) -> KazooClient:
        if self.expired:
            raise SessionExpired(f"session {self.session_id:#x}")
        if self.closed or self.killed:
            raise ConnectionLoss(f"session {self.session_id:#x} is closed")
        if not self.client.connected:
            raise ConnectionLoss(f"session {self.session_id:#x} is not connected to ZooKeeper")
        return self.client

    # -- operations

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequential: bool = False, makepath: bool = False) -> str:
        check_create_path(path, sequential)
        c = self._enter()
        return self._wait(c.create_async(path, data, ephemeral=ephemeral, sequence=sequential,
                                         makepath=makepath), path)

    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, Stat]:
        check_path(path)
        c = self._enter()
        w = None if watch is None else self._wrap(watch, path, False)
        data, stat = self._wait(c.get_async(path, w), path)
        return data or b"", _stat(stat)

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        for path in paths:
            check_path(path)
        c = self._enter()
        if not paths:
            return []
        async_result = c.handler.async_result()
        c._call(_MultiRead([GetData(c.chroot + p, None) for p in paths]), async_result)
        out: list[tuple[bytes, Stat] | None] = []
        for path, result in zip(paths, self._wait(async_result, paths[0])):
            if isinstance(result, kz.NoNodeError):
                out.append(None)
            elif isinstance(result, Exception):
                raise _translate(result, path) or result
            else:
                out.append((result[0], _stat(result[1])))
        return out

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        check_path(path)
        c = self._enter()
        return _stat(self._wait(c.set_async(path, data, version), path))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        check_path(path)
        c = self._enter()
        if not recursive:
            self._wait(c.delete_async(path, version), path)
            return
        if version != -1:  # as the server's own check: any other number must match
            stat = self.exists(path)
            if stat is None:
                raise NoNode(path)
            if stat.version != version:
                raise BadVersion(path)
        self._delete_tree(c, path)

    def _delete_tree(self, c: KazooClient, path: str) -> None:
        """Children first, each call bounded by the operation timeout (kazoo's own recursive
        delete waits without one, so an unreachable server would hang the caller)."""
        try:
            children = self._wait(c.get_children_async(path), path)
        except NoNode:
            return
        for child in children:
            if path == "/" and child == _RESERVED and not self._chrooted:
                continue  # ZooKeeper's own /zookeeper (quota, config) refuses deletion
            self._delete_tree(c, f"{path.rstrip('/')}/{child}")
        if path == "/":  # the store's chroot: emptied, kept (the memory store's root is too)
            return
        with contextlib.suppress(NoNode):  # another client removed it meanwhile, as kazoo's delete allows
            self._wait(c.delete_async(path), path)

    def exists(self, path: str, watch: Watch | None = None) -> Stat | None:
        check_path(path)
        c = self._enter()
        w = None if watch is None else self._wrap(watch, path, False)
        stat = self._wait(c.exists_async(path, w), path)
        return None if stat is None else _stat(stat)

    def get_children(self, path: str, watch: Watch | None = None) -> list[str]:
        check_path(path)
        c = self._enter()
        w = None if watch is None else self._wrap(watch, path, True)
        return sorted(self._wait(c.get_children_async(path, w), path))

    def multi(self, ops: Sequence[Op]) -> list[object]:
        for op in ops:
            check_create_path(op.path, op.kind == "create" and op.sequential)
        c = self._enter()
        t = c.transaction()
        for op in ops:
            if op.kind == "check":
                t.check(op.path, op.version)
            elif op.kind == "create":
                t.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
                if op.sequential:
                    # kazoo's plain create keeps a sequential path's trailing slash, its
                    # transaction's does not: under a chroot, "/" would name the chroot's
                    # sibling. Prefix it as the plain create does.
                    t.operations[-1] = t.operations[-1]._replace(
                        path=_prefix_root(c.chroot, op.path, trailing=True))
            elif op.kind == "set":
                t.set_data(op.path, op.data, op.version)
            elif op.kind == "delete":
                t.delete(op.path, op.version)
            else:
                raise ValueError(f"unknown op kind {op.kind!r}")
        results = self._wait(t.commit_async(), ops[0].path if ops else "")
        for i, r in enumerate(results):
            if isinstance(r, Exception) and not isinstance(r, kz.RolledBackError):
                err = _translate(r, ops[i].path) or StoreError(f"{ops[i].path}: {r!r}")
                err.op_index = i
                raise err
        return [_stat(r) if isinstance(r, ZnodeStat) else r for r in results]

    # -- endings

    def close(self) -> None:
        if self.closed or self.killed:
            return
        self.closed = True
        # Even after an expiry: until _after_expiry has run, kazoo is opening a new session.
        self._release_client()
        self.store._forget(self)

    def kill(self) -> None:
        if self.closed or self.killed or self.expired:
            return
        self.killed = True
        self._client_done = True
        self.store._forget(self)
        c = self.client
        # Stop kazoo from reconnecting, then drop the TCP connection without the
        # close-session request: the server keeps the session until it times out.
        c._stopped.set()
        conn = c._connection
        sock = conn._socket
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        conn.connection_stopped.wait(self.store.op_timeout_s)
        c.handler.stop()  # its callback threads; client.stop() would have stopped them
        c.close()

    def __repr__(self) -> str:
        return f"ZooKeeperSession(id={self.session_id:#x}, name={self.name!r})"
