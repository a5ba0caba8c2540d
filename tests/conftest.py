import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

# ---- metadata store fixtures (owner: metadata-store engineer; kreplica/meta) ----
# `zk_server`: one Debian ZooKeeper per test session (skipped when the package is
# missing, unless KREPLICA_REQUIRE_ZK=1).  `zk_store_factory`: a ZooKeeperStore under
# a fresh chroot per test.  `store_env`: the same test against MemoryStore (virtual
# time) and ZooKeeper (wall clock).
import itertools

import pytest

from kreplica.meta.memory_store import MemoryStore
from kreplica.meta.zk_server import ZooKeeperServer, zookeeper_available
from kreplica.runtime import RealScheduler, SimScheduler
from meta_env import StoreEnv

META_SESSION_TIMEOUT_MS = 1500
_chroots = itertools.count()


@pytest.fixture(scope="session")
def zk_server():
    if not zookeeper_available():
        if os.environ.get("KREPLICA_REQUIRE_ZK") == "1":
            pytest.fail("KREPLICA_REQUIRE_ZK=1 but Debian's zookeeper (or java) is not installed",
                        pytrace=False)
        pytest.skip("Debian's zookeeper package is not installed (make test installs it as root)")
    server = ZooKeeperServer().start()
    yield server
    server.stop()


@pytest.fixture
def zk_store_factory(zk_server):
    """Make ZooKeeperStores on the shared server, each test under its own chroot."""
    from kreplica.meta.zookeeper_store import ZooKeeperStore

    chroot = f"/test-{os.getpid()}-{next(_chroots)}"
    made = []

    def make(scheduler=None, session_timeout_ms=META_SESSION_TIMEOUT_MS):
        store = ZooKeeperStore(zk_server.hosts, chroot, scheduler or RealScheduler(),
                               session_timeout_ms=session_timeout_ms)
        made.append(store)
        return store

    make.chroot = chroot
    yield make
    for store in made:
        store.close()


@pytest.fixture
def kazoo_client(zk_server):
    """A raw kazoo client on the un-chrooted tree, to check znodes independently."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_server.hosts)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture(params=["memory", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def store_env(request):
    """A fresh metadata store of each kind."""
    if request.param == "memory":
        sched = SimScheduler(seed=7)
        store = MemoryStore(sched, session_timeout_ms=META_SESSION_TIMEOUT_MS)
        yield StoreEnv("memory", store, sched, META_SESSION_TIMEOUT_MS)
        store.close()
        return
    factory = request.getfixturevalue("zk_store_factory")
    sched = RealScheduler(seed=7)
    store = factory(sched)
    env = StoreEnv("zookeeper", store, sched, META_SESSION_TIMEOUT_MS, chroot=factory.chroot,
                   extras={"kazoo": request.getfixturevalue("kazoo_client")})
    yield env
# ---- end of metadata store fixtures ----
