"""The pure-Python parts of the scripts in ``benchmarks/``: ``history_hashes.py``'s
--record/--check and the runs it covers, ``bench_sim.py``'s command line and reporting.
Nothing is timed and no simulation runs: the runs and clocks are stubbed."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def history_hashes():
    return _script("history_hashes")


@pytest.fixture(scope="module")
def bench_sim():
    return _script("bench_sim")


# -- history_hashes.py ----------------------------------------------------------------------

def test_a_check_passes_the_same_histories_and_names_each_one_that_differs(history_hashes, tmp_path, monkeypatch,
                                                                          capsys):
    got = ["a/high-watermark 1 h1", "a/leader-epoch 1 h2", "swarm/random-chaos 1 h3"]
    monkeypatch.setattr(history_hashes, "hashes", lambda seeds, swarm_seeds: list(got))
    recording = tmp_path / "hashes.txt"
    assert history_hashes.main(["--record", str(recording)]) == 0
    assert recording.read_text() == "\n".join(got) + "\n"
    assert history_hashes.main(["--check", str(recording)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "3 of 3 histories identical"
    got[1] = "a/leader-epoch 1 changed"
    assert history_hashes.main(["--check", str(recording)]) == 1
    assert capsys.readouterr().out.splitlines() == ["DIFFERENT: a/leader-epoch 1 h2", "2 of 3 histories identical"]


@pytest.mark.parametrize("recorded", [1, 2, 4], ids=["shorter-by-2", "shorter-by-1", "longer"])
def test_a_recording_of_another_number_of_runs_fails_the_check(recorded, history_hashes, tmp_path, monkeypatch,
                                                               capsys):
    """A recording cut short, or made before a scenario was added or removed, is not a
    pass on the runs both happen to hold."""
    got = [f"s/leader-epoch {seed} h{seed}" for seed in range(1, 4)]
    monkeypatch.setattr(history_hashes, "hashes", lambda seeds, swarm_seeds: got)
    recording = tmp_path / "hashes.txt"
    recording.write_text("".join(f"s/leader-epoch {seed} h{seed}\n" for seed in range(1, recorded + 1)))
    assert history_hashes.main(["--check", str(recording)]) == 1
    assert capsys.readouterr().out == f"the recording has {recorded} runs, this checkout 3\n"


def test_the_recording_covers_every_scenario_under_both_strategies_and_the_swarms(history_hashes):
    """--seeds seeds of every shipped scenario under each truncation strategy and of the
    gc-pause swarm; --swarm-seeds seeds of the random-chaos swarm."""
    from kreplica.sim import scenarios

    runs = history_hashes.runs(2, 3)
    labels: dict[str, list[int]] = {}
    for label, seed, sc in runs:
        labels.setdefault(label, []).append(seed)
        if not label.startswith("swarm/"):
            assert sc.config["replica.truncation.strategy"] == label.rsplit("/", 1)[1]
    expected = {f"{name}/{strategy}": [1, 2] for name in scenarios.names() for strategy in history_hashes.STRATEGIES}
    expected.update({"swarm/random-chaos": [1, 2, 3], "swarm/gc-pause-chaos": [1, 2]})
    assert labels == expected
    # in the order a recording holds them, since a check compares it line by line with a
    # recording made by another checkout: scenario by scenario, high-watermark before
    # leader-epoch, seeds ascending, then the two swarms
    order = [(f"{name}/{strategy}", seed) for name in scenarios.names()
             for strategy in ("high-watermark", "leader-epoch") for seed in (1, 2)]
    order += [("swarm/random-chaos", seed) for seed in (1, 2, 3)] + [("swarm/gc-pause-chaos", seed) for seed in (1, 2)]
    assert [(label, seed) for label, seed, _sc in runs] == order


# -- bench_sim.py ---------------------------------------------------------------------------

def test_side_by_side_keeps_each_checkouts_best_round_and_divides_the_other_by_this(bench_sim, tmp_path,
                                                                                  monkeypatch, capsys):
    """Rounds take turns, the other checkout first; each keeps its least CPU."""
    other = tmp_path / "other"
    other.mkdir()
    here = str(BENCHMARKS.parent)
    cpu = {str(other): iter([3.0, 2.0, 2.5]), here: iter([1.5, 1.0, 1.25])}
    order = []

    def run(argv, env, capture_output, text, check, cwd):
        assert env["PYTHONPATH"] == cwd == argv[-1]
        order.append(cwd)
        return SimpleNamespace(stdout=f"warming up\n{next(cpu[cwd])}\n")

    monkeypatch.setattr(subprocess, "run", run)
    bench_sim.side_by_side(str(other), 3)
    assert order == [str(other), here] * 3
    assert capsys.readouterr().out.splitlines() == [
        "three 60-virtual-s chaos runs, best of 3 rounds, CPU s:", f"  {other}: 2.000", f"  {here}: 1.000  (2.00x)"]


@pytest.mark.parametrize("argv, call", [(["--side-by-side", "../x"], ("../x", 3)),
                                        (["--side-by-side", "../x", "5"], ("../x", 5))])
def test_side_by_side_takes_a_checkout_and_optional_rounds(argv, call, bench_sim, monkeypatch):
    calls = []
    monkeypatch.setattr(bench_sim, "side_by_side", lambda *args: calls.append(args))
    monkeypatch.setattr(sys, "argv", ["bench_sim.py", *argv])
    bench_sim.main()
    assert calls == [call]


@pytest.mark.parametrize("argv", [["--side-by-side"], ["--side-by-side", "../x", "many"],
                                  ["--side-by-side", "../x", "0"], ["--side-by-side", "../x", "3", "4"],
                                  ["--by-kind", "--side-by-side", "../x"], ["--rounds"],
                                  ["--side-by-side", "../x", "\u00b2"], ["--side-by-side", "../x", "\u0663"]])
def test_a_bad_command_line_is_a_usage_error_not_a_traceback(argv, bench_sim, monkeypatch, capsys):
    """Rounds are a positive whole number in ASCII digits, as history_hashes.py's seeds: a
    superscript "\u00b2" is a digit to ``str.isdigit`` that ``int`` cannot read (a traceback
    before the fix), an Arabic-Indic "\u0663" one it reads as 3."""
    monkeypatch.setattr(bench_sim, "side_by_side", lambda *args: pytest.fail("ran"))
    monkeypatch.setattr(bench_sim, "by_kind", lambda: pytest.fail("ran"))
    with pytest.raises(SystemExit) as e:
        bench_sim.main(argv)
    assert e.value.code == 2 and "usage:" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--seeds", "--swarm-seeds"])
@pytest.mark.parametrize("value", ["0", "-1", "2.5", "x", "\u0663"])  # the last an Arabic-Indic 3
def test_history_hashes_takes_only_a_positive_number_of_seeds(option, value, history_hashes, monkeypatch, capsys,
                                                              tmp_path):
    monkeypatch.setattr(history_hashes, "hashes", lambda *args: pytest.fail("ran"))
    with pytest.raises(SystemExit) as e:
        history_hashes.main(["--record", str(tmp_path / "h"), option, value])
    assert e.value.code == 2 and "expected a positive whole number" in capsys.readouterr().err


def test_the_table_projects_1000_seeds_from_the_cpu_time_a_seed(bench_sim, monkeypatch, capsys):
    """50 seeds in 20 s of wall and 10 s of CPU: 0.200 CPU s a seed, 200 CPU s for 1,000."""
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(bench_sim, "core_events", lambda: (400_000, 2.0, 1.0))
    monkeypatch.setattr(bench_sim, "chaos_run", lambda seed: (1.5, 1.0, 50_000, 600, 61_000))
    monkeypatch.setattr(bench_sim, "small_seeds", lambda n: (20.0, 10.0, 1))
    monkeypatch.setattr(sys, "argv", ["bench_sim.py"])
    bench_sim.main()
    out = " ".join(capsys.readouterr().out.split())
    assert "200,000 per wall s, 400,000 per CPU s" in out
    assert "1.50 s wall, 1.00 s CPU (50,000 events/CPU s, 600 acked, 61 virtual s incl. liveness)" in out
    assert "20.0 s wall, 10.0 s CPU (0.200 CPU s/seed, 1 failing)" in out and "-> 200 CPU s" in out


def test_an_events_kind_names_the_message_the_notice_or_the_timer_behind_the_trampoline(bench_sim):
    def named(qualname):
        fn = lambda *a: None  # noqa: E731
        fn.__qualname__ = qualname
        return fn

    class Fetch:
        pass

    assert bench_sim._event_kind(named("SimNetwork._arrive"), (1, 2, Fetch())) == "message Fetch"
    assert bench_sim._event_kind(named("MemorySession._arrive"), (named("Watch.fire"),)) == "store notice Watch.fire"
    assert bench_sim._event_kind(named("PausableScheduler._fire"), (object(), named("Fetcher.poll"), ())) == (
        "broker timer Fetcher.poll")
    assert bench_sim._event_kind(named("PausableScheduler._fire_released"), ()) == (
        "broker timer held by a pause, run at its resume")
    assert bench_sim._event_kind(named("Replica.expire"), ()) == "timer Replica.expire"


# The hundred-and-first review (docs/engine-audit.md, BH5-..): the fifth pass over the harness.

def test_event_costs_times_every_event_soon_or_later_and_puts_the_scheduler_back(bench_sim, monkeypatch):
    """``event_costs`` swaps ``kreplica.cluster.SimScheduler`` for a timing one around one
    chaos run: an event scheduled with ``call_soon`` is counted as one with ``call_later``
    is, and the real scheduler is back after the run, even a run that fails."""
    import kreplica.cluster as cluster_module

    real = cluster_module.SimScheduler
    now = [0.0]
    monkeypatch.setattr(bench_sim, "time", SimpleNamespace(perf_counter=lambda: now[0]))

    def ping(*args):  # each event's own time is what its kind is charged (BH6-31: none of it)
        now[0] += 0.25

    def pong():
        now[0] += 1.0

    def chaos_run(seed):
        sched = cluster_module.SimScheduler(0)
        assert type(sched) is not real and seed == 2
        sched.call_soon(ping, 1)
        sched.call_later(5, pong)
        sched.call_later(7, ping, 2)
        sched.advance(10)
        return 0.0, 0.25, 3, 0, 10

    monkeypatch.setattr(bench_sim, "chaos_run", chaos_run)
    costs, cpu = bench_sim.event_costs()
    assert costs == {f"timer {ping.__qualname__}": (2, 0.5), f"timer {pong.__qualname__}": (1, 1.0)}
    assert cpu == 0.25 and cluster_module.SimScheduler is real

    def failing(seed):
        raise RuntimeError("the run failed")

    monkeypatch.setattr(bench_sim, "chaos_run", failing)
    with pytest.raises(RuntimeError, match="the run failed"):
        bench_sim.event_costs()
    assert cluster_module.SimScheduler is real


def test_by_kind_lists_the_costliest_kinds_first_with_their_share_of_the_time_inside_events(bench_sim, monkeypatch,
                                                                                         capsys):
    """10 ms inside events out of a run of 20 CPU ms: each kind's share is of the 10 ms (the
    checker's passes between events are in no kind), costliest first."""
    monkeypatch.setenv("COLUMNS", "200")
    calls = []
    monkeypatch.setattr(bench_sim, "chaos_run", lambda seed: calls.append(("chaos_run", seed)) or (0.0, 0.0, 0, 0, 0))
    costs = {"message FetchRequest": (4, 0.004), "timer Fetcher.poll": (1, 0.006),
             "store notice Watch.fire": (10, 0.0)}
    monkeypatch.setattr(bench_sim, "event_costs", lambda: calls.append(("event_costs",)) or (costs, 0.02))
    bench_sim.by_kind()
    # one untimed run first, so the imports and first touches are in no kind (BH6-32)
    assert calls == [("chaos_run", 1), ("event_costs",)]
    lines = capsys.readouterr().out.splitlines()
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if line.count("│") == 5]
    assert rows == [["timer Fetcher.poll", "1", "6,000.0", "60.0%"], ["message FetchRequest", "4", "1,000.0", "40.0%"],
                    ["store notice Watch.fire", "10", "0.0", "0.0%"]]
    assert "15 events, 0.01 s inside them, 0.02 CPU s in all" in " ".join(" ".join(lines).split())


def test_small_seeds_runs_seeds_1_to_n_without_history_and_counts_the_failing_ones(bench_sim, monkeypatch):
    ran = []

    class World:
        def __init__(self, sc, seed, keep_history=True):
            ran.append((sc, seed, keep_history))

        def run(self):
            return SimpleNamespace(ok=ran[-1][1] not in (2, 5))

    monkeypatch.setattr(bench_sim, "World", World)
    monkeypatch.setattr(bench_sim.scenarios, "load", lambda name: f"scenario {name}")
    _wall, _cpu, bad = bench_sim.small_seeds(6)
    assert bad == 2 and ran == [(f"scenario {bench_sim.SMALL}", seed, False) for seed in range(1, 7)]


# The hundred-and-twentieth review (docs/engine-audit.md, BH6-..): the sixth pass over the harness.

def test_the_chaos_run_is_three_brokers_ten_partitions_sixty_virtual_seconds_on_leader_epoch(bench_sim, monkeypatch):
    """The table's row says "60 virtual s chaos, 3 brokers x 10 partitions": random-chaos
    (4 partitions of its own) widened to 10, leader-epoch truncation, a produce every 100 ms."""
    ran = []

    class World:
        def __init__(self, sc, seed):
            ran.append((sc, seed))

        def run(self):
            return SimpleNamespace(scheduler_events=5, acked_writes=2, virtual_ms=61_000)

    monkeypatch.setattr(bench_sim, "World", World)
    assert bench_sim.chaos_run(7)[2:] == (5, 2, 61_000)
    [(sc, seed)] = ran
    assert (seed, sc.brokers, sc.until_ms, [t.partitions for t in sc.topics]) == (7, 3, 60_000, [10])
    assert (sc.config["replica.truncation.strategy"], sc.workload.produce_interval_ms) == ("leader-epoch", 100)


def test_side_by_sides_child_keeps_each_seeds_better_run_of_two_after_a_warm_up(bench_sim, tmp_path):
    """The child process ``side_by_side`` starts in each checkout: one warm-up run, then
    seeds 1 to 3 twice each, summing each seed's least CPU s. It imports the checkout's
    own ``benchmarks/bench_sim.py``, here a stand-in with scripted CPU seconds."""
    checkout = tmp_path / "checkout"
    (checkout / "benchmarks").mkdir(parents=True)
    (checkout / "benchmarks" / "bench_sim.py").write_text(
        "seeds = iter([1, 1, 1, 2, 2, 3, 3])\n"
        "cpu = iter([9.0, 1.0, 5.0, 4.0, 2.0, 3.0, 8.0])\n"
        "def chaos_run(seed):\n"
        "    assert seed == next(seeds), seed\n"
        "    return 0.0, next(cpu), 0, 0, 0\n")
    out = subprocess.run([sys.executable, "-c", bench_sim._SIDE_BY_SIDE_CHILD, str(checkout)], cwd=checkout,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["6.0"]  # 1 + 2 + 3


def test_the_recording_names_each_run_by_label_and_seed_for_the_seeds_asked(history_hashes, tmp_path, monkeypatch,
                                                                           capsys):
    """``--seeds`` and ``--swarm-seeds`` reach the runs (3 and 12 by default), and each line is
    the run's label, its seed and its history's hash: a check names the run that differs.
    Each line is printed as its run ends, before the next starts (the runs take minutes)."""
    asked, printed = [], []

    def runs(seeds, swarm_seeds):
        asked.append((seeds, swarm_seeds))
        return [("a/leader-epoch", 1, "sc1"), ("a/leader-epoch", 2, "sc2"), ("swarm/random-chaos", 1, "sc3")]

    class World:
        def __init__(self, sc, seed, keep_history=True):
            self.sc = sc

        def run(self):
            printed.append(capsys.readouterr().out)
            return SimpleNamespace(history_hash=f"hash-of-{self.sc}")

    monkeypatch.setattr(history_hashes, "runs", runs)
    monkeypatch.setattr(history_hashes, "World", World)
    recording = tmp_path / "hashes.txt"
    assert history_hashes.main(["--record", str(recording), "--seeds", "2", "--swarm-seeds", "5"]) == 0
    assert printed + [capsys.readouterr().out] == [
        "", "a/leader-epoch 1 hash-of-sc1\n", "a/leader-epoch 2 hash-of-sc2\n",
        f"swarm/random-chaos 1 hash-of-sc3\n3 runs recorded in {recording}\n"]
    assert history_hashes.main(["--record", str(recording)]) == 0
    assert asked == [(2, 5), (3, 12)]
    assert recording.read_text() == (
        "a/leader-epoch 1 hash-of-sc1\na/leader-epoch 2 hash-of-sc2\nswarm/random-chaos 1 hash-of-sc3\n")


# The hundred-and-thirty-ninth review (docs/engine-audit.md, BH7-..): the seventh pass over the harness.

def test_each_recorded_run_is_its_scenario_whole_or_the_swarms_own_mix_at_its_seed(history_hashes):
    """A strategy's run is the shipped scenario with only the truncation strategy set (its
    other settings kept: segment sizes, timeouts, min.insync.replicas); a swarm run is the
    swarm's mix drawn at that seed over its own scenario (random-chaos's or gc-pause-chaos's)."""
    from dataclasses import replace

    from kreplica.sim import scenarios
    from kreplica.sim.swarm import swarm_scenario

    for label, seed, sc in history_hashes.runs(1, 2):
        name, variant = label.split("/", 1)
        if name == "swarm":
            assert sc == swarm_scenario(seed, scenarios.load(variant)), (label, seed)
        else:
            base = scenarios.load(name)
            assert sc.config == {**base.config, "replica.truncation.strategy": variant}, label
            assert replace(sc, config=base.config) == base, label


def test_core_events_runs_its_budget_of_messages_and_gives_cpu_beside_wall(bench_sim, monkeypatch):
    """``messages`` counts messages, a request and its response two: 64 exchanges start in
    flight (128 messages), then each response sends one more while the budget lasts. The
    third figure is CPU seconds (``process_time``), not the wall clock's."""
    wall, cpu = iter([10.0, 12.5]), iter([3.0, 3.75])
    monkeypatch.setattr(bench_sim, "time", SimpleNamespace(perf_counter=lambda: next(wall),
                                                          process_time=lambda: next(cpu)))
    assert bench_sim.core_events(1000) == (1000 + 128, 2.5, 0.75)


def test_core_events_passes_requests_round_all_three_links(bench_sim, monkeypatch):
    """The core ping-pong is among three nodes, each passing on to the next (1 -> 2 -> 3 -> 1),
    not the first 64 exchanges spread and every later one between nodes 1 and 2."""
    from kreplica.sim.network import SimNetwork
    links: Counter = Counter()
    send = SimNetwork.send

    def counting_send(self, src, dst, *rest, **kw):
        links[src, dst] += 1
        return send(self, src, dst, *rest, **kw)

    monkeypatch.setattr(SimNetwork, "send", counting_send)
    bench_sim.core_events(3000)
    assert set(links) == {(1, 2), (2, 3), (3, 1)}
    assert sum(links.values()) == 64 + 1500
    assert min(links.values()) >= 500, links


def test_each_chaos_row_of_the_table_is_its_own_seeds_run(bench_sim, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(bench_sim, "core_events", lambda: (400_000, 2.0, 1.0))
    monkeypatch.setattr(bench_sim, "chaos_run", lambda seed: (seed / 2, seed / 4, 1000 * seed, 100 * seed, 61_000))
    monkeypatch.setattr(bench_sim, "small_seeds", lambda n: (20.0, 10.0, 1))
    bench_sim.main([])
    out = " ".join(capsys.readouterr().out.split())
    for seed in (1, 2, 3):
        assert (f"seed {seed} │ {seed / 2:.2f} s wall, {seed / 4:.2f} s CPU (4,000 events/CPU s, {100 * seed} acked"
                in out), seed


def test_a_store_notice_is_named_by_the_callback_the_session_delivers(bench_sim):
    """``MemorySession._arrive`` is scheduled with (callback, its args, sequence number):
    the kind names the callback, whatever args it carries."""
    from kreplica.meta import MemoryStore
    from kreplica.runtime import SimScheduler

    kinds = []

    class Recording(SimScheduler):
        def call_soon(self, fn, *args):
            kinds.append(bench_sim._event_kind(fn, args))
            return super().call_soon(fn, *args)

    sched = Recording(0)
    store = MemoryStore(sched)
    watcher, writer = store.session("watcher"), store.session("writer")

    def on_change(event):
        pass

    watcher.exists("/a", watch=on_change)
    writer.create("/a", b"x")
    sched.advance(10)
    assert f"store notice {on_change.__qualname__}" in kinds
    store.close()


# The hundred-and-seventy-seventh review (docs/engine-audit.md, BH9-..): the ninth pass over the harness.

def test_history_hashes_imports_the_kreplica_of_the_checkout_it_is_in(tmp_path):
    """Run from a second worktree, the script judges that worktree's code, not the kreplica
    found first on the path (the venv's editable install names another checkout): here a
    stand-in package first on PYTHONPATH, which refuses to be imported."""
    decoy = tmp_path / "kreplica"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the kreplica of another checkout')\n")
    out = subprocess.run([sys.executable, str(BENCHMARKS / "history_hashes.py"), "--help"], cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: history_hashes.py")


def test_side_by_side_runs_a_relative_checkout_by_its_absolute_path(bench_sim, tmp_path, monkeypatch, capsys):
    """``--side-by-side ../other``: the child runs with the other checkout as its working
    directory, so the checkout it is given, and its PYTHONPATH, must not be relative (read
    from there, "other" would name other/other)."""
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    seen = []

    def run(argv, env, capture_output, text, check, cwd):
        seen.append((argv[-1], env["PYTHONPATH"], cwd))
        return SimpleNamespace(stdout="1.5\n")

    monkeypatch.setattr(subprocess, "run", run)
    bench_sim.side_by_side("other", 1)
    other = str((tmp_path / "other").resolve())
    assert seen[0] == (other, other, other)
    assert f"  {other}: 1.500" in capsys.readouterr().out.splitlines()


def test_side_by_side_stops_at_a_child_that_fails_and_says_why(bench_sim, tmp_path):
    """A checkout the child cannot run in (here one with no benchmarks/bench_sim.py) ends the
    comparison with the child's failure and its stderr, not an IndexError on its empty output."""
    with pytest.raises(Exception) as e:
        bench_sim.side_by_side(str(tmp_path), 1)
    assert isinstance(e.value, subprocess.CalledProcessError), repr(e.value)
    assert "No module named 'bench_sim'" in e.value.stderr


def test_history_hashes_needs_a_recording_to_write_or_to_check(history_hashes, monkeypatch, capsys):
    """Neither --record nor --check is a usage error naming both, before any run, not a
    TypeError traceback from the recording check on a path of None."""
    monkeypatch.setattr(history_hashes, "hashes", lambda *args: pytest.fail("ran"))
    with pytest.raises(SystemExit) as e:
        history_hashes.main(["--seeds", "2"])
    assert e.value.code == 2 and "one of the arguments --record --check is required" in capsys.readouterr().err


@pytest.mark.parametrize("option, name", [("--check", "missing.txt"), ("--check", "."),
                                          ("--record", "no-such-dir/hashes.txt"), ("--record", ".")],
                         ids=["check-missing", "check-a-dir", "record-no-dir", "record-a-dir"])
def test_history_hashes_refuses_a_recording_it_cannot_use_before_the_runs(option, name, history_hashes, tmp_path,
                                                                          monkeypatch, capsys):
    """The runs take minutes: a --check recording that cannot be read, or a --record file
    that cannot be written (in no directory, or a directory itself), is a usage error up
    front, not a traceback once every run is done."""
    monkeypatch.setattr(history_hashes, "hashes", lambda *args: pytest.fail("ran"))
    with pytest.raises(SystemExit) as e:
        history_hashes.main([option, str(tmp_path / name)])
    assert e.value.code == 2 and f"error: argument {option}: {tmp_path / name}: " in capsys.readouterr().err


# -- the pytest-benchmark files ------------------------------------------------------------

class _Benchmark:
    """pytest-benchmark 5's ``benchmark`` fixture without a clock: ``pedantic`` makes each
    round's arguments with ``setup``, runs the target, then ``teardown``, for every warm-up
    round and every round; ``disabled`` (``--benchmark-disable``) runs ``setup`` and the
    target once and no teardown, as pytest-benchmark's ``_raw_pedantic`` does."""

    def __init__(self, disabled: bool) -> None:
        self.disabled = disabled
        self.extra_info: dict = {}

    def pedantic(self, target, args=(), kwargs=None, setup=None, teardown=None, rounds=1, warmup_rounds=0,
                 iterations=1):
        def made():
            return setup() if setup is not None else (args, kwargs or {})

        if self.disabled:
            a, k = made()
            return target(*a, **k)
        for _ in range(warmup_rounds + rounds):
            a, k = made()
            result = target(*a, **k)
            if teardown is not None:
                teardown(*a, **k)
        return result


@pytest.mark.parametrize("disabled", [False, True], ids=["timed", "benchmark-disable"])
def test_the_replication_benchmark_checks_and_shuts_down_every_round_it_produced(disabled, tmp_path, monkeypatch):
    """``benchmarks/bench_replication.py`` times the produce alone; each round's check (every
    batch acknowledged, the replicas converged) and the brokers' shutdown are the round's
    teardown. Under --benchmark-disable pytest-benchmark runs no teardown, so the benchmark
    finishes its one round itself: without that the three brokers stay up with their logs
    open and the run ends on an IndexError, nothing checked (BH12-17)."""
    from kreplica.tools import bench_replication as tool

    module = _script("bench_replication")
    monkeypatch.setattr(module, "BATCHES", 3)
    finished = []
    finish = tool.finish_replicated
    monkeypatch.setattr(tool, "finish_replicated", lambda *a: finished.append(finish(*a)) or finished[-1])
    benchmark = _Benchmark(disabled)
    module.test_replicated_acks_all_rf3(benchmark, tool._batches(100, 1000, 3, 100), tmp_path)
    assert [r["records"] for r in finished] == [3000] * (1 if disabled else 1 + 3)  # the warm-up, 3 rounds
    assert benchmark.extra_info == {"records": 3000}


@pytest.mark.parametrize("disabled", [False, True], ids=["timed", "benchmark-disable"])
def test_the_failover_benchmark_checks_and_closes_every_cluster_it_failed_over(disabled, monkeypatch):
    """``benchmarks/bench_failover.py`` times ``fail`` alone: every cluster ``prepare`` built
    is checked (every leader re-elected) and closed by ``teardown`` after its round, the
    last one by the benchmark itself under --benchmark-disable (BH12-18)."""
    from kreplica.tools import bench_failover as tool

    module = _script("bench_failover")
    prepared, torn = [], []
    prepare, teardown = tool.prepare, tool.teardown
    monkeypatch.setattr(tool, "prepare", lambda n: prepared.append(prepare(n)) or prepared[-1])
    monkeypatch.setattr(tool, "teardown", lambda state: torn.append(state) or teardown(state))
    benchmark = _Benchmark(disabled)
    module.test_memory_failover(benchmark, 9)
    assert len(prepared) == (1 if disabled else 3)
    assert [id(s) for s in torn] == [id(s) for s in prepared]
    assert set(benchmark.extra_info) == {"controller_seconds", "round_trips"}
