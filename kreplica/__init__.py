"""kreplica: a Kafka-style replication data-plane engine with a native log core."""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["Cluster", "__version__"]


def __getattr__(name: str):  # lazy: `import kreplica` must not pull in the whole engine
    if name == "Cluster":
        from .cluster import Cluster

        return Cluster
    raise AttributeError(name)
