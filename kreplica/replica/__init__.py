"""The replica data plane: Partition, ReplicaManager, fetchers and purgatories (sans-I/O)."""
from .partition import Partition, Role
from .replica_manager import ReplicaManager

__all__ = ["Partition", "ReplicaManager", "Role"]
