"""Metadata-store addresses: ``"memory"`` or ``"zookeeper://host:port[,host:port]/chroot"``.

``Cluster.embedded(metadata=...)`` and the CLI take one string; :func:`open_store`
turns it into a store.  ``"zookeeper+local:///chroot"`` starts a private Debian
ZooKeeper (:class:`~kreplica.meta.zk_server.ZooKeeperServer`) owned by the store
and stopped when the store closes -- for the demo and CLI "with a real ZooKeeper".
Kafka's own ``--zookeeper host:port/chroot`` form is parsed by
:func:`parse_zookeeper_connect`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import arguments
from ..runtime import Scheduler
from .memory_store import DEFAULT_SESSION_TIMEOUT_MS, MemoryStore
from .store import MetadataStore

DEFAULT_CHROOT = "/kreplica"


@dataclass(frozen=True, slots=True)
class MetadataUri:
    kind: str  # "memory", "zookeeper" or "zookeeper+local"
    hosts: str = ""
    chroot: str = ""


def parse_zookeeper_connect(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/chroot"`` -> (hosts, chroot); chroot defaults to ``/kreplica``.

    Empty entries (``"h1:2181,,h2:2181"``, a trailing comma) are left out of ``hosts``,
    as ZooKeeper's own parser leaves them out; kazoo would refuse them ("bad hostname").
    """
    hosts, slash, chroot = connect.partition("/")
    entries = [hp for hp in hosts.split(",") if hp]
    if not entries:  # a chroot alone ("/x") or commas: kazoo would say only "bad hostname"
        raise ValueError(f"no ZooKeeper host in {connect!r}")
    for hp in entries:
        host, colon, port = hp.rpartition(":")
        if not colon or not host or not arguments.digits(port):
            raise ValueError(f"expected host:port, got {hp!r} in {connect!r}")
    chroot = "/" + chroot.strip("/") if slash and chroot.strip("/") else DEFAULT_CHROOT
    return ",".join(entries), chroot


def parse_metadata_uri(uri: str) -> MetadataUri:
    arguments.text(uri, "metadata store address", ValueError)
    if uri == "memory":
        return MetadataUri("memory")
    for scheme in ("zookeeper+local", "zookeeper"):
        prefix = scheme + "://"
        if uri.startswith(prefix):
            rest = uri[len(prefix):]
            if scheme == "zookeeper+local":
                if not rest.startswith("/"):
                    raise ValueError(f"zookeeper+local takes no host: {uri!r}")
                return MetadataUri(scheme, "", "/" + rest.strip("/") if rest.strip("/") else DEFAULT_CHROOT)
            hosts, chroot = parse_zookeeper_connect(rest)
            return MetadataUri(scheme, hosts, chroot)
    raise ValueError(f"unknown metadata store {uri!r}: use 'memory' or 'zookeeper://host:port/chroot'")


def open_store(uri: str, scheduler: Scheduler,
               session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> MetadataStore:
    """The store ``uri`` names, running on ``scheduler`` (virtual time for memory)."""
    parsed = parse_metadata_uri(uri)
    if parsed.kind == "memory":
        return MemoryStore(scheduler, session_timeout_ms=session_timeout_ms)
    from .zookeeper_store import ZooKeeperStore

    if parsed.kind == "zookeeper":
        return ZooKeeperStore(parsed.hosts, parsed.chroot, scheduler, session_timeout_ms=session_timeout_ms)
    from .zk_server import ZooKeeperServer

    server = ZooKeeperServer().start()
    try:
        store = ZooKeeperStore(server.hosts, parsed.chroot, scheduler, session_timeout_ms=session_timeout_ms)
    except BaseException:
        server.stop()
        raise
    store.owned_server = server
    return store
