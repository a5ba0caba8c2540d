"""A cluster of broker processes: where each listens, and a client of them all.

Each ``kreplica broker`` process registers ``/brokers/ids/<id>`` with the port its
:class:`~.tcp_transport.TcpTransport` listens on, as a Kafka broker registers its
listener; every process finds its peers there (:func:`registered_address`).
:func:`connect` is the client: a :class:`~kreplica.cluster.Cluster` with no brokers
of its own, whose admin calls write the shared store and whose produce and fetch
go over TCP to the leaders.
"""
from __future__ import annotations

from typing import Any

from .. import errors
from ..cluster import Cluster
from ..meta.kafka_zk_client import KafkaZkClient
from ..meta.store import StoreError
from ..meta.uri import parse_metadata_uri
from .tcp_transport import MAX_PORT, Address, TcpTransport


def registered_address(zk: KafkaZkClient, broker_id: int) -> Address | None:
    """Where ``broker_id`` listens, from its registration; None while it is not registered
    (or registered without a usable port: 0 or less, or past 65535) or the store is out of
    reach, which the sender sees as a refused connection."""
    try:
        info = zk.get_broker(broker_id)
    except StoreError:
        return None
    if info is None or not 0 < info.port <= MAX_PORT:
        return None
    return info.host, info.port


def require_shared_store(metadata: str) -> str:
    """``metadata`` if processes can share it (a ZooKeeper they all reach); ValueError otherwise."""
    kind = parse_metadata_uri(metadata).kind
    if kind != "zookeeper":
        raise ValueError(f"{metadata!r}: broker processes share a running ZooKeeper: zookeeper://HOST:PORT/CHROOT")
    return metadata


def connect(metadata: str, config: dict[str, Any] | None = None, seed: int = 0) -> Cluster:
    """A client of the broker processes registered in ``metadata``: create and describe
    topics, produce and fetch; ``kill`` and ``start`` are refused (no broker is its own).
    Waits for a controller, as a cluster does at creation; close it when done."""
    try:
        require_shared_store(metadata)
    except ValueError as e:
        raise errors.InvalidConfig(f"metadata={e}") from None
    transport = TcpTransport()
    try:
        cluster = Cluster((), None, metadata, seed, config, transport, remote=True)
    except BaseException:
        transport.close()
        raise
    transport.resolve = lambda broker_id: registered_address(cluster.zk, broker_id)
    return cluster
