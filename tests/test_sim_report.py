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
    assert dict(Summary().rows())["time to re-elect p50 / p99 ms"] == "-"
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


def test_a_timeline_draws_each_replicas_hw_and_leo_and_breaks_them_while_it_is_down(tmp_path, monkeypatch):
    """The offsets plot of a partition: an LEO and an HW line for the leader's replica and the
    follower's, each with its own values, and the follower's broken (a NaN) across the
    second it was down and had no samples; the title names the run and its verdict."""
    import math

    import matplotlib.pyplot as plt

    samples = []
    for t in range(0, 3000, 250):
        up = not 1000 < t < 2000  # broker 2 is down from 1.0 s to 2.0 s
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
    xs = list(lines["LEO 2"].get_xdata())
    assert xs[:5] == [0.0, 0.25, 0.5, 0.75, 1.0] and math.isnan(xs[5]) and xs[6:] == [2.0, 2.25, 2.5, 2.75]
