"""MemoryStore: the embedded metadata store, a ZooKeeper-shaped tree on the runtime's clock.

Theory of operation.  The tree is a flat ``dict`` from path to :class:`_Node`; each
node keeps its children's names, so ``get_children`` never scans.  Every mutation
produces watch events into a list that is dispatched only once the operation (or
the whole ``multi``) has succeeded, so a rolled-back transaction fires nothing.
Watches are one-shot and handed to ``scheduler.call_soon``: a watcher never runs
inside the call that changed the node.

Sessions behave as ZooKeeper's.  A live client pings every ``timeout/3`` (as the
ZooKeeper client does when idle); the store expires a session that it has not
heard from for ``zookeeper.session.timeout.ms`` of scheduler time, deletes its
ephemeral nodes (firing other sessions' watches) and tells the owner.  A session
that is partitioned away (``set_reachable(False)``) gets ``ConnectionLoss`` for
every operation and its pings stop arriving; like a real client it only learns of
its expiry (``on_expired``, ``SESSION_EXPIRED`` watch events) once it can reach the
store again.  A killed session (a crashed broker) also stops pinging, but nothing
is delivered to it any more: a dead process runs no callbacks.

Everything is ordered by the scheduler, so the same operations give the same
events in the same order on every run.
"""
from __future__ import annotations

import bisect
import enum
from typing import Any, Callable, Sequence

from ..runtime import Scheduler
from .store import (
    BadVersion,
    ConnectionLoss,
    EventType,
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

DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms default

# Watch tables: data watches (get/exists) and child watches (get_children).
_DATA = 0
_CHILD = 1


class SessionState(enum.Enum):
    ALIVE = "ALIVE"
    CLOSED = "CLOSED"
    EXPIRED = "EXPIRED"


class _Node:
    __slots__ = ("data", "version", "owner", "children", "cversion")

    def __init__(self, data: bytes, owner: int) -> None:
        self.data = data
        self.version = 0
        self.owner = owner
        self.children: dict[str, None] = {}
        # ZooKeeper numbers sequential children from the parent's cversion, which
        # (as a real 3.8 server shows) counts child creations only.
        self.cversion = 0

    def stat(self) -> Stat:
        return Stat(self.version, self.owner, len(self.children))


def _parent(path: str) -> str:
    i = path.rfind("/")
    return path[:i] if i > 0 else "/"


class MemoryStore(MetadataStore):
    """The embedded default metadata store (one per cluster)."""

    def __init__(self, scheduler: Scheduler,
                 session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> None:
        if session_timeout_ms <= 0:
            raise ValueError("session_timeout_ms must be positive")
        self.scheduler = scheduler
        self.session_timeout_ms = int(session_timeout_ms)
        self.round_trips = 0
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0)}
        self._watches: tuple[dict[str, dict[tuple[int, Watch], MemorySession]], ...] = ({}, {})
        self._sessions: dict[int, MemorySession] = {}
        self._ephemerals: dict[int, dict[str, None]] = {}
        self._next_session_id = 1

    def session(self, name: str = "", on_expired: Callable[[], None] | None = None) -> "MemorySession":
        sid = self._next_session_id
        self._next_session_id += 1
        s = MemorySession(self, sid, name, on_expired)
        self._sessions[sid] = s
        self._ephemerals[sid] = {}
        return s

    def close(self) -> None:
        for s in list(self._sessions.values()):
            if s.state is SessionState.ALIVE:
                s.close()

    # -- tree primitives: each appends watch events; ``undo`` (multi only) records what
    # to restore, as plain tuples -- a transaction of 10k writes makes no closures.

    def _create(self, sid: int, path: str, data: bytes, ephemeral: bool, sequential: bool,
                events: list[tuple[int, str, EventType]], undo: list[tuple[Any, ...]] | None) -> str:
        if not isinstance(data, bytes):
            raise TypeError("node data must be bytes")
        # As ZooKeeper's PathUtils: a sequential path is checked with a digit after it, so
        # "/p/" is fine there (it names /p's child /p/0000000000) and "/" too.
        check_create_path(path, sequential)
        if path == "/" and not sequential:
            raise NodeExists(path)
        ppath = _parent(path)
        parent = self._nodes.get(ppath)
        if parent is None:
            raise NoNode(ppath)
        if parent.owner:
            raise NoChildrenForEphemerals(path)
        if sequential:
            path = f"{path}{parent.cversion:010d}"
        if path in self._nodes:
            raise NodeExists(path)
        owner = sid if ephemeral else 0
        self._nodes[path] = _Node(data, owner)
        name = path[len(ppath):].lstrip("/")
        parent.children[name] = None
        parent.cversion += 1
        if owner:
            self._ephemerals[owner][path] = None
        events.append((_DATA, path, EventType.CREATED))
        events.append((_CHILD, ppath, EventType.CHILD))
        if undo is not None:
            undo.append(("create", path, parent, name, owner))
        return path

    def _node_at(self, path: str, version: int) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            check_path(path)  # never made here: ZooKeeperStore refuses it by name
            raise NoNode(path)
        # Only -1 matches any version: ZooKeeper compares every other number (so -2 never matches).
        if version != -1 and node.version != version:
            raise BadVersion(f"{path}: expected version {version}, found {node.version}")
        return node

    def _set(self, path: str, data: bytes, version: int,
             events: list[tuple[int, str, EventType]], undo: list[tuple[Any, ...]] | None) -> Stat:
        if not isinstance(data, bytes):
            raise TypeError("node data must be bytes")
        node = self._node_at(path, version)
        if undo is not None:
            undo.append(("set", node, node.data, node.version))
        node.data = data
        node.version += 1
        events.append((_DATA, path, EventType.CHANGED))
        return Stat(node.version, node.owner, len(node.children))

    def _delete(self, path: str, version: int,
                events: list[tuple[int, str, EventType]], undo: list[tuple[Any, ...]] | None) -> None:
        if path == "/":
            raise ValueError("the root cannot be deleted")
        node = self._node_at(path, version)
        if node.children:
            raise NotEmpty(path)
        ppath = _parent(path)
        parent = self._nodes[ppath]
        name = path[len(ppath):].lstrip("/")
        del self._nodes[path]
        del parent.children[name]
        if node.owner:
            del self._ephemerals[node.owner][path]
        events.append((_DATA, path, EventType.DELETED))
        events.append((_CHILD, path, EventType.DELETED))
        events.append((_CHILD, ppath, EventType.CHILD))
        if undo is not None:
            undo.append(("delete", path, node, parent, name))

    def _rollback(self, undo: list[tuple[Any, ...]]) -> None:
        for entry in reversed(undo):
            kind = entry[0]
            if kind == "set":
                _, node, data, version = entry
                node.data, node.version = data, version
            elif kind == "create":
                _, path, parent, name, owner = entry
                del self._nodes[path]
                del parent.children[name]
                parent.cversion -= 1
                if owner:
                    del self._ephemerals[owner][path]
            else:
                _, path, node, parent, name = entry
                self._nodes[path] = node
                parent.children[name] = None
                if node.owner:
                    self._ephemerals[node.owner][path] = None

    # -- watches

    def _add_watch(self, table: int, path: str, session: "MemorySession", watch: Watch) -> None:
        # ZooKeeper registers a given watcher once per path and kind.
        self._watches[table].setdefault(path, {})[(session.session_id, watch)] = session

    def _dispatch(self, events: list[tuple[int, str, EventType]]) -> None:
        tables = self._watches
        for table, path, etype in events:
            watchers = tables[table].pop(path, None)
            if watchers:
                event = WatchEvent(etype, path)
                for (_, watch), session in watchers.items():
                    session._deliver(watch, event)

    # -- session lifecycle (called by MemorySession)

    def _end_session(self, sid: int) -> list[tuple[Watch, str]]:
        """Forget a closed or expired session: its watches (returned) and its ephemerals."""
        dropped = self._drop_watches(sid)
        events: list[tuple[int, str, EventType]] = []
        for path in list(self._ephemerals[sid]):
            self._delete(path, -1, events, None)
        del self._ephemerals[sid]
        del self._sessions[sid]
        self._dispatch(events)
        return dropped

    def _drop_watches(self, sid: int) -> list[tuple[Watch, str]]:
        dropped: list[tuple[Watch, str]] = []
        for table in self._watches:
            for path in list(table):
                watchers = table[path]
                for key in [k for k in watchers if k[0] == sid]:
                    del watchers[key]
                    dropped.append((key[1], path))
                if not watchers:
                    del table[path]
        return dropped


class MemorySession(Session):
    """One client of a :class:`MemoryStore` (one broker's ZooKeeper connection)."""

    def __init__(self, store: MemoryStore, session_id: int, name: str,
                 on_expired: Callable[[], None] | None) -> None:
        self.store = store
        self.session_id = session_id
        self.name = name
        self.on_expired = on_expired
        self.state = SessionState.ALIVE
        self.reachable = True
        self.heartbeating = True
        self.killed = False
        sched = store.scheduler
        self._sched = sched
        self._last_heard_ms = sched.now_ms()
        self._ping_interval_ms = max(1, store.session_timeout_ms // 3)
        # Notices (watch events, expiry) run in the order they were sent, once each:
        # (sequence number, callback, args) of those waiting, sorted; see _arrive.
        self._held: list[tuple[int, Callable[..., Any], tuple[Any, ...]]] = []
        self._sent = 0
        self._next = 1
        self._ping_timer = sched.call_later(self._ping_interval_ms, self._ping)
        self._expiry_timer = sched.call_later(store.session_timeout_ms, self._check_expiry)

    # -- liveness

    def _ping(self) -> None:
        if self.state is not SessionState.ALIVE:
            return
        if self.heartbeating and self.reachable:
            self._last_heard_ms = self._sched.now_ms()
        self._ping_timer = self._sched.call_later(self._ping_interval_ms, self._ping)

    def _check_expiry(self) -> None:
        """The store's side: expire a session not heard from for the whole timeout."""
        if self.state is not SessionState.ALIVE:
            return
        due = self._last_heard_ms + self.store.session_timeout_ms
        if self._sched.now_ms() >= due:
            self._expire()
        else:
            self._expiry_timer = self._sched.call_later(due - self._sched.now_ms(), self._check_expiry)

    def _expire(self) -> None:
        store = self.store
        self.state = SessionState.EXPIRED
        self._ping_timer.cancel()
        dropped = store._end_session(self.session_id)
        # Like kazoo, outstanding watches learn of the expiry before the owner's callback.
        for watch, path in dropped:
            self._deliver(watch, WatchEvent(EventType.SESSION_EXPIRED, path))
        if self.on_expired is not None:
            self._deliver(self.on_expired)

    def _deliver(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.killed or self.state is SessionState.CLOSED:
            return
        self._sent += 1
        if self.reachable:
            self._sched.call_soon(self._arrive, fn, args, self._sent)
        else:
            self._held.append((self._sent, fn, args))

    def _arrive(self, fn: Callable[..., Any], args: tuple[Any, ...], n: int) -> None:
        # A notice is on the wire until it runs: if the session lost the store (a cut, or
        # its process paused) in the same instant, it waits for the reconnection, as
        # ZooKeeper's client learns of watches that fired while it was away. It also waits
        # for every notice sent before it: one held across a cut and re-sent at the
        # reconnection must not be overtaken by a later one that was still on the wire.
        if self.killed or self.state is SessionState.CLOSED:
            return
        if not self.reachable or n != self._next:
            bisect.insort(self._held, (n, fn, args))
            return
        self._next = n + 1
        fn(*args)
        held = self._held
        if held and held[0][0] == self._next and self.reachable:
            _n, fn, args = held.pop(0)
            self._sched.call_soon(self._arrive, fn, args, _n)

    def pause_heartbeats(self) -> None:
        """Stop pinging (a stalled process, e.g. a long GC pause); the session may expire."""
        self.heartbeating = False

    def resume_heartbeats(self) -> None:
        if self.killed:
            return
        self.heartbeating = True
        if self.state is SessionState.ALIVE and self.reachable:
            # The client pings at once on waking; the ping timer chain keeps running.
            self._last_heard_ms = self._sched.now_ms()

    def kill(self) -> None:
        """The owner crashed: no more pings, no more callbacks; the store expires it later."""
        self.killed = True
        self.heartbeating = False

    def set_reachable(self, reachable: bool) -> None:
        """Simulate a network partition between this session and the store."""
        if reachable == self.reachable:
            return
        self.reachable = reachable
        if reachable:
            if self.state is SessionState.ALIVE and self.heartbeating:
                self._last_heard_ms = self._sched.now_ms()
            held, self._held = self._held, []
            for n, fn, args in held:
                self._sched.call_soon(self._arrive, fn, args, n)

    @property
    def expired(self) -> bool:
        return self.state is SessionState.EXPIRED

    def _enter(self) -> MemoryStore:
        if self.killed or not self.reachable:
            raise ConnectionLoss(f"session {self.session_id} cannot reach the store")
        if self.state is SessionState.EXPIRED:
            raise SessionExpired(f"session {self.session_id}")
        if self.state is SessionState.CLOSED:
            raise ConnectionLoss(f"session {self.session_id} is closed")
        store = self.store
        store.round_trips += 1
        return store

    # -- operations

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequential: bool = False, makepath: bool = False) -> str:
        store = self._enter()
        if not isinstance(data, bytes):
            # As kazoo: a wrong value is refused before anything is made, parents included.
            raise TypeError("node data must be bytes")
        events: list[tuple[int, str, EventType]] = []
        if makepath:
            self._make_parents(store, path, sequential, events)
        try:
            created = store._create(self.session_id, path, data, ephemeral, sequential, events, None)
        finally:
            store._dispatch(events)
        return created

    def _make_parents(self, store: MemoryStore, path: str, sequential: bool,
                      events: list[tuple[int, str, EventType]]) -> None:
        # Checked as the create will check it: "/p/q/" is a sequential child of /p/q.
        check_create_path(path, sequential)
        missing: list[str] = []
        p = _parent(path)
        while p != "/" and p not in store._nodes:
            missing.append(p)
            p = _parent(p)
        for p in reversed(missing):
            store._create(self.session_id, p, b"", False, False, events, None)

    def _watched(self, table: int, path: str, watch: Watch | None) -> _Node:
        """The node at ``path`` (NoNode if absent); a watch is only left on an existing node."""
        store = self._enter()
        node = store._nodes.get(path)
        if node is None:
            check_path(path)
            raise NoNode(path)
        if watch is not None:
            store._add_watch(table, path, self, watch)
        return node

    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, Stat]:
        node = self._watched(_DATA, path, watch)
        return node.data, Stat(node.version, node.owner, len(node.children))

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        store = self._enter()
        nodes = store._nodes
        out: list[tuple[bytes, Stat] | None] = []
        for path in paths:
            node = nodes.get(path)
            if node is None:
                check_path(path)
            out.append(None if node is None else (node.data, Stat(node.version, node.owner, len(node.children))))
        return out

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        store = self._enter()
        events: list[tuple[int, str, EventType]] = []
        stat = store._set(path, data, version, events, None)
        store._dispatch(events)
        return stat

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        store = self._enter()
        events: list[tuple[int, str, EventType]] = []
        try:
            if recursive:
                if version == -1 and path not in store._nodes:
                    # As kazoo's recursive delete (and ZooKeeperStore): the tree is gone
                    # already. A named version cannot match a missing node: NoNode below.
                    check_path(path)
                    return
                store._node_at(path, version)
                self._delete_tree(store, path, events)
            else:
                store._delete(path, version, events, None)
        finally:
            store._dispatch(events)

    def _delete_tree(self, store: MemoryStore, path: str, events: list[tuple[int, str, EventType]]) -> None:
        node = store._nodes[path]
        for name in list(node.children):
            self._delete_tree(store, f"{path.rstrip('/')}/{name}", events)
        if path != "/":
            store._delete(path, -1, events, None)

    def exists(self, path: str, watch: Watch | None = None) -> Stat | None:
        store = self._enter()
        node = store._nodes.get(path)
        if node is None:
            check_path(path)  # no watch on a node no create can make
        if watch is not None:
            # An exists watch is set whether or not the node is there (fires on creation).
            store._add_watch(_DATA, path, self, watch)
        return None if node is None else Stat(node.version, node.owner, len(node.children))

    def get_children(self, path: str, watch: Watch | None = None) -> list[str]:
        return sorted(self._watched(_CHILD, path, watch).children)

    def multi(self, ops: Sequence[Op]) -> list[object]:
        store = self._enter()
        events: list[tuple[int, str, EventType]] = []
        undo: list[tuple[Any, ...]] = []
        results: list[object] = []
        sid = self.session_id
        for i, op in enumerate(ops):
            try:
                kind = op.kind
                if kind == "set":
                    results.append(store._set(op.path, op.data, op.version, events, undo))
                elif kind == "check":
                    store._node_at(op.path, op.version)
                    results.append(True)
                elif kind == "create":
                    results.append(store._create(sid, op.path, op.data, op.ephemeral, op.sequential, events, undo))
                elif kind == "delete":
                    store._delete(op.path, op.version, events, undo)
                    results.append(True)
                else:
                    raise ValueError(f"unknown op kind {kind!r}")
            except (StoreError, ValueError, TypeError) as exc:
                store._rollback(undo)
                if isinstance(exc, StoreError):
                    exc.op_index = i
                raise
        store._dispatch(events)
        return results

    def close(self) -> None:
        if self.state is not SessionState.ALIVE or self.killed:
            return
        if not self.reachable:
            # The close-session request cannot reach the store: there the session lives on,
            # with its ephemeral nodes, until it times out, as a crashed owner's does.
            self.kill()
            return
        self.state = SessionState.CLOSED
        self._ping_timer.cancel()
        self._expiry_timer.cancel()
        self.store._end_session(self.session_id)

    def __repr__(self) -> str:
        return f"MemorySession(id={self.session_id}, name={self.name!r}, state={self.state.value})"
