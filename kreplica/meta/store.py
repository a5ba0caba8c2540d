"""The metadata store interface: a ZooKeeper-shaped tree of versioned nodes.

Theory of operation.  A :class:`MetadataStore` is the shared tree; each broker
talks to it through its own :class:`Session` (as each Kafka broker has its own
ZooKeeper client).  Ephemeral nodes belong to the session that created them and
vanish when it closes or expires.  Every node has a ``version`` that each
``set`` increments; ``set``/``delete`` given ``version >= 0`` succeed only at
that version, otherwise raise :class:`BadVersion` -- the conditional write that
the controller and ISR-changing leaders rely on (seed 001 step 3.3).

Watches are one-shot, as ZooKeeper's: a ``watch`` callable passed to ``get``,
``exists`` or ``get_children`` is called once with a :class:`WatchEvent` at the
next change, always on the runtime's scheduler (never re-entrantly inside the
call that changed the node, never on a foreign thread).
"""
from __future__ import annotations

import abc
import enum
from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import KReplicaError


class StoreError(KReplicaError):
    """Base of metadata-store failures (named as ZooKeeper's)."""


class NoNode(StoreError):
    pass


class NodeExists(StoreError):
    pass


class BadVersion(StoreError):
    pass


class NotEmpty(StoreError):
    pass


class SessionExpired(StoreError):
    pass


class ConnectionLoss(StoreError):
    """The store could not be reached (for example, a simulated network partition)."""


class EventType(enum.Enum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"
    SESSION_EXPIRED = "SESSION_EXPIRED"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    path: str


Watch = Callable[[WatchEvent], None]


@dataclass(frozen=True, slots=True)
class Stat:
    version: int
    ephemeral_owner: int = 0  # session id, 0 when persistent
    num_children: int = 0


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a transaction: kind is check, create, set or delete."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False


class Session(abc.ABC):
    """One client's connection to the store."""

    session_id: int

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

    @abc.abstractmethod
    def close(self) -> None:
        """Close cleanly: ephemeral nodes are removed at once."""

    def ensure_path(self, path: str) -> None:
        try:
            self.create(path, b"", makepath=True)
        except NodeExists:
            pass


class MetadataStore(abc.ABC):
    @abc.abstractmethod
    def session(self, name: str = "", on_expired: Callable[[], None] | None = None) -> Session:
        """Open a new client session."""

    def close(self) -> None:
        """Release the store (stop servers or clients it owns)."""
