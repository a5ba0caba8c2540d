"""Run the deterministic simulator: scenarios, seed ranges, swarm mode, replay.

Examples::

    kreplica simulate --scenario kip101-hw-truncation --seed 7
    kreplica simulate --scenario random-chaos --seeds 1..1000 --config replica.truncation.strategy=leader-epoch
    kreplica simulate --swarm --seeds 1..200 --out runs/
    kreplica simulate --replay runs/kip101-hw-truncation-7.jsonl

The command prints the scenario, seeds and options first.  A single seed
(``--seed N``) prints its history hash before the summary table; for several seeds, each run's hash
is in ``summary.json`` under ``--out DIR``.  The same seed and options give the
same hash.  A violation prints the last events touching its partition, and the
command exits non-zero.  ``--replay`` exits as the recorded run did (1 with its
violation, printed again unless ``--traces 0``; 0 without), or 3 when the replayed
history differs from the recorded one; with ``--out DIR`` (and ``--history``,
``--timeline``) it writes the replayed run's files there as ``<scenario>-<seed>-replay``.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from .cli import argument, at_least, integer, key_value

HELP = "deterministic simulation with fault injection and an invariant checker"
#: ``--replay`` exit status when the replayed history is not the recorded one; otherwise a
#: replay exits as the run did: 1 with a violation (its trace printed), 0 without.
REPLAY_DIFFERS = 3
DEFAULT_SCENARIO = "random-chaos"


def parse_seeds(text: str) -> Sequence[int]:
    """``7``, ``1..1000`` (inclusive) or ``1,5,9``; ValueError for anything else.  A range
    stays a ``range``: seeds are made as they run, however many there are."""
    try:
        if ".." in text:
            a, b = text.split("..", 1)
            seeds: Sequence[int] = range(int(a), int(b) + 1)
        else:
            seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"seeds {text!r}: expected N, A..B or a,b,c (integers)") from None
    if not isinstance(seeds, range) and len(set(seeds)) != len(seeds):
        # It would run twice, its files written twice and its row counted twice.
        twice = next(s for i, s in enumerate(seeds) if s in seeds[:i])
        raise ValueError(f"seeds {text!r}: seed {twice} given twice")
    try:
        count = len(seeds)
    except OverflowError:  # a range of 2**63 seeds or more
        raise ValueError(f"seeds {text!r}: too many seeds") from None
    if not count:
        raise ValueError(f"seeds {text!r}: no seed in it")
    return seeds


def _seed_text(text: str) -> str:
    parse_seeds(text)  # checked here, kept as written for the run header
    return text


def _config_item(text: str) -> str:
    key_value(text)  # checked here, kept as written
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", help=f"scenario name or TOML path (default {DEFAULT_SCENARIO})")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seed", type=integer, help="one seed (default 0)")
    which.add_argument("--seeds", type=argument(_seed_text), help="seeds: N, A..B or a,b,c")
    p.add_argument("--swarm", action="store_true",
                   help="randomize cluster, config and fault rates per seed, over --scenario's config and workload")
    p.add_argument("--until", type=at_least(0), metavar="MS", help="virtual run time before the liveness phase")
    p.add_argument("--config", action="append", default=[], type=argument(_config_item), metavar="KEY=VALUE",
                   help="override a Kafka config key")
    p.add_argument("--out", type=Path, metavar="DIR", help="write histories, timelines and a summary here")
    p.add_argument("--history", action="store_true",
                   help="with --out: JSON-lines history of every run (failing runs always get one)")
    p.add_argument("--timeline", action="store_true", help="with --out: a timeline PNG of every run")
    p.add_argument("--timeline-partitions", type=at_least(1), default=4, metavar="N",
                   help="partitions drawn in each timeline (default 4)")
    p.add_argument("--replay", type=Path, metavar="FILE",
                   help="re-run a recorded history with its recorded scenario, seed and options, and compare hashes "
                        "(with --out: the replay's files, named <scenario>-<seed>-replay)")
    p.add_argument("--list", action="store_true", help="list the scenarios")
    p.add_argument("--traces", type=at_least(0), default=3,
                   help="print the traces of this many failing runs (default 3; 0 for none, a replay's too)")
    p.add_argument("--jobs", type=at_least(1), default=1,
                   help="run seeds in this many processes (a replay is one run, in this one)")
    p.add_argument("--keep-data", action="store_true",
                   help="keep each run's broker log dirs (printed) for kreplica dump-log")


def _base_name(args: argparse.Namespace) -> str:
    """The scenario named, or the default when none is: one given as "" stays given (the
    loader refuses it), as --replay takes it for given."""
    return DEFAULT_SCENARIO if args.scenario is None else args.scenario


def _scenario(args: argparse.Namespace, seed: int) -> Any:
    from .sim import scenarios
    from .sim.swarm import swarm_scenario

    base = scenarios.load(_base_name(args))
    sc = swarm_scenario(seed, base) if args.swarm else base
    if args.until is not None:
        sc = replace(sc, until_ms=args.until)
    if args.config:
        sc = sc.with_config(**_overrides(args))  # acks included: the producers ask for it
    return sc


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    """``--config KEY=VALUE`` items as a dict of text (typed by ``Scenario.with_config``)."""
    return dict(key_value(item) for item in args.config)


def _options(args: argparse.Namespace, first: Any) -> dict[str, Any]:
    """What the run header prints: the whole scenario, or for a swarm (one scenario per
    seed, drawn from it) the overrides laid over every seed's draw."""
    if not args.swarm:
        return first.to_dict()
    options: dict[str, Any] = {"swarm": True, "base": _base_name(args)}
    if args.until is not None:
        options["until_ms"] = args.until
    if args.config:
        options["config"] = _overrides(args)
    return options


def _replay(args: argparse.Namespace, path: Path) -> int:
    """Re-run ``path``'s recorded run; with ``--out``, its history (``--history``, or when
    it fails) and timeline (``--timeline``) are written there as ``<scenario>-<seed>-replay``,
    beside the recording rather than over it."""
    from .sim.history import hash_lines, read_jsonl, run_header
    from .sim.scenarios import from_dict

    lines = [line for line in path.read_text().splitlines() if line.strip()]
    header = run_header(read_jsonl(path)[:1])
    recorded = hash_lines(lines)
    seed, scenario = header["seed"], from_dict(header["scenario"])
    # As a run does: the seed and options first, before the (perhaps long) re-run.
    print(f"seed {seed} scenario {scenario.name}")
    print(f"options: {json.dumps(header['scenario'], sort_keys=True)}")
    result = run_seed(args, seed, scenario, suffix="-replay")
    print(f"recorded history hash {recorded}")
    print(f"replayed history hash {result.history_hash}")
    same = recorded == result.history_hash
    print("identical" if same else "DIFFERENT")
    if result.violation is not None and args.traces:
        print(result.violation.describe())
    if not same:
        return REPLAY_DIFFERS
    return 1 if result.violation is not None else 0


def run_seed(args: argparse.Namespace, seed: int, scenario: Any = None, suffix: str = "") -> Any:
    """One seed, with its outputs written (``<scenario>-<seed><suffix>.jsonl``, ``.png``);
    the result comes back without its samples."""
    from .sim.report import timeline_png
    from .sim.world import World

    sc = scenario if scenario is not None else _scenario(args, seed)
    world = World(sc, seed, keep_history=bool(args.out), record_samples=bool(args.out and args.timeline),
                  keep_data=getattr(args, "keep_data", False))
    r = world.run()
    if world.keep_data:
        print(f"seed {seed}: data kept in {world.data_dir}")
    if args.out:
        # Named by appending, not with_suffix: a dot in the scenario's name (shutdown.v2) is
        # the name's, and with_suffix wrote every seed over one shutdown.jsonl.
        stem = f"{sc.name}-{seed}{suffix}"
        if args.history or r.violation is not None:  # a failing seed is always kept for --replay
            world.history.write_jsonl(args.out / f"{stem}.jsonl")
        if args.timeline:
            timeline_png(r, args.out / f"{stem}.png", getattr(args, "timeline_partitions", 4))
    r.samples = []
    return r


def _runs(args: argparse.Namespace, first: Any, seeds: Sequence[int]) -> Any:
    """Results in seed order, from this process or a pool (``--jobs``)."""
    shared = None if args.swarm else first
    if args.jobs <= 1:
        for seed in seeds:
            yield run_seed(args, seed, shared)
        return
    import multiprocessing
    from functools import partial

    context = multiprocessing.get_context("fork")
    # Each worker counts itself in as it starts and notes, in its slot, its pid and the place
    # (in run order) of the seed it runs: a seed itself may be any integer, -1 (the slots'
    # "none yet") or wider than a slot, where a place runs from 0. The pool replaces a worker
    # that dies (the OOM killer's SIGKILL, a crash in native code) but loses the seed it was
    # running, and imap would wait for that seed's result for good: a count above --jobs
    # means a worker died; the seeds before the one it held are still waited for (other
    # workers finish them), then the wait ends there.
    started = context.Value("i", 0)
    slots = context.Array("q", 2 * _SLOTS_PER_JOB * args.jobs, lock=False)
    pool = context.Pool(args.jobs, initializer=_worker_start, initargs=(started, slots))
    try:
        results = pool.imap(partial(_run_task, args, scenario=shared), enumerate(seeds))
        done = 0
        while True:
            try:
                r = results.next(timeout=0.2)
            except StopIteration:
                break
            except multiprocessing.TimeoutError:
                if started.value > len(slots) // 2:  # more replacements than slots: which seed is unknown
                    raise WorkerLost("workers died (killed by a signal or crashed) while seeds were running; "
                                     "the seeds they held have no result") from None
                if (started.value > args.jobs and done < len(seeds)
                        and done in _lost_places(started.value, slots)):
                    # The next seed in order is one a dead worker held: its result never comes.
                    # (A worker that died idle held none: the wait goes on.)  By its place,
                    # not through a table of every seed: a range is not made.
                    raise WorkerLost(f"a worker process died (killed by a signal or crashed) while seeds "
                                     f"were running; seed {seeds[done]} has no result") from None
                continue
            done += 1
            yield r
        pool.close()  # done: the workers finish and leave on their own
    except BaseException:  # Ctrl-C, SIGTERM or an error in this process, or the caller stopped
        _terminate(pool)
        raise
    finally:
        pool.join()


# How long a pool worker gets to leave after the pool's SIGTERM before it is killed.
TERMINATE_GRACE_S = 10.0


def _terminate(pool: Any) -> None:
    """``pool.terminate()``, bounded.  A run in flight takes the SIGTERM as SystemExit and
    removes its data dir; but a worker stuck where the signal's handler never runs (a
    lock it inherited, held, from a thread of the parent at fork: seen hanging the tests
    under load) would keep terminate() joining it for good.  Whatever is still alive after
    TERMINATE_GRACE_S is killed outright (its data dir is then left behind)."""
    import threading

    def kill_the_rest() -> None:
        for p in list(pool._pool):  # the pool's own list: replacements included
            if p.exitcode is None:
                p.kill()

    timer = threading.Timer(TERMINATE_GRACE_S, kill_the_rest)
    timer.daemon = True
    timer.start()
    pool.terminate()
    # Returned: every worker was joined.  A stop interrupted (a second Ctrl-C) keeps the
    # timer, so a worker deaf to SIGTERM is still killed instead of holding the final join.
    timer.cancel()


# A worker slot per worker start: --jobs at first, one more for each worker the pool replaces.
_SLOTS_PER_JOB = 4


def _lost_places(workers: int, slots: Any) -> set[int]:
    """The places (in run order) of the seeds the workers that are gone were running (a
    slot's place is -1 before its first)."""
    lost = set()
    for i in range(min(workers, len(slots) // 2)):
        pid, place = slots[2 * i], slots[2 * i + 1]
        if pid and place >= 0 and not _alive(pid):
            lost.add(place)
    return lost


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WorkerLost(Exception):
    """A pool worker died without an answer; the seeds that finished are kept."""


# In a pool worker: a seed is running (SIGTERM must then let it clean up); SIGTERM came.
_running = False
_terminated = False


def _worker_start(started: Any, slots: Any = None) -> None:
    global _slot, _slots
    with started.get_lock():
        _slot = started.value
        started.value += 1
    if slots is not None and 2 * _slot + 1 < len(slots):
        _slots = slots
        slots[2 * _slot], slots[2 * _slot + 1] = os.getpid(), -1
    _worker_signals()


# In a pool worker: its slot in the parent's table (pid, place of the seed it runs), if it has one.
_slot = -1
_slots: Any = None


def _run_task(args: argparse.Namespace, task: tuple[int, int], scenario: Any = None) -> Any:
    """A pool's task: ``(place, seed)``, the place being the seed's index in run order."""
    place, seed = task
    return _run_in_worker(args, seed, scenario, place)


def _run_in_worker(args: argparse.Namespace, seed: int, scenario: Any = None, place: int = -1) -> Any:
    global _running
    _running = True
    if _slots is not None:
        _slots[2 * _slot + 1] = place
    try:
        return run_seed(args, seed, scenario)
    except SystemExit as e:  # the pool's terminate(), after World.run removed its data dir
        os._exit(e.code if isinstance(e.code, int) else 1)
    finally:
        _running = False
        if _terminated:
            # The SystemExit was lost: raised inside a finalizer (printed, then dropped) or
            # replaced by an error from a clean-up.  Going on to the next task would block
            # for good on the queue lock the terminating pool holds (CI saw the hang).
            os._exit(128 + signal.SIGTERM)


def _worker_signals() -> None:
    """A pool worker leaves Ctrl-C to the parent (which stops the pool).  The pool's
    terminate() (SIGTERM) ends a worker at once when it is idle; a run in flight gets it
    as SystemExit, so it still removes its data dir on the way out (World.run's
    ``finally``), and the worker then leaves without the pool's exit handlers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    global _terminated
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the clean-up short
    _terminated = True
    if not _running:
        os._exit(128 + signum)
    raise SystemExit(128 + signum)


# SIGTERM or Ctrl-C came while seeds ran in this process.  Its KeyboardInterrupt can be
# lost: raised inside a finalizer (a log's DirLock.__del__, say), it is printed and
# dropped, and the SIGTERM handler ignores any further SIGTERM.  The seeds' loop checks
# this after each result.
_interrupt_requested = False


def _stop_seeds_on_signals() -> tuple[Any, Any] | None:
    """While seeds run, SIGTERM (``timeout``, a job scheduler) stops them as Ctrl-C does:
    the run in flight removes its data dir and the summary covers what finished.  Ctrl-C
    is noted too, so that one dropped in a finalizer still stops the seeds.  Returns the
    (SIGTERM, SIGINT) handlers it replaced, each None where there is none to put back (a
    handler set outside Python, SIGINT left alone), or None off the main thread, where
    none can be set."""
    global _interrupt_requested
    _interrupt_requested = False

    def interrupt(signum: int, frame: Any) -> None:
        global _interrupt_requested
        if signum == signal.SIGTERM:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the clean-up must not be cut short
        _interrupt_requested = True
        raise KeyboardInterrupt

    try:
        previous_term = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:
        return None
    # Only where Ctrl-C raises KeyboardInterrupt already (an embedder may have its own).
    previous_int = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous_int = signal.signal(signal.SIGINT, interrupt)
    return previous_term, previous_int


def _run_options_given(args: argparse.Namespace) -> list[str]:
    """The options that shape a run, as given; ``--replay`` takes them from the history."""
    used = {"--scenario": args.scenario is not None, "--seed": args.seed is not None,
            "--seeds": args.seeds is not None, "--swarm": args.swarm,
            "--until": args.until is not None, "--config": bool(args.config)}
    return [flag for flag, given in used.items() if given]


def _error(message: str) -> int:
    print(f"kreplica simulate: error: {message}", file=sys.stderr)
    return 2


def _made_out(args: argparse.Namespace) -> bool:
    """``--out DIR`` made (with its parents) where given; False, said in one line, where it
    cannot be (under a file, say), for a run or a replay alike."""
    if args.out:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            _error(f"--out {args.out}: {e}")
            return False
    return True


def execute(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .sim import scenarios
    from .sim.report import Summary

    console = Console()
    if args.list:
        for name in scenarios.names():
            console.print(f"[bold]{name}[/bold]: {' '.join(scenarios.load(name).description.split())}")
        return 0
    # Bad input -- an unknown scenario, a script naming a missing broker, a bad config key,
    # an unreadable history -- is reported in one line with exit status 2, before any run.
    if (args.history or args.timeline) and not args.out:
        return _error(f"{'--history' if args.history else '--timeline'} needs --out DIR (it writes there)")
    if args.replay is not None:
        given = _run_options_given(args)
        if given:
            return _error(f"--replay re-runs the recorded scenario, seed and options: drop {', '.join(given)}")
        if not _made_out(args):
            return 2
        try:
            return _replay(args, args.replay)
        except (OSError, ValueError, KeyError, TypeError) as e:
            return _error(f"cannot replay {args.replay}: {e!r}" if isinstance(e, KeyError)
                          else f"cannot replay {args.replay}: {e}")
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed if args.seed is not None else 0]
    try:
        first = _scenario(args, seeds[0]).validate()
    except (OSError, ValueError) as e:
        return _error(str(e))
    if args.out and not args.swarm and ("/" in first.name or os.sep in first.name):
        # Its files would go to a directory that is not there (a traceback after the run).
        return _error(f"scenario {first.name!r}: with --out its name names the run's files, and cannot hold '/'")
    label = "swarm" if args.swarm else first.name
    console.print(f"kreplica simulate: {label}, seeds {args.seeds or seeds[0]}")
    # soft_wrap: a line longer than the console (80 columns when not a terminal) stays one
    # line, whole, for whoever greps a log for a hash, the options or the progress.
    console.print(f"options: {json.dumps(_options(args, first), sort_keys=True)}", soft_wrap=True)
    if not _made_out(args):
        return 2
    summary = Summary()
    traces = 0
    results = []
    # Output to a file or pipe (CI, nohup) gets a plain line every 5% instead of a bar.
    plain = None if console.is_terminal or len(seeds) == 1 else PlainProgress(len(seeds), console)
    interrupted = lost = False
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=len(seeds) == 1, disable=plain is not None) as progress:
        task = progress.add_task(label, total=len(seeds))
        previous = _stop_seeds_on_signals()
        try:
            for r in _runs(args, first, seeds):
                summary.add(r)
                results.append({"seed": r.seed, "hash": r.history_hash, "ok": r.ok,
                                "violation": r.violation.invariant.value if r.violation else None,
                                "losses": len(r.losses)})
                if len(seeds) == 1:
                    console.print(f"seed {r.seed}: history hash {r.history_hash} ({r.events} events)",
                                  soft_wrap=True)
                if r.violation is not None and traces < args.traces:
                    traces += 1
                    progress.console.print(f"[red]seed {r.seed}[/red]")
                    # One event per line, as recorded, for grep and jq: no wrapping, no markup.
                    progress.console.print(r.violation.describe(), soft_wrap=True, markup=False, highlight=False)
                progress.advance(task)
                if plain is not None:
                    plain.advance(summary)
                if _interrupt_requested:  # its KeyboardInterrupt was dropped (CI saw every seed run on)
                    raise KeyboardInterrupt
        except KeyboardInterrupt:  # keep what finished: the summary covers the seeds that ran
            interrupted = True
        except WorkerLost as e:  # the same, and say why
            interrupted = lost = True
            progress.console.print(f"[red]error:[/red] {e}")
        finally:
            for signum, handler in zip((signal.SIGTERM, signal.SIGINT), previous or ()):
                if handler is not None:
                    signal.signal(signum, handler)
    stopped = "a worker died" if lost else "interrupted"
    done = f"{summary.runs} of {len(seeds)} seed(s), {stopped}" if interrupted else f"{len(seeds)} seed(s)"
    console.print(summary.table(f"{label}: {done}"))
    if args.out:
        (args.out / "summary.json").write_text(json.dumps(
            {"summary": summary.to_dict(), "runs": results, "interrupted": interrupted}, indent=1, sort_keys=True))
    if interrupted:
        return 1 if lost else 130
    return 1 if summary.violations else 0


class PlainProgress:
    """Progress as plain lines, for output that is not a terminal: one line each time
    another 5% of the seeds is done (at most one a second), with findings so far and
    the time left at the rate so far."""

    def __init__(self, total: int, console: Any, clock: Any = time.monotonic) -> None:
        self.total, self.console, self.clock = total, console, clock
        self.started = self.last = clock()
        self.next_at = self._step()

    def _step(self) -> int:
        return max(1, -(-self.total // 20))

    def advance(self, summary: Any) -> None:
        done = summary.runs
        now = self.clock()
        if done < self.next_at or (done < self.total and now - self.last < 1.0):
            return
        self.last = now
        self.next_at = (done // self._step() + 1) * self._step()
        elapsed = now - self.started
        left = elapsed / done * (self.total - done)
        self.console.print(
            f"progress: {done}/{self.total} seeds ({done / self.total:.0%}), "
            f"{sum(summary.violations.values())} with a violation, "
            f"{_duration(elapsed)} elapsed" + (f", about {_duration(left)} left" if done < self.total else ""),
            highlight=False, soft_wrap=True)


def _duration(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kreplica simulate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return execute(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
