"""``kreplica bench net``: every row commits what it sends and is read back (no timing asserted)."""
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from kreplica import cli
from kreplica.tools import bench_net


def test_each_transport_commits_every_batch_and_the_table_compares_them(capsys):
    assert cli.main(["bench", "net", "--batches", "4", "--batch-records", "3", "--record-bytes", "16",
                     "--no-processes"]) == 0
    out = capsys.readouterr().out
    assert "in-process" in out and "tcp, one process" in out and "broker processes" not in out
    assert "1.00x" in out


@pytest.mark.zookeeper
def test_the_broker_process_row(request):
    request.getfixturevalue("zk_server")  # Debian's package is there (or the test fails in CI)
    secs = bench_net.processes(bench_net.batches(3, 2, 16))
    assert secs is not None and secs > 0


@pytest.mark.parametrize("read_back", [0, 7], ids=["short", "a-batch-twice"])
def test_a_read_back_of_other_than_every_record_sent_is_an_error_not_a_figure(read_back, monkeypatch):
    """Fewer records than sent (one lost), or more (a batch appended twice, a retry
    committed as well as its first try): either way the figure is not of the work asked."""
    from kreplica.cluster import Cluster

    monkeypatch.setattr(Cluster, "fetch", lambda self, *a, **k: [b""] * read_back)
    with pytest.raises(AssertionError, match=f"read back {read_back} committed records, expected 6"):
        bench_net.in_process(bench_net.batches(2, 2, 8))


def test_the_warm_up_batch_is_committed_but_not_timed(monkeypatch):
    """Each produce costs one fake second: the clock covers the three batches, not the fourth
    (the warm-up) sent before them, which is still read back."""
    clock = SimpleNamespace(now=0.0)
    committed = []

    class Cluster:
        def create_topic(self, topic, partitions, replication_factor):
            pass

        def run_until(self, condition, timeout_ms):
            return condition()

        def describe(self, topic):
            return SimpleNamespace(partitions=[SimpleNamespace(isr=[1, 2, 3])])

        def produce(self, topic, partition, batch, acks):
            assert acks == "all"
            clock.now += 1.0
            committed.extend(batch)

        def fetch(self, topic, partition, offset):
            return committed

    monkeypatch.setattr(bench_net, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    assert bench_net._produce_all(Cluster(), bench_net.batches(3, 2, 8)) == 3.0
    assert len(committed) == 8


def test_the_table_divides_each_rows_records_by_its_seconds_and_compares_with_in_process(monkeypatch, capsys):
    monkeypatch.setattr(bench_net, "in_process", lambda values: 2.0)
    monkeypatch.setattr(bench_net, "tcp", lambda values: 8.0)
    assert cli.main(["bench", "net", "--batches", "4", "--batch-records", "5", "--record-bytes", "8",
                     "--no-processes"]) == 0
    cells = [[cell.strip() for cell in line.split("│")[2:-1]] for line in capsys.readouterr().out.splitlines()
             if line.count("│") == 6]
    # wall s, committed records/s (20 records), ms per batch, vs in-process (the lines a name wraps onto are blank)
    assert [row for row in cells if any(row)] == [["2.00", "10", "500.00", "1.00x"], ["8.00", "2", "2000.00", "0.25x"]]


def test_the_options_size_the_batches_every_transport_sends(monkeypatch, capsys):
    sent = []
    monkeypatch.setattr(bench_net, "in_process", lambda values: sent.append(values) or 1.0)
    monkeypatch.setattr(bench_net, "tcp", lambda values: sent.append(values) or 1.0)
    assert cli.main(["bench", "net", "--batches", "3", "--batch-records", "2", "--record-bytes", "40",
                     "--no-processes"]) == 0
    assert sent[0] is sent[1]  # the same records for both
    assert [[len(v) for v in batch] for batch in sent[0]] == [[40, 40]] * 3
    assert "3 batches of 2 x 40 B" in capsys.readouterr().out


# The sixty-third review (docs/engine-audit.md, BH3-..): the third pass over the harness.

def test_every_batch_carries_its_own_records_and_a_run_is_repeatable():
    """Fresh data a batch, as a producer sends it: one batch sent N times would come from
    the CPU caches after the first.  The seed makes two runs send the same bytes."""
    values = bench_net.batches(4, 3, 16)
    assert [len(batch) for batch in values] == [3] * 4 and {len(v) for b in values for v in b} == {16}
    assert len({v for batch in values for v in batch}) == 12
    assert bench_net.batches(4, 3, 16) == values


# The eighty-second review (docs/engine-audit.md, BH4-..): the fourth pass over the harness.

def _stub_produce_all(monkeypatch):
    """``bench_net._produce_all`` replaced: records each cluster it is given, takes 1 s."""
    clusters = []
    monkeypatch.setattr(bench_net, "_produce_all", lambda c, values: clusters.append(c) or 1.0)
    return clusters


def test_each_row_runs_on_its_own_transport_with_the_same_config(monkeypatch):
    """The tcp row's cluster is given the loopback TCP transport (without it the row is the
    in-process row again); the broker processes get the in-process rows' config on their
    command line, and the client the same."""
    import contextlib

    from kreplica.cluster import Cluster
    from kreplica.meta import zk_server
    from kreplica.net import remote, tcp_transport

    clusters = _stub_produce_all(monkeypatch)
    embedded = []

    @contextlib.contextmanager
    def fake_embedded(**kwargs):
        embedded.append(kwargs)
        yield SimpleNamespace(**kwargs)

    class Tcp:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(Cluster, "embedded", fake_embedded)
    monkeypatch.setattr(tcp_transport, "TcpTransport", Tcp)
    assert bench_net.in_process([]) == bench_net.tcp([]) == 1.0
    assert embedded[0] == {"config": bench_net.CONFIG} and embedded[1]["config"] == bench_net.CONFIG
    assert isinstance(embedded[1]["transport"], Tcp) and clusters[1].transport is embedded[1]["transport"]

    argvs, signals, connected = [], [], []

    class Popen:
        def __init__(self, argv, stdout=None):
            argvs.append(argv)

        def send_signal(self, sig):
            signals.append(sig)

        def wait(self, timeout=None):
            return 0

    @contextlib.contextmanager
    def connect(url, config):
        connected.append(config)
        yield SimpleNamespace(run_until=lambda condition, ms: condition(), live_brokers=lambda: [1, 2, 3])

    server = SimpleNamespace(hosts="127.0.0.1:2181", stop=lambda: None)
    monkeypatch.setattr(zk_server, "zookeeper_available", lambda: True)
    monkeypatch.setattr(zk_server, "ZooKeeperServer", lambda: SimpleNamespace(start=lambda: server))
    monkeypatch.setattr(remote, "connect", connect)
    monkeypatch.setattr(bench_net.subprocess, "Popen", Popen)
    assert bench_net.processes([]) == 1.0
    configs = {argv[argv.index("--config") + 1] for argv in argvs}
    assert len(argvs) == 3 and configs == {f"{k}={v}" for k, v in bench_net.CONFIG.items()} == {"min.insync.replicas=2"}
    assert connected == [bench_net.CONFIG] and len(signals) == 3


def test_a_machine_that_cannot_start_the_broker_processes_gets_a_row_saying_so(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")  # one line a row
    monkeypatch.setattr(bench_net, "in_process", lambda values: 2.0)
    monkeypatch.setattr(bench_net, "tcp", lambda values: 4.0)
    monkeypatch.setattr(bench_net, "processes", lambda values: None)
    assert cli.main(["bench", "net", "--batches", "2", "--batch-records", "4", "--record-bytes", "8"]) == 0
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in capsys.readouterr().out.splitlines()
            if line.count("│") == 6]
    assert rows[1:] == [["tcp, one process (wall clock)", "4.00", "2", "2000.00", "0.50x"],
                        ["tcp, three broker processes + ZooKeeper", "-", "no zookeeper package", "-", "-"]]


def test_the_timed_batches_wait_for_all_three_replicas_in_sync():
    """The ISR grows from two replicas to three: the wait is for the third, so no timed
    batch waits on a follower still catching up."""
    isrs, seen, produced = iter([[1, 2], [1, 2, 3]]), [], []

    class Cluster:
        def create_topic(self, topic, partitions, replication_factor):
            pass

        def run_until(self, condition, timeout_ms):
            while not condition():
                pass
            return True

        def describe(self, topic):
            seen.append(next(isrs))
            return SimpleNamespace(partitions=[SimpleNamespace(isr=seen[-1])])

        def produce(self, topic, partition, batch, acks):
            produced.append(len(seen))

        def fetch(self, topic, partition, offset):
            return [None] * 6

    bench_net._produce_all(Cluster(), bench_net.batches(2, 2, 8))
    assert seen == [[1, 2], [1, 2, 3]] and produced == [2, 2, 2]


def test_a_replica_that_never_joins_the_isr_stops_the_run_before_any_batch():
    """The wait for the third replica times out: the run fails there, rather than timing
    batches committed by two replicas (min.insync.replicas 2 lets them through)."""
    produced = []

    class Cluster:
        def create_topic(self, topic, partitions, replication_factor):
            pass

        def run_until(self, condition, timeout_ms):
            return condition()  # the wait's 30 s over: the ISR still [1, 2]

        def describe(self, topic):
            return SimpleNamespace(partitions=[SimpleNamespace(isr=[1, 2])])

        def produce(self, topic, partition, batch, acks):
            produced.append(batch)

        def fetch(self, topic, partition, offset):
            return [b""] * 6

    with pytest.raises(AssertionError):
        bench_net._produce_all(Cluster(), bench_net.batches(2, 2, 8))
    assert produced == []


# The hundred-and-first review (docs/engine-audit.md, BH5-..): the fifth pass over the harness.

@pytest.mark.parametrize("fails, hangs", [(None, None), ("run", None), (None, "2"), ("register", None)],
                         ids=["timed", "a-failed-run", "a-broker-that-hangs", "a-broker-that-never-registers"])
def test_the_broker_process_row_waits_for_all_three_brokers_and_always_stops_what_it_started(fails, hangs,
                                                                                            monkeypatch):
    """Two brokers registered is not the three-broker cluster the row names; and the server
    and the three processes are stopped whether the timed run ends or fails, a broker still
    running 30 s after its SIGTERM being killed (the hundred-and-twentieth review's BH6-23:
    without the kill the row waits on it for ever). Each broker has its own data directory,
    and the brokers and the client share one chroot of the row's own on the server (the
    hundred-and-thirty-ninth review's BH7-33 and BH7-34). A broker that has not registered
    when the minute's wait ends fails the row before anything is timed."""
    import contextlib

    from kreplica.meta import zk_server
    from kreplica.net import remote

    live, events, argvs, urls, outs, signals = [[1, 2], [1, 2, 3]], [], [], [], [], []

    def produce_all(c, values):
        events.append(("timed with", len(live[0])))
        if fails == "run":
            raise AssertionError("read back 0 committed records")
        return 2.5

    def run_until(condition, timeout_ms):
        if fails == "register":
            return condition()  # the wait over: broker 3 never registered
        while not condition():
            live.pop(0)
        return True

    @contextlib.contextmanager
    def connect(url, config):
        urls.append(url)
        yield SimpleNamespace(run_until=run_until, live_brokers=lambda: live[0])

    class Broker:
        def __init__(self, argv, stdout=None):
            self.id = argv[argv.index("--id") + 1]
            argvs.append(argv)
            outs.append(stdout)

        def send_signal(self, sig):
            events.append(("stop broker", self.id))
            signals.append(sig)

        def wait(self, timeout=None):
            if self.id == hangs and not any(event == ("kill broker", self.id) for event in events):
                if timeout is None:
                    pytest.fail(f"waited for ever on broker {self.id}, never killed")
                raise subprocess.TimeoutExpired("kreplica broker", timeout)
            return 0

        def kill(self):
            events.append(("kill broker", self.id))

    server = SimpleNamespace(hosts="127.0.0.1:2181", stop=lambda: events.append(("stop server",)))
    monkeypatch.setattr(zk_server, "zookeeper_available", lambda: True)
    monkeypatch.setattr(zk_server, "ZooKeeperServer", lambda: SimpleNamespace(start=lambda: server))
    monkeypatch.setattr(remote, "connect", connect)
    monkeypatch.setattr(bench_net.subprocess, "Popen", Broker)
    monkeypatch.setattr(bench_net, "_produce_all", produce_all)
    if fails:
        with pytest.raises(AssertionError, match={"run": "read back 0", "register": "did not all register"}[fails]):
            bench_net.processes([])
    else:
        assert bench_net.processes([]) == 2.5
    killed = [("kill broker", hangs)] if hangs else []
    dirs = [Path(argv[argv.index("--data-dir") + 1]) for argv in argvs]
    assert len(set(dirs)) == 3 and len({d.parent for d in dirs}) == 1
    [chroot] = {argv[argv.index("--zookeeper") + 1] for argv in argvs}
    assert urls == [f"zookeeper://{chroot}"] and chroot.startswith("127.0.0.1:2181/") and len(chroot) > 15
    # stopped as `kreplica broker` documents a stop (SIGTERM: a controlled shutdown, the logs
    # closed), not crashed; only one still running 30 s later is killed
    assert signals == [signal.SIGTERM] * 3
    timed = [] if fails == "register" else [("timed with", 3)]
    assert events == [*timed, ("stop broker", "1"), ("stop broker", "2"), ("stop broker", "3"),
                      *killed, ("stop server",)]
    # "--quiet" still prints each broker's listening line: it must not land in the table's
    # output (the hundred-and-fifty-eighth review's BH8-26)
    assert outs == [subprocess.DEVNULL] * 3
