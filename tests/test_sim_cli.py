"""The simulate command: bad input answered in one line with exit status 2, plain
progress lines when the output is not a terminal, and an interrupted sweep that keeps
the seeds that finished."""
from __future__ import annotations

import json

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
    (["--config", "acks"], "expected KEY=VALUE"),
    (["--seed", "1", "--seeds", "2"], "argument --seeds: not allowed with argument --seed"),
    (["--seeds", "1..100000000000000000000000000"], "too many seeds"),
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
    assert json.loads(options[len("options: "):])["name"] == "seed003-controlled-shutdown"
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
    text = " ".join(capsys.readouterr().out.split())
    assert "A single seed (``--seed N``) prints its history hash before the summary table" in text
    assert "each run's hash is in ``summary.json`` under ``--out DIR``" in text
    assert "Every run prints its seed and options first and its history hash last" not in text


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


def test_a_worker_whose_sigterm_was_swallowed_mid_run_still_leaves(tmp_path):
    """The pool's terminate() sends SIGTERM once and then waits for each worker, holding
    the task queue's lock. A SystemExit raised where Python drops it (inside a
    finalizer) let the run finish and the worker go for the next task, blocked on that
    lock for good: Ctrl-C with --jobs hung (seen once in CI). The worker now leaves
    after the run, whatever became of the SystemExit."""
    import subprocess
    import sys

    code = """
import os, signal, sys
from kreplica import sim_cli

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # handled here: the SystemExit is dropped
        for _ in range(1000):
            pass

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
