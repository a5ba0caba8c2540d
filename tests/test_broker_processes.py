"""A cluster of `kreplica broker` processes over TCP with a real ZooKeeper.

Three OS processes, each one broker on its own loopback port, found by its peers
through /brokers/ids; this test process is only a client (kreplica.net.remote.connect)
and the one that kills and starts them.  Nothing acknowledged with acks=all may be
lost across a SIGKILL of a leader, its restart, and a SIGTERM's controlled shutdown.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from kreplica import errors
from kreplica.net.remote import connect

pytestmark = pytest.mark.zookeeper

BROKERS = (1, 2, 3)
CONFIG = {"zookeeper.session.timeout.ms": 3000, "min.insync.replicas": 2,
          "replica.lag.time.max.ms": 4000, "controlled.shutdown.retry.backoff.ms": 200,
          "auto.leader.rebalance.enable": False}
CONFIG_ARGS = [arg for k, v in CONFIG.items() for arg in ("--config", f"{k}={v}".lower())]


class BrokerProcesses:
    def __init__(self, connect, root):
        self.connect = connect
        self.metadata = f"zookeeper://{connect}"
        self.root = root
        self.procs = {}

    def start(self, bid, *extra):
        log = open(self.root / f"broker-{bid}.out", "ab")
        self.procs[bid] = subprocess.Popen(
            [sys.executable, "-m", "kreplica", "broker", "--id", str(bid), "--zookeeper", self.connect,
             "--data-dir", str(self.root / f"broker-{bid}"), *CONFIG_ARGS, *extra],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()

    def output(self, bid):
        return (self.root / f"broker-{bid}.out").read_text()

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)


def _processes(request, tmp_path, extra=lambda bid: ()):
    server = request.getfixturevalue("zk_server")
    procs = BrokerProcesses(f"{server.hosts}/processes-{os.getpid()}-{time.monotonic_ns()}", tmp_path)
    procs.extra = extra
    try:
        for bid in BROKERS:
            procs.start(bid, *extra(bid))
        yield procs
    finally:
        procs.stop_all()


@pytest.fixture
def processes(request, tmp_path):
    yield from _processes(request, tmp_path)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def relayed(request, tmp_path):
    """Broker processes on fixed ports, each registered under the port of a cuttable relay
    in front of it: cutting a relay refuses every connection to that broker (from peers,
    the controller and clients) while it still reaches ZooKeeper and connects out."""
    from tcp_cut import CuttableRelay

    ports = {bid: _free_port() for bid in BROKERS}
    relays = {bid: CuttableRelay(ports[bid]) for bid in BROKERS}
    try:
        for procs in _processes(request, tmp_path, lambda bid: ("--port", str(ports[bid]),
                                                                "--advertised-port", str(relays[bid].port))):
            procs.relays, procs.ports = relays, ports
            yield procs
    finally:
        for relay in relays.values():
            relay.close()


def _describe(c):
    return {p.partition: (p.leader, tuple(sorted(p.isr))) for p in c.describe("orders").partitions}


def test_processes_elect_fail_over_and_lose_nothing_acknowledged(processes):
    with connect(processes.metadata, config=CONFIG) as c:
        assert c.run_until(lambda: sorted(c.zk.get_live_broker_ids()) == list(BROKERS), 60_000), \
            [processes.output(b) for b in BROKERS]
        for bid in BROKERS:  # each registered the port it really listens on, and says so
            port = json.loads(c.zk.session.get(f"/brokers/ids/{bid}")[0])["port"]
            assert c.run_until(lambda: f"listening on 127.0.0.1:{port}" in processes.output(bid), 10_000)
        c.create_topic("orders", partitions=2, replication_factor=3)
        assert c.run_until(lambda: all(len(isr) == 3 for _, isr in _describe(c).values()), 30_000)

        acked = {0: [], 1: []}

        def produce(tag, n=5):
            for p in (0, 1):
                for i in range(n):
                    value = b"%s-%d-%d" % (tag, p, i)
                    acked[p].append((c.produce("orders", p, [value], acks="all"), value))

        lookups = []
        leader_for = c.leader_for
        c.leader_for = lambda topic, p: lookups.append(p) or leader_for(topic, p)
        produce(b"first")
        assert sorted(lookups) == [0, 1]  # the client kept each leader it found (no ZooKeeper read a batch)
        del c.leader_for
        victim = c.leader_for("orders", 0)
        processes.procs[victim].send_signal(signal.SIGKILL)
        processes.procs[victim].wait(10)
        assert c.run_until(lambda: all(leader not in (victim, -1) and victim not in isr
                                       for leader, isr in _describe(c).values()), 30_000)
        produce(b"after-kill")

        processes.start(victim)  # recovers its logs, truncates, catches up, rejoins every ISR
        assert c.run_until(lambda: all(len(isr) == 3 for _, isr in _describe(c).values()), 60_000), \
            processes.output(victim)
        produce(b"after-restart")

        leader = c.leader_for("orders", 1)
        processes.procs[leader].send_signal(signal.SIGTERM)
        assert processes.procs[leader].wait(60) == 0, processes.output(leader)
        assert "every leadership moved" in processes.output(leader)
        assert all(l != leader and leader not in isr for l, isr in _describe(c).values())
        produce(b"after-shutdown")

        for p in (0, 1):
            got = {r.offset: r.value for r in c.fetch("orders", p, 0)}
            assert [got.get(offset) for offset, _ in acked[p]] == [v for _, v in acked[p]]
            assert len(acked[p]) == 20

        # A client of processes owns none of them and cannot look inside them.
        assert c.live_brokers() == sorted(set(BROKERS) - {leader})
        with pytest.raises(errors.BrokerNotAvailable):
            c.kill(1)
        with pytest.raises(errors.InvalidRequest, match="other processes"):
            c.offsets("orders", 0)


def test_a_broker_process_refuses_a_bad_connect_string_and_bad_configs(tmp_path):
    run = [sys.executable, "-m", "kreplica", "broker", "--id", "1", "--data-dir", str(tmp_path)]
    out = subprocess.run([*run, "--zookeeper", "memory"], capture_output=True, text=True)
    assert out.returncode == 2 and "expected host:port" in out.stderr
    out = subprocess.run([*run, "--zookeeper", "127.0.0.1:1/x", "--config", "acks=7"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "acks" in out.stderr
    with pytest.raises(errors.InvalidConfig, match="share a running ZooKeeper"):
        connect("memory")


def _kreplica(*argv, input=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "kreplica", *argv], input=input, capture_output=True,
                          timeout=timeout)


def test_the_console_tools_against_broker_processes(processes):
    """topics, produce and consume from the shell, as Kafka's quick start does with its scripts."""
    from kreplica.cluster import partition_for_key

    zk = processes.connect
    with connect(processes.metadata) as c:
        assert c.run_until(lambda: len(c.live_brokers()) == 3, 60_000)
    out = _kreplica("topics", "--zookeeper", zk, "--create", "--topic", "lines", "--partitions", "3",
                    "--replication-factor", "3")
    assert out.returncode == 0, out.stderr
    keyed = [b"user-%d:click-%d" % (i % 7, i) for i in range(300)]
    plain = [b"line-%d" % i for i in range(200)]
    out = _kreplica("produce", "--zookeeper", zk, "--topic", "lines", "--key-separator", ":",
                    input=b"\n".join(keyed + plain) + b"\n")
    assert out.returncode == 0, out.stderr
    assert b"500 records acknowledged (acks=all)" in out.stderr

    out = _kreplica("consume", "--zookeeper", zk, "--topic", "lines", "--from-beginning", "--print-offset",
                    "--print-key", "--max-messages", "500")
    assert out.returncode == 0, out.stderr
    rows = [line.split(b"\t") for line in out.stdout.splitlines()]
    assert len(rows) == 500
    for where, key, value in rows:
        partition = int(where.split(b":")[0])
        if key != b"null":  # an unkeyed record's key prints as null
            assert partition == partition_for_key(key, 3)  # one key, one partition
    assert sorted(k + b":" + v if k != b"null" else v for _, k, v in rows) == sorted(keyed + plain)
    for user in range(7):  # a key's records in the order they were written
        clicks = [v for _, k, v in rows if k == b"user-%d" % user]
        assert clicks == [v.split(b":")[1] for v in keyed if v.startswith(b"user-%d:" % user)]

    # From the end (the default) with a timeout: nothing old, and it stops on its own.
    out = _kreplica("consume", "--zookeeper", zk, "--topic", "lines", "--timeout-ms", "500")
    assert out.returncode == 0 and out.stdout == b"" and b"0 records" in out.stderr

    out = _kreplica("consume", "--zookeeper", zk, "--topic", "lines", "--offset", "3")
    assert out.returncode == 2 and b"--offset needs --partition" in out.stderr
    out = _kreplica("produce", "--zookeeper", zk, "--topic", "nope", input=b"x\n")
    assert out.returncode == 1 and b"UNKNOWN_TOPIC_OR_PARTITION" in out.stderr
    out = _kreplica("topics", "--zookeeper", zk, "--describe", "--topic", "lines")
    assert out.returncode == 0 and out.stdout.count(b"Leader:") == 3


def test_random_process_faults_lose_nothing_acknowledged(processes):
    """Jepsen in miniature on the real deployment: a producer writes with acks=all while
    broker processes are SIGKILLed, restarted, and SIGSTOPped past their session timeout
    (a GC pause), and a consumer reads what is committed before each fault; at the end
    every acknowledged record, and every record the consumer saw, is read back at its
    offset (the simulator's invariants 1 and 2)."""
    import random

    rng = random.Random(int(os.environ.get("KREPLICA_FAULT_SEED", "1")))
    faults = []
    with connect(processes.metadata, config=CONFIG) as c:
        assert c.run_until(lambda: len(c.live_brokers()) == 3, 60_000)
        c.create_topic("chaos", partitions=2, replication_factor=3)
        assert c.run_until(lambda: all(len(isr) == 3 for _, isr in
                                       ((p.leader, p.isr) for p in c.describe("chaos").partitions)), 30_000)
        acked = {0: [], 1: []}
        seen = {0: set(), 1: set()}
        failed = 0
        down: set[int] = set()
        deadline = time.monotonic() + 20
        next_fault = time.monotonic() + 1
        i = 0
        while time.monotonic() < deadline:
            p = i % 2
            value = b"chaos-%d" % i
            i += 1
            try:
                acked[p].append((c.produce("chaos", p, [value], acks="all", delivery_timeout_ms=5_000), value))
            except errors.KReplicaError:
                failed += 1  # unavailable for a while: allowed; losing an acknowledged write is not
            if time.monotonic() < next_fault:
                continue
            next_fault = time.monotonic() + rng.uniform(1, 3)
            for q in (0, 1):  # the consumer: committed records only, which must never go
                try:
                    seen[q].update((r.offset, r.value) for r in c.fetch("chaos", q, 0, delivery_timeout_ms=3_000))
                except errors.KReplicaError:
                    pass
            # At most one broker out at a time, so min.insync.replicas=2 can hold.
            if down:
                action, bid = "restart", down.pop()
                processes.start(bid)
            else:
                action, bid = rng.choice(["kill", "pause"]), rng.choice(BROKERS)
                if action == "kill":
                    processes.procs[bid].send_signal(signal.SIGKILL)
                    processes.procs[bid].wait(10)
                    down.add(bid)
                else:
                    processes.procs[bid].send_signal(signal.SIGSTOP)
                    c.advance(int(rng.uniform(1_000, 4_500)))  # past the 3 s session timeout, sometimes
                    processes.procs[bid].send_signal(signal.SIGCONT)
            faults.append((round(time.monotonic() - deadline + 20, 1), action, bid))
        for bid in sorted(down):
            processes.start(bid)
        if not c.run_until(lambda: all(len(p.isr) == 3 for p in c.describe("chaos").partitions), 60_000):
            print(faults, c.describe_text("chaos"), *(processes.output(b) for b in BROKERS), sep="\n")
            raise AssertionError("the ISRs never filled again")
        for p in (0, 1):
            got = {r.offset: r.value for r in c.fetch("chaos", p, 0)}
            lost = [(offset, v) for offset, v in acked[p] if got.get(offset) != v]
            assert not lost, (p, lost[:5], faults)
            vanished = sorted((offset, v) for offset, v in seen[p] if got.get(offset) != v)
            assert not vanished, (p, vanished[:5], faults)
        assert len(faults) >= 5 and sum(map(len, acked.values())) > 100, (faults, failed, len(acked[0]))
        assert sum(map(len, seen.values())) > 50


def test_a_broker_paused_past_its_session_finds_restarted_peers(processes):
    """A broker stopped longer than its session timeout (a GC pause) renews its session; it
    must then still find its peers, which restart on new ports.  Its peer lookups ran on a
    session of their own that nobody renewed, so it found none: the random-faults test
    above left it out of the ISRs for good."""
    with connect(processes.metadata, config=CONFIG) as c:
        assert c.run_until(lambda: len(c.live_brokers()) == 3, 60_000)
        c.create_topic("paused", partitions=3, replication_factor=3)
        full = lambda: all(len(p.isr) == 3 for p in c.describe("paused").partitions)  # noqa: E731
        assert c.run_until(full, 30_000)
        epoch = c.zk.get_broker_epoch(1)
        processes.procs[1].send_signal(signal.SIGSTOP)
        c.advance(CONFIG["zookeeper.session.timeout.ms"] + 5_000)  # ZooKeeper rounds timeouts up to 2 ticks
        processes.procs[1].send_signal(signal.SIGCONT)
        assert c.run_until(lambda: c.zk.get_broker_epoch(1) not in (None, epoch), 30_000)  # a new session
        for peer in (2, 3):  # each comes back on a new port
            processes.procs[peer].send_signal(signal.SIGKILL)
            processes.procs[peer].wait(10)
            processes.start(peer)
            assert c.run_until(full, 60_000), (c.describe_text("paused"), processes.output(1))
        assert "session_expired" in processes.output(1)


def test_a_leader_cut_off_from_its_peers_but_not_from_zookeeper(relayed):
    """A leader its followers cannot reach, still registered in ZooKeeper, and still reached
    by this client (which goes straight to the brokers' ports, past the relays): no one is
    elected in its place; it shrinks its ISR to itself once the followers lag, and the
    acks=all write that waited for them fails (NOT_ENOUGH_REPLICAS_AFTER_APPEND, with
    min.insync.replicas=2) rather than being acknowledged by one replica, as do the writes
    after it.  Healed, the followers catch up and the ISR fills; nothing acknowledged is
    lost.  A restarted broker keeps its fixed ports."""
    with connect(relayed.metadata, config=CONFIG) as c:
        c.transport.resolve = lambda bid: ("127.0.0.1", relayed.ports[bid])  # this client is not cut off
        assert c.run_until(lambda: len(c.live_brokers()) == 3, 60_000)
        c.create_topic("cut", partitions=1, replication_factor=3)
        state = lambda: c.describe("cut").partitions[0]  # noqa: E731
        assert c.run_until(lambda: len(state().isr) == 3, 30_000)
        acked = [(c.produce("cut", 0, [b"before-%d" % i], acks="all"), b"before-%d" % i) for i in range(20)]
        leader = state().leader
        assert f"registered as port {relayed.relays[leader].port}" in relayed.output(leader)

        relayed.relays[leader].cut()
        with pytest.raises(errors.NotEnoughReplicasAfterAppend):
            c.produce("cut", 0, [b"waited"], acks="all", retries=0)
        assert state().isr == (leader,) and state().leader == leader  # still registered: no election
        with pytest.raises(errors.NotEnoughReplicas):
            c.produce("cut", 0, [b"during"], acks="all", delivery_timeout_ms=2_000)

        relayed.relays[leader].heal()
        assert c.run_until(lambda: len(state().isr) == 3, 60_000), c.describe_text("cut")
        acked += [(c.produce("cut", 0, [b"after-%d" % i], acks="all"), b"after-%d" % i) for i in range(20)]

        follower = next(b for b in BROKERS if b != leader)
        relayed.procs[follower].send_signal(signal.SIGKILL)
        relayed.procs[follower].wait(10)
        relayed.start(follower, *relayed.extra(follower))  # the same ports again
        assert c.run_until(lambda: len(state().isr) == 3 and follower in c.live_brokers(), 60_000)
        got = {r.offset: r.value for r in c.fetch("cut", 0, 0)}
        assert [got.get(offset) for offset, _ in acked] == [v for _, v in acked]


def test_the_console_tools_options(processes):
    """What the quick-start test leaves out: round-robin over every partition, a last line
    without its newline, requests smaller than a partition's share (--batch-size),
    --partition 0, and --offset with --max-messages below what is there."""
    zk = processes.connect
    with connect(processes.metadata, config=CONFIG) as c:
        assert c.run_until(lambda: len(c.live_brokers()) == 3, 60_000)
        c.create_topic("opts", partitions=3, replication_factor=3)
        out = _kreplica("produce", "--zookeeper", zk, "--topic", "opts", "--batch-size", "4",
                        input=b"\n".join(b"plain-%d" % i for i in range(30)))  # no newline at the end
        assert out.returncode == 0 and b"30 records acknowledged" in out.stderr, out.stderr
        values = lambda p: [r.value for r in c.fetch("opts", p, 0)]  # noqa: E731
        assert [len(values(p)) for p in range(3)] == [10, 10, 10]
        assert values(0)[-1] == b"plain-27" and values(2)[-1] == b"plain-29"
        out = _kreplica("produce", "--zookeeper", zk, "--topic", "opts", "--partition", "0", input=b"a\nb\n")
        assert out.returncode == 0, out.stderr
        assert values(0)[-2:] == [b"a", b"b"] and [len(values(p)) for p in range(3)] == [12, 10, 10]

    out = _kreplica("consume", "--zookeeper", zk, "--topic", "opts", "--partition", "0", "--offset", "3",
                    "--max-messages", "2", "--print-offset", "--timeout-ms", "5000")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [b"0:3\tplain-9", b"0:4\tplain-12"]
    out = _kreplica("consume", "--zookeeper", zk, "--topic", "opts", "--partition", "1", "--from-beginning",
                    "--timeout-ms", "1000", timeout=30)  # polls again after the first read: nothing twice
    assert out.returncode == 0 and out.stdout.splitlines() == [b"plain-%d" % i for i in range(1, 30, 3)]


def test_ctrl_c_shuts_down_as_sigterm_does_and_the_exit_status_says_what_moved(processes):
    """SIGINT is a controlled shutdown too (exit 0: every leadership moved); a last broker,
    whose leaderships have nowhere to go, exits 1 after its retries."""
    with connect(processes.metadata, config=CONFIG) as c:
        assert c.run_until(lambda: len(c.live_brokers()) == 3, 60_000)
        c.create_topic("stay", partitions=3, replication_factor=3)
        assert c.run_until(lambda: all(len(p.isr) == 3 for p in c.describe("stay").partitions), 30_000)
        processes.procs[1].send_signal(signal.SIGINT)
        assert processes.procs[1].wait(60) == 0, processes.output(1)
        assert "every leadership moved" in processes.output(1)
        processes.procs[2].send_signal(signal.SIGKILL)
        processes.procs[2].wait(10)
        assert c.run_until(lambda: all(p.leader == 3 and p.isr == (3,) for p in c.describe("stay").partitions),
                           30_000), c.describe_text("stay")
        processes.procs[3].send_signal(signal.SIGTERM)
        assert processes.procs[3].wait(60) == 1, processes.output(3)
        assert "leaderships left behind" in processes.output(3)
