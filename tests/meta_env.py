"""One harness for the metadata-store suites: the same test body drives MemoryStore on
virtual time and ZooKeeperStore on the wall clock."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from kreplica.meta.store import ConnectionLoss, MetadataStore, WatchEvent
from kreplica.runtime import RealScheduler, SimScheduler


@dataclass
class StoreEnv:
    kind: str  # "memory" or "zookeeper"
    store: MetadataStore
    sched: SimScheduler | RealScheduler
    session_timeout_ms: int
    chroot: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    def wait(self, predicate: Callable[[], bool], timeout_ms: int = 10_000) -> bool:
        return self.sched.run_until(predicate, timeout_ms)

    def quiesce(self) -> None:
        """Let any in-flight watch deliveries run (virtual: now; real: a short while)."""
        self.sched.advance(0 if self.kind == "memory" else 300)


class Recorder:
    """A watch that records the events it was given."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []

    def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type.value for e in self.events]


def expire_from_a_twin(session: Any, hosts: str) -> None:
    """Expire a ZooKeeper session the server's own way: a second client presents its id
    and password, then closes it (``hosts`` includes the store's chroot)."""
    from kazoo.client import KazooClient

    sid, password = session.client.client_id
    twin = KazooClient(hosts=hosts, client_id=(sid, password))
    twin.start(timeout=15)
    twin.stop()
    twin.close()


def negotiated_timeout_ms(server: Any, session: Any) -> int:
    """The session timeout ZooKeeper granted ``session``, from the server's ``cons`` list."""
    import re

    from kreplica.meta.zk_server import four_letter_word

    cons = four_letter_word(server.host, server.port, "cons")
    found = re.search(rf"sid=0x0*{session.session_id:x},.*?to=(\d+)", cons)
    assert found, cons
    return int(found.group(1))


def killed_with_an_ephemeral_and_a_watch(store: MetadataStore) -> tuple[Any, list[str]]:
    """A session that made an ephemeral ``/e`` and watched it, then was killed (a crashed
    broker): (the session, what its expiry callback and watch were told).  The killed
    session's own calls fail with ConnectionLoss at once."""
    import pytest

    called: list[str] = []
    s = store.session("b1", on_expired=lambda: called.append("expired"))
    s.create("/e", ephemeral=True)
    s.exists("/e", lambda ev: called.append(ev.type.value))
    s.kill()
    with pytest.raises(ConnectionLoss):
        s.get("/e")
    return s, called


def meanwhile(obj: Any, name: str, action: Callable[[], object], *, after: bool = False,
              every_call: bool = False) -> None:
    """Make ``obj.<name>`` run ``action`` -- another client's move -- just before its own
    work (or just after it, ``after=True``): the first call only, unless ``every_call``.
    ``del obj.<name>`` puts the method back."""
    original = getattr(obj, name)
    calls: list[None] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = every_call or not calls
        calls.append(None)
        if run and not after:
            action()
        result = original(*args, **kwargs)
        if run and after:
            action()
        return result

    setattr(obj, name, wrapper)
