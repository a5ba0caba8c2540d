"""The metadata store interface: a ZooKeeper-shaped tree of versioned nodes.

Theory of operation.  A :class:`MetadataStore` is the shared tree; each broker
talks to it through its own :class:`Session` (as each Kafka broker has its own
ZooKeeper client).  Ephemeral nodes belong to the session that created them and
vanish when it closes or expires.  Every node has a ``version`` that each
``set`` increments; ``set``/``delete`` given a ``version`` other than -1 succeed only
at that version, otherwise raise :class:`BadVersion` -- the conditional write that
the controller and ISR-changing leaders rely on (seed 001 step 3.3).

Watches are one-shot, as ZooKeeper's: a ``watch`` callable passed to ``get``,
``exists`` or ``get_children`` is called once with a :class:`WatchEvent` at the
next change, always on the runtime's scheduler (never re-entrantly inside the
call that changed the node, never on a foreign thread).
"""
from __future__ import annotations

import abc
import enum
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import KReplicaError
from ..fast_init import fast_init


# The characters ZooKeeper's server refuses in a path.  It checks UTF-16 code units, so a
# character past U+FFFF (a surrogate pair there) is refused as well.
_REFUSED_IN_PATHS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


class InvalidPath(ValueError):
    """A path no ZooKeeper node can have (:func:`check_path`); no call is sent with it."""


def check_path(path: str, named: str | None = None) -> None:
    """:class:`InvalidPath` for a path ZooKeeper's own client refuses: one not starting
    with ``/``, ending with one (but the root), naming an empty node (``//``) or a node
    ``.`` or ``..``, or holding a character the server refuses.  kazoo normalises some of
    these instead (``/p/`` and ``p`` were taken for ``/p``, and ``//`` for the root, so a
    recursive delete of ``//`` deleted the store's chroot node), and through kazoo a refused
    character came back as UNKNOWN_SERVER_ERROR (a lone surrogate, which UTF-8 cannot
    encode, even dropped the connection).  Both stores raise it for every call naming
    such a path, reads included; the memory store, which never makes such a node,
    checks a path only when it finds no node there.  A sequential create's path is
    checked with a digit after it, as ZooKeeper's PathUtils checks it: ``/p/`` names
    ``/p``'s child there.  The error names ``named`` (the path as the caller gave it, when
    that is not the text checked), else ``path``."""
    shown = path if named is None else named
    if not path.startswith("/") or (len(path) > 1 and path.endswith("/")) or "//" in path:
        raise InvalidPath(f"invalid path {shown!r}")
    if "/." in path and any(name in (".", "..") for name in path.split("/")):
        raise InvalidPath(f"invalid path {shown!r}: relative paths not allowed")
    bad = _REFUSED_IN_PATHS.search(path)
    if bad is not None:
        raise InvalidPath(f"invalid path {shown!r}: invalid character {bad.group()!r} at {bad.start()}")


def check_create_path(path: str, sequential: bool) -> None:
    """:func:`check_path` for a create: a sequential one is checked with a digit after it,
    and its last name may not be ``.`` or ``..`` either.  ZooKeeper itself would number
    ``/p/.`` as ``/p/.0000000000``, but kazoo, through which ZooKeeperStore sends every
    create, refuses the path (a bare ValueError naming no path), so neither store makes
    such a node.  Checked with the digit, the path is named as given (``/a//b``, not
    ``/a//b1``, which the caller never named)."""
    if not sequential:
        check_path(path)
        return
    check_path(path + "1", named=path)
    if path.endswith(("/.", "/..")):
        raise InvalidPath(f"invalid path {path!r}: relative paths not allowed")


class StoreError(KReplicaError):
    """Base of metadata-store failures (named as ZooKeeper's).

    When raised by :meth:`Session.multi`, ``op_index`` is the index of the op
    that failed (the whole transaction was rolled back); otherwise ``None``.
    """

    op_index: int | None = None


# ``name`` is ZooKeeper's KeeperException code name (these are not Kafka error codes).

class NoNode(StoreError):
    name = "NONODE"


class NodeExists(StoreError):
    name = "NODEEXISTS"


class BadVersion(StoreError):
    name = "BADVERSION"


class NotEmpty(StoreError):
    name = "NOTEMPTY"


class SessionExpired(StoreError):
    name = "SESSIONEXPIRED"


class ConnectionLoss(StoreError):
    """The store could not be reached (for example, a simulated network partition)."""

    name = "CONNECTIONLOSS"


class NoChildrenForEphemerals(StoreError):
    """ZooKeeper refuses children under an ephemeral node."""

    name = "NOCHILDRENFOREPHEMERALS"


class EventType(enum.Enum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"
    SESSION_EXPIRED = "SESSION_EXPIRED"
    #: the watch was dropped by a disconnection and the session is back: the node may have
    #: changed meanwhile, so read it again (and watch again).  ZooKeeper's store only; the
    #: embedded store keeps watches through a cut and delivers what fired at the reconnection.
    RECONNECTED = "RECONNECTED"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    path: str


Watch = Callable[[WatchEvent], None]


@fast_init
@dataclass(frozen=True, slots=True)
class Stat:
    version: int
    ephemeral_owner: int = 0  # session id, 0 when persistent
    num_children: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a transaction: kind is check, create, set or delete.

    ``multi`` returns, per op: check -> True, create -> the created path,
    set -> the new :class:`Stat`, delete -> True.
    """

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    sequential: bool = False

    @staticmethod
    def check(path: str, version: int = -1) -> "Op":
        return Op("check", path, version=version)

    @staticmethod
    def create(path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequential: bool = False) -> "Op":
        return Op("create", path, data, ephemeral=ephemeral, sequential=sequential)

    @staticmethod
    def set(path: str, data: bytes, version: int = -1) -> "Op":
        return Op("set", path, data, version)

    @staticmethod
    def delete(path: str, version: int = -1) -> "Op":
        return Op("delete", path, version=version)


class Session(abc.ABC):
    """One client's connection to the store."""

    session_id: int
    #: how many ops one ``multi``/``get_many`` should carry (ZooKeeper's jute.maxbuffer bounds it)
    max_batch_ops: int = 1 << 30

    @abc.abstractmethod
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequential: bool = False, makepath: bool = False) -> str: ...

    @abc.abstractmethod
    def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, Stat]: ...

    @abc.abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> Stat: ...

    @abc.abstractmethod
    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None: ...

    @abc.abstractmethod
    def exists(self, path: str, watch: Watch | None = None) -> Stat | None: ...

    @abc.abstractmethod
    def get_children(self, path: str, watch: Watch | None = None) -> list[str]: ...

    @abc.abstractmethod
    def multi(self, ops: Sequence[Op]) -> list[object]:
        """Apply all ops atomically or none; raise the first op's error."""

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Read many nodes in one round trip where the store can (None for a missing node).

        Seed 001 step 3 asks for the controller's reads to be batched ("ideally ... ZK
        multi"); stores override this with a single request.
        """
        out: list[tuple[bytes, Stat] | None] = []
        for path in paths:
            try:
                out.append(self.get(path))
            except NoNode:
                out.append(None)
        return out

    @abc.abstractmethod
    def close(self) -> None:
        """Close cleanly: ephemeral nodes are removed at once."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Die without closing (a crashed broker): the session expires after its timeout."""

    def ensure_path(self, path: str) -> None:
        try:
            self.create(path, b"", makepath=True)
        except NodeExists:
            pass


class MetadataStore(abc.ABC):
    #: requests sent to the store by all of its sessions (a multi or a batched read is one)
    round_trips: int = 0
    @abc.abstractmethod
    def session(self, name: str = "", on_expired: Callable[[], None] | None = None) -> Session:
        """Open a new client session."""

    def close(self) -> None:
        """Release the store (stop servers or clients it owns)."""
