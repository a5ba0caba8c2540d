import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

# ---- metadata store fixtures (owner: metadata-store engineer; kreplica/meta) ----
import pytest

from kreplica.meta.memory_store import MemoryStore
from kreplica.runtime import SimScheduler
from meta_env import StoreEnv

META_SESSION_TIMEOUT_MS = 1500


@pytest.fixture(params=["memory"])
def store_env(request):
    """A fresh metadata store of each kind (MemoryStore on virtual time)."""
    sched = SimScheduler(seed=7)
    store = MemoryStore(sched, session_timeout_ms=META_SESSION_TIMEOUT_MS)
    yield StoreEnv("memory", store, sched, META_SESSION_TIMEOUT_MS)
    store.close()
# ---- end of metadata store fixtures ----
