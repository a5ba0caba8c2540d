"""`kreplica demo` (make demo): seed 003's story end to end on the embedded cluster."""
import io
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from rich.console import Console

from kreplica import demo


def test_demo_reproduces_seed003_and_loses_nothing():
    out = io.StringIO()
    assert demo.run(Console(file=out, width=200, color_system=None), seed=0) is True
    text = out.getvalue()
    lines = {" ".join(line.split()) for line in text.splitlines()}  # the console expands tabs
    # Seed 003's published --describe lines, after the controlled shutdown and after the
    # kill (bar-0 back on its preferred 1001 by then), every line as printed there.
    for line in ("Topic: bar Partition: 0 Leader: 1003 Replicas: 1001,1003,1002 Isr: 1003,1002",
                 "Topic: bar Partition: 1 Leader: 1002 Replicas: 1002,1001,1003 Isr: 1002,1003",
                 "Topic: bar Partition: 2 Leader: 1003 Replicas: 1003,1002,1001 Isr: 1003,1002",
                 "Topic: bar Partition: 0 Leader: 1001 Replicas: 1001,1003,1002 Isr: 1003,1001",
                 "Topic: bar Partition: 1 Leader: 1001 Replicas: 1002,1001,1003 Isr: 1003,1001",
                 "Topic: bar Partition: 2 Leader: 1003 Replicas: 1003,1002,1001 Isr: 1003,1001"):
        assert line in lines
    assert "differs" not in text and "nothing acknowledged was lost" in text
    assert "Leader-election and ISR timeline" in text and "becomes leader" in text
    assert "demo passed" in text
    # Off a terminal the progress bar is off: the only blank lines are those ending each
    # --describe text, none left behind where a bar stopped (TL6-24).
    printed = text.splitlines()
    blank = [i for i, line in enumerate(printed) if not line.strip()]
    assert blank and all(printed[i - 1].split()[:2] == ["Topic:", "bar"] for i in blank)


@pytest.mark.zookeeper
def test_demo_on_a_private_real_zookeeper(request):
    request.getfixturevalue("zk_server")  # fails under KREPLICA_REQUIRE_ZK=1 when ZooKeeper is missing
    out = io.StringIO()
    assert demo.run(Console(file=out, width=200, color_system=None), metadata="zookeeper+local:///kreplica-demo")
    text = out.getvalue()
    assert "metadata: zookeeper+local:///kreplica-demo, real time" in text
    assert "nothing acknowledged was lost" in text and "demo passed" in text


@pytest.mark.zookeeper
def test_sigterm_stops_the_demo_and_its_private_zookeeper(request, tmp_path):
    """`kill PID` (a job scheduler, `timeout`) unwinds the demo as Ctrl-C would: its
    ZooKeeper JVM stops and its directories go, where before they outlived it."""
    request.getfixturevalue("zk_server")
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the demo's temporary directories land here
    proc = subprocess.Popen([sys.executable, "-m", "kreplica", "demo", "--metadata", "zookeeper+local:///d"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        me = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        jvms: list[psutil.Process] = []
        while not jvms and time.monotonic() < deadline and proc.poll() is None:
            jvms = [p for p in me.children(recursive=True) if "ZooKeeperServerMain" in " ".join(p.cmdline())]
            time.sleep(0.05)
        assert jvms, "the demo never started its ZooKeeper"
        time.sleep(1.0)  # into the story: brokers registered, topic being created
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "kreplica demo: terminated" in err.decode()
    assert "Traceback" not in err.decode()
    _gone, alive = psutil.wait_procs(jvms, timeout=10)
    assert not alive
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("metadata, message", [
    ("bogus", "'bogus' is not a metadata store"),
    ("MEMORY", "'MEMORY' is not a metadata store"),
    ("memory://", "'memory://' is not a metadata store"),
    ("zookeeper://:2181/x", "expected host:port, got ':2181'"),
    ("zookeeper://127.0.0.1:abc/x", "expected host:port, got '127.0.0.1:abc'"),
    ("zookeeper+local://host/x", "zookeeper+local takes no host: 'zookeeper+local://host/x'"),  # TL6-25
], ids=["bogus", "MEMORY", "memory-url", "no-host", "bad-port",
        "local-with-host"])  # ids: `-k 'not zookeeper'` must not drop them
def test_a_bad_metadata_store_is_a_usage_error(metadata, message, capsys):
    from kreplica.cli import main

    with pytest.raises(SystemExit) as e:
        main(["demo", "--metadata", metadata])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and last.startswith("kreplica demo: error: argument --metadata: ") and message in last
    assert last.endswith("use memory, zookeeper+local:///CHROOT or zookeeper://HOST:PORT/CHROOT")


def test_an_unreachable_store_is_one_line_and_leaves_no_data_dir(tmp_path, monkeypatch, capsys):
    import tempfile

    from kreplica.cli import main
    from kreplica.meta import zookeeper_store
    from kreplica.meta.store import ConnectionLoss

    def unreachable(hosts, *args, **kwargs):
        raise ConnectionLoss(f"cannot reach ZooKeeper at {hosts}: Connection time-out")

    monkeypatch.setattr(zookeeper_store, "ZooKeeperStore", unreachable)  # instead of waiting 15 s
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["demo", "--metadata", "zookeeper://127.0.0.1:1/x"]) == 1
    assert capsys.readouterr().err == ("Error: --metadata zookeeper://127.0.0.1:1/x: CONNECTIONLOSS: "
                                       "cannot reach ZooKeeper at 127.0.0.1:1: Connection time-out\n")
    assert list(tmp_path.iterdir()) == []


# The thirteenth review (docs/engine-audit.md, CT..): the demo's own checks must be able
# to fail.  A correct cluster never gives them the chance, so a fault is put in its way.
@pytest.mark.parametrize("fault", ["changed", "dropped"])
def test_an_acknowledged_record_read_back_wrong_fails_the_demo(fault, monkeypatch):
    from kreplica import Cluster
    from kreplica.records import Record

    fetch = Cluster.fetch

    def faulty(self, topic, partition, offset=0, **kwargs):
        records = fetch(self, topic, partition, offset, **kwargs)
        if partition != 1:
            return records
        r = records[5]
        wrong = [Record(r.offset, r.timestamp, r.key, b"not-" + r.value)] if fault == "changed" else []
        return records[:5] + wrong + records[6:]

    monkeypatch.setattr(Cluster, "fetch", faulty)
    out = io.StringIO()
    assert demo.run(Console(file=out, width=200, color_system=None), seed=0) is False
    text = " ".join(out.getvalue().split())
    assert "partition 1: acknowledged 4000, read " in text and "missing or different 1" in text
    assert "1 records lost" in text and "demo found a difference" in text


@pytest.mark.parametrize("isr_1", [demo.ASSIGNMENT[1], (1002,)], ids=["in-full", "leader-only"])  # T4-23
def test_a_leader_as_published_with_another_isr_differs(isr_1):
    from kreplica.describe import PartitionDescription, TopicDescription

    class Picture:  # seed 003's picture after the controlled shutdown, bar-1's ISR larger or smaller
        def describe(self, topic):
            return TopicDescription(topic, tuple(
                PartitionDescription(p, leader, tuple(demo.ASSIGNMENT[p]),
                                     tuple(isr_1) if p == 1 else tuple(isr), 0)
                for p, (leader, isr) in demo.EXPECTED_AFTER_SHUTDOWN.items()), {})

    out = io.StringIO()
    assert demo._check(Picture(), Console(file=out, width=200, color_system=None),
                       demo.EXPECTED_AFTER_SHUTDOWN) is False
    lines = out.getvalue().splitlines()
    assert [line.endswith("matches") for line in lines] == [True, False, True] and lines[1].endswith("differs")


@pytest.mark.parametrize("passed, status", [(True, 0), (False, 1)])
def test_the_demos_exit_status_says_whether_it_passed(passed, status, monkeypatch):
    from kreplica.cli import main

    monkeypatch.setattr(demo, "run", lambda seed, metadata: passed)
    assert main(["demo"]) == status


# The forty-first review (docs/engine-audit.md, CT2-..): each of the demo's verdicts, and
# its defaults, must count.
@pytest.mark.parametrize("step", ["EXPECTED_AFTER_SHUTDOWN", "EXPECTED_AFTER_KILL"])
def test_a_published_picture_that_differs_at_either_check_fails_the_demo(step, monkeypatch):
    picture = dict(getattr(demo, step))
    leader, isr = picture[1]
    picture[1] = (min(isr - {leader}), isr)  # bar-1 published on another ISR member
    monkeypatch.setattr(demo, step, picture)
    out = io.StringIO()
    assert demo.run(Console(file=out, width=200, color_system=None), seed=0) is False
    text = out.getvalue()
    assert text.count("differs") == 1 and "demo found a difference" in text


def test_an_isr_not_full_again_after_the_restart_fails_the_demo(monkeypatch):
    """Step 3 waits for 1001 to rejoin every ISR; here the wait sees it never do so."""
    from kreplica import Cluster

    restarted = []
    start = Cluster.start
    isr_full = demo._isr_full

    def start_and_note(self, broker_id):
        restarted.append(broker_id)
        return start(self, broker_id)

    monkeypatch.setattr(Cluster, "start", start_and_note)
    monkeypatch.setattr(demo, "_isr_full", lambda c: isr_full(c) and not restarted)
    out = io.StringIO()
    assert demo.run(Console(file=out, width=200, color_system=None), seed=0) is False
    text = out.getvalue()
    assert "ISR full again: False" in text and "differs" not in text and "demo found a difference" in text


def test_a_private_store_that_cannot_start_is_one_line_and_leaves_no_data_dir(tmp_path, monkeypatch, capsys):
    """Without Debian's zookeeper package (or java) `--metadata zookeeper+local://` cannot
    start its ZooKeeper: one Error line and exit status 1, as for an unreachable store."""
    import tempfile

    from kreplica.cli import main
    from kreplica.meta import zk_server

    monkeypatch.setattr(zk_server, "zookeeper_available", lambda jar=zk_server.ZK_JAR: False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["demo", "--metadata", "zookeeper+local:///d"]) == 1
    assert capsys.readouterr().err == (f"Error: --metadata zookeeper+local:///d: {zk_server.ZK_JAR} or java "
                                       "not found (apt-get install zookeeper)\n")
    assert list(tmp_path.iterdir()) == []


def test_the_demo_runs_seed_0_on_the_memory_store_by_default(monkeypatch):
    from kreplica.cli import main

    calls = []
    monkeypatch.setattr(demo, "run", lambda seed, metadata: calls.append((seed, metadata)) or True)
    assert main(["demo"]) == 0 and calls == [(0, "memory")]


def test_the_timeline_shows_each_leader_epoch_and_isr_once():
    """A LeaderAndIsr repeated for the same epoch and ISR, or echoing the leader's own ISR
    change, is not a row of its own; a new epoch is."""
    import types

    from kreplica.cluster import TimelineEvent

    def leader(t, epoch, isr):
        return TimelineEvent(t, "leader_and_isr", 1001, {"tp": "bar-0", "leader": 1001, "leader_epoch": epoch,
                                                         "isr": isr, "controller_epoch": 1})

    events = [leader(10, 1, (1001, 1002, 1003)), leader(20, 1, (1001, 1002, 1003)),
              TimelineEvent(30, "isr_changed", 1001, {"tp": "bar-0", "leader_epoch": 1, "isr": (1001, 1003),
                                                      "zk_version": 1}),
              leader(40, 1, (1001, 1003)), leader(50, 2, (1001, 1003))]
    table = demo._timeline_table(types.SimpleNamespace(virtual_time=True, scheduler=None), events)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    rows = [line for line in out.getvalue().splitlines() if "bar-0" in line]
    assert [row.split()[1] for row in rows] == ["10", "30", "50"]


# The sixty-first review (docs/engine-audit.md, T3-..): the third pass over the demo.
def test_the_timeline_shows_broker_events_and_time_since_the_cluster_started():
    """A killed, started, stopped or expired broker is a row of the timeline with its
    details; in real time (a ZooKeeper-backed demo) the clock is the epoch's, and the
    timeline counts from the cluster's start, not from 1970."""
    import types

    from kreplica.cluster import TimelineEvent

    started = 1_800_000_000_000
    events = [TimelineEvent(started + 250 * i, kind, 1002, {"session": 7})
              for i, kind in enumerate(["broker_killed", "session_expired", "broker_started",
                                        "controlled_shutdown_done"], 1)]
    c = types.SimpleNamespace(virtual_time=False, scheduler=types.SimpleNamespace(started_ms=started))
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(demo._timeline_table(c, events))
    rows = [line.split("│")[1:5] for line in out.getvalue().splitlines() if "session=7" in line]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["250", "broker killed", "1002", "session=7"], ["500", "session expired", "1002", "session=7"],
        ["750", "broker started", "1002", "session=7"], ["1000", "controlled shutdown done", "1002", "session=7"]]


def test_piped_the_demo_prints_120_columns_wide(monkeypatch):
    """Off a terminal rich assumes 80 columns, which folds the timeline's details in two."""
    from kreplica.meta.store import StoreError

    widths = []

    class Recording(Console):
        def __init__(self, **kwargs):
            widths.append(kwargs.get("width"))
            super().__init__(**kwargs)

    def unreachable(**kwargs):
        raise StoreError("unreachable")

    monkeypatch.setattr(demo, "Console", Recording)
    monkeypatch.setattr(demo.Cluster, "embedded", unreachable)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    with pytest.raises(StoreError):
        demo.run()
    assert widths == [120]
