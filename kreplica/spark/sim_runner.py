"""The sweep's one door into the simulator: a run's options in, one flat result row out.

Theory of operation (issue 6, "Sweeps").  A sweep task knows a run only as a
scenario name, a seed and a :class:`RunConfig` (the grid's axes: acks,
``min.insync.replicas``, ``unclean.leader.election.enable``,
``replica.truncation.strategy``, replication factor, fault rate, virtual
duration).  :func:`build_scenario` turns those into the simulator's
:class:`~kreplica.sim.scenarios.Scenario` (an axis left at ``None`` keeps the
scenario file's own value), :func:`run` runs it with
:func:`kreplica.sim.world.run` and flattens the result into plain values that
Arrow and Parquet can hold.  A failing run also carries its whole JSON-lines
history (gzip), which is what ``kreplica simulate --replay FILE`` reads back to
reproduce the identical history hash.

This is the only module of ``kreplica.spark`` that imports ``kreplica.sim``.
"""
from __future__ import annotations

import fcntl
import gzip
import math
import os
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass, fields, replace
from typing import Any

from ..config import parse_acks

AXES = ("acks", "min_isr", "unclean", "truncation", "rf", "fault_rate", "until_ms")

# Kafka's names (and a few spellings) for the axes, accepted in grid files.
AXIS_ALIASES = {
    "min.insync.replicas": "min_isr",
    "min_insync_replicas": "min_isr",
    "unclean.leader.election.enable": "unclean",
    "replica.truncation.strategy": "truncation",
    "replication.factor": "rf",
    "replication_factor": "rf",
    "fault-rate": "fault_rate",
    "until": "until_ms",
}

# The scenario config key each config-valued axis overrides (acks: the producers' too,
# as Scenario.with_config sets it).
CONFIG_KEYS = {
    "acks": "acks",
    "min_isr": "min.insync.replicas",
    "unclean": "unclean.leader.election.enable",
    "truncation": "replica.truncation.strategy",
}


def _acks_text(value: Any) -> str:
    acks = parse_acks(value.strip() if isinstance(value, str) else value)
    return "all" if acks == -1 else str(acks)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"unclean: expected true or false, got {value!r}")
    return text == "true"


def _text(value: Any) -> str:
    """A text value without the blanks around it, as the broker config reads it (and
    as a key must name it: ``--truncation "a, b"`` gives `` b``)."""
    return str(value).strip()


def _int(value: Any) -> int:
    """An integer or its text: not a bool, and not a float (2.9 would run as 2)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


def _fault_rate(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number, got {value!r}")
    rate = float(value)
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"fault_rate: expected a finite number >= 0, got {value!r}")
    return rate


_PARSE = {
    "acks": _acks_text,
    "min_isr": _int,
    "unclean": _bool,
    "truncation": _text,
    "rf": _int,
    "fault_rate": _fault_rate,
    "until_ms": _int,
}


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One point of the grid's configuration axes; ``None`` keeps the scenario's value.

    ``fault_rate`` multiplies every rate of the scenario's ``[chaos]`` table (a
    scenario without one gets the simulator's default rates, scaled); 0 turns
    random faults off, leaving the scenario's scripted steps.
    """

    acks: str | None = None
    min_isr: int | None = None
    unclean: bool | None = None
    truncation: str | None = None
    rf: int | None = None
    fault_rate: float | None = None
    until_ms: int | None = None

    @classmethod
    def parse(cls, values: dict[str, Any]) -> "RunConfig":
        """From loosely typed values (a grid file, flags): each checked, named when bad."""
        out, given = {}, {}
        for name, value in values.items():
            axis = AXIS_ALIASES.get(name, name)
            if axis not in _PARSE:
                raise ValueError(f"unknown sweep axis {name!r}; known: {', '.join(AXES)}")
            if axis in given:
                raise ValueError(f"sweep axis {axis} given twice, as {given[axis]!r} and {name!r}")
            given[axis] = name
            try:
                out[axis] = None if value is None else _PARSE[axis](value)
            except ValueError as e:
                raise ValueError(f"sweep axis {name}={value!r}: {e}") from None
        return cls(**out)

    @property
    def key(self) -> str:
        """Canonical text naming this configuration; with scenario and seed, a run's identity."""
        parts = []
        for f in fields(self):
            v = getattr(self, f.name)
            text = "-" if v is None else ("true" if v is True else "false" if v is False else
                                          format(v, "g") if isinstance(v, float) else str(v))
            parts.append(f"{f.name}={text}")
        return ",".join(parts)


@dataclass(frozen=True, slots=True)
class RunSpec:
    scenario: str
    config: RunConfig
    seed: int


def build_scenario(scenario: str, config: RunConfig) -> Any:
    """The simulator's scenario for ``scenario`` with the grid's overrides applied."""
    from ..sim import scenarios
    from ..sim.faults import FaultRates

    sc = scenarios.load(scenario)
    overrides = {CONFIG_KEYS[a]: getattr(config, a) for a in CONFIG_KEYS if getattr(config, a) is not None}
    if overrides:
        sc = sc.with_config(**overrides)  # typed as `kreplica simulate --config` types them
    if config.rf is not None:
        pinned = [t.name for t in sc.topics if t.assignment is not None]
        if pinned:
            raise ValueError(f"scenario {sc.name!r} pins the replicas of {pinned}; it cannot take rf={config.rf}")
        sc = replace(sc, brokers=max(sc.brokers, config.rf),
                     topics=tuple(replace(t, replication_factor=config.rf) for t in sc.topics))
    if config.fault_rate is not None:
        sc = replace(sc, chaos=_scaled(sc.chaos or FaultRates(), config.fault_rate))
    if config.until_ms is not None:
        sc = replace(sc, until_ms=config.until_ms)
    return sc


def _scaled(rates: Any, factor: float) -> Any:
    """``rates`` with each per-minute rate times ``factor`` (the shapes kept); None for 0."""
    from ..sim.faults import PER_MINUTE

    if factor == 0:
        return None
    return replace(rates, **{n: getattr(rates, n) * factor for n in PER_MINUTE})


def effective_config(sc: Any, config: RunConfig) -> dict[str, Any]:
    """The configuration a run really had, axis by axis (the scenario's values filled in)."""
    from ..config import SPEC
    from ..sim.faults import PER_MINUTE

    def conf(key: str) -> Any:
        return sc.config.get(key, SPEC[key].default)

    chaos = sc.chaos
    per_minute = 0.0 if chaos is None else sum(getattr(chaos, n) for n in PER_MINUTE)
    return {
        "acks": _acks_text(sc.workload.acks),
        "min_isr": int(conf("min.insync.replicas")),
        "unclean": _bool(conf("unclean.leader.election.enable")),
        "truncation": str(conf("replica.truncation.strategy")),
        "rf": min(t.replication_factor for t in sc.topics),
        "fault_rate": config.fault_rate if config.fault_rate is not None else float(chaos is not None),
        "faults_per_minute": per_minute,
        "until_ms": int(sc.until_ms),
        "brokers": int(sc.brokers),
    }


SCRATCH_PREFIX = "kreplica-sweep-"
_LOCK = ".in-use"


def scratch_dir(name: str) -> str:
    """This host's directory ``name`` for the brokers' data of a sweep's runs (beside
    where a lone run would keep them: /dev/shm, else the temp dir)."""
    from ..sim.world import default_data_root

    return os.path.join(default_data_root(), name)


def remove_scratch(name: str) -> None:
    shutil.rmtree(scratch_dir(name), ignore_errors=True)


def use_scratch(name: str) -> int:
    """Make this host's scratch directory ``name`` and hold a shared lock in it while the
    returned descriptor is open: the kernel drops it with the process, however it ends."""
    root = scratch_dir(name)
    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, _LOCK), os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def remove_orphaned_scratch(keep: str, min_age_s: float = 60.0) -> list[str]:
    """Remove the sweep scratch directories of this host that no live task uses.

    A sweep whose driver was killed outright cannot remove its own, and Spark may kill a
    task before its run closes its World; the next sweep's tasks on the host remove them.
    ``min_age_s`` spares a directory a task has made but not yet locked.
    """
    from ..sim.world import default_data_root

    removed = []
    base = default_data_root()
    for entry in os.scandir(base):
        if not entry.name.startswith(SCRATCH_PREFIX) or entry.name == keep or not entry.is_dir():
            continue
        try:
            if time.time() - entry.stat().st_mtime < min_age_s:
                continue
            fd = os.open(os.path.join(entry.path, _LOCK), os.O_RDWR)
        except FileNotFoundError:
            fd = -1  # killed before it locked, or already removed
        try:
            if fd >= 0:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        except BlockingIOError:
            continue  # a task of a running sweep holds it: leave it (the finally closes fd)
        finally:
            if fd >= 0:
                os.close(fd)
    return removed


class stopped_by_signals:
    """While a sweep task runs: SIGTERM and SIGHUP (an executor or its Python daemon
    shutting down) raise SystemExit, so the run in flight closes its World and removes
    its data dir; SIGINT is ignored, since a terminal's Ctrl-C reaches every process of
    its group and stopping the tasks is the driver's call.  Outside the main thread
    (where handlers cannot be set) it does nothing."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

    def __enter__(self) -> "stopped_by_signals":
        self.previous: dict[int, Any] = {}
        try:
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, signal.SIG_IGN if sig == signal.SIGINT else _exit)
        except ValueError:
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def run(spec: RunSpec, scenario: Any = None, data_root: str | None = None) -> dict[str, Any]:
    """Run one simulation; one flat row (see :data:`kreplica.spark.sweep.RESULT_SCHEMA`).

    An exception inside the simulator is a finding, not a crash of the sweep: the
    row carries it in ``error`` and counts as failing.  The brokers keep their data
    in a directory under ``data_root`` (default: where a World puts it), removed
    when the run ends.
    """
    from ..sim import world
    from ..sim.report import percentile, writes_per_virtual_s

    wall0 = time.perf_counter()
    sc = scenario if scenario is not None else build_scenario(spec.scenario, spec.config)
    row: dict[str, Any] = {"scenario": spec.scenario, "config_key": spec.config.key, "seed": spec.seed,
                           **effective_config(sc, spec.config)}
    sim = world.World(sc, spec.seed, keep_history=True, data_root=data_root)
    try:
        result = sim.run()
    except Exception as exc:  # noqa: BLE001 - recorded in the row, see docstring
        row.update(_empty_result(), error=f"{type(exc).__name__}: {exc}",
                   history_hash=sim.history.hash, events=len(sim.history),
                   history_gz=_history_gz(sim.history.lines))
        row["wall_ms"] = (time.perf_counter() - wall0) * 1000.0
        return row
    violation = result.violation
    reelect = [float(ms) for ms in result.reelect_ms]
    failing = violation is not None or bool(result.losses)
    row.update(
        history_hash=result.history_hash,
        events=result.events,
        virtual_ms=result.virtual_ms,
        violations={} if violation is None else {violation.invariant.value: 1},
        violations_total=0 if violation is None else 1,
        first_violation=None if violation is None else violation.describe().split("\n")[0],
        lost_acks=len(result.losses),
        lost_by_cause=dict(Counter(loss.cause for loss in result.losses)),
        unclean_elections=result.unclean_elections,
        superseded_reads=len(result.superseded_reads),
        superseded_by_cause=dict(Counter(read.cause for read in result.superseded_reads)),
        acked_writes=result.acked_writes,
        writes_completed=result.writes_completed,
        availability=float(result.availability),
        reelect_ms=reelect,
        # as `kreplica simulate` computes them (linear between ranks, as the report's SQL)
        reelect_p50_ms=percentile(reelect, 50),
        reelect_p99_ms=percentile(reelect, 99),
        # every completed write, as the simulate summary counts them (acks=0/1 runs too)
        throughput=writes_per_virtual_s(result.writes_completed, result.virtual_ms),
        converged=result.converged,
        error=None,
        history_gz=_history_gz(sim.history.lines) if failing else None,
        wall_ms=(time.perf_counter() - wall0) * 1000.0,
    )
    return row


def _empty_result() -> dict[str, Any]:
    return {"virtual_ms": None, "violations": {}, "violations_total": 0, "first_violation": None,
            "lost_acks": 0, "lost_by_cause": {}, "unclean_elections": 0, "superseded_reads": 0,
            "superseded_by_cause": {}, "acked_writes": 0, "writes_completed": 0,
            "availability": None, "reelect_ms": [], "reelect_p50_ms": None, "reelect_p99_ms": None,
            "throughput": None, "converged": False}


def _history_gz(lines: list[str]) -> bytes:
    return gzip.compress("".join(line + "\n" for line in lines).encode(), compresslevel=6, mtime=0)


def history_text(history_gz: bytes) -> str:
    """The JSON-lines history a failing row carries (what ``--replay`` reads)."""
    return gzip.decompress(history_gz).decode()


def replay_command(history_file: str) -> str:
    """The command that replays a recorded run and checks its history hash."""
    return f"kreplica simulate --replay {history_file}"
