"""Controller failover after a broker failure: 3 brokers, 1k/5k/10k partitions, per store.

The work is :mod:`kreplica.tools.bench_failover` (also ``kreplica bench failover``):
broker 1002 fails, the controller re-elects the N/3 partitions it led and takes it
out of the other ISRs.  Reported: wall-clock time from the failure to all leaders
re-elected (MemoryStore: the controller's and the in-process store's code; target
< 0.5 s for 1k, linear) and, on ZooKeeper, round trips per failed-over partition
(target <= 1, thanks to multi).

    .venv/bin/python benchmarks/bench_failover.py            # the table (both stores)
    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable benchmarks/bench_failover.py
"""
from __future__ import annotations

import argparse

import pytest

from kreplica.tools import bench_failover


@pytest.mark.parametrize("n", [1000, 5000, 10000])
def test_memory_failover(benchmark, n: int) -> None:
    """Times only the failover (``bench_failover.fail``): building the cluster and
    bringing n partitions online is the untimed setup, closing it the teardown."""
    results, states = [], []

    def setup():
        states.append(bench_failover.prepare(n))
        return (states[-1],), {}

    def one(state) -> None:
        results.append(bench_failover.fail(state))

    benchmark.pedantic(one, setup=setup, teardown=lambda state: bench_failover.teardown(state),
                       rounds=3, iterations=1)
    if benchmark.disabled:  # --benchmark-disable: one plain call, and pedantic() skips the teardown
        bench_failover.teardown(states[-1])
    best = min(r.seconds for r in results)
    benchmark.extra_info.update(controller_seconds=best, round_trips=results[-1].round_trips)
    assert all(r.trips_per_partition <= 1 for r in results)


@pytest.mark.zookeeper
def test_zookeeper_round_trips_per_partition() -> None:
    rows = bench_failover.run_zookeeper([1000])
    if not rows:
        pytest.skip("Debian's zookeeper package is not installed")
    for r in rows:  # a broker's failure, then the controller's own
        assert r.trips_per_reelected is not None, "nothing was re-elected"
        print(f"\nzookeeper, {r.failed} fails, n={r.partitions}: {r.seconds * 1000:.1f} ms, "
              f"{r.trips_per_partition:.4f} round trips/partition, {r.trips_per_reelected:.4f} per re-elected")
        assert r.trips_per_reelected <= 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    bench_failover.add_arguments(parser)
    raise SystemExit(bench_failover.execute(parser.parse_args()))
