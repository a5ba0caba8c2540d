"""What real sockets cost: the same acks=all produce over the in-process transport and over TCP.

One producer (``Cluster.produce``, one request in flight, as a synchronous client)
sends ``BATCHES`` batches of ``RECORDS`` records of ``RECORD_BYTES`` bytes with
acks=all to a 3-broker cluster, RF 3, min.insync.replicas 2, each batch committed on
all three replicas before the next goes.  Side by side in one run:

- ``in-process``: the embedded store and the in-process transport, on virtual time
  with 1 ms one-way latency.  No sleeping, so its wall time is the engine's CPU;
- ``tcp``: the same brokers in this process over loopback TCP (kreplica.net), on the
  wall clock;
- ``processes``: three ``kreplica broker`` processes on a real ZooKeeper (when
  Debian's zookeeper package is installed), this process a client over TCP.

Committed records/s for each, and each against in-process.  Latency dominates the
socket runs: every batch waits for both followers to fetch it and for the HW to
reach them, a few loopback round trips, each one a hand-off between threads.

    .venv/bin/python benchmarks/bench_net.py
    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable benchmarks/bench_net.py
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kreplica import Cluster
from kreplica.net.tcp_transport import TcpTransport

BATCHES = 300
RECORDS = 100
RECORD_BYTES = 1024
CONFIG = {"min.insync.replicas": 2}


def _values() -> list[list[bytes]]:
    rng = random.Random(1)
    return [[rng.randbytes(RECORD_BYTES) for _ in range(RECORDS)] for _ in range(BATCHES)]


def _produce_all(c: Cluster, values: list[list[bytes]]) -> float:
    """Seconds of wall time to commit every batch, one at a time, after a warm-up batch."""
    c.create_topic("load", partitions=1, replication_factor=3)
    assert c.run_until(lambda: len(c.describe("load").partitions[0].isr) == 3, 30_000)
    c.produce("load", 0, values[0], acks="all")
    t0 = time.perf_counter()
    for batch in values:
        c.produce("load", 0, batch, acks="all")
    elapsed = time.perf_counter() - t0
    assert len(c.fetch("load", 0, 0)) == (BATCHES + 1) * RECORDS
    return elapsed


def in_process(values: list[list[bytes]]) -> float:
    with Cluster.embedded(config=CONFIG) as c:
        return _produce_all(c, values)


def tcp(values: list[list[bytes]]) -> float:
    with TcpTransport() as t, Cluster.embedded(config=CONFIG, transport=t) as c:
        return _produce_all(c, values)


def processes(values: list[list[bytes]]) -> float | None:
    """None when there is no ZooKeeper package to start one from."""
    from kreplica.meta.zk_server import ZooKeeperServer, zookeeper_available
    from kreplica.net.remote import connect

    if not zookeeper_available():
        return None
    server = ZooKeeperServer().start()
    zookeeper = f"{server.hosts}/bench-net-{os.getpid()}"
    procs: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory(prefix="kreplica-bench-net-") as root:
            try:
                for bid in (1, 2, 3):
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "kreplica", "broker", "--id", str(bid), "--zookeeper", zookeeper,
                         "--data-dir", str(Path(root) / f"broker-{bid}"), "--config", "min.insync.replicas=2"],
                        stdout=subprocess.DEVNULL))
                with connect(f"zookeeper://{zookeeper}", config=CONFIG) as c:
                    assert c.run_until(lambda: len(c.live_brokers()) == 3, 60_000)
                    return _produce_all(c, values)
            finally:  # the brokers stop before their directories go
                for p in procs:
                    p.send_signal(signal.SIGTERM)
                for p in procs:
                    try:
                        p.wait(30)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def values():
    return _values()


@pytest.mark.benchmark(group="net")
def test_in_process(benchmark, values):
    benchmark.pedantic(in_process, args=(values,), rounds=1, iterations=1)


@pytest.mark.benchmark(group="net")
def test_tcp(benchmark, values):
    benchmark.pedantic(tcp, args=(values,), rounds=1, iterations=1)


@pytest.mark.benchmark(group="net")
def test_processes(benchmark, values):
    benchmark.pedantic(processes, args=(values,), rounds=1, iterations=1)


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    values = _values()
    rows = [("in-process (virtual time, 1 ms latency)", in_process(values)),
            ("tcp, one process (wall clock)", tcp(values)),
            ("tcp, three broker processes + ZooKeeper", processes(values))]
    base = rows[0][1]
    table = Table(title=f"acks=all, RF 3: {BATCHES} batches of {RECORDS} x {RECORD_BYTES} B, one in flight")
    for col in ("transport", "wall s", "committed records/s", "ms per batch", "vs in-process"):
        table.add_column(col, justify="left" if col == "transport" else "right")
    for name, secs in rows:
        if secs is None:
            table.add_row(name, "-", "no zookeeper package", "-", "-")
            continue
        table.add_row(name, f"{secs:.2f}", f"{BATCHES * RECORDS / secs:,.0f}", f"{secs / BATCHES * 1000:.2f}",
                      f"{base / secs:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
