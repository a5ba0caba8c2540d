"""Admin validation and Kafka's rack-unaware replica placement, over both stores."""
from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from kreplica import errors
from kreplica.meta import admin, open_store, parse_metadata_uri, parse_zookeeper_connect
from kreplica.meta.kafka_zk_client import KafkaZkClient
from kreplica.meta.memory_store import MemoryStore
from kreplica.protocol.common import LeaderAndIsr, TopicPartition as TP
from kreplica.runtime import SimScheduler
from meta_env import StoreEnv, meanwhile

BROKERS = (1001, 1002, 1003)


def _cluster(env: StoreEnv) -> KafkaZkClient:
    for b in BROKERS:
        KafkaZkClient(env.store.session(f"b{b}"), env.sched).register_broker(b)
    return KafkaZkClient(env.store.session("admin"), env.sched)


def test_seed_003_assignment_of_bar() -> None:
    # seeds/003: bar has Replicas 1001,1003,1002 / 1002,1001,1003 / 1003,1002,1001.
    got = admin.assign_replicas([1003, 1001, 1002], 3, 3, random.Random(0), start_index=0, replica_shift=1)
    assert got == {0: [1001, 1003, 1002], 1: [1002, 1001, 1003], 2: [1003, 1002, 1001]}


def test_assignment_is_deterministic_and_spreads_evenly() -> None:
    brokers = list(range(1, 7))
    a = admin.assign_replicas(brokers, 60, 3, random.Random(42))
    assert a == admin.assign_replicas(brokers, 60, 3, random.Random(42))
    assert all(len(set(r)) == 3 for r in a.values())
    leaders = Counter(r[0] for r in a.values())
    replicas = Counter(b for r in a.values() for b in r)
    assert set(leaders.values()) == {10} and set(replicas.values()) == {30}
    # the shift moves after each round of brokers, so followers rotate too
    assert a[0][1] != a[6][1] or a[0][2] != a[6][2]


def test_create_topic_places_and_writes(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    config = {"min.insync.replicas": 2, "unclean.leader.election.enable": True}
    placed = admin.create_topic(c, "bar", 3, 3, config=config, rng=random.Random(1))
    assert c.get_topic_assignment("bar") == placed
    # Kafka keeps every value as a string, booleans as Java prints them
    assert c.get_topic_config("bar") == {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    explicit = {0: [1002, 1003], 1: [1003, 1001]}
    assert admin.create_topic(c, "foo", assignment=explicit) == explicit
    assert c.get_topic_assignment("foo") == explicit


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "bad/name", "über"])
def test_invalid_topic_names(name: str) -> None:
    with pytest.raises(errors.InvalidTopic) as info:
        admin.validate_topic_name(name)
    if not name:  # Kafka: "topic name is illegal, can't be empty" -- not a complaint about characters
        assert "empty" in str(info.value)


def test_a_replica_shift_of_zero_puts_each_first_follower_next_to_its_leader() -> None:
    # A fixed start index and shift of 0 are values, not "draw one": whatever the rng.
    for seed in range(5):
        got = admin.assign_replicas([1, 2, 3], 3, 2, random.Random(seed), start_index=0, replica_shift=0)
        assert got == {0: [1, 2], 1: [2, 3], 2: [3, 1]}


def test_replicas_placed_over_a_single_broker_all_land_on_it() -> None:
    # Kafka draws the start index and the replica shift each with nextInt(brokers): one
    # broker gives 0 for both, and every partition's only replica is that broker.
    for seed in range(3):
        assert admin.assign_replicas([7], 3, 1, random.Random(seed)) == {0: [7], 1: [7], 2: [7]}


def test_valid_topic_names() -> None:
    for name in ["bar", "a" * 249, "A.b_c-9", "..."]:
        admin.validate_topic_name(name)


def test_create_topic_errors(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    rng = random.Random(3)
    admin.create_topic(c, "a.b", 1, 1, rng=rng)
    admin.create_topic(c, "x_y", 1, 1, rng=rng)
    cases = [
        (errors.TopicAlreadyExists, dict(topic="a.b", partitions=1, replication_factor=1)),
        (errors.InvalidTopic, dict(topic="a_b", partitions=1, replication_factor=1)),
        (errors.InvalidTopic, dict(topic="x.y", partitions=1, replication_factor=1)),  # either way round
        (errors.InvalidTopic, dict(topic="no way", partitions=1, replication_factor=1)),
        (errors.InvalidReplicationFactor, dict(topic="t", partitions=1, replication_factor=4)),
        (errors.InvalidReplicationFactor, dict(topic="t", partitions=1, replication_factor=0)),
        (errors.InvalidPartitions, dict(topic="t", partitions=0, replication_factor=1)),
        (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: [1001, 9999]})),
        (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: [1001, 1001]})),
        (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: [1001], 1: [1002, 1003]})),
        (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: [1001], 2: [1002]})),
        (errors.InvalidReplicaAssignment, dict(topic="t", assignment={-1: [1001], 1: [1002]})),  # not 0..n-1
        (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: []})),
        (errors.InvalidReplicaAssignment, dict(topic="t", assignment={})),  # as Kafka: no replica count at all
        (errors.InvalidReplicaAssignment, dict(topic="t", partitions=2, assignment={0: [1001]})),
        (errors.InvalidReplicaAssignment, dict(topic="t", partitions=1, assignment={0: [1001], 1: [1002]})),
        (errors.InvalidConfig, dict(topic="t", partitions=1, replication_factor=1, config={"no.such": 1})),
        (errors.InvalidConfig, dict(topic="t", partitions=1, replication_factor=1,
                                    config={"min.insync.replicas": 0})),
        # a broker's setting is no topic config (Kafka: "Unknown topic config name")
        (errors.InvalidConfig, dict(topic="t", partitions=1, replication_factor=1, config={"num.partitions": 3})),
    ]
    for error, kwargs in cases:
        with pytest.raises(error):
            admin.create_topic(c, rng=rng, **kwargs)
    assert c.get_all_topics() == ["a.b", "x_y"]


@pytest.mark.parametrize("error, kwargs, message", [
    (errors.InvalidTopic, dict(topic=5, partitions=1, replication_factor=1), "topic name must be a str, got int"),
    (errors.InvalidTopic, dict(topic=b"xx", partitions=1, replication_factor=1), "topic name must be a str"),
    (errors.InvalidPartitions, dict(topic="t", partitions="2", replication_factor=1), "partitions must be an int"),
    (errors.InvalidPartitions, dict(topic="t", partitions=2.0, replication_factor=1), "partitions must be an int"),
    (errors.InvalidPartitions, dict(topic="t", partitions=True, replication_factor=1), "got bool True"),
    (errors.InvalidReplicationFactor, dict(topic="t", partitions=1, replication_factor="3"),
     "replication_factor must be an integer"),
    (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: "1001"}), "assignment[0] must be a list"),
    (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: ["1001"]}), "must be an integer"),
    # The bad replica is named by its place, not only by its list.
    (errors.InvalidReplicaAssignment, dict(topic="t", assignment={0: [1001, "1002"]}),
     "assignment[0][1] must be an integer, got str '1002'"),
    (errors.InvalidReplicaAssignment, dict(topic="t", assignment={"0": [1001]}), "assignment partition must be"),
    (errors.InvalidReplicaAssignment, dict(topic="t", assignment=[[1001]]), "assignment must be a dict"),
    (errors.InvalidConfig, dict(topic="t", partitions=1, replication_factor=1, config=[("retention.ms", 1)]),
     "config must be a dict"),
])
def test_create_topic_names_the_argument_of_the_wrong_type(store_env: StoreEnv, error, kwargs, message) -> None:
    c = _cluster(store_env)
    with pytest.raises(error, match=re.escape(message)):
        admin.create_topic(c, rng=random.Random(0), **kwargs)
    assert c.get_all_topics() == []


def test_reassign_alter_and_elect_name_the_argument_of_the_wrong_type(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001, 1002, 1003]})
    changes = c.get_config_changes()
    cases = [
        (errors.InvalidReplicaAssignment, "replicas of bar-0 must be a list of integers, got str '1001'",
         lambda: admin.reassign_partitions(c, {TP("bar", 0): "1001"})),
        (errors.InvalidReplicaAssignment, "must be an integer, got str '1001'",
         lambda: admin.reassign_partitions(c, {TP("bar", 0): ["1001"]})),
        (errors.InvalidRequest, "partition must be an integer, got str '0'",
         lambda: admin.reassign_partitions(c, {("bar", "0"): [1001]})),
        (errors.InvalidRequest, "partition must be an integer, got bool True",
         lambda: admin.elect_preferred_leaders(c, [("bar", True)])),
        (errors.InvalidRequest, "a partition must be a (topic, partition) pair, got str 'bar-0'",
         lambda: admin.elect_preferred_leaders(c, ["bar-0"])),
        (errors.InvalidRequest, "a partition must be a (topic, partition) pair, got int 0",
         lambda: admin.reassign_partitions(c, {0: [1001]})),
        (errors.InvalidRequest, "a partition must be a (topic, partition) pair, got str 'b0'",
         lambda: admin.elect_preferred_leaders(c, ["b0"])),
        (errors.InvalidRequest, "a partition must be a (topic, partition) pair, got bytes b'b0'",
         lambda: admin.elect_preferred_leaders(c, [b"b0"])),
        (errors.InvalidRequest, "a partition must be a (topic, partition) pair, got tuple ('bar', 0, 1)",
         lambda: admin.reassign_partitions(c, {("bar", 0, 1): [1001]})),
        (errors.InvalidTopic, "topic must be a str, got int 5",
         lambda: admin.elect_preferred_leaders(c, [(5, 0)])),
        (errors.InvalidConfig, "delete must be a list of str, got str 'retention.ms'",
         lambda: admin.alter_topic_config(c, "bar", delete="retention.ms")),
        # Bytes are no list of keys: refused whole, not read as the integers of their bytes.
        (errors.InvalidConfig, "delete must be a list of str, got bytes b'retention.ms'",
         lambda: admin.alter_topic_config(c, "bar", delete=b"retention.ms")),
        (errors.InvalidConfig, "delete[1] must be a str, got int 5",
         lambda: admin.alter_topic_config(c, "bar", delete=["retention.ms", 5])),
        (errors.InvalidConfig, "set_config must be a dict",
         lambda: admin.alter_topic_config(c, "bar", [("retention.ms", 5)])),
        (errors.InvalidConfig, "'retention.ms' is both set and deleted",
         lambda: admin.alter_topic_config(c, "bar", {"retention.ms": 5}, delete=["retention.ms"])),
        (errors.InvalidConfig, "nothing to alter",  # else an unchanged config written and announced
         lambda: admin.alter_topic_config(c, "bar")),
        (errors.InvalidConfig, "nothing to alter",
         lambda: admin.alter_topic_config(c, "bar", {}, delete=[])),
        (errors.InvalidConfig, "nothing to alter",  # the arguments first, as kafka-configs.sh
         lambda: admin.alter_topic_config(c, "nope")),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=re.escape(message)):
            call()
    assert c.get_partition_reassignment() == {} and c.get_preferred_replica_election() == set()
    assert c.get_topic_config("bar") == {} and c.get_config_changes() == changes


def test_delete_reassign_and_elect(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001, 1002, 1003], 1: [1002, 1003, 1001]})
    with pytest.raises(errors.UnknownTopicOrPartition):
        admin.delete_topic(c, "nope")
    with pytest.raises(errors.UnknownTopicOrPartition):
        admin.reassign_partitions(c, {TP("bar", 5): [1001]})
    with pytest.raises(errors.InvalidReplicaAssignment):
        admin.reassign_partitions(c, {TP("bar", 0): [1002, 1002, 1003]})
    with pytest.raises(errors.InvalidReplicaAssignment):
        admin.reassign_partitions(c, {TP("bar", 0): [1002, 4242]})
    admin.reassign_partitions(c, {TP("bar", 1): [1003, 1001, 1002], TP("bar", 0): [1002, 1003, 1001]})
    assert c.get_partition_reassignment() == {TP("bar", 0): [1002, 1003, 1001], TP("bar", 1): [1003, 1001, 1002]}
    # Written in partition order, whatever order it was asked in: one reassignment, one node.
    assert store_env.store.session("raw").get("/admin/reassign_partitions")[0] == (
        b'{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1002,1003,1001]},'
        b'{"topic":"bar","partition":1,"replicas":[1003,1001,1002]}]}')
    with pytest.raises(errors.ReassignmentInProgress):
        admin.reassign_partitions(c, {TP("bar", 1): [1001, 1002, 1003]})
    with pytest.raises(errors.ReassignmentInProgress):  # checked first, as Kafka's tool does
        admin.reassign_partitions(c, {TP("nope", 0): [1001]})

    with pytest.raises(errors.UnknownTopicOrPartition):
        admin.elect_preferred_leaders(c, [TP("nope", 0)])
    admin.elect_preferred_leaders(c, [TP("bar", 0), TP("bar", 1)])
    assert c.get_preferred_replica_election() == {TP("bar", 0), TP("bar", 1)}
    with pytest.raises(errors.InvalidRequest):
        admin.elect_preferred_leaders(c, [TP("bar", 0)])

    admin.delete_topic(c, "bar")
    assert c.get_topic_deletions() == ["bar"]


def test_metadata_uris() -> None:
    assert parse_metadata_uri("memory").kind == "memory"
    zk = parse_metadata_uri("zookeeper://127.0.0.1:2181,127.0.0.2:2182/kr/x")
    assert (zk.kind, zk.hosts, zk.chroot) == ("zookeeper", "127.0.0.1:2181,127.0.0.2:2182", "/kr/x")
    assert parse_metadata_uri("zookeeper://127.0.0.1:2181").chroot == "/kreplica"
    assert parse_metadata_uri("zookeeper+local:///demo").chroot == "/demo"
    assert parse_zookeeper_connect("localhost:2181/kreplica") == ("localhost:2181", "/kreplica")
    with pytest.raises(ValueError, match="metadata store address must be a str, got NoneType None"):
        parse_metadata_uri(None)
    assert parse_metadata_uri("zookeeper://h:1/kr/x/").chroot == "/kr/x"  # a store's chroot has no trailing /
    assert parse_metadata_uri("zookeeper+local:///demo/").chroot == "/demo"
    assert parse_metadata_uri("zookeeper+local:////demo").chroot == "/demo"  # as "h:1//x" gives "/x"
    # An empty chroot is the default one in both forms, as for zookeeper+local:///.
    assert parse_metadata_uri("zookeeper://h:1/").chroot == "/kreplica"
    assert parse_zookeeper_connect("h:1,h:2//") == ("h:1,h:2", "/kreplica")
    # A doubled slash before the chroot is trimmed like the one after it, not kept as "//x".
    assert parse_zookeeper_connect("h:1//x") == ("h:1", "/x")
    assert parse_metadata_uri("zookeeper+local:///").chroot == "/kreplica"
    assert parse_zookeeper_connect("[::1]:2181,h:2/x") == ("[::1]:2181,h:2", "/x")  # kazoo takes IPv6 this way
    # Empty entries are left out, as ZooKeeper's parser does: the hosts go to kazoo, which refuses them.
    assert parse_zookeeper_connect("h:1,,h:2,/x") == ("h:1,h:2", "/x")
    assert parse_metadata_uri("zookeeper://h:1,/x").hosts == "h:1"
    # No host at all is refused by the check itself: the argument parsers of the broker and
    # the tools use it, and ZooKeeper's connect string names HOST:PORT before any chroot.
    for no_host in ["/x", ",/x", ",", ""]:
        with pytest.raises(ValueError, match="no ZooKeeper host"):
            parse_zookeeper_connect(no_host)
    # A port is ASCII digits: "\u0662\u0661\u0668\u0661" (Arabic-Indic 2181) is no port kazoo or ZooKeeper reads.
    with pytest.raises(ValueError, match="expected host:port"):
        parse_zookeeper_connect("h:\u0662\u0661\u0668\u0661/x")
    # zookeeper+local takes its chroot after a third slash, as zookeeper+local:/// shows (no
    # slash at all is no chroot form, as zookeeper:// is no connect string).
    for bad in ["memoryx", "memory/x", "zookeeper://", "zookeeper+local://", "zookeeper://host/x", "zookeeper://h:p/x", "etcd://x",
                "zookeeper+local://h:1/x",
                "zookeeper:///x", "zookeeper://[::1]/x", "zookeeper://:2181/x",
                "zookeeper://h:/x"]:  # an empty port is no number
        with pytest.raises(ValueError):
            parse_metadata_uri(bad)
    store = open_store("memory", SimScheduler(), 5000)
    assert isinstance(store, MemoryStore) and store.session_timeout_ms == 5000  # the timeout asked for


@pytest.mark.zookeeper
def test_open_store_on_zookeeper(zk_server, kazoo_client) -> None:
    from kreplica.runtime import RealScheduler

    from meta_env import negotiated_timeout_ms

    store = open_store(f"zookeeper://{zk_server.hosts}/uri-test", RealScheduler(), 4000)
    try:
        s = store.session("x")
        s.create("/here", b"1")
        assert s.get("/here")[0] == b"1"
        assert negotiated_timeout_ms(zk_server, s) == 4000  # the timeout asked for, not the default
        # The address's chroot, not the default /kreplica: the node is where the URI says.
        assert store.chroot == "/uri-test"
        assert kazoo_client.get("/uri-test/here")[0] == b"1"
    finally:
        store.close()


@pytest.mark.zookeeper
def test_open_store_with_a_private_zookeeper(zk_server) -> None:
    from kreplica.runtime import RealScheduler

    from meta_env import negotiated_timeout_ms

    store = open_store("zookeeper+local:///demo", RealScheduler(), 4000)
    server = store.owned_server
    assert server is not None and server.port != zk_server.port
    session = store.session("x")
    session.create("/ok")
    granted = negotiated_timeout_ms(server, session)
    data_dir = server.data_dir
    assert data_dir is not None and (data_dir / "zoo.cfg").is_file()
    store.close()
    assert server.data_dir is None and store.owned_server is None
    assert not data_dir.exists()  # the server's files went with it
    assert granted == 4000  # the timeout asked for, as over zookeeper:// (checked once the JVM is gone)


@pytest.mark.parametrize("interrupted", [False, True], ids=["store_error", "keyboard_interrupt"])
def test_a_private_store_that_cannot_be_made_stops_the_server_it_started(monkeypatch, interrupted) -> None:
    # zookeeper+local:// starts its own server before the store: a store that then fails
    # (its chroot cannot be made) must not leave that server's JVM running behind the error.
    # Nor may Ctrl-C while the store connects, which is no Exception.
    import kreplica.meta.zk_server as zk
    import kreplica.meta.zookeeper_store as zs
    from kreplica.meta.store import ConnectionLoss
    from kreplica.runtime import RealScheduler

    events: list[str] = []

    class FakeServer:
        hosts = "127.0.0.1:1"

        def start(self):
            events.append("start")
            return self

        def stop(self):
            events.append("stop")

    def failing_store(*args, **kwargs):
        if interrupted:
            raise KeyboardInterrupt
        raise ConnectionLoss("cannot reach ZooKeeper at 127.0.0.1:1")

    monkeypatch.setattr(zk, "ZooKeeperServer", FakeServer)
    monkeypatch.setattr(zs, "ZooKeeperStore", failing_store)
    with pytest.raises(KeyboardInterrupt if interrupted else ConnectionLoss):
        open_store("zookeeper+local:///demo", RealScheduler(), 4000)
    assert events == ["start", "stop"]


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(replication_factor=3, assignment={0: [1001, 1002]}), errors.InvalidReplicaAssignment,
     "replication factor 3 requested but the assignment has 2"),
    (dict(partitions=1, rng=random.Random(0)), errors.InvalidRequest,
     "give partitions and replication_factor, or an assignment"),
    (dict(replication_factor=1, rng=random.Random(0)), errors.InvalidRequest,
     "give partitions and replication_factor, or an assignment"),
    (dict(partitions=1, replication_factor=1), errors.InvalidRequest,
     "replica placement needs an injected random.Random"),
])
def test_create_topic_refuses_counts_that_disagree_or_are_missing(store_env: StoreEnv, kwargs, error,
                                                                   message) -> None:
    c = _cluster(store_env)
    with pytest.raises(error, match=re.escape(message)):
        admin.create_topic(c, "t", **kwargs)
    assert c.get_all_topics() == []


def test_alter_topic_config_deletes_absent_keys_and_refuses_unknown_keys_and_topics(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001]}, config={"retention.ms": 5})
    # an override that is not set is already at the broker's default: nothing to delete
    assert admin.alter_topic_config(c, "bar", delete=["segment.bytes"]) == {"retention.ms": "5"}
    changes = c.get_config_changes()
    with pytest.raises(errors.InvalidConfig, match="unknown topic config 'no.such'"):
        admin.alter_topic_config(c, "bar", delete=["no.such"])
    with pytest.raises(errors.UnknownTopicOrPartition, match="topic 'nope' does not exist"):
        admin.alter_topic_config(c, "nope", {"retention.ms": 1})
    # the values to set are checked as at creation: a key Kafka does not know, a value out of range
    with pytest.raises(errors.InvalidConfig, match="no.such"):
        admin.alter_topic_config(c, "bar", {"no.such": 1})
    with pytest.raises(errors.InvalidConfig, match="min.insync.replicas"):
        admin.alter_topic_config(c, "bar", {"min.insync.replicas": 0})
    with pytest.raises(errors.InvalidConfig, match="num.partitions"):  # a broker's setting, not a topic's
        admin.alter_topic_config(c, "bar", {"num.partitions": 3})
    assert c.get_config_changes() == changes  # the refusals announced nothing
    assert c.get_topic_config("bar") == {"retention.ms": "5"} and c.get_topic_config("nope") == {}


def test_reassign_and_elect_refuse_no_partitions_and_negative_ones(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001, 1002, 1003]})
    cases = [
        (errors.InvalidReplicaAssignment, "the reassignment names no partitions",
         lambda: admin.reassign_partitions(c, {})),
        (errors.InvalidRequest, "partition must be an integer >= 0, got -1",
         lambda: admin.reassign_partitions(c, {TP("bar", -1): [1001]})),
        (errors.InvalidRequest, "partition must be an integer >= 0, got -1",
         lambda: admin.elect_preferred_leaders(c, [TP("bar", -1)])),
        (errors.InvalidRequest, "no partitions named for preferred leader election",
         lambda: admin.elect_preferred_leaders(c, [])),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=re.escape(message)):
            call()
    assert not c.reassignment_in_progress() and c.get_preferred_replica_election() == set()


def test_alter_topic_config_answers_the_overrides_as_stored(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001]})
    got = admin.alter_topic_config(c, "bar", {"unclean.leader.election.enable": True, "retention.ms": 5})
    assert got == {"retention.ms": "5", "unclean.leader.election.enable": "true"} == c.get_topic_config("bar")
    # The node holds the keys in name order, whatever order they were given in.
    assert store_env.store.session("raw").get("/config/topics/bar")[0] == (
        b'{"version":1,"config":{"retention.ms":"5","unclean.leader.election.enable":"true"}}')
    got = admin.alter_topic_config(c, "bar", {"unclean.leader.election.enable": False})
    assert got["unclean.leader.election.enable"] == "false" == c.get_topic_config("bar")["unclean.leader.election.enable"]


def test_a_reassignment_started_meanwhile_by_another_admin_is_refused_as_in_progress(store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    other = KafkaZkClient(store_env.store.session("admin2"), store_env.sched)
    admin.create_topic(c, "bar", assignment={0: [1001, 1002], 1: [1002, 1001]})
    meanwhile(c, "get_live_broker_ids", lambda: other.create_partition_reassignment({TP("bar", 1): [1001, 1002]}))
    with pytest.raises(errors.ReassignmentInProgress):
        admin.reassign_partitions(c, {TP("bar", 0): [1002, 1001]})
    assert c.get_partition_reassignment() == {TP("bar", 1): [1001, 1002]}  # the other one stands


def test_placement_draws_the_start_index_before_the_replica_shift() -> None:
    # Kafka's order of the two draws: the same seed must place the same way here and there.
    draws = random.Random(5)
    start, shift = draws.randrange(5), draws.randrange(5)
    assert start != shift
    brokers = [1, 2, 3, 4, 5]
    assert admin.assign_replicas(brokers, 10, 3, random.Random(5)) == \
        admin.assign_replicas(brokers, 10, 3, random.Random(0), start_index=start, replica_shift=shift)


def test_added_partitions_are_placed_as_kafka_places_them_numbered_on_from_the_last(store_env: StoreEnv) -> None:
    """Kafka 0.10's AdminUtils.addPartitions: the rack-unaware placement with partition 0's
    replication factor, started and shifted at the first live broker from partition 0's
    first replica on (1002: index 1), numbered on from the topic's count, no randomness."""
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1002, 1003], 1: [1003, 1001]})
    added = admin.add_partitions(c, "bar", 5)
    # p2: first (2+1)%3 -> 1001, follower 1 + (1+0)%2 = 2 places on; p3 completes a round of
    # brokers (3 % 3 == 0), so the shift grows to 2: its follower sits 1 place on.
    assert added == {2: [1001, 1003], 3: [1002, 1003], 4: [1003, 1001]}
    assert added == admin.assign_replicas(BROKERS, 3, 2, random.Random(0), start_index=1, replica_shift=1,
                                          first_partition=2)
    assert c.get_topic_assignment("bar") == {0: [1002, 1003], 1: [1003, 1001], **added}
    # Partition 0 led from a broker past every live one (1004, gone since): start at index 0.
    gone = store_env.store.session("b1004")
    KafkaZkClient(gone, store_env.sched).register_broker(1004)
    admin.create_topic(c, "far", assignment={0: [1004, 1001]})
    admin.create_topic(c, "wide", assignment={0: [1001, 1002, 1003, 1004]})
    gone.close()
    assert admin.add_partitions(c, "far", 2) == {1: [1002, 1003]}  # (1 + 0) % 3, then 1 + (0 + 0) % 2 on
    # The live brokers place them: a factor above their number is refused.
    with pytest.raises(errors.InvalidReplicationFactor, match="replication factor: 4 larger than available brokers: 3"):
        admin.add_partitions(c, "wide", 2)
    assert c.get_topic_assignment("wide") == {0: [1001, 1002, 1003, 1004]}


def test_an_explicit_assignment_of_added_partitions_names_exactly_them_with_the_topics_factor(
        store_env: StoreEnv) -> None:
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001, 1002]})
    bad = errors.InvalidReplicaAssignment
    for assignment, message in [
        ({2: [1001, 1002]}, r"partitions \[1\], not \[2\]"),
        ({1: [1001, 1002], 2: [1002, 1003]}, r"partitions \[1\], not \[1, 2\]"),
        ({1: [1001]}, "partition 1: 1 replicas, but the topic's replication factor is 2"),
        ({1: [1001, 1001]}, "duplicate replicas"),
        ({1: [1001, 1009]}, r"unknown brokers \[1009\]"),
        ({"1": [1001, 1002]}, "assignment partition"),
    ]:
        with pytest.raises(bad, match=message):
            admin.add_partitions(c, "bar", 2, assignment)
    assert c.get_topic_assignment("bar") == {0: [1001, 1002]}
    assert admin.add_partitions(c, "bar", 2, {1: [1003, 1001]}) == {1: [1003, 1001]}
    assert c.get_topic_assignment("bar") == {0: [1001, 1002], 1: [1003, 1001]}


@pytest.mark.parametrize("count", [1, 2, 0, -1])
def test_the_partition_count_can_only_grow_and_only_of_a_topic_that_exists(store_env: StoreEnv, count) -> None:
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001], 1: [1002]})
    with pytest.raises(errors.InvalidPartitions, match=f"has 2 partitions: the count can only be increased, "
                                                       f"not set to {count}"):
        admin.add_partitions(c, "bar", count)
    with pytest.raises(errors.UnknownTopicOrPartition, match="topic 'nope' does not exist"):
        admin.add_partitions(c, "nope", 3)
    with pytest.raises(errors.InvalidPartitions, match="partitions"):
        admin.add_partitions(c, "bar", "3")
    assert c.get_topic_assignment("bar") == {0: [1001], 1: [1002]}


def test_partitions_added_meanwhile_by_another_admin_are_not_undone(store_env: StoreEnv) -> None:
    """The assignment is rewritten on the version it was read at: another admin's growth (or
    a reassignment's rewrite) in between makes this one fail, not silently drop theirs."""
    c = _cluster(store_env)
    other = KafkaZkClient(store_env.store.session("admin2"), store_env.sched)
    admin.create_topic(c, "bar", assignment={0: [1001]})
    meanwhile(c, "get_live_broker_ids", lambda: admin.add_partitions(other, "bar", 2, {1: [1003]}))
    with pytest.raises(errors.InvalidPartitions, match="the assignment of 'bar' changed while partitions were being "
                                                       "added"):
        admin.add_partitions(c, "bar", 3)
    assert c.get_topic_assignment("bar") == {0: [1001], 1: [1003]}
    # Nor while a reassignment of the topic is in progress: the controller rewrites the
    # assignment from what it knows as the reassignment completes.
    admin.reassign_partitions(c, {TP("bar", 0): [1002]})
    with pytest.raises(errors.ReassignmentInProgress, match="a reassignment of 'bar' is in progress"):
        admin.add_partitions(c, "bar", 3)
    admin.create_topic(c, "other", assignment={0: [1001]})
    assert admin.add_partitions(c, "other", 2, {1: [1002]}) == {1: [1002]}  # another topic's is no bar


# ---- the two-hundred-and-twenty-fourth review: metadata store mutants, twelfth pass ----

@pytest.mark.parametrize("uri, hosts, private", [("zookeeper://h:1/x", "h:1", False),
                                                 ("zookeeper+local:///x", "127.0.0.1:1", True)],
                         ids=["remote", "private"])  # ids without the word -k "not zookeeper" deselects
def test_an_ensemble_store_gets_the_timeout_asked_for_and_a_private_one_owns_its_server(
        monkeypatch, uri, hosts, private) -> None:
    # Both ensemble forms hand the session timeout on (the broker's and the CLI's setting),
    # and the private form gives the store its server to stop when the store closes. A
    # stand-in store and server: no JVM is needed to see what open_store hands them.
    import kreplica.meta.zk_server as zk
    import kreplica.meta.zookeeper_store as zs
    from kreplica.runtime import RealScheduler

    servers: list[object] = []
    made: list[tuple[str, str, int]] = []

    class FakeServer:
        hosts = "127.0.0.1:1"

        def start(self):
            servers.append(self)
            return self

    class FakeStore:
        owned_server = None

        def __init__(self, hosts, chroot, scheduler, session_timeout_ms=zs.DEFAULT_SESSION_TIMEOUT_MS):
            made.append((hosts, chroot, session_timeout_ms))

    monkeypatch.setattr(zk, "ZooKeeperServer", FakeServer)
    monkeypatch.setattr(zs, "ZooKeeperStore", FakeStore)
    store = open_store(uri, RealScheduler(), 4000)
    assert made == [(hosts, "/x", 4000)]
    assert len(servers) == int(private)
    assert store.owned_server is (servers[0] if private else None)


@pytest.mark.parametrize("topic", ["bar/partitions", "bar/partitions/0"])
def test_a_topic_named_with_a_slash_is_unknown_to_every_admin_call_and_touches_no_other_topic(
        store_env: StoreEnv, topic: str) -> None:
    # "bar/partitions" names bar's partitions node. Taken for a topic, deleting it marked
    # /admin/delete_topics/bar/partitions, whose parent "bar" the controller took for a
    # request to delete bar; altering its config wrote a node under bar's config and
    # announced it; growing or describing it read bar's partitions node as an assignment
    # (a JSONDecodeError). Kafka finds a topic by its name (a broker's metadata, the match
    # kafka-topics.sh makes against the topics listed), never by a path built from it: such
    # a name is a topic it does not have, UNKNOWN_TOPIC_OR_PARTITION, and nothing is written.
    c = _cluster(store_env)
    admin.create_topic(c, "bar", assignment={0: [1001, 1002]})
    c.create_partition_states({TP("bar", 0): LeaderAndIsr(1001, 0, (1001, 1002), 0, 0)})
    changes = c.get_config_changes()
    calls = [lambda: admin.delete_topic(c, topic),
             lambda: admin.alter_topic_config(c, topic, {"retention.ms": 5}),
             lambda: admin.add_partitions(c, topic, 3),
             lambda: admin.reassign_partitions(c, {TP(topic, 0): [1002, 1001]}),
             lambda: admin.elect_preferred_leaders(c, [TP(topic, 0)])]
    answered = []
    for call in calls:
        try:
            answered.append(repr(call()))
        except Exception as e:  # noqa: BLE001 -- collected: the assertion names every call
            answered.append(type(e).__name__)
    assert answered == ["UnknownTopicOrPartition"] * 5
    assert c.get_topic_deletions() == [] and c.get_config_changes() == changes
    assert c.session.get_children("/config/topics/bar") == [] and not c.reassignment_in_progress()
    assert c.get_topic_assignment("bar") == {0: [1001, 1002]}
