"""History: canonical JSON lines, a running hash, replay headers, scenario round trips."""
from __future__ import annotations

from kreplica.sim import scenarios
from kreplica.sim.history import History, hash_lines, read_jsonl, run_header
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
        assert scenarios.from_dict(sc.to_dict()) == sc


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
