"""The simulate command: bad input answered in one line with exit status 2, plain
progress lines when the output is not a terminal, and an interrupted sweep that keeps
the seeds that finished."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest

from kreplica import sim_cli


@pytest.mark.parametrize("argv, message", [
    (["--scenario", "no-such-scenario"], "no scenario 'no-such-scenario'; known: "),
    (["--scenario", "kip101-hw-truncation", "--config", "no.such.key=1"], "unknown config key 'no.such.key'"),
    (["--scenario", "kip101-hw-truncation", "--config", "replica.truncation.strategy=bogus"],
     "expected one of high-watermark, leader-epoch"),
    (["--replay", "/nonexistent/history.jsonl"], "cannot replay /nonexistent/history.jsonl: "),
    (["--seed", "1", "--history"], "--history needs --out DIR"),
    (["--seed", "1", "--timeline"], "--timeline needs --out DIR"),
    (["--replay", "h.jsonl", "--config", "acks=1"], "--replay re-runs the recorded scenario, seed and options: "
                                                    "drop --config"),
    (["--replay", "h.jsonl", "--scenario", "x", "--seed", "0", "--until", "5"], "drop --scenario, --seed, --until"),
    (["--replay", "h.jsonl", "--swarm", "--seeds", "1..3"], "drop --seeds, --swarm"),
    (["--replay", "h.jsonl", "--until", "0"], "drop --until"),  # 0 is a length given, not "not given"
    # Not a directory and not makeable as one: refused before any run, not a traceback.
    (["--seed", "1", "--out", "/dev/null/runs"], "--out /dev/null/runs: "),
    (["--replay", "h.jsonl", "--out", "/dev/null/runs"], "--out /dev/null/runs: "),  # a replay's too
])
def test_cli_bad_input_is_one_line_and_exit_status_2(argv, message, capsys):
    assert sim_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kreplica simulate: error: ") and message in err and "Traceback" not in err


def test_cli_replay_of_a_file_that_is_not_a_history(tmp_path, capsys):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n')
    assert sim_cli.main(["--replay", str(path)]) == 2
    assert "line 1 is not a history event" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1..x"], "expected N, A..B or a,b,c"),
    (["--seeds", "5..1"], "no seed in it"),
    (["--jobs", "0"], "must be at least 1"),
    (["--until", "-5"], "must be at least 0"),
    (["--traces", "-1"], "must be at least 0"),  # not a count of traces: refused, not run as 0
    (["--config", "acks"], "expected KEY=VALUE"),
    (["--seed", "1", "--seeds", "2"], "argument --seeds: not allowed with argument --seed"),
    (["--seeds", "1..100000000000000000000000000"], "too many seeds"),
    (["--seeds", "4,7,4"], "seed 4 given twice"),  # it would run, be written and counted twice
    (["--timeline-partitions", "0"], "must be at least 1"),  # a timeline of no partition is no timeline
])
def test_cli_bad_arguments_are_refused_by_the_parser(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        sim_cli.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_cli_progress_is_plain_lines_when_output_is_not_a_terminal(tmp_path, capsys):
    argv = ["--scenario", "seed003-controlled-shutdown", "--seeds", "1..3", "--until", "1500", "--out", str(tmp_path)]
    assert sim_cli.main(argv) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("progress: ")]
    assert lines and lines[-1].startswith("progress: 3/3 seeds (100%), 0 with a violation, ")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is False and len(summary["runs"]) == 3


def test_plain_progress_prints_each_5_percent_at_most_once_a_second():
    from types import SimpleNamespace
    from collections import Counter

    printed = []
    now = [0.0]
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    progress = sim_cli.PlainProgress(100, console, clock=lambda: now[0])
    summary = SimpleNamespace(runs=0, violations=Counter())
    for i in range(1, 101):
        now[0] += 0.3
        summary.runs = i
        if i == 50:
            summary.violations["lost-acked-write"] = 1
        progress.advance(summary)
    assert 10 <= len(printed) <= 20  # every 5%, thinned to one a second
    assert printed[-1].startswith("progress: 100/100 seeds (100%), 1 with a violation, 30s elapsed")
    assert "left" in printed[0] and "left" not in printed[-1]


def test_plain_progress_lines_are_never_wrapped_at_the_console_width():
    """Output that is not a terminal is 80 columns wide; a long progress line must stay
    one line (it used to break before "left"), and so must the options and hash lines."""
    import io
    from collections import Counter
    from types import SimpleNamespace

    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=80)
    now = [0.0]
    progress = sim_cli.PlainProgress(100_000, console, clock=lambda: now[0])
    summary = SimpleNamespace(runs=0, violations=Counter())
    for done in (5_000, 10_000):
        now[0] += 600.0
        summary.runs = done
        progress.advance(summary)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all(x.startswith("progress: ") and x.endswith(" left") for x in lines)
    assert max(map(len, lines)) > 80


def test_cli_options_and_hash_lines_stay_whole(capsys):
    argv = ["--scenario", "seed003-controlled-shutdown", "--seed", "1", "--until", "1500",
            "--config", "replica.truncation.strategy=leader-epoch"]
    assert sim_cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    options = next(x for x in out if x.startswith("options: "))
    printed = json.loads(options[len("options: "):])
    assert printed["name"] == "seed003-controlled-shutdown"
    # The scenario as it ran, --until and --config laid over it (what its run header records).
    assert printed["until_ms"] == 1500 and printed["config"]["replica.truncation.strategy"] == "leader-epoch"
    assert printed == sim_cli._scenario(_parsed(argv), 1).to_dict()
    assert any(x.startswith("seed 1: history hash ") and x.endswith(" events)") for x in out)


def _ctrl_c_at(monkeypatch, at_seed):
    """Runs go as usual until seed ``at_seed``, where Ctrl-C is pressed."""
    real = sim_cli.run_seed

    def run_seed(args, seed, scenario=None):
        if seed == at_seed:
            raise KeyboardInterrupt
        return real(args, seed, scenario)

    monkeypatch.setattr(sim_cli, "run_seed", run_seed)


def test_cli_interrupted_sweep_keeps_the_seeds_that_finished(tmp_path, capsys, monkeypatch):
    _ctrl_c_at(monkeypatch, 3)
    argv = ["--scenario", "seed003-controlled-shutdown", "--seeds", "1..5", "--until", "1500", "--out", str(tmp_path)]
    assert sim_cli.main(argv) == 130
    assert "2 of 5 seed(s), interrupted" in " ".join(capsys.readouterr().out.split())  # the title may wrap
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and [r["seed"] for r in summary["runs"]] == [1, 2]


def test_a_huge_seed_range_is_not_materialised(tmp_path, capsys, monkeypatch):
    """Seeds are made as they run: 10^11 of them start at once (a list would not fit in memory)."""
    assert len(sim_cli.parse_seeds("1..100000000000")) == 100_000_000_000
    _ctrl_c_at(monkeypatch, 2)
    argv = ["--scenario", "seed003-controlled-shutdown", "--seeds", "1..100000000000", "--until", "1500"]
    assert sim_cli.main(argv) == 130
    assert "1 of 100000000000 seed(s), interrupted" in " ".join(capsys.readouterr().out.split())


def test_the_help_says_where_the_hashes_are(capsys):
    with pytest.raises(SystemExit):
        sim_cli.main(["--help"])
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert "A single seed (``--seed N``) prints its history hash before the summary table" in text
    assert "each run's hash is in ``summary.json`` under ``--out DIR``" in text
    assert "Every run prints its seed and options first and its history hash last" not in text
    # The examples stay one command a line, as written, not run together into a paragraph.
    lines = [line.strip() for line in out.splitlines()]
    assert "kreplica simulate --scenario kip101-hw-truncation --seed 7" in lines
    assert "kreplica simulate --replay runs/kip101-hw-truncation-7.jsonl" in lines


@pytest.mark.parametrize("jobs,sig", [("2", "SIGINT"), ("1", "SIGTERM")])
def test_ctrl_c_with_jobs_removes_the_data_dirs_of_runs_in_flight(tmp_path, jobs, sig):
    """A real Ctrl-C (SIGINT to the process group) while two workers are mid-run, or a
    SIGTERM (``timeout``) to a single-process run: the command exits 130 and no run's
    data dir is left behind.  The runs' root is moved to
    tmp_path so that other simulations on the machine do not count."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = tmp_path / "runs"
    root.mkdir()
    # faulthandler: should the command hang, its threads' stacks reach the failure message.
    # Ctrl-C as at a terminal: a SIGINT ignored by whatever started pytest is inherited
    # (ignored stays ignored across exec), and the command then rightly ignores it too.
    code = (f"import sys, signal, faulthandler, kreplica.sim.world as w; w._default_root = lambda: {str(root)!r}; "
            "signal.signal(signal.SIGINT, signal.default_int_handler); "
            "faulthandler.dump_traceback_later(50); from kreplica.cli import main; sys.exit(main())")
    proc = subprocess.Popen([sys.executable, "-c", code, "simulate", "--scenario", "random-chaos",
                             "--seeds", "1..300", "--jobs", jobs],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(root.iterdir())) < int(jobs) and time.monotonic() < deadline:  # every worker mid-run
            time.sleep(0.02)
        assert len(list(root.iterdir())) >= int(jobs), "the workers never started a run"
        time.sleep(0.5)
        os.killpg(proc.pid, getattr(signal, sig))
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            raise AssertionError(f"no exit 60 s after {sig}:\n{err.decode(errors='replace')}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert list(root.iterdir()) == []


#: The start of a script in which creating a ``Finalized()`` delivers SIGTERM inside its
#: finalizer, where what the handler raises (SystemExit, KeyboardInterrupt) is dropped.
_SIGNAL_IN_A_FINALIZER = """
import os, signal, sys
from kreplica import sim_cli

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.{signal})  # handled here: what the handler raises is dropped
        for _ in range(1000):
            pass
"""


def test_a_worker_whose_sigterm_was_swallowed_mid_run_still_leaves(tmp_path):
    """The pool's terminate() sends SIGTERM once and then waits for each worker, holding
    the task queue's lock. A SystemExit raised where Python drops it (inside a
    finalizer) let the run finish and the worker go for the next task, blocked on that
    lock for good: Ctrl-C with --jobs hung (seen once in CI). The worker now leaves
    after the run, whatever became of the SystemExit."""
    import subprocess
    import sys

    code = _SIGNAL_IN_A_FINALIZER.format(signal="SIGTERM") + """
def run_seed(args, seed, scenario=None):
    Finalized()  # collected at once
    return "finished"  # the run went on to its end

sim_cli.run_seed = run_seed
sim_cli._worker_signals()
print(sim_cli._run_in_worker(None, 1), flush=True)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Exception ignored" in done.stderr  # Python did drop the SystemExit
    assert done.returncode == 128 + 15 and done.stdout == "", (done.returncode, done.stdout, done.stderr)


def _double(args, seed, scenario=None):
    return seed * 2


def test_a_pool_that_finishes_is_closed_not_terminated(monkeypatch):
    # terminate() sends SIGTERM to idle workers; one caught inside the pool's queue
    # locks could hang the join for good (seen at the end of a 1,000-seed --jobs 2 run).
    # A finished pool is closed and joined; workers leave on their own.
    import argparse
    import multiprocessing.pool

    from kreplica import sim_cli

    terminated = []
    terminate = multiprocessing.pool.Pool.terminate
    monkeypatch.setattr(multiprocessing.pool.Pool, "terminate",
                        lambda self: terminated.append(self) or terminate(self))
    monkeypatch.setattr(sim_cli, "run_seed", _double)
    args = argparse.Namespace(jobs=2, swarm=True)
    assert list(sim_cli._runs(args, None, range(20))) == [2 * s for s in range(20)]
    assert terminated == []


def test_a_violations_trace_prints_one_event_per_line_when_piped(capsys):
    """Not a terminal (a pipe, CI's log): each event of the trace stays one JSON line,
    for grep and jq, however long, and brackets in it are not taken for markup."""
    import json

    argv = ["--scenario", "kip101-hw-truncation", "--seed", "1", "--until", "12000",
            "--config", "replica.truncation.strategy=high-watermark", "--traces", "1"]
    assert sim_cli.main(argv) == 1
    events = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  {")]
    assert len(events) > 10 and max(map(len, events)) > 80
    assert all(json.loads(line)["kind"] for line in events)


def _parsed(argv):
    """The command's arguments as ``kreplica simulate`` parses them."""
    import argparse

    parser = argparse.ArgumentParser()
    sim_cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_seed_ranges_are_inclusive_and_lists_keep_every_seed_in_order():
    assert list(sim_cli.parse_seeds("1..1000")) == list(range(1, 1001))
    assert list(sim_cli.parse_seeds("3..3")) == [3]
    assert list(sim_cli.parse_seeds("7")) == [7]
    assert list(sim_cli.parse_seeds("9,1,5")) == [9, 1, 5]
    assert list(sim_cli.parse_seeds("2, 4,")) == [2, 4]


def test_without_until_a_run_takes_its_scenarios_own_length():
    from kreplica.sim import scenarios

    own = scenarios.load("kip101-hw-truncation").until_ms
    assert sim_cli._scenario(_parsed(["--scenario", "kip101-hw-truncation"]), 1).until_ms == own
    assert sim_cli._scenario(_parsed(["--scenario", "kip101-hw-truncation", "--until", "700"]), 1).until_ms == 700


def test_a_swarms_until_and_config_are_laid_over_each_seeds_draw():
    """The swarm caps a seed's run at 30 s and draws min.insync.replicas and the truncation
    strategy; --until and --config given with --swarm win over those draws, and leave the
    rest of each seed's draw as it was."""
    from kreplica.sim import scenarios
    from kreplica.sim.swarm import swarm_scenario

    args = _parsed(["--swarm", "--until", "45000", "--config", "replica.truncation.strategy=high-watermark",
                    "--config", "min.insync.replicas=1"])
    base = scenarios.load("random-chaos")
    for seed in range(1, 21):
        sc, drawn = sim_cli._scenario(args, seed), swarm_scenario(seed, base)
        assert sc.until_ms == 45000
        assert sc.config == {**drawn.config, "replica.truncation.strategy": "high-watermark",
                             "min.insync.replicas": 1}
        assert (sc.name, sc.brokers, sc.topics, sc.chaos, sc.workload) == \
            (drawn.name, drawn.brokers, drawn.topics, drawn.chaos, drawn.workload)


def test_each_seed_of_a_swarm_runs_its_own_draw(tmp_path, capsys):
    """Each swarm seed of a range runs the scenario drawn from its own seed, overrides laid
    over it (the run header records it, for --replay), not the first seed's draw."""
    from kreplica.sim.history import read_jsonl, run_header

    argv = ["--swarm", "--seeds", "4..5", "--until", "1000", "--config", "replica.truncation.strategy=leader-epoch",
            "--out", str(tmp_path), "--history"]
    assert sim_cli.main(argv) == 0
    runs = json.loads((tmp_path / "summary.json").read_text())["runs"]
    assert [r["seed"] for r in runs] == [4, 5]
    for seed in (4, 5):
        header = run_header(read_jsonl(tmp_path / f"swarm-{seed}-{seed}.jsonl")[:1])
        assert header["seed"] == seed
        assert header["scenario"] == sim_cli._scenario(_parsed(argv), seed).to_dict()


def test_a_run_without_a_seed_is_seed_0(capsys):
    assert sim_cli.main(["--scenario", "seed003-controlled-shutdown", "--until", "1500"]) == 0
    out = capsys.readouterr().out
    assert "seeds 0" in out and "seed 0: history hash " in out


def _planted_runs(monkeypatch, failing=(), interrupt_at=None, losses=0, unclean=0, during=None):
    """Runs made up, not simulated: seeds in ``failing`` have a violation of invariant 1,
    and every run ``losses`` counted losses and ``unclean`` unclean elections; ``during``,
    if given, is called with the seed as each run starts (a signal arriving mid-run)."""
    from kreplica.sim.checker import CountedLoss, Invariant, Violation
    from kreplica.sim.world import RunResult

    def run_seed(args, seed, scenario=None):
        if during is not None:
            during(seed)
        if seed == interrupt_at:
            raise KeyboardInterrupt
        v = (Violation(Invariant.ACKED_WRITE_LOST, 10, "t-0", 1, f"planted in seed {seed}")
             if seed in failing else None)
        lost = [CountedLoss("t-0", i, "unclean-election", 1, 1, 0) for i in range(losses)]
        return RunResult("planted", seed, f"hash{seed}", 1, 1000, 0.1, v, lost, unclean, 0, 0, 1.0, [],
                         v is None, 1)

    monkeypatch.setattr(sim_cli, "run_seed", run_seed)


@pytest.mark.parametrize("failing, status", [((), 0), ((1,), 1), ((2,), 1), ((3,), 1), ((1, 3), 1)])
def test_any_seed_with_a_violation_makes_the_exit_status_1(monkeypatch, capsys, failing, status):
    _planted_runs(monkeypatch, failing)
    assert sim_cli.main(["--seeds", "1..3"]) == status


@pytest.mark.parametrize("given, traces", [(["--traces", "0"], 0), (["--traces", "1"], 1), (["--traces", "2"], 2),
                                           ([], 3)])  # the default, as the help says
def test_traces_prints_that_many_violations(monkeypatch, capsys, given, traces):
    _planted_runs(monkeypatch, failing=(1, 2, 3, 4))
    assert sim_cli.main(["--seeds", "1..4", *given]) == 1
    printed = [x for x in capsys.readouterr().out.splitlines() if x.startswith("VIOLATION ")]
    assert [x.split(": ")[-1] for x in printed] == [f"planted in seed {s}" for s in (1, 2, 3)][:traces]


def test_summary_json_gives_each_runs_hash_verdict_and_lost_acks(monkeypatch, tmp_path, capsys):
    _planted_runs(monkeypatch, failing=(2,), losses=3, unclean=1)
    assert sim_cli.main(["--seeds", "1..2", "--out", str(tmp_path)]) == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["runs"] == [
        {"seed": 1, "hash": "hash1", "ok": True, "violation": None, "losses": 3},
        {"seed": 2, "hash": "hash2", "ok": False, "violation": "1-acked-write-lost", "losses": 3},
    ]
    assert summary["summary"]["losses"] == {"unclean-election": 6} and summary["summary"]["unclean_elections"] == 2


def test_an_interrupted_sweep_exits_130_even_after_a_violation(monkeypatch, tmp_path, capsys):
    _planted_runs(monkeypatch, failing=(1,), interrupt_at=2)
    assert sim_cli.main(["--seeds", "1..3", "--out", str(tmp_path)]) == 130
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["summary"]["failed_seeds"] == [1]


def test_plain_progress_reckons_the_time_left_from_the_seeds_left():
    from collections import Counter
    from types import SimpleNamespace

    printed = []
    now = [0.0]
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    progress = sim_cli.PlainProgress(40, console, clock=lambda: now[0])
    summary = SimpleNamespace(runs=10, violations=Counter({"1-acked-write-lost": 2}))
    now[0] = 60.0
    progress.advance(summary)
    assert printed == ["progress: 10/40 seeds (25%), 2 with a violation, 1m00s elapsed, about 3m00s left"]


def _progress_lines_at(total, seconds_at, start=0.0):
    """The seed counts PlainProgress prints lines at, over ``total`` seeds, the clock
    reading ``start`` as they start and ``seconds_at(done)`` as each finishes."""
    from collections import Counter
    from types import SimpleNamespace

    printed = []
    now = [start]
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    progress = sim_cli.PlainProgress(total, console, clock=lambda: now[0])
    summary = SimpleNamespace(runs=0, violations=Counter())
    for done in range(1, total + 1):
        now[0], summary.runs = seconds_at(done), done
        progress.advance(summary)
    return [int(line.split()[1].split("/")[0]) for line in printed]


def test_plain_progress_steps_are_5_percent_rounded_up():
    """5% of 30 seeds is 1.5: a line every 2 seeds, not after every seed."""
    assert _progress_lines_at(30, lambda done: 2.0 * done) == list(range(2, 31, 2))


def test_plain_progress_comes_back_to_the_5_percent_steps_after_a_line_held_back():
    """A line held back by the once-a-second limit comes at a later seed (7 of 100 here);
    the next still comes at the next 5% (10), not 5% after the late one (12)."""
    assert _progress_lines_at(100, lambda done: 0.0 if done < 7 else float(done))[:4] == [7, 10, 15, 20]


@pytest.mark.parametrize("swarm", [False, True])
@pytest.mark.parametrize("acks, asked", [("0", "0"), ("1", "1"), ("all", "all"), ("-1", "all")])
def test_config_acks_is_what_the_producers_ask_for(swarm, acks, asked):
    """The simulator's producers take their acks from the workload.  ``--config acks=1``
    once changed only the config key (printed in the options, recorded in the header)
    while every producer went on asking for the scenario's or the swarm's acks."""
    argv = ["--scenario", "seed003-controlled-shutdown", "--config", f"acks={acks}"] + (["--swarm"] if swarm else [])
    for seed in range(1, 11 if swarm else 2):
        sc = sim_cli._scenario(_parsed(argv), seed)
        assert (sc.config["acks"], sc.workload.acks) == (asked, asked)


def test_a_run_with_config_acks_1_acknowledges_no_acks_all_write(tmp_path, capsys):
    argv = ["--scenario", "seed003-controlled-shutdown", "--seed", "1", "--until", "1500", "--config", "acks=1",
            "--out", str(tmp_path)]
    assert sim_cli.main(argv) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert summary["writes_completed"] > 0 and summary["acked_writes"] == 0  # acks=1 writes, none acks=all


def test_a_summary_of_no_run_gives_no_availability_figure():
    """Interrupted before the first seed finished: no figure, not 0.00%."""
    from kreplica.sim.report import Summary

    rows = dict(Summary().rows())
    assert rows["availability %"] == "-" and rows["time to re-elect p50 / p99 ms"] == "-"
    assert Summary().to_dict()["availability"] is None


def test_a_replay_writes_its_timeline_and_history_beside_the_recording_not_over_it(tmp_path, capsys):
    runs, again = tmp_path / "runs", tmp_path / "again"
    argv = ["--scenario", "seed003-controlled-shutdown", "--seed", "2", "--until", "1500", "--out", str(runs),
            "--history"]
    assert sim_cli.main(argv) == 0
    recorded = runs / "seed003-controlled-shutdown-2.jsonl"
    before = recorded.read_bytes()
    capsys.readouterr()
    # Into the recording's own directory: the replayed history is written beside it.
    assert sim_cli.main(["--replay", str(recorded), "--out", str(runs), "--history"]) == 0
    assert "identical" in capsys.readouterr().out
    assert recorded.read_bytes() == before
    assert (runs / "seed003-controlled-shutdown-2-replay.jsonl").read_bytes() == before
    assert sim_cli.main(["--replay", str(recorded), "--out", str(again), "--timeline"]) == 0
    assert (again / "seed003-controlled-shutdown-2-replay.png").stat().st_size > 1000
    assert not (again / "seed003-controlled-shutdown-2-replay.jsonl").exists()  # no --history, no failure
    assert sim_cli.main(["--replay", str(recorded), "--timeline"]) == 2
    assert "--timeline needs --out DIR" in capsys.readouterr().err


def _recording(tmp_path, text_after=""):
    """A recorded history made up, not simulated: the run header of seed 5 of
    seed003-controlled-shutdown and one crash; ``text_after`` is appended to the file."""
    from kreplica.sim import scenarios
    from kreplica.sim.history import History

    h = History()
    h.record(0, "run", seed=5, scenario=scenarios.load("seed003-controlled-shutdown").to_dict())
    h.record(10, "crash", 2)
    path = tmp_path / "recorded.jsonl"
    h.write_jsonl(path)
    path.write_text(path.read_text() + text_after)
    return path, h.hash


def _replayed_as(monkeypatch, history_hash, failing):
    """The replayed run made up: its hash, and a violation if ``failing``."""
    from kreplica.sim.checker import Invariant, Violation
    from kreplica.sim.world import RunResult

    def run_seed(args, seed, scenario=None, suffix=""):
        v = Violation(Invariant.ACKED_WRITE_LOST, 10, "t-0", 1, "planted in the replay") if failing else None
        return RunResult(scenario.name, seed, history_hash, 2, 1000, 0.1, v, [], 0, 0, 0, 1.0, [], v is None, 1)

    monkeypatch.setattr(sim_cli, "run_seed", run_seed)


@pytest.mark.parametrize("same, failing, status", [(True, False, 0), (True, True, 1), (False, False, 3),
                                                   (False, True, 3)])
def test_a_replay_exits_3_when_its_history_differs_whatever_the_verdict(tmp_path, monkeypatch, capsys, same,
                                                                          failing, status):
    path, recorded = _recording(tmp_path)
    replayed = recorded if same else "0" * 64
    _replayed_as(monkeypatch, replayed, failing)
    assert sim_cli.main(["--replay", str(path)]) == status
    out = capsys.readouterr().out.splitlines()
    assert ("identical" if same else "DIFFERENT") in out
    # Each hash under its own name: the recording's is the one to look for in a CI log.
    assert f"recorded history hash {recorded}" in out and f"replayed history hash {replayed}" in out


def test_blank_lines_in_a_recorded_history_do_not_change_its_hash(tmp_path, monkeypatch, capsys):
    """A history file with an empty line at its end or between events (an editor, a
    concatenation) is the same run: the blank lines are read past, not hashed."""
    path, recorded = _recording(tmp_path, text_after="\n  \n")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "", *lines[1:]]) + "\n")
    _replayed_as(monkeypatch, recorded, failing=False)
    assert sim_cli.main(["--replay", str(path)]) == 0
    assert f"recorded history hash {recorded}" in capsys.readouterr().out.splitlines()


def test_until_0_leaves_no_virtual_time_before_the_liveness_phase():
    """``--until 0`` is a length (the parser takes 0 and up), not "not given": the run
    goes straight to its liveness phase, swarm or not, rather than the scenario's length."""
    for swarm in ([], ["--swarm"]):
        args = _parsed(["--scenario", "kip101-hw-truncation", "--until", "0", *swarm])
        assert sim_cli._scenario(args, 1).until_ms == 0
        assert sim_cli._options(args, sim_cli._scenario(args, 1))["until_ms"] == 0


@pytest.mark.parametrize("asked, drawn", [([], 3), (["--timeline-partitions", "1"], 1)])
def test_timeline_partitions_is_how_many_partitions_each_runs_timeline_draws(tmp_path, capsys, asked, drawn):
    """seed003-controlled-shutdown has 3 partitions; a timeline is 3.2 inches a partition, at 90 dpi."""
    import struct

    argv = ["--scenario", "seed003-controlled-shutdown", "--seed", "1", "--until", "1500", "--out", str(tmp_path),
            "--timeline", *asked]
    assert sim_cli.main(argv) == 0
    with open(tmp_path / "seed003-controlled-shutdown-1.png", "rb") as f:
        width, height = struct.unpack(">II", f.read(24)[16:24])  # the IHDR chunk
    assert height == round(3.2 * drawn * 90)


def test_a_timeline_draws_4_partitions_unless_told_as_the_help_says(capsys):
    """--timeline-partitions is 4 when not given (the test above runs 3 partitions, all
    drawn under any default of 3 or more), as the help says."""
    assert _parsed(["--out", "runs", "--timeline"]).timeline_partitions == 4
    with pytest.raises(SystemExit):
        sim_cli.main(["--help"])
    assert "partitions drawn in each timeline (default 4)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_signal_dropped_inside_a_finalizer_still_stops_the_seeds_after_the_run_in_flight(tmp_path, signal_name):
    """SIGTERM to a single-process sweep raises KeyboardInterrupt wherever the process is;
    inside a finalizer (a log's DirLock.__del__) Python prints it and drops it, and the
    handler ignores any later SIGTERM: the sweep went on through every seed, and `timeout`
    could not stop it (seen once in CI).  A Ctrl-C dropped there needed a second one.
    Either now stops the seeds after the run in flight, exit 130."""
    import subprocess
    import sys

    # Ctrl-C as at a terminal: pytest run in the background of a script inherits SIGINT
    # ignored, and the command then rightly leaves it ignored (no Ctrl-C to catch).
    code = _SIGNAL_IN_A_FINALIZER.format(signal=signal_name) + f"""
signal.signal(signal.SIGINT, signal.default_int_handler)
from kreplica.sim.world import RunResult

def run_seed(args, seed, scenario=None):
    if seed == 2:
        Finalized()  # collected at once
    return RunResult("planted", seed, f"hash{{seed}}", 1, 1000, 0.1, None, [], 0, 0, 0, 1.0, [], True, 1)

sim_cli.run_seed = run_seed
sys.exit(sim_cli.main(["--seeds", "1..5", "--out", {str(tmp_path)!r}]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Exception ignored" in done.stderr and "KeyboardInterrupt" in done.stderr  # Python dropped it
    assert done.returncode == 130, (done.returncode, done.stdout, done.stderr)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and [r["seed"] for r in summary["runs"]] == [1, 2]


@pytest.mark.parametrize("traces, shown", [("0", False), ("1", True)])
def test_a_failing_replay_prints_its_violation_unless_traces_is_0(tmp_path, monkeypatch, capsys, traces, shown):
    """A replay is one run: any --traces above 0 prints its violation, as --traces 1 would
    for a sweep's first failing seed."""
    path, recorded = _recording(tmp_path)
    _replayed_as(monkeypatch, recorded, failing=True)
    assert sim_cli.main(["--replay", str(path), "--traces", traces]) == 1
    assert ("VIOLATION " in capsys.readouterr().out) == shown


def test_a_run_header_without_its_seed_is_named_in_one_line(tmp_path, capsys):
    """A header cut down by hand or by another tool: exit 2, the missing key shown as a
    missing key (``KeyError('seed')``, not a bare ``'seed'``), and no traceback."""
    from kreplica.sim.history import History

    h = History()
    h.record(0, "run", scenario={"name": "x"})
    path = tmp_path / "no-seed.jsonl"
    h.write_jsonl(path)
    assert sim_cli.main(["--replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"kreplica simulate: error: cannot replay {path}: KeyError('seed')\n"


@pytest.mark.parametrize("seeds", ["1..3", "5,2,9"])
def test_the_first_line_names_the_seeds_as_given(monkeypatch, capsys, seeds):
    _planted_runs(monkeypatch)
    assert sim_cli.main(["--seeds", seeds]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"kreplica simulate: random-chaos, seeds {seeds}"


@pytest.mark.parametrize("argv", [["--seed", "4"], ["--seeds", "4"]])
def test_a_single_seed_prints_no_progress_line(monkeypatch, capsys, argv):
    """One seed has no 5% steps to report: it prints its hash and the table, no
    "progress: 1/1" line, whether piped or not."""
    _planted_runs(monkeypatch)
    assert sim_cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert "seed 4: history hash hash4 (1 events)" in out and not any(x.startswith("progress: ") for x in out)


def _deliver(signum):
    """``signum`` as Python delivers it: its handler called in the main thread (a handler
    left at SIG_DFL is not callable, so the test fails rather than the process dying)."""
    import signal

    signal.getsignal(signum)(signum, None)



def _handler_during_clean_up(monkeypatch, signum):
    """Every run gets ``signum`` mid-run; the list returned collects ``signum``'s handler as
    each run's clean-up finds it (as World.run's removal of its data dir would)."""
    import signal

    seen = []

    def run_seed(args, seed, scenario=None):
        try:
            _deliver(signum)
        finally:
            seen.append(signal.getsignal(signum))

    monkeypatch.setattr(sim_cli, "run_seed", run_seed)
    return seen

def test_a_run_after_one_a_sigterm_stopped_runs_every_seed(monkeypatch, capsys):
    """The note that a signal came belongs to one run of the command: a program that runs
    it again in the same process (a notebook, a test) gets all the seeds it asks for."""
    import signal

    _planted_runs(monkeypatch, during=lambda seed: seed == 2 and _deliver(signal.SIGTERM))
    assert sim_cli.main(["--seeds", "1..3"]) == 130
    _planted_runs(monkeypatch)
    assert sim_cli.main(["--seeds", "1..3"]) == 0


def test_a_second_sigterm_waits_for_the_run_in_flight_to_clean_up(monkeypatch, capsys):
    """After the first SIGTERM, more (a scheduler's repeats, ``timeout`` with a process
    group) are ignored until the command ends, so that none cuts the run's clean-up short
    and leaves its data dir; then SIGTERM's handler is the one it found."""
    import signal

    during_clean_up = _handler_during_clean_up(monkeypatch, signal.SIGTERM)
    before = signal.getsignal(signal.SIGTERM)
    assert sim_cli.main(["--seeds", "1..3"]) == 130
    assert during_clean_up == [signal.SIG_IGN] and signal.getsignal(signal.SIGTERM) is before


def test_a_programs_own_ctrl_c_handler_is_kept_while_the_seeds_run(monkeypatch, capsys):
    """The command takes Ctrl-C over only where it raises KeyboardInterrupt; a program that
    handles SIGINT itself keeps its handler during the run and after it."""
    import signal

    def own(signum, frame):
        pass

    seen = []
    _planted_runs(monkeypatch, during=lambda seed: seen.append(signal.getsignal(signal.SIGINT)))
    previous = signal.signal(signal.SIGINT, own)
    try:
        assert sim_cli.main(["--seeds", "1..3"]) == 0
        assert seen == [own, own, own] and signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_sigterm_handler_set_outside_python_is_left_as_the_run_leaves_it(monkeypatch, capsys):
    """Where SIGTERM's handler was installed from C (an embedding program), Python reports
    the replaced handler as None, which cannot be put back: the command ends normally
    instead of failing on a TypeError at the end of its seeds."""
    import signal

    real = signal.signal
    answers = iter([None])  # the first replacement, of SIGTERM's handler, finds a C one

    def reporting_none_once(signum, handler):
        old = real(signum, handler)
        return next(answers, old) if signum == signal.SIGTERM else old

    _planted_runs(monkeypatch)
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(signal, "signal", reporting_none_once)
    try:
        assert sim_cli.main(["--seeds", "1..3"]) == 0
    finally:
        real(signal.SIGTERM, before)


def test_the_command_runs_outside_the_main_thread(monkeypatch, capsys):
    """Signal handlers can be set only in the main thread: run from another (a server, a
    GUI's worker), the command leaves signals alone and runs its seeds."""
    import threading

    _planted_runs(monkeypatch)
    status = []
    thread = threading.Thread(target=lambda: status.append(sim_cli.main(["--seeds", "1..3"])))
    thread.start()
    thread.join(60)
    assert status == [0]


def test_a_pools_results_come_back_in_seed_order_whichever_finishes_first(monkeypatch):
    """With --jobs, summary.json, the traces and the failing seeds list seeds in the order
    given: seed 0 here finishes only after seed 1 has, in the other worker."""
    import argparse
    import multiprocessing

    second_done = multiprocessing.get_context("fork").Event()

    def run_seed(args, seed, scenario=None):
        if seed == 0:
            assert second_done.wait(30), "seed 1 never ran beside seed 0"
        else:
            second_done.set()
        return seed

    monkeypatch.setattr(sim_cli, "run_seed", run_seed)
    assert list(sim_cli._runs(argparse.Namespace(jobs=2, swarm=True), None, [0, 1])) == [0, 1]


def test_a_pool_worker_leaves_ctrl_c_to_the_command():
    """Ctrl-C reaches the whole process group: a worker ignores it (the command stops the
    pool), rather than dying mid-run with a KeyboardInterrupt traceback of its own."""
    import subprocess
    import sys

    code = ("import os, signal; from kreplica import sim_cli; sim_cli._worker_signals(); "
            "os.kill(os.getpid(), signal.SIGINT); print('still running', flush=True)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "still running\n", "")


def test_a_replays_out_dir_is_made_with_its_parents(tmp_path, monkeypatch, capsys):
    path, recorded = _recording(tmp_path)
    _replayed_as(monkeypatch, recorded, failing=False)
    out = tmp_path / "replays" / "today"
    assert sim_cli.main(["--replay", str(path), "--out", str(out)]) == 0
    assert out.is_dir()


@pytest.mark.parametrize("header, error", [
    ('{"data":[1],"kind":"run","seq":0,"t":0}', "cannot convert dictionary update sequence"),  # a TypeError
    ('{"kind":"run","seq":0,"t":0}', "KeyError('seed')"),  # a header with no data at all
])
def test_a_run_header_of_the_wrong_shape_is_named_in_one_line(tmp_path, capsys, header, error):
    path = tmp_path / "bad-header.jsonl"
    path.write_text(header + "\n")
    assert sim_cli.main(["--replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kreplica simulate: error: cannot replay {path}: ") and error in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_scenario_path_that_cannot_be_read_is_one_line_and_exit_status_2(tmp_path, capsys):
    folder = tmp_path / "mine.toml"
    folder.mkdir()  # a directory named like a scenario file
    assert sim_cli.main(["--scenario", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kreplica simulate: error: ") and "Is a directory" in err and "Traceback" not in err


def test_a_second_ctrl_c_still_interrupts_the_run_in_flights_clean_up(monkeypatch, capsys):
    """Only SIGTERM is ignored once it came (a scheduler's repeats must not cut the clean-up
    short); a second Ctrl-C is the user's own, and still raises KeyboardInterrupt."""
    import signal

    during_clean_up = _handler_during_clean_up(monkeypatch, signal.SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal
    try:
        assert sim_cli.main(["--seeds", "1..3"]) == 130
        assert len(during_clean_up) == 1 and during_clean_up[0] not in (signal.SIG_IGN, signal.SIG_DFL)
        with pytest.raises(KeyboardInterrupt):
            during_clean_up[0](signal.SIGINT, None)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("start", [0.0, 5000.0])
def test_plain_progress_holds_each_line_a_second_after_the_last_one_printed(start):
    """Every 5% of 100 seeds comes half a second after the one before: a line every 10
    seeds, each a second after the last printed, not each a second after the start; the
    first a second after the start, whatever a monotonic clock reads then (5000 s here)."""
    assert _progress_lines_at(100, lambda done: start + done // 5 * 0.5, start) == list(range(10, 101, 10))


def test_a_runs_result_comes_back_without_its_timeline_samples(tmp_path, capsys):
    """The samples are drawn into the PNG and dropped: a pool worker does not send them back
    to the command, nor does the command keep them for every seed of a sweep."""
    args = _parsed(["--scenario", "seed003-controlled-shutdown", "--until", "1500", "--out", str(tmp_path),
                    "--timeline"])
    r = sim_cli.run_seed(args, 1)
    assert (tmp_path / "seed003-controlled-shutdown-1.png").stat().st_size > 1000 and r.samples == []


def test_a_swarm_is_named_swarm_not_after_its_first_seeds_draw(monkeypatch, capsys):
    """Each seed of a swarm runs its own draw (swarm-1, swarm-2, ...): the first line and the
    table's title name the sweep "swarm", not the first seed's scenario."""
    _planted_runs(monkeypatch)
    assert sim_cli.main(["--swarm", "--seeds", "1..3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "kreplica simulate: swarm, seeds 1..3"
    assert "swarm: 3 seed(s)" in " ".join(out.split())  # the title may wrap


def test_each_trace_is_headed_by_its_seed(monkeypatch, capsys):
    _planted_runs(monkeypatch, failing=(2, 3))
    assert sim_cli.main(["--seeds", "1..3"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [out[i - 1] for i, x in enumerate(out) if x.startswith("VIOLATION ")] == ["seed 2", "seed 3"]


def test_list_gives_each_scenario_one_line_whatever_its_descriptions_lines(monkeypatch, capsys):
    """A scenario file's description runs over several lines; --list (wide enough not to
    wrap) prints each scenario on one line, its name and then its description."""
    from kreplica.sim import scenarios

    monkeypatch.setenv("COLUMNS", "10000")
    assert sim_cli.main(["--list"]) == 0
    names = scenarios.names()
    assert any("\n" in scenarios.load(name).description.strip() for name in names)
    assert capsys.readouterr().out.splitlines() == [
        f"{name}: {' '.join(scenarios.load(name).description.split())}" for name in names]


def _worlds_made_up(monkeypatch, failing=(), samples=()):
    """``World`` made up, not simulated, as run_seed makes and runs it: each run records its
    header, samples ``samples`` when asked to, and has a violation if its seed is in
    ``failing``."""
    from kreplica.sim import world
    from kreplica.sim.checker import Invariant, Violation
    from kreplica.sim.history import History

    class World:
        def __init__(self, scenario, seed, *, keep_history, record_samples, keep_data):
            self.scenario, self.seed, self.keep_data = scenario, seed, keep_data
            self.record_samples = record_samples
            self.history = History(keep_all=keep_history)

        def run(self):
            self.history.record(0, "run", seed=self.seed, scenario=self.scenario.to_dict())
            v = (Violation(Invariant.ACKED_WRITE_LOST, 10, "t-0", 1, f"planted in seed {self.seed}")
                 if self.seed in failing else None)
            return world.RunResult(self.scenario.name, self.seed, self.history.hash, len(self.history), 1000, 0.1,
                                   v, [], 0, 0, 0, 1.0, [], v is None, 1,
                                   list(samples) if self.record_samples else [])

    monkeypatch.setattr(world, "World", World)


def test_a_scenario_named_with_a_dot_gets_its_own_files_for_each_seed(tmp_path, monkeypatch, capsys):
    """A run's files are ``<scenario>-<seed>.jsonl`` and ``.png``: a dot in the scenario's
    name (``shutdown.v2``) is part of the name, not a suffix to replace.  Every seed of a
    sweep was written over one ``shutdown.jsonl`` and ``shutdown.png``, the last seed's."""
    scenario = tmp_path / "mine.toml"
    scenario.write_text('extends = "seed003-controlled-shutdown"\nname = "shutdown.v2"\n')
    _worlds_made_up(monkeypatch)
    out = tmp_path / "runs"
    argv = ["--scenario", str(scenario), "--seeds", "1..2", "--out", str(out), "--history", "--timeline"]
    assert sim_cli.main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "shutdown.v2-1.jsonl", "shutdown.v2-1.png", "shutdown.v2-2.jsonl", "shutdown.v2-2.png", "summary.json"]
    capsys.readouterr()
    assert sim_cli.main(["--replay", str(out / "shutdown.v2-2.jsonl"), "--out", str(out), "--history"]) == 0
    assert "identical" in capsys.readouterr().out and (out / "shutdown.v2-2-replay.jsonl").exists()


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _at_a_terminal(monkeypatch, capsys, argv):
    """What the command writes to a terminal, control codes and all, its runs made up."""
    for name, value in {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "TERM": "xterm-256color",
                        "COLUMNS": "100"}.items():
        monkeypatch.setenv(name, value)
    _planted_runs(monkeypatch)
    assert sim_cli.main(argv) == 0
    return capsys.readouterr().out


def test_at_a_terminal_a_sweep_has_a_bar_over_its_seeds_left_above_the_table(monkeypatch, capsys):
    """A terminal gets the issue's progress bar, not plain lines: labelled as the run is,
    counting every seed to 3/3, and left in place above the summary table (nothing moves
    the cursor back up to erase it)."""
    out = _at_a_terminal(monkeypatch, capsys, ["--seeds", "1..3"])
    frames = [x for x in re.split(r"[\r\n]", _ANSI.sub("", out)) if re.search(r" \d/3 \d+:\d\d:\d\d$", x)]
    assert frames and all(x.split()[0] == "random-chaos" for x in frames)
    assert frames[-1].split()[-2] == "3/3"
    assert "progress: " not in out and "\x1b[1A" not in out


def test_at_a_terminal_a_single_seeds_bar_is_erased_and_its_hash_line_kept(monkeypatch, capsys):
    out = _at_a_terminal(monkeypatch, capsys, ["--seed", "4"])
    assert "1/1" in out and "\x1b[1A\x1b[2K" in out  # drawn, then erased
    assert "seed 4: history hash hash4 (1 events)" in _ANSI.sub("", out)


def test_piped_a_sweep_prints_plain_progress_lines_and_no_bar_nor_hash_lines(monkeypatch, capsys):
    """Not a terminal: progress is plain lines only (no bar drawn once at the end too), and
    the runs' hashes are in summary.json, not a line each (only a single seed prints its)."""
    _planted_runs(monkeypatch)
    assert sim_cli.main(["--seeds", "1..3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [x for x in out if "3/3" in x] == ["progress: 3/3 seeds (100%), 0 with a violation, 0s elapsed"]
    assert not any("history hash" in x for x in out)


def test_a_workers_first_sigterm_mid_run_ignores_any_more_while_the_run_cleans_up(monkeypatch):
    """The pool's terminate() may SIGTERM a worker again (and a scheduler repeats it): once
    the first has come, mid-run, the worker ignores SIGTERM so that the run's clean-up
    (its data dir removed) is not cut short."""
    import signal

    monkeypatch.setattr(sim_cli, "_running", True)
    monkeypatch.setattr(sim_cli, "_terminated", False)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as e:
            sim_cli._exit_on_sigterm(signal.SIGTERM, None)
        assert e.value.code == 128 + signal.SIGTERM and sim_cli._terminated
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_failing_seed_without_timeline_gets_its_history_and_no_timeline(tmp_path, monkeypatch, capsys):
    """A failing seed always keeps its history (for --replay); a timeline only with --timeline,
    whose samples are recorded only then (one drawn without would be empty)."""
    _worlds_made_up(monkeypatch, failing=(2,))
    assert sim_cli.main(["--scenario", "seed003-controlled-shutdown", "--seeds", "1..2", "--out", str(tmp_path)]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed003-controlled-shutdown-2.jsonl", "summary.json"]


def test_a_replay_names_its_seed_scenario_and_options_before_it_runs(tmp_path, monkeypatch, capsys):
    """As a run does (issue 5: the seed and options printed at the start), a replay says
    what it re-runs before re-running it: a long replay shows what it is replaying, and one
    that fails mid-run has been named.  The options are the recorded scenario's."""
    from kreplica.sim import scenarios

    path, recorded = _recording(tmp_path)
    _replayed_as(monkeypatch, recorded, failing=False)
    replayed = sim_cli.run_seed
    before = []
    monkeypatch.setattr(sim_cli, "run_seed", lambda *a, **k: before.append(capsys.readouterr().out) or replayed(*a, **k))
    assert sim_cli.main(["--replay", str(path)]) == 0
    options = json.dumps(scenarios.load("seed003-controlled-shutdown").to_dict(), sort_keys=True)
    assert before == [f"seed 5 scenario seed003-controlled-shutdown\noptions: {options}\n"]
    assert capsys.readouterr().out.splitlines() == [
        f"recorded history hash {recorded}", f"replayed history hash {recorded}", "identical"]


def test_a_scenario_name_that_cannot_name_a_file_is_refused_with_out_before_any_run(tmp_path, capsys):
    """With --out a run's files are named after its scenario: a name holding a "/" would put
    them in a directory that is not there, a FileNotFoundError traceback after the first
    run.  It is bad input, said in one line with exit status 2 before any run; without
    --out nothing is named after it and the name is fine."""
    scenario = tmp_path / "mine.toml"
    scenario.write_text('extends = "seed003-controlled-shutdown"\nname = "team/shutdown"\n')
    out = tmp_path / "runs"
    argv = ["--scenario", str(scenario), "--seed", "1", "--until", "0", "--out", str(out), "--history"]
    assert sim_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == ("kreplica simulate: error: scenario 'team/shutdown': with --out its name names the run's "
                   "files, and cannot hold '/'\n")
    assert not out.exists()


@pytest.mark.parametrize("key", ["description", "swarm_mix"])
def test_a_scenario_files_text_given_as_a_number_is_refused_in_one_line(tmp_path, capsys, key):
    """``description = 5`` or ``swarm_mix = 5`` is bad input like any other: one line
    naming it, exit status 2, before any run (128d385), not a run whose options print a
    number where text goes, nor a mix refused as an unknown "5"."""
    path = tmp_path / "five.toml"
    path.write_text(f'extends = "seed003-controlled-shutdown"\nname = "five"\n{key} = 5\n')
    assert sim_cli.main(["--scenario", str(path), "--until", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kreplica simulate: error: ") and err.count("\n") == 1, err
    assert f"{key} = 5, expected a string" in err


@pytest.mark.parametrize("swarm", [[], ["--swarm"]])
def test_an_empty_scenario_name_is_refused_not_taken_as_the_default(monkeypatch, capsys, swarm):
    """``--scenario ""`` (a shell variable left empty) names no scenario: it is refused in
    one line with exit status 2 before any run, as the loader refuses an empty name and as
    --replay counts it a --scenario given; it ran the default, random-chaos, instead."""
    _worlds_made_up(monkeypatch)
    assert sim_cli.main(["--scenario", "", "--seed", "1", *swarm]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("kreplica simulate: error: no scenario ''; known: ")
    assert captured.err.count("\n") == 1


def test_a_scenario_name_holding_a_slash_runs_without_out(tmp_path, monkeypatch, capsys):
    """Only --out names files after the scenario: without it a name holding a "/" names
    nothing and the run goes ahead as any other (the refusal is --out's, not the name's)."""
    scenario = tmp_path / "mine.toml"
    scenario.write_text('extends = "seed003-controlled-shutdown"\nname = "team/shutdown"\n')
    _worlds_made_up(monkeypatch)
    assert sim_cli.main(["--scenario", str(scenario), "--seed", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.splitlines()[0] == "kreplica simulate: team/shutdown, seeds 1"


def test_a_replay_compares_the_recorded_lines_byte_for_byte(tmp_path, monkeypatch, capsys):
    """The recorded hash is the hash of the file's lines as written (the hash the run
    printed), not of its events read and written again: a recording whose line holds the
    same event in other bytes (keys in another order, an extra field) is not the history
    the run recorded, and its replay is DIFFERENT (exit status 3)."""
    from kreplica.sim.history import hash_lines

    path, recorded = _recording(tmp_path)
    header, crash = path.read_text().splitlines()
    assert crash == '{"broker":2,"kind":"crash","seq":1,"t":10}'
    edited = '{"seq":1,"t":10,"kind":"crash","broker":2,"note":"edited"}'
    path.write_text(f"{header}\n{edited}\n")
    _replayed_as(monkeypatch, recorded, failing=False)
    assert sim_cli.main(["--replay", str(path)]) == 3
    out = capsys.readouterr().out.splitlines()
    assert f"recorded history hash {hash_lines([header, edited])}" in out and "DIFFERENT" in out


def test_a_replays_out_that_cannot_be_made_stops_it_before_it_runs(tmp_path, monkeypatch, capsys):
    """A replay whose --out cannot be made (under a file here) is refused in one line with
    exit status 2 before anything is replayed, as a run's is: not replayed all the same with
    nowhere to put its files."""
    path, recorded = _recording(tmp_path)
    ran = []
    _replayed_as(monkeypatch, recorded, failing=False)
    replayed = sim_cli.run_seed
    monkeypatch.setattr(sim_cli, "run_seed", lambda *a, **k: ran.append(a[1]) or replayed(*a, **k))
    assert sim_cli.main(["--replay", str(path), "--out", str(path / "runs")]) == 2
    captured = capsys.readouterr()
    assert ran == [] and captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"kreplica simulate: error: --out {path / 'runs'}: ")


def test_a_single_seeds_hash_line_counts_the_events_its_history_holds(tmp_path, capsys):
    """``seed N: history hash H (E events)``: H is the hash of the history file written and E
    the number of events (lines) in it, not the scheduler's count of callbacks run."""
    from kreplica.sim.history import hash_lines

    argv = ["--scenario", "seed003-controlled-shutdown", "--seed", "1", "--until", "1500", "--out", str(tmp_path),
            "--history"]
    assert sim_cli.main(argv) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("seed 1: history hash ")]
    lines = (tmp_path / "seed003-controlled-shutdown-1.jsonl").read_text().splitlines()
    assert line == f"seed 1: history hash {hash_lines(lines)} ({len(lines)} events)"


def test_a_replays_options_line_is_sorted_whatever_order_the_recording_holds(tmp_path, monkeypatch, capsys):
    """The replay's options line is the run's (keys sorted, nested ones too), not the
    recording's key order: a recording written by another tool, or edited, still prints
    options that compare line for line with the run's own header."""
    from kreplica.sim import scenarios

    path, recorded = _recording(tmp_path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["data"]["scenario"] = dict(reversed(list(header["data"]["scenario"].items())))
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    _replayed_as(monkeypatch, recorded, failing=False)
    sim_cli.main(["--replay", str(path)])
    options = json.dumps(scenarios.load("seed003-controlled-shutdown").to_dict(), sort_keys=True)
    assert capsys.readouterr().out.splitlines()[1] == f"options: {options}"


def test_plain_progress_counts_whole_seconds_as_a_clock_does():
    """Elapsed and left are whole seconds gone by, cut not rounded: 59.9 s is "59s", not
    "1m00s", and 3599.9 s is "59m59s" (a minute is shown only once it has passed)."""
    from collections import Counter
    from types import SimpleNamespace

    printed = []
    now = [0.0]
    console = SimpleNamespace(print=lambda text, **_: printed.append(text))
    progress = sim_cli.PlainProgress(2, console, clock=lambda: now[0])
    summary = SimpleNamespace(runs=1, violations=Counter())
    now[0] = 59.9
    progress.advance(summary)
    assert printed == ["progress: 1/2 seeds (50%), 0 with a violation, 59s elapsed, about 59s left"]
    assert (sim_cli._duration(0.99), sim_cli._duration(3599.9), sim_cli._duration(3600.0)) == ("0s", "59m59s",
                                                                                              "60m00s")


def test_a_trace_holding_what_looks_like_markup_is_printed_as_recorded(monkeypatch, capsys):
    """A trace's lines are printed as the history holds them: a JSON list of booleans
    (``[true, false]``) or a message naming ``[bold]`` is text, not rich markup to strip."""
    from kreplica.sim.checker import Invariant, Violation
    from kreplica.sim.history import Event
    from kreplica.sim.world import RunResult

    trace = (Event(1, 5, "fetch", 2, "t-0", {"acked": [True, False], "note": "[bold]x[/bold]"}),)
    violation = Violation(Invariant.ACKED_WRITE_LOST, 10, "t-0", 1, "offsets [italic] lost", trace)

    def run_seed(args, seed, scenario=None):
        return RunResult("planted", seed, "h", 1, 1000, 0.1, violation, [], 0, 0, 0, 1.0, [], False, 1)

    monkeypatch.setattr(sim_cli, "run_seed", run_seed)
    assert sim_cli.main(["--seeds", "1..2", "--traces", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    start = out.index("seed 1") + 1
    assert out[start:start + 3] == violation.describe().splitlines()


class _Exited(Exception):
    """What the test's os._exit raises instead of leaving: the status a worker left with."""


def _record_exits(monkeypatch):
    def exit_(code):
        raise _Exited(code)

    monkeypatch.setattr(sim_cli.os, "_exit", exit_)


def test_a_worker_leaves_with_128_plus_sigterm_after_its_seed_and_between_seeds(monkeypatch):
    """A pool worker SIGTERMed while idle leaves at once with 128 + SIGTERM, as a process
    killed by it reports; so does one after a seed ran (the seed done, it is idle again,
    and must not raise SystemExit into the pool's wait on its task queue)."""
    import signal

    _record_exits(monkeypatch)
    monkeypatch.setattr(sim_cli, "_terminated", False)
    monkeypatch.setattr(sim_cli, "_running", False)
    monkeypatch.setattr(sim_cli, "run_seed", lambda args, seed, scenario=None: seed * 2)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert sim_cli._run_in_worker(None, 4) == 8
        assert sim_cli._running is False
        with pytest.raises(_Exited) as e:
            sim_cli._exit_on_sigterm(signal.SIGTERM, None)
        assert e.value.args == (128 + signal.SIGTERM,)
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("code, status", [(143, 143), (0, 0), ("stopped", 1)])
def test_a_worker_whose_run_ends_in_systemexit_leaves_with_its_code(monkeypatch, code, status):
    """The pool's terminate() reaches a run in flight as SystemExit(128 + SIGTERM): the
    worker leaves with that status once the run has cleaned up (1 for a code that is no
    number: a message, for which Python's own exit gives 1 too)."""
    def run_seed(args, seed, scenario=None):
        raise SystemExit(code)

    _record_exits(monkeypatch)
    monkeypatch.setattr(sim_cli, "_terminated", False)
    monkeypatch.setattr(sim_cli, "run_seed", run_seed)
    with pytest.raises(_Exited) as e:
        sim_cli._run_in_worker(None, 1)
    assert e.value.args == (status,) and sim_cli._running is False


def test_plain_progress_rounds_its_percentage_to_the_nearest_whole():
    """2 of 3 seeds is 67% done, not 66%: the share is rounded to the nearest whole per cent, not cut."""
    import io
    from collections import Counter
    from types import SimpleNamespace

    from rich.console import Console

    out = io.StringIO()
    progress = sim_cli.PlainProgress(3, Console(file=out, width=200), clock=iter([0.0, 2.0, 4.0]).__next__)
    for done in (1, 2):
        progress.advance(SimpleNamespace(runs=done, violations=Counter()))
    assert [x.split(", ")[0] for x in out.getvalue().splitlines()] == [
        "progress: 1/3 seeds (33%)", "progress: 2/3 seeds (67%)"]


def _seed_and_pid(args, seed, scenario=None):
    import os

    return seed, os.getpid()


@pytest.mark.parametrize("jobs, pools", [(1, []), (2, [2]), (3, [3])])
def test_jobs_is_how_many_worker_processes_run_the_seeds(monkeypatch, jobs, pools):
    """--jobs N > 1 runs the seeds in a pool of N worker processes; --jobs 1 (the default)
    runs them in this one, with no pool."""
    import argparse
    import multiprocessing.pool
    import os

    sizes = []
    init = multiprocessing.pool.Pool.__init__

    def recording_init(self, processes=None, *a, **k):
        init(self, processes, *a, **k)
        sizes.append(len(self._pool))

    monkeypatch.setattr(multiprocessing.pool.Pool, "__init__", recording_init)
    monkeypatch.setattr(sim_cli, "run_seed", _seed_and_pid)
    runs = list(sim_cli._runs(argparse.Namespace(jobs=jobs, swarm=True), None, range(5)))
    assert [seed for seed, _ in runs] == [0, 1, 2, 3, 4] and sizes == pools
    assert all((pid == os.getpid()) == (jobs == 1) for _, pid in runs)


def _killed_at_seed_two(args, seed, scenario=None):
    import os
    import signal

    if seed == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer ends a worker: no clean-up, no answer
    return seed


def test_a_pool_worker_killed_mid_seed_ends_the_wait_instead_of_hanging(monkeypatch):
    """The pool replaces a worker that dies but loses the seed it held, so waiting for that
    seed's result in order would never end (it hung for good): a worker started beyond
    --jobs stops the wait with WorkerLost, after the seeds before the lost one."""
    import argparse
    import time

    monkeypatch.setattr(sim_cli, "run_seed", _killed_at_seed_two)
    got = []
    t0 = time.monotonic()
    with pytest.raises(sim_cli.WorkerLost, match="a worker process died .*; seed 2 has no result"):
        for seed in sim_cli._runs(argparse.Namespace(jobs=2, swarm=True), None, range(6)):
            got.append(seed)
    assert got == [0, 1] and time.monotonic() - t0 < 20


def test_a_pool_that_starts_more_workers_than_it_has_slots_ends_the_wait_saying_workers_died(monkeypatch):
    """A worker the pool starts beyond its table of slots notes no seed, so a seed it held
    cannot be named if it dies: the wait ends, saying workers died, as soon as more workers
    have started than the table has slots (one a job here: the first replacement is one too
    many).  Counted against the table's numbers (two a slot), a replacement without a slot
    dying mid-seed would be waited for for good; here the known lost seed 2 was named
    instead of the rule."""
    import argparse
    import time

    monkeypatch.setattr(sim_cli, "run_seed", _killed_at_seed_two)
    monkeypatch.setattr(sim_cli, "_SLOTS_PER_JOB", 1)
    t0 = time.monotonic()
    with pytest.raises(sim_cli.WorkerLost, match="^workers died .*; the seeds they held have no result$"):
        for _ in sim_cli._runs(argparse.Namespace(jobs=2, swarm=True), None, range(6)):
            pass
    assert time.monotonic() - t0 < 20


def _killed_at(seed_killed):
    """A run that kills its worker as the OOM killer does at ``seed_killed``."""
    def run_seed(args, seed, scenario=None):
        if seed == seed_killed:
            _killed_at_seed_two(args, 2)
        return seed
    return run_seed


@pytest.mark.parametrize("killed", [-1, -7, 2 ** 31 + 1, 2 ** 64 + 1])
def test_a_seed_a_dead_worker_held_ends_the_wait_whatever_integer_it_is(monkeypatch, killed):
    """A seed is any integer (``--seed -1``, ``--seeds=-9..9``, 2**64 + 1), and the one a
    killed worker held ends the wait as seed 2 does. The workers' slots noted the seed
    itself: a negative one (-1 was the slots' "none yet") was never taken as lost, and
    one wider than 64 bits was noted cut to its low bits, so the wait went on for good."""
    import argparse
    import signal

    def too_long(signum, frame):
        raise AssertionError(f"the wait for seed {killed}, lost with its worker, never ended")

    monkeypatch.setattr(sim_cli, "run_seed", _killed_at(killed))
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(30)
    got = []
    try:
        with pytest.raises(sim_cli.WorkerLost, match=f"; seed {killed} has no result"):
            for seed in sim_cli._runs(argparse.Namespace(jobs=2, swarm=True), None, range(killed - 2, killed + 4)):
                got.append(seed)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert got == [killed - 2, killed - 1]


def _deaf_at_seed_two(args, seed, scenario=None):
    import os
    import signal
    import time

    if seed == 1:
        time.sleep(0.5)  # seed 2 starts on the other worker meanwhile
        os.kill(os.getpid(), signal.SIGKILL)
    if seed == 2:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a worker stuck where no handler runs
        time.sleep(30)
    return seed


def test_a_worker_the_pools_sigterm_cannot_stop_is_killed_after_the_grace(monkeypatch):
    """Stopping the pool sends SIGTERM and joins every worker; one stuck where the signal's
    handler never runs (a lock inherited, held, at fork: the tests hung so under load)
    would be joined for good.  After TERMINATE_GRACE_S it is killed."""
    import argparse
    import time

    monkeypatch.setattr(sim_cli, "run_seed", _deaf_at_seed_two)
    monkeypatch.setattr(sim_cli, "TERMINATE_GRACE_S", 1.0)
    got = []
    t0 = time.monotonic()
    with pytest.raises(sim_cli.WorkerLost, match="seed 1 has no result"):
        for seed in sim_cli._runs(argparse.Namespace(jobs=2, swarm=True), None, range(4)):
            got.append(seed)
    assert got == [0] and time.monotonic() - t0 < 15


def test_a_stop_interrupted_by_a_second_ctrl_c_still_kills_a_deaf_worker(monkeypatch):
    """A second Ctrl-C inside ``pool.terminate()`` used to cancel the grace timer on its way
    out, so a worker deaf to SIGTERM was then joined for good by ``_runs``' final join
    (the 188th review's SC10-19); the timer now outlives an interrupted stop."""
    import threading

    killed = threading.Event()

    class Deaf:
        exitcode = None

        def kill(self):
            killed.set()

    class Pool:
        _pool = [Deaf()]

        def terminate(self):
            raise KeyboardInterrupt  # the second Ctrl-C, while terminate() joins

    monkeypatch.setattr(sim_cli, "TERMINATE_GRACE_S", 0.05)
    with pytest.raises(KeyboardInterrupt):
        sim_cli._terminate(Pool())
    assert killed.wait(5)


def test_a_stop_interrupted_by_a_second_ctrl_c_does_not_hold_the_exit_for_the_grace():
    """The kill timer an interrupted stop keeps is a daemon thread: the command, its summary
    printed, leaves at once, not when TERMINATE_GRACE_S (60 s here) has passed."""
    import subprocess
    import sys
    import time

    code = """
from kreplica import sim_cli
sim_cli.TERMINATE_GRACE_S = 60.0

class Worker:
    exitcode = 0  # gone by the time the timer would look

class Pool:
    _pool = [Worker()]

    def terminate(self):
        raise KeyboardInterrupt  # the second Ctrl-C, while terminate() joins

try:
    sim_cli._terminate(Pool())
except KeyboardInterrupt:
    print("stopped", flush=True)
"""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the interrupted stop held the exit for its kill timer") from None
    assert (proc.returncode, out) == (0, "stopped\n") and time.monotonic() - t0 < 20


def test_cli_a_lost_worker_keeps_the_seeds_that_finished_and_exits_1(tmp_path, capsys, monkeypatch):
    real = sim_cli.run_seed

    def killed_at_seed_two(args, seed, scenario=None):
        if seed == 2:
            _killed_at_seed_two(args, seed)
        return real(args, seed, scenario)

    monkeypatch.setattr(sim_cli, "run_seed", killed_at_seed_two)
    argv = ["--scenario", "seed003-controlled-shutdown", "--seeds", "1..4", "--until", "1500", "--jobs", "2",
            "--out", str(tmp_path)]
    assert sim_cli.main(argv) == 1
    out = " ".join(capsys.readouterr().out.split())
    # Seed 1, on the other worker, is waited for (it finishes after seed 2's worker died).
    assert "error: a worker process died" in out and "seed 2 has no result" in out
    assert "1 of 4 seed(s), a worker died" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and [r["seed"] for r in summary["runs"]] == [1]


def test_a_workers_slot_names_the_seed_it_runs_seed_0_too_and_none_before_its_first(monkeypatch):
    """The pool's table of workers: a worker that starts notes its pid and no seed yet, so
    dying before its first seed loses none; then the place in run order of the seed it
    runs, 0 as any other, which is the one lost once its pid is gone (the wait then ends
    there, not for good)."""
    import multiprocessing
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no process has any longer
    context = multiprocessing.get_context("fork")
    started, slots = context.Value("i", 0), context.Array("q", 8, lock=False)
    monkeypatch.setattr(sim_cli, "_worker_signals", lambda: None)  # this process is no worker
    monkeypatch.setattr(sim_cli, "_slot", -1)
    monkeypatch.setattr(sim_cli, "_slots", None)
    monkeypatch.setattr(sim_cli, "run_seed", lambda args, seed, scenario=None: seed)
    with monkeypatch.context() as m:
        m.setattr(sim_cli.os, "getpid", lambda: gone.pid)
        sim_cli._worker_start(started, slots)
    assert started.value == 1 and sim_cli._lost_places(1, slots) == set()
    assert sim_cli._run_task(None, (0, 7)) == 7
    assert sim_cli._lost_places(1, slots) == {0}


def test_summary_json_has_its_keys_sorted_at_every_level(tmp_path, monkeypatch, capsys):
    """summary.json is written with sorted keys, as the table's rows are by name: two sweeps
    that found the same things give the same file, whatever each met first, laid out one
    item a line."""
    _planted_runs(monkeypatch, failing=(2,), losses=1)
    assert sim_cli.main(["--seeds", "1..3", "--out", str(tmp_path)]) == 1
    orders = []
    json.loads((tmp_path / "summary.json").read_text(),
               object_pairs_hook=lambda pairs: orders.append([k for k, _ in pairs]) or dict(pairs))
    assert len(orders) == 8  # the file, its summary, the summary's three counts by name, and each run
    assert all(keys == sorted(keys) for keys in orders), orders
    # And one item a line, indented by its depth: for a reader, and for diff between two sweeps.
    text = (tmp_path / "summary.json").read_text()
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True)



def _lost_beside_a_slow_seed_0(args, seed, scenario=None):
    import os
    import signal
    import time

    if seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if seed == 0:
        deadline = time.monotonic() + 20
        while not sim_cli._slots[2 * 2] and time.monotonic() < deadline:  # no replacement worker yet
            time.sleep(0.05)
        time.sleep(1.0)  # the command looks every 0.2 s: it has seen the replacement by now
    return seed


def test_a_lost_seed_ends_the_wait_only_after_the_seeds_before_it(monkeypatch):
    """Seed 1's worker dies while seed 0 still runs in the other: seed 0's result is still
    waited for and kept, and the wait ends at seed 1, the one with no result."""
    import argparse

    monkeypatch.setattr(sim_cli, "run_seed", _lost_beside_a_slow_seed_0)
    got = []
    with pytest.raises(sim_cli.WorkerLost, match="seed 1 has no result"):
        for seed in sim_cli._runs(argparse.Namespace(jobs=2, swarm=True), None, range(3)):
            got.append(seed)
    assert got == [0]


def test_a_swarm_draw_that_cannot_run_is_named_in_one_line_before_any_run(tmp_path, capsys, monkeypatch):
    """The scenario a run gets is checked before it starts, a swarm's draw too: a draw of 3
    brokers under a [nodes.7] profile cannot run (the swarm keeps such brokers since the
    188th review; a draw made so stands for any draw a later change breaks); that is one
    line with exit status 2, as a bad scenario file is, not a traceback from the run."""
    from dataclasses import replace

    from kreplica.sim import swarm

    base = tmp_path / "seven.toml"
    base.write_text('extends = "random-chaos"\nname = "seven"\nbrokers = 7\n\n[nodes.7]\nreorder = true\n')
    draw = swarm.swarm_scenario
    monkeypatch.setattr(swarm, "swarm_scenario", lambda seed, sc: replace(draw(seed, sc), brokers=3))
    assert sim_cli.main(["--swarm", "--scenario", str(base), "--seed", "0", "--until", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kreplica simulate: error: scenario swarm-0: ") and err.count("\n") == 1, err


def test_a_config_key_given_twice_takes_the_last_value(monkeypatch, capsys):
    """As for any option given twice, the last --config of a key is the one the runs use (a
    command line built by appending an override to a saved one), and the options say so."""
    _planted_runs(monkeypatch)
    assert sim_cli.main(["--scenario", "kip101-hw-truncation", "--config", "acks=1", "--config", "acks=all"]) == 0
    options = json.loads(capsys.readouterr().out.splitlines()[1].removeprefix("options: "))
    assert (options["config"]["acks"], options["workload"]["acks"]) == ("all", "all")


class _SeedsMadeAsTheyRun(Sequence):
    """10^11 seeds, as ``--seeds 0..99999999999`` gives, made as they are asked for: asking
    for one far past those running fails the test (all of them made up front would not fit
    in memory)."""

    def __len__(self):
        return 10 ** 11

    def __getitem__(self, i):
        if not isinstance(i, int):
            raise TypeError(i)
        assert i < 100_000, "seeds made far ahead of the runs"
        return i


def test_jobs_make_the_seeds_as_they_run_however_many_there_are(monkeypatch):
    """A range of 10^11 seeds starts at once with --jobs as without: the pool is handed the
    seeds as it takes them, and finding the seed a dead worker held makes none of them."""
    import argparse

    monkeypatch.setattr(sim_cli, "run_seed", _seed_and_pid)
    runs = sim_cli._runs(argparse.Namespace(jobs=2, swarm=True), None, _SeedsMadeAsTheyRun())
    try:
        assert [next(runs)[0] for _ in range(3)] == [0, 1, 2]
    finally:
        runs.close()  # stops the pool, as Ctrl-C does
