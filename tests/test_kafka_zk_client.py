"""KafkaZkClient over both stores: Kafka's paths and JSON, batched conditional writes."""
from __future__ import annotations

import dataclasses
import json

import pytest

from kreplica import errors
from kreplica.meta import layout
from kreplica.meta.kafka_zk_client import KafkaZkClient
from kreplica.meta.store import BadVersion, ConnectionLoss, NodeExists, NoNode
from kreplica.protocol.common import LeaderAndIsr, TopicPartition as TP
from meta_env import Recorder, StoreEnv, meanwhile


def _client(env: StoreEnv, name: str = "b") -> KafkaZkClient:
    return KafkaZkClient(env.store.session(name), env.sched)


def _raw(env: StoreEnv, path: str) -> bytes:
    """The node's bytes as stored: read straight with kazoo against ZooKeeper."""
    if env.kind == "zookeeper":
        return env.extras["kazoo"].get(env.chroot + path)[0]
    return env.store.session("raw").get(path)[0]


def test_broker_registration_and_liveness(store_env: StoreEnv) -> None:
    ctl = _client(store_env, "controller")
    brokers = {i: _client(store_env, f"b{i}") for i in (1001, 1002, 1003)}
    for bid, c in brokers.items():
        c.register_broker(bid, "127.0.0.1", 9000 + bid % 1000)
    with pytest.raises(NodeExists, match="NODEEXISTS"):
        _client(store_env).register_broker(1001)
    brokers[1001].register_broker(1001)  # its own node: a retried registration is fine
    seen = Recorder()
    assert ctl.get_live_broker_ids(seen) == [1001, 1002, 1003]
    raw = json.loads(_raw(store_env, "/brokers/ids/1002"))
    assert raw["version"] == 4 and raw["host"] == "127.0.0.1" and raw["port"] == 9002
    assert raw["endpoints"] == ["PLAINTEXT://127.0.0.1:9002"] and raw["jmx_port"] == -1
    assert raw["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}  # Kafka 2.x writes it
    assert raw["timestamp"] == str(int(raw["timestamp"]))
    assert ctl.get_broker(1002).port == 9002 and ctl.get_broker(7) is None
    brokers[1002].session.close()
    assert store_env.wait(lambda: seen.types() == ["CHILD"])
    assert ctl.get_live_broker_ids() == [1001, 1003]


def test_broker_epochs_and_handled_unclean_restarts(store_env: StoreEnv) -> None:
    """A broker's epoch is the session owning its registration; the handled-restart
    record (our extension) is a persistent node per broker, overwritten each time."""
    ctl = _client(store_env, "controller")
    broker = _client(store_env, "b1")
    assert ctl.get_broker_epoch(1) is None
    broker.register_broker(1, unclean_shutdown_controller_epoch=3)
    epoch = ctl.get_broker_epoch(1)
    assert epoch == broker.session.session_id
    assert ctl.get_broker(1).unclean_shutdown_controller_epoch == 3  # read back for the controller
    assert ctl.get_unclean_shutdowns_handled([1, 2]) == {}
    ctl.set_unclean_shutdown_handled(1, epoch, 4)
    assert json.loads(_raw(store_env, "/brokers/unclean_shutdowns_handled/1")) == {
        "version": 1, "broker_epoch": epoch, "controller_epoch": 4}
    ctl.set_unclean_shutdown_handled(1, epoch + 1, 5)
    assert ctl.get_unclean_shutdowns_handled([1, 2]) == {1: epoch + 1}
    assert ctl.get_live_broker_ids() == [1]          # a sibling of /brokers/ids, not in it


def test_topic_assignment_and_config(store_env: StoreEnv) -> None:
    c = _client(store_env)
    seen = Recorder()
    assert c.get_all_topics(seen) == []
    c.create_topic("bar", {0: [1001, 1003, 1002], 1: [1002, 1001, 1003]}, {"retention.ms": 1000})
    assert _raw(store_env, "/brokers/topics/bar") == \
        b'{"version":1,"partitions":{"0":[1001,1003,1002],"1":[1002,1001,1003]}}'
    assert _raw(store_env, "/config/topics/bar") == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert store_env.wait(lambda: seen.types() == ["CHILD"])
    assert c.get_all_topics() == ["bar"] and c.topic_exists("bar") and not c.topic_exists("foo")
    with pytest.raises(errors.TopicAlreadyExists):
        c.create_topic("bar", {0: [1]})
    assignment, version = c.get_topic_assignment_and_version("bar")
    assert assignment == {0: [1001, 1003, 1002], 1: [1002, 1001, 1003]}
    assert c.set_topic_assignment("bar", {0: [1], 1: [2]}, expected_version=version) == version + 1
    with pytest.raises(BadVersion):
        c.set_topic_assignment("bar", {0: [3]}, expected_version=version)
    assert c.get_topic_assignments(["bar", "nope"]) == {"bar": {0: [1], 1: [2]}}
    assert c.get_replica_assignment(["bar"]) == {TP("bar", 0): [1], TP("bar", 1): [2]}
    assert c.get_topic_config("bar") == {"retention.ms": "1000"}
    with pytest.raises(errors.UnknownTopicOrPartition):
        c.get_topic_assignment("nope")


@pytest.mark.parametrize("topic", ["", ".", "..", "a\x01", "a/", "bar/partitions", "bar/partitions/0"])
def test_a_topic_no_node_can_be_named_after_does_not_exist(store_env: StoreEnv, topic: str) -> None:
    # Both stores refuse a path no ZooKeeper node can have (InvalidPath, before anything is
    # sent); a topic read under such a name is a topic that does not exist, as for any
    # other absent topic (describe "" is "no such topic", not a ValueError), and a batch
    # naming it beside a real topic still answers for the real one. So is a name holding
    # "/", whose path names a node under another topic's: "bar/partitions" is no topic,
    # not bar's partitions node (which exists, and is no assignment).
    c = _client(store_env)
    c.create_topic("bar", {0: [1001]})
    c.create_partition_states({TP("bar", 0): LeaderAndIsr(1001, 0, [1001], 0, 0)})
    assert not c.topic_exists(topic)
    with pytest.raises(errors.UnknownTopicOrPartition):
        c.get_topic_assignment(topic, Recorder())
    assert c.get_topic_assignments([topic, "bar"]) == {"bar": {0: [1001]}}
    assert c.get_topic_configs([topic, "bar"]) == {topic: {}, "bar": {}}
    assert list(c.get_partition_states([TP(topic, 0), TP("bar", 0)])) == [TP("bar", 0)]


def test_a_batch_whose_later_chunk_names_a_topic_no_node_can_have_reads_only_that_chunk_again(
        store_env: StoreEnv) -> None:
    # The batch goes in chunks of max_batch_ops; a refused chunk is read again path by path,
    # and only that chunk, so the answer still lines up with the names asked for.
    c = _client(store_env)
    for t in ("a", "b", "c"):
        c.create_topic(t, {0: [1001 + ord(t) - ord("a")]})
    c.set_topic_config("c", {"retention.ms": 1000})
    c.session.max_batch_ops = 2
    read_alone: list[str] = []
    get = c.session.get
    c.session.get = lambda path, watch=None: read_alone.append(path) or get(path, watch)
    assert c.get_topic_assignments(["a", "b", "c", "."]) == {"a": {0: [1001]}, "b": {0: [1002]}, "c": {0: [1003]}}
    assert c.get_topic_configs(["a", "b", "c", ""]) == {"a": {}, "b": {}, "c": {"retention.ms": "1000"}, "": {}}
    # The first chunk [a, b] was answered in one batch each time and is not read again.
    assert read_alone == ["/brokers/topics/c", "/brokers/topics/.", "/config/topics/c", "/config/topics/"]


def test_partition_states_batched_and_conditional(store_env: StoreEnv) -> None:
    c = _client(store_env, "controller")
    leader = _client(store_env, "leader")
    c.create_topic("bar", {p: [1001, 1002, 1003] for p in range(4)})
    tps = [TP("bar", p) for p in range(4)]
    created, failed = c.create_partition_states(
        {tp: LeaderAndIsr(1001, 0, (1001, 1002, 1003), controller_epoch=1) for tp in tps})
    assert failed == {} and created == {tp: LeaderAndIsr(1001, 0, (1001, 1002, 1003), 0, 1) for tp in tps}
    assert _raw(store_env, "/brokers/topics/bar/partitions/2/state") == \
        b'{"controller_epoch":1,"leader":1001,"version":1,"leader_epoch":0,"isr":[1001,1002,1003]}'
    again, failed = c.create_partition_states({tps[0]: LeaderAndIsr(1002, 0, (1002,))})
    assert again == {} and isinstance(failed[tps[0]], NodeExists)

    before = store_env.store.round_trips
    states = c.get_partition_states(tps + [TP("bar", 9)])
    assert set(states) == set(tps)
    # The leader of partition 1 shrinks its ISR first (conditional on version 0) ...
    ok, stale, errs = leader.update_partition_states({tps[1]: states[tps[1]].with_isr((1001,))})
    assert ok[tps[1]].zk_version == 1 and stale == [] and errs == {}
    # ... so the controller's batch loses only that partition, and applies the rest.
    new = {tp: states[tp].with_leader(1002, (1002, 1003)) for tp in tps}
    updated, stale, errs = c.update_partition_states(new)
    assert stale == [tps[1]] and errs == {} and set(updated) == set(tps) - {tps[1]}
    assert updated == {tp: dataclasses.replace(new[tp], zk_version=1) for tp in updated}  # all but the version as written
    assert all(s.leader == 1002 and s.controller_epoch == 1 for s in updated.values())
    reread = c.get_partition_states([tps[1]])[tps[1]]
    assert reread.isr == (1001,) and reread.zk_version == 1
    retry, stale, _ = c.update_partition_states({tps[1]: reread.with_leader(1002, (1002,))})
    assert stale == [] and retry[tps[1]].leader_epoch == 1
    raw = json.loads(_raw(store_env, "/brokers/topics/bar/partitions/1/state"))
    assert raw == {"controller_epoch": 1, "leader": 1002, "version": 1, "leader_epoch": 1, "isr": [1002]}
    # reads and writes were batched: far fewer round trips than partitions touched
    assert store_env.store.round_trips - before <= 7


def test_a_partition_without_a_state_node_is_an_error_not_a_stale_version(store_env: StoreEnv) -> None:
    # A stale version is re-read and retried by the controller; a missing node cannot be.
    c = _client(store_env, "controller")
    c.create_topic("bar", {0: [1, 2], 1: [1, 2]})
    created, _ = c.create_partition_states({TP("bar", 0): LeaderAndIsr(1, 0, (1, 2), controller_epoch=1)})
    state = created[TP("bar", 0)]
    updated, stale, errs = c.update_partition_states({TP("bar", 0): state.with_isr((1,)),
                                                      TP("bar", 1): state})
    assert set(updated) == {TP("bar", 0)} and stale == []
    assert set(errs) == {TP("bar", 1)} and isinstance(errs[TP("bar", 1)], NoNode)


def test_live_broker_ids_are_in_numeric_order(store_env: StoreEnv) -> None:
    c = _client(store_env, "controller")
    brokers = [_client(store_env, f"b{i}") for i in (10, 9, 100)]
    for b, bid in zip(brokers, (10, 9, 100)):
        b.register_broker(bid)
    assert c.get_live_broker_ids() == [9, 10, 100]


def test_controller_election_and_epoch(store_env: StoreEnv) -> None:
    a, b = _client(store_env, "a"), _client(store_env, "b")
    seen = Recorder()
    assert b.get_controller_id(seen) is None
    assert a.get_controller_epoch() is None
    assert a.try_elect_controller(1001) and not b.try_elect_controller(1002)
    assert store_env.wait(lambda: seen.types() == ["CREATED"])
    raw = json.loads(_raw(store_env, "/controller"))
    assert (raw["version"], raw["brokerid"]) == (1, 1001)
    assert raw["timestamp"] == str(int(raw["timestamp"]))  # Kafka writes the time as a string
    assert a.increment_controller_epoch(None) == (1, 0)
    with pytest.raises(BadVersion):
        b.increment_controller_epoch(None)
    assert _raw(store_env, "/controller_epoch") == b"1"
    assert a.increment_controller_epoch(0) == (2, 1)
    with pytest.raises(BadVersion):
        b.increment_controller_epoch(0)
    assert b.get_controller_epoch() == (2, 1)
    assert b.get_controller_id(seen) == 1001
    a.session.close()
    assert store_env.wait(lambda: seen.types() == ["CREATED", "DELETED"])
    assert b.try_elect_controller(1002) and b.get_controller_id() == 1002


def test_atomic_controller_registration(store_env: StoreEnv) -> None:
    a, b, c = _client(store_env, "a"), _client(store_env, "b"), _client(store_env, "c")
    assert a.register_controller_and_increment_epoch(1001) == (1, 0)
    assert b.register_controller_and_increment_epoch(1002) is None
    assert b.get_controller_epoch() == (1, 0)  # the loser's transaction left nothing behind
    a.session.close()
    # The epoch moves between b's read and b's transaction (a dying predecessor's last
    # bump): the transaction fails whole -- no /controller is left -- and b retries.
    read_epoch = b.get_controller_epoch
    raced: list[int] = []

    def read_then_race():
        got = read_epoch()
        if not raced:
            raced.append(c.increment_controller_epoch(got[1])[0])
        return got

    b.get_controller_epoch = read_then_race
    assert b.register_controller_and_increment_epoch(1002) == (3, 2)
    assert raced == [2] and b.get_controller_id() == 1002
    assert json.loads(_raw(store_env, "/controller"))["brokerid"] == 1002
    assert _raw(store_env, "/controller_epoch") == b"3"


def test_admin_paths(store_env: StoreEnv) -> None:
    admin, ctl = _client(store_env, "admin"), _client(store_env, "controller")
    seen = Recorder()
    assert ctl.get_partition_reassignment(seen) == {}
    admin.create_partition_reassignment({TP("bar", 0): [1002, 1003, 1001]})
    assert _raw(store_env, "/admin/reassign_partitions") == \
        b'{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1002,1003,1001]}]}'
    with pytest.raises(NodeExists):
        admin.create_partition_reassignment({TP("bar", 1): [1]})
    assert store_env.wait(lambda: seen.types() == ["CREATED"])
    assert ctl.get_partition_reassignment(seen) == {TP("bar", 0): [1002, 1003, 1001]}
    assert ctl.reassignment_in_progress()
    ctl.set_partition_reassignment({})
    assert not ctl.reassignment_in_progress()
    assert store_env.wait(lambda: seen.types() == ["CREATED", "DELETED"])

    assert ctl.get_preferred_replica_election(seen) == set()
    admin.create_preferred_replica_election([TP("bar", 1), TP("bar", 0), TP("bar", 1)])  # a set, as Kafka's
    assert _raw(store_env, "/admin/preferred_replica_election") == \
        b'{"version":1,"partitions":[{"topic":"bar","partition":0},{"topic":"bar","partition":1}]}'
    assert store_env.wait(lambda: seen.types()[-1] == "CREATED")
    assert ctl.get_preferred_replica_election() == {TP("bar", 0), TP("bar", 1)}
    ctl.delete_preferred_replica_election()
    ctl.delete_preferred_replica_election()

    deletions = Recorder()
    assert ctl.get_topic_deletions(deletions) == []
    admin.create_topic_deletion("bar")
    admin.create_topic_deletion("bar")
    assert _raw(store_env, "/admin/delete_topics/bar") == b""  # Kafka's path, a node with no data
    assert store_env.wait(lambda: deletions.types() == ["CHILD"])
    assert ctl.get_topic_deletions() == ["bar"]
    ctl.delete_topic_deletions(["bar", "never-marked"])
    assert ctl.get_topic_deletions() == []


def test_each_admin_request_may_be_the_first_node_under_admin(store_env: StoreEnv) -> None:
    # An admin tool may write before any broker has made Kafka's top-level paths: each
    # request makes its parents, as Kafka 0.10's tools do (ZkUtils.createPersistentPath).
    admin = _client(store_env, "admin")
    requests = {
        "/admin/reassign_partitions": lambda: admin.create_partition_reassignment({TP("bar", 0): [1]}),
        "/admin/preferred_replica_election": lambda: admin.create_preferred_replica_election([TP("bar", 0)]),
        "/admin/delete_topics/bar": lambda: admin.create_topic_deletion("bar"),
    }
    for path, request in requests.items():
        assert admin.session.exists("/admin") is None
        request()
        assert admin.session.exists(path) is not None, path
        admin.session.delete("/admin", recursive=True)


def test_isr_change_notifications_and_topic_deletion(store_env: StoreEnv) -> None:
    leader, ctl = _client(store_env, "leader"), _client(store_env, "controller")
    seen = Recorder()
    assert ctl.get_isr_change_notifications(seen) == []
    first = leader.create_isr_change_notification([TP("bar", 1), TP("bar", 0)])
    second = leader.create_isr_change_notification([TP("baz", 0)])
    assert (first, second) == ("isr_change_0000000000", "isr_change_0000000001")
    assert _raw(store_env, "/isr_change_notification/" + first) == \
        b'{"version":1,"partitions":[{"topic":"bar","partition":0},{"topic":"bar","partition":1}]}'
    assert store_env.wait(lambda: seen.types() == ["CHILD"])
    names = ctl.get_isr_change_notifications()
    assert names == [first, second]
    assert ctl.get_isr_change_partitions(names) == {TP("bar", 0), TP("bar", 1), TP("baz", 0)}
    # one already gone (another controller deleted it) does not stop the rest
    ctl.delete_isr_change_notifications(["isr_change_0000000099"] + names)
    assert ctl.get_isr_change_notifications() == []

    ctl.create_topic("bar", {0: [1]}, {"cleanup.policy": "delete"})
    ctl.create_partition_states({TP("bar", 0): LeaderAndIsr(1, 0, (1,))})
    ctl.delete_topic_znodes("bar")
    assert not ctl.topic_exists("bar") and ctl.get_topic_config("bar") == {}
    ctl.delete_topic_znodes("bar")
    ctl.create_topic("bar", {0: [2]})  # a deleted topic can be created again
    assert ctl.get_topic_assignment("bar") == {0: [2]}


def test_batches_are_split_at_the_store_limit(store_env: StoreEnv) -> None:
    c = _client(store_env)
    c.session.max_batch_ops = 7
    n = 40
    c.create_topic("big", {p: [1] for p in range(n)})
    tps = [TP("big", p) for p in range(n)]
    created, failed = c.create_partition_states({tp: LeaderAndIsr(1, 0, (1,)) for tp in tps})
    assert len(created) == n and not failed
    sizes: list[int] = []
    get_many = c.session.get_many
    c.session.get_many = lambda paths: sizes.append(len(paths)) or get_many(paths)
    states = c.get_partition_states(iter(tps))  # any iterable, read once
    assert len(states) == n and sizes == [7] * 5 + [5]  # reads are split too
    updated, stale, errs = c.update_partition_states({tp: s.with_isr(()) for tp, s in states.items()})
    assert len(updated) == n and not stale and not errs
    assert all(s.isr == () for s in c.get_partition_states(tps).values())


def test_controller_epoch_increment_is_conditional_on_the_version_it_read(store_env: StoreEnv) -> None:
    """The epoch moves between this controller's read and its write (another broker won
    meanwhile): the write must fail, not put back an epoch already used."""
    a, b = _client(store_env, "a"), _client(store_env, "b")
    assert a.increment_controller_epoch(None) == (1, 0)
    read = a.session.get
    raced: list[tuple[int, int]] = []

    def read_then_race(path, watch=None):
        got = read(path, watch)
        if path == layout.CONTROLLER_EPOCH and not raced:
            raced.append(b.increment_controller_epoch(got[1].version))
        return got

    a.session.get = read_then_race
    with pytest.raises(BadVersion):
        a.increment_controller_epoch(0)
    assert raced == [(2, 1)] and a.get_controller_epoch() == (2, 1)
    assert _raw(store_env, "/controller_epoch") == b"2"


def test_a_first_controller_epoch_created_meanwhile_is_re_read_not_taken_as_a_lost_election(
        store_env: StoreEnv) -> None:
    """/controller_epoch appears between the read (absent) and the transaction, with
    /controller still free: the transaction fails on its second op, and the candidate
    re-reads and wins at the next epoch instead of giving up with nobody in charge."""
    a, c = _client(store_env, "a"), _client(store_env, "c")
    read = a.get_controller_epoch
    raced: list[tuple[int, int]] = []

    def read_then_race():
        got = read()
        if not raced:
            raced.append(c.increment_controller_epoch(None))
        return got

    a.get_controller_epoch = read_then_race
    assert a.register_controller_and_increment_epoch(1001) == (2, 1)
    assert raced == [(1, 0)] and a.get_controller_id() == 1001


def test_partition_state_parents_made_meanwhile_by_another_client_are_fine(store_env: StoreEnv) -> None:
    c, other = _client(store_env, "controller"), _client(store_env, "other")
    c.create_topic("bar", {0: [1], 1: [1]})
    read = c._get_many
    raced: list[bool] = []

    def read_then_race(paths):
        got = read(paths)
        if not raced:
            raced.append(True)
            other.session.create(layout.partitions_path("bar"))
        return got

    c._get_many = read_then_race
    states = {TP("bar", p): LeaderAndIsr(1, 0, (1,)) for p in (0, 1)}
    created, failed = c.create_partition_states(states)
    assert raced and failed == {} and set(created) == set(states)
    assert c.get_partition_states(list(states)) == created


def test_reassignment_node_writes_honour_the_expected_version(store_env: StoreEnv) -> None:
    admin, ctl = _client(store_env, "admin"), _client(store_env, "controller")
    admin.create_partition_reassignment({TP("bar", 0): [1], TP("bar", 1): [2]})
    with pytest.raises(BadVersion):
        ctl.set_partition_reassignment({TP("bar", 1): [2]}, expected_version=1)
    with pytest.raises(BadVersion):
        ctl.delete_partition_reassignment(expected_version=1)
    with pytest.raises(BadVersion):
        ctl.set_partition_reassignment({}, expected_version=1)
    assert ctl.get_partition_reassignment() == {TP("bar", 0): [1], TP("bar", 1): [2]}
    ctl.set_partition_reassignment({TP("bar", 1): [2]}, expected_version=0)
    ctl.set_partition_reassignment({}, expected_version=1)
    assert not ctl.reassignment_in_progress()
    ctl.delete_partition_reassignment()  # already gone (its last partition done): fine, as Kafka's
    ctl.set_partition_reassignment({})
    assert not ctl.reassignment_in_progress()


def test_a_config_change_is_announced_only_once_the_config_is_written(store_env: StoreEnv) -> None:
    """Kafka's order: whoever sees the notification reads the new config."""
    admin, observer = _client(store_env, "admin"), _client(store_env, "observer")
    admin.create_topic("bar", {0: [1]}, {"retention.ms": 1})
    create = admin.session.create
    seen_when_announced: list[dict[str, str]] = []

    def look_then_create(path, *args, **kwargs):
        if path.startswith(layout.CONFIG_CHANGES + "/"):
            seen_when_announced.append(observer.get_topic_config("bar"))
        return create(path, *args, **kwargs)

    admin.session.create = look_then_create
    admin.set_topic_config("bar", {"retention.ms": 5})
    assert seen_when_announced == [{"retention.ms": "5"}]
    assert observer.get_config_change_topics(observer.get_config_changes()) == ["bar"]


def test_a_topic_without_a_config_node_gets_one_when_its_config_is_set(store_env: StoreEnv) -> None:
    """A topic made without /config/topics/<t> (by hand, or by a tool that writes none):
    setting its config creates the node, as Kafka's updatePersistentPath does, and the
    change is announced."""
    admin, observer = _client(store_env, "admin"), _client(store_env, "observer")
    admin.create_topic("bar", {0: [1]}, {})
    admin.session.delete(layout.topic_config_path("bar"))
    admin.set_topic_config("bar", {"retention.ms": 5})
    assert observer.get_topic_config("bar") == {"retention.ms": "5"}
    assert observer.get_config_change_topics(observer.get_config_changes()) == ["bar"]
    # A store a tool filled without any /config/topics (one that writes no config): the
    # parent is made too, as updatePersistentPath makes a missing path's parents.
    admin.create_topic("baz", {0: [1]}, {})
    admin.session.delete(layout.CONFIG_TOPICS, recursive=True)
    admin.set_topic_config("baz", {"retention.ms": 7})
    assert observer.get_topic_config("baz") == {"retention.ms": "7"}


def test_a_topic_made_again_over_a_leftover_config_node_gets_its_own_config(store_env: StoreEnv) -> None:
    """A deletion that removed the assignment but not yet the config (its last step cut
    short) leaves /config/topics/<t>: the next topic of that name overwrites it with its
    own overrides, as Kafka's creation writes the config whether or not the node exists."""
    c = _client(store_env)
    c.create_topic("bar", {0: [1]}, {"retention.ms": 1000})
    c.session.delete(layout.topic_path("bar"), recursive=True)
    c.create_topic("bar", {0: [2]}, {"cleanup.policy": "compact"})
    assert c.get_topic_config("bar") == {"cleanup.policy": "compact"}
    c.session.delete(layout.topic_path("bar"), recursive=True)
    c.create_topic("bar", {0: [3]})
    assert _raw(store_env, "/config/topics/bar") == b'{"version":1,"config":{}}'


def test_an_assignment_read_and_a_config_change_listing_leave_their_watches(store_env: StoreEnv) -> None:
    """The controller learns of a changed assignment and of a new config change through
    the watches these two reads leave (one-shot, as ZooKeeper's)."""
    c, admin = _client(store_env, "controller"), _client(store_env, "admin")
    admin.create_topic("bar", {0: [1]})
    on_assignment, on_changes = Recorder(), Recorder()
    assert c.get_topic_assignment("bar", on_assignment) == {0: [1]}
    assert c.get_config_changes(on_changes) == []
    admin.set_topic_assignment("bar", {0: [1], 1: [2]})
    admin.set_topic_config("bar", {"retention.ms": 5})
    assert store_env.wait(lambda: on_assignment.types() == ["CHANGED"] and on_changes.types() == ["CHILD"])
    assert on_assignment.events[0].path == layout.topic_path("bar")


def test_a_partition_list_node_is_written_in_partition_order() -> None:
    # The preferred election and ISR change nodes list their partitions sorted, so the
    # bytes written do not depend on the process's string hashing (same seed, same store).
    tps = [TP(t, p) for t in ("foo", "bar", "baz", "qux") for p in (3, 0, 2, 1)]
    parts = json.loads(layout.encode_partition_list(reversed(tps)))["partitions"]
    assert [(e["topic"], e["partition"]) for e in parts] == sorted(tps)


def test_a_config_node_without_a_config_object_reads_as_no_overrides() -> None:
    # As Kafka 2.x's ConfigEntityZNode.decode: the overrides are the "config" object's, if any.
    assert layout.decode_topic_config(b'{"version":1}') == {}
    assert layout.decode_topic_config(b'{"version":1,"config":null}') == {}
    # A "config" of another shape is no overrides either: not ["ab"] read as {"a": "b"}.
    assert layout.decode_topic_config(b'{"version":1,"config":["ab"]}') == {}
    assert layout.decode_topic_config(b'{"version":1,"config":"xy"}') == {}
    assert layout.decode_topic_config(b'[]') == {}


def test_layout_decoders_accept_what_kafka_writes() -> None:
    # Kafka's own key order and later topic versions.
    kafka_broker = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":'
                    b'["PLAINTEXT://h:9092"],"jmx_port":-1,"host":"h","timestamp":"1614570663881",'
                    b'"port":9092,"version":4}')
    info = layout.decode_broker(101, kafka_broker)
    assert (info.host, info.port, info.timestamp_ms) == ("h", 9092, 1614570663881)
    assert info.rack is None
    assert layout.decode_broker(101, kafka_broker[:-1] + b',"rack":"dc1"}').rack == "dc1"
    v2 = b'{"version":2,"partitions":{"1":[101,103],"0":[103,102]},"adding_replicas":{},"removing_replicas":{}}'
    assert layout.decode_topic_assignment(v2) == {0: [103, 102], 1: [101, 103]}
    # Kafka writes a Scala map: partitions in any order; ours come back in partition order
    many = b'{"version":1,"partitions":{' + b",".join(b'"%d":[1]' % p for p in range(11, -1, -1)) + b"}}"
    assert list(layout.decode_topic_assignment(many)) == list(range(12))
    state = layout.decode_partition_state(
        b'{"controller_epoch":33,"leader":102,"version":1,"leader_epoch":8,"isr":[102,103]}', 5)
    assert state == LeaderAndIsr(102, 8, (102, 103), 5, 33)
    assert layout.encode_partition_state(state) == \
        b'{"controller_epoch":33,"leader":102,"version":1,"leader_epoch":8,"isr":[102,103]}'
    # A broker with no PLAINTEXT listener: Kafka writes a null host and port -1.
    sasl_only = (b'{"jmx_port":-1,"timestamp":"1614570663881","endpoints":["SASL_SSL://h:9093"],'
                 b'"host":null,"version":3,"port":-1}')
    info = layout.decode_broker(102, sasl_only)
    assert (info.host, info.port, info.endpoints) == ("", -1, ("SASL_SSL://h:9093",))
    # Kafka 0.8's version 1 registration has no endpoints: its host and port are the listener.
    v1 = layout.decode_broker(103, b'{"jmx_port":-1,"timestamp":"1400000000000","host":"h3","version":1,"port":9092}')
    assert (v1.host, v1.port, v1.timestamp_ms) == ("h3", 9092, 1400000000000)
    assert layout.decode_controller(b'{"version":1,"brokerid":101,"timestamp":"1614570663255"}') == 101
    assert layout.decode_controller(b"101") == 101


def test_config_change_notifications_name_their_topic_in_both_kafka_formats():
    assert layout.decode_config_change(layout.encode_config_change("bar")) == "bar"
    assert layout.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"foo"}') == "foo"
    assert layout.decode_config_change(b'{"version":2,"entity_path":"brokers/1"}') is None
    assert layout.decode_config_change(b'{"version":2,"entity_path":"topics/"}') is None  # names no topic
    assert layout.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":""}') is None
    assert layout.change_sequence("config_change_0000000012") == 12


# ---- the fifty-second review: client mutants the tests above did not see ----

def test_memory_persistent_paths_are_made_again_after_a_try_that_lost_the_store() -> None:
    from kreplica.meta.memory_store import MemoryStore
    from kreplica.runtime import SimScheduler

    sched = SimScheduler(seed=1)
    c = KafkaZkClient(MemoryStore(sched, session_timeout_ms=3000).session("b"), sched)
    c.session.set_reachable(False)
    with pytest.raises(ConnectionLoss):
        c.ensure_persistent_paths()
    c.session.set_reachable(True)
    c.ensure_persistent_paths()
    assert all(c.session.exists(p) is not None for p in layout.PERSISTENT_PATHS)


def test_an_unclean_shutdown_marker_made_meanwhile_by_another_controller_is_overwritten(
        store_env: StoreEnv) -> None:
    ctl, other = _client(store_env, "controller"), _client(store_env, "other")
    create = ctl.session.create

    def race_then_create(path, data=b"", **kw):
        other.set_unclean_shutdown_handled(1, 7, 2)
        return create(path, data, **kw)

    ctl.session.create = race_then_create
    ctl.set_unclean_shutdown_handled(1, 8, 3)
    assert json.loads(_raw(store_env, "/brokers/unclean_shutdowns_handled/1")) == {
        "version": 1, "broker_epoch": 8, "controller_epoch": 3}


def test_handled_unclean_shutdowns_are_matched_to_the_brokers_asked_for(store_env: StoreEnv) -> None:
    ctl = _client(store_env, "controller")
    ctl.set_unclean_shutdown_handled(1, 11, 1)
    ctl.set_unclean_shutdown_handled(3, 33, 1)
    assert ctl.get_unclean_shutdowns_handled([3, 2, 1]) == {3: 33, 1: 11}


def test_a_topic_deletion_resumed_after_its_assignment_went_removes_the_config(store_env: StoreEnv) -> None:
    # The controller deletes the assignment, then the config; one that stopped between
    # the two finishes the job on its next try.
    c = _client(store_env)
    c.create_topic("bar", {0: [1]}, {"retention.ms": 1000})
    c.session.delete(layout.topic_path("bar"), recursive=True)
    assert not c.topic_exists("bar")  # a topic is its assignment node (Kafka's topicExists), not its config
    c.delete_topic_znodes("bar")
    assert c.session.exists(layout.topic_config_path("bar")) is None


def test_rewriting_a_reassignment_that_is_gone_creates_it(store_env: StoreEnv) -> None:
    # As Kafka's setOrCreatePartitionReassignment.
    c = _client(store_env)
    c.set_partition_reassignment({TP("bar", 0): [2, 1]})
    assert c.get_partition_reassignment() == {TP("bar", 0): [2, 1]}


def test_isr_changes_are_read_past_a_notification_already_gone(store_env: StoreEnv) -> None:
    c = _client(store_env)
    first = c.create_isr_change_notification([TP("a", 0)])
    second = c.create_isr_change_notification([TP("b", 1)])
    c.delete_isr_change_notifications([first])
    assert c.get_isr_change_partitions([first, second]) == {TP("b", 1)}


def test_config_changes_are_deleted_in_one_transaction_past_one_already_gone(store_env: StoreEnv) -> None:
    c = _client(store_env)
    c.create_topic("bar", {0: [1]})
    for _ in range(3):
        c.set_topic_config("bar", {"retention.ms": 1000})
    names = c.get_config_changes()
    c.delete_config_changes(names[:1])
    before = store_env.store.round_trips
    c.delete_config_changes(names)
    assert store_env.store.round_trips - before == 2  # the whole batch, then it without the gone one
    assert c.get_config_changes() == []


def test_a_partition_state_keeps_its_isr_in_the_order_written() -> None:
    # Kafka keeps the ISR as a list; a state read and written back must not reorder it.
    data = b'{"controller_epoch":2,"leader":3,"version":1,"leader_epoch":4,"isr":[3,1,2]}'
    state = layout.decode_partition_state(data, 0)
    assert state.isr == (3, 1, 2)
    assert layout.encode_partition_state(state) == data


def test_a_registration_carries_its_time_in_milliseconds_and_a_rack_only_when_set(store_env: StoreEnv) -> None:
    if store_env.kind == "memory":
        store_env.sched.advance(12_345)  # virtual time starts at 0, where seconds and ms agree
    before = store_env.sched.now_ms()
    _client(store_env, "b1").register_broker(1, rack="r1")
    _client(store_env, "b2").register_broker(2)
    after = store_env.sched.now_ms()
    one, two = (json.loads(_raw(store_env, f"/brokers/ids/{b}")) for b in (1, 2))
    assert before <= int(one["timestamp"]) <= after
    assert one["rack"] == "r1" and "rack" not in two  # Kafka writes a rack only when one is set
    assert _client(store_env, "reader").get_broker(2).rack is None


def test_persistent_paths_are_kafkas_top_level_paths(store_env: StoreEnv) -> None:
    c = _client(store_env)
    c.ensure_persistent_paths()
    before = store_env.store.round_trips
    c.ensure_persistent_paths()  # once per client: nothing deletes them
    c.ensure_persistent_paths()
    assert store_env.store.round_trips == before
    reader = store_env.store.session("reader")
    for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/admin/delete_topics",
                 "/isr_change_notification"):
        assert reader.exists(path) is not None, path


def test_a_node_deleted_between_the_watch_and_the_read_reads_as_absent(store_env: StoreEnv) -> None:
    ctl, old = _client(store_env, "controller"), _client(store_env, "old")
    assert old.try_elect_controller(1)
    meanwhile(ctl.session, "get", lambda: old.session.close())  # the controller resigns
    seen = Recorder()
    assert ctl.get_controller_id(seen) is None
    assert store_env.wait(lambda: seen.types() == ["DELETED"])  # the watch set first tells of it


def test_a_registration_gone_before_it_is_examined_is_not_taken_as_ours(store_env: StoreEnv) -> None:
    # A crashed predecessor's registration blocks the create, then expires before the
    # check of who owns it: not registered, so the broker must try again.
    crashed, restarted = _client(store_env, "crashed"), _client(store_env, "restarted")
    crashed.register_broker(1)
    meanwhile(restarted.session, "exists", lambda: crashed.session.close())
    with pytest.raises(NodeExists):
        restarted.register_broker(1)
    del restarted.session.exists
    assert restarted.get_broker_epoch(1) is None
    restarted.register_broker(1)
    assert restarted.get_broker_epoch(1) == restarted.session.session_id


def test_a_controller_epoch_that_never_stops_moving_is_an_error_not_a_lost_election(store_env: StoreEnv) -> None:
    a, b = _client(store_env, "a"), _client(store_env, "b")
    b.increment_controller_epoch(None)
    meanwhile(a, "get_controller_epoch", lambda: b.increment_controller_epoch(b.get_controller_epoch()[1]),
              after=True, every_call=True)
    with pytest.raises(BadVersion, match="kept moving"):
        a.register_controller_and_increment_epoch(1)
    assert a.get_controller_id() is None  # nobody holds /controller: an election is still to be won


def test_a_lost_connection_mid_batch_is_raised_not_blamed_on_a_partition(store_env: StoreEnv) -> None:
    # An error that names no op (the store out of reach) says nothing of any partition:
    # the caller must learn of it, not find its first partition reported as failed.
    c = _client(store_env, "controller")
    c.create_topic("bar", {0: [1], 1: [1]})
    created, _ = c.create_partition_states({TP("bar", p): LeaderAndIsr(1, 0, (1,)) for p in (0, 1)})

    def unreachable(ops):
        raise ConnectionLoss("the store is out of reach")

    c.session.multi = unreachable
    with pytest.raises(ConnectionLoss):
        c.update_partition_states({tp: s.with_isr(()) for tp, s in created.items()})


# ---- the hundred-and-tenth review: client mutants, sixth pass ----

def test_a_topic_deletion_cut_short_between_its_deletes_leaves_no_live_topic(store_env: StoreEnv) -> None:
    # Kafka's order (completeDeleteTopic): the assignment, then the config. Stopped between
    # the two, the topic reads as gone and the next try removes the config; the other way
    # round a live topic would be left whose overrides went back to the defaults.
    c = _client(store_env)
    c.create_topic("bar", {0: [1]}, {"retention.ms": 1000})
    delete = c.session.delete

    def unreachable(*args, **kwargs):
        raise ConnectionLoss("the store is out of reach")

    def delete_then_lose_the_store(*args, **kwargs):
        c.session.delete = unreachable
        return delete(*args, **kwargs)

    c.session.delete = delete_then_lose_the_store
    with pytest.raises(ConnectionLoss):
        c.delete_topic_znodes("bar")
    del c.session.delete
    assert not c.topic_exists("bar") and c.get_topic_config("bar") == {"retention.ms": "1000"}


def test_a_topic_gone_before_its_states_are_made_fails_its_own_partitions_only(store_env: StoreEnv) -> None:
    # Kafka's controller reports each partition it could not initialize and goes on with
    # the rest: a topic deleted behind its back must not cost the other topics' partitions
    # of the batch (nor, through a raised error, the controller's term).
    c = _client(store_env, "controller")
    c.create_topic("bar", {0: [1]})
    c.create_topic("gone", {0: [1], 1: [1]})
    c.session.delete(layout.topic_path("gone"), recursive=True)
    states = {tp: LeaderAndIsr(1, 0, (1,)) for tp in (TP("bar", 0), TP("gone", 0), TP("gone", 1))}
    created, failed = c.create_partition_states(states)
    assert set(created) == {TP("bar", 0)} and set(failed) == {TP("gone", 0), TP("gone", 1)}
    assert all(isinstance(exc, NoNode) for exc in failed.values())
    assert c.get_partition_states(list(states)) == created
    assert c.session.exists(layout.topic_path("gone")) is None  # nothing made for it


# ---- the hundred-and-twenty-ninth review: client mutants, seventh pass ----

def test_a_config_node_made_meanwhile_by_another_writer_is_overwritten(store_env: StoreEnv) -> None:
    """The topic had no config node when our set found none, and another admin made one
    before our create: ours, the later write, replaces it, and both changes are announced."""
    admin, other, observer = _client(store_env, "admin"), _client(store_env, "other"), _client(store_env, "observer")
    admin.create_topic("bar", {0: [1]}, {})
    admin.session.delete(layout.topic_config_path("bar"))
    meanwhile(admin.session, "create", lambda: other.set_topic_config("bar", {"retention.ms": 1}))
    admin.set_topic_config("bar", {"retention.ms": 5})
    assert observer.get_topic_config("bar") == {"retention.ms": "5"}
    assert observer.get_config_change_topics(observer.get_config_changes()) == ["bar", "bar"]


def test_a_partition_id_is_read_as_kafkas_toint_reads_it() -> None:
    # Integer.parseInt takes a sign and any script's decimal digits (ARABIC-INDIC THREE).
    node = '{"version":1,"partitions":{"\u0663":[1001],"+1":[1002]}}'.encode()
    assert layout.decode_topic_assignment(node) == {1: [1002], 3: [1001]}
    # OSMANYA DIGIT ONE is beyond the Basic Multilingual Plane: two UTF-16 units, no digit.
    with pytest.raises(ValueError, match="expected"):
        layout.decode_topic_assignment('{"version":1,"partitions":{"\U000104A1":[1001]}}'.encode())


@pytest.mark.parametrize("node", [
    b'{"version":1,"partitions":{"0":1001}}',  # a broker id where the replica list goes
    b'[1001]',  # not an object at all
    b'{"version":1,"partitions":{"0":[true]}}',  # JSON true is no broker id (Python's True == 1)
    b'{"version":1,"partitions":{"0":[' + b",".join(b"%d" % b for b in range(1000, 1100)) + b'],"1":"x"}}',
    b'{"version":1,"partitions":{"x":[1001]}}',  # Kafka's toInt refuses these two keys;
    b'{"version":1,"partitions":{"1_0":[1001]}}',  # Python's int() read "1_0" as partition 10
], ids=["broker-id-for-a-list", "a-list", "true-for-a-broker", "long-node", "a-word-for-a-partition",
        "an-underscored-partition"])
def test_a_topic_node_of_another_shape_is_a_value_error_naming_its_path(node: bytes) -> None:
    """Both reads of a topic's assignment name the node and show (at most 200 characters
    of) it, whatever the shape is wrong about."""
    from kreplica.meta.memory_store import MemoryStore
    from kreplica.runtime import SimScheduler

    sched = SimScheduler(seed=1)
    c = KafkaZkClient(MemoryStore(sched).session("b"), sched)
    c.session.create(layout.topic_path("foo"), node, makepath=True)
    expected = '/brokers/topics/foo: expected {"partitions": {"<id>": [<broker>, ...]}}, got ' + node.decode()[:200]
    with pytest.raises(ValueError) as one:
        c.get_topic_assignment("foo")
    with pytest.raises(ValueError) as many:
        c.get_topic_assignments(["foo"])
    assert str(one.value) == str(many.value) == expected


# ---- the hundred-and-eighty-sixth review: metadata store mutants, tenth pass ----

def test_memory_the_embedded_store_takes_a_batch_of_any_size_in_one_request() -> None:
    # ZooKeeper bounds a request (ZK_MAX_BATCH_OPS); the embedded store has no such bound,
    # so the controller's read and its conditional write of 1200 partition states are one
    # round trip each, the write one transaction.
    from kreplica.meta.memory_store import MemoryStore
    from kreplica.runtime import SimScheduler

    sched = SimScheduler(seed=1)
    store = MemoryStore(sched, session_timeout_ms=3000)
    c = KafkaZkClient(store.session("controller"), sched)
    c.ensure_persistent_paths()
    tps = [TP("big", p) for p in range(1200)]
    c.create_topic("big", {tp.partition: [1, 2] for tp in tps})
    created, failed = c.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2), controller_epoch=1) for tp in tps})
    assert failed == {} and len(created) == 1200
    before = store.round_trips
    states = c.get_partition_states(tps)
    assert len(states) == 1200 and store.round_trips - before == 1
    before = store.round_trips
    updated, stale, errs = c.update_partition_states({tp: s.with_leader(2, (2,)) for tp, s in states.items()})
    assert len(updated) == 1200 and stale == [] and errs == {}
    assert store.round_trips - before == 1


# ---- the hundred-and-ninety-fourth review: ZooKeeper store mutants, tenth pass ----

def test_a_new_topics_partition_states_take_one_read_and_one_transaction(store_env: StoreEnv) -> None:
    # The parents the states need (the topic's `partitions` node once, each partition's
    # node) are read in one batch and made with the states in one transaction: a topic of
    # many partitions names its `partitions` node once, not once per partition (a repeated
    # create fails the transaction and costs a round trip each).
    c = _client(store_env, "controller")
    c.create_topic("bar", {p: [1, 2] for p in range(4)})
    states = {TP("bar", p): LeaderAndIsr(1, 0, (1, 2), controller_epoch=1) for p in range(4)}
    before = store_env.store.round_trips
    created, failed = c.create_partition_states(states)
    assert failed == {} and set(created) == set(states)
    assert store_env.store.round_trips - before == 2


def test_the_topics_of_config_changes_line_up_with_the_names_asked_for(store_env: StoreEnv) -> None:
    # One answer per name, in order, None for a notification already gone (another
    # listener's clean-up): a caller pairs each name with its topic.
    admin, observer = _client(store_env, "admin"), _client(store_env, "observer")
    admin.create_topic("bar", {0: [1]}, {})
    admin.create_topic("baz", {0: [1]}, {})
    admin.set_topic_config("bar", {"retention.ms": 1})
    admin.set_topic_config("baz", {"retention.ms": 2})
    names = observer.get_config_changes()
    admin.delete_config_changes(names[:1])
    before = store_env.store.round_trips
    assert observer.get_config_change_topics(names) == [None, "baz"]
    assert store_env.store.round_trips - before == 1  # one batched read, however many names


# ---- the two-hundred-and-twenty-fourth review: metadata store mutants, twelfth pass ----

@pytest.mark.parametrize("room", [0, -1])
def test_a_session_that_says_a_batch_has_no_room_still_carries_one_op_a_request(store_env: StoreEnv, room: int) -> None:
    # max_batch_ops bounds a batch; a bound of 0 or less (set by hand, or miscalculated)
    # still lets one op through per request: nothing is dropped and nothing fails.
    c = _client(store_env)
    c.create_topic("bar", {p: [1] for p in range(3)})
    tps = [TP("bar", p) for p in range(3)]
    c.session.max_batch_ops = room
    created, failed = c.create_partition_states({tp: LeaderAndIsr(1, 0, (1,)) for tp in tps})
    assert set(created) == set(tps) and failed == {}
    before = store_env.store.round_trips
    assert set(c.get_partition_states(tps)) == set(tps)
    assert store_env.store.round_trips - before == 3
