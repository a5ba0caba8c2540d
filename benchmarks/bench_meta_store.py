"""The metadata store's share of a failover: read and conditionally rewrite N leaderAndIsr nodes.

What the controller does for the partitions of a failed broker (seed 001 steps 3.1
and 3.3): one batched read of their states, one batched conditional write of the
new leader and ISR.  Peers, side by side: MemoryStore (the embedded default) and a
real ZooKeeper (Debian's, started here) through kazoo.  Reported per store and N:
wall-clock time of the read+write, and store round trips per partition (target for
ZooKeeper: at most 1).

    .venv/bin/python benchmarks/bench_meta_store.py          # the table
    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable benchmarks/bench_meta_store.py
"""
from __future__ import annotations

import time

import pytest

from kreplica.meta.kafka_zk_client import KafkaZkClient
from kreplica.meta.memory_store import MemoryStore
from kreplica.meta.store import MetadataStore
from kreplica.protocol.common import LeaderAndIsr, TopicPartition
from kreplica.runtime import RealScheduler, SimScheduler

BROKERS = (1001, 1002, 1003)


def prepare(store: MetadataStore, sched, n: int) -> tuple[KafkaZkClient, list[TopicPartition]]:
    zk = KafkaZkClient(store.session("controller"), sched)
    per_topic = 1000
    tps = [TopicPartition(f"t{i // per_topic}", i % per_topic) for i in range(n)]
    for t in sorted({tp.topic for tp in tps}):
        zk.create_topic(t, {tp.partition: list(BROKERS) for tp in tps if tp.topic == t})
    created, failed = zk.create_partition_states({tp: LeaderAndIsr(1001, 0, BROKERS, 0, 1) for tp in tps})
    assert not failed and len(created) == n
    return zk, tps


def fail_over(zk: KafkaZkClient, tps: list[TopicPartition]) -> None:
    """Broker 1001 died: every partition moves to the next ISR member, 1001 leaves the ISR."""
    states = zk.get_partition_states(tps)
    new = {tp: s.with_leader(s.isr[1], tuple(b for b in s.isr if b != s.leader)) for tp, s in states.items()}
    updated, stale, errors = zk.update_partition_states(new)
    assert not stale and not errors and len(updated) == len(tps)


def measure(kind: str, n: int, hosts: str = "") -> tuple[float, float]:
    if kind == "memory":
        sched = SimScheduler(seed=0)
        store: MetadataStore = MemoryStore(sched)
    else:
        from kreplica.meta.zookeeper_store import ZooKeeperStore

        sched = RealScheduler()
        store = ZooKeeperStore(hosts, f"/bench-{n}-{time.monotonic_ns()}", sched)
    try:
        zk, tps = prepare(store, sched, n)
        before = store.round_trips
        t0 = time.perf_counter()
        fail_over(zk, tps)
        elapsed = time.perf_counter() - t0
        return elapsed, (store.round_trips - before) / n
    finally:
        store.close()


@pytest.mark.parametrize("n", [1000, 10000])
def test_memory_failover_writes(benchmark, n: int) -> None:
    sched = SimScheduler(seed=0)
    store = MemoryStore(sched)
    zk, tps = prepare(store, sched, n)

    def put_back() -> None:
        """Untimed: 1001 leader again with the full ISR, so each round fails it over anew."""
        states = zk.get_partition_states(tps)
        if any(s.leader != 1001 for s in states.values()):
            zk.update_partition_states({tp: LeaderAndIsr(1001, s.leader_epoch + 1, BROKERS, s.zk_version, 1)
                                        for tp, s in states.items()})

    # Only the failover's read+write is timed, as in the table (main()); putting 1001
    # back, the same amount of store work again, was timed with it before.
    benchmark.pedantic(fail_over, args=(zk, tps), setup=put_back, rounds=20, iterations=1)


@pytest.fixture(scope="module")
def bench_zk_server():
    import os

    from kreplica.meta.zk_server import ZooKeeperServer, zookeeper_available

    if not zookeeper_available():
        if os.environ.get("KREPLICA_REQUIRE_ZK") == "1":
            pytest.fail("KREPLICA_REQUIRE_ZK=1 but Debian's zookeeper is not installed", pytrace=False)
        pytest.skip("Debian's zookeeper package is not installed")
    with ZooKeeperServer() as server:
        yield server


@pytest.mark.zookeeper
@pytest.mark.parametrize("n", [1000])
def test_zookeeper_round_trips_per_partition(bench_zk_server, n: int) -> None:
    elapsed, per_partition = measure("zookeeper", n, bench_zk_server.hosts)
    print(f"\nzookeeper n={n}: {elapsed * 1000:.1f} ms, {per_partition:.4f} round trips/partition")
    assert per_partition <= 1


def main() -> None:
    from kreplica.meta.zk_server import ZooKeeperServer, zookeeper_available

    rows = [("memory", n, *measure("memory", n)) for n in (1000, 5000, 10000)]
    if zookeeper_available():
        with ZooKeeperServer() as server:
            rows += [("zookeeper", n, *measure("zookeeper", n, server.hosts)) for n in (1000, 5000, 10000)]
    print(f"{'store':<10} {'partitions':>10} {'read+write ms':>14} {'round trips/partition':>22}")
    for kind, n, secs, rt in rows:
        print(f"{kind:<10} {n:>10} {secs * 1000:>14.1f} {rt:>22.4f}")


if __name__ == "__main__":
    main()
