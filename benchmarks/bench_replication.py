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

import pytest

from kreplica.tools.bench_replication import _batches, run_replicated, run_single_log

BATCHES = 200


@pytest.fixture(scope="module", params=[100, 1024], ids=["100B", "1KiB"])
def batches(request):
    return _batches(request.param, 1000, BATCHES, request.param)  # fresh data per request, as producers send


def _fresh(tmp_path):
    counter = itertools.count()
    return lambda: tmp_path / f"round-{next(counter)}"


def test_replicated_acks_all_rf3(benchmark, batches, tmp_path):
    fresh = _fresh(tmp_path)
    result = benchmark.pedantic(lambda: run_replicated(fresh(), batches, BATCHES, 32), rounds=3, iterations=1)
    assert result["records"] == BATCHES * 1000
    benchmark.extra_info["records"] = result["records"]


def test_single_replica_append(benchmark, batches, tmp_path):
    fresh = _fresh(tmp_path)
    result = benchmark.pedantic(lambda: run_single_log(fresh(), batches, BATCHES), rounds=3, iterations=1)
    assert result["records"] == BATCHES * 1000
    benchmark.extra_info["records"] = result["records"]
