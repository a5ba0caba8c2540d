"""Fault sweeps on Spark: scenario x configuration x seed, one simulation per row (issue 6).

Theory of operation.  A :class:`Grid` is small data: a few scenario names, the
configuration points (the product of the axes' values) and a seed range.  The
runs it names -- possibly millions -- never exist in the driver: run ``i`` is
decoded from ``spark.range``'s ``id`` by column arithmetic in the JVM
(seed-major, so every task gets a mix of scenarios and configurations), and
each task runs its runs through :mod:`kreplica.spark.sim_runner` with kreplica
imported from the executors' environment.  That must be an installed package
(the same venv in local mode; ``pip install`` on a cluster's nodes, or a packed
environment passed with ``--archives``): kreplica's native log core is an
extension module, and Python cannot import those from an ``addPyFile`` zip.

Rows are appended as Parquet partitioned by ``scenario``, one Spark job per
*chunk* of the index range, so a killed sweep loses at most the chunks in
flight: Spark's commit protocol publishes a chunk's files only when its job
commits.  A re-run into the same directory reads the ``(scenario, config_key,
seed)`` triples already there and runs only the others (a left anti join, on
the executors).  The output directory has one writer at a time; the staging
directory a killed writer leaves behind is removed first, or its committed
task files would be published by the next job and duplicate rows.
"""
from __future__ import annotations

import itertools
import os
import re
import time
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from .sim_runner import AXES, AXIS_ALIASES, RunConfig, RunSpec, build_scenario

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KEY_COLUMNS = ("scenario", "config_key", "seed")

# One row per run: the key, the full configuration, then what the run found.
RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("scenario", "string"), ("config_key", "string"), ("seed", "long"),
    ("acks", "string"), ("min_isr", "int"), ("unclean", "boolean"), ("truncation", "string"),
    ("rf", "int"), ("fault_rate", "double"), ("faults_per_minute", "double"), ("until_ms", "long"),
    ("brokers", "int"),
    ("history_hash", "string"), ("events", "long"), ("virtual_ms", "long"),
    ("violations", "map<string,long>"), ("violations_total", "long"), ("first_violation", "string"),
    ("lost_acks", "long"), ("lost_by_cause", "map<string,long>"), ("unclean_elections", "long"),
    ("superseded_reads", "long"), ("superseded_by_cause", "map<string,long>"),
    ("acked_writes", "long"), ("writes_completed", "long"), ("availability", "double"),
    ("reelect_ms", "array<double>"),
    ("reelect_p50_ms", "double"), ("reelect_p99_ms", "double"), ("throughput", "double"),
    ("converged", "boolean"), ("error", "string"), ("history_gz", "binary"), ("wall_ms", "double"),
)

_SEEDS = re.compile(r"^\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?$")


def parse_seeds(text: str | int) -> tuple[int, int]:
    """``"1..1000"`` (inclusive) or one seed ``"7"`` -> ``(first, last)``."""
    m = _SEEDS.match(str(text))
    if not m:
        raise ValueError(f"seeds: expected N or FIRST..LAST, got {text!r}")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    if last < first:
        raise ValueError(f"seeds: {text!r} is empty (last < first)")
    return first, last


@dataclass(frozen=True, slots=True)
class Grid:
    """Scenarios x configuration points x seeds ``first..last``; run ``i`` is :meth:`spec`."""

    scenarios: tuple[str, ...]
    configs: tuple[RunConfig, ...] = (RunConfig(),)
    seeds: tuple[int, int] = (1, 1)

    def __post_init__(self) -> None:
        if not self.scenarios:
            raise ValueError("a sweep needs at least one scenario")
        if len(set(self.scenarios)) != len(self.scenarios):
            raise ValueError(f"scenarios repeat: {list(self.scenarios)}")
        keys = [c.key for c in self.configs]
        if not keys or len(set(keys)) != len(keys):
            raise ValueError("configuration points must be given and distinct")

    @classmethod
    def from_axes(cls, scenarios: Sequence[str], axes: dict[str, Sequence[Any]],
                  seeds: str | int | tuple[int, int] = 1) -> "Grid":
        """The product of each axis' values (an axis not given keeps the scenario's value)."""
        names = []
        for name in axes:
            axis = AXIS_ALIASES.get(name, name)
            if axis not in AXES:
                raise ValueError(f"unknown sweep axis {name!r}; known: {', '.join(AXES)}")
            names.append(name)
        # The axes' canonical order, whatever order they were written in: one grid, one run order.
        names.sort(key=lambda n: AXES.index(AXIS_ALIASES.get(n, n)))
        values = [list(v) if isinstance(v, (list, tuple)) else [v] for v in (axes[n] for n in names)]
        configs = tuple(RunConfig.parse(dict(zip(names, point))) for point in itertools.product(*values))
        span = seeds if isinstance(seeds, tuple) else parse_seeds(seeds)
        return cls(tuple(scenarios), configs, span)

    @classmethod
    def from_dict(cls, data: Any) -> "Grid":
        """A grid file's contents: ``scenarios``, ``seeds`` and an optional ``[config]`` table."""
        if not isinstance(data, dict):
            raise ValueError(f"grid: expected a table of scenarios, seeds and config, got {data!r}")
        unknown = set(data) - {"scenarios", "seeds", "config"}
        if unknown:
            raise ValueError(f"grid: unknown keys {sorted(unknown, key=str)} (expected scenarios, seeds, config)")
        scenarios = data.get("scenarios")
        if isinstance(scenarios, str):
            scenarios = [scenarios]
        if not scenarios:
            raise ValueError("grid: 'scenarios' must name at least one scenario")
        if not isinstance(scenarios, list) or not all(isinstance(s, str) for s in scenarios):
            raise ValueError(f"grid: 'scenarios' must be a name or a list of names, got {scenarios!r}")
        config = data.get("config") or {}
        if not isinstance(config, dict):
            raise ValueError(f"grid: 'config' must be a table of axes, got {config!r}")
        return cls.from_axes(scenarios, config, data.get("seeds", 1))

    @classmethod
    def load(cls, path: str | Path) -> "Grid":
        """A TOML (``.toml``) or YAML (``.yaml``/``.yml``) grid file."""
        path = Path(path)
        if path.suffix == ".toml":
            with open(path, "rb") as f:
                try:
                    data = tomllib.load(f)
                except tomllib.TOMLDecodeError as e:
                    raise ValueError(f"{path}: not valid TOML: {e}") from None
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(path.read_text()) or {}
            except yaml.YAMLError as e:
                mark = getattr(e, "problem_mark", None)
                where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
                raise ValueError(f"{path}: not valid YAML: {getattr(e, 'problem', None) or e}{where}") from None
        else:
            raise ValueError(f"{path}: a grid is a .toml or .yaml file")
        return cls.from_dict(data)

    @property
    def seed_count(self) -> int:
        return self.seeds[1] - self.seeds[0] + 1

    def __len__(self) -> int:
        return len(self.scenarios) * len(self.configs) * self.seed_count

    def spec(self, i: int) -> RunSpec:
        """Run ``i``: seed-major, then configuration, then scenario (as :meth:`index_columns`)."""
        s, c = len(self.scenarios), len(self.configs)
        return RunSpec(self.scenarios[i % s], self.configs[(i // s) % c], self.seeds[0] + i // (s * c))

    def validate(self) -> None:
        """Build and check every (scenario, configuration) once, as a run would, so a bad
        grid fails before Spark starts."""
        for name in self.scenarios:
            for config in self.configs:
                build_scenario(name, config).validate()

    def index_columns(self, ids: "DataFrame") -> "DataFrame":
        """``id`` -> (scenario, config_index, config_key, seed), computed in the JVM."""
        from pyspark.sql import functions as F

        s, c = len(self.scenarios), len(self.configs)
        pick = lambda values, i: F.element_at(F.array(*[F.lit(v) for v in values]), (i + 1).cast("int"))  # noqa: E731
        config_index = (F.expr(f"id div {s}") % c).cast("int")
        return ids.select(
            "id",
            pick(self.scenarios, F.col("id") % s).alias("scenario"),
            config_index.alias("config_index"),
            pick([cfg.key for cfg in self.configs], config_index).alias("config_key"),
            (F.expr(f"id div {s * c}") + F.lit(self.seeds[0])).cast("long").alias("seed"),
        )


@dataclass(slots=True)
class SweepStats:
    total: int
    already_done: int
    executed: int = 0
    chunks: int = 0
    wall_s: float = 0.0
    out: str = ""
    chunk_seconds: list[float] = field(default_factory=list)

    @property
    def runs_per_second(self) -> float:
        return self.executed / self.wall_s if self.wall_s else 0.0


def new_scratch_name() -> str:
    """A fresh name for the directory a sweep's runs keep their brokers' data in."""
    return f"kreplica-sweep-{uuid.uuid4().hex[:12]}"


def run_tasks(grid: Grid, batches: Iterator[Any], scratch: str | None = None) -> Iterator[Any]:
    """The executor side: Arrow batches of (scenario, config_index, seed) in, result rows out.

    Runs keep their data under this host's ``scratch`` directory (see :func:`run_sweep`).
    It is made once per task: once the driver has removed it, a run that would start
    after the sweep ended fails instead of leaving a new directory behind.  The task
    holds a lock in it while it runs, and first removes the scratch directories that no
    live task holds: those of sweeps killed outright.
    """
    import pyarrow as pa

    from . import sim_runner

    schema = _arrow_schema()
    root, lock = None, -1
    if scratch is not None:
        sim_runner.remove_orphaned_scratch(keep=scratch)
        root, lock = sim_runner.scratch_dir(scratch), sim_runner.use_scratch(scratch)
    scenarios: dict[tuple[str, int], Any] = {}
    try:
        with sim_runner.stopped_by_signals():
            for batch in batches:
                cols = batch.to_pydict()
                rows = []
                for name, ci, seed in zip(cols["scenario"], cols["config_index"], cols["seed"]):
                    config = grid.configs[ci]
                    sc = scenarios.get((name, ci))
                    if sc is None:
                        sc = scenarios[(name, ci)] = sim_runner.build_scenario(name, config)
                    rows.append(sim_runner.run(RunSpec(name, config, seed), sc, data_root=root))
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=schema)
    finally:
        if lock >= 0:
            os.close(lock)


def _arrow_schema() -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(result_schema())


def _spark_type(name: str) -> Any:
    from pyspark.sql import types as T

    simple = {"string": T.StringType(), "long": T.LongType(), "int": T.IntegerType(),
              "boolean": T.BooleanType(), "double": T.DoubleType(), "binary": T.BinaryType()}
    if name.startswith("array<"):
        return T.ArrayType(_spark_type(name[6:-1]))
    if name.startswith("map<"):
        k, v = name[4:-1].split(",")
        return T.MapType(_spark_type(k), _spark_type(v))
    return simple[name]


def result_schema() -> Any:
    """:data:`RESULT_COLUMNS` as a Spark schema (built without a JVM: executors need it too)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(n, _spark_type(t), True) for n, t in RESULT_COLUMNS])


def _hadoop_path(spark: "SparkSession", out: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(out)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def done_runs(spark: "SparkSession", out: str) -> "DataFrame | None":
    """The (scenario, config_key, seed) triples already in ``out``, or None when it is empty."""
    fs, path = _hadoop_path(spark, out)
    if not fs.exists(path):
        return None
    has_rows = any(st.isDirectory() and st.getPath().getName().startswith("scenario=")
                   for st in fs.listStatus(path))
    if not has_rows:
        return None
    return spark.read.schema(result_schema()).parquet(out).select(*KEY_COLUMNS)


def remove_stale_staging(spark: "SparkSession", out: str) -> bool:
    """Delete the ``_temporary`` staging a killed writer left in ``out``; True if there was one."""
    fs, path = _hadoop_path(spark, out)
    staging = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path, "_temporary")
    return bool(fs.exists(staging) and fs.delete(staging, True))


def run_sweep(
    spark: "SparkSession",
    grid: Grid,
    out: str,
    *,
    runs_per_task: int = 8,
    tasks_per_chunk: int | None = None,
    progress: bool = False,
    console: Any = None,
    on_chunk: Callable[[int, int, SweepStats], None] | None = None,
    scratch: str | None = None,
) -> SweepStats:
    """Run every run of ``grid`` not yet in ``out``; append their rows there.

    ``tasks_per_chunk`` defaults to four tasks per core (Spark's default
    parallelism); a chunk is ``tasks_per_chunk * runs_per_task`` runs and one
    Spark job.  ``progress`` shows a bar of completed tasks (see
    :mod:`kreplica.spark.progress`); ``on_chunk(done_chunks, all_chunks, stats)``
    is called after each chunk.

    The runs keep their brokers' data in a directory named ``scratch`` (default
    :func:`new_scratch_name`) under /dev/shm or the temp dir of each host.  A run
    removes its own data when it ends, but a task Spark kills (a cancelled or
    interrupted sweep) cannot, so the driver removes this host's ``scratch`` when the
    sweep ends, however it ends; call :func:`kreplica.spark.sim_runner.remove_scratch`
    again after stopping the session to catch tasks that were still dying.
    """
    from .sim_runner import remove_scratch

    sc = spark.sparkContext
    grid.validate()
    scratch = scratch or new_scratch_name()
    t0 = time.perf_counter()
    tasks = tasks_per_chunk or max(1, 4 * sc.defaultParallelism)
    chunk = tasks * max(1, runs_per_task)
    chunks = (len(grid) + chunk - 1) // chunk
    group = f"kreplica-sweep-{uuid.uuid4().hex[:12]}"
    sc.setJobGroup(group, f"kreplica sweep of {len(grid)} runs into {out}", interruptOnCancel=True)
    bar = None
    if progress:
        from .progress import SparkProgress

        bar = SparkProgress(sc, group, expect_jobs=chunks, expect_tasks=tasks, console=console,
                            description=f"sweep: {len(grid)} runs")
    try:
        if bar is not None:
            bar.__enter__()
        stats = _run_chunks(spark, grid, out, tasks, chunk, chunks, bar, on_chunk, scratch)
    finally:
        remove_scratch(scratch)  # first: the calls below may fail on an interrupted gateway
        if bar is not None:
            bar.__exit__(None, None, None)
        sc.setLocalProperty("spark.jobGroup.id", None)
    stats.wall_s = time.perf_counter() - t0
    return stats


def _run_chunks(spark: "SparkSession", grid: Grid, out: str, tasks: int, chunk: int, chunks: int,
                bar: Any, on_chunk: Callable[[int, int, SweepStats], None] | None,
                scratch: str) -> SweepStats:
    t0 = time.perf_counter()
    remove_stale_staging(spark, out)
    done = done_runs(spark, out)
    already = 0
    if done is not None:
        if bar is not None:
            bar.note("sweep: finding runs already done")
        everything = grid.index_columns(spark.range(0, len(grid), numPartitions=tasks))
        already = everything.join(done.distinct(), list(KEY_COLUMNS), "left_semi").count()
    stats = SweepStats(total=len(grid), already_done=already, out=out)
    executed = spark.sparkContext.accumulator(0)
    for k in range(chunks):
        lo, hi = k * chunk, min(len(grid), (k + 1) * chunk)
        if bar is not None:
            bar.note(f"sweep: chunk {k + 1}/{chunks}, {stats.executed} runs done, {already} skipped")
        c0 = time.perf_counter()
        todo = grid.index_columns(spark.range(lo, hi, numPartitions=min(tasks, hi - lo)))
        if done is not None:
            todo = todo.join(done, list(KEY_COLUMNS), "left_anti").repartition(min(tasks, hi - lo))
        rows = todo.select("scenario", "config_index", "seed").mapInArrow(
            _counting(grid, executed, scratch), result_schema())
        rows.write.mode("append").partitionBy("scenario").parquet(out)
        stats.chunks = k + 1
        stats.chunk_seconds.append(time.perf_counter() - c0)
        stats.executed = executed.value
        stats.wall_s = time.perf_counter() - t0
        if on_chunk is not None:
            on_chunk(k + 1, chunks, stats)
    if bar is not None:
        bar.note(f"sweep: {stats.executed} runs done, {already} skipped")
    return stats


def _counting(grid: Grid, executed: Any, scratch: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for out in run_tasks(grid, batches, scratch):
            executed.add(out.num_rows)
            yield out
    return task


def read_results(spark: "SparkSession", out: str) -> "DataFrame":
    """Every row of a sweep directory."""
    return spark.read.schema(result_schema()).parquet(out)
