"""``kreplica sweep``: a fault sweep on Spark -- scenario x configuration x seeds -- and its report.

The grid comes from a file (``--grid grid.toml`` or ``.yaml``)::

    scenarios = ["kip101-hw-truncation", "random-chaos"]
    seeds = "1..1000"
    [config]
    truncation = ["high-watermark", "leader-epoch"]
    unclean = [false, true]

or from flags (each a comma-separated list of values; an axis not given keeps
the scenario's own value): ``--scenario``, ``--seeds 1..N``, ``--acks``,
``--min-isr``, ``--unclean``, ``--truncation``, ``--rf``, ``--fault-rate``,
``--until``.  Rows go to ``--out DIR`` (Parquet, partitioned by scenario); a
re-run into the same directory runs only what is missing.  ``--master`` takes
``local[N]``, ``spark://HOST:PORT`` or ``yarn`` unchanged.  ``--report`` prints
the per-configuration table and writes ``report.md``, plots and replay files.

Ctrl-C or SIGTERM stops the sweep as ``kreplica simulate`` stops: it says in one
line how many runs finished (their rows are kept; the same command resumes) and
exits 130.  Spark's own failures are one line too, exit 1; bad usage exits 2.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from ..cli import at_least, key_value

HELP = "run a fault sweep (scenario x configuration x seeds) on Spark and report on it"

_AXIS_FLAGS = {
    "acks": "acks: 0, 1, all",
    "min_isr": "min.insync.replicas",
    "unclean": "unclean.leader.election.enable: true, false",
    "truncation": "replica.truncation.strategy: high-watermark, leader-epoch",
    "rf": "replication factor",
    "fault_rate": "multiplier of the scenario's random fault rates (0: scripted faults only)",
    "until_ms": "virtual run length, ms",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("grid")
    src.add_argument("--grid", metavar="FILE", help="grid file (.toml, .yaml)")
    src.add_argument("--scenario", action="append", metavar="NAME[,NAME]", help="scenario(s); repeatable")
    src.add_argument("--seeds", default="1", metavar="N|FIRST..LAST", help="seed range (default 1)")
    for axis, text in _AXIS_FLAGS.items():
        flag = "--until" if axis == "until_ms" else "--" + axis.replace("_", "-")
        src.add_argument(flag, dest=axis, metavar="V[,V]", help=text)
    run = parser.add_argument_group("run")
    run.add_argument("--out", required=True, metavar="DIR", help="output directory (Parquet), any Hadoop path")
    run.add_argument("--master", default="local[2]",
                     help="Spark master (default local[2]); with a cluster master, ship kreplica to the "
                          "executors through --conf, e.g. spark.archives=kreplica-venv.tar.gz#env and "
                          "spark.pyspark.python=./env/bin/python")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                     help="a Spark option for the session; repeatable")
    run.add_argument("--runs-per-task", type=at_least(1), default=8, help="runs per Spark task (default 8)")
    run.add_argument("--tasks-per-chunk", type=at_least(1), default=None,
                     help="tasks per Spark job, the unit a killed sweep loses (default 4 per core)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    rep = parser.add_argument_group("report")
    rep.add_argument("--report", action="store_true", help="print the table and write the report")
    rep.add_argument("--report-only", action="store_true", help="report on --out without running")
    rep.add_argument("--report-dir", metavar="DIR",
                     help="where report.md, plots and replays go (default OUT/_report, or "
                          "./kreplica-sweep-report when OUT is not a local path)")
    rep.add_argument("--max-failing", type=at_least(0), default=200, help="failing runs listed (default 200)")


def grid_from_args(args: argparse.Namespace):
    """The :class:`~kreplica.spark.sweep.Grid` the flags or the grid file describe."""
    from ..spark.sweep import Grid

    axes = {a: getattr(args, a).split(",") for a in _AXIS_FLAGS if getattr(args, a) is not None}
    scenarios = [s for arg in args.scenario or () for s in arg.split(",") if s]
    if args.grid:
        if scenarios or axes:
            raise ValueError("give the grid as --grid FILE or as flags, not both")
        return Grid.load(args.grid)
    if not scenarios:
        raise ValueError("name a --scenario (or give --grid FILE)")
    return Grid.from_axes(scenarios, axes, args.seeds)


def _local_path(out: str) -> Path | None:
    """``--out`` as a local path (given as one, or as a ``file:`` URI), or None for
    another file system."""
    if "://" in out and not out.startswith("file:"):
        return None
    return Path(out.removeprefix("file://").removeprefix("file:"))


def _out_problem(out: str) -> str | None:
    """Why a local ``--out`` cannot hold the sweep's directory, or None."""
    path = _local_path(out)
    if path is None:
        return None  # another file system: Spark reports it
    for p in (path, *path.parents):
        if p.exists():
            return None if p.is_dir() else f"{p} is a file, not a directory"
    return None


class _Interrupts:
    """Ctrl-C and SIGTERM around Spark: cancel the jobs and let them fail.

    PySpark's own Ctrl-C handler calls the JVM from inside the signal handler, while
    the main thread waits in a call to the same gateway: the reentrant call spills
    hundreds of lines of tracebacks.  Here the handler only starts a thread that
    silences Spark's log (cancelled jobs and killed workers log stack traces) and
    cancels every job, again each half second until the main thread is out of
    Spark, so a job started just after the signal is cancelled too.  Installed
    before the session starts, a signal is only noted until the session is
    :meth:`attach`-ed (a JVM still starting cannot be stopped cleanly).  A second
    signal stops at once.
    """

    def __init__(self) -> None:
        self.sc: Any = None
        self.requested = False
        self._over = threading.Event()
        self._previous: dict[int, Any] = {}

    def install(self) -> "_Interrupts":
        """Take SIGINT and SIGTERM (again after a SparkContext started on this thread: it
        sets its own SIGINT handler)."""
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous = signal.signal(sig, self._handle)
                self._previous.setdefault(sig, previous)
        except ValueError:  # not the main thread: leave signals to whoever owns them
            pass
        return self

    def attach(self, sc: Any) -> None:
        self.install()
        self.sc = sc
        if self.requested:
            self._start()

    def restore(self) -> None:
        self._over.set()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.sc is not None:
            self._start()

    def _start(self) -> None:
        threading.Thread(target=self._cancel, name="kreplica-sweep-cancel", daemon=True).start()

    def _cancel(self) -> None:
        try:
            self.sc.setLogLevel("OFF")
            while not self._over.is_set():
                self.sc.cancelAllJobs()
                self._over.wait(0.5)
        except Exception:  # noqa: BLE001 - a gateway already down has nothing left to cancel
            pass


def _spark_error(exc: BaseException) -> str | None:
    """One line for a failure inside Spark (a Py4J or PySpark error), else None: the
    Java exception's first line, or for an error in a Python worker its last line."""
    text = None
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            text = str(java.toString())
        except Exception:  # noqa: BLE001 - the gateway is gone; Python's text says enough
            pass
    if text is None:
        if not type(exc).__module__.startswith(("pyspark.", "py4j.")):
            return None
        text = f"{type(exc).__name__}: {str(exc).strip()}"
    if "Traceback (most recent call last)" in text:
        python = [line for line in text.split("\n\tat ")[0].splitlines() if line.strip()]
        return f"in a Python worker: {python[-1].strip()}"
    return (text.strip().splitlines() or [""])[0]


def execute(args: argparse.Namespace) -> int:
    import warnings

    from rich.console import Console
    from rich.markup import escape

    from ..errors import KReplicaError

    console = Console(stderr=True)

    def refuse(message: str) -> int:
        console.print(f"[red]sweep: {escape(message)}", soft_wrap=True)
        return 2

    try:
        conf = dict(key_value(item) for item in args.conf)
    except ValueError as exc:
        return refuse(f"--conf {exc}")
    grid = None
    if not args.report_only:
        try:
            grid = grid_from_args(args)
            grid.validate()
        except (ValueError, OSError, KReplicaError) as exc:  # KReplicaError: InvalidConfig (acks)
            return refuse(str(exc))
        problem = _out_problem(args.out)
        if problem is not None:
            return refuse(f"--out {args.out}: {problem}")
    # pyspark 4 warns about pandas 3 on every Arrow UDF; the sweep uses Arrow only.
    warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*")
    interrupts = _Interrupts().install()
    try:
        return _run(args, grid, conf, console, interrupts, refuse)
    finally:
        interrupts.restore()


def _run(args: argparse.Namespace, grid: Any, conf: dict[str, str], console: Any, interrupts: _Interrupts,
         refuse: Any) -> int:
    from rich.markup import escape

    from ..spark.session import local_session
    from ..spark.sim_runner import remove_scratch
    from ..spark.sweep import new_scratch_name

    try:
        spark = _start_session(lambda: local_session(args.master, app_name="kreplica-sweep", conf=conf))
    except KeyboardInterrupt:  # a second Ctrl-C while the JVM started
        console.print("sweep: interrupted while Spark started; nothing ran")
        return 130
    except Exception as exc:  # noqa: BLE001 - a Spark failure is one line; anything else raises
        message = _spark_error(exc)
        if message is None:
            raise
        return refuse(f"Spark did not start (check --master and --conf): {message}")
    scratch = new_scratch_name()
    finished: list[Any] = []  # the stats after each chunk committed
    try:
        interrupts.attach(spark.sparkContext)
        if interrupts.requested:
            console.print("sweep: interrupted while Spark started; nothing ran")
            return 130
        return _sweep_and_report(spark, args, grid, console, scratch, finished)
    except BaseException as exc:  # noqa: BLE001 - sorted below: interrupt, Spark failure, bug
        if interrupts.requested or isinstance(exc, KeyboardInterrupt):
            if grid is None:
                console.print("report: interrupted")
                return 130
            st = finished[-1] if finished else None
            todo = f" of {st.total - st.already_done}" if st else ""
            console.print(f"sweep: interrupted after {st.executed if st else 0}{todo} runs, kept in "
                          f"{args.out} (the same command runs the rest)", soft_wrap=True)
            return 130
        message = _spark_error(exc)
        if message is None:
            raise
        console.print(f"[red]sweep: Spark failed: {escape(message)}", soft_wrap=True)
        return 1
    finally:
        interrupts.restore()  # before stopping: Spark is no longer ours to cancel
        try:
            spark.stop()
        finally:
            # Tasks Spark killed left their runs' data; stopping ended the last of them.
            remove_scratch(scratch)


def _start_session(start: Any) -> Any:
    """``start()`` on another thread, waited for here: PySpark sets its own Ctrl-C handler
    (the one :class:`_Interrupts` replaces) only when a context starts on the main thread."""
    made: dict[str, Any] = {}

    def run() -> None:
        try:
            made["spark"] = start()
        except BaseException as exc:  # noqa: BLE001 - raised again on the main thread
            made["error"] = exc

    thread = threading.Thread(target=run, name="kreplica-sweep-start", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)  # a timed wait: signal handlers run in between
    if "error" in made:
        raise made["error"]
    return made["spark"]


def _sweep_and_report(spark: Any, args: argparse.Namespace, grid: Any, console: Any, scratch: str,
                      finished: list[Any]) -> int:
    from rich.console import Console

    from ..spark.sweep import read_results, run_sweep

    if grid is not None:
        console.print(f"sweep: {len(grid)} runs = {len(grid.scenarios)} scenarios x "
                      f"{len(grid.configs)} configurations x {grid.seed_count} seeds "
                      f"({grid.seeds[0]}..{grid.seeds[1]}) on {args.master} into {args.out}")
        stats = run_sweep(spark, grid, args.out, runs_per_task=args.runs_per_task,
                          tasks_per_chunk=args.tasks_per_chunk, progress=not args.no_progress,
                          console=console, scratch=scratch,
                          on_chunk=lambda done, total, st: finished.append(st))
        console.print(f"sweep: ran {stats.executed}, skipped {stats.already_done} already in "
                      f"{args.out}, {stats.chunks} jobs, {stats.wall_s:.1f} s "
                      f"({stats.runs_per_second:.2f} runs/s)")
    if args.report or args.report_only:
        from ..spark.report import build_report
        from ..spark.sweep import done_runs

        if done_runs(spark, args.out) is None:
            console.print(f"[red]report: no sweep rows in {args.out}")
            return 2

        local = _local_path(args.out)
        report_dir = args.report_dir or (str(local / "_report") if local is not None else "kreplica-sweep-report")
        # A pipe gets the whole table, not rich's 80-column fallback.
        out_console = Console() if sys.stdout.isatty() else Console(width=200)
        report = build_report(spark, read_results(spark, args.out), report_dir,
                              console=out_console, max_failing=args.max_failing, source=args.out)
        console.print(f"report: {report.markdown} ({report.failing_total} failing runs)")
    return 0

