"""``kreplica bench net``: what real sockets cost, the same acks=all produce over three transports.

One producer (``Cluster.produce``, one request in flight, as a synchronous client)
sends ``--batches`` batches of ``--batch-records`` records of ``--record-bytes`` bytes
with acks=all to a 3-broker cluster, RF 3, min.insync.replicas 2, each batch committed
on all three replicas before the next goes.  Side by side in one run:

- ``in-process``: the embedded store and the in-process transport, on virtual time
  with 1 ms one-way latency.  No sleeping, so its wall time is the engine's CPU;
- ``tcp``: the same brokers in this process over loopback TCP (kreplica.net), on the
  wall clock;
- ``processes``: three ``kreplica broker`` processes on a real ZooKeeper (started
  from Debian's zookeeper package; the row says so when it is missing), this process
  a client over TCP.

Committed records/s for each, and each against in-process.  Latency dominates the
socket runs: every batch waits for both followers to fetch it and for the HW to reach
them, a few loopback round trips, each one a hand-off between threads.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..cli import at_least
from ..cluster import Cluster

HELP = "acks=all produce in-process, over TCP, and across broker processes"
CONFIG = {"min.insync.replicas": 2}


def batches(count: int, records: int, record_bytes: int, seed: int = 1) -> list[list[bytes]]:
    rng = random.Random(seed)
    return [[rng.randbytes(record_bytes) for _ in range(records)] for _ in range(count)]


def _produce_all(c: Cluster, values: list[list[bytes]]) -> float:
    """Seconds of wall time to commit every batch, one at a time, after a warm-up batch."""
    c.create_topic("load", partitions=1, replication_factor=3)
    assert c.run_until(lambda: len(c.describe("load").partitions[0].isr) == 3, 30_000)
    c.produce("load", 0, values[0], acks="all")
    t0 = time.perf_counter()
    for batch in values:
        c.produce("load", 0, batch, acks="all")
    elapsed = time.perf_counter() - t0
    expected = (len(values) + 1) * len(values[0])
    got = len(c.fetch("load", 0, 0))
    if got != expected:
        raise AssertionError(f"read back {got} committed records, expected {expected}")
    return elapsed


def in_process(values: list[list[bytes]]) -> float:
    with Cluster.embedded(config=CONFIG) as c:
        return _produce_all(c, values)


def tcp(values: list[list[bytes]]) -> float:
    from ..net.tcp_transport import TcpTransport

    with TcpTransport() as t, Cluster.embedded(config=CONFIG, transport=t) as c:
        return _produce_all(c, values)


def processes(values: list[list[bytes]]) -> float | None:
    """None when there is no ZooKeeper package to start one from."""
    from ..meta.zk_server import ZooKeeperServer, zookeeper_available
    from ..net.remote import connect

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
                         "--data-dir", str(Path(root) / f"broker-{bid}"), "--quiet",
                         "--config", "min.insync.replicas=2"],
                        stdout=subprocess.DEVNULL))
                with connect(f"zookeeper://{zookeeper}", config=CONFIG) as c:
                    if not c.run_until(lambda: len(c.live_brokers()) == 3, 60_000):
                        raise AssertionError("the three broker processes did not all register")
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batches", type=at_least(1), default=300, help="batches timed per transport (default 300)")
    parser.add_argument("--batch-records", type=at_least(1), default=100, help="records a batch (default 100)")
    parser.add_argument("--record-bytes", type=at_least(1), default=1024, help="bytes a record (default 1024)")
    parser.add_argument("--no-processes", action="store_true",
                        help="skip the broker-process row (it starts ZooKeeper and three processes)")


def execute(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    values = batches(args.batches, args.batch_records, args.record_bytes)
    rows = [("in-process (virtual time, 1 ms latency)", in_process(values)),
            ("tcp, one process (wall clock)", tcp(values))]
    if not args.no_processes:
        rows.append(("tcp, three broker processes + ZooKeeper", processes(values)))
    base = rows[0][1]
    table = Table(title=f"acks=all, RF 3: {args.batches} batches of {args.batch_records} x "
                        f"{args.record_bytes} B, one in flight")
    for col in ("transport", "wall s", "committed records/s", "ms per batch", "vs in-process"):
        table.add_column(col, justify="left" if col == "transport" else "right")
    for name, secs in rows:
        if secs is None:
            table.add_row(name, "-", "no zookeeper package", "-", "-")
            continue
        table.add_row(name, f"{secs:.2f}", f"{args.batches * args.batch_records / secs:,.0f}",
                      f"{secs / args.batches * 1000:.2f}", f"{base / secs:.2f}x")
    Console().print(table)
    return 0
