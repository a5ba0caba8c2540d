"""The sweep report: per configuration, Spark SQL over the sweep's Parquet rows (issue 6).

Theory of operation.  Everything is aggregated by Spark SQL on the executors;
the driver collects only one row per (scenario, configuration) and at most
``max_failing`` failing runs.  Per configuration:

- the probability that a run loses an acknowledged write (a counted loss, from
  an unclean election or a power loss, or an invariant-1 violation), with a 95%
  Wilson score interval -- unlike the normal approximation it stays inside
  [0, 1] and is honest at 0 of n, which is the headline case;
- runs with violations, by invariant; lost acknowledged writes; unclean
  elections; errors;
- consumed batches that an attributed loss later removed ("read then lost");
- mean availability; throughput as ``kreplica simulate`` counts it: all writes
  completed (at any acks) over all virtual seconds of the configuration's runs,
  not a mean of per-run rates (short runs would weigh as much as long ones);
- time to re-elect, p50 and p99 over every re-election of every run
  (Spark's exact ``percentile``, linear between ranks).

It is printed as a rich table and written as ``report.md`` with PNG plots
(matplotlib, Agg backend).  Each failing run's JSON-lines history is written
under ``replays/`` with the ``kreplica simulate --replay`` command that
reproduces it (and checks its history hash).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .sim_runner import history_text, replay_command

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Z95 = 1.959963984540054
RUNS_VIEW = "kreplica_sweep_runs"
LOSS_INVARIANT = "1-acked-write-lost"
CONFIG_COLUMNS = ("acks", "min_isr", "unclean", "truncation", "rf", "fault_rate", "until_ms")


def wilson_sql(k: str, n: str, z: float = Z95) -> tuple[str, str]:
    """SQL for the Wilson score interval's (low, high) of ``k`` successes in ``n`` trials."""
    p = f"({k}) / ({n})"
    z2 = f"{z * z!r}"
    center = f"({p} + {z2} / (2 * ({n})))"
    half = f"({z!r} * sqrt({p} * (1 - {p}) / ({n}) + {z2} / (4 * ({n}) * ({n}))))"
    denom = f"(1 + {z2} / ({n}))"
    return f"greatest(0D, ({center} - {half}) / {denom})", f"least(1D, ({center} + {half}) / {denom})"


_LO, _HI = wilson_sql("loss_runs", "runs")


def _summed_map(column: str, key: str) -> str:
    """Per configuration, a map column of counts summed key by key over its runs."""
    return f"""
  SELECT scenario, config_key, map_from_entries(collect_list(struct({key}, n))) AS {column}
  FROM (SELECT scenario, config_key, {key}, sum(count) AS n
        FROM runs LATERAL VIEW explode({column}) e AS {key}, count
        GROUP BY scenario, config_key, {key})
  GROUP BY scenario, config_key
"""

SUMMARY_SQL = f"""
WITH runs AS (
  SELECT *,
         (lost_acks > 0 OR coalesce(violations['{LOSS_INVARIANT}'], 0) > 0) AS lost,
         (violations_total > 0 OR lost_acks > 0 OR error IS NOT NULL) AS failing
  FROM {RUNS_VIEW}
),
per_config AS (
  SELECT scenario, config_key,
         {", ".join(f"first({c}) AS {c}" for c in CONFIG_COLUMNS)},
         count(*) AS runs,
         count_if(lost) AS loss_runs,
         count_if(violations_total > 0) AS violation_runs,
         count_if(failing) AS failing_runs,
         count_if(error IS NOT NULL) AS errors,
         sum(lost_acks) AS lost_acks,
         sum(unclean_elections) AS unclean_elections,
         sum(superseded_reads) AS superseded_reads,
         avg(availability) AS mean_availability,
         -- kreplica.sim.report.writes_per_virtual_s
         sum(writes_completed) / coalesce(nullif(sum(virtual_ms) / 1000D, 0D), 1D) AS throughput,
         sum(acked_writes) AS acked_writes,
         sum(writes_completed) AS writes_completed,
         avg(wall_ms) AS mean_wall_ms
  FROM runs GROUP BY scenario, config_key
),
by_invariant AS ({_summed_map("violations", "invariant")}),
by_cause AS ({_summed_map("lost_by_cause", "cause")}),
reelect AS (
  SELECT scenario, config_key, count(*) AS elections,
         percentile(ms, 0.5) AS reelect_p50_ms, percentile(ms, 0.99) AS reelect_p99_ms
  FROM runs LATERAL VIEW explode(reelect_ms) r AS ms
  GROUP BY scenario, config_key
)
SELECT c.*, c.loss_runs / c.runs AS loss_probability,
       {_LO} AS loss_ci_low, {_HI} AS loss_ci_high,
       coalesce(b.violations, map()) AS violations, coalesce(l.lost_by_cause, map()) AS lost_by_cause,
       coalesce(r.elections, 0) AS elections, r.reelect_p50_ms, r.reelect_p99_ms
FROM per_config c
LEFT JOIN by_invariant b ON c.scenario = b.scenario AND c.config_key = b.config_key
LEFT JOIN by_cause l ON c.scenario = l.scenario AND c.config_key = l.config_key
LEFT JOIN reelect r ON c.scenario = r.scenario AND c.config_key = r.config_key
ORDER BY c.scenario, c.config_key
"""

FAILING_SQL = f"""
SELECT scenario, config_key, seed, history_hash, first_violation, lost_acks, lost_by_cause,
       unclean_elections, error, history_gz
FROM {RUNS_VIEW}
WHERE violations_total > 0 OR lost_acks > 0 OR error IS NOT NULL
ORDER BY scenario, config_key, seed
"""


@dataclass(slots=True)
class Report:
    rows: list[dict[str, Any]]
    failing: list[dict[str, Any]]
    failing_total: int
    markdown: Path | None = None
    plots: list[Path] = field(default_factory=list)


def summarize(spark: "SparkSession", runs: "DataFrame") -> list[dict[str, Any]]:
    """One dict per (scenario, configuration), in the order of :data:`SUMMARY_SQL`."""
    runs.createOrReplaceTempView(RUNS_VIEW)
    return [r.asDict(recursive=True) for r in spark.sql(SUMMARY_SQL).collect()]


def failing_runs(spark: "SparkSession", runs: "DataFrame", limit: int) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` failing runs (with their histories) and how many fail in all."""
    runs.createOrReplaceTempView(RUNS_VIEW)
    failing = spark.sql(FAILING_SQL)
    total = failing.count()
    return [r.asDict(recursive=True) for r in failing.limit(limit).collect()], total


def varying_axes(rows: list[dict[str, Any]]) -> list[str]:
    """The configuration columns whose value differs between rows (what labels need)."""
    return [c for c in CONFIG_COLUMNS if len({r[c] for r in rows}) > 1]


def label(row: dict[str, Any], axes: list[str], with_scenario: bool) -> str:
    parts = [f"{a}={_fmt(row[a])}" for a in axes]
    head = [row["scenario"]] if with_scenario else []
    return " ".join(head + parts) or row["config_key"]


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return format(v, "g")
    return "-" if v is None else str(v)


def _counts(counts: dict[str, int] | None) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted((counts or {}).items()))


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _table_rows(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    axes = varying_axes(rows)
    many = len({r["scenario"] for r in rows}) > 1
    head = ["scenario", "configuration", "runs", "P(loss) [95% CI]", "violations", "lost acks",
            "read then lost", "unclean", "avail %", "re-elect p50/p99 ms", "writes/s"]
    body = []
    for r in rows:
        viol = _counts(r["violations"]) or "0"
        lost = str(r["lost_acks"]) + (f" ({_counts(r['lost_by_cause'])})" if r["lost_by_cause"] else "")
        body.append([
            r["scenario"], label(r, axes, False) if (axes or many) else r["config_key"], str(r["runs"]),
            f"{r['loss_probability']:.3f} [{r['loss_ci_low']:.3f}, {r['loss_ci_high']:.3f}] "
            f"({r['loss_runs']}/{r['runs']})",
            viol + (f" (+{r['errors']} errors)" if r["errors"] else ""),
            lost, str(r["superseded_reads"] or 0), str(r["unclean_elections"]),
            "-" if r["mean_availability"] is None else f"{100 * r['mean_availability']:.2f}",
            f"{_ms(r['reelect_p50_ms'])} / {_ms(r['reelect_p99_ms'])}",
            "-" if r["throughput"] is None else f"{r['throughput']:.1f}",
        ])
    return head, body


def print_table(rows: list[dict[str, Any]], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    head, body = _table_rows(rows)
    table = Table(title="kreplica sweep: per configuration")
    for i, h in enumerate(head):
        table.add_column(h, justify="left" if i < 2 else "right")
    for line in body:
        table.add_row(*line)
    (console or Console()).print(table)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def write_replays(failing: list[dict[str, Any]], report_dir: Path) -> list[str]:
    """Each failing run's history as ``replays/<scenario>/<config>/seed-N.jsonl``; the commands."""
    commands = []
    for f in failing:
        if f["history_gz"] is None:
            commands.append("")
            continue
        path = report_dir / "replays" / _slug(f["scenario"]) / _slug(f["config_key"]) / f"seed-{f['seed']}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(history_text(bytes(f["history_gz"])))
        commands.append(replay_command(str(path.resolve())))
    return commands


def plot(rows: list[dict[str, Any]], report_dir: Path) -> list[Path]:
    """Loss probability (with its interval), availability and re-election time per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = varying_axes(rows)
    many = len({r["scenario"] for r in rows}) > 1
    labels = [label(r, axes, many) for r in rows]
    y = list(range(len(rows)))
    height = max(2.5, 0.45 * len(rows) + 1.2)
    paths = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        path = report_dir / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    fig, ax = plt.subplots(figsize=(9, height))
    p = [r["loss_probability"] for r in rows]
    # max(0, ...): at 0 of n the interval's low end and p differ only by rounding.
    err = [[max(0.0, pi - r["loss_ci_low"]) for pi, r in zip(p, rows)],
           [max(0.0, r["loss_ci_high"] - pi) for pi, r in zip(p, rows)]]
    ax.barh(y, p, xerr=err, color="#c0504d", capsize=3)
    ax.set_yticks(y, labels)
    ax.set_xlim(0, 1)
    ax.set_xlabel("P(acknowledged write lost) per run, 95% Wilson interval")
    ax.invert_yaxis()
    save(fig, "loss_probability.png")

    fig, ax = plt.subplots(figsize=(9, height))
    ax.barh(y, [100 * (r["mean_availability"] or 0) for r in rows], color="#4f81bd")
    ax.set_yticks(y, labels)
    ax.set_xlabel("mean availability, % of samples with a live leader")
    ax.invert_yaxis()
    save(fig, "availability.png")

    fig, ax = plt.subplots(figsize=(9, height))
    w = 0.4
    ax.barh([i - w / 2 for i in y], [r["reelect_p50_ms"] or 0 for r in rows], w, label="p50", color="#9bbb59")
    ax.barh([i + w / 2 for i in y], [r["reelect_p99_ms"] or 0 for r in rows], w, label="p99", color="#8064a2")
    ax.set_yticks(y, labels)
    ax.set_xlabel("time to re-elect a leader, virtual ms")
    ax.legend()
    ax.invert_yaxis()
    save(fig, "reelection.png")
    return paths


def markdown(rows: list[dict[str, Any]], failing: list[dict[str, Any]], commands: list[str],
             failing_total: int, plots: list[Path], source: str) -> str:
    head, body = _table_rows(rows)
    runs = sum(r["runs"] for r in rows)
    out = ["# kreplica sweep report", "",
           f"{runs} runs in `{source}`, {len(rows)} configurations, {failing_total} failing runs.",
           "Loss: a run that lost an acknowledged write (counted loss or invariant 1). "
           "Intervals are 95% Wilson score intervals. Re-election percentiles are over every "
           "re-election of every run of the configuration (virtual ms).", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |" for line in body]
    out += ["", "Configurations:", ""]
    out += [f"- `{r['scenario']}` `{r['config_key']}`" for r in rows]
    out += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    out += ["", "## Failing runs", ""]
    if not failing:  # none failed, or the report lists none (max_failing 0)
        out.append(f"None of the {failing_total} listed." if failing_total else "None.")
    else:
        if failing_total > len(failing):
            out.append(f"The first {len(failing)} of {failing_total}:")
            out.append("")
        for f, cmd in zip(failing, commands):
            why = f["error"] or f["first_violation"] or \
                f"{f['lost_acks']} lost acknowledged writes ({_counts(f['lost_by_cause'])})"
            out.append(f"- `{f['scenario']}` `{f['config_key']}` seed {f['seed']} "
                       f"(hash `{f['history_hash'][:16]}`): {why}")
            if cmd:
                out.append(f"  `{cmd}`")
    return "\n".join(out) + "\n"


def build_report(spark: "SparkSession", runs: "DataFrame", report_dir: str | Path | None = None, *,
                 console: Any = None, max_failing: int = 200, show: bool = True,
                 source: str = "") -> Report:
    """Summarize ``runs``; print the table (``show``); write report.md, plots and replays."""
    rows = summarize(spark, runs)
    failing, total = failing_runs(spark, runs, max_failing)
    report = Report(rows, failing, total)
    if show:
        print_table(rows, console)
    if report_dir is not None and rows:
        d = Path(report_dir)
        d.mkdir(parents=True, exist_ok=True)
        commands = write_replays(failing, d)
        report.plots = plot(rows, d)
        report.markdown = d / "report.md"
        report.markdown.write_text(markdown(rows, failing, commands, total, report.plots, source))
        for f, cmd in zip(failing, commands):
            f["replay"] = cmd
    return report


__all__ = ["Report", "build_report", "summarize", "failing_runs", "wilson_sql", "print_table"]
