"""Metadata store: one interface, the embedded MemoryStore and a ZooKeeper (kazoo) store,
Kafka's znode layout (:mod:`.layout`) and the typed :class:`KafkaZkClient` over it."""
from .kafka_zk_client import KafkaZkClient
from .layout import BrokerInfo
from .memory_store import MemorySession, MemoryStore
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
    WatchEvent,
)
from .uri import open_store, parse_metadata_uri, parse_zookeeper_connect

__all__ = [name for name, value in globals().items()
           if not name.startswith("_") and not isinstance(value, type(store))]
