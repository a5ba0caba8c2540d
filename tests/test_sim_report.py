"""The summary table's figures over several runs, and how many partitions a timeline
draws, from results made up to the figure: each measure is checked against arithmetic
done by hand."""
from __future__ import annotations

import struct

import pytest

from kreplica.sim.checker import CountedLoss, Invariant, Violation
from kreplica.sim.report import Summary, percentile, timeline_png, writes_per_virtual_s
from kreplica.sim.world import RunResult


def result(seed, *, violation=None, losses=(), superseded=(), unclean=0, acked=0, writes=0, availability=1.0,
           reelect=(), virtual_ms=1000, wall_s=0.5, events=100, samples=(), faults=()):
    """A RunResult with the given figures (the others zero or empty)."""
    v = None if violation is None else Violation(violation, 10, "t-0", 1, "planted")
    return RunResult(f"s{seed}", seed, "h", 0, virtual_ms, wall_s, v,
                     [CountedLoss("t-0", i, cause, 1, 1, 0) for i, cause in enumerate(losses)], unclean, acked,
                     0, availability, list(reelect), v is None, events, list(samples), list(faults), writes,
                     [CountedLoss("t-0", i, cause, 1, 1, 0) for i, cause in enumerate(superseded)])


def two_runs():
    s = Summary()
    s.add(result(3, violation=Invariant.ACKED_WRITE_LOST, losses=["power-loss", "unclean-election",
                                                                  "unclean-election"],
                 unclean=2, acked=10, writes=16, availability=0.5, reelect=[10, 20], virtual_ms=1500))
    s.add(result(8, losses=["power-loss"], unclean=3, acked=5, writes=30, availability=1.0, reelect=[30, 40],
                 virtual_ms=2500))
    return s


def test_the_summary_adds_runs_up_as_sums_and_means_over_every_run():
    s = two_runs()
    rows = dict(s.rows())
    assert rows["runs"] == "2"
    assert rows["runs with a violation"] == "1" and rows["  1-acked-write-lost"] == "1"
    assert rows["lost acks (counted, attributed)"] == "4"
    assert (rows["  power-loss"], rows["  unclean-election"]) == ("2", "2")  # each loss under its own cause
    assert rows["unclean elections"] == "5"  # elections, not runs that had one
    assert rows["availability %"] == "75.00"  # the mean of 50% and 100%
    assert rows["time to re-elect p50 / p99 ms"] == "25 / 40"  # over [10, 20, 30, 40]: 25.0 and 39.7
    # Throughput over all runs' virtual time together: 46 writes in 4 virtual s; 15 acked.
    assert rows["writes completed / virtual s (acked, or sent with acks=0)"] == "11.5"
    assert rows["acks=all writes acked / virtual s"] == "3.8"
    assert rows["failing seeds"] == "3"
    # Speed over all runs' wall time together: 200 events and 4 virtual s in 0.5 + 0.5 wall s.
    assert rows["simulated events / wall s"] == "200" and rows["virtual s / wall s"] == "4.0"
    d = s.to_dict()
    assert d["violations"] == {"1-acked-write-lost": 1}  # the invariant's name as the checker prints it
    assert d["losses"] == {"power-loss": 2, "unclean-election": 2} and d["unclean_elections"] == 5
    assert d["availability"] == 0.75 and d["failed_seeds"] == [3]
    assert d["reelect_ms_p50"] == 25.0 and d["reelect_ms_p99"] == pytest.approx(39.7)
    assert (d["writes_completed"], d["acked_writes"]) == (46, 15)
    assert (d["wall_s"], d["events"], d["virtual_ms"]) == (1.0, 200, 4000)  # the rates can be recomputed


def test_the_summary_of_no_run_and_of_runs_without_elections():
    none = dict(Summary().rows())
    assert none["time to re-elect p50 / p99 ms"] == "-"
    # A sweep interrupted before its first seed ended still prints its table: no wall time
    # was measured, so there is no speed to give (it read 1000000000.0 virtual s / wall s).
    assert none["simulated events / wall s"] == none["virtual s / wall s"] == "-"
    s = Summary()
    s.add(result(1, reelect=[0, 0]))  # leadership moved at once: 0 ms is a figure, not "no figure"
    assert dict(s.rows())["time to re-elect p50 / p99 ms"] == "0 / 0"


def test_percentiles_are_linear_between_ranks():
    assert percentile([], 50) is None
    assert percentile([10, 20, 30, 40], 50) == 25.0
    assert percentile([10, 20, 30, 40], 99) == pytest.approx(39.7)
    assert percentile(list(range(101)), 99) == 99.0 and percentile(list(range(101)), 95) == 95.0
    assert writes_per_virtual_s(46, 4000) == 11.5 and writes_per_virtual_s(3, 0) == 3.0


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])  # width, height of the IHDR chunk


@pytest.mark.parametrize("max_partitions, drawn", [(1, 1), (2, 2), (4, 3)])
def test_a_timeline_draws_at_most_the_partitions_asked_for(tmp_path, max_partitions, drawn):
    samples = []
    for t in range(0, 2000, 250):
        for tp in ("t-0", "t-1", "t-2"):
            samples.append((t, tp, 1, -1, -1, 2, (1, 2)))
            samples += [(t, tp, b, t // 250, t // 250 + 1, int(b == 1), (1, 2) if b == 1 else ()) for b in (1, 2)]
    r = result(1, samples=samples, faults=[(500, "crash", 2), (900, "restart", 2)])
    path = timeline_png(r, tmp_path / "t.png", max_partitions)
    width, height = _png_size(path)
    assert (width, height) == (11 * 90, round(3.2 * drawn * 90))  # two plots of 3.2 inches per partition


def test_a_single_re_election_is_its_own_p50_and_p99():
    """One sample is a figure: both percentiles are that value, not "no figure"."""
    assert percentile([7], 50) == 7.0 and percentile([7], 99) == 7.0
    s = Summary()
    s.add(result(1, reelect=[12]))
    assert dict(s.rows())["time to re-elect p50 / p99 ms"] == "12 / 12"
    assert (s.to_dict()["reelect_ms_p50"], s.to_dict()["reelect_ms_p99"]) == (12.0, 12.0)


@pytest.mark.parametrize("failing, shown", [(20, " ".join(map(str, range(20)))),
                                            (21, " ".join(map(str, range(20))) + " ...")])
def test_the_table_lists_twenty_failing_seeds_and_marks_more(failing, shown):
    s = Summary()
    for seed in range(failing):
        s.add(result(seed, violation=Invariant.ACKED_WRITE_LOST))
    assert dict(s.rows())["failing seeds"] == shown
    assert s.to_dict()["failed_seeds"] == list(range(failing))  # summary.json keeps them all


def test_consumed_then_lost_batches_are_kept_apart_from_lost_acks():
    s = Summary()
    s.add(result(1, losses=["power-loss"], superseded=["unclean-election", "unclean-election"]))
    rows = dict(s.rows())
    assert rows["lost acks (counted, attributed)"] == "1"
    assert rows["consumed batches then lost (counted, attributed)"] == "2"
    out = s.rows()
    at = out.index(("consumed batches then lost (counted, attributed)", "2"))
    assert out[at + 1] == ("  unclean-election", "2")  # by cause, under its own total
    d = s.to_dict()
    assert d["losses"] == {"power-loss": 1} and d["superseded_reads"] == {"unclean-election": 2}


@pytest.mark.parametrize("virtual_ms, writes", [(1500, 30), (500, 10)])
def test_throughput_counts_a_runs_part_of_a_virtual_second(virtual_ms, writes):
    """1.5 virtual s is 1.5 s, not 1, and 0.5 s (``--until 500``) is 0.5 s, not a whole
    second: 30 or 10 acks=all writes in them are 20.0 a second (only no virtual time at
    all is taken as 1 s)."""
    s = Summary()
    s.add(result(1, acked=writes, writes=writes, virtual_ms=virtual_ms))
    rows = dict(s.rows())
    assert rows["acks=all writes acked / virtual s"] == "20.0"
    assert rows["writes completed / virtual s (acked, or sent with acks=0)"] == "20.0"


def test_the_table_lists_invariants_and_causes_by_name_whatever_came_first():
    """Rows by name, as summary.json's keys are: two sweeps that found the same things list
    them alike, whichever seed met which first."""
    s = Summary()
    s.add(result(1, violation=Invariant.LIVENESS, superseded=["unclean-election"]))
    s.add(result(2, violation=Invariant.ACKED_WRITE_LOST, superseded=["power-loss"]))
    names = [k for k, _ in s.rows() if k.startswith("  ")]
    assert names == sorted([f"  {Invariant.ACKED_WRITE_LOST.value}", f"  {Invariant.LIVENESS.value}"]) + [
        "  power-loss", "  unclean-election"]


@pytest.mark.parametrize("back", [2000, 1500])
def test_a_timeline_draws_each_replicas_hw_and_leo_and_breaks_them_while_it_is_down(tmp_path, monkeypatch, back):
    """The offsets plot of a partition: an LEO and an HW line for the leader's replica and the
    follower's, each with its own values, and the follower's two broken (a NaN) across the
    time it was down and had no samples, be it a second or a single sample missed (a gap
    of two sample periods); the title names the run and its verdict."""
    import math

    import matplotlib.pyplot as plt

    samples = []
    for t in range(0, 3000, 250):
        up = not 1000 < t < back  # broker 2 is down from 1.0 s until it is sampled again at `back`
        samples.append((t, "t-0", 1, -1, -1, 2, (1, 2) if up else (1,)))
        samples.append((t, "t-0", 1, t // 250, t // 250 + 1, 1, (1, 2)))  # the leader: HW one below its LEO
        if up:
            samples.append((t, "t-0", 2, t // 250 - 1, t // 250 - 1, 0, ()))
    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig) or close(fig))
    timeline_png(result(1, violation=Invariant.ACKED_WRITE_LOST, samples=samples), tmp_path / "t.png")
    assert figures[0].get_suptitle() == "s1 seed 1: 1-acked-write-lost"  # the invariant as the checker names it
    lines = {line.get_label(): line for line in figures[0].axes[0].get_lines()}
    assert sorted(lines) == ["HW 1", "HW 2", "LEO 1", "LEO 2"]
    assert list(lines["LEO 1"].get_ydata()) == [t // 250 + 1 for t in range(0, 3000, 250)]
    assert list(lines["HW 1"].get_ydata()) == [t // 250 for t in range(0, 3000, 250)]
    for label in ("LEO 2", "HW 2"):
        xs = list(lines[label].get_xdata())
        assert xs[:5] == [0.0, 0.25, 0.5, 0.75, 1.0] and math.isnan(xs[5]), label
        assert xs[6:] == [t / 1000 for t in range(back, 3000, 250)], label


def _timeline_figure(tmp_path, monkeypatch, r, max_partitions=4):
    """The figure ``timeline_png`` draws for ``r`` (taken as it is made), and the PNG."""
    import matplotlib.pyplot as plt

    made = []
    subplots = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: made.append(subplots(*a, **k)) or made[-1])
    path = timeline_png(r, tmp_path / "t.png", max_partitions)
    assert path.stat().st_size > 1000
    return made[0][0]


def _two_partitions(offbeat=False):
    """Samples of t-0 and t-1 every 250 ms up to 2.75 s: broker 1 leads with ISR {1, 2}
    until 1.0 s, no leader (ISR {2}) until 1.5 s, then broker 2 leads, ISR {2} until
    2.5 s and {1, 2} after; both replicas sampled throughout.  ``offbeat`` adds one
    sampling instant off the beat, at 1.1 s."""
    samples = []
    for t in sorted([*range(0, 3000, 250), *([1100] if offbeat else [])]):
        leader = 1 if t < 1000 else 0 if t < 1500 else 2
        isr = (1, 2) if t < 1000 or t >= 2500 else (2,)
        for tp in ("t-0", "t-1"):
            samples.append((t, tp, leader, -1, -1, 2, isr))
            samples += [(t, tp, b, t // 250, t // 250 + b, int(b == leader), isr if b == leader else ())
                        for b in (1, 2)]
    return samples


def test_a_timeline_draws_each_brokers_isr_stays_and_the_leader_stepping_at_each_sample(tmp_path, monkeypatch):
    """The leader plot of a partition: a bar per broker for each stay in the ISR (from its
    start, as wide as the stay), a tick per broker and one for "no leader" (0), the ISR
    named once in the legend, and the leader as a step that changes at the sample where it
    changed."""
    fig = _timeline_figure(tmp_path, monkeypatch, result(1, samples=_two_partitions()))
    lead = fig.axes[1]
    extents = sorted((round(e.x0, 3), round(e.x1, 3), round((e.y0 + e.y1) / 2, 3))
                     for bars in lead.collections for e in (p.get_extents() for p in bars.get_paths()))
    # Broker 1 in the ISR from 0 to 1.0 s and from 2.5 s to the last sample (2.75 s); broker 2 throughout.
    assert extents == [(0.0, 1.0, 1.0), (0.0, 2.75, 2.0), (2.5, 2.75, 1.0)]
    assert list(lead.get_yticks()) == [0, 1, 2]
    assert [t.get_text() for t in lead.get_legend().get_texts()] == ["in the ISR", "leader (0: none)"]
    (step,) = [line for line in lead.get_lines() if line.get_label() == "leader (0: none)"]
    assert step.get_drawstyle() == "steps-post"
    assert list(step.get_ydata()) == [1] * 4 + [0] * 2 + [2] * 6


def test_a_timeline_marks_each_fault_on_every_plot_and_names_it_once_at_its_time(tmp_path, monkeypatch):
    """Every plot gets a vertical line at each fault's time in seconds, red for a crash and
    grey for anything else; the names go once along the top of the first plot, as words;
    and the plots share one time axis, so that a fault lines up with what it did below."""
    faults = [(500, "crash", 1), (1200, "controlled_shutdown", 2), (2000, "restart", 1), (2200, "heal", None)]
    fig = _timeline_figure(tmp_path, monkeypatch, result(1, samples=_two_partitions(), faults=faults))
    assert len(fig.axes) == 4
    assert all(fig.axes[0].get_shared_x_axes().joined(fig.axes[0], ax) for ax in fig.axes[1:])
    for ax in fig.axes:
        marks = [(line.get_xdata()[0], line.get_color()) for line in ax.get_lines() if line.get_label().startswith("_")]
        assert marks == [(0.5, "red"), (1.2, "grey"), (2.0, "grey"), (2.2, "grey")]
    assert [(a.get_text(), a.xy[0]) for a in fig.axes[0].texts] == [
        ("crash 1", 0.5), ("controlled shutdown 2", 1.2), ("restart 1", 2.0), ("heal", 2.2)]
    assert [len(ax.texts) for ax in fig.axes[1:]] == [0, 0, 0]


def test_a_timeline_names_each_partition_dashes_its_hws_and_takes_the_usual_sample_period(tmp_path, monkeypatch):
    """Each offsets plot is labelled with its partition, each leader plot "broker"; HW
    lines are dashed, LEO lines solid; and one sampling instant off the beat (1.1 s) does
    not make the sample period 0.1 s, which would break every line at every ordinary
    0.25 s step."""
    import math

    fig = _timeline_figure(tmp_path, monkeypatch, result(1, samples=_two_partitions(offbeat=True)))
    assert [ax.get_ylabel() for ax in fig.axes[::2]] == ["t-0\noffset", "t-1\noffset"]
    assert [ax.get_ylabel() for ax in fig.axes[1::2]] == ["broker", "broker"]  # what the leader plots count in
    for ax in fig.axes[::2]:
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert sorted(lines) == ["HW 1", "HW 2", "LEO 1", "LEO 2"]
        assert {label: line.get_linestyle() for label, line in lines.items()} == {
            "HW 1": "--", "HW 2": "--", "LEO 1": "-", "LEO 2": "-"}
        assert not any(math.isnan(x) for line in lines.values() for x in line.get_xdata())


@pytest.mark.parametrize("instants", [0, 1])
def test_a_timeline_of_a_run_with_no_samples_or_one_sampling_instant_is_still_drawn(tmp_path, monkeypatch, instants):
    """A result with no samples (``timeline_png`` of a run that recorded none), or with
    samples at one instant only (no step between two to take the period from): its
    timeline is drawn all the same, with its faults and title, not a traceback that would
    end the sweep, nor matplotlib's warning about a legend with nothing to name."""
    import warnings

    samples = [(0, "t-0", 1, -1, -1, 2, (1, 2)), (0, "t-0", 1, 0, 0, 1, (1, 2)), (0, "t-0", 2, 0, 0, 0, ())]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = _timeline_figure(tmp_path, monkeypatch,
                               result(1, samples=samples[:3 * instants], faults=[(0, "crash", 1)]))
    assert fig.get_suptitle() == "s1 seed 1: ok"


def test_a_timeline_closes_its_figure(tmp_path):
    """A sweep with --timeline draws a figure per seed: each is closed once saved, not kept
    open (memory, and matplotlib's warning past 20 open figures)."""
    import matplotlib.pyplot as plt

    plt.close("all")
    timeline_png(result(1, samples=_two_partitions()), tmp_path / "t.png")
    assert plt.get_fignums() == []


def test_the_table_groups_the_speed_in_thousands_and_has_no_failing_seeds_row_without_failures():
    s = Summary()
    s.add(result(1, events=1_234_567, wall_s=1.0))
    rows = dict(s.rows())
    assert rows["simulated events / wall s"] == "1,234,567"
    assert "failing seeds" not in rows  # a clean sweep: no row to leave empty


def test_runs_with_a_violation_counts_runs_not_the_invariants_they_broke():
    """Three of four seeds failed, two on the same invariant: the table says 3 runs with a
    violation, then 2 and 1 under each invariant, as summary.json's failed seeds say."""
    s = Summary()
    for seed, invariant in [(1, Invariant.ACKED_WRITE_LOST), (2, None), (3, Invariant.ACKED_WRITE_LOST),
                            (4, Invariant.LIVENESS)]:
        s.add(result(seed, violation=invariant))
    rows = dict(s.rows())
    assert rows["runs with a violation"] == "3" == str(len(s.to_dict()["failed_seeds"]))
    assert (rows["  1-acked-write-lost"], rows["  liveness"]) == ("2", "1")


def test_the_lost_acks_causes_are_listed_by_name_whatever_seed_met_them_first():
    """The lost acks' causes are rows by name too, as the invariants' and the consumed-then-
    lost causes' are: a sweep whose first loss was an unclean election still lists
    power-loss first, under the lost acks' total."""
    s = Summary()
    s.add(result(1, losses=["unclean-election"]))
    s.add(result(2, losses=["power-loss", "unclean-election"]))
    out = s.rows()
    at = out.index(("lost acks (counted, attributed)", "3"))
    assert out[at + 1:at + 3] == [("  power-loss", "1"), ("  unclean-election", "2")]


def test_the_tables_values_are_right_aligned_under_their_heading():
    """Figures of different widths line up on their last digit, as numbers in a column do."""
    from rich.console import Console

    s = Summary()
    s.add(result(1, events=1_234_567, wall_s=1.0))
    console = Console(width=120, record=True, color_system=None)
    console.print(s.table("t"))
    lines = console.export_text().splitlines()
    runs = next(x for x in lines if " runs " in x)
    speed = next(x for x in lines if "simulated events / wall s" in x)
    assert runs.rstrip().endswith("1 │") and speed.rstrip().endswith("1,234,567 │")
    assert runs.rindex("1 │") == speed.rindex("7 │")  # the last digits in one column


def test_a_timeline_gives_an_isr_bar_to_a_follower_that_never_leads(tmp_path, monkeypatch):
    """Most ISR members are followers that never lead: broker 1 leads throughout with ISR
    {1, 2, 3} until 0.5 s and {1, 2} after; brokers 2 and 3 get their bars and ticks too."""
    samples = []
    for t in range(0, 1000, 250):
        samples.append((t, "t-0", 1, -1, -1, 2, (1, 2, 3) if t < 500 else (1, 2)))
        samples += [(t, "t-0", b, t // 250, t // 250 + 1, int(b == 1), ()) for b in (1, 2, 3)]
    lead = _timeline_figure(tmp_path, monkeypatch, result(1, samples=samples)).axes[1]
    extents = sorted((round(e.x0, 3), round(e.x1, 3), round((e.y0 + e.y1) / 2, 3))
                     for bars in lead.collections for e in (p.get_extents() for p in bars.get_paths()))
    assert extents == [(0.0, 0.5, 3.0), (0.0, 0.75, 1.0), (0.0, 0.75, 2.0)]
    assert list(lead.get_yticks()) == [0, 1, 2, 3]


def test_a_timeline_keeps_its_legends_clear_of_the_fault_names_and_labels_time_once_at_the_bottom(
        tmp_path, monkeypatch):
    """The fault names hang, written upwards, from the top of the first offsets plot, each
    just left of its line, so each offsets legend sits in the lower right, its entries in
    a row, and each leader legend in the upper left, where no name is; and the time axis,
    shared by every plot, is labelled once, under the last."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    faults = [(500, "crash", 1), (1200, "controlled_shutdown", 2)]
    fig = _timeline_figure(tmp_path, monkeypatch, result(1, samples=_two_partitions(), faults=faults))
    canvas = FigureCanvasAgg(fig)  # the figure was closed once saved: draw it again to measure it
    canvas.draw()
    renderer = canvas.get_renderer()

    def quadrant(ax, artist):
        box, inner = ax.get_window_extent(renderer), artist.get_window_extent(renderer)
        middle_x, middle_y = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
        return ("upper" if inner.y0 > middle_y else "lower" if inner.y1 < middle_y else "middle",
                "right" if inner.x0 > middle_x else "left" if inner.x1 < middle_x else "centre")

    top = fig.axes[0].get_window_extent(renderer)
    for name in fig.axes[0].texts:
        box = name.get_window_extent(renderer)
        assert top.y1 - 0.1 * top.height < box.y1 <= top.y1, name.get_text()  # hung from the top
        assert box.height > box.width, name.get_text()  # written upwards: close faults' names do not overlap
        # Just before its line, ending there: over what came before the fault, not what it did.
        line_x = fig.axes[0].transData.transform((name.xy[0], 0))[0]
        assert line_x - 2 <= box.x1 <= line_x + 0.5, (name.get_text(), box.x1, line_x)
    assert [quadrant(ax, ax.get_legend()) for ax in fig.axes] == [("lower", "right"), ("upper", "left")] * 2
    for ax in fig.axes[::2]:  # an offsets legend's entries side by side (six a row), not a column over the lines
        assert len({round(entry.get_window_extent(renderer).y0) for entry in ax.get_legend().get_texts()}) == 1
    assert [ax.get_xlabel() for ax in fig.axes] == [""] * 3 + [
        "virtual time (s); vertical lines: faults, named at the top (red: crashes)"]
    # Laid out tight: the plots and their labels span the figure's width but for a thin margin.
    spans = [ax.get_tightbbox(renderer) for ax in fig.axes]
    assert min(b.x0 for b in spans) < 0.03 * fig.bbox.width and max(b.x1 for b in spans) > 0.97 * fig.bbox.width



def test_a_timeline_draws_a_topics_first_partitions_by_number_not_as_text(tmp_path, monkeypatch):
    """A topic of 12 partitions drawn 4 at most: the timeline shows partitions 0 to 3, the
    topic's first, not 0, 1, 10 and 11 (their names sorted as text), and a topic named
    after it only after them, not its partition 0 beside theirs; a '-' in the topic's name
    is the name's."""
    samples = []
    for t in (0, 250):
        for tp in [*(f"orders-eu-{p}" for p in range(12)), "payments-0", "payments-1"]:
            samples.append((t, tp, 1, -1, -1, 2, (1,)))
            samples.append((t, tp, 1, 0, 0, 1, (1,)))
    fig = _timeline_figure(tmp_path, monkeypatch, result(1, samples=samples), max_partitions=4)
    assert [ax.get_ylabel() for ax in fig.axes[::2]] == [f"orders-eu-{p}\noffset" for p in range(4)]
