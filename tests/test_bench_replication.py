"""``kreplica bench replication --breakdown``: the timed rounds account for the run (no timing asserted);
bad arguments are refused before anything runs."""
import pytest

from cli_refusal import refused
from kreplica.log.mapped_file import MappedFile
from kreplica.tools import bench_replication
from kreplica.tools.bench_replication import _batches, breakdown, finish_replicated, main, prepare_replicated, produce_replicated


def test_breakdown_names_every_broker_and_restores_the_hooks(tmp_path):
    write_run, prefault = MappedFile.write_run, MappedFile.prefault
    # 100 KiB batches: big enough that the leader prefaults what a follower fetches
    spent = breakdown(tmp_path / "r", _batches(1024, 100, 2, 1), count=6, in_flight=2)
    assert {"write broker-1", "write broker-2", "write broker-3", "prefault", "rest", "total"} <= set(spent)
    assert all(v >= 0 for k, v in spent.items() if k != "rest")
    assert abs(sum(v for k, v in spent.items() if k != "total") - spent["total"]) < 1e-9
    single = breakdown(tmp_path / "s", _batches(100, 10, 2, 1), count=4, in_flight=2, replicated=False)
    assert set(single) == {"write", "rest", "total"}
    assert (MappedFile.write_run, MappedFile.prefault) == (write_run, prefault)


def test_the_cli_prints_the_breakdown(tmp_path, capsys):
    assert main(["--sizes", "100", "--batch-records", "10", "--batches", "5", "--in-flight", "2",
                 "--repeat", "1", "--data-dir", str(tmp_path), "--breakdown"]) == 0
    out = capsys.readouterr().out
    assert "replicated timed round" in out and "1-replica timed round" in out
    assert "CPU ratio with replication's own work free" in out


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "abc"], "argument --sizes: 'abc': expected record sizes in bytes"),
    (["--sizes", ""], "argument --sizes: '': expected record sizes in bytes"),
    (["--sizes", "100,"], "argument --sizes: '100,': expected record sizes in bytes"),
    (["--sizes=-5"], "argument --sizes: '-5': expected record sizes in bytes"),
    (["--sizes", "100,0"], "argument --sizes: '100,0': expected record sizes in bytes"),  # a 0 B record
    (["--repeat", "0"], "argument --repeat: 0: must be at least 1"),
    (["--batches", "-1"], "argument --batches: -1: must be at least 1"),
    (["--batches", "0"], "argument --batches: 0: must be at least 1"),  # was silently the default
    (["--in-flight", "0"], "argument --in-flight: 0: must be at least 1"),
    (["--batch-records", "0"], "argument --batch-records: 0: must be at least 1"),
    (["--batch-records", "-1"], "argument --batch-records: -1: must be at least 1"),
    (["--distinct", "-1"], "argument --distinct: -1: must be at least 0"),
    (["--data-dir", "/nonexistent"], "argument --data-dir: '/nonexistent': no such directory"),
])
def test_bad_arguments_are_refused_by_the_parser(argv, message, capsys):
    assert message in refused(main, argv, capsys)


def test_run_keeps_each_sides_best_round_and_divides_ours_by_the_peers(tmp_path, monkeypatch):
    """Best of three rounds on each side (the doc's "the best round of each counts"), the
    replicated rate over the single log's, the CPU ratio from the CPU seconds, MB of 10**6."""
    singles = iter([(2.0, 1.5), (1.0, 0.8), (3.0, 2.0)])
    replicated = iter([(5.0, 3.0, 7), (4.0, 2.5, 9), (6.0, 3.5, 8)])

    def single(root, batches, count):
        seconds, cpu = next(singles)
        return {"seconds": seconds, "cpu_seconds": cpu, "records": 1000}

    def rounds(root, batches, count, in_flight):
        seconds, cpu, fetches = next(replicated)
        return {"seconds": seconds, "cpu_seconds": cpu, "records": 1000, "follower_fetches": fetches,
                "bytes": 2_000_000}

    monkeypatch.setattr(bench_replication, "run_single_log", single)
    monkeypatch.setattr(bench_replication, "run_replicated", rounds)
    r = bench_replication.run(100, batch_records=10, count=4, in_flight=2, data_dir=str(tmp_path), repeat=3)
    assert (r["single_append_records_per_s"], r["committed_records_per_s"]) == (1000.0, 250.0)
    assert (r["ratio"], r["cpu_ratio"]) == (pytest.approx(0.25), pytest.approx(0.32))  # 0.8 / 2.5 CPU s
    assert (r["committed_mb_per_s"], r["follower_fetches"]) == (pytest.approx(0.5), 9)
    assert r["rounds_committed_records_per_s"] == pytest.approx([200.0, 250.0, 1000 / 6])
    assert (r["batches"], r["distinct_batches"]) == (4, 4)


@pytest.mark.parametrize("in_flight", [1, 3])
def test_the_producer_keeps_in_flight_requests_outstanding(in_flight, tmp_path):
    cluster = prepare_replicated(tmp_path)
    transport, batches = cluster["transport"], _batches(100, 10, 8, 1)
    send, outstanding, most = transport.send, [0], [0]

    def counting_send(src, dst, request, on_response):
        if src != -1:  # a follower's fetch
            return send(src, dst, request, on_response)
        outstanding[0] += 1
        most[0] = max(most[0], outstanding[0])

        def acked(response):
            outstanding[0] -= 1
            on_response(response)

        return send(src, dst, request, acked)

    transport.send = counting_send
    produced = produce_replicated(cluster, batches, 8, in_flight)
    assert (most[0], produced["acked"]) == (in_flight, 8)
    assert finish_replicated(cluster, produced, batches, 8)["records"] == 80


@pytest.mark.parametrize("argv, count", [(["--batches", "7"], 7), ([], max(100, (50 << 20) // (1024 * 10)))])
def test_every_option_reaches_the_run_and_the_line_shows_its_figures(argv, count, tmp_path, monkeypatch, capsys):
    calls = []

    def run(*args):
        calls.append(args)
        return {"committed_records_per_s": 250_000.0, "committed_mb_per_s": 25.4, "ratio": 0.25,
                "single_append_records_per_s": 1_000_000.0, "cpu_ratio": 0.32, "breakdown": None}

    monkeypatch.setattr(bench_replication, "run", run)
    assert main(["--sizes", "1024", "--batch-records", "10", "--in-flight", "5", "--repeat", "2",
                 "--data-dir", str(tmp_path), "--distinct", "4", *argv]) == 0
    assert calls == [(1024, 10, count, 5, str(tmp_path), 2, False, 4)]
    first, _header, line = capsys.readouterr().out.splitlines()
    assert first.endswith("best of 2 interleaved rounds; 4 batches recycled; MB/s of the encoded batches (10^6 bytes)")
    assert line.split() == ["1024B", str(count), "250,000", "25", "1,000,000", "0.250", "0.320"]


def _fake_cluster(error_codes):
    """A cluster for ``produce_replicated`` whose leader answers at once, with these error codes in turn."""
    from types import SimpleNamespace

    codes = iter(error_codes)

    def send(src, dst, request, on_response):
        on_response(SimpleNamespace(partitions=[SimpleNamespace(error_code=next(codes))]))

    return {"scheduler": SimpleNamespace(run_until=lambda done, timeout_ms: done()),
            "transport": SimpleNamespace(send=send)}


def test_an_error_response_is_a_failure_and_the_run_is_refused(tmp_path):
    from kreplica.errors import NONE, NotEnoughReplicas

    produced = produce_replicated(_fake_cluster([NONE, NotEnoughReplicas.code, NONE]), [b"x"], 3, 1)
    assert (produced["acked"], produced["failures"]) == (3, [NotEnoughReplicas.code])
    with pytest.raises(RuntimeError, match=r"3/3 acknowledged, errors \[%d\]" % NotEnoughReplicas.code):
        finish_replicated({"managers": _managers({1: (10, 10), 2: (10, 0), 3: (10, 0)})}, produced, [b"x"], 3)


def _managers(ends):
    from types import SimpleNamespace

    return {b: SimpleNamespace(partitions={bench_replication.TP: SimpleNamespace(log_end_offset=leo, high_watermark=hw)},
                               fetchers={}, shutdown=lambda clean: None)
            for b, (leo, hw) in ends.items()}


def test_a_leader_whose_high_watermark_lags_its_log_end_is_not_converged():
    produced = {"acked": 2, "failures": [], "seconds": 1.0, "cpu_seconds": 1.0}
    with pytest.raises(RuntimeError, match="replicas did not converge: LEOs {1: 20, 2: 20, 3: 20}, HW 10"):
        finish_replicated({"managers": _managers({1: (20, 10), 2: (20, 0), 3: (20, 0)})}, produced, [b"x"], 2)
    # a follower short of the leader's log has not converged either, whatever the leader's HW says:
    # the run counts records committed on all three replicas (the hundred-and-twentieth review's BH6-17)
    with pytest.raises(RuntimeError, match="replicas did not converge: LEOs {1: 20, 2: 20, 3: 10}, HW 20"):
        finish_replicated({"managers": _managers({1: (20, 20), 2: (20, 0), 3: (10, 0)})}, produced, [b"x"], 2)
    done = finish_replicated({"managers": _managers({1: (20, 20), 2: (20, 0), 3: (20, 0)})}, produced, [b"xy"], 2)
    assert (done["records"], done["bytes"]) == (20, 4)


def test_the_breakdown_floor_frees_replications_own_work_and_triples_the_peers_rest(capsys):
    """Replicated total 1.5 CPU s, of it 0.9 the rest: free of its writes and prefaults and
    with three times the single log's 0.2 s of bookkeeping, it would take 1.2 s: 0.3 / 1.2.
    The parts are listed by name, not in the order a run first timed them (the leader's
    write, its first fetch's prefault, then the followers' writes; the
    hundred-and-thirty-ninth review's BH7-25), so every size's line reads alike."""
    bench_replication._print_breakdown({"write": 0.05, "rest": 0.2, "total": 0.3},
                                       {"write broker-1": 0.2, "prefault": 0.1, "write broker-3": 0.15,
                                        "write broker-2": 0.15, "rest": 0.9, "total": 1.5})
    single, replicated, floor = capsys.readouterr().out.splitlines()
    assert single.split() == ["1-replica", "timed", "round,", "CPU", "ms:", "write", "50.0,", "rest", "200.0",
                              "(total", "300.0)"]
    assert "prefault 100.0, write broker-1 200.0, write broker-2 150.0, write broker-3 150.0, rest 900.0" in replicated
    assert floor.strip() == "CPU ratio with replication's own work free: 0.25"


# The sixty-third review (docs/engine-audit.md, BH3-..): the third pass over the harness.

def test_the_cpu_figures_are_this_threads_cpu_time(tmp_path, monkeypatch):
    """The CPU-time ratio is "this thread's CPU": the process's clock would also charge
    every other thread (a Spark or ZooKeeper client, the GC of other work) to the run.
    Here the thread's clock moves 1 s a reading and the process's 100 s."""
    from types import SimpleNamespace

    from kreplica.errors import NONE

    clock = SimpleNamespace(wall=0.0, thread=0.0, process=0.0)

    def reading(name, step):
        def read():
            setattr(clock, name, getattr(clock, name) + step)
            return getattr(clock, name)
        return read

    monkeypatch.setattr(bench_replication, "time", SimpleNamespace(
        perf_counter=reading("wall", 2.0), thread_time=reading("thread", 1.0), process_time=reading("process", 100.0)))
    produced = produce_replicated(_fake_cluster([NONE, NONE]), [b"x"], 2, 1)
    assert (produced["seconds"], produced["cpu_seconds"]) == (2.0, 1.0)
    log = bench_replication.open_single_log(tmp_path)
    try:
        assert bench_replication.append_single_log(log, _batches(10, 2, 1, 1), 2) == (2.0, 1.0)
    finally:
        log.close()


# The eighty-second review (docs/engine-audit.md, BH4-..): the fourth pass over the harness.

def test_the_default_batch_count_is_about_50_mib_and_never_below_100(monkeypatch, capsys):
    """1 KiB x 1,000-record batches: 50 MiB is 51 batches, below the floor of 100 (a run
    of a few dozen requests would be mostly its start and end)."""
    counts = []

    def run(size, batch_records, count, *rest):
        counts.append((size, count))
        return {"committed_records_per_s": 1.0, "committed_mb_per_s": 1.0, "ratio": 1.0,
                "single_append_records_per_s": 1.0, "cpu_ratio": 1.0, "breakdown": None}

    monkeypatch.setattr(bench_replication, "run", run)
    assert main(["--sizes", "1024,100", "--batch-records", "1000"]) == 0
    assert counts == [(1024, 100), (100, 524)]


def test_the_rounds_take_turns_under_the_data_dir_and_the_breakdown_is_single_then_replicated(tmp_path, monkeypatch):
    """Each round runs the single log then the replicated partition (so a burst of load falls
    on both), each in a fresh directory under ``--data-dir``; the breakdown's pair is
    (1-replica, replicated), the order ``_print_breakdown`` labels them in."""
    calls = []

    def single(root, batches, count):
        calls.append(("single", root.parent))
        return {"seconds": 1.0, "cpu_seconds": 1.0, "records": 10}

    def replicated(root, batches, count, in_flight):
        calls.append(("replicated", root.parent))
        return {"seconds": 1.0, "cpu_seconds": 1.0, "records": 10, "follower_fetches": 1, "bytes": 10}

    def breakdown(root, batches, count, in_flight, replicated):
        calls.append(("breakdown", root.parent))
        return {"replicated": replicated}

    monkeypatch.setattr(bench_replication, "run_single_log", single)
    monkeypatch.setattr(bench_replication, "run_replicated", replicated)
    monkeypatch.setattr(bench_replication, "breakdown", breakdown)
    r = bench_replication.run(10, batch_records=1, count=2, in_flight=1, data_dir=str(tmp_path), repeat=2,
                              with_breakdown=True)
    assert calls == [(name, tmp_path) for name in ("single", "replicated") * 2 + ("breakdown",) * 2]
    assert r["breakdown"] == ({"replicated": False}, {"replicated": True})


# The hundred-and-first review (docs/engine-audit.md, BH5-..): the fifth pass over the harness.

def test_every_batch_holds_its_own_records():
    """Fresh producer data: the batches cycled through are all different (the same batch
    resent would be read from the CPU caches), and a seed gives the same batches again."""
    batches = _batches(10, 5, 3, 1)
    assert len(set(batches)) == 3 and _batches(10, 5, 3, 1) == batches


def test_the_cpu_ratio_takes_each_sides_least_cpu_round_whichever_round_was_fastest(tmp_path, monkeypatch):
    """The fastest wall-clock round is not the one that used the least CPU: the CPU ratio,
    the figure that sees through a busy machine, is from each side's least CPU."""
    singles, replicated = iter([(1.0, 0.9), (2.0, 0.5)]), iter([(4.0, 3.0), (5.0, 2.0)])

    def single(root, batches, count):
        seconds, cpu = next(singles)
        return {"seconds": seconds, "cpu_seconds": cpu, "records": 1000}

    def rounds(root, batches, count, in_flight):
        seconds, cpu = next(replicated)
        return {"seconds": seconds, "cpu_seconds": cpu, "records": 1000, "follower_fetches": 1, "bytes": 1}

    monkeypatch.setattr(bench_replication, "run_single_log", single)
    monkeypatch.setattr(bench_replication, "run_replicated", rounds)
    r = bench_replication.run(100, batch_records=10, count=4, in_flight=2, data_dir=str(tmp_path), repeat=2)
    assert (r["ratio"], r["cpu_ratio"]) == (pytest.approx(0.25), pytest.approx(0.25))  # 1 / 4 s; 0.5 / 2 CPU s


def test_the_produce_clock_covers_the_first_requests_sent(monkeypatch):
    """The first ``in_flight`` requests are part of the run: each send here takes 1 s of
    wall clock and 0.5 s of CPU, and every request is sent and answered at once."""
    from types import SimpleNamespace

    from kreplica.errors import NONE

    clock = SimpleNamespace(wall=0.0, cpu=0.0)
    monkeypatch.setattr(bench_replication, "time", SimpleNamespace(perf_counter=lambda: clock.wall,
                                                                   thread_time=lambda: clock.cpu))
    cluster = _fake_cluster([NONE] * 3)
    answer = cluster["transport"].send

    def send(*args):
        clock.wall, clock.cpu = clock.wall + 1.0, clock.cpu + 0.5
        answer(*args)

    cluster["transport"] = SimpleNamespace(send=send)
    produced = produce_replicated(cluster, [b"x"], 3, 3)
    assert (produced["seconds"], produced["cpu_seconds"], produced["acked"]) == (3.0, 1.5, 3)


# The hundred-and-fifty-eighth review (docs/engine-audit.md, BH8-..): the eighth pass over the harness.

@pytest.mark.parametrize("replicated", [True, False])
def test_a_breakdown_round_that_fails_still_puts_the_log_writes_back(replicated, tmp_path, monkeypatch):
    """``breakdown`` wraps ``MappedFile.write_run`` and ``prefault`` for its round: a round
    that raises (a full disk) must leave them as they were, or every later Log in the
    process would keep paying for, and writing into, the timing hooks."""
    write_run, prefault = MappedFile.write_run, MappedFile.prefault

    def fail(*args):
        raise OSError("no space left on device")

    monkeypatch.setattr(bench_replication, "run_replicated" if replicated else "run_single_log", fail)
    with pytest.raises(OSError, match="no space left"):
        breakdown(tmp_path, _batches(100, 10, 2, 1), count=4, in_flight=2, replicated=replicated)
    assert (MappedFile.write_run, MappedFile.prefault) == (write_run, prefault)


def test_each_request_carries_the_next_batch_in_turn_and_every_replica_holds_them_in_order(tmp_path):
    """With ``in_flight`` requests outstanding, request n carries batch n (cycling through
    the batches): the replicas end up holding every batch once, in the order sent, not the
    first batch again for every request sent before an acknowledgement came back."""
    from kreplica.records import decode_records

    cluster = prepare_replicated(tmp_path)
    batches = _batches(100, 10, 4, 1)
    produced = produce_replicated(cluster, batches, 6, 3)
    expected = [r.value for i in range(6) for r in decode_records(batches[i % 4])]
    for rm in cluster["managers"].values():
        log = rm.partitions[bench_replication.TP].log
        assert [r.value for r in decode_records(log.read(0, 1 << 20).view)] == expected
    assert finish_replicated(cluster, produced, batches, 6)["records"] == 60


def test_the_single_log_round_closes_its_log(tmp_path, monkeypatch):
    """The peer's round closes its Log as the replicated round shuts its brokers down: its
    256 MiB segment stays mapped otherwise while ``run``'s temporary directory is removed
    under it, one more per round."""
    closed: list[int] = []
    open_single_log = bench_replication.open_single_log

    def opened(root):
        log = open_single_log(root)
        close = log.close
        log.close = lambda: closed.append(log.log_end_offset) or close()
        return log

    monkeypatch.setattr(bench_replication, "open_single_log", opened)
    r = bench_replication.run_single_log(tmp_path, _batches(100, 10, 2, 1), 3)
    assert r["records"] == 30 and closed == [30]
    # and when its appends fail (a full disk): the Log is closed before the error goes up

    def full(log, batches, count):
        raise OSError("no space left on device")

    monkeypatch.setattr(bench_replication, "append_single_log", full)
    with pytest.raises(OSError, match="no space left"):
        bench_replication.run_single_log(tmp_path / "again", _batches(100, 10, 2, 1), 3)
    assert closed == [30, 0]


# The hundred-and-seventy-seventh review (docs/engine-audit.md, BH9-..): the ninth pass over the harness.

def test_the_single_log_peer_is_configured_as_the_replicas_logs(tmp_path):
    """The peer's Log rolls where the replicas' logs roll (256 MiB segments): on the default
    1 GiB it would append past the point where the replicas roll a segment, and the ratio
    would set appends that roll against one that never does."""
    cluster = prepare_replicated(tmp_path / "replicated")
    single = bench_replication.open_single_log(tmp_path / "single")
    try:
        replicas = {rm.partitions[bench_replication.TP].log.config.segment_bytes
                    for rm in cluster["managers"].values()}
        assert replicas == {single.config.segment_bytes} == {bench_replication.SEGMENT_BYTES}
    finally:
        single.close()
        for rm in cluster["managers"].values():
            rm.shutdown(clean=True)


def test_each_part_of_the_breakdown_is_the_cpu_time_of_all_its_calls(tmp_path, monkeypatch):
    """A stand-in round on a stand-in clock: four writes of 0.25 s (two on broker 1's segment)
    and three prefaults of 0.5 s in a round of 4 CPU s. Each part sums every call of its own,
    and the rest is what the parts leave of the round."""
    from types import SimpleNamespace

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(bench_replication, "time", SimpleNamespace(thread_time=lambda: clock.now))

    def costing(seconds):
        def part(self, *args):
            clock.now += seconds
        return part

    monkeypatch.setattr(MappedFile, "write_run", costing(0.25))
    monkeypatch.setattr(MappedFile, "prefault", costing(0.5))

    def segment(broker):  # <root>/broker-N/<tp>/<segment>.log, as the brokers lay their logs out
        return SimpleNamespace(path=tmp_path / f"broker-{broker}" / "bench-0" / "00000000000000000000.log")

    def round_(root, batches, count, in_flight):
        for broker in (1, 2, 3, 1):
            MappedFile.write_run(segment(broker), b"batch")
        for _ in range(3):
            MappedFile.prefault(segment(1), 0, 100)
        return {"cpu_seconds": 4.0}

    monkeypatch.setattr(bench_replication, "run_replicated", round_)
    assert breakdown(tmp_path, [b"batch"], 4, 2) == {
        "write broker-1": 0.5, "write broker-2": 0.25, "write broker-3": 0.25, "prefault": 1.5, "rest": 1.5,
        "total": 4.0}


@pytest.mark.parametrize("fails", ["produce", "check"])
def test_a_replicated_round_that_fails_still_shuts_its_brokers_down(fails, tmp_path, monkeypatch):
    """A round that raises mid-produce (a full disk) or fails its check (not every request
    acknowledged) shuts its three brokers down before the error goes up, as a round that
    succeeds does: otherwise their logs stay open, a 256 MiB segment mapped each, while
    ``run``'s temporary directory is removed under them."""
    clusters = []
    prepare = bench_replication.prepare_replicated
    monkeypatch.setattr(bench_replication, "prepare_replicated", lambda root: clusters.append(prepare(root)) or clusters[-1])

    def produce(cluster, batches, count, in_flight):
        if fails == "produce":
            raise OSError("no space left on device")
        return {"seconds": 1.0, "cpu_seconds": 1.0, "acked": count - 1, "failures": []}

    monkeypatch.setattr(bench_replication, "produce_replicated", produce)
    with pytest.raises(OSError if fails == "produce" else RuntimeError, match="no space left|2/3 acknowledged"):
        bench_replication.run_replicated(tmp_path, _batches(100, 10, 2, 1), 3, 2)
    [cluster] = clusters
    assert [rm.running for rm in cluster["managers"].values()] == [False, False, False]


@pytest.mark.parametrize("fails, error", [("startup", OSError("broker 3: read-only file system")),
                                          ("startup", KeyboardInterrupt()),
                                          ("leader_and_isr", OSError("broker 3: no space left on device"))],
                         ids=["startup-raises", "startup-interrupted", "leader-and-isr-raises"])
def test_a_broker_that_fails_to_come_online_takes_the_started_ones_down_with_it(fails, error, tmp_path, monkeypatch):
    """The third broker's startup raising (its directory unusable, say), or being
    interrupted (Ctrl-C while the logs load), or its LeaderAndIsr raising once all three
    run, shuts the brokers already running down before the error goes up:
    ``run_replicated`` has no cluster to shut down then, so without it they would keep
    running, their timers armed and, once a LeaderAndIsr has opened them, their logs open,
    under a removed directory."""
    made = []

    class FailingThird(bench_replication.ReplicaManager):
        def startup(self):
            made.append(self)
            if self.broker_id == 3 and fails == "startup":
                raise error
            super().startup()

        def handle_leader_and_isr(self, request):
            if self.broker_id == 3 and fails == "leader_and_isr":
                raise error
            return super().handle_leader_and_isr(request)

    monkeypatch.setattr(bench_replication, "ReplicaManager", FailingThird)
    with pytest.raises(type(error)) as raised:
        prepare_replicated(tmp_path)
    assert raised.value is error
    assert [rm.broker_id for rm in made] == [1, 2, 3]
    started = made[:2] if fails == "startup" else made
    assert [rm.running for rm in started] == [False] * len(started)


def test_the_followers_are_fetching_before_the_produce_clock_starts(tmp_path):
    """``prepare_replicated`` brings the partition online on virtual time before it
    returns: each follower has already found the leader and sent its first fetches, so the
    produce's clock (:func:`produce_replicated`) times the produce and not the followers'
    start-up."""
    cluster = prepare_replicated(tmp_path)
    try:
        managers = cluster["managers"]
        assert list(managers[1].fetchers) == []
        assert [(list(managers[b].fetchers), managers[b].fetchers[1].fetches_sent >= 1) for b in (2, 3)] == [
            ([1], True), ([1], True)]
    finally:
        bench_replication._shutdown(cluster)
