"""History: canonical JSON lines, a running hash, replay headers, scenario round trips."""
from __future__ import annotations

import pytest

from kreplica.sim import scenarios
from kreplica.sim.history import Event, History, hash_lines, read_jsonl, run_header
from kreplica.sim.swarm import swarm_scenario


def test_hash_covers_every_line_and_round_trips_through_a_file(tmp_path):
    a, b = History(), History()
    for h in (a, b):
        h.record(0, "run", seed=3, scenario={"name": "x"})
        h.record(5, "ack", 1, "t-0", offset=4, part="t-0", isr=(1, 2))
    assert a.hash == b.hash
    b.record(6, "crash", 2)
    assert a.hash != b.hash
    path = tmp_path / "h.jsonl"
    b.write_jsonl(path)
    events = read_jsonl(path)
    assert [e.kind for e in events] == ["run", "ack", "crash"]
    assert events[1].data == {"offset": 4, "part": "t-0", "isr": [1, 2]}
    assert hash_lines(path.read_text().splitlines()) == b.hash
    assert run_header(events)["seed"] == 3


def test_every_scenario_loads_and_round_trips_through_its_header():
    assert len(scenarios.names()) >= 11
    for name in scenarios.names():
        sc = scenarios.load(name)
        assert sc.description and sc.until_ms > 0
        assert scenarios.from_dict(sc.to_dict()) == sc, name


def test_swarm_draws_everything_from_the_seed():
    a, b = swarm_scenario(11), swarm_scenario(11)
    assert a == b and a != swarm_scenario(12)
    seen = {swarm_scenario(s).brokers for s in range(60)}
    assert seen == {3, 4, 5, 6, 7}
    for s in range(60):
        sc = swarm_scenario(s)
        rf = sc.topics[0].replication_factor
        assert 2 <= rf <= sc.brokers and 1 <= sc.config["min.insync.replicas"] <= rf
        assert sc.config["replica.truncation.strategy"] in ("high-watermark", "leader-epoch")
        assert 1 <= sc.chaos.max_down < rf  # never every replica of a partition down at once
        assert sc.workload.acks == sc.config["acks"]  # the producers ask for the acks drawn
        assert scenarios.from_dict(sc.to_dict()) == sc
    drawn = [swarm_scenario(s) for s in range(60)]
    assert {sc.config["acks"] for sc in drawn} == {"0", "1", "all"}
    # acks=all, the level invariant 1 holds to, is drawn twice as often as either other level.
    levels = [swarm_scenario(s).config["acks"] for s in range(1, 201)]
    assert levels.count("all") > max(levels.count("1"), levels.count("0")) and levels.count("all") >= 70
    # min.insync.replicas ranges up to the replication factor (acks=all then needs every replica).
    assert {sc.config["min.insync.replicas"] == sc.topics[0].replication_factor for sc in drawn} == {True, False}


def test_a_swarm_keeps_every_broker_its_bases_link_profiles_name(tmp_path):
    """Over a base without a script, the swarm draws 3 to 7 brokers; a base's [nodes.7]
    (or [links."2-6"]) profile names a broker that some draws left out, and those seeds
    could not run ("[nodes.7] names no broker", a traceback midway through --seeds). Every
    draw now keeps the brokers the profiles name."""
    base = tmp_path / "seven.toml"
    base.write_text('extends = "random-chaos"\nname = "seven"\nbrokers = 7\n\n[nodes.7]\nreorder = true\n')
    link = tmp_path / "six.toml"
    link.write_text('extends = "random-chaos"\nname = "six"\nbrokers = 6\n\n[links."2-6"]\nreorder = true\n')
    for path, fewest in ((base, 7), (link, 6)):
        loaded = scenarios.load(str(path))
        drawn = [swarm_scenario(s, loaded) for s in range(40)]
        assert {sc.brokers for sc in drawn} == set(range(fewest, 8)), path.name
        for sc in drawn:
            sc.validate()


def test_a_partitions_trace_carries_the_faults_recorded_among_its_events():
    h = History(keep_all=False, tail_per_partition=4)
    h.record(0, "ack", 1, "t-0", offset=0)
    h.record(1, "crash", 1)  # touches no partition
    for i in range(1, 4):
        h.record(2 + i, "ack", 2, "t-0", offset=i)
    h.record(9, "ack", 2, "t-1", offset=0)
    trace = h.tail("t-0")
    assert [e.kind for e in trace] == ["ack", "crash", "ack", "ack", "ack"]
    assert [e.kind for e in h.tail("t-0", 3)] == ["ack", "ack", "ack"]  # the crash is older than these
    # A violation of the whole cluster gets the last events of any kind, even without keep_all.
    assert [(e.kind, e.tp) for e in h.tail(None, 2)] == [("ack", "t-0"), ("ack", "t-1")]
    h.record(10, "crash", 2)  # and those of no partition: a controller-epoch violation's crash
    assert [(e.kind, e.tp) for e in h.tail(None, 2)] == [("ack", "t-1"), ("crash", None)]


def test_a_kip101_loss_trace_shows_the_faults_among_its_events():
    from dataclasses import replace

    from kreplica.sim.world import World

    sc = scenarios.load("kip101-hw-truncation").with_config(**{"replica.truncation.strategy": "high-watermark"})
    for seed in range(1, 30):
        r = World(replace(sc), seed, keep_history=False).run()
        if r.violation is not None and r.violation.tp is not None:
            break
    assert r.violation is not None
    # The broker restart that exposes the truncation (it records no partition) is in the trace.
    assert {"restart", "truncate"} <= {e.kind for e in r.violation.trace}, r.violation.describe()


def test_the_hash_covers_every_field_of_an_event_and_a_file_keeps_each():
    def one(time_ms=5, kind="ack", broker=1, tp="t-0", offset=4):
        h = History()
        h.record(time_ms, kind, broker, tp, offset=offset)
        return h

    variants = [one(), one(time_ms=6), one(kind="probe_ack"), one(broker=2), one(tp="t-1"), one(offset=5),
                one(broker=None), one(tp=None), one(broker=0)]  # broker 0 is a broker, not none
    assert len({h.hash for h in variants}) == len(variants)
    for h in variants:
        assert [Event.from_json(line) for line in h.lines] == h.events


def test_a_set_enters_the_history_sorted_whatever_its_iteration_order():
    a, b = History(), History()
    assert list({1, 9}) != list({9, 1})  # same members, another order
    a.record(0, "isr_changed", isr={1, 9}, gone=frozenset({1, 9}))
    b.record(0, "isr_changed", isr={9, 1}, gone=frozenset({9, 1}))
    assert a.lines == b.lines == ['{"data":{"gone":[1,9],"isr":[1,9]},"kind":"isr_changed","seq":0,"t":0}']


def test_a_swarm_seed_draws_the_same_scenario_in_any_process():
    """The draw must not hang on the interpreter's string hashing (PYTHONHASHSEED): a seed
    found in one process, a --jobs worker or CI, is the same scenario in another."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import json; from kreplica.sim.swarm import swarm_scenario; "
            "print(json.dumps([swarm_scenario(s).to_dict() for s in range(1, 6)], sort_keys=True))")
    root = Path(__file__).resolve().parent.parent
    outs = {subprocess.run([sys.executable, "-c", code], cwd=root, env={**os.environ, "PYTHONHASHSEED": h},
                           capture_output=True, text=True, check=True).stdout for h in ("1", "2")}
    here = json.dumps([swarm_scenario(s).to_dict() for s in range(1, 6)], sort_keys=True) + "\n"
    assert outs == {here}


def test_the_swarm_draws_each_switch_both_ways_and_switches_each_fault_off_in_some_seeds():
    """Over 200 seeds: unclean election on in about a quarter, both truncation strategies,
    each fault kind off in about 30% of the seeds and at 0.2 to 4 a minute otherwise,
    max_down anywhere from 1 to RF - 1, and a run of at most 30 virtual seconds."""
    from dataclasses import replace

    from kreplica.sim.faults import PER_MINUTE

    drawn = [swarm_scenario(s) for s in range(1, 201)]
    assert 25 <= sum(sc.config["unclean.leader.election.enable"] for sc in drawn) <= 75
    assert {sc.config["replica.truncation.strategy"] for sc in drawn} == {"high-watermark", "leader-epoch"}
    for name in PER_MINUTE:
        rates = [getattr(sc.chaos, name) for sc in drawn]
        assert 30 <= rates.count(0.0) <= 90 and all(r == 0 or 0.2 <= r <= 4.0 for r in rates), name
    assert {sc.chaos.max_down for sc in drawn if sc.topics[0].replication_factor == 4} == {1, 2, 3}
    assert {sc.until_ms for sc in drawn} == {30_000}  # random-chaos runs 60 s; a swarm seed 30 at most
    assert swarm_scenario(1, replace(scenarios.load("random-chaos"), until_ms=5000)).until_ms == 5000


def test_a_scripted_base_keeps_its_brokers_topics_and_replication_factor_under_every_draw():
    """A script names brokers and topics: every seed keeps at least the base's brokers and
    its topics as they are, and draws min.insync.replicas and max_down within the smallest
    replication factor the script's topics have."""
    for name in scenarios.names():
        base = scenarios.load(name)
        if not (base.steps or any(t.assignment for t in base.topics)):
            continue
        rf = min(t.replication_factor for t in base.topics)
        for s in range(30):
            sc = swarm_scenario(s, base)
            assert base.brokers <= sc.brokers <= max(base.brokers, 7) and sc.topics == base.topics, (name, s)
            assert 1 <= sc.config["min.insync.replicas"] <= rf and 1 <= sc.chaos.max_down <= max(1, rf - 1), (name, s)


def test_a_scripted_base_of_two_brokers_still_gets_three_to_seven():
    """The swarm's clusters have 3 to 7 brokers: a script naming only two (its steps and
    topics kept) is grown to at least three, like any base, never run on two."""
    from dataclasses import replace

    from kreplica.sim.scenarios import TopicSpec

    base = replace(scenarios.load("slow-follower"), brokers=2, topics=(TopicSpec("t", 1, 2),))
    assert base.steps
    counts = {swarm_scenario(s, base).brokers for s in range(60)}
    assert min(counts) == 3 and max(counts) <= 7


def test_a_base_mix_keeps_its_fault_durations_admin_cadence_and_latencies():
    """``swarm_mix = "base"``: the base's own durations, admin cadence and latencies stay
    whatever the seed draws (gc-pause-chaos its long pauses, config-churn its change a second)."""
    for name in ("gc-pause-chaos", "config-churn", "control-plane-chaos"):
        base = scenarios.load(name)
        assert base.swarm_mix == "base"
        for s in range(30):
            sc = swarm_scenario(s, base)
            for f in ("downtime_ms_max", "pause_ms_max", "partition_ms_max"):
                assert getattr(sc.chaos, f) == getattr(base.chaos, f), (name, s, f)
            assert (sc.network.latency_ms_min, sc.network.latency_ms_max) == (
                base.network.latency_ms_min, base.network.latency_ms_max)
            if base.workload.admin_interval_ms:
                assert sc.workload.admin_interval_ms == base.workload.admin_interval_ms, (name, s)


def test_the_swarm_draws_every_partition_count_from_one_to_eight():
    assert {swarm_scenario(s).topics[0].partitions for s in range(1, 201)} == set(range(1, 9))


def test_an_events_line_and_hash_do_not_depend_on_the_order_its_data_was_given_in():
    """Canonical lines: data keys sorted, nested ones too, so the hash is the events' own."""
    a, b = History(), History()
    a.record(3, "ack", 1, "t-0", offset=4, crc=9, meta={"x": 1, "y": 2})
    b.record(3, "ack", 1, "t-0", meta={"y": 2, "x": 1}, crc=9, offset=4)
    assert a.lines == b.lines and a.hash == b.hash
    assert a.lines == ['{"broker":1,"data":{"crc":9,"meta":{"x":1,"y":2},"offset":4},"kind":"ack","seq":0,"t":3,"tp":"t-0"}']


def test_the_running_hash_is_the_hash_of_the_lines_a_file_holds(tmp_path):
    """What --replay compares: the hash of a written history's lines, newline-terminated."""
    h = History()
    for i in range(3):
        h.record(i, "ack", 1, "t-0", offset=i)
    h.write_jsonl(tmp_path / "h.jsonl")
    text = (tmp_path / "h.jsonl").read_text()
    assert h.hash == hash_lines(text.splitlines())
    # The last line ends too: two files put end to end (cat, an append) keep one event a line.
    assert text.endswith("}\n") and text.count("\n") == 3


def test_reading_a_history_passes_over_blank_lines(tmp_path):
    h = History()
    h.record(0, "run", seed=3, scenario={"name": "x"})
    h.record(5, "crash", 2)
    assert h.lines[1] == '{"broker":2,"kind":"crash","seq":1,"t":5}'  # no data, no "data" key
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join([h.lines[0], "", "   ", h.lines[1], ""]) + "\n")
    assert read_jsonl(path) == h.events


def test_a_history_whose_first_event_is_not_the_run_header_is_refused(tmp_path):
    """A history with its header cut off (a tail of the file) has no seed or scenario to
    replay: it is named as not a simulation history, not replayed from another event's data."""
    import pytest

    h = History()
    h.record(0, "run", seed=3, scenario={"name": "x"})
    h.record(5, "crash", 2, seed=4, scenario={"name": "y"})
    assert run_header(h.events)["seed"] == 3
    for events in (h.events[1:], []):
        with pytest.raises(ValueError, match="the first event must be the run header"):
            run_header(events)


def test_a_run_header_is_handed_back_as_a_dict_of_its_own():
    """A header recorded without options is an empty dict, not None, and the dict handed
    back is a copy: a caller filling in defaults does not change the recorded event."""
    h = History()
    h.record(0, "run")
    assert run_header(h.events) == {}
    h = History()
    h.record(0, "run", seed=3)
    header = run_header(h.events)
    header["seed"] = 4
    assert h.events[0].data == {"seed": 3}


def test_the_swarm_draws_over_the_bases_config_and_keeps_the_keys_it_does_not_draw():
    drawn = {"min.insync.replicas", "unclean.leader.election.enable", "replica.truncation.strategy", "acks"}
    for name in scenarios.names():
        base = scenarios.load(name)
        for s in range(5):
            config = swarm_scenario(s, base).config
            assert {k: v for k, v in config.items() if k not in drawn} == \
                {k: v for k, v in base.config.items() if k not in drawn}, (name, s)


def test_the_swarm_draws_cascades_admin_operations_and_power_loss_within_their_ranges():
    """Each seed's fault mix: a newly elected leader failing at once (KIP-101's double
    failure, 10% or 30% of elections) in some seeds and never in others; admin operations
    every 5 s in some seeds and none in others; and power lost in at most half the
    crashes, so that every seed keeps clean crashes to recover from too."""
    drawn = [swarm_scenario(s) for s in range(100)]
    assert {sc.chaos.cascade for sc in drawn} == {0.0, 0.1, 0.3}
    # No cascade in about half the seeds (0.0 is two of the four choices), as acks=all is
    # weighted: the seeds judging a double failure are half, not three quarters.
    assert 35 <= [sc.chaos.cascade for sc in drawn].count(0.0) <= 65
    assert {sc.workload.admin_interval_ms for sc in drawn} == {0, 5000}
    assert {sc.workload.produce_interval_ms for sc in drawn} == {20, 50, 100, 200}
    fractions = [sc.chaos.power_loss_fraction for sc in drawn]
    assert 0.0 <= min(fractions) and 0.4 < max(fractions) <= 0.5


@pytest.mark.parametrize("bad", ['{"seq": 1, "t": 0}', "[1, 2]", "not json"])
def test_a_bad_line_is_named_by_its_line_number_in_the_file(tmp_path, bad):
    """Whatever is wrong with it (a field missing, JSON that is not an object, text that
    is not JSON), a bad line is named by its number in the file as an editor counts,
    blank lines included, and read_jsonl raises ValueError, which --replay reports."""
    h = History()
    h.record(0, "run", seed=3, scenario={"name": "x"})
    path = tmp_path / "h.jsonl"
    path.write_text(h.lines[0] + "\n\n" + bad + "\n")
    with pytest.raises(ValueError, match="^line 3 is not a history event"):
        read_jsonl(path)


def test_a_value_with_no_canonical_form_cannot_enter_the_history():
    """Only plain values, tuples, sets and topic-partitions enter an event: anything else
    (an object whose text holds its address, say) would make the same seed hash differently
    from run to run, so recording it is an error, not its str()."""
    with pytest.raises(TypeError, match="object cannot enter the history"):
        History().record(0, "ack", 1, "t-0", offset=object())



def test_a_base_mix_scales_its_loss_and_duplication_around_the_bases():
    """``swarm_mix = "base"``: the base's message loss and duplication are scaled by the
    drawn multiple (mean 1x, at most about 2x, off in some seeds).  (Its reordering and
    batches in flight: test_sim_scenarios' either-mix test.)"""
    for name in ("gc-pause-chaos", "config-churn", "control-plane-chaos"):
        base = scenarios.load(name)
        drawn = [swarm_scenario(s, base) for s in range(60)]
        for f in ("drop_probability", "duplicate_probability"):
            scales = [getattr(sc.network, f) / getattr(base.network, f) for sc in drawn]
            assert 0 in scales and max(scales) <= 2.0, (name, f)
            on = [x for x in scales if x]
            assert 0.6 <= sum(on) / len(on) <= 1.4, (name, f)


def test_the_swarm_draws_each_fault_length_bound_replication_factor_and_torn_fraction_over_its_range():
    """Each seed's outage, pause and network-partition bounds from their own lists,
    replication factors 2 to 4, and torn writes in anything from none to every power loss."""
    drawn = [swarm_scenario(s) for s in range(100)]
    assert {sc.chaos.downtime_ms_max for sc in drawn} == {2000, 5000, 10000}
    assert {sc.chaos.pause_ms_max for sc in drawn} == {500, 2000, 6000}
    assert {sc.chaos.partition_ms_max for sc in drawn} == {1000, 4000, 8000}
    assert {sc.topics[0].replication_factor for sc in drawn} == {2, 3, 4}
    # A replica on every broker too (no broker outside the ISR to take over): RF 3 of 3, 4 of 4.
    assert {(3, 3), (4, 4)} <= {(sc.brokers, sc.topics[0].replication_factor) for sc in drawn}
    torn = [sc.chaos.torn_fraction for sc in drawn]
    assert 0.0 <= min(torn) < 0.1 and 0.9 < max(torn) <= 1.0


def test_the_swarm_draws_each_latency_bound_and_slow_tail_from_its_list():
    """Each seed's network from its own lists: a fastest latency of 1, 2 or 5 ms, a spread of
    0 to 30 ms above it, and a slow tail (when there is one) of 20, 50 or 200 ms."""
    nets = [swarm_scenario(s).network for s in range(100)]
    assert {n.latency_ms_min for n in nets} == {1, 2, 5}
    assert {n.latency_ms_max - n.latency_ms_min for n in nets} == {0, 4, 10, 30}
    assert {n.latency_ms_tail for n in nets} == {20, 50, 200}


def test_a_base_mix_without_admin_operations_gets_the_swarms_draw_of_them():
    """``swarm_mix = "base"`` keeps a base's admin cadence; a base with none (0) has none to
    keep, and its seeds draw admin operations as any swarm seed does (every 5 s or none)."""
    from dataclasses import replace

    gc = scenarios.load("gc-pause-chaos")
    base = replace(gc, workload=replace(gc.workload, admin_interval_ms=0))
    assert {swarm_scenario(s, base).workload.admin_interval_ms for s in range(60)} == {0, 5000}



def test_a_history_without_keep_all_holds_each_partitions_last_40_events_for_its_traces():
    """Without keep_all, as a run without --out keeps it, a history still holds each
    partition's last 40 events: more than the checker's trace asks for (30), so a
    violation's trace is never cut short of what it asks."""
    import inspect

    from kreplica.sim.checker import Checker

    h = History(keep_all=False)
    for i in range(50):
        h.record(i, "ack", 1, "t-0", offset=i)
    assert [e.data["offset"] for e in h.tail("t-0")] == list(range(10, 50))
    asked = inspect.signature(Checker).parameters["trace_events"].default
    assert asked == 30 and [e.data["offset"] for e in h.tail("t-0", asked)] == list(range(20, 50))


def test_a_trace_of_a_partition_with_no_events_is_empty():
    """A violation may name a partition that nothing was recorded for: its trace is empty,
    not an IndexError."""
    h = History(keep_all=False)
    h.record(0, "crash", 1)
    h.record(1, "ack", 1, "t-0", offset=0)
    assert h.tail("t-1") == []


def test_a_partitions_trace_is_in_recorded_order_even_within_one_millisecond():
    """Events of one virtual millisecond keep the order they happened in (their seq): a
    fault recorded between two events of the partition stays between them."""
    h = History(keep_all=False)
    h.record(5, "ack", 1, "t-0", offset=0)
    h.record(5, "crash", 2)
    h.record(5, "ack", 1, "t-0", offset=1)
    assert [e.seq for e in h.tail("t-0")] == [0, 1, 2]


def test_a_history_counts_its_events_by_kind_and_hands_back_those_of_the_kinds_asked_for():
    h, lean = History(), History(keep_all=False)
    for kind in ("ack", "crash", "ack", "restart", "ack"):
        h.record(0, kind, 1)
        lean.record(0, kind, 1)
    assert h.counts == {"ack": 3, "crash": 1, "restart": 1}
    assert [e.seq for e in h.of_kind("crash", "restart")] == [1, 3]
    # Without keep_all neither the events nor their lines are kept (a long run's memory),
    # but every one is still counted and hashed.
    assert lean.counts == h.counts and lean.events == [] and lean.lines == []
    assert (lean.hash, len(lean)) == (h.hash, len(h)) and len(h.lines) == 5


def test_a_partitions_trace_carries_only_the_last_n_faults_recorded_among_its_events():
    """Events touching no partition are kept, like each partition's, only the last
    ``tail_per_partition`` of them (a bounded memory without keep_all): a trace gets the
    newest of the faults recorded since its partition's first kept event."""
    h = History(keep_all=False, tail_per_partition=2)
    h.record(0, "ack", 1, "t-0", offset=0)
    for broker in range(4):
        h.record(1 + broker, "crash", broker)
    assert [(e.kind, e.broker) for e in h.tail("t-0")] == [("ack", 1), ("crash", 2), ("crash", 3)]


def test_an_event_with_empty_data_is_written_as_one_without_data():
    """An event's line has no data key unless there is data: an empty dict (a line read
    back with ``"data":{}``, an Event made by hand) gives the line of an event without."""
    bare = Event(0, 5, "crash", broker=2)
    assert Event(0, 5, "crash", broker=2, data={}).to_json() == bare.to_json() == '{"broker":2,"kind":"crash","seq":0,"t":5}'
    assert Event.from_json('{"broker":2,"data":{},"kind":"crash","seq":0,"t":5}').to_json() == bare.to_json()


def test_a_history_line_is_ascii_whatever_its_text_holds(tmp_path):
    """A scenario's description or name may hold any character (an em dash, a name in
    another script); its line escapes them (``\\u2014``), as json does by default, so the
    file's bytes are the same in any locale's encoding and the hash, taken over those
    bytes, is the one a replay reads back from the file."""
    import hashlib

    h = History()
    h.record(0, "run", seed=3, scenario={"name": "größe", "description": "leader \u2014 follower"})
    assert h.lines[0].isascii() and "\\u2014" in h.lines[0] and "gr\\u00f6\\u00dfe" in h.lines[0]
    path = tmp_path / "h.jsonl"
    h.write_jsonl(path)
    data = path.read_bytes()
    assert data.isascii() and hashlib.sha256(data).hexdigest() == h.hash
    assert run_header(read_jsonl(path))["scenario"]["description"] == "leader \u2014 follower"


def test_the_swarm_draws_over_the_bases_workload_and_keeps_what_it_does_not_draw():
    """A seed draws acks, the produce cadence, admin operations and batches in flight; the
    rest of the base's workload (batch size, retries, timeouts, consumers, keys, config
    changes) stays the base's, as its config keys do."""
    from dataclasses import asdict

    from kreplica.sim.scenarios import WorkloadSpec

    drawn = {"acks", "produce_interval_ms", "admin_interval_ms", "max_in_flight"}
    kept = [name for name in scenarios.names()
            if {k: v for k, v in asdict(scenarios.load(name).workload).items() if k not in drawn}
            != {k: v for k, v in asdict(WorkloadSpec()).items() if k not in drawn}]
    assert kept  # some base's workload differs from the default beyond the drawn keys
    for name in scenarios.names():
        base = scenarios.load(name)
        for s in range(3):
            workload = swarm_scenario(s, base).workload
            assert {k: v for k, v in asdict(workload).items() if k not in drawn} == \
                {k: v for k, v in asdict(base.workload).items() if k not in drawn}, (name, s)
