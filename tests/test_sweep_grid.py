"""The sweep's pure-Python parts (issue 6, "Sweeps"), without a Spark session.

test_spark_sweep.py runs the sweep on a real local Spark; the fast run
(``-k "not spark"``) leaves that whole module out, its name and its mark say spark.
What needs no JVM is checked here, so the fast run sees it: the grid and its run
order, the scenario a configuration point makes, one run's row, the host's
scratch directories, the report's table rows and the progress bar's task counts
(the fourteenth review, docs/engine-audit.md, SP..).
"""
from __future__ import annotations

import dataclasses
import os
import time

import pytest

from kreplica.spark.sim_runner import (RunConfig, build_scenario, effective_config, history_text,
                                       remove_orphaned_scratch, run, scratch_dir, use_scratch)
from kreplica.spark.sweep import Grid, RunSpec

SCENARIO = "kip101-hw-truncation"
TRUNCATIONS = ["high-watermark", "leader-epoch"]


# ---- the grid ---------------------------------------------------------------------------------

@pytest.mark.parametrize("min_isr_name", ["min_isr", "min.insync.replicas", "min_insync_replicas"])
def test_axes_vary_in_their_canonical_order_whatever_their_names(min_isr_name):
    """min_isr before truncation (AXES), however each is spelled and in whichever order
    written: one grid, one run order, so a re-run resumes the same runs."""
    g = Grid.from_axes([SCENARIO], {"truncation": TRUNCATIONS, min_isr_name: [1, 2]})
    assert [(c.min_isr, c.truncation) for c in g.configs] == [
        (1, "high-watermark"), (1, "leader-epoch"), (2, "high-watermark"), (2, "leader-epoch")]


def test_runs_are_numbered_seed_major_then_configuration_then_scenario():
    g = Grid.from_axes([SCENARIO, "unclean-election"], {"acks": ["0", "1", "all"]}, "5..8")
    assert len(g) == 2 * 3 * 4 and g.seed_count == 4
    expected = [(name, config, seed) for seed in range(5, 9) for config in g.configs
                for name in (SCENARIO, "unclean-election")]
    assert [(s.scenario, s.config, s.seed) for s in map(g.spec, range(len(g)))] == expected


@pytest.mark.parametrize("scenarios, axes, message", [
    ([SCENARIO, "unclean-election", SCENARIO], {}, "scenarios repeat"),
    ([SCENARIO], {"acks": ["all", "-1"]}, "distinct"),
    ([SCENARIO], {"unclean": ["true", True]}, "distinct"),
    ([SCENARIO], {"fault_rate": ["0.5", 0.50]}, "distinct"),
    ([SCENARIO], {"min_isr": [1, 2], "min.insync.replicas": [2]}, "given twice"),
])
def test_a_grid_that_would_run_a_run_twice_is_refused(scenarios, axes, message):
    """Two names for one scenario or one configuration point: every run of it would run
    twice, and the rows would repeat the same (scenario, config_key, seed)."""
    with pytest.raises(ValueError, match=message):
        Grid.from_axes(scenarios, axes)


@pytest.mark.parametrize("axis, value", [
    ("unclean", "yes"), ("unclean", "1"), ("unclean", ""),
    ("fault_rate", "nan"), ("fault_rate", "inf"), ("fault_rate", -0.5),
    # What int() and float() take but a grid means otherwise: 2.9 is not rf 2, true not 1.
    ("rf", 2.9), ("min_isr", True), ("until_ms", 1.5), ("fault_rate", True), ("min_isr", [2]),
])
def test_an_axis_value_the_simulator_cannot_take_is_named(axis, value):
    with pytest.raises(ValueError, match=f"sweep axis {axis}="):
        RunConfig.parse({axis: value})


# ---- a configuration point's scenario ---------------------------------------------------------

def test_fault_rate_scales_the_per_minute_rates_only():
    from kreplica.sim.faults import PER_MINUTE

    """Fractions, durations and max_down are the faults' shapes: a fault rate leaves them."""
    base = build_scenario("random-chaos", RunConfig()).chaos
    doubled = build_scenario("random-chaos", RunConfig(fault_rate=2.0)).chaos
    rates = {"crash", "controlled_shutdown", "pause", "slow_disk", "disk_full", "kill_controller",
             "expire_session", "partition", "cut_store"}
    # cascade is a chance per election (0.15 here), not a rate: scaled by 10 it would be 1.5.
    shapes = {"power_loss_fraction", "torn_fraction", "downtime_ms_max", "pause_ms_max", "partition_ms_max",
              "max_down", "cascade", "cascade_ms_max"}
    assert {f.name for f in dataclasses.fields(base)} == rates | shapes
    assert set(PER_MINUTE) == rates  # what swarm draws, too: a new kind of fault is placed here
    for name in rates | shapes:
        want = getattr(base, name) * (2 if name in rates else 1)
        assert getattr(doubled, name) == want, name
    assert base.power_loss_fraction == 0.3 and base.max_down == 2 and base.cascade == 0.15  # the file's
    # The row's faults_per_minute adds up the rates only.
    config = RunConfig(fault_rate=2.0)
    row = effective_config(build_scenario("random-chaos", config), config)
    assert row["faults_per_minute"] == pytest.approx(2 * sum(getattr(base, name) for name in rates))


def test_a_replication_factor_above_the_brokers_adds_brokers():
    config = RunConfig(rf=5)
    sc = build_scenario("random-chaos", config)
    sc.validate()
    assert sc.brokers == 5 and {t.replication_factor for t in sc.topics} == {5}
    got = effective_config(sc, config)
    assert (got["rf"], got["brokers"]) == (5, 5)


@pytest.mark.parametrize("scenario, fault_rate, expected", [
    (SCENARIO, None, 0.0),  # scripted faults only: no [chaos] table
    ("random-chaos", None, 1.0),  # the file's own rates
    ("random-chaos", 0.0, 0.0),
    ("random-chaos", 0.5, 0.5),
])
def test_the_row_says_the_fault_rate_the_run_had(scenario, fault_rate, expected):
    config = RunConfig(fault_rate=fault_rate)
    sc = build_scenario(scenario, config)
    got = effective_config(sc, config)
    assert got["fault_rate"] == expected
    assert (got["faults_per_minute"] == 0) == (expected == 0)


# ---- one run's row ----------------------------------------------------------------------------

def test_a_run_that_raises_is_a_failing_row_with_its_history(monkeypatch):
    """The exception is the finding: the row names it and carries the history up to it,
    for --replay, as a run with a violation does."""
    from kreplica.sim import world
    from kreplica.sim.history import hash_lines, read_jsonl, run_header

    def liveness(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(world.World, "_liveness", liveness)
    row = run(RunSpec(SCENARIO, RunConfig(truncation="leader-epoch"), 3))
    assert row["error"] == "RuntimeError: boom" and row["converged"] is False
    # No figure, not 0: the report's mean availability leaves it out (the 159th review).
    assert row["availability"] is None and row["throughput"] is None
    assert row["truncation"] == "leader-epoch" and row["violations_total"] == 0
    lines = history_text(row["history_gz"]).splitlines()
    assert len(lines) == row["events"] > 1 and hash_lines(lines) == row["history_hash"]
    # Its wall time too, as any run's: the report's mean wall time counts it (the 178th review).
    assert isinstance(row.get("wall_ms"), float) and row["wall_ms"] > 0


# ---- the host's scratch directories -----------------------------------------------------------

def test_orphaned_scratch_goes_and_a_live_or_young_one_stays(tmp_path, monkeypatch):
    """Here under a private root: the real /dev/shm may hold another sweep's."""
    monkeypatch.setattr("kreplica.sim.world.default_data_root", lambda: str(tmp_path))
    own, locked, orphan, young = (f"kreplica-sweep-{n}" for n in ("own", "locked", "orphan", "young"))
    for name in (own, orphan, young):
        os.makedirs(scratch_dir(name))
    (tmp_path / "kreplica-sim-1").mkdir()  # a lone run's data dir: not a sweep's
    lock = use_scratch(locked)
    try:
        old = time.time() - 120
        for name in (own, locked, orphan, "kreplica-sim-1"):
            os.utime(scratch_dir(name), (old, old))
        assert remove_orphaned_scratch(keep=own) == [scratch_dir(orphan)]
        assert sorted(os.listdir(tmp_path)) == sorted([own, locked, young, "kreplica-sim-1"])
    finally:
        os.close(lock)
    assert remove_orphaned_scratch(keep=own) == [scratch_dir(locked)]


def _use_scratch_in_a_thread(name: str):
    """A task taking the sweep's scratch ``name`` on a thread of its own: the thread and
    the list that gets the lock's descriptor, or the exception use_scratch raised."""
    import threading

    got: list = []

    def take():
        try:
            got.append(use_scratch(name))
        except BaseException as e:  # noqa: BLE001 - the failure is the result
            got.append(e)

    taker = threading.Thread(target=take, daemon=True)
    taker.start()
    return taker, got


def test_the_tasks_of_one_sweep_share_its_scratch_and_it_goes_when_the_last_ends(tmp_path, monkeypatch):
    """A host runs several tasks of a sweep at once, each holding the sweep's lock: a
    second task must neither wait for the first nor fail on the directory it made, and
    the directory is an orphan only once no task holds it."""
    monkeypatch.setattr("kreplica.sim.world.default_data_root", lambda: str(tmp_path))
    name = "kreplica-sweep-shared"
    first = use_scratch(name)
    taker, second = _use_scratch_in_a_thread(name)
    taker.join(10)
    held = [first]
    try:
        assert not taker.is_alive(), "a second task waited for the first's lock"
        assert [type(x) for x in second] == [int], second
        held.append(second[0])
        old = time.time() - 120
        os.utime(scratch_dir(name), (old, old))
        assert remove_orphaned_scratch(keep="") == []
        os.close(held.pop(0))
        assert remove_orphaned_scratch(keep="") == []  # the second task still runs
    finally:
        if taker.is_alive():
            os.close(held.pop(0))  # let the blocked task take the lock and end
            taker.join(10)
            held.extend(fd for fd in second if isinstance(fd, int))
        for fd in held:
            os.close(fd)
    assert remove_orphaned_scratch(keep="") == [scratch_dir(name)]


# ---- the report's table -----------------------------------------------------------------------

def _summary_row(**changes):
    """One row as report.summarize returns it."""
    row = dict(scenario=SCENARIO, config_key=RunConfig(truncation="leader-epoch").key, acks="all",
               min_isr=2, unclean=False, truncation="leader-epoch", rf=3, fault_rate=0.0, until_ms=6000,
               runs=4, loss_runs=0, violation_runs=0, failing_runs=0, errors=0, lost_acks=0,
               unclean_elections=0, superseded_reads=0, mean_availability=0.9876,
               throughput=51.25, acked_writes=100, writes_completed=110, mean_wall_ms=12.0,
               loss_probability=0.0, loss_ci_low=0.0, loss_ci_high=0.6024, violations={},
               lost_by_cause={}, elections=3, reelect_p50_ms=1500.0, reelect_p99_ms=12345.6)
    row.update(changes)
    return row


def test_the_table_shows_a_configurations_errors_beside_its_violations():
    from kreplica.spark.report import _table_rows

    head, body = _table_rows([
        _summary_row(),
        _summary_row(truncation="high-watermark", config_key=RunConfig(truncation="high-watermark").key,
                     violation_runs=1, errors=2, failing_runs=3, loss_runs=1, loss_probability=0.25,
                     loss_ci_low=0.0456, loss_ci_high=0.6994, violations={"1-acked-write-lost": 1},
                     mean_availability=None, reelect_p50_ms=None, reelect_p99_ms=None, throughput=None),
    ])
    assert head[2:5] == ["runs", "P(loss) [95% CI]", "violations"]
    assert body == [
        [SCENARIO, "truncation=leader-epoch", "4", "0.000 [0.000, 0.602] (0/4)", "0", "0", "0", "0",
         "98.76", "1,500 / 12,346", "51.2"],
        [SCENARIO, "truncation=high-watermark", "4", "0.250 [0.046, 0.699] (1/4)",
         "1-acked-write-lost: 1 (+2 errors)", "0", "0", "0", "-", "- / -", "-"],
    ]


# ---- the progress bar's counts ----------------------------------------------------------------

class _Tracker:
    """SparkContext.statusTracker() as the progress bar reads it, with jobs set per poll."""

    def __init__(self) -> None:
        self.jobs: dict[int, tuple[str, dict[int, tuple[int, int]]]] = {}

    def getJobIdsForGroup(self, group):
        return list(self.jobs)

    def getJobInfo(self, job_id):
        status, stages = self.jobs[job_id]
        return type("JobInfo", (), {"status": status, "stageIds": list(stages)})

    def getStageInfo(self, stage_id):
        for _, stages in self.jobs.values():
            if stage_id in stages:
                done, tasks = stages[stage_id]
                return type("StageInfo", (), {"numCompletedTasks": done, "numTasks": tasks,
                                              "numFailedTasks": 0, "numActiveTasks": 0})
        return None


def test_progress_remembers_jobs_the_status_tracker_forgot():
    """Spark keeps spark.ui.retainedJobs jobs; a long sweep's first chunks drop out of the
    tracker, but their tasks stay done.  Jobs not yet submitted count expect_tasks each."""
    from kreplica.spark.progress import SparkProgress

    tracker = _Tracker()
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    bar = SparkProgress(sc, "g", expect_jobs=3, expect_tasks=4)
    tracker.jobs = {1: ("RUNNING", {10: (1, 4)})}
    counts = bar.tracker.poll()
    assert (counts.completed, counts.total) == (1, 4)
    assert bar._total(counts) == 4 + 2 * 4
    # Job 1 done (its second stage skipped), then forgotten while job 2 runs.
    tracker.jobs = {1: ("SUCCEEDED", {10: (4, 4), 11: (0, 2)})}
    bar.tracker.poll()
    tracker.jobs = {2: ("RUNNING", {20: (2, 4)})}
    counts = bar.tracker.poll()
    assert (counts.completed, counts.total) == (4 + 2, 4 + 4)
    assert bar._total(counts) == 8 + 1 * 4


# ---- the forty-fifth review (docs/engine-audit.md, SP2-..) -----------------------------------

@pytest.mark.parametrize("text", ['scenarios = ["random-chaos"]\n[config]\nacks = []\n'])
def test_an_axis_given_no_values_is_refused_not_swept_as_no_runs(text, tmp_path):
    """An empty axis makes no configuration point: a sweep of 0 runs that "succeeds"."""
    with pytest.raises(ValueError, match="configuration points must be given"):
        Grid.from_axes([SCENARIO], {"truncation": []})
    grid = tmp_path / "g.toml"
    grid.write_text(text)
    with pytest.raises(ValueError, match="configuration points must be given"):
        Grid.load(grid)


def test_a_grid_file_may_end_in_yml_as_in_yaml(tmp_path):
    text = "scenarios: [random-chaos]\nseeds: 2..4\nconfig:\n  acks: [1, all]\n"
    (tmp_path / "g.yml").write_text(text)
    (tmp_path / "g.yaml").write_text(text)
    g = Grid.load(tmp_path / "g.yml")
    assert g == Grid.load(tmp_path / "g.yaml") == Grid.from_axes(["random-chaos"], {"acks": ["1", "all"]}, "2..4")


def test_configuration_keys_keep_their_text_so_an_old_sweep_directory_resumes():
    """The key is stored in every row and is how a re-run finds the runs already done:
    its text must not change between versions (a fault rate 2 is "2", not "2.0")."""
    config = RunConfig.parse({"acks": -1, "min_isr": "2", "unclean": "true", "truncation": "leader-epoch",
                              "rf": 3, "fault_rate": 2, "until_ms": "60000"})
    assert config.key == ("acks=all,min_isr=2,unclean=true,truncation=leader-epoch,rf=3,"
                          "fault_rate=2,until_ms=60000")
    assert RunConfig(fault_rate=0.25).key == "acks=-,min_isr=-,unclean=-,truncation=-,rf=-,fault_rate=0.25,until_ms=-"


def test_a_run_that_lost_writes_without_a_violation_carries_its_history():
    """Counted losses (an unclean election's) fail a run without breaking an invariant;
    the report lists the run with a replay, so the row must carry its history."""
    from kreplica.sim.history import hash_lines

    row = run(RunSpec("unclean-election", RunConfig(), 2))
    assert row["lost_acks"] > 0 and row["violations_total"] == 0 and row["error"] is None
    lines = history_text(row["history_gz"]).splitlines()
    assert len(lines) == row["events"] and hash_lines(lines) == row["history_hash"]
    clean = run(RunSpec(SCENARIO, RunConfig(truncation="leader-epoch"), 1))
    assert clean["lost_acks"] == clean["violations_total"] == 0 and clean["history_gz"] is None


def test_every_column_of_a_real_row_survives_the_arrow_schema():
    """What a task hands Spark: the row's maps, array and bytes as they were made."""
    import pyarrow as pa

    from kreplica.spark.sweep import _arrow_schema

    row = run(RunSpec("unclean-election", RunConfig(), 2))
    assert row["lost_by_cause"] and row["reelect_ms"]
    # Reads a loss removed, by cause, as the lost writes are (the 178th review).
    assert sum(row["superseded_by_cause"].values()) == row["superseded_reads"] > 0
    [back] = pa.RecordBatch.from_pylist([row], schema=_arrow_schema()).to_pylist()
    maps = {"violations", "lost_by_cause", "superseded_by_cause"}
    assert {k: dict(v) if k in maps else v for k, v in back.items()} == row


def test_a_task_runs_each_configuration_point_with_its_own_settings_and_releases_the_scratch(
        tmp_path, monkeypatch):
    """run_tasks as an executor runs it, on one Arrow batch: each (scenario, configuration)
    gets its own scenario, runs keep their data in the sweep's scratch, SIGINT is ignored and
    SIGTERM ends the run while it runs, the handlers are put back after, and the task's lock
    goes with it, so the scratch is an orphan once the task is done."""
    import signal

    import pyarrow as pa

    from kreplica.spark import sim_runner
    from kreplica.spark.sweep import run_tasks

    monkeypatch.setattr("kreplica.sim.world.default_data_root", lambda: str(tmp_path))
    seen = []

    def fake_run(spec, sc, data_root=None):
        term = signal.getsignal(signal.SIGTERM)
        with pytest.raises(SystemExit) as stopped:
            term(signal.SIGTERM, None)
        seen.append((spec.config.truncation, sc.config["replica.truncation.strategy"], data_root,
                     signal.getsignal(signal.SIGINT), stopped.value.code))
        return {"scenario": spec.scenario, "config_key": spec.config.key, "seed": spec.seed,
                "truncation": sc.config["replica.truncation.strategy"]}

    monkeypatch.setattr(sim_runner, "run", fake_run)
    grid = Grid.from_axes([SCENARIO], {"truncation": TRUNCATIONS}, "1..2")
    batch = pa.RecordBatch.from_pydict({"scenario": [SCENARIO] * 4, "config_index": [0, 1, 1, 0],
                                        "seed": [1, 1, 2, 2]})
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP))
    name = "kreplica-sweep-task"
    [out] = list(run_tasks(grid, iter([batch]), name))
    order = ["high-watermark", "leader-epoch", "leader-epoch", "high-watermark"]
    assert out.column("truncation").to_pylist() == order
    assert seen == [(t, t, scratch_dir(name), signal.SIG_IGN, 128 + signal.SIGTERM) for t in order]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM),
            signal.getsignal(signal.SIGHUP)) == before
    old = time.time() - 120
    os.utime(scratch_dir(name), (old, old))
    assert remove_orphaned_scratch(keep="") == [scratch_dir(name)]


def test_replay_commands_stay_beside_their_runs_when_a_run_has_no_history(tmp_path):
    """build_report pairs failing runs and commands by position; a row without a history
    (an older sweep's, or one written by hand) has an empty command, not the next run's."""
    import gzip

    from kreplica.spark.report import write_replays

    failing = [{"scenario": SCENARIO, "config_key": "acks=all,rf=3", "seed": 1, "history_gz": None},
               {"scenario": SCENARIO, "config_key": "acks=all,rf=3", "seed": 2,
                "history_gz": gzip.compress(b'{"kind": "run"}\n')}]
    commands = write_replays(failing, tmp_path)
    path = tmp_path / "replays" / SCENARIO / "acks=all_rf=3" / "seed-2.jsonl"
    assert commands == ["", f"kreplica simulate --replay {path.resolve()}"]
    assert path.read_text() == '{"kind": "run"}\n'
    assert not (tmp_path / "replays" / SCENARIO / "acks=all_rf=3" / "seed-1.jsonl").exists()


def test_the_report_says_when_it_lists_only_the_first_failing_runs():
    from kreplica.spark.report import markdown

    row = _summary_row(failing_runs=3)
    failing = [{"scenario": SCENARIO, "config_key": row["config_key"], "seed": 1, "history_hash": "ab" * 32,
                "error": "RuntimeError: boom", "first_violation": None, "lost_acks": 0, "lost_by_cause": {}}]
    md = markdown([row], failing, ["kreplica simulate --replay /r/seed-1.jsonl"], 3, [], "out")
    assert "3 failing runs." in md
    assert "The first 1 of 3:\n\n- `kip101-hw-truncation`" in md
    assert md.endswith("seed 1 (hash `abababababababab`): RuntimeError: boom\n"
                       "  `kreplica simulate --replay /r/seed-1.jsonl`\n")
    assert "The first" not in markdown([row], failing, [""], 1, [], "out")


def test_a_failed_jobs_stages_that_never_ran_are_not_left_to_do():
    """A job that failed (a cancelled chunk, an interrupted sweep) runs no more of its
    stages: as for a job that succeeded, its total is what it completed."""
    from kreplica.spark.progress import TaskTracker

    tracker = _Tracker()
    tracker.jobs = {1: ("FAILED", {10: (2, 4), 11: (0, 3)}), 2: ("SUCCEEDED", {20: (4, 4), 21: (0, 2)})}
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    counts = TaskTracker(sc, "g").poll()
    assert (counts.completed, counts.total) == (6, 6)


def test_more_jobs_than_expected_never_shrink_the_bars_total():
    """A resumed sweep first counts the runs already done, a job of the group that no chunk
    accounts for: jobs seen past the expected ones are not a negative number still to come."""
    from kreplica.spark.progress import SparkProgress

    tracker = _Tracker()
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    bar = SparkProgress(sc, "g", expect_jobs=1, expect_tasks=4)
    tracker.jobs = {1: ("SUCCEEDED", {10: (2, 2)}), 2: ("RUNNING", {20: (1, 4)})}
    counts = bar.tracker.poll()
    assert (counts.completed, counts.total) == (3, 6)
    assert bar._total(counts) == 6


# ---- the sixty-fourth review (docs/engine-audit.md, SP3-..) ----------------------------------

def test_a_grid_file_may_name_its_one_scenario_as_a_string(tmp_path):
    """``scenarios = "random-chaos"`` is one scenario, not one per letter of its name."""
    grid = tmp_path / "g.toml"
    grid.write_text('scenarios = "random-chaos"\nseeds = "1..2"\n')
    assert Grid.load(grid) == Grid.from_axes(["random-chaos"], {}, "1..2")


def test_a_seed_past_32_bits_keeps_its_value_in_the_row():
    """Seeds are any non-negative integers (``--seeds 4294967296..4294967300``); the row's
    seed column must hold them, as the JVM's index arithmetic does (a long)."""
    import pyarrow as pa

    from kreplica.spark.sweep import _arrow_schema, parse_seeds

    first, last = parse_seeds("4294967296..4294967300")
    [back] = pa.RecordBatch.from_pylist([{"scenario": SCENARIO, "seed": last}], schema=_arrow_schema()).to_pylist()
    assert back["seed"] == last == 2**32 + 4


def test_a_stray_file_named_like_a_scratch_directory_is_left_alone(tmp_path, monkeypatch):
    """Every sweep task sweeps the host's data root first; a file there that happens to be
    named ``kreplica-sweep-*`` is not a scratch directory, and must not fail the task."""
    monkeypatch.setattr("kreplica.sim.world.default_data_root", lambda: str(tmp_path))
    stray = tmp_path / "kreplica-sweep-notes"
    stray.write_text("not a sweep's")
    old = time.time() - 120
    os.utime(stray, (old, old))
    assert remove_orphaned_scratch(keep="") == []
    assert stray.read_text() == "not a sweep's"


def test_a_rows_throughput_and_reelection_percentiles_are_the_ones_simulate_prints():
    """The row's per-run figures are `kreplica simulate`'s for the same run: throughput is
    every completed write (acks=1 here, so none is an acks=all ack) per virtual second, and
    the percentiles are p50 and p99 of the re-election times."""
    from kreplica.sim import world
    from kreplica.sim.report import Summary, percentile, writes_per_virtual_s

    config = RunConfig(acks="1")
    row = run(RunSpec("random-chaos", config, 1))
    summary = Summary()
    summary.add(world.run(build_scenario("random-chaos", config), 1))
    printed = summary.to_dict()
    assert printed["acked_writes"] == 0 < printed["writes_completed"]
    assert percentile(row["reelect_ms"], 95) < printed["reelect_ms_p99"]
    assert (row["reelect_p50_ms"], row["reelect_p99_ms"]) == (printed["reelect_ms_p50"], printed["reelect_ms_p99"])
    assert row["throughput"] == writes_per_virtual_s(printed["writes_completed"], printed["virtual_ms"])


def test_the_report_counts_every_run_and_labels_columns_and_axes_as_the_keys_do():
    """The markdown's first line counts runs, not configurations; the "read then lost" and
    "unclean" columns hold their own figures; a float axis is labelled as its key writes it
    (fault_rate=2, not 2.0), so a label can be found among the configurations listed."""
    from kreplica.spark.report import _table_rows, markdown

    rows = [_summary_row(fault_rate=0.5, config_key=RunConfig(fault_rate=0.5).key, runs=4,
                         superseded_reads=7, unclean_elections=2),
            _summary_row(fault_rate=2.0, config_key=RunConfig(fault_rate=2).key, runs=6,
                         superseded_reads=0, unclean_elections=5)]
    head, body = _table_rows(rows)
    assert [dict(zip(head, line))["configuration"] for line in body] == ["fault_rate=0.5", "fault_rate=2"]
    assert [(dict(zip(head, line))["read then lost"], dict(zip(head, line))["unclean"]) for line in body] == [
        ("7", "2"), ("0", "5")]
    md = markdown(rows, [], [], 0, [], "out")
    assert "10 runs in `out`, 2 configurations, 0 failing runs." in md
    assert "fault_rate=2,until_ms=-`" in md


class _FailingTracker(_Tracker):
    """A stage with tasks that failed and tasks still running."""

    def getStageInfo(self, stage_id):
        return type("StageInfo", (), {"numCompletedTasks": 3, "numTasks": 8,
                                      "numFailedTasks": 2, "numActiveTasks": 1})


def test_the_bar_tells_failed_tasks_from_running_ones_and_ends_on_the_last_figures():
    """Failed and running tasks are counted apart (a retried task is not running), and the
    bar, once the sweep is over, shows what the tracker said last, not the previous poll's."""
    import io

    from rich.console import Console

    from kreplica.spark.progress import SparkProgress

    tracker = _FailingTracker()
    tracker.jobs = {1: ("RUNNING", {10: None})}
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    counts = SparkProgress(sc, "g", expect_jobs=1, expect_tasks=8).tracker.poll()
    assert (counts.completed, counts.total, counts.failed, counts.active) == (3, 8, 2, 1)
    # Two jobs' running tasks add up as their failed ones do (the hundred-and-fortieth review).
    tracker.jobs = {1: ("RUNNING", {10: None}), 2: ("RUNNING", {11: None})}
    counts = SparkProgress(sc, "g", expect_jobs=2, expect_tasks=8).tracker.poll()
    assert (counts.completed, counts.total, counts.failed, counts.active) == (6, 16, 4, 2)

    tracker = _Tracker()
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    out = io.StringIO()
    bar = SparkProgress(sc, "g", expect_jobs=1, expect_tasks=4, interval_s=3600,
                        console=Console(file=out, width=120))
    with bar:
        tracker.jobs = {1: ("RUNNING", {10: (1, 4)})}
        bar.refresh()
        tracker.jobs = {1: ("SUCCEEDED", {10: (4, 4)})}
    [task] = bar._progress.tasks
    assert (bar.last.completed, task.completed, task.total) == (4, 4, 4)
    # The bar is stopped, its last figures left printed (the hundred-and-twenty-first
    # review): a display left running goes on redrawing over what the sweep prints next.
    assert not bar._progress.live.is_started
    assert out.getvalue().startswith("sweep ") and "4/4 tasks (0 running)" in out.getvalue()


@pytest.mark.parametrize("k, n, low, high", [(0, 10, 0.0, 0.2775), (1, 4, 0.0456, 0.6994), (5, 10, 0.2366, 0.7634)])
def test_the_wilson_sql_gives_the_textbook_interval(k, n, low, high):
    """The report's 95% Wilson score interval, its SQL evaluated here in Python, against
    published values; test_spark_sweep checks the same SQL on Spark."""
    import math

    from kreplica.spark.report import wilson_sql

    def evaluate(sql):
        python = sql.replace("greatest(0D,", "max(0.0,").replace("least(1D,", "min(1.0,")
        return eval(python, {"sqrt": math.sqrt, "max": max, "min": min, "k": float(k), "n": float(n)})

    lo_sql, hi_sql = wilson_sql("k", "n")
    assert (round(evaluate(lo_sql), 4), round(evaluate(hi_sql), 4)) == (low, high)


# ---- the eighty-third review (docs/engine-audit.md, SP4-..) ----------------------------------

def test_counts_in_the_table_and_the_failing_runs_are_listed_by_name_whatever_order_they_came_in():
    """Spark's maps come back in no fixed order (map_from_entries over collect_list): the
    table and the report list a configuration's counts by name, so one sweep reads the same
    each time it is reported."""
    from kreplica.spark.report import _table_rows, markdown

    row = _summary_row(violations={"4-committed-offset-regressed": 1, "1-acked-write-lost": 2}, lost_acks=3,
                       lost_by_cause={"unclean-election": 2, "power-loss": 1})
    head, [line] = _table_rows([row])
    cells = dict(zip(head, line))
    assert cells["violations"] == "1-acked-write-lost: 2, 4-committed-offset-regressed: 1"
    assert cells["lost acks"] == "3 (power-loss: 1, unclean-election: 2)"
    failing = [{"scenario": SCENARIO, "config_key": row["config_key"], "seed": 4, "history_hash": "cd" * 32,
                "error": None, "first_violation": None, "lost_acks": 3,
                "lost_by_cause": {"unclean-election": 2, "power-loss": 1}}]
    assert markdown([row], failing, [""], 1, [], "out").endswith(
        "seed 4 (hash `cdcdcdcdcdcdcdcd`): 3 lost acknowledged writes (power-loss: 1, unclean-election: 2)\n")


class _ForgetfulTracker(_Tracker):
    """A job id the group lists whose info Spark no longer has (it was just dropped)."""

    def getJobInfo(self, job_id):
        return None if job_id == 9 else super().getJobInfo(job_id)


def test_a_job_the_tracker_has_no_info_for_is_not_counted_as_seen():
    """Only a job whose figures were read stands for one of the expected jobs: one listed
    without its info leaves its expected tasks in the bar's total."""
    from kreplica.spark.progress import SparkProgress

    tracker = _ForgetfulTracker()
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    bar = SparkProgress(sc, "g", expect_jobs=2, expect_tasks=4)
    tracker.jobs = {9: ("RUNNING", {}), 1: ("RUNNING", {10: (1, 4)})}
    counts = bar.tracker.poll()
    assert (bar.tracker.jobs_seen, counts.completed, counts.total) == (1, 1, 4)
    assert bar._total(counts) == 4 + 1 * 4


def test_a_grid_file_without_seeds_runs_seed_1_as_the_flags_do(tmp_path):
    """``--seeds`` defaults to 1; a grid file that names no seeds runs the same one run."""
    grid = tmp_path / "g.toml"
    grid.write_text('scenarios = ["random-chaos"]\n')
    loaded = Grid.load(grid)
    assert loaded.seeds == (1, 1) and loaded == Grid.from_axes(["random-chaos"], {})
    assert loaded.spec(0).seed == 1


def test_a_yaml_grid_error_is_placed_by_the_line_and_column_an_editor_shows(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text('scenarios:\n  - random-chaos\nseeds: "1..2"\nconfig: {acks: [1, all}\n')
    with pytest.raises(ValueError, match=r"not valid YAML: .*but got '\}' \(line 4, column 23\)$"):
        Grid.load(grid)


def test_the_rate_counts_the_runs_this_sweep_ran_not_those_it_skipped():
    """A resumed sweep that found 30 runs done and ran 10 in 5 s ran 2 runs/s."""
    from kreplica.spark.sweep import SweepStats

    assert SweepStats(total=40, already_done=30, executed=10, wall_s=5.0).runs_per_second == 2.0
    assert SweepStats(total=40, already_done=40, executed=0, wall_s=0.0).runs_per_second == 0.0


def test_a_stop_signal_ends_the_task_through_a_run_it_is_not_a_finding(monkeypatch):
    """A run's own exception is recorded in its row; the SystemExit a task's SIGTERM raises
    (see stopped_by_signals) is not the simulator's and must end the task, not become a
    failing row of a run that never finished."""
    from kreplica.sim import world

    def stopped(self):
        raise SystemExit(128 + 15)

    monkeypatch.setattr(world.World, "_liveness", stopped)
    with pytest.raises(SystemExit):
        run(RunSpec(SCENARIO, RunConfig(truncation="leader-epoch"), 3))


def test_a_failing_rows_history_is_the_same_bytes_whenever_it_ran():
    """The gzip of a history carries no time stamp (mtime 0): two runs of one seed give the
    same bytes, whatever the clock said."""
    import gzip
    import struct

    row = run(RunSpec("unclean-election", RunConfig(), 2))
    gz = row["history_gz"]
    assert gz and struct.unpack("<I", gz[4:8])[0] == 0
    assert gzip.decompress(gz).decode() == history_text(gz)
    # A JSON-lines file as `kreplica simulate --history` writes it: every line, the last
    # included, ends in a newline (the hundred-and-fortieth review).
    text = history_text(gz)
    assert text.endswith("}\n") and text == "".join(line + "\n" for line in text.splitlines())


def test_a_hangup_ends_a_sweep_tasks_run_as_sigterm_does():
    """SIGHUP (an executor's Python daemon losing its parent) raises SystemExit in a task as
    SIGTERM does, so the run in flight closes its World; SIGINT stays ignored."""
    import signal

    from kreplica.spark.sim_runner import stopped_by_signals

    before = {sig: signal.getsignal(sig) for sig in stopped_by_signals.SIGNALS}
    with stopped_by_signals():
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with pytest.raises(SystemExit) as stopped:
                signal.getsignal(sig)(sig, None)
            assert stopped.value.code == 128 + sig
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert {sig: signal.getsignal(sig) for sig in stopped_by_signals.SIGNALS} == before


# ---- the hundred-and-second review (docs/engine-audit.md, SP5-..) ----------------------------

def test_the_bars_total_counts_the_expected_tasks_before_the_first_poll_and_it_shows_each_note():
    """Before any job exists the bar is sized from ``expect_jobs * expect_tasks``, not left
    without a total (an indeterminate bar) until the tracker is first polled; what the
    driver notes (the chunk it is at) is the bar's text from the next poll on."""
    import io

    from rich.console import Console

    from kreplica.spark.progress import SparkProgress

    tracker = _Tracker()
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    bar = SparkProgress(sc, "g", expect_jobs=3, expect_tasks=4, interval_s=3600,
                        console=Console(file=io.StringIO()))
    with bar:
        [task] = bar._progress.tasks
        assert (task.completed, task.total) == (0, 12)
        bar.note("sweep: chunk 2/3")
        bar.refresh()
        assert task.description == "sweep: chunk 2/3"
        # Each poll sizes the bar again from the jobs seen and the jobs still to come.
        assert (task.completed, task.total) == (0, 12)
        tracker.jobs = {1: ("RUNNING", {10: (1, 4)})}
        bar.refresh()
        assert (task.completed, task.total) == (1, 4 + 2 * 4)


class _StageForgettingTracker(_Tracker):
    """A job still listing a stage the tracker has already dropped (getStageInfo: None)."""

    forgotten: set = set()

    def getStageInfo(self, stage_id):
        return None if stage_id in self.forgotten else super().getStageInfo(stage_id)


def test_a_stage_the_tracker_dropped_keeps_the_figures_last_seen_for_it():
    """Spark drops old stages (spark.ui.retainedStages) while their job still names them; the
    poll keeps what it saw of such a stage last, rather than dying on the None (which would
    end the polling thread and freeze the bar)."""
    from kreplica.spark.progress import TaskTracker

    tracker = _StageForgettingTracker()
    sc = type("Context", (), {"statusTracker": lambda self: tracker})()
    tasks = TaskTracker(sc, "g")
    tracker.jobs = {1: ("RUNNING", {10: (4, 4), 11: (1, 3)})}
    counts = tasks.poll()
    assert (counts.completed, counts.total) == (5, 7)
    tracker.jobs = {1: ("RUNNING", {10: (9, 9), 11: (2, 3)})}
    tracker.forgotten = {10}
    counts = tasks.poll()
    assert (counts.completed, counts.total) == (4 + 2, 4 + 3)


def test_a_yaml_grid_whose_config_table_is_left_empty_keeps_the_scenarios_values(tmp_path):
    """``config:`` with every axis commented out is YAML's null: no axis, one configuration
    point, as a grid without the key."""
    grid = tmp_path / "g.yaml"
    grid.write_text("scenarios: [random-chaos]\nseeds: 1..2\nconfig:\n  # acks: [1, all]\n")
    loaded = Grid.load(grid)
    assert loaded.configs == (RunConfig(),) and len(loaded) == 2


class _SweepContext:
    """What run_sweep asks of the SparkContext before and after its chunks."""

    defaultParallelism = 3

    def __init__(self):
        self.properties: list = []
        self.interrupt_on_cancel = None

    def setJobGroup(self, group, description, interruptOnCancel=False):
        self.properties.append(("spark.jobGroup.id", group))
        self.interrupt_on_cancel = interruptOnCancel

    def setLocalProperty(self, key, value):
        self.properties.append((key, value))


@pytest.mark.parametrize("fails", [False, True], ids=["ends", "fails"])
def test_a_sweep_runs_four_tasks_per_core_per_chunk_and_leaves_its_job_group(fails, monkeypatch):
    """Without ``tasks_per_chunk`` a chunk is four tasks per core (Spark's default
    parallelism) of ``runs_per_task`` runs; however the chunks end, the driver thread leaves
    the sweep's job group, so the report's jobs that follow are not the sweep's (a bar
    polling the group, a cancel of the group).  The group's jobs are cancelled with their
    tasks' threads interrupted, and the sweep's scratch on this host is removed however it
    ends (the hundred-and-twenty-first review)."""
    from kreplica.spark import sim_runner, sweep

    asked, removed = [], []

    def run_chunks(spark, grid, out, tasks, chunk, chunks, bar, on_chunk, scratch):
        asked.append((tasks, chunk, chunks, scratch))
        if fails:
            raise RuntimeError("a chunk failed")
        return sweep.SweepStats(total=len(grid), already_done=0)

    bars = []

    class Bar:  # the bar is sized in tasks: a job of each chunk runs `tasks` of them
        def __init__(self, sc, group, *, expect_jobs, expect_tasks, **kwargs):
            bars.append([group, expect_jobs, expect_tasks, "made"])

        def __enter__(self):
            bars[-1][-1] = "shown"
            return self

        def __exit__(self, *exc):
            bars[-1][-1] = "stopped"

    monkeypatch.setattr(sweep, "_run_chunks", run_chunks)
    monkeypatch.setattr(sim_runner, "remove_scratch", removed.append)
    monkeypatch.setattr("kreplica.spark.progress.SparkProgress", Bar)
    sc = _SweepContext()
    spark = type("Session", (), {"sparkContext": sc})()
    grid = Grid.from_axes([SCENARIO], {"truncation": TRUNCATIONS}, "1..100")
    if fails:
        with pytest.raises(RuntimeError):
            sweep.run_sweep(spark, grid, "out", runs_per_task=2, progress=True)
    else:
        sweep.run_sweep(spark, grid, "out", runs_per_task=2, progress=True)
    [(tasks, chunk, chunks, scratch)] = asked
    assert (tasks, chunk, chunks) == (12, 24, 9)  # 200 runs in chunks of 12 tasks x 2 runs
    [(_, group), last] = sc.properties
    assert bars == [[group, 9, 12, "stopped"]]  # 9 jobs of 12 tasks, not of 24 runs
    assert group.startswith("kreplica-sweep-") and last == ("spark.jobGroup.id", None)
    assert sc.interrupt_on_cancel is True
    assert scratch.startswith("kreplica-sweep-") and removed == [scratch]


def test_unclean_is_read_as_true_or_false_in_any_case():
    """``--unclean True`` or a YAML ``"FALSE"`` is the boolean it spells, as Kafka's configs
    take it; the key is the one lower-case spelling, so either resumes the same runs."""
    assert RunConfig.parse({"unclean": "True"}) == RunConfig(unclean=True)
    assert RunConfig.parse({"unclean.leader.election.enable": " FALSE "}).key == RunConfig(unclean=False).key
    # False is a value, not "keep the scenario's": unclean-election's file says true
    # (the hundred-and-twenty-first review).
    sc = build_scenario("unclean-election", RunConfig(unclean=False))
    assert sc.config["unclean.leader.election.enable"] is False
    assert effective_config(sc, RunConfig(unclean=False))["unclean"] is False


def test_a_rows_first_violation_is_the_one_line_that_names_it():
    """The row keeps the violation's first line, what the table and report.md list per
    failing run; the events describe() adds below it are in the row's history."""
    row = run(RunSpec(SCENARIO, RunConfig(truncation="high-watermark"), 1))
    assert row["violations"] == {"3-replica-divergence": 1}
    assert row["first_violation"].startswith("VIOLATION 3-replica-divergence at t=")
    assert "\n" not in row["first_violation"] and "last events touching" not in row["first_violation"]


def test_a_task_run_outside_the_main_thread_leaves_signals_alone():
    """Handlers can be set on the main thread only; elsewhere (a task run on a thread)
    stopped_by_signals does nothing rather than failing the task before its first run."""
    import signal
    import threading

    from kreplica.spark.sim_runner import stopped_by_signals

    before = {sig: signal.getsignal(sig) for sig in stopped_by_signals.SIGNALS}
    seen = []

    def task():
        try:
            with stopped_by_signals() as stopped:
                seen.append(stopped.previous)
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            seen.append(exc)

    thread = threading.Thread(target=task)
    thread.start()
    thread.join()
    assert seen == [{}]
    assert {sig: signal.getsignal(sig) for sig in stopped_by_signals.SIGNALS} == before


# ---- the hundred-and-twenty-first review (docs/engine-audit.md, SP6-..) ----------------------

class _LocalFileSystem:
    """The Hadoop FileSystem calls done_runs makes, over a local directory."""

    def exists(self, path):
        return os.path.exists(path)

    def listStatus(self, path):
        def status(entry):
            name = type("Path", (), {"getName": lambda self: entry.name})()
            return type("FileStatus", (), {"isDirectory": lambda self: entry.is_dir(),
                                           "getPath": lambda self: name})()
        return [status(e) for e in os.scandir(path)]


def test_only_scenario_directories_count_as_rows_already_in_out(tmp_path, monkeypatch):
    """OUT holding only what is not rows -- the staging a writer killed in its first chunk
    left, a report written under it, a marker file -- has no rows, so ``--report-only``
    says "no sweep rows" rather than reporting on an empty table; once a
    ``scenario=...`` directory is there its rows are read."""
    from kreplica.spark import sweep

    monkeypatch.setattr(sweep, "_hadoop_path", lambda spark, out: (_LocalFileSystem(), out))
    read = []

    class Reader:
        def schema(self, schema):
            return self

        def parquet(self, path):
            read.append(path)
            return type("Frame", (), {"select": lambda self, *columns: columns})()

    spark = type("Session", (), {"read": Reader()})()
    out = tmp_path / "out"
    assert sweep.done_runs(spark, str(out)) is None
    (out / "_temporary" / "0").mkdir(parents=True)
    (out / "_report").mkdir()
    (out / "_SUCCESS").write_text("")
    assert sweep.done_runs(spark, str(out)) is None and read == []
    (out / f"scenario={SCENARIO}").mkdir()
    assert sweep.done_runs(spark, str(out)) == sweep.KEY_COLUMNS and read == [str(out)]


def test_a_replay_command_names_its_file_by_an_absolute_path_when_the_report_dir_is_relative(tmp_path, monkeypatch):
    """A sweep whose OUT is not a local path reports to ./kreplica-sweep-report: the replay
    commands in report.md must still work from any directory, so they name the file by
    its absolute path."""
    import gzip
    from pathlib import Path

    from kreplica.spark.report import write_replays

    monkeypatch.chdir(tmp_path)
    failing = [{"scenario": SCENARIO, "config_key": "acks=all", "seed": 3,
                "history_gz": gzip.compress(b'{"kind": "run"}\n')}]
    [command] = write_replays(failing, Path("kreplica-sweep-report"))
    path = tmp_path / "kreplica-sweep-report" / "replays" / SCENARIO / "acks=all" / "seed-3.jsonl"
    assert command == f"kreplica simulate --replay {path.resolve()}" and path.read_text() == '{"kind": "run"}\n'


# ---- the hundred-and-fortieth review (docs/engine-audit.md, SP7-..) --------------------------

@pytest.mark.parametrize("k, n", [(0, 21), (0, 37), (11, 11), (14, 14)])
def test_the_wilson_interval_never_leaves_0_to_1_even_by_a_rounding_error(k, n):
    """At 0 of n (the headline case) the interval's low end is 0 up to rounding, and at n
    of n its high end 1: for these n the plain formula gives -1e-17 or 1 + 2e-16, which the
    table would print as "-0.000"; the SQL clamps both ends into [0, 1]."""
    import math

    from kreplica.spark.report import wilson_sql

    def evaluate(sql):
        python = sql.replace("greatest(0D,", "max(0.0,").replace("least(1D,", "min(1.0,")
        return eval(python, {"sqrt": math.sqrt, "max": max, "min": min, "k": float(k), "n": float(n)})

    low, high = (evaluate(sql) for sql in wilson_sql("k", "n"))
    assert 0.0 <= low < high <= 1.0 and f"{low:.3f}" != "-0.000"


def test_a_replay_of_a_scenario_given_as_a_path_stays_under_the_report_dir(tmp_path):
    """A sweep's scenario may be a TOML file's path (``--scenario ./my.toml``): its
    replays go under the report's replays/ directory, the path's slashes made part of
    one directory name, not a path that leaves it."""
    import gzip

    from kreplica.spark.report import write_replays

    scenario = str(tmp_path / "scenarios" / "mine.toml")
    failing = [{"scenario": scenario, "config_key": "acks=all", "seed": 3,
                "history_gz": gzip.compress(b'{"kind": "run"}\n')}]
    [command] = write_replays(failing, tmp_path / "report")
    [written] = (tmp_path / "report" / "replays").rglob("seed-3.jsonl")
    assert written.relative_to(tmp_path / "report" / "replays").parts == (
        scenario.replace("/", "_"), "acks=all", "seed-3.jsonl")
    assert command == f"kreplica simulate --replay {written}"


# ---- the hundred-and-fifty-ninth review (docs/engine-audit.md, SP8-..) -----------------------

def test_one_configuration_swept_over_several_scenarios_is_named_by_its_key():
    """With nothing varying but the scenario, the table's configuration column (and a
    plot's label) is the configuration's key, not an empty cell."""
    from kreplica.spark.report import _table_rows, label

    rows = [_summary_row(), _summary_row(scenario="unclean-election")]
    head, body = _table_rows(rows)
    key = rows[0]["config_key"]
    assert [dict(zip(head, line))["configuration"] for line in body] == [key, key]
    assert label(rows[0], [], False) == key


def test_a_pipe_in_a_scenario_path_stays_inside_its_report_cell():
    """report.md's table is Markdown: a scenario given as a path with a ``|`` in it is
    escaped, so the row keeps one cell per column."""
    import re

    from kreplica.spark.report import _table_rows, markdown

    row = _summary_row(scenario="./odd|name.toml")
    head, _ = _table_rows([row])
    [line] = [line for line in markdown([row], [], [], 0, [], "out").splitlines()
              if line.startswith("| ./odd")]
    assert line.startswith("| ./odd\\|name.toml | ")
    assert len(re.split(r"(?<!\\)\|", line)) == len(head) + 2


def test_a_report_of_no_rows_writes_no_files(tmp_path, monkeypatch):
    """Nothing to report on writes no report.md claiming 0 runs, no empty plots and not
    even the report directory."""
    from kreplica.spark import report

    monkeypatch.setattr(report, "summarize", lambda spark, runs: [])
    monkeypatch.setattr(report, "failing_runs", lambda spark, runs, limit: ([], 0))
    made = report.build_report(None, None, tmp_path / "report", show=False)
    assert (made.rows, made.failing, made.failing_total, made.markdown, made.plots) == ([], [], 0, None, [])
    assert not (tmp_path / "report").exists()


def test_a_configuration_of_1s_is_keyed_by_numbers_not_by_true():
    """1 equals True in Python, but a key names an integer or rate 1 as ``1``: the text
    only ``unclean`` spells true or false (a rf=1, min_isr=1, fault_rate=1 sweep must find
    its own rows on a re-run, and its label must not read ``rf=true``)."""
    config = RunConfig.parse({"min_isr": 1, "rf": "1", "fault_rate": 1, "unclean": True, "until_ms": 0})
    assert config.key == ("acks=-,min_isr=1,unclean=true,truncation=-,rf=1,fault_rate=1,until_ms=0")
    assert RunConfig(unclean=False, fault_rate=0.0).key.split(",")[2::3] == ["unclean=false", "fault_rate=0"]


def test_a_scenario_whose_topics_differ_in_replication_factor_reports_the_smallest():
    """Without an rf axis the row's rf is the scenario's: for topics of rf 3 and 2, the
    least replicated one (the one a loss reaches first), not the most."""
    sc = build_scenario("random-chaos", RunConfig())
    [topic] = sc.topics
    mixed = dataclasses.replace(sc, topics=(dataclasses.replace(topic, replication_factor=3),
                                            dataclasses.replace(topic, name="u", replication_factor=2)))
    assert effective_config(mixed, RunConfig())["rf"] == 2
    assert effective_config(build_scenario("random-chaos", RunConfig(rf=2)), RunConfig(rf=2))["rf"] == 2


def test_the_tables_labels_read_from_the_left_and_its_figures_from_the_right():
    """The scenario and configuration columns are left-aligned, every figure right-aligned
    (as the simulate summary's values are)."""
    import io

    from rich.console import Console

    from kreplica.spark.report import print_table

    rows = [_summary_row(),
            _summary_row(truncation="high-watermark", config_key=RunConfig(truncation="high-watermark").key,
                         runs=12)]
    console = Console(file=io.StringIO(), width=250)
    print_table(rows, console)
    out = console.file.getvalue()
    assert f"│ {SCENARIO} │ truncation=leader-epoch   │    4 │" in out
    assert f"│ {SCENARIO} │ truncation=high-watermark │   12 │" in out


def test_a_null_axis_value_in_a_grid_file_keeps_the_scenarios_own(tmp_path):
    """In a YAML grid, ``~`` among an axis' values is the point that keeps the scenario's
    value (a baseline beside the overrides), as an axis not given at all does."""
    grid = tmp_path / "g.yaml"
    grid.write_text("scenarios: [random-chaos]\nconfig:\n  unclean: [~, true]\n  min_isr: [~]\n")
    assert Grid.load(grid).configs == (RunConfig(), RunConfig(unclean=True))
    assert RunConfig.parse({"acks": None, "fault_rate": None}) == RunConfig()


def test_a_task_waits_for_a_probe_holding_its_scratch_lock_instead_of_failing(tmp_path, monkeypatch):
    """remove_orphaned_scratch probes a directory with a brief exclusive lock: a task of
    that sweep starting meanwhile waits for its shared lock, it does not fail the task."""
    import fcntl

    monkeypatch.setattr("kreplica.sim.world.default_data_root", lambda: str(tmp_path))
    name = "kreplica-sweep-probed"
    os.close(use_scratch(name))
    probe = os.open(os.path.join(scratch_dir(name), ".in-use"), os.O_RDWR)
    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        taker, got = _use_scratch_in_a_thread(name)
        taker.join(0.3)
        assert taker.is_alive() and got == []
    finally:
        os.close(probe)
    taker.join(10)
    assert [type(x) for x in got] == [int], got
    os.close(got[0])


# ---- the hundred-and-seventy-eighth review (docs/engine-audit.md, SP9-..) --------------------

def test_an_until_of_0_is_laid_over_the_scenarios_own_length():
    """``until_ms`` 0 (the liveness phase at once, as ``kreplica simulate --until 0``) is a
    value of the axis, not "keep the scenario's": the run and its row both have 0."""
    config = RunConfig.parse({"until": 0})
    sc = build_scenario(SCENARIO, config)
    assert build_scenario(SCENARIO, RunConfig()).until_ms > 0
    assert sc.until_ms == 0 and effective_config(sc, config)["until_ms"] == 0


def test_probing_a_busy_scratch_directory_leaves_no_descriptor_open(tmp_path, monkeypatch):
    """Each task probes its host's scratch directories; one a live task holds is left,
    and so is no descriptor of the probe's (a Python worker runs task after task)."""
    from fd_count import fds_under

    monkeypatch.setattr("kreplica.sim.world.default_data_root", lambda: str(tmp_path))
    name = "kreplica-sweep-busy"
    lock = use_scratch(name)
    try:
        old = time.time() - 120
        os.utime(scratch_dir(name), (old, old))
        for _ in range(3):
            assert remove_orphaned_scratch(keep="") == []
        assert fds_under(tmp_path) == 1  # the live task's own lock
    finally:
        os.close(lock)


@pytest.mark.parametrize("name, axis, value, parsed", [
    ("min.insync.replicas", "min_isr", 2, 2), ("min_insync_replicas", "min_isr", 2, 2),
    ("unclean.leader.election.enable", "unclean", "true", True),
    ("replica.truncation.strategy", "truncation", "leader-epoch", "leader-epoch"),
    ("replication.factor", "rf", 2, 2), ("replication_factor", "rf", 2, 2),
    ("fault-rate", "fault_rate", 0.5, 0.5), ("until", "until_ms", 100, 100),
])
def test_each_kafka_name_and_spelling_of_an_axis_is_taken_in_a_grid_file(name, axis, value, parsed):
    """A grid file may name an axis by Kafka's key or the spellings AXIS_ALIASES lists;
    each gives the configuration its own name gives, under the same key."""
    try:
        grid = Grid.from_dict({"scenarios": [SCENARIO], "config": {name: [value]}})
    except ValueError as e:
        pytest.fail(f"{name} refused: {e}")
    assert grid.configs == (RunConfig(**{axis: parsed}),)


def test_a_configuration_never_available_shows_0_and_an_unrecorded_read_count_shows_0():
    """0 mean availability (no live leader in any sample) is a figure, not the "-" of a
    configuration whose every run raised; a read-then-lost sum that is null (rows of a
    sweep written before the column) is shown as 0, not "None".  No write completed in
    all its virtual time is 0.0 writes/s, a figure too (the hundred-and-ninety-fifth review)."""
    from kreplica.spark.report import _table_rows

    head, [line] = _table_rows([_summary_row(mean_availability=0.0, superseded_reads=None, throughput=0.0)])
    cells = dict(zip(head, line))
    assert (cells["avail %"], cells["read then lost"], cells["writes/s"]) == ("0.00", "0", "0.0")


def test_a_loss_interval_a_rounding_error_past_its_estimate_still_plots(tmp_path):
    """Spark's float arithmetic may put the Wilson interval's low end a hair above 0 at 0
    of n, or its high end a hair below 1 at n of n; matplotlib refuses negative error
    bars, so the plot clamps them and the three plots are written."""
    from kreplica.spark.report import plot

    rows = [_summary_row(loss_ci_low=1e-17),
            _summary_row(truncation="high-watermark", config_key=RunConfig(truncation="high-watermark").key,
                         loss_runs=4, loss_probability=1.0, loss_ci_low=0.3976, loss_ci_high=1.0 - 1e-16)]
    try:
        paths = plot(rows, tmp_path)
    except ValueError as e:
        pytest.fail(f"the plot refused its error bars: {e}")
    assert [p.name for p in paths] == ["loss_probability.png", "availability.png", "reelection.png"]
    assert all(p.stat().st_size > 0 for p in paths)


def test_report_md_links_its_plots_by_their_names_beside_it(tmp_path):
    """The plots are written beside report.md and linked by name, so the report directory
    can be moved, copied or served and still show them."""
    from kreplica.spark.report import markdown

    plots = [tmp_path / "report" / "loss_probability.png", tmp_path / "report" / "availability.png"]
    md = markdown([_summary_row()], [], [], 0, plots, "out")
    assert "## Plots\n\n![loss_probability](loss_probability.png)\n![availability](availability.png)\n" in md
    assert str(tmp_path) not in md


def test_a_report_that_lists_none_of_its_failing_runs_does_not_say_none_failed():
    """``--max-failing 0`` lists no failing run: under a headline of 3 failing runs the
    section says none of them is listed, not "None." as when nothing failed."""
    from kreplica.spark.report import markdown

    md = markdown([_summary_row(failing_runs=3)], [], [], 3, [], "out")
    assert "3 failing runs." in md and md.endswith("## Failing runs\n\nNone of the 3 listed.\n")
    assert markdown([_summary_row()], [], [], 0, [], "out").endswith("## Failing runs\n\nNone.\n")


def test_axis_values_with_blanks_after_the_commas_are_the_configurations_written_without():
    """``--truncation "high-watermark, leader-epoch"`` and ``--acks "1, all"`` split into
    values with a blank in front.  They name the configurations written without it, as
    ``min_isr`` and ``unclean`` values do, under the same keys: a re-run finds their rows."""
    spaced = Grid.from_axes([SCENARIO], {"acks": ["1", " all"], "truncation": ["high-watermark", " leader-epoch "]})
    plain = Grid.from_axes([SCENARIO], {"acks": ["1", "all"], "truncation": ["high-watermark", "leader-epoch"]})
    assert [c.key for c in spaced.configs] == [c.key for c in plain.configs]


# ---- the hundred-and-ninety-fifth review (docs/engine-audit.md, SP10-..) ---------------------

@pytest.mark.parametrize("scenario, min_isr, unclean, truncation, until_ms", [
    ("unclean-election", 1, True, "leader-epoch", 25000),  # set by the scenario file
    (SCENARIO, 2, False, "high-watermark", 20000),  # the file's min.insync.replicas, the broker default truncation
])
def test_a_row_names_the_scenarios_own_value_of_each_axis_the_grid_leaves_alone(
        scenario, min_isr, unclean, truncation, until_ms):
    """A grid that sweeps no axis still records what each run had, as the report labels and
    a query of the Parquet rows read it: the scenario's values, not null."""
    got = effective_config(build_scenario(scenario, RunConfig()), RunConfig())
    assert {k: got[k] for k in ("acks", "min_isr", "unclean", "truncation", "rf", "until_ms", "brokers")} == dict(
        acks="all", min_isr=min_isr, unclean=unclean, truncation=truncation, rf=3, until_ms=until_ms, brokers=3)


# ---- the two-hundred-and-thirty-fifth review (docs/engine-audit.md, SP12-..) -------------------

@pytest.mark.parametrize("text", ["", "# every line commented out\n"], ids=["empty", "comments"])
def test_a_yaml_grid_with_nothing_in_it_is_refused_for_its_missing_scenarios(text, tmp_path):
    """A YAML file holding no document is null to the parser: it names no scenario, as an
    empty TOML file does, and is refused for that, not as a file that is no table."""
    for name, content in (("g.yaml", text), ("g.toml", "")):
        (tmp_path / name).write_text(content)
        with pytest.raises(ValueError, match=r"^grid: 'scenarios' must name at least one scenario$"):
            Grid.load(tmp_path / name)


def test_a_boolean_axis_is_labelled_as_its_key_writes_it():
    """``unclean`` varies: the table's configuration cells say ``unclean=true`` and
    ``unclean=false``, the words the keys listed under the table use."""
    from kreplica.spark.report import _table_rows

    rows = [_summary_row(unclean=u, config_key=RunConfig(unclean=u).key) for u in (True, False)]
    head, body = _table_rows(rows)
    assert [dict(zip(head, line))["configuration"] for line in body] == ["unclean=true", "unclean=false"]
    assert all(f"{line[1]}," in row["config_key"] for line, row in zip(body, rows))
