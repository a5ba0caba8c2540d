"""What real sockets cost: the same acks=all produce over the in-process transport and over TCP.

The workload and the three transports are ``kreplica bench net``'s
(:mod:`kreplica.tools.bench_net`): one synchronous acks=all producer, 300 batches of
100 x 1 KiB, RF 3; in-process on virtual time, over TCP in one process, and against
three ``kreplica broker`` processes on a real ZooKeeper.

    .venv/bin/kreplica bench net
    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable benchmarks/bench_net.py
"""
from __future__ import annotations

import pytest

from kreplica.tools import bench_net


@pytest.fixture(scope="module")
def values():
    return bench_net.batches(300, 100, 1024)


@pytest.mark.benchmark(group="net")
def test_in_process(benchmark, values):
    benchmark.pedantic(bench_net.in_process, args=(values,), rounds=1, iterations=1)


@pytest.mark.benchmark(group="net")
def test_tcp(benchmark, values):
    benchmark.pedantic(bench_net.tcp, args=(values,), rounds=1, iterations=1)


@pytest.mark.benchmark(group="net")
def test_processes(benchmark, values):
    benchmark.pedantic(bench_net.processes, args=(values,), rounds=1, iterations=1)
