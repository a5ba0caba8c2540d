"""Scenario files are checked before anything runs, and swarm mode keeps a scripted
base's story runnable."""
from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest

from kreplica.config import validate as validate_config
from kreplica.sim import scenarios
from kreplica.sim.faults import FaultRates
from kreplica.sim.scenarios import LinkProfile, Step, TopicSpec, WorkloadSpec
from kreplica.sim.swarm import swarm_scenario
from kreplica.sim.world import World

BASE = scenarios.Scenario("s", brokers=3, topics=(TopicSpec("t", 2, 3),))


def test_every_shipped_scenario_is_valid():
    for name in scenarios.names():
        assert scenarios.load(name).validate().name == name


@pytest.mark.parametrize("change, message", [
    (dict(steps=(Step("crash", target=4),)), "target 4 is not a broker"),
    (dict(steps=(Step("crash"),)), "needs a target"),
    (dict(steps=(Step("explode", target=1),)), "unknown action"),
    (dict(steps=(Step("pause", target=1),)), "missing duration_ms"),
    (dict(steps=(Step("restart", target="$gone"),)), "bound by no earlier step"),
    (dict(steps=(Step("crash", target="leader:t-2"),)), "no partition 't-2'"),
    (dict(steps=(Step("crash", target="leader:u-0"),)), "no partition 'u-0'"),
    (dict(steps=(Step("crash", target=1, on="election:t-9"),)), "no partition 't-9'"),
    (dict(steps=(Step("reassign", params={"topic": "t", "partition": 0, "replicas": [2, 3, 4]}),)),
     "no broker 4"),
    (dict(steps=(Step("reassign", params={"topic": "t", "partition": 0, "replicas": [2, 2]}),)), "distinct"),
    (dict(steps=(Step("crash_together", params={"crashes": [{"broker": 1}, {"broker": 7}]}),)), "crash of 7"),
    (dict(steps=(Step("partition", params={"groups": [[1], [2, 5]], "duration_ms": 10}),)), "no broker 5"),
    (dict(topics=(TopicSpec("t", 1, 4),)), "replication factor 4 on 3 broker"),
    (dict(topics=(TopicSpec("t", 1, 3, {0: (1, 2, 9)}),)), "no broker 9"),
    (dict(topics=(TopicSpec("t", 1, 3, {3: (1, 2, 3)}),)), "names partition 3"),
    (dict(nodes={5: scenarios.LinkProfile()}), "[nodes.5]"),
    (dict(config={"no.such.key": 1}), "unknown config key 'no.such.key'"),
    (dict(topics=(TopicSpec("t", 0, 3),)), "0 partition(s) of replication factor 3"),
    (dict(liveness_ms=-1), "until_ms and liveness_ms must be >= 0"),
    (dict(steps=(Step("elect_preferred", params={"topic": "u"}),)), "no topic 'u'"),
    (dict(links={(2, 2): scenarios.LinkProfile()}), '[links."2-2"] must join two brokers'),
    (dict(topics=(TopicSpec("t", 2, 3, {2: (1, 2, 3)}),)), "names partition 2 of 2"),
    (dict(steps=(Step("create_topic", params={"topic": "x", "replication_factor": 4}),)),
     "replication factor 4 on 3 broker(s)"),
    (dict(steps=(Step("restart", target="$me", bind="me"),)), "target $me is bound by no earlier step"),
    (dict(brokers=0, topics=()), "brokers = 0, need at least 1"),
    (dict(until_ms=-1), "until_ms and liveness_ms must be >= 0"),
    # World's create_topic takes replication factor 3 when the step gives none.
    (dict(brokers=2, topics=(TopicSpec("t", 2, 2),), steps=(Step("create_topic", params={"topic": "x"}),)),
     "replication factor 3 on 2 broker(s)"),
    (dict(steps=(Step("crash", target=1, on="leader:t-0"),)), "expected 'election:<topic>-<partition>'"),
    (dict(steps=(Step("crash", target="leader:t-x"),)), "no partition 't-x'"),
    (dict(steps=(Step("crash", target=True),)), "target True is neither a broker id nor a name"),
    (dict(steps=(Step("reassign", params={"topic": "t", "partition": 0, "replicas": []}),)),
     "replicas [] must be distinct brokers"),
    (dict(topics=(TopicSpec("t", 1, 0),)), "1 partition(s) of replication factor 0"),
    # The World created the second one and failed with TOPIC_ALREADY_EXISTS.
    (dict(topics=(TopicSpec("t", 2, 3), TopicSpec("t", 1, 3))), "topic t: named twice in [[topics]]"),
    # The latency was drawn from above the maximum, silently.
    (dict(network=LinkProfile(latency_ms_min=5, latency_ms_max=1)),
     "[network] latency_ms_min = 5 is above latency_ms_max = 1"),
    (dict(nodes={2: LinkProfile(latency_ms_min=9)}), "[nodes.2] latency_ms_min = 9 is above latency_ms_max = 5"),
    (dict(links={(1, 2): LinkProfile(latency_ms_min=9)}), '[links."1-2"] latency_ms_min = 9 is above'),
    # The chaos planner failed mid-run drawing a restart delay from randint(200, 4).
    (dict(chaos=FaultRates(downtime_ms_max=4)), "[chaos] downtime_ms_max = 4: below the shortest fault"),
    (dict(chaos=FaultRates(pause_ms_max=49, partition_ms_max=99)), "pause_ms_max = 49, partition_ms_max = 99: below"),
    # The World's create_topic refused each with INVALID_REPLICA_ASSIGNMENT, as Kafka's
    # AdminUtils does: an assignment gives every partition, each of the topic's replication factor.
    (dict(topics=(TopicSpec("t", 2, 2, {0: (1, 2)}),)), "topic t: the assignment gives no replicas for partition(s) [1]"),
    (dict(topics=(TopicSpec("t", 1, 2, {0: (1, 2, 3)}),)), "topic t-0 assignment: 3 replicas, the replication factor is 2"),
    (dict(topics=(TopicSpec("t", 2, 2, {0: (1, 2), 1: (3,)}),)), "topic t-1 assignment: 1 replicas, the replication"),
    # The network keeps a broker in the last group naming it: 2 was cut from 1, silently.
    (dict(steps=(Step("partition", params={"groups": [[1, 2], [2, 3]], "duration_ms": 10}),)),
     "groups [[1, 2], [2, 3]] name broker 2 twice"),
    # The World's create_topic refused these with INVALID_TOPIC_EXCEPTION, as Kafka's Topic.validate does.
    (dict(topics=(TopicSpec("t x", 1, 3),)), "topic t x: topic name 't x' has characters outside [a-zA-Z0-9._-]"),
    (dict(topics=(TopicSpec("..", 1, 3),)), "topic ..: topic name cannot be '..'"),
    (dict(topics=(TopicSpec("a.b", 1, 3), TopicSpec("a_b", 1, 3))), "topic a_b: collides with topic a.b"),
    # The same name in a create_topic step was refused by the admin call mid-run.
    (dict(steps=(Step("create_topic", params={"topic": "x/y"}),)), "topic name 'x/y' has characters outside"),
    # A reassignment of a partition that does not exist reached the admin call mid-run.
    (dict(steps=(Step("reassign", params={"topic": "t", "partition": 2, "replicas": [1, 2]}),)), "no partition 't-2'"),
    (dict(steps=(Step("reassign", params={"topic": "u", "partition": 0, "replicas": [1, 2]}),)), "no partition 'u-0'"),
    # The clash either way round: "a.b" after "a_b" is refused as "a_b" after "a.b" is.
    (dict(topics=(TopicSpec("a_b", 1, 3), TopicSpec("a.b", 1, 3))), "topic a.b: collides with topic a_b"),
    # Partition 0 left out of an assignment, as partition 1 is above.
    (dict(topics=(TopicSpec("t", 2, 2, {1: (1, 2)}),)), "topic t: the assignment gives no replicas for partition(s) [0]"),
    # A Step built in code (not read from TOML, where on = 5 is refused as the field's type):
    # the loader's answer, not an AttributeError from 5.partition.
    (dict(steps=(Step("crash", target=1, on=5),)), "on = 5, expected 'election:<topic>-<partition>'"),
    # A link from a broker that does not exist, as one to such a broker (the [links."1-9"] case below).
    (dict(links={(9, 1): LinkProfile()}), '[links."9-1"] must join two brokers'),
    (dict(steps=(Step("crash", target=1, params=None),)), "params = None, expected a table"),
    # World's create_topic makes 1 partition when the step gives none: x-1 never exists.
    (dict(steps=(Step("create_topic", params={"topic": "x"}), Step("crash", target="leader:x-1"))),
     "no partition 'x-1'"),
    # Refused mid-run with TOPIC_ALREADY_EXISTS, and the checker stopped judging the live topic.
    (dict(steps=(Step("create_topic", params={"topic": "t"}),)), "step 1 (create_topic): topic t exists already"),
    (dict(steps=(Step("create_topic", params={"topic": "x"}), Step("create_topic", params={"topic": "x"}))),
     "step 2 (create_topic): topic x exists already, and no step deletes it"),
    (dict(topics=(TopicSpec("a.b", 1, 3),), steps=(Step("create_topic", params={"topic": "a_b"}),)),
     "topic a_b collides with topic a.b"),
    # An empty `on` names no election: the World would arm the step on nothing.
    (dict(steps=(Step("crash", target=1, on=""),)), "on = '', expected 'election:<topic>-<partition>'"),
    # The create step's clash the other way round: "a.b" created while "a_b" exists.
    (dict(topics=(TopicSpec("a_b", 1, 3),), steps=(Step("create_topic", params={"topic": "a.b"}),)),
     "step 1 (create_topic): topic a.b collides with topic a_b"),
    # A create step's replication factor below 1, as one above the broker count is refused above.
    (dict(steps=(Step("create_topic", params={"topic": "x", "replication_factor": 0}),)),
     "replication factor 0 on 3 broker(s)"),
    # A role is the text before the colon, as the World reads it: "leaders:" is none, and was
    # a ValueError from World.resolve when the step fired.
    (dict(steps=(Step("crash", target="leaders:t-0"),)), "unknown target 'leaders:t-0'"),
    # Brokers are numbered from 1: 0 is below them, not one of them.
    (dict(steps=(Step("crash", target=0),)), "target 0 is not a broker"),
    # An empty name is an unknown one, not an IndexError from looking at its first character.
    (dict(steps=(Step("crash", target=""),)), "unknown target ''"),
    # "$$a" names the binding "$a", which the World looks up (and finds none) when the step fires.
    (dict(steps=(Step("crash", target=1, bind="a"), Step("restart", target="$$a"))),
     "target $$a is bound by no earlier step"),
    # An empty bind binds nothing in the World, so "$" is bound by no step.
    (dict(steps=(Step("crash", target=1, bind=""), Step("restart", target="$"))), "target $ is bound by no earlier step"),
    # The World reads a role's partition after the first ':', as "x:t-0": no partition of any topic.
    (dict(steps=(Step("crash", target="leader:x:t-0"),)), "no partition 'x:t-0'"),
    # Only a step's target (or the controller a kill_controller step kills) is bound: a step
    # with neither bound nothing in the World, which skipped "$x" as "no such broker now".
    (dict(steps=(Step("elect_preferred", bind="x", params={"topic": "t"}), Step("restart", target="$x"))),
     "step 1 (elect_preferred): bind = 'x' binds no broker"),
    (dict(steps=(Step("partition", bind="x", params={"groups": [[1], [2, 3]], "duration_ms": 5}),)),
     "step 1 (partition): bind = 'x' binds no broker"),
    # A delete_topic step built in code without a table: the loader's answer, not an
    # AttributeError from the scan for the names steps delete.
    (dict(steps=(Step("delete_topic", params=None),)), "step 1 (delete_topic): params = None, expected a table"),
    # A step built in code with a key that is not text: named, not a TypeError from sorting.
    (dict(steps=(Step("restart", target=1, params={1: True, "x": 2}),)), "unknown parameters ['1', 'x']"),
])
def test_a_scenario_naming_what_does_not_exist_is_refused_before_it_runs(change, message):
    sc = replace(BASE, **change)
    with pytest.raises(ValueError, match="scenario s: ") as e:
        sc.validate()
    assert message in str(e.value)
    with pytest.raises(ValueError):
        World(sc, 1)  # an embedder building a World gets the same answer, not a run that fails


def test_the_shortest_chaos_bounds_accepted_are_ones_the_planner_can_draw_from():
    """At the floors the loader allows, the planner draws crashes, pauses and partitions (and
    a latency range of one value is a range) without the run failing."""
    floors = FaultRates(crash=120.0, pause=120.0, partition=120.0, cut_store=120.0, kill_controller=120.0,
                        cascade=1.0, max_down=2, downtime_ms_max=200, pause_ms_max=50, partition_ms_max=100)
    sc = replace(BASE, until_ms=3000, chaos=floors, network=LinkProfile(latency_ms_min=3, latency_ms_max=3))
    world = World(sc.validate(), 1)
    r = world.run()
    assert r.ok, r.violation and r.violation.describe()
    assert {"crash", "pause", "partition"} <= {e.kind for e in world.history.events}


def test_an_empty_assignment_is_the_admins_own_assignment(tmp_path):
    """`assignment = {}` gives no partition: the World creates the topic with Kafka's
    rack-unaware assignment, as with no assignment at all, so the loader takes it."""
    path = tmp_path / "empty.toml"
    path.write_text('name = "empty"\n[[topics]]\nname = "t"\npartitions = 2\nreplication_factor = 3\n'
                    'assignment = {}\n')
    sc = scenarios.load(str(path))
    assert sc.topics[0].assignment == {}
    world = World(replace(sc, until_ms=300, liveness_ms=5000), 1)
    r = world.run()
    assert r.ok, r.violation and r.violation.describe()
    created = [e.data for e in world.history.events if e.kind == "create_topic"]
    assert created == [{"topic": "t", "partitions": 2, "replication_factor": 3}]


def test_steps_may_name_what_earlier_steps_bind_or_create():
    sc = replace(BASE, steps=(
        Step("kill_controller", bind="first"),
        Step("restart", target="$first"),
        Step("create_topic", params={"topic": "side", "partitions": 2, "replication_factor": 2}),
        Step("crash", target="leader:side-1"),
        Step("elect_preferred", params={"topic": "side"}),
    ))
    assert sc.validate() is sc


def test_a_topic_a_step_deletes_may_be_created_again_by_a_step():
    """Steps fire by time and by election, not in the order written: any delete_topic of the
    name (or of its '.'/'_' twin) lets a create_topic of it through, as Kafka may accept it."""
    for deleting in ("t", "x"):
        sc = replace(BASE, topics=(TopicSpec("t", 2, 3), TopicSpec("x", 1, 3)), steps=(
            Step("create_topic", at_ms=900, params={"topic": deleting}),
            Step("delete_topic", at_ms=100, params={"topic": deleting})))
        assert sc.validate() is sc
    sc = replace(BASE, topics=(TopicSpec("a.b", 1, 3),), steps=(
        Step("delete_topic", params={"topic": "a.b"}), Step("create_topic", at_ms=900, params={"topic": "a_b"})))
    assert sc.validate() is sc
    # A dotted name deleted and created again, as Kafka 0.10 allows once the delete is done.
    sc = replace(BASE, topics=(TopicSpec("a.b", 1, 3),), steps=(
        Step("delete_topic", params={"topic": "a.b"}), Step("create_topic", at_ms=900, params={"topic": "a.b"})))
    assert sc.validate() is sc


def test_a_step_may_name_a_partition_a_topic_created_again_has_and_the_first_had_not():
    """t (2 partitions) deleted and created again with 3, as Kafka 0.10 allows: a later step
    aimed at t-2 is valid, and the run crashes t-2's leader (broker 3 leads it here)."""
    sc = replace(BASE, until_ms=4000, steps=(
        Step("delete_topic", at_ms=100, params={"topic": "t"}),
        Step("create_topic", at_ms=1500, params={"topic": "t", "partitions": 3}),
        Step("crash", at_ms=3000, target="leader:t-2")))
    assert sc.validate() is sc
    world = World(sc, 1)
    r = world.run()
    assert r.ok, r.violation and r.violation.describe()
    leaders = [e.broker for e in world.history.events if e.kind == "election" and e.tp == "t-2"]
    crashed = [e.broker for e in world.history.events if e.kind == "crash"]
    assert leaders[:1] == [3] and crashed == [3]


def test_a_refused_create_topic_leaves_the_checker_judging_the_live_topic():
    """The create fires while t exists (the delete waits on an election that never comes) and
    is refused with TOPIC_ALREADY_EXISTS: t's acknowledged writes from before it are still
    held to invariant 1.  It used to forget t's model before asking, so t went unjudged."""
    sc = replace(BASE, until_ms=3000, steps=(
        Step("create_topic", at_ms=1000, params={"topic": "t", "partitions": 2}),
        Step("delete_topic", on="election:t-0", params={"topic": "t"})))
    world = World(sc, 1)
    r = world.run()
    assert r.ok, r.violation and r.violation.describe()
    refused = [e.data for e in world.history.events if e.kind == "admin_refused"]
    assert refused == [{"call": "create_topic", "error": "TOPIC_ALREADY_EXISTS"}]
    first_acks = [e.data["offset"] for e in world.history.events
                  if e.kind == "ack" and e.tp == "t-0" and e.time_ms < 1000]
    assert first_acks and set(first_acks) <= set(world.checker.models["t-0"].acked)


def test_a_refused_delete_topic_leaves_the_checker_judging_the_topic():
    """With delete.topic.enable=false the delete is refused (TOPIC_DELETION_DISABLED) and t
    stays: its acknowledged writes are still held to invariant 1, and its replicas still
    observed.  The World used to forget t and mark it as being deleted before asking."""
    sc = replace(BASE, until_ms=3000, config={"delete.topic.enable": False},
                 steps=(Step("delete_topic", at_ms=1000, params={"topic": "t"}),))
    world = World(sc, 1)
    r = world.run()
    assert r.ok, r.violation and r.violation.describe()
    refused = [e.data for e in world.history.events if e.kind == "admin_refused"]
    assert refused == [{"call": "delete_topic", "error": "TOPIC_DELETION_DISABLED"}]
    acked = world.checker.models["t-0"].acked
    before = [e.data["offset"] for e in world.history.events if e.kind == "ack" and e.tp == "t-0" and e.time_ms < 1000]
    after = [e.data["offset"] for e in world.history.events if e.kind == "ack" and e.tp == "t-0" and e.time_ms > 1000]
    assert before and after and set(before + after) <= set(acked)


# Every action aimed at one broker, with the parameters it needs besides.
AIMED = {"crash": {}, "restart": {}, "controlled_shutdown": {}, "expire_session": {},
         **dict.fromkeys(("pause", "slow_disk", "disk_full", "isolate", "cut_store"), {"duration_ms": 10})}


@pytest.mark.parametrize("action", sorted(AIMED))
def test_every_action_aimed_at_one_broker_needs_a_target(action):
    """Without one, the step would reach the fault injector with no broker to act on."""
    with pytest.raises(ValueError, match=f"step 1 \\({action}\\): needs a target"):
        replace(BASE, steps=(Step(action, params=AIMED[action]),)).validate()
    sc = replace(BASE, steps=(Step(action, target=2, params=AIMED[action]),))
    assert sc.validate() is sc


def test_a_hyphenated_topic_is_named_up_to_its_last_hyphen():
    """"leader:my-t-1" is partition 1 of my-t, as the world reads it, not partition "t-1" of my."""
    sc = replace(BASE, topics=(TopicSpec("my-t", 2, 3),), steps=(
        Step("crash", target="leader:my-t-1", on="election:my-t-0"),
        Step("restart", target="follower:my-t-0"),
        Step("reassign", params={"topic": "my-t", "partition": 1, "replicas": [1, 2]}),
    ))
    assert sc.validate() is sc
    with pytest.raises(ValueError, match="no partition 'my-t-2'"):
        replace(sc, steps=(Step("crash", target="leader:my-t-2"),)).validate()


def test_an_empty_chaos_table_is_chaos_at_the_default_rates(tmp_path):
    """`[chaos]` with nothing under it asks for random faults at FaultRates' defaults; it is
    not the same as no [chaos] table (no random faults), and a base mix may vary it."""
    path = tmp_path / "c.toml"
    path.write_text('name = "c"\nswarm_mix = "base"\n[chaos]\n')
    assert scenarios.load(str(path)).chaos == FaultRates()


def test_a_scenario_file_leaving_things_out_gets_the_scenarios_defaults(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('name = "m"\n')
    sc = scenarios.load(str(path))
    assert sc == scenarios.Scenario("m")
    # The defaults themselves, the workload's too: every scenario leaving a key out runs with
    # it, so changing one moves those runs' histories (and no recorded one replays).
    assert (sc.brokers, sc.topics, sc.until_ms, sc.liveness_ms, sc.swarm_mix) == (
        3, (TopicSpec("t", 3, 3),), 30_000, 60_000, "swarm")
    assert asdict(sc.workload) == {
        "acks": "all", "produce_interval_ms": 50, "batch_records": 2, "producers_per_partition": 1,
        "retries": 5, "retry_backoff_ms": 100, "request_timeout_ms": 3000, "consumers": True,
        "consumer_interval_ms": 100, "keys": 16, "admin_interval_ms": 0, "alter_configs": False,
        "max_in_flight": 1}
    # A topic giving only its name: one partition of replication factor 3, as the World's
    # create_topic step makes one.
    path.write_text('name = "m"\n[[topics]]\nname = "u"\n')
    assert scenarios.load(str(path)).topics == (TopicSpec("u", 1, 3),)


def test_with_config_types_each_value_as_the_config_does():
    # `kreplica simulate --config` gives text, a sweep's axis typed values: the same run
    # must get the same scenario (and so the same header and history hash).
    text = BASE.with_config(min_insync_replicas="2", unclean_leader_election_enable="TRUE", acks="-1",
                            retention_ms="60000")
    typed = BASE.with_config(**{"min.insync.replicas": 2, "unclean.leader.election.enable": True,
                                "acks": "all", "retention.ms": 60000})
    assert text.config == typed.config == {"min.insync.replicas": 2, "unclean.leader.election.enable": True,
                                           "acks": "all", "retention.ms": 60000}
    assert text.to_dict() == typed.to_dict()
    with pytest.raises(ValueError, match="scenario s: .*min.insync.replicas='0': out of range"):
        BASE.with_config(min_insync_replicas="0")


def test_building_a_scenario_from_a_header_leaves_the_header_as_it_was():
    """Replay builds the scenario from the recorded header and then prints that header as
    the run's options: building must not pop a step's action out of it nor make an
    assignment's keys ints, and the same header builds the same scenario twice."""
    sc = replace(BASE, topics=(TopicSpec("t", 2, 3, {0: (1, 2, 3), 1: (2, 3, 1)}),),
                 steps=(Step("crash", at_ms=5, target=1, params={"lose_unflushed": True}),))
    header = json.loads(json.dumps(sc.to_dict()))
    before = json.loads(json.dumps(header))
    assert scenarios.from_dict(header) == sc
    assert header == before
    assert scenarios.from_dict(header) == sc


def test_with_config_overrides_a_key_the_scenario_sets_and_keeps_its_others():
    """`kreplica simulate --config` is how a run changes a scenario's config: a key the
    scenario's file sets takes the override, and the file's other keys stay."""
    sc = replace(BASE, config={"min.insync.replicas": 2, "retention.ms": 60000})
    assert sc.with_config(min_insync_replicas="1").config == {"min.insync.replicas": 1, "retention.ms": 60000}


@pytest.mark.parametrize("given, acks", [("0", "0"), (1, "1"), ("-1", "all")])
def test_with_config_acks_is_what_the_producers_ask_for(given, acks):
    """The simulated producers send their workload's acks; the config key alone changed
    only the run header (a sweep's acks axis and `--config acks` now both go through here)."""
    sc = replace(BASE, workload=replace(BASE.workload, acks="all")).with_config(acks=given)
    assert sc.config["acks"] == sc.workload.acks == acks
    assert BASE.with_config(min_insync_replicas=2).workload == BASE.workload
    # Another key leaves the producers' acks as the scenario gave them, not the config's "all".
    one = replace(BASE, workload=replace(BASE.workload, acks="1"))
    assert one.with_config(min_insync_replicas=2).workload.acks == "1"


@pytest.mark.parametrize("toml, message", [
    ("brokers = 3.7", "brokers = 3.7, expected an integer"),  # once 3 brokers
    ('until_ms = "100"', "until_ms = '100', expected an integer"),
    ("liveness_ms = true", "liveness_ms = True, expected an integer"),
    # description was printed by `simulate --list` (an AttributeError there), swarm_mix made "5".
    ("description = 5", "description = 5, expected a string"),
    ("swarm_mix = 5", "swarm_mix = 5, expected a string"),
    ('[[steps]]\naction = "crash"\ntarget = 1\non = 5', "step 1: on = 5, expected a string"),
    ('[[steps]]\naction = "crash_together"\ncrashes = [1, 2]', "crash 1, expected a table {broker = <id>, ...}"),
    # A created topic's counts go to the admin call as written, where "2" or 2.0 failed mid-run.
    ('[[steps]]\naction = "create_topic"\ntopic = "x"\npartitions = 0', "partitions = 0, expected an integer >= 1"),
    ('[[steps]]\naction = "create_topic"\ntopic = "x"\npartitions = "2"', "partitions = '2', expected an integer"),
    ('[[steps]]\naction = "create_topic"\ntopic = "x"\nreplication_factor = 2.0',
     "replication factor 2.0 on 3 broker(s)"),
    # The tables are typed by their fields: "false" was a true string, "100" compared with numbers.
    ('[workload]\nconsumers = "false"', "[workload]: consumers = 'false', expected true or false"),
    ("[workload]\nproduce_interval_ms = 2.5", "[workload]: produce_interval_ms = 2.5, expected an integer"),
    ("[workload]\nacks = -1", "[workload]: acks = -1, expected a string"),
    ("[network]\nlatency_ms_max = -5", "[network]: latency_ms_max = -5, expected a number >= 0"),
    ("[network]\ndrop_probability = 1.5", "[network]: drop_probability = 1.5, expected a number from 0 to 1"),
    ('[links."1-2"]\nreorder = 1', "[links.\"1-2\"]: reorder = 1, expected true or false"),
    ('[chaos]\ncrash = "2"', "[chaos]: crash = '2', expected a number"),
    ("[chaos]\npause_ms_max = true", "[chaos]: pause_ms_max = True, expected an integer"),
    ("[chaos]\ntorn_fraction = 2", "[chaos]: torn_fraction = 2, expected a number from 0 to 1"),
    ("[[topics]]\nname = 7", "[[topics]]: name = 7, expected a string"),
    # A misspelt key in a table is refused, not a TypeError from the dataclass.
    ("[workload]\nproducer_interval_ms = 5", "[workload]: unknown keys ['producer_interval_ms']"),
    # The top level and the tables' shapes: each was ignored, or a TypeError/ValueError from
    # dict() or int() that named neither the scenario nor the key.
    ("untill_ms = 5000", "unknown keys ['untill_ms']; a scenario file takes extends, name,"),
    ("config = 5", "config = 5, expected a table"),
    ("workload = 3", "[workload] = 3, expected a table"),
    ("topics = 5", "topics = 5, expected an array of tables"),
    ('steps = "ab"', "steps = 'ab', expected an array of tables"),
    ("nodes = 4", "nodes = 4, expected a table"),
    ("links = 5", "links = 5, expected a table"),
    # One number written two ways: both keys were read as broker (or partition) 2, the last
    # silently winning, where a table named twice is refused.
    ('[nodes.2]\nreorder = true\n[nodes.02]\nreorder = false', "[nodes]: '2' and '02' are both 2"),
    ('[links."1-2"]\nreorder = true\n[links."1 - 2"]\nreorder = false',
     '[links."1-2"] and [links."1 - 2"] are both the link 1-2'),
    ('[[topics]]\nname = "t"\npartitions = 1\nreplication_factor = 1\nassignment = {0 = [1], 00 = [2]}',
     "assignment: '0' and '00' are both 0"),
    ("[nodes.x]\nreorder = true", "[nodes]: 'x' is not a broker or partition number"),
    ('[links."1-x"]\nreorder = true', '[links."1-x"]: expected "<from broker>-<to broker>"'),
    ('[[topics]]\nname = "t"\nassignment = {x = [1, 2, 3]}', "assignment: 'x' is not a broker or partition number"),
    ('[[topics]]\nname = "t"\npartitions = 1\nassignment = {0 = 2}', "replicas = 2, expected a list of broker ids"),
    ('[[steps]]\naction = "pause"\ntarget = 1\nparams = 3', "step 1: params = 3, expected a table"),
    ('[[steps]]\naction = "pause"\ntarget = 1\nduration_ms = 1\nparams = {duration_ms = 2}',
     "step 1: ['duration_ms'] given both in params and beside it"),
    ('[[steps]]\naction = "crash"\ntarget = 1\nat_ms = -100', "step 1: at_ms = -100, expected a number >= 0"),
    ('[[steps]]\naction = "crash"\ntarget = 1\njitter_ms = "5"', "step 1: jitter_ms = '5', expected an integer"),
    # A negative rate is no rate: float fields have the same floor as integer ones.
    ("[chaos]\ncrash = -1.0", "[chaos]: crash = -1.0, expected a number >= 0"),
    ("[network]\ndrop_probability = -0.5", "[network]: drop_probability = -0.5, expected a number from 0 to 1"),
    # An array whose items are not tables: once a TypeError from dict().
    ("steps = [1, 2]", "steps = [1, 2], expected an array of tables"),
    ('topics = ["t"]', "topics = ['t'], expected an array of tables"),
    # TOML's nan and inf: nan compares false with every bound (a loss rate of nan drops nothing).
    ("[network]\ndrop_probability = nan", "drop_probability = nan, expected a finite number"),
    ("[chaos]\ncrash = inf", "[chaos]: crash = inf, expected a finite number"),
    # A string of replicas is no list of them (not the brokers "1", "2" and "3").
    ('[[topics]]\nname = "t"\npartitions = 1\nassignment = {0 = "123"}', "replicas = '123', expected a list of broker ids"),
])
def test_a_scenario_files_values_of_the_wrong_type_are_refused_not_converted(toml, message, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(f'name = "bad"\n{toml}\n')
    with pytest.raises(ValueError, match="scenario bad: ") as e:
        scenarios.load(str(path))
    assert message in str(e.value)


@pytest.mark.parametrize("step, message", [
    ('action = "pause"\ntarget = 1\nduration_ms = "100"', "step 1 (pause): duration_ms = '100', expected an integer"),
    ('action = "pause"\ntarget = 1\nduration_ms = -5', "step 1 (pause): duration_ms = -5, expected a number >= 0"),
    ('action = "pause"\ntarget = 1\nduration_ms = 2.5', "duration_ms = 2.5, expected an integer"),
    ('action = "slow_disk"\ntarget = 1\nduration_ms = 10\ndelay_ms = true', "delay_ms = True, expected an integer"),
    ('action = "crash"\ntarget = 1\ntorn = "false"', "torn = 'false', expected true or false"),
    ('action = "crash"\ntarget = 1\nlose_in_flight = 0', "step 1 (crash): lose_in_flight = 0, expected true or false"),
    ('action = "crash"\ntarget = 1\nlose_unflushd = true', "unknown parameters ['lose_unflushd']; crash takes "
                                                            "lose_unflushed, torn, lose_in_flight"),
    ('action = "restart"\ntarget = 1\nduration_ms = 10', "unknown parameters ['duration_ms']; restart takes none"),
    ('action = "reassign"\ntopic = "t"\npartition = "0"\nreplicas = [1, 2]', "partition = '0', expected an integer"),
    ('action = "reassign"\ntopic = "t"\npartition = 0\nreplicas = [true, 2]', "no broker True"),
    ('action = "reassign"\ntopic = "t"\npartition = 0\nreplicas = 2', "replicas = 2, expected a list"),
    ('action = "delete_topic"\ntopic = 7', "topic = 7, expected a string"),
    ('action = "partition"\ngroups = [[1], [2.0, 3]]\nduration_ms = 10', "names no broker 2.0"),
    ('action = "partition"\ngroups = [1, 2]\nduration_ms = 10', "groups = [1, 2], expected a list of lists"),
    ('action = "crash_together"\ncrashes = [{broker = 1, torn = 1}]', "crash of 1: torn = 1, expected true or false"),
    ('action = "crash_together"\ncrashes = [{broker = 2, lose_unflushed = "yes"}]',
     "crash of 2: lose_unflushed = 'yes', expected true or false"),
    ('action = "crash_together"\ncrashes = [{broker = 3, lose_in_flight = 0}]',
     "crash of 3: lose_in_flight = 0, expected true or false"),
    ('action = "crash_together"\ncrashes = [{broker = 1, lose = true}]', "crash of 1: unknown keys ['lose']"),
    ('action = "crash_together"\ncrashes = [{broker = true}]', "crash of True, not a broker"),
    ('action = "crash_together"\ncrashes = []', "crashes = [], expected a list of tables"),
    # true is 1 to isinstance(int), not to the admin call the create goes to mid-run.
    ('action = "create_topic"\ntopic = "x"\npartitions = true', "partitions = True, expected an integer >= 1"),
    ('action = "create_topic"\ntopic = "x"\nreplication_factor = true', "replication factor True on 3 broker(s)"),
    # No list at all, not only a list of no lists: once a TypeError from iterating a number.
    ('action = "partition"\ngroups = 5\nduration_ms = 10', "groups = 5, expected a list of lists"),
    ('action = "crash_together"\ncrashes = 5', "crashes = 5, expected a list of tables"),
    # The second crash of one broker finds it down and is refused: the step cannot run as written.
    ('action = "crash_together"\ncrashes = [{broker = 1}, {broker = 2}, {broker = 1, torn = true}]',
     "crashes name broker 1 twice"),
])
def test_a_steps_parameters_are_typed_and_named_at_load(step, message, tmp_path):
    """A step's parameters reach the faults as written: a string duration compared with
    numbers, a "false" that is true, or a misspelt flag ignored would each surface
    mid-run, or not at all."""
    path = tmp_path / "bad.toml"
    path.write_text(f'name = "bad"\nbrokers = 3\n[[topics]]\nname = "t"\npartitions = 1\n'
                    f'replication_factor = 3\n[[steps]]\n{step}\n')
    with pytest.raises(ValueError, match="scenario bad: ") as e:
        scenarios.load(str(path))
    assert message in str(e.value)


def test_a_steps_optional_parameters_of_the_right_type_are_taken(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text('name = "ok"\nbrokers = 3\n[[steps]]\naction = "crash"\ntarget = 1\nlose_unflushed = true\n'
                    'torn = false\nlose_in_flight = false\n[[steps]]\naction = "slow_disk"\ntarget = 2\n'
                    'duration_ms = 0\ndelay_ms = 80\n[[steps]]\naction = "crash_together"\n'
                    'crashes = [{broker = 2, torn = true}, {broker = 3}]\n'
                    '[[steps]]\naction = "kill_controller"\nlose_unflushed = true\n')
    sc = scenarios.load(str(path))
    assert sc.steps[0].params == {"lose_unflushed": True, "torn": False, "lose_in_flight": False}
    assert sc.steps[2].params["crashes"][0] == {"broker": 2, "torn": True}
    assert sc.steps[3].params == {"lose_unflushed": True}  # a controller killed by power loss


@pytest.mark.parametrize("toml, message", [
    ('description = "x"\n', "no.toml: no name = "), ("name = 5\n", "name = 5, expected a non-empty string"),
    ('name = ""\n', "name = '', expected a non-empty string"),
])
def test_a_scenario_file_without_a_name_or_with_a_bad_one_is_refused(toml, message, tmp_path):
    """It was a KeyError: 'name' (or a scenario named 5, written into the run header)."""
    path = tmp_path / "no.toml"
    path.write_text(toml)
    with pytest.raises(ValueError, match=message):
        scenarios.load(str(path))


def test_the_shipped_scenarios_are_listed_by_name_in_order():
    """`kreplica simulate --list` and the unknown-name error list the shipped scenarios
    alphabetically, not in whatever order the directory gives its files."""
    listed = scenarios.names()
    assert listed == sorted(p.stem for p in scenarios.HERE.glob("*.toml")) and "random-chaos" in listed
    with pytest.raises(ValueError) as e:
        scenarios.load("no-such-scenario")
    assert str(e.value).endswith("; known: " + ", ".join(listed))


def test_controller_failover_mid_reassignment_kills_the_controller_after_the_reassignment_is_written():
    """Its story: /admin/reassign_partitions written, then the controller killed a few ms
    later, while the move is under way, and the next controller completing it.  A kill
    before the write runs clean too (the next controller is simply the one that reassigns),
    so only the steps show that the failover no longer lands mid-reassignment."""
    sc = scenarios.load("controller-failover-mid-reassignment")
    [reassign] = [s for s in sc.steps if s.action == "reassign"]
    [kill] = [s for s in sc.steps if s.action == "kill_controller"]
    assert reassign.at_ms + reassign.jitter_ms < kill.at_ms


def test_seed003_controlled_shutdown_stops_a_leader_whose_partitions_move_cleanly():
    """Its story: the broker stopped is the leader of bar-1, whose leadership the controller
    moves to another replica of the ISR (not elected uncleanly) before the broker goes.
    Stopping a follower runs clean too, with no leadership to move."""
    world = World(scenarios.load("seed003-controlled-shutdown"), 1)
    assert world.run().ok
    events = world.history.events
    [stop] = [i for i, e in enumerate(events) if e.kind == "controlled_shutdown"]
    stopped = events[stop].broker
    led = [e.broker for e in events[:stop] if e.kind == "election" and e.tp == "bar-1"]
    after = [e for e in events[stop:] if e.kind == "election" and e.tp == "bar-1"]
    assert led[-1] == stopped
    assert after and after[0].broker != stopped and stopped not in after[0].data["isr"]
    assert not after[0].data["unclean"]


def test_a_name_without_a_suffix_is_a_shipped_scenario_whatever_the_working_directory_holds(tmp_path, monkeypatch):
    """`kreplica simulate rolling-restart --out rolling-restart` leaves a directory of the
    scenario's name where the command runs; the next run of that name is still the shipped
    file, not a path to what the working directory holds under it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rolling-restart").mkdir()
    (tmp_path / "slow-follower").write_text('name = "notes"\nbrokers = 6\n')
    assert scenarios.load("slow-follower") == scenarios.load(str(scenarios.HERE / "slow-follower.toml"))
    assert scenarios.load("rolling-restart") == scenarios.load(str(scenarios.HERE / "rolling-restart.toml"))


def test_rolling_restart_brings_each_broker_back_before_stopping_the_next():
    """What its description says: each broker in turn shut down, restarted, and given time
    to rejoin before the next goes.  A restart aimed at a broker that is up is recorded as
    skipped and the run stays clean (the liveness phase restarts the one left down), so
    only the steps themselves show that two brokers were down at once."""
    sc = scenarios.load("rolling-restart")
    steps = sorted(sc.steps, key=lambda s: s.at_ms)
    assert [(s.action, s.target) for s in steps] == [
        (action, b) for b in sc.broker_ids for action in ("controlled_shutdown", "restart")]
    for stop, start, following in zip(steps[0::2], steps[1::2], [*steps[2::2], None]):
        assert stop.at_ms + stop.jitter_ms < start.at_ms
        assert following is None or start.at_ms + start.jitter_ms < following.at_ms


def test_a_scenario_file_with_a_bad_step_is_refused_at_load(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\nbrokers = 3\n[[steps]]\naction = "restart"\ntarget = 4\n')
    with pytest.raises(ValueError, match="step 1 \\(restart\\): target 4 is not a broker"):
        scenarios.load(str(path))


@pytest.mark.parametrize("name", scenarios.names())
def test_swarm_over_any_shipped_scenario_draws_runnable_scenarios(name):
    base = scenarios.load(name)
    for seed in range(1, 101):
        sc = swarm_scenario(seed, base).validate()
        assert 3 <= sc.brokers <= 7 and sc.brokers >= (base.brokers if base.steps else 3)
        if base.steps:  # the story is kept; the swarm draws around it
            assert sc.steps == base.steps and sc.topics == base.topics
        assert int(sc.config["min.insync.replicas"]) <= min(t.replication_factor for t in sc.topics)


def test_swarm_over_a_scripted_base_of_several_replication_factors_draws_for_the_smallest():
    """min.insync.replicas and max_down are drawn against the smallest replication factor
    of a scripted base's topics: above it, acks=all writes to that topic could never be
    acknowledged, and max_down could take every replica of its partitions down at once."""
    base = replace(scenarios.load("random-chaos"), brokers=3,
                   topics=(TopicSpec("two", 1, 2, {0: (1, 2)}), TopicSpec("three", 2, 3)))
    drawn = [swarm_scenario(seed, base) for seed in range(1, 101)]
    assert all(sc.topics == base.topics for sc in drawn)
    assert {sc.config["min.insync.replicas"] for sc in drawn} == {1, 2}
    assert {sc.chaos.max_down for sc in drawn} == {1}


def test_swarm_over_a_scripted_base_of_more_than_seven_brokers_keeps_them_all():
    """The draw's top (7) gives way to a script's own brokers; it must not become an
    empty range when the script names more."""
    base = replace(scenarios.load("reassignment-under-failure"), brokers=8)
    assert {swarm_scenario(seed, base).brokers for seed in range(1, 21)} == {8}


def test_swarm_over_a_base_mix_varies_that_mix_and_keeps_the_rest_of_the_draw():
    """gc-pause-chaos under --swarm once drew the swarm's own mix, pauses of at most 6 s at
    ~2 a minute, the same runs as random-chaos's; with ``swarm_mix = "base"`` each drawn
    rate scales the base's, and its durations and admin cadence stay."""
    gc = scenarios.load("gc-pause-chaos")
    own = replace(gc, swarm_mix="swarm")
    pauses = []
    for seed in range(1, 201):
        a, b = swarm_scenario(seed, gc), swarm_scenario(seed, own)
        assert (a.brokers, a.topics, a.config) == (b.brokers, b.topics, b.config)
        assert a.chaos.pause_ms_max == 10_000 and a.workload.admin_interval_ms == 3000
        assert (a.chaos.downtime_ms_max, a.chaos.partition_ms_max) == \
            (gc.chaos.downtime_ms_max, gc.chaos.partition_ms_max)
        # What is not a rate or a duration is the seed's draw under either mix (max_down < RF).
        drawn = ("power_loss_fraction", "torn_fraction", "max_down", "cascade")
        assert [getattr(a.chaos, f) for f in drawn] == [getattr(b.chaos, f) for f in drawn], seed
        assert a.chaos.pause == round(40.0 * b.chaos.pause / 2.1, 2)  # switched off in both, or scaled
        assert a.swarm_mix == "swarm" and "swarm_mix" not in a.to_dict()  # concrete once drawn
        pauses.append(a.chaos.pause)
    on = [p for p in pauses if p]
    assert 30 < sum(on) / len(on) < 50 and len(on) < len(pauses)  # ~40 a minute as the base's, or off
    churn = swarm_scenario(7, scenarios.load("config-churn"))
    assert churn.workload.admin_interval_ms == 1000 and churn.workload.alter_configs


def test_the_swarm_draws_the_network_too():
    """Latency, its tail, loss and duplication vary per seed (some seeds lose nothing); a
    base mix keeps its latencies and scales its own loss and duplication."""
    nets = [swarm_scenario(seed).network for seed in range(1, 101)]
    assert len({(n.latency_ms_min, n.latency_ms_max) for n in nets}) > 5
    assert all(n.latency_ms_min <= n.latency_ms_max for n in nets)
    # Some seeds have no slow tail at all, as some lose nothing.
    assert {n.tail_probability for n in nets} == {0.0, 0.01, 0.1, 0.3}
    for field in ("drop_probability", "duplicate_probability"):
        rates = [getattr(n, field) for n in nets]
        assert 0 in rates and max(rates) > 0.005 and all(0 <= r <= 0.01 for r in rates)
    assert swarm_scenario(5).network == swarm_scenario(5).network != swarm_scenario(6).network
    gc = scenarios.load("gc-pause-chaos")
    assert gc.network.drop_probability > 0
    drops = []
    for seed in range(1, 101):
        n = swarm_scenario(seed, gc).network
        assert (n.latency_ms_min, n.latency_ms_max, n.tail_probability, n.latency_ms_tail) == \
            (gc.network.latency_ms_min, gc.network.latency_ms_max, gc.network.tail_probability,
             gc.network.latency_ms_tail)
        drops.append(n.drop_probability / gc.network.drop_probability)
    on = [d for d in drops if d]
    assert 0.7 < sum(on) / len(on) < 1.3 and len(on) < len(drops)  # ~1x the base's, or off


def test_the_swarm_draws_client_reordering_and_batches_in_flight_under_either_mix():
    """Drawn after the network: some seeds let clients' requests overtake one another and
    keep several batches in flight per producer, others keep TCP order and one batch.
    The run header names max_in_flight only when it is not 1, so a scenario's history
    hash is as it was before the field existed; replay rebuilds it from the header."""
    gc = scenarios.load("gc-pause-chaos")
    for base in (scenarios.load("random-chaos"), gc):
        drawn = [swarm_scenario(seed, base) for seed in range(1, 101)]
        assert 15 < sum(sc.network.reorder for sc in drawn) < 45
        assert {sc.workload.max_in_flight for sc in drawn} == {1, 2, 5}
        for sc in drawn:
            header = sc.to_dict()
            assert ("max_in_flight" in header["workload"]) == (sc.workload.max_in_flight != 1)
            assert scenarios.from_dict(header) == sc
    a, b = swarm_scenario(3, gc), swarm_scenario(3, replace(gc, swarm_mix="swarm"))
    assert (a.network.reorder, a.workload.max_in_flight) == (b.network.reorder, b.workload.max_in_flight)


def test_a_workload_with_no_batch_in_flight_is_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\n[workload]\nmax_in_flight = 0\n')
    with pytest.raises(ValueError, match="max_in_flight = 0, need at least 1"):
        scenarios.load(str(path))


def test_a_base_mix_without_chaos_or_an_unknown_mix_is_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\nswarm_mix = "base"\n')
    with pytest.raises(ValueError, match="needs a \\[chaos\\] mix"):
        scenarios.load(str(path))
    path.write_text('name = "bad"\nswarm_mix = "mine"\n[chaos]\ncrash = 1.0\n')
    with pytest.raises(ValueError, match="swarm_mix = 'mine'; known: swarm, base"):
        scenarios.load(str(path))
    # An empty mix is an unknown one, not the default a file without the key gets.
    path.write_text('name = "bad"\nswarm_mix = ""\n')
    with pytest.raises(ValueError, match="swarm_mix = ''; known: swarm, base"):
        scenarios.load(str(path))


def test_swarm_over_a_scripted_base_runs_its_story():
    # Seed 1 over this base once drew 3 brokers for a story that reassigns onto broker 4,
    # and the run died of a KeyError inside the fault injector.
    sc = replace(swarm_scenario(1, scenarios.load("reassignment-under-failure")), until_ms=5000)
    world = World(sc, 1)
    r = world.run()
    assert r.ok, r.violation and r.violation.describe()
    assert sc.brokers >= 4 and world.history.counts.get("reassign", 0) >= 1


def test_a_step_whose_target_resolves_to_nobody_is_recorded_as_skipped():
    # Swarm seeds 11, 14 and 15 over controller-failover-mid-reassignment: background faults
    # took the controller first, the scripted kill bound no one, and "restart $controller"
    # died of KeyError: None.  With every broker down, "random" resolves to nobody too.
    everyone_down = tuple(Step("crash", at_ms=1000, target=b) for b in (1, 2, 3))
    sc = replace(BASE, until_ms=4000, steps=everyone_down + (
        Step("pause", at_ms=2000, target="random", params={"duration_ms": 100}),
        *(Step("restart", at_ms=3000, target=b) for b in (1, 2, 3)),
    ))
    world = World(sc, 1)
    r = world.run()
    assert r.ok, r.violation and r.violation.describe()
    (skipped,) = [e for e in world.history.events if e.kind == "step_skipped"]
    assert skipped.data == {"action": "pause", "target": "random", "reason": "no such broker now"}


def test_a_fault_step_the_world_refuses_is_recorded_as_skipped():
    # A restart of a live broker and a controlled shutdown of a dead one change nothing; the
    # history used to say nothing of them either.
    sc = replace(BASE, until_ms=3000, steps=(
        Step("restart", at_ms=1000, target=1),
        Step("crash", at_ms=1500, target=2),
        Step("controlled_shutdown", at_ms=2000, target=2),
    ))
    world = World(sc, 1)
    assert world.run().ok
    skipped = [e.data for e in world.history.events if e.kind == "step_skipped"]
    assert skipped == [
        {"action": "restart", "target": "1", "reason": "refused by the world"},
        {"action": "controlled_shutdown", "target": "2", "reason": "refused by the world"},
    ]


@pytest.mark.parametrize("action,start,end", [
    ("pause", "pause", "resume"), ("cut_store", "cut_store", "heal_store"), ("disk_full", "disk_full", "disk_freed"),
])
def test_a_scripted_fault_on_a_broker_under_that_fault_lasts_its_own_duration(action, start, end):
    # The second step lands while the first (as a chaos planner's fault would be) is still in
    # place: it used to be refused without a word, the fault ending at the first one's time.
    sc = replace(BASE, until_ms=6000, steps=(
        Step(action, at_ms=1000, target=2, params={"duration_ms": 2000}),
        Step(action, at_ms=2000, target=2, params={"duration_ms": 2500}),
    ))
    world = World(sc, 1)
    assert world.run().ok
    seen = [(e.kind, e.time_ms) for e in world.history.events if e.kind in (start, end) and e.broker == 2]
    assert [kind for kind, _ in seen] == [start, start, end]
    assert seen[2][1] - seen[1][1] == 2500  # the second step's duration, not the first's end
    assert not [e for e in world.history.events if e.kind == "step_skipped"]


def test_a_full_disk_freed_by_a_crash_is_not_ended_early_by_its_old_timer():
    # A crash gives the restarted broker a working disk; a new full disk after the restart
    # must last its own 3 s, not end when the first one's timer comes due.
    sc = replace(BASE, until_ms=7000, steps=(
        Step("disk_full", at_ms=1000, target=2, params={"duration_ms": 3000}),
        Step("crash", at_ms=1500, target=2),
        Step("restart", at_ms=2000, target=2),
        Step("disk_full", at_ms=2500, target=2, params={"duration_ms": 3000}),
    ))
    world = World(sc, 1)
    assert world.run().ok
    fulls = [e.time_ms for e in world.history.events if e.kind == "disk_full"]
    assert [e.time_ms for e in world.history.events if e.kind == "disk_freed"] == [fulls[1] + 3000]


@pytest.mark.parametrize("max_down", [1, 2])
@pytest.mark.parametrize("crash_rate, cascade", [(120.0, 0.5), (6.0, 1.0)], ids=["crashes", "cascades"])
def test_the_chaos_planner_never_has_more_than_max_down_brokers_down(max_down, crash_rate, cascade):
    # Crashes only, drawn far more often than brokers come back, or rarely but with every
    # new leader failing right after its election: the number down at once reaches
    # max_down and never passes it.
    from kreplica.sim.faults import FaultRates

    quiet = dict.fromkeys(("controlled_shutdown", "pause", "slow_disk", "kill_controller", "expire_session",
                           "partition", "cut_store"), 0.0)
    sc = replace(BASE, brokers=5, until_ms=20_000, chaos=FaultRates(
        **quiet, crash=crash_rate, max_down=max_down, downtime_ms_max=3000, cascade=cascade, cascade_ms_max=40))
    world = World(sc, 3)
    assert world.run().ok
    down: set[int] = set()
    most = 0
    for e in world.history.events:
        if e.kind == "crash":
            down.add(e.broker)
        elif e.kind == "restart":
            down.discard(e.broker)
        most = max(most, len(down))
    assert most == max_down


def test_no_scripted_fault_fires_once_the_liveness_phase_has_begun():
    # kip101-divergence crashes brokers 2 and 3 at about 2.1 s; with --until 2000 those steps
    # come due during the liveness phase, which must heal everything and stop faults.
    sc = replace(scenarios.load("kip101-divergence"), until_ms=2000)
    world = World(sc, 1)
    world.run()
    kinds = [e.kind for e in world.history.events]
    start = kinds.index("liveness_start")
    assert not {"crash", "pause", "partition", "cut_store", "controlled_shutdown"} & set(kinds[start:])
    skipped = [e.data for e in world.history.events[start:] if e.kind == "step_skipped"]
    assert skipped and all(d["reason"] == "liveness phase" for d in skipped)


def test_time_to_re_elect_counts_from_the_loss_that_caused_the_election():
    # A 1 s pause of bar-0's leader (no election: shorter than the session timeout), then at
    # 12 s a crash.  The re-election must be timed from the crash, not from the pause 10 s
    # earlier, whose mark used to stay until the next election.
    base = scenarios.load("seed003-broker-killed")
    sc = replace(base, until_ms=20_000, chaos=None, steps=(
        Step("pause", at_ms=2000, target="leader:bar-0", bind="first", params={"duration_ms": 1000}),
        Step("crash", at_ms=12_000, target="$first"),
        Step("restart", at_ms=16_000, target="$first"),
    ))
    r = World(sc, 1).run()
    timeout = int(sc.config.get("zookeeper.session.timeout.ms", 18_000))
    assert r.ok and r.reelect_ms and max(r.reelect_ms) <= timeout + 2000, r.reelect_ms


@pytest.mark.parametrize("acks", ["0", "1"])
def test_throughput_counts_writes_acked_at_any_level(acks):
    from kreplica.sim.report import Summary

    base = scenarios.load("seed003-controlled-shutdown")
    sc = replace(base, until_ms=3000, workload=replace(base.workload, acks=acks)).with_config(acks=acks)
    r = World(sc, 1).run()
    assert r.writes_completed > 0 and r.acked_writes == 0  # acks=all alone is what invariant 1 judges
    summary = Summary()
    summary.add(r)
    rows = dict(summary.rows())
    assert float(rows["writes completed / virtual s (acked, or sent with acks=0)"]) > 0
    assert summary.to_dict()["writes_completed"] == r.writes_completed


def _isrs(world, tp):
    return [tuple(e.data["isr"]) for e in world.history.events if e.kind in ("isr_changed", "election") and e.tp == tp]


def _count(world, kind):
    return sum(e.kind == kind for e in world.history.events)


def _leaders(world, tp):
    return [e.broker for e in world.history.events if e.kind == "election" and e.tp == tp]


# What each story must show besides a clean, converged run (leader-epoch truncation).
STORY = {
    "reassignment-under-failure": lambda w: _isrs(w, "t-0")[-1] == (2, 3, 4) and _count(w, "crash") == 1,
    "controller-failover-mid-reassignment": lambda w: _isrs(w, "t-0")[-1] == (2, 3, 4)
    and _count(w, "kill_controller") == 1,
    "rolling-restart": lambda w: _count(w, "controlled_shutdown_done") == 3 and _count(w, "restart") == 3,
    "leader-cut-from-store": lambda w: _count(w, "cut_store") == 1 and _count(w, "election") > 3,
    # Broker 3 drops out of every ISR and is back in each at the end.
    "slow-follower": lambda w: all(any(3 not in isr for isr in _isrs(w, tp)) and 3 in _isrs(w, tp)[-1]
                                   for tp in ("t-0", "t-1", "t-2")),
    # Out-of-sync 3 is elected once 1 and 2 are gone (the story's point: without the switch on
    # the partition stays offline until 1 returns, and nothing is lost).
    "unclean-election": lambda w: any(e.kind == "election" and e.data["unclean"] and e.broker == 3
                                      for e in w.history.events),
    "config-churn": lambda w: _count(w, "alter_config") > 0,  # convergence needs them applied
    "control-plane-chaos": lambda w: _count(w, "controlled_shutdown") > 0 and _count(w, "expire_session") > 0,
    # 3's join lands once the store heals, and 3 (holding every acked write) succeeds 2.
    "isr-join-leader-loss": lambda w: (2, 1, 3) in _isrs(w, "t-0") and _leaders(w, "t-0") == [2, 3],
    # 3 leads with a lagging HW, 2 stays out of its ISR, and 4 succeeds 3.
    "isr-join-new-leader": lambda w: _leaders(w, "t-0")[-2:] == [3, 4],
    "retention-chaos": lambda w: any(e.kind == "log_start" and e.data["cause"] == "retention"
                                     for e in w.history.events),
}


@pytest.mark.parametrize("name", scenarios.names())
def test_every_shipped_scenario_runs_clean_under_leader_epoch(name):
    sc = scenarios.load(name).with_config(**{"replica.truncation.strategy": "leader-epoch"})
    if sc.chaos is not None:
        sc = replace(sc, until_ms=10_000)
    world = World(sc, 1)
    r = world.run()
    assert r.ok and r.converged, r.violation and r.violation.describe()
    assert STORY.get(name, lambda w: True)(world), name


def _story(steps, until_ms=15_000):
    base = scenarios.load("slow-follower")  # 3 brokers, t-0..t-2 led by 1, 2, 1; lag 3 s, session 3 s
    return replace(base, steps=tuple(steps), until_ms=until_ms)


def test_session_expiry_moves_leadership_and_the_broker_comes_back():
    world = World(_story([Step("expire_session", at_ms=2000, target=1)]), 1)
    r = world.run()
    assert r.ok and r.converged, r.violation and r.violation.describe()
    expired = next(e.time_ms for e in world.history.events if e.kind == "expire_session")
    new_leaders = {e.tp: e.broker for e in world.history.events if e.kind == "election" and e.time_ms > expired}
    assert new_leaders.get("t-0") not in (None, 1) and new_leaders.get("t-2") not in (None, 1)
    assert all(1 in isr for isr in (_isrs(world, tp)[-1] for tp in ("t-0", "t-1", "t-2")))  # re-registered, caught up


def test_a_full_disk_fails_appends_with_a_storage_error_until_space_returns():
    world = World(_story([Step("disk_full", at_ms=2000, target=1, params={"duration_ms": 2000})]), 1)
    r = world.run()
    assert r.ok and r.converged, r.violation and r.violation.describe()
    freed = next(e.time_ms for e in world.history.events if e.kind == "disk_freed")
    refused = [e for e in world.history.events if e.kind == "produce_failed" and e.tp in ("t-0", "t-2")
               and e.data.get("error") == "KAFKA_STORAGE_ERROR"]
    assert refused and all(2000 <= e.time_ms <= freed for e in refused)
    assert any(e.kind == "ack" and e.tp == "t-0" and e.time_ms > freed for e in world.history.events)


def test_a_scenario_file_can_give_one_direction_of_one_link_its_own_profile(tmp_path):
    path = tmp_path / "far.toml"
    path.write_text('name = "far"\nbrokers = 3\nuntil_ms = 3000\n'
                    '[network]\nlatency_ms_min = 1\nlatency_ms_max = 1\n'
                    '[links."1-3"]\nlatency_ms_min = 70\nlatency_ms_max = 70\n')
    sc = scenarios.load(str(path))
    assert sc.links == {(1, 3): scenarios.LinkProfile(latency_ms_min=70, latency_ms_max=70)}
    assert scenarios.from_dict(sc.to_dict()) == sc  # the run header round-trips it (replay)
    assert "links" not in scenarios.load("random-chaos").to_dict()  # absent when unset: old headers unchanged
    world = World(sc, 1)
    assert world.network.profile_for(1, 3).latency_ms_min == 70 and world.network.profile_for(3, 1).latency_ms_min == 1
    assert world.run().ok
    with pytest.raises(ValueError, match="must join two brokers"):
        replace(sc, links={(1, 9): scenarios.LinkProfile()}).validate()
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[links."1to3"]\nlatency_ms_min = 5\n')
    with pytest.raises(ValueError, match="from broker"):
        scenarios.load(str(bad))


def test_a_link_key_may_have_blanks_around_either_broker(tmp_path):
    """`[links."1 - 3"]` is the link from 1 to 3, read as int() reads each side, as
    `[links."1-3"]` is; neither side's blanks make it "no link".  A node's key and an
    assignment's partition are read the same way."""
    path = tmp_path / "spaced.toml"
    path.write_text('name = "spaced"\n[links."1 - 3"]\nlatency_ms_min = 7\nlatency_ms_max = 7\n'
                    '[links." 2-1"]\nreorder = true\n[nodes." 2 "]\nreorder = true\n'
                    '[[topics]]\nname = "t"\npartitions = 1\nreplication_factor = 1\nassignment = {" 0" = [3]}\n')
    sc = scenarios.load(str(path))
    assert sc.links == {(1, 3): scenarios.LinkProfile(latency_ms_min=7, latency_ms_max=7),
                        (2, 1): scenarios.LinkProfile(reorder=True)}
    assert sc.nodes == {2: scenarios.LinkProfile(reorder=True)}
    assert sc.topics == (TopicSpec("t", 1, 1, {0: (3,)}),)


@pytest.mark.parametrize("text", [
    '[nodes."\u00b2"]\nreorder = true\n',                                    # superscript two
    '[nodes."\u0661"]\nreorder = true\n',                                    # Arabic-Indic one
    '[links."1-\u00b2"]\nreorder = true\n',
    '[[topics]]\nname = "t"\npartitions = 1\nreplication_factor = 1\nassignment = {"\u0660" = [1]}\n',
    '[[steps]]\nat_ms = 1\naction = "crash"\ntarget = "leader:t-\u00b2"\n',
], ids=["node-superscript", "node-arabic-indic", "link", "assignment", "target"])
def test_a_number_in_a_scenario_file_is_ascii_digits(tmp_path, text):
    """Broker and partition numbers written as text (node and link keys, assignment keys, a
    target's partition) are ASCII digits: "\u0661" is refused, not read as broker 1, and "\u00b2"
    is refused naming the scenario, not a bare int() error."""
    path = tmp_path / "digits.toml"
    path.write_text('name = "digits"\n' + text, encoding="utf-8")
    with pytest.raises(ValueError, match="^scenario digits: "):
        scenarios.load(str(path))


def test_retention_under_chaos_deletes_on_purpose_and_loses_nothing_acked():
    """retention-chaos (tiny segments, byte retention, random chaos): leaders and followers delete
    committed segments, followers adopt their leaders' log start (KIP-107), and the
    checker judges each replica from its own log start on -- with every move recorded."""
    sc = replace(scenarios.load("retention-chaos").with_config(**{"replica.truncation.strategy": "leader-epoch"}),
                 until_ms=12_000)
    causes = set()
    for seed in (1, 4, 5):  # 4 and 5 see followers adopt their leader's start
        world = World(sc, seed)
        r = world.run()
        assert r.ok and r.converged, r.violation and r.violation.describe()
        moves = [e for e in world.history.events if e.kind == "log_start"]
        assert all(e.data["start"] > e.data["start_before"] for e in moves)
        causes |= {e.data["cause"] for e in moves}
    assert causes == {"retention", "leader's log start"}


def test_a_follower_back_from_a_crash_below_its_leaders_log_start_starts_over_there():
    """Seed 1: broker 2 was four offsets into t-3 when it lost power; meanwhile retention
    moved the other replicas' log start to 42.  Back, its first fetch finds its log below
    the leader's start and starts it over there (KIP-107), and the whole run converges.

    This test once pinned seed 1590, where the follower's leftovers below that start were
    history a power-loss election had superseded, which the checker must not judge.  Since
    leaderless OfflineReplica transitions send LeaderAndIsr, no retention-chaos seed in
    1..3,000 fails with that rule off; test_sim_checker pins the rule itself."""
    world = World(scenarios.load("retention-chaos").with_config(**{"replica.truncation.strategy": "leader-epoch"}),
                  1)
    r = world.run()
    assert r.ok and r.converged, r.violation and r.violation.describe()
    ev = world.history.events
    crash = next(e for e in ev if e.kind == "crash" and e.broker == 2)
    assert crash.data["lose_unflushed"]
    restart = next(e.time_ms for e in ev if e.kind == "restart" and e.broker == 2 and e.time_ms > crash.time_ms)
    assert [(e.broker, e.data["start"]) for e in ev if e.kind == "log_start" and e.tp == "t-3"
            and e.time_ms < restart] == [(3, 42), (1, 42)]
    over = [e for e in ev if e.kind == "truncate_fully" and e.broker == 2 and e.tp == "t-3" and e.time_ms > restart]
    assert [(e.data["leo_before"], e.data["offset"]) for e in over][:1] == [(4, 42)]


def test_a_scenario_file_extends_another_table_by_table(tmp_path):
    (tmp_path / "more.toml").write_text('extends = "random-chaos"\nname = "more"\nbrokers = 5\n'
                                        '[config]\n"min.insync.replicas" = 3\n[chaos]\ncrash = 0.0\n')
    base, sc = scenarios.load("random-chaos"), scenarios.load(str(tmp_path / "more.toml"))
    assert (sc.name, sc.brokers, sc.config["min.insync.replicas"], sc.chaos.crash) == ("more", 5, 3, 0.0)
    assert {k: v for k, v in sc.config.items() if k != "min.insync.replicas"} == {
        k: v for k, v in base.config.items() if k != "min.insync.replicas"}
    assert sc.chaos.pause == base.chaos.pause and sc.workload == base.workload and sc.topics == base.topics
    (tmp_path / "a.toml").write_text(f'extends = "{tmp_path / "b.toml"}"\nname = "a"\n')
    (tmp_path / "b.toml").write_text(f'extends = "{tmp_path / "a.toml"}"\nname = "b"\n')
    with pytest.raises(ValueError, match="extends itself"):
        scenarios.load(str(tmp_path / "a.toml"))


def test_an_extending_file_may_give_a_table_its_base_has_not(tmp_path):
    """A table the base leaves out ([chaos], [workload]) is taken from the extending file as
    written, not merged into nothing."""
    (tmp_path / "plain.toml").write_text('name = "plain"\nbrokers = 3\n')
    (tmp_path / "more.toml").write_text('extends = "plain.toml"\nname = "more"\n'
                                        '[chaos]\ncrash = 0.5\n[workload]\nkeys = 4\n')
    sc = scenarios.load(str(tmp_path / "more.toml"))
    assert (sc.name, sc.chaos.crash, sc.workload.keys) == ("more", 0.5, 4)
    assert sc.chaos.pause == FaultRates().pause and sc.workload.acks == WorkloadSpec().acks


def test_convergence_requires_every_replica_to_run_with_the_topics_current_config(monkeypatch):
    """config-churn with brokers that ignore /config/changes: the run cannot converge."""
    from kreplica.replica.replica_manager import ReplicaManager

    monkeypatch.setattr(ReplicaManager, "update_topic_configs", lambda self, topic_configs: 0)
    sc = scenarios.load("config-churn").with_config(**{"replica.truncation.strategy": "leader-epoch"})
    r = World(replace(sc, until_ms=10_000, liveness_ms=20_000), 3).run()  # retention.bytes set at 1 s
    assert not r.converged and r.violation is not None
    assert "has not applied the topic's config" in r.violation.message


def test_every_shipped_scenarios_steps_fire_before_its_run_ends():
    """A step at or after until_ms (jitter included) never fires: the scenario would run
    clean without the fault it exists for."""
    for name in scenarios.names():
        sc = scenarios.load(name)
        late = [(i, s.action, s.at_ms, s.jitter_ms) for i, s in enumerate(sc.steps, 1)
                if s.at_ms + s.jitter_ms >= sc.until_ms]
        assert not late, f"{name}: steps {late} at or after until_ms = {sc.until_ms}"


def test_every_shipped_scenarios_acks_all_writes_can_be_acknowledged():
    """min.insync.replicas above a topic's replication factor is accepted (as Kafka accepts
    it), but then every acks=all write fails NOT_ENOUGH_REPLICAS and invariant 1 judges none."""
    for name in scenarios.names():
        sc = scenarios.load(name)
        min_isr = validate_config(sc.config)["min.insync.replicas"]
        for t in sc.topics:
            assert min_isr <= t.replication_factor, f"{name}: topic {t.name} of replication factor " \
                f"{t.replication_factor} under min.insync.replicas = {min_isr}"


def test_a_probability_or_fraction_of_exactly_one_is_taken(tmp_path):
    """1 is the top of the range (every message dropped, every power loss torn), not past it."""
    path = tmp_path / "one.toml"
    path.write_text('name = "one"\n[network]\ndrop_probability = 1.0\ntail_probability = 1\n'
                    '[chaos]\ntorn_fraction = 1.0\npower_loss_fraction = 1\n')
    sc = scenarios.load(str(path))
    assert (sc.network.drop_probability, sc.network.tail_probability) == (1.0, 1)
    assert (sc.chaos.torn_fraction, sc.chaos.power_loss_fraction) == (1.0, 1)


def test_a_scenario_extending_another_replaces_its_steps_and_topics(tmp_path):
    """Only tables are merged key by key; a list (the steps, the topics) is this file's own."""
    (tmp_path / "base.toml").write_text(
        'name = "base"\n[[topics]]\nname = "a"\n[[topics]]\nname = "b"\n'
        '[[steps]]\naction = "crash"\ntarget = 1\n[[steps]]\naction = "restart"\ntarget = 1\nat_ms = 100\n')
    (tmp_path / "more.toml").write_text(
        f'extends = "{tmp_path / "base.toml"}"\nname = "more"\n[[topics]]\nname = "c"\n'
        '[[steps]]\naction = "pause"\ntarget = 2\nduration_ms = 10\n')
    sc = scenarios.load(str(tmp_path / "more.toml"))
    assert [t.name for t in sc.topics] == ["c"]
    assert [(s.action, s.target) for s in sc.steps] == [("pause", 2)]
    # An empty list too: no topics of its own (its steps create them), not the default topic t.
    (tmp_path / "none.toml").write_text(
        f'extends = "{tmp_path / "base.toml"}"\nname = "none"\ntopics = []\n'
        '[[steps]]\naction = "create_topic"\ntopic = "x"\n')
    sc = scenarios.load(str(tmp_path / "none.toml"))
    assert sc.topics == () and [(s.action, s.params) for s in sc.steps] == [("create_topic", {"topic": "x"})]


def test_an_empty_extends_names_no_scenario_and_is_refused(tmp_path):
    """`extends = ""` (a base's name lost in an edit) is refused as any unknown name is, not
    read as no base: the file would run alone, without the scenario it was written over."""
    path = tmp_path / "more.toml"
    path.write_text('extends = ""\nname = "more"\nbrokers = 5\n')
    with pytest.raises(ValueError, match="no scenario ''; known: "):
        scenarios.load(str(path))


def test_an_extends_cycle_written_two_ways_is_still_found(tmp_path, monkeypatch):
    """The cycle check compares the files' paths: "./a.toml" is the file "a.toml" is."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.toml").write_text('extends = "./b.toml"\nname = "a"\n')
    (tmp_path / "b.toml").write_text('extends = "./a.toml"\nname = "b"\n')
    with pytest.raises(ValueError, match="extends itself: a.toml -> b.toml -> a.toml"):
        scenarios.load("a.toml")


def test_a_header_with_a_null_where_a_value_goes_is_refused():
    """A run header is JSON, so a hand-edited one can hold null: only a field declared
    optional takes it (a None batch size would fail mid-run, in the workload)."""
    with pytest.raises(ValueError, match=r"scenario h: \[workload\]: batch_records = None, expected an integer"):
        scenarios.from_dict({"name": "h", "workload": {"batch_records": None}})
    with pytest.raises(ValueError, match=r"\[network\]: drop_probability = None, expected a number"):
        scenarios.from_dict({"name": "h", "network": {"drop_probability": None}})
    # Nor the description (`simulate --list` splits it) or the swarm mix, strings as written (128d385).
    with pytest.raises(ValueError, match=r"scenario h: description = None, expected a string"):
        scenarios.from_dict({"name": "h", "description": None})
    with pytest.raises(ValueError, match=r"scenario h: swarm_mix = None, expected a string"):
        scenarios.from_dict({"name": "h", "swarm_mix": None})


def test_a_relative_extends_is_read_beside_the_extending_file(tmp_path, monkeypatch):
    """`extends = "base.toml"` in lab/more.toml means lab/base.toml, wherever the command
    runs; it used to be read from the working directory."""
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "base.toml").write_text('extends = "random-chaos"\nname = "base"\nbrokers = 4\n')
    (lab / "more.toml").write_text('extends = "base.toml"\nname = "more"\nuntil_ms = 5000\n')
    monkeypatch.chdir(tmp_path)
    # A base.toml in the working directory too: the one beside the extending file is meant.
    (tmp_path / "base.toml").write_text('extends = "random-chaos"\nname = "decoy"\nbrokers = 6\n')
    # A directory beside it named as a shipped scenario (a run's --out random-chaos): a name
    # without a suffix is still the shipped scenario, not a path.
    (lab / "random-chaos").mkdir()
    sc = scenarios.load("lab/more.toml")
    assert (sc.name, sc.brokers, sc.until_ms) == ("more", 4, 5000)
    # No such file beside it: the name is read from the working directory, as it was before.
    (tmp_path / "elsewhere.toml").write_text('extends = "random-chaos"\nname = "elsewhere"\nbrokers = 5\n')
    (lab / "far.toml").write_text('extends = "elsewhere.toml"\nname = "far"\n')
    assert scenarios.load("lab/far.toml").brokers == 5


# What World._run_step reads from a step of each action with no default to fall back on: a
# step without one must be refused at load, or the run fails with a KeyError as it fires.
READS = {"crash_together": {"crashes": [{"broker": 1}]}, "pause": {"duration_ms": 10},
         "slow_disk": {"duration_ms": 10}, "disk_full": {"duration_ms": 10}, "isolate": {"duration_ms": 10},
         "partition": {"groups": [[1], [2, 3]], "duration_ms": 10}, "cut_store": {"duration_ms": 10},
         "reassign": {"topic": "t", "partition": 0, "replicas": [1, 2, 3]}, "elect_preferred": {"topic": "t"},
         "create_topic": {"topic": "x"}, "delete_topic": {"topic": "t"}}


@pytest.mark.parametrize("action, name", [(a, n) for a, given in READS.items() for n in given])
def test_a_step_leaving_out_a_parameter_its_action_reads_is_refused_at_load(action, name):
    target = 2 if action in AIMED else None
    whole = replace(BASE, steps=(Step(action, target=target, params=READS[action]),))
    assert whole.validate() is whole
    params = {k: v for k, v in READS[action].items() if k != name}
    with pytest.raises(ValueError, match=f"step 1 \\({action}\\): missing {name}$"):
        replace(BASE, steps=(Step(action, target=target, params=params),)).validate()
