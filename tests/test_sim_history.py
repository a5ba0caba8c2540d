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
