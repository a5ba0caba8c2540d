"""Metadata store: one interface, the embedded MemoryStore and a ZooKeeper (kazoo) store,
Kafka's znode layout (:mod:`.layout`) and the typed :class:`KafkaZkClient` over it."""
from .kafka_zk_client import KafkaZkClient
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

__all__ = [name for name in dir() if not name.startswith("_")]
