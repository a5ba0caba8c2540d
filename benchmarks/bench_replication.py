"""End-to-end acks=all produce on RF=3 (in-process, virtual time, zero latency) beside one log.

Peers, side by side in one run: the same ready batches (1,000 records of 100 B
or 1 KiB) acknowledged by a 3-replica partition (seed 004's produce and
two-fetch HW advance through three ReplicaManagers) and appended to a single
Log with ``append_batches_as_leader``.  Targets: committed throughput at least
0.3x the single append, and at least 1 M records/s for 100 B records.

    .venv/bin/kreplica bench replication                     # the table
    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable benchmarks/bench_replication.py
"""
from __future__ import annotations

import itertools
import shutil

import pytest

from kreplica.tools import bench_replication
from kreplica.tools.bench_replication import _batches

BATCHES = 200


@pytest.fixture(scope="module", params=[100, 1024], ids=["100B", "1KiB"])
def batches(request):
    return _batches(request.param, 1000, BATCHES, request.param)  # fresh data per request, as producers send


def _fresh(tmp_path):
    counter = itertools.count()
    return lambda: tmp_path / f"round-{next(counter)}"


def _remove(root) -> None:
    """Each round's files go with its teardown, as in the command: left behind, a
    round's hundreds of dirty MiB are written back during a later round (of either
    test), which then pays for them."""
    shutil.rmtree(root, ignore_errors=True)


# Only the work is timed, as in the command's table: the setup (three brokers started
# and the partition online, or the single log opened) and the teardown (checks, clean
# shutdown, close) are pedantic()'s setup and teardown.

def test_replicated_acks_all_rf3(benchmark, batches, tmp_path):
    fresh, results, cluster_left = _fresh(tmp_path), [], []

    def setup():
        root = fresh()
        cluster = bench_replication.prepare_replicated(root)
        cluster["root"] = root
        cluster_left.append(cluster)
        return (cluster,), {}

    def produce(cluster):
        cluster["produced"] = bench_replication.produce_replicated(cluster, batches, BATCHES, 32)

    def teardown(cluster):
        results.append(bench_replication.finish_replicated(cluster, cluster["produced"], batches, BATCHES))
        _remove(cluster["root"])

    benchmark.pedantic(produce, setup=setup, teardown=teardown, rounds=3, iterations=1, warmup_rounds=1)
    if benchmark.disabled:  # --benchmark-disable: one plain call, and pedantic() skips the teardown
        teardown(cluster_left[-1])
    assert all(r["records"] == BATCHES * 1000 for r in results)
    benchmark.extra_info["records"] = results[-1]["records"]


def test_single_replica_append(benchmark, batches, tmp_path):
    fresh = _fresh(tmp_path)

    opened = []

    def setup():
        root = fresh()
        opened.append((bench_replication.open_single_log(root), root))
        return opened[-1], {}

    def teardown(log, root):
        assert log.log_end_offset == BATCHES * 1000
        log.close()
        _remove(root)

    benchmark.pedantic(lambda log, root: bench_replication.append_single_log(log, batches, BATCHES), setup=setup,
                       teardown=teardown, rounds=3, iterations=1, warmup_rounds=1)
    if benchmark.disabled:  # --benchmark-disable: one plain call, and pedantic() skips the teardown
        teardown(*opened[-1])
    benchmark.extra_info["records"] = BATCHES * 1000
