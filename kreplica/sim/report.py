"""Reports: the summary table over many runs and a timeline plot of one run.

:class:`Summary` folds :class:`~kreplica.sim.world.RunResult` objects into the
figures the issue asks for -- runs, violations by invariant, counted (attributed)
losses of acknowledged writes, unclean elections, availability, p50/p99 time to
re-elect, throughput -- and renders them as a rich table.  :func:`timeline_png`
draws one run from its samples: HW and LEO per replica, the leader and ISR size
per partition over virtual time, with faults marked.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


def percentile(values: list[int] | list[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100), linear between ranks; None for no samples.
    ``kreplica simulate`` and the sweep's per-run figures both use it."""
    return float(np.percentile(values, q)) if values else None


def writes_per_virtual_s(writes: int, virtual_ms: int) -> float:
    """Writes completed per virtual second, over runs taken together (total writes over
    total virtual time, not a mean of per-run rates).  The sweep report's SQL says the same."""
    return writes / (virtual_ms / 1000 or 1)


@dataclass
class Summary:
    runs: int = 0
    failed_seeds: list[int] = field(default_factory=list)
    violations: Counter = field(default_factory=Counter)
    losses: Counter = field(default_factory=Counter)
    superseded_reads: Counter = field(default_factory=Counter)
    unclean_elections: int = 0
    acked_writes: int = 0
    writes_completed: int = 0
    availability_sum: float = 0.0
    reelect_ms: list[int] = field(default_factory=list)
    virtual_ms: int = 0
    wall_s: float = 0.0
    events: int = 0

    def add(self, r: Any) -> None:
        self.runs += 1
        if r.violation is not None:
            self.violations[r.violation.invariant.value] += 1
            self.failed_seeds.append(r.seed)
        for loss in r.losses:
            self.losses[loss.cause] += 1
        for read in r.superseded_reads:
            self.superseded_reads[read.cause] += 1
        self.unclean_elections += r.unclean_elections
        self.acked_writes += r.acked_writes
        self.writes_completed += r.writes_completed
        self.availability_sum += r.availability
        self.reelect_ms.extend(r.reelect_ms)
        self.virtual_ms += r.virtual_ms
        self.wall_s += r.wall_s
        self.events += r.scheduler_events

    def rows(self) -> list[tuple[str, str]]:
        p50, p99 = percentile(self.reelect_ms, 50), percentile(self.reelect_ms, 99)
        v_s = self.virtual_ms / 1000 or 1
        out = [
            ("runs", str(self.runs)),
            ("runs with a violation", str(sum(self.violations.values()))),
        ]
        for name in sorted(self.violations):
            out.append((f"  {name}", str(self.violations[name])))
        out += [
            ("lost acks (counted, attributed)", str(sum(self.losses.values()))),
        ]
        for cause in sorted(self.losses):
            out.append((f"  {cause}", str(self.losses[cause])))
        out.append(("consumed batches then lost (counted, attributed)", str(sum(self.superseded_reads.values()))))
        for cause in sorted(self.superseded_reads):
            out.append((f"  {cause}", str(self.superseded_reads[cause])))
        out += [
            ("unclean elections", str(self.unclean_elections)),
            ("availability %", f"{100 * self.availability_sum / self.runs:.2f}" if self.runs else "-"),
            ("time to re-elect p50 / p99 ms", f"{p50 or 0:.0f} / {p99 or 0:.0f}" if p50 is not None else "-"),
            ("writes completed / virtual s (acked, or sent with acks=0)",
             f"{writes_per_virtual_s(self.writes_completed, self.virtual_ms):.1f}"),
            ("acks=all writes acked / virtual s", f"{self.acked_writes / v_s:.1f}"),
            # No run timed (a sweep interrupted before its first seed ended): no speed to give.
            ("simulated events / wall s", f"{self.events / self.wall_s:,.0f}" if self.wall_s > 0 else "-"),
            ("virtual s / wall s", f"{self.virtual_ms / 1000 / self.wall_s:.1f}" if self.wall_s > 0 else "-"),
        ]
        if self.failed_seeds:
            out.append(("failing seeds", " ".join(map(str, self.failed_seeds[:20]))
                        + (" ..." if len(self.failed_seeds) > 20 else "")))
        return out

    def table(self, title: str) -> Any:
        from rich.table import Table

        t = Table(title=title)
        t.add_column("measure")
        t.add_column("value", justify="right")
        for k, v in self.rows():
            t.add_row(k, v)
        return t

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs, "violations": dict(self.violations), "losses": dict(self.losses),
            "superseded_reads": dict(self.superseded_reads),
            "unclean_elections": self.unclean_elections, "acked_writes": self.acked_writes,
            "writes_completed": self.writes_completed,
            "availability": self.availability_sum / self.runs if self.runs else None,
            "reelect_ms_p50": percentile(self.reelect_ms, 50), "reelect_ms_p99": percentile(self.reelect_ms, 99),
            "failed_seeds": self.failed_seeds, "wall_s": self.wall_s, "events": self.events,
            "virtual_ms": self.virtual_ms,  # with the two above and writes_completed: the table's rates
        }


def isr_stays(partition_samples: list[tuple], broker: int) -> list[tuple[int, int]]:
    """[(from ms, to ms), ...]: the stretches of a partition's samples (time first, ISR
    last) in which ``broker`` was in the ISR, each up to the next sample after it left."""
    stays: list[tuple[int, int]] = []
    for a, z in zip(partition_samples, partition_samples[1:]):
        if broker not in a[-1]:
            continue
        if stays and stays[-1][1] == a[0]:
            stays[-1] = (stays[-1][0], z[0])
        else:
            stays.append((a[0], z[0]))
    return stays


def broken_at_gaps(times: list[float], values: list[float], gap: float) -> tuple[list[float], list[float]]:
    """The points of a line, a NaN put where two samples lie more than ``gap`` apart, which
    breaks the drawn line there: a broker that was down has no samples, and its HW and LEO
    are not known meanwhile (a straight line across would draw values it never had)."""
    xs: list[float] = []
    ys: list[float] = []
    for i, (t, v) in enumerate(zip(times, values)):
        if i and t - times[i - 1] > gap:
            xs.append(float("nan"))
            ys.append(float("nan"))
        xs.append(t)
        ys.append(v)
    return xs, ys


def _by_topic_and_number(tp: str) -> tuple[str, int]:
    """``orders-10`` as ``("orders", 10)``: a topic's partitions in number order (sorted as
    text, 10 and 11 came before 2, and a timeline of 4 drew 0, 1, 10 and 11)."""
    topic, _, number = tp.rpartition("-")
    return (topic, int(number)) if number.isdigit() else (tp, -1)


def timeline_png(result: Any, path: str | Path, max_partitions: int = 4) -> Path:
    """Leader/ISR and HW/LEO per replica over virtual time, faults marked (needs samples)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result.samples
    tps = sorted({s[1] for s in samples}, key=_by_topic_and_number)[:max_partitions] or ["(none)"]
    fig, axes = plt.subplots(2 * len(tps), 1, figsize=(11, 3.2 * len(tps)), sharex=True, squeeze=False)
    for i, tp in enumerate(tps):
        ax_off, ax_lead = axes[2 * i][0], axes[2 * i + 1][0]
        rows = [s for s in samples if s[1] == tp and s[5] < 2]
        leaders = [s for s in samples if s[1] == tp and s[5] == 2]
        # The sample period: the usual step between sampling instants (a few come off-beat).
        instants = sorted({s[0] for s in samples if s[1] == tp})
        period = statistics.median([b - a for a, b in zip(instants, instants[1:])] or [0]) / 1000
        for broker in sorted({s[2] for s in rows}):
            mine = [s for s in rows if s[2] == broker]
            t = [s[0] / 1000 for s in mine]
            ax_off.plot(*broken_at_gaps(t, [s[4] for s in mine], 1.5 * period), label=f"LEO {broker}",
                        linewidth=1)
            ax_off.plot(*broken_at_gaps(t, [s[3] for s in mine], 1.5 * period), "--", label=f"HW {broker}",
                        linewidth=1)
        # ISR membership: a bar per broker while it is in the ISR, the leader drawn over them.
        brokers = sorted({b for s in leaders for b in s[6]} | {s[2] for s in leaders if s[2] > 0})
        for b in brokers:
            spans = [(start / 1000, (end - start) / 1000) for start, end in isr_stays(leaders, b)]
            ax_lead.broken_barh(spans, (b - 0.3, 0.6), color="tab:green", alpha=0.35,
                                label="in the ISR" if b == brokers[0] else None)
        ax_lead.step([s[0] / 1000 for s in leaders], [s[2] for s in leaders], where="post", color="black",
                     linewidth=1, label="leader (0: none)")
        ax_lead.set_yticks([0, *brokers])
        ax_off.set_ylabel(f"{tp}\noffset")
        ax_lead.set_ylabel("broker")
        if ax_off.get_legend_handles_labels()[0]:  # no replica sampled: no lines to name
            ax_off.legend(fontsize=6, ncol=6, loc="lower right")  # the top carries the fault names
        ax_lead.legend(fontsize=6, loc="upper left")
        for when, kind, broker in result.faults:
            for ax in (ax_off, ax_lead):
                ax.axvline(when / 1000, color="red" if kind == "crash" else "grey", alpha=0.4, linewidth=0.8)
            if i == 0:  # named once, along the top
                label = kind.replace("_", " ") + ("" if broker is None else f" {broker}")
                ax_off.annotate(label, (when / 1000, 0.97), xycoords=("data", "axes fraction"), rotation=90,
                                fontsize=6, va="top", ha="right", color="dimgrey",
                                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
    axes[-1][0].set_xlabel("virtual time (s); vertical lines: faults, named at the top (red: crashes)")
    verdict = "ok" if result.violation is None else result.violation.invariant.value
    fig.suptitle(f"{result.scenario} seed {result.seed}: {verdict}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
