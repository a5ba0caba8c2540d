"""`kreplica topics` and `kreplica reassign` against a live ZooKeeper-backed cluster, and
(first) what needs no ZooKeeper: the --list output on an in-memory store, and
reassignment plans refused before connecting."""
import json
import os
import re

import pytest

from kreplica import Cluster
from kreplica.cli import main
from kreplica.protocol import TopicPartition

zookeeper = pytest.mark.zookeeper
CONFIG = {"zookeeper.session.timeout.ms": 4000, "auto.leader.rebalance.enable": False}


@pytest.fixture
def memory_client(monkeypatch):
    """`kreplica topics` on a MemoryStore: a client with topics foo, bar and bar2, bar
    marked for deletion (no controller runs, so the deletion never completes)."""
    from kreplica.meta import KafkaZkClient, MemoryStore
    from kreplica.runtime import SimScheduler
    from kreplica.tools import topics

    scheduler = SimScheduler(0)
    store = MemoryStore(scheduler)
    client = KafkaZkClient(store.session("test"), scheduler)
    for topic in ("foo", "bar", "bar2"):
        client.create_topic(topic, {0: [1001]})
    client.create_topic_deletion("bar")
    monkeypatch.setattr(topics, "open_client", lambda connect: (client, store))
    return client


@pytest.mark.parametrize("topic, listed", [
    (None, ["bar - marked for deletion", "bar2", "foo"]),
    ("bar", ["bar - marked for deletion"]),  # a whole-name match, as Kafka's whitelist
    ("bar.*", ["bar - marked for deletion", "bar2"]),
    ("foo,bar2", ["bar2", "foo"]),
    ("foo,bar2,bar", ["bar - marked for deletion", "bar2", "foo"]),  # every comma an "or" (TL7-33)
    ("foo, bar2", ["bar2", "foo"]),  # Kafka's Whitelist drops the spaces (D2-18)
    ("foo, bar2, bar", ["bar - marked for deletion", "bar2", "foo"]),  # every space (TL8-18)
    ("'foo'", ["foo"]),  # and the quotes a shell or a script left around the pattern (T3-05)
    ("nope", []),
    ("FOO", []),  # a Java Pattern: case counts (TL5-30)
    ("\tfoo\n", ["foo"]),  # Whitelist trims the text first (TL7-03)
    ('"foo"', ["foo"]),  # and drops double quotes as it drops single ones (TL7-07)
    ("", []),  # an empty pattern is still a pattern: it matches no name (the 138th review)
    # Java's String.trim: U+0000 to U+0020 go (a BEL, which Python's strip() keeps), a
    # no-break space or an ideographic one stays, and the pattern then matches no name.
    ("\x07foo\x01", ["foo"]),
    ("\u00a0foo", []),
    ("foo\u3000", []),
    ("\t'foo'", ["foo"]),  # trimmed first, then the quotes dropped (TL9-06)
    # Every quote of either kind at either end, mixed, as Whitelist's ^["']+ and ["']+$ (TL12-05).
    ("\"'foo'\"", ["foo"]),
])
def test_list_marks_deletions_and_filters_by_topic_as_kafka(memory_client, topic, listed, capsys):
    flags = ["--topic", topic] if topic is not None else []
    assert main(["topics", "--zookeeper", "memory:1", "--list", *flags]) == 0
    assert capsys.readouterr().out.splitlines() == listed


def test_list_with_a_bad_topic_pattern_is_an_error_line(memory_client, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--list", "--topic", "bar("]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: --topic 'bar(': not a regular expression") and len(err.splitlines()) == 1


# kafka-topics.sh (0.10): --topic "can also accept a regular expression except for --create",
# matching whole names; commas mean "or".  (Each command closes its store: one per test.)
def test_describe_takes_topic_as_kafkas_regular_expression(memory_client, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "bar.*"]) == 0
    heads = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("Topic:")]
    assert heads == ["Topic:bar", "Topic:bar2"]


def test_describe_with_an_empty_topic_pattern_matches_nothing_and_says_so(memory_client, capsys):
    # Not "every topic", as no --topic at all would be: Whitelist("") matches no name.
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", ""]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "Error: UNKNOWN_TOPIC_OR_PARTITION: no topic matches --topic ''\n"


def test_alter_takes_topic_as_kafkas_regular_expression(memory_client, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo,bar2",
                 "--config", "retention.ms=1000"]) == 0
    assert capsys.readouterr().out.splitlines() == ['Updated config for topic "bar2": retention.ms=1000',
                                                     'Updated config for topic "foo": retention.ms=1000']


NOTE = "Note: This will have no impact if delete.topic.enable is not set to true."  # kafka-topics.sh's


def test_delete_takes_topic_as_kafkas_regular_expression(memory_client, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--delete", "--topic", "fo.|bar2"]) == 0
    assert capsys.readouterr().out.splitlines() == ["Topic bar2 is marked for deletion.", NOTE,
                                                     "Topic foo is marked for deletion.", NOTE]


@pytest.mark.parametrize("action", [["--describe"], ["--delete"], ["--alter", "--config", "retention.ms=1"]])
def test_a_topic_pattern_matching_nothing_is_an_error_line(memory_client, action, capsys):
    assert main(["topics", "--zookeeper", "memory:1", *action, "--topic", "ba"]) == 1  # whole names only
    out, err = capsys.readouterr()
    assert out == "" and err == "Error: UNKNOWN_TOPIC_OR_PARTITION: no topic matches --topic 'ba'\n"


def test_alter_refuses_to_set_and_delete_the_same_key(memory_client, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo",
                 "--config", "retention.ms=1000", "--delete-config", "retention.ms"]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("Error: ") and "'retention.ms' is both set and deleted" in err and out == ""


@pytest.mark.parametrize("content, message", [
    ('{"version":1,"partitions":[{"topic":"bar","partition":0}]}',
     'partitions[0]: expected {"topic": NAME, "partition": N, "replicas": [BROKER, ...]}, '
     'got {"topic": "bar", "partition": 0}'),
    ('{"version":1}', 'expected {"version": 1, "partitions": [...]}'),
    ('[{"topic":"bar"}]', 'expected {"version": 1, "partitions": [...]}'),
    ('{"partitions":[{"topic":"bar","partition":0,"replicas":"1001"}]}', 'partitions[0]: expected'),
    ('{"partitions":[{"topic":"bar","partition":"x","replicas":[1001]}]}', 'partitions[0]: expected'),
    # Not truncated into another partition or broker (the twelfth review's bug).
    ('{"partitions":[{"topic":"bar","partition":1.5,"replicas":[1001]}]}', 'partitions[0]: expected'),
    ('{"partitions":[{"topic":"bar","partition":"1","replicas":[1001]}]}', 'partitions[0]: expected'),
    ('{"partitions":[{"topic":"bar","partition":0,"replicas":[1002.9,1001]}]}', 'partitions[0]: expected'),
    ('{"partitions":[{"topic":"bar","partition":true,"replicas":[1001]}]}', 'partitions[0]: expected'),
    ('{"partitions":[{"topic":"bar","partition":0,"replicas":[1001,true]}]}', 'partitions[0]: expected'),
    ('{"partitions":[{"topic":5,"partition":0,"replicas":[1001]}]}', 'partitions[0]: expected'),  # T4-07
    ("not json", "not JSON: Expecting value"),
    # A byte order mark is no JSON whitespace: Kafka's parser stops at U+FEFF too (TL8-05).
    ('\ufeff{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1001]}]}',
     "not JSON: Unexpected UTF-8 BOM"),
    # Kafka: "Partition reassignment contains duplicate topic partitions" (the thirty-eighth review's bug).
    ('{"partitions":[{"topic":"bar","partition":0,"replicas":[1001]},'
     '{"topic":"bar","partition":0,"replicas":[1002]}]}', "partitions[1]: bar-0 is named twice"),
    # The hundredth review: "partitions" not a list is the file's shape, not an entry's
    # (TL5-07); a partition named twice is refused even with one list twice (TL5-08).
    ('{"partitions":{"topic":"bar","partition":0,"replicas":[1001]}}', 'expected {"version": 1, "partitions": [...]}'),
    ('{"partitions":5}', 'expected {"version": 1, "partitions": [...]}'),
    ('{"partitions":[{"topic":"bar","partition":0,"replicas":[1001]},'
     '{"topic":"bar","partition":0,"replicas":[1001]}]}', "partitions[1]: bar-0 is named twice"),
])
def test_a_bad_reassignment_file_is_named_and_explained_before_connecting(tmp_path, content, message, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(content, encoding="utf-8")
    # Port 1 has no ZooKeeper: the plan must be refused before any attempt to connect.
    assert main(["reassign", "--zookeeper", "127.0.0.1:1", "--reassignment-json-file", str(plan)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: {plan}: ") and message in err and len(err.splitlines()) == 1, err


# "": an empty list is no plan either (T4-09); ids are decimal, as everywhere (TL7-21)
@pytest.mark.parametrize("replicas", [
    "1001,x", "", "0x3e9,1002",
    # Read as kafka-reassign-partitions.sh reads --broker-list (split(','), then toInt), not by
    # int(): no blank around an id, no underscore, no digit beyond the BMP, no empty id but a
    # trailing one (the 176th review).
    "1001, 1002", "1001,1_002", "1001,100\U000104a2", ",1001", "1001,,1002",
])
def test_bad_replicas_are_explained_before_connecting(replicas, capsys):
    assert main(["reassign", "--zookeeper", "127.0.0.1:1", "--topic", "bar", "--partition", "0",
                 "--replicas", replicas]) == 1
    assert capsys.readouterr().err == f"Error: --replicas {replicas!r}: expected broker ids, e.g. 1001,1002\n"


# The twelfth review (docs/engine-audit.md, DT..): what --describe prints, and what
# --create and reassign write, checked on an in-memory store, no ZooKeeper needed.
SEED003_AFTER_1001_STOPPED = (  # seed 003's second picture, 1001 stopped by a controlled shutdown
    "Topic:bar\tPartitionCount:3\tReplicationFactor:3\tConfigs:\n"
    "\tTopic: bar\tPartition: 0\tLeader: 1003\tReplicas: 1001,1003,1002\tIsr: 1003,1002\n"
    "\tTopic: bar\tPartition: 1\tLeader: 1002\tReplicas: 1002,1001,1003\tIsr: 1002,1003\n"
    "\tTopic: bar\tPartition: 2\tLeader: 1003\tReplicas: 1003,1002,1001\tIsr: 1003,1002\n")


@pytest.fixture
def seed003_store(monkeypatch):
    """A MemoryStore holding seed 003's topic bar after 1001's controlled shutdown (ISRs
    shrunk and out of replica order), brokers 1001-1003 registered; `kreplica topics`
    and `kreplica reassign` run against it.  Returns a function opening a fresh client,
    to read what a command (which closes its session) wrote."""
    from kreplica.meta import KafkaZkClient, MemoryStore
    from kreplica.protocol import LeaderAndIsr
    from kreplica.runtime import SimScheduler
    from kreplica.tools import topics

    scheduler = SimScheduler(0)
    store = MemoryStore(scheduler)
    client = KafkaZkClient(store.session("test"), scheduler)
    for b in (1001, 1002, 1003):
        client.register_broker(b)
    client.create_topic("bar", {0: [1001, 1003, 1002], 1: [1002, 1001, 1003], 2: [1003, 1002, 1001]})
    client.create_partition_states({
        TopicPartition("bar", 0): LeaderAndIsr(1003, 1, (1003, 1002)),
        TopicPartition("bar", 1): LeaderAndIsr(1002, 0, (1002, 1003)),
        TopicPartition("bar", 2): LeaderAndIsr(1003, 0, (1003, 1002))})
    monkeypatch.setattr(topics, "open_client", lambda connect: (client, store))
    return lambda: KafkaZkClient(store.session("check"), scheduler)


def test_describe_prints_seed003s_picture_replicas_and_isr_as_stored(seed003_store, capsys):
    # Replicas and Isr in stored order (not sorted), Replicas before Isr, and the
    # replication factor from the replicas, not from the shrunk ISR.
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "bar"]) == 0
    assert capsys.readouterr().out == SEED003_AFTER_1001_STOPPED


def test_describe_without_topic_describes_every_topic_in_name_order(memory_client, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--describe"]) == 0
    heads = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("Topic:")]
    assert heads == ["Topic:bar", "Topic:bar2", "Topic:foo"]


def test_describe_reads_the_topics_config_node_and_numbers_partitions_as_integers(memory_client, capsys):
    """kafka-topics.sh --describe prints the overrides of the topic's config node and
    its partitions sorted as numbers (`sortBy(_._1)` on Ints): partition 10 after 9."""
    memory_client.create_topic("wide", {p: [1001] for p in range(12)}, {"retention.ms": "1000"})
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "wide"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Topic:wide\tPartitionCount:12\tReplicationFactor:1\tConfigs:retention.ms=1000"
    assert [line.split("\t")[2] for line in lines[1:]] == [f"Partition: {p}" for p in range(12)]


def test_describe_header_lists_configs_sorted_by_key():
    from kreplica.describe import PartitionDescription, TopicDescription, format_describe

    d = TopicDescription("t", (PartitionDescription(0, 1001, (1001,), (1001,), 0),),
                         {"segment.bytes": "1024", "cleanup.policy": "compact", "retention.ms": "1000"})
    assert format_describe(d).splitlines()[0] == (
        "Topic:t\tPartitionCount:1\tReplicationFactor:1\t"
        "Configs:cleanup.policy=compact,retention.ms=1000,segment.bytes=1024")


def test_create_writes_the_replica_assignment_from_partition_0_and_its_configs(seed003_store, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "new",
                 "--replica-assignment", "1001:1002,1002:1001", "--config", "retention.ms=1000"]) == 0
    assert capsys.readouterr().out == 'Created topic "new".\n'
    client = seed003_store()
    assert client.get_topic_assignment("new") == {0: [1001, 1002], 1: [1002, 1001]}
    assert client.get_topic_config("new") == {"retention.ms": "1000"}


def test_a_reassignment_file_is_written_with_each_replica_list_in_its_order(seed003_store, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    # The file names bar-2 first: the message lists the partitions in order all the same (T3-12).
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "bar", "partition": 2, "replicas": [1003, 1001]},
        {"topic": "bar", "partition": 0, "replicas": [1002, 1001, 1003]}]}))
    assert main(["reassign", "--zookeeper", "memory:1", "--reassignment-json-file", str(plan)]) == 0
    assert capsys.readouterr().out == "Successfully started reassignment of bar-0, bar-2\n"
    assert seed003_store().get_partition_reassignment() == {
        TopicPartition("bar", 0): [1002, 1001, 1003], TopicPartition("bar", 2): [1003, 1001]}


def test_replicas_move_the_partition_named_in_the_order_given(seed003_store, capsys):
    # The first replica is the preferred leader: the order is the point.
    assert main(["reassign", "--zookeeper", "memory:1", "--topic", "bar", "--partition", "1",
                 "--replicas", "1003,1001,1002"]) == 0
    assert capsys.readouterr().out == "Successfully started reassignment of bar-1\n"
    assert seed003_store().get_partition_reassignment() == {TopicPartition("bar", 1): [1003, 1001, 1002]}


def test_replicas_drop_a_trailing_comma_as_javas_split_does(seed003_store, capsys):
    # As kafka-reassign-partitions.sh's --broker-list: Java's split leaves no trailing empty id.
    assert main(["reassign", "--zookeeper", "memory:1", "--topic", "bar", "--partition", "1",
                 "--replicas", "+1003,1001,1002,,"]) == 0
    assert capsys.readouterr().out == "Successfully started reassignment of bar-1\n"
    assert seed003_store().get_partition_reassignment() == {TopicPartition("bar", 1): [1003, 1001, 1002]}


def test_replicas_of_commas_alone_are_no_ids_as_javas_split_reads_them(seed003_store, capsys):
    # Java's split of ",," is no item (each item a trailing empty one), not one empty id: the
    # list is read as empty, and the admin call's empty-list check is what refuses it.
    assert main(["reassign", "--zookeeper", "memory:1", "--topic", "bar", "--partition", "1",
                 "--replicas", ",,"]) == 1
    assert capsys.readouterr().err == "Error: INVALID_REPLICA_ASSIGNMENT: bar-1: empty replica list\n"
    assert seed003_store().get_partition_reassignment() == {}


def test_preferred_election_names_every_partition_of_the_topic(seed003_store, capsys):
    assert main(["reassign", "--zookeeper", "memory:1", "--preferred-election", "--topic", "bar"]) == 0
    assert capsys.readouterr().out == "Started preferred replica election for bar.\n"
    assert seed003_store().get_preferred_replica_election() == {TopicPartition("bar", p) for p in range(3)}


@pytest.fixture
def zk_cluster(request, tmp_path):
    server = request.getfixturevalue("zk_server")
    chroot = f"/cli-{os.getpid()}-{request.node.name[:20]}"
    c = Cluster.embedded(data_dir=tmp_path, metadata=f"zookeeper://{server.hosts}{chroot}", config=CONFIG)
    c.connect = f"{server.hosts}{chroot}"
    yield c
    c.close()


@zookeeper
def test_create_then_describe_matches_cluster(zk_cluster, capsys):
    c = zk_cluster
    assert main(["topics", "--zookeeper", c.connect, "--create", "--topic", "bar",
                 "--replica-assignment", "1001:1003:1002,1002:1001:1003,1003:1002:1001"]) == 0
    assert c.run_until(lambda: all(p.leader >= 0 for p in c.describe("bar").partitions), 20_000)
    capsys.readouterr()
    assert main(["topics", "--zookeeper", c.connect, "--describe", "--topic", "bar"]) == 0
    out = capsys.readouterr().out
    assert out == c.describe_text("bar")
    assert out.splitlines()[1].startswith("\tTopic: bar\tPartition: 0\tLeader: 1001\tReplicas: 1001,1003,1002")
    assert main(["topics", "--zookeeper", c.connect, "--list"]) == 0
    assert capsys.readouterr().out.split() == ["bar"]


@zookeeper
def test_bad_create_is_a_clear_error(zk_cluster, capsys):
    assert main(["topics", "--zookeeper", zk_cluster.connect, "--create", "--topic", "t",
                 "--partitions", "1", "--replication-factor", "9"]) == 1
    assert "INVALID_REPLICATION_FACTOR" in capsys.readouterr().err


@zookeeper
def test_reassign_and_delete_through_admin_paths(zk_cluster, tmp_path, capsys):
    c = zk_cluster
    c.create_topic("bar", partitions=1, replication_factor=2, assignment={0: [1001, 1002]})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "bar", "partition": 0,
                                                              "replicas": [1002, 1003]}]}))
    assert main(["reassign", "--zookeeper", c.connect, "--reassignment-json-file", str(plan)]) == 0
    assert c.run_until(lambda: c.describe("bar").partitions[0].replicas == (1002, 1003), 30_000)
    assert main(["topics", "--zookeeper", c.connect, "--delete", "--topic", "bar"]) == 0
    assert c.run_until(lambda: "bar" not in c.topics(), 30_000)


@zookeeper
def test_bad_input_is_an_error_line_not_a_traceback(zk_cluster, tmp_path, capsys):
    c = zk_cluster
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"version": 1, "partitions": [{"topic": "bar", "partition": 0}]}))
    cases = [
        (["topics", "--zookeeper", "no-port", "--list"], "expected host:port"),
        (["topics", "--zookeeper", c.connect, "--describe", "--topic", "nope"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["topics", "--zookeeper", c.connect, "--create", "--topic", "t", "--partitions", "1",
          "--replication-factor", "1", "--config", "retention.ms"], "expected KEY=VALUE"),
        (["topics", "--zookeeper", c.connect, "--create", "--topic", "t", "--partitions", "1",
          "--replication-factor", "1", "--config", "no.such.key=1"], "INVALID_CONFIG"),
        (["reassign", "--zookeeper", c.connect, "--reassignment-json-file", str(tmp_path / "missing.json")],
         "No such file"),
        (["reassign", "--zookeeper", c.connect, "--reassignment-json-file", str(broken)],
         f"{broken}: partitions[0]: expected"),
        (["reassign", "--zookeeper", c.connect, "--topic", "bar", "--partition", "0", "--replicas", "1001,x"],
         "expected broker ids"),
        (["reassign", "--zookeeper", c.connect, "--preferred-election", "--topic", "nope"],
         "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    for argv, message in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("Error: ") and message in err, (argv, err)
    assert c.topics() == []


@zookeeper
def test_create_by_count_replicas_and_preferred_election_and_verify(zk_cluster, capsys):
    c = zk_cluster
    assert main(["topics", "--zookeeper", c.connect, "--create", "--topic", "foo",
                 "--partitions", "2", "--replication-factor", "2"]) == 0
    assert c.run_until(lambda: all(p.leader >= 0 for p in c.describe("foo").partitions), 20_000)
    assert [len(p.replicas) for p in c.describe("foo").partitions] == [2, 2]
    capsys.readouterr()
    assert main(["topics", "--zookeeper", c.connect, "--describe"]) == 0  # every topic
    assert capsys.readouterr().out == c.describe_text("foo")
    # Move foo-0 by flags, watch it with --verify, then give leadership to its first replica.
    target = [b for b in (1001, 1002, 1003) if b != c.describe("foo").partitions[0].leader][:2]
    assert main(["reassign", "--zookeeper", c.connect, "--topic", "foo", "--partition", "0",
                 "--replicas", ",".join(map(str, target))]) == 0
    assert "Successfully started reassignment of foo-0" in capsys.readouterr().out
    assert c.run_until(lambda: list(c.describe("foo").partitions[0].replicas) == target, 30_000)
    assert main(["reassign", "--zookeeper", c.connect, "--verify"]) == 0
    assert capsys.readouterr().out.strip() == "Reassignment in progress: none"
    assert main(["reassign", "--zookeeper", c.connect, "--preferred-election", "--topic", "foo"]) == 0
    assert "Started preferred replica election for foo." in capsys.readouterr().out
    assert c.run_until(lambda: all(p.leader == p.replicas[0] for p in c.describe("foo").partitions), 30_000)


@zookeeper
def test_alter_changes_a_running_topics_config(zk_cluster, capsys):
    c = zk_cluster
    c.create_topic("bar", partitions=1, replication_factor=3)
    assert main(["topics", "--zookeeper", c.connect, "--alter", "--topic", "bar",
                 "--config", "min.insync.replicas=2", "--config", "retention.ms=60000"]) == 0
    assert capsys.readouterr().out == 'Updated config for topic "bar": min.insync.replicas=2,retention.ms=60000\n'
    replicas = [b.replica_manager.partitions[TopicPartition("bar", 0)] for b in c.brokers.values()]
    assert c.run_until(lambda: all(p.min_insync_replicas == 2 and p.log.config.retention_ms == 60000
                                   for p in replicas), 20_000)
    assert main(["topics", "--zookeeper", c.connect, "--alter", "--topic", "bar",
                 "--delete-config", "min.insync.replicas"]) == 0
    assert c.run_until(lambda: all(p.min_insync_replicas == 1 for p in replicas), 20_000)
    assert main(["topics", "--zookeeper", c.connect, "--alter", "--topic", "bar", "--config", "acks=all"]) == 1
    assert "unknown config key 'acks'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--alter needs --config"):
        main(["topics", "--zookeeper", c.connect, "--alter", "--topic", "bar"])


@pytest.mark.parametrize("pending, shown", [
    ({}, "none"),
    ({TopicPartition("bar", 1): [1003, 1001, 1002]}, "bar-1 -> [1003, 1001, 1002]"),
])
def test_verify_shows_the_reassignment_in_progress_or_none(seed003_store, pending, shown, capsys):
    if pending:
        seed003_store().create_partition_reassignment(pending)
    assert main(["reassign", "--zookeeper", "memory:1", "--verify"]) == 0
    assert capsys.readouterr().out == f"Reassignment in progress: {shown}\n"


@pytest.fixture
def filter_store(monkeypatch):
    """bar: p0 led by 1003 (not live) with a shrunk ISR, p1 healthy, p2 leaderless and
    shrunk; foo healthy; baz just created (no partition state yet).  Live: 1001, 1002."""
    from kreplica.meta import KafkaZkClient, MemoryStore
    from kreplica.protocol import LeaderAndIsr
    from kreplica.runtime import SimScheduler
    from kreplica.tools import topics

    scheduler = SimScheduler(0)
    store = MemoryStore(scheduler)
    client = KafkaZkClient(store.session("test"), scheduler)
    for b in (1001, 1002):
        client.register_broker(b)
    client.create_topic("bar", {0: [1003, 1002, 1001], 1: [1002, 1001, 1003], 2: [1001, 1003, 1002]})
    client.create_topic("foo", {0: [1001]})
    client.create_topic("baz", {0: [1002]})
    client.create_partition_states({
        TopicPartition("bar", 0): LeaderAndIsr(1003, 2, (1003, 1002)),
        TopicPartition("bar", 1): LeaderAndIsr(1002, 0, (1002, 1001, 1003)),
        TopicPartition("bar", 2): LeaderAndIsr(-1, 4, (1003,)),
        TopicPartition("foo", 0): LeaderAndIsr(1001, 0, (1001,))})
    monkeypatch.setattr(topics, "open_client", lambda connect: (client, store))


BAR0 = "\tTopic: bar\tPartition: 0\tLeader: 1003\tReplicas: 1003,1002,1001\tIsr: 1003,1002"
BAR2 = "\tTopic: bar\tPartition: 2\tLeader: -1\tReplicas: 1001,1003,1002\tIsr: 1003"
BAZ0 = "\tTopic: baz\tPartition: 0\tLeader: none\tReplicas: 1002\tIsr: "


@pytest.mark.parametrize("flags, lines", [
    (["--under-replicated-partitions"], [BAR0, BAR2, BAZ0]),  # baz: no ISR stored yet, as 0.10 counts it
    (["--unavailable-partitions"], [BAR0, BAR2, BAZ0]),  # led by a dead broker, by none, not yet
    (["--under-replicated-partitions", "--topic", "foo"], []),
])
def test_describe_filters_report_only_the_partitions_in_trouble_without_topic_lines(filter_store, flags,
                                                                                     lines, capsys):
    # kafka-topics.sh --describe's two filters (0.10): no summary line per topic, and a
    # partition is printed when it passes either filter.
    assert main(["topics", "--zookeeper", "memory:1", "--describe", *flags]) == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_describe_without_filters_still_prints_every_partition_under_its_topic_line(filter_store, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "bar"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Topic:bar\tPartitionCount:3") and out[1] == BAR0 and out[3] == BAR2


@pytest.mark.parametrize("flag", ["--unavailable-partitions", "--under-replicated-partitions"])  # each (TL8-01)
@pytest.mark.parametrize("action", [  # every action but --describe, as kafka-topics.sh's checkArgs (TL9-05)
    ["--list"], ["--create", "--topic", "new", "--partitions", "1", "--replication-factor", "1"],
    ["--alter", "--topic", "foo", "--config", "retention.ms=1"], ["--delete", "--topic", "foo"]],
    ids=["list", "create", "alter", "delete"])
def test_describe_filters_go_with_describe_only(filter_store, action, flag, capsys):
    with pytest.raises(SystemExit, match="go with --describe"):
        main(["topics", "--zookeeper", "memory:1", *action, flag])
    assert capsys.readouterr().out == ""


# The thirty-eighth review (docs/engine-audit.md, D2-..): the second pass over these tools.
Q0 = "\tTopic: q\tPartition: 0\tLeader: 1001\tReplicas: 1001,1002\tIsr: 1001"
Q1 = "\tTopic: q\tPartition: 1\tLeader: 1003\tReplicas: 1003\tIsr: 1003"


@pytest.mark.parametrize("flags, lines", [
    (["--under-replicated-partitions"], [Q0]),
    (["--unavailable-partitions"], [Q1]),
])
def test_each_describe_filter_keeps_only_its_own_kind_of_partition(monkeypatch, flags, lines, capsys):
    # The filter tests' partitions in trouble are in trouble both ways; here q-0 is only
    # under-replicated (led by a live broker) and q-1 only unavailable (a full ISR led by
    # a broker that is not live).
    from kreplica.meta import KafkaZkClient, MemoryStore
    from kreplica.protocol import LeaderAndIsr
    from kreplica.runtime import SimScheduler
    from kreplica.tools import topics

    scheduler = SimScheduler(0)
    store = MemoryStore(scheduler)
    client = KafkaZkClient(store.session("test"), scheduler)
    for b in (1001, 1002):
        client.register_broker(b)
    client.create_topic("q", {0: [1001, 1002], 1: [1003]})
    client.create_partition_states({TopicPartition("q", 0): LeaderAndIsr(1001, 0, (1001,)),
                                    TopicPartition("q", 1): LeaderAndIsr(1003, 0, (1003,))})
    monkeypatch.setattr(topics, "open_client", lambda connect: (client, store))
    assert main(["topics", "--zookeeper", "memory:1", "--describe", *flags]) == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_alter_without_a_config_change_is_refused(memory_client, capsys):
    with pytest.raises(SystemExit, match="--alter needs --config KEY=VALUE, --delete-config KEY or --partitions N"):
        main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo"])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("sizes", [["--partitions", "2"], ["--replication-factor", "1"]])
def test_create_needs_both_counts_or_an_assignment(memory_client, sizes, capsys):
    with pytest.raises(SystemExit, match="--create needs --partitions and --replication-factor"):
        main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "new", *sizes])
    assert capsys.readouterr().out == ""  # refused before create_topic: nothing written


def test_alter_deleting_the_last_override_says_broker_defaults(memory_client, capsys):
    memory_client.set_topic_config("foo", {"retention.ms": "1000"})
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo",
                 "--delete-config", "retention.ms"]) == 0
    assert capsys.readouterr().out == 'Updated config for topic "foo": (broker defaults)\n'


def test_verify_shows_a_reassignment_whose_assignment_is_already_written(seed003_store, capsys):
    # The controller writes the new assignment (step 10) before it takes the partition out
    # of /admin/reassign_partitions (step 11):
    # until then the reassignment is still in progress, even though the two agree.
    client = seed003_store()
    client.set_topic_assignment("bar", {0: [1001, 1003, 1002], 1: [1003, 1001, 1002], 2: [1003, 1002, 1001]})
    client.create_partition_reassignment({TopicPartition("bar", 1): [1003, 1001, 1002]})
    assert main(["reassign", "--zookeeper", "memory:1", "--verify"]) == 0
    assert capsys.readouterr().out == "Reassignment in progress: bar-1 -> [1003, 1001, 1002]\n"


def test_a_reassignment_file_naming_no_partition_is_an_error(seed003_store, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": []}')
    assert main(["reassign", "--zookeeper", "memory:1", "--reassignment-json-file", str(plan)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("Error: ") and "names no partitions" in err
    assert seed003_store().get_partition_reassignment() == {}


@pytest.mark.parametrize("named", [["--topic", "bar"], ["--partition", "0"]])  # T3-10: the topic too
def test_replicas_without_a_partition_is_refused(seed003_store, named, capsys):
    with pytest.raises(SystemExit, match="--replicas needs --topic and --partition"):
        main(["reassign", "--zookeeper", "memory:1", *named, "--replicas", "1003,1001,1002"])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("topic", [[], ["--topic", ""]], ids=["none", "empty"])
def test_preferred_election_without_a_topic_is_refused(seed003_store, topic, capsys):
    # Not looked up as a topic named "None", nor as an unknown topic's error; an empty
    # --topic names no topic either, as for `topics --alter` and `--delete` (TL11-07).
    with pytest.raises(SystemExit, match="--preferred-election needs --topic"):
        main(["reassign", "--zookeeper", "memory:1", "--preferred-election", *topic])
    assert capsys.readouterr().out == ""


def test_a_store_that_cannot_be_opened_is_an_error_line_and_exit_status_1(monkeypatch, capsys):
    from kreplica.tools import topics

    def refuse(connect):
        raise OSError("Connection refused")
    monkeypatch.setattr(topics, "open_client", refuse)
    assert main(["topics", "--zookeeper", "memory:1", "--list"]) == 1
    assert capsys.readouterr() == ("", "Error: Connection refused\n")


def test_a_topic_whose_assignment_names_no_partition_is_not_described(memory_client, capsys):
    # Written by no kreplica command (create refuses 0 partitions), but a store may hold
    # one; Kafka 0.10's describe fails on it (.head of an empty map).  Not a header
    # saying PartitionCount:0 ReplicationFactor:0.
    from kreplica import errors
    from kreplica.describe import describe_topic

    memory_client.create_topic("empty", {})
    with pytest.raises(errors.UnknownTopicOrPartition):
        describe_topic(memory_client, "empty")


# The sixty-first review (docs/engine-audit.md, T3-..): the third pass over these tools.
def test_replication_factor_is_the_first_partitions_replica_count():
    """0.10 takes the ReplicationFactor of the header from the first partition's replica
    list (a topic being reassigned to another factor may differ from one partition to
    the next); not from the last one."""
    from kreplica.describe import PartitionDescription, TopicDescription, format_describe

    d = TopicDescription("q", (PartitionDescription(0, 1001, (1001, 1002), (1001, 1002), 0),
                               PartitionDescription(1, 1001, (1001,), (1001,), 0)), {})
    assert format_describe(d).splitlines()[0] == "Topic:q\tPartitionCount:2\tReplicationFactor:2\tConfigs:"


def test_describe_counts_the_partitions_the_store_holds_and_takes_the_factor_from_partition_0(memory_client,
                                                                                              capsys):
    """kafka-topics.sh 0.10's header: PartitionCount is the size of the topic's assignment
    and ReplicationFactor partition 0's replica count, whatever the partitions' numbers
    (a topic node another tool wrote, with no partition 1) or the other partitions' counts
    (one being reassigned to more replicas): not one past the last partition's number
    (TL12-02), nor the largest replica count (TL12-01)."""
    memory_client.create_topic("gap", {0: [1001], 2: [1002, 1001]})
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "gap"]) == 0
    assert capsys.readouterr().out == (
        "Topic:gap\tPartitionCount:2\tReplicationFactor:1\tConfigs:\n"
        "\tTopic: gap\tPartition: 0\tLeader: none\tReplicas: 1001\tIsr: \n"
        "\tTopic: gap\tPartition: 2\tLeader: none\tReplicas: 1002,1001\tIsr: \n")


@pytest.mark.parametrize("text, counts", [
    ("1001:1002,1002:1001", ["--partitions", "2"]),
    ("1001:1002,1002:1001", ["--replication-factor", "2"]),
    ("1001:1002,1002:1001", ["--partitions", "2", "--replication-factor", "2"]),
    ("", ["--partitions", "1", "--replication-factor", "1"]),  # given, though empty (TL7-04)
    ("1001:1002,1002:1001", ["--partitions", "0"]),  # given, though 0 (TL11-02)
])
def test_a_replica_assignment_is_refused_beside_a_count_as_kafka_topics_refuses_it(text, counts, seed003_store):
    """The counts agree with the assignment here, and kafka-topics.sh still refuses: the
    assignment alone says how many partitions and replicas there are.  Its check is
    whether the option is there (joptsimple's `has`), so an empty one is refused too."""
    with pytest.raises(SystemExit, match="--replica-assignment can't be used with --partitions or --replication"):
        main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "new",
              "--replica-assignment", text, *counts])
    assert seed003_store().get_all_topics() == ["bar"]


@pytest.mark.parametrize("text", ["1001:x", ""])
def test_a_bad_replica_assignment_says_what_is_expected(seed003_store, text, capsys):
    # Not int()'s "invalid literal for int() with base 10", which names no option. An empty
    # one is given too (kafka-topics.sh parses it and fails on its empty id), not "--create
    # needs ... or --replica-assignment" (the 176th review).
    with pytest.raises(SystemExit, match=rf"bad --replica-assignment '{text}': expected e.g. 1001:1002,1002:1003"):
        main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "new", "--replica-assignment", text])
    assert seed003_store().get_all_topics() == ["bar"]


@pytest.mark.parametrize("text, assignment", [
    ("1001:1002,", {0: [1001, 1002]}),
    ("1001:1002,1002:1001,,", {0: [1001, 1002], 1: [1002, 1001]}),
    ("1001:1002:", {0: [1001, 1002]}),
    (" 1001 :1002", {0: [1001, 1002]}),  # each id trimmed, as `s.trim().toInt`
    ("1001\t:\x001002\n", {0: [1001, 1002]}),  # of all Java's trim takes, not spaces only (TL8-03)
    ("1_001:1002", None),  # toInt is Integer.parseInt: no digit separators
    ("1001:\u00a01002", None),  # Java's trim stops at U+0020: a no-break space stays
    (",1001:1002", None),  # a leading empty item stays, and "" is no integer
    ("1001:1002,,1002:1001", None),
    ("1001::1002", None),
    (":1001", None),
    (",", None),  # no partition at all (0.10's createTopic requires one)
])
def test_a_replica_assignment_is_split_as_javas_string_split_splits_it(seed003_store, capsys, text, assignment):
    """kafka-topics.sh 0.10 splits --replica-assignment with Java's String.split, which
    drops trailing empty strings: a trailing comma or colon is no partition or replica,
    an empty item before another is a NumberFormatException."""
    argv = ["topics", "--zookeeper", "memory:1", "--create", "--topic", "new", "--replica-assignment", text]
    if assignment is None:
        with pytest.raises(SystemExit, match=r"bad --replica-assignment"):
            main(argv)
        assert seed003_store().get_all_topics() == ["bar"]
    else:
        assert main(argv) == 0
        assert capsys.readouterr().out == 'Created topic "new".\n'
        assert seed003_store().get_topic_assignment("new") == assignment


@pytest.mark.parametrize("action, message", [
    (["--create", "--partitions", "1", "--replication-factor", "1"], "--create needs --topic"),
    # An empty name is refused before the store is asked (TL10-06), as Kafka words it.
    (["--create", "--topic", "", "--partitions", "1", "--replication-factor", "1"],
     "--create: topic name is illegal, it can't be empty"),
    (["--delete"], "--delete needs --topic"),
    (["--alter", "--config", "retention.ms=1000"], "--alter needs --topic"),  # T4-04
])
def test_create_and_delete_need_a_topic(seed003_store, action, message, capsys):
    """A forgotten --topic is a usage message, not a topic named "None" nor an
    AttributeError traceback from the pattern of no topic (--alter's likewise)."""
    with pytest.raises(SystemExit, match=message):
        main(["topics", "--zookeeper", "memory:1", *action])
    assert capsys.readouterr().out == ""
    client = seed003_store()
    assert list(client.get_all_topics()) == ["bar"] and list(client.get_topic_deletions()) == []
    assert client.get_topic_config("bar") == {}


def test_a_key_error_names_itself_as_a_missing_key(memory_client, capsys):
    """A KeyError's text is only the key, quoted ("Error: 'replicas'"): the Error line
    says it is a KeyError, a key that was looked for and is not there."""
    from kreplica.tools import topics

    def missing(client):
        raise KeyError("replicas")

    assert topics.with_client("memory:1", missing) == 1
    assert capsys.readouterr().err == "Error: KeyError('replicas')\n"


def test_alter_prints_the_topics_configs_sorted_by_key(memory_client, capsys):
    # As --describe's Configs: one order whatever the order the options came in.
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo",
                 "--config", "segment.bytes=1024", "--config", "retention.ms=1000"]) == 0
    assert capsys.readouterr().out == 'Updated config for topic "foo": retention.ms=1000,segment.bytes=1024\n'


@pytest.mark.parametrize("name, reason", [
    ("plan.json", "[Errno 2] No such file or directory"),
    # An empty name is a file that is not there, not "no file": it was taken as no plan,
    # and the command connected, to blame the plan for naming no partition (157th review).
    ("", "[Errno 2] No such file or directory"),
    (".", "[Errno 21] Is a directory"),  # any OSError, not only a missing file (TL8-21)
], ids=["missing", "empty-name", "directory"])
def test_a_reassignment_file_that_cannot_be_read_is_an_error_line_before_connecting(tmp_path, monkeypatch,
                                                                                      name, reason, capsys):
    from kreplica.tools import topics

    def connect(text):
        raise AssertionError(f"connected to {text}")

    monkeypatch.setattr(topics, "open_client", connect)
    path = str(tmp_path / name) if name else name
    # Refused before any attempt to connect, not a traceback.
    assert main(["reassign", "--zookeeper", "127.0.0.1:1", "--reassignment-json-file", path]) == 1
    assert capsys.readouterr().err == f"Error: {reason}: '{path}'\n"


@pytest.mark.parametrize("topic, error", [
    ("empty", "INVALID_REQUEST: no partitions named for preferred leader election"),
    # A topic the store lacks is said to be unknown, not an election naming no partition
    # (TL12-14: its absent assignment read as an empty one).
    ("nope", "UNKNOWN_TOPIC_OR_PARTITION: topic 'nope' does not exist"),
])
def test_preferred_election_of_a_topic_without_partitions_names_none(memory_client, topic, error, capsys):
    # As test_a_topic_whose_assignment_names_no_partition_is_not_described: a store may
    # hold one.  The election is refused for naming no partition, not for a partition 0
    # the topic does not have.
    memory_client.create_topic("empty", {})
    assert main(["reassign", "--zookeeper", "memory:1", "--preferred-election", "--topic", topic]) == 1
    assert capsys.readouterr() == ("", f"Error: {error}\n")


# The eighty-first review (docs/engine-audit.md, T4-..): the fourth pass over these tools.
@pytest.mark.parametrize("argv, status", [
    (["--list"], 0),
    (["--describe", "--topic", "nope"], 1),  # an Error: line
])
def test_each_command_closes_its_session_also_after_an_error(memory_client, argv, status):
    """with_client's session is the command's own: closed when the command ends, however
    it ends (T4-05), not left to the process's exit, which a caller in Python never reaches."""
    from kreplica.meta.store import ConnectionLoss

    assert main(["topics", "--zookeeper", "memory:1", *argv]) == status
    with pytest.raises(ConnectionLoss):
        memory_client.get_all_topics()


def test_verify_lists_a_reassignment_written_out_of_order_by_partition(seed003_store, capsys):
    """kreplica's encoder sorts the node's partitions, but another tool (Kafka's own, on a
    shared ZooKeeper) writes them in its file's order: --verify still shows them by topic
    and partition (T4-08)."""
    import json

    from kreplica.meta import layout

    node = {"version": 1, "partitions": [{"topic": "bar", "partition": 2, "replicas": [1001, 1002, 1003]},
                                         {"topic": "bar", "partition": 0, "replicas": [1002, 1003, 1001]}]}
    seed003_store().session.create(layout.REASSIGN_PARTITIONS, json.dumps(node).encode(), makepath=True)
    assert main(["reassign", "--zookeeper", "memory:1", "--verify"]) == 0
    assert capsys.readouterr().out == ("Reassignment in progress: bar-0 -> [1002, 1003, 1001], "
                                       "bar-2 -> [1001, 1002, 1003]\n")


def test_unavailable_partitions_with_no_broker_live_prints_no_topic_line(memory_client, capsys):
    """The whole cluster down, the case --unavailable-partitions is for: an empty set of
    live brokers is still the filter, not "no filter", so no Topic: line (T4-31)."""
    assert memory_client.get_live_broker_ids() == []
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "foo", "--unavailable-partitions"]) == 0
    assert capsys.readouterr().out == "\tTopic: foo\tPartition: 0\tLeader: none\tReplicas: 1001\tIsr: \n"


def test_delete_says_a_topic_already_marked_is_already_marked(memory_client, capsys):
    """As kafka-topics.sh (0.10) answers the delete node that exists: bar is marked already
    (the fixture's), so it is not marked again with the note a new mark gets."""
    assert main(["topics", "--zookeeper", "memory:1", "--delete", "--topic", "bar.*"]) == 0
    assert capsys.readouterr().out.splitlines() == ["Topic bar is already marked for deletion.",
                                                     "Topic bar2 is marked for deletion.", NOTE]


# The hundredth review (docs/engine-audit.md, TL5-..): the fifth pass over these tools.
def test_under_replicated_compares_the_isr_and_replica_counts_as_0_10_does():
    """0.10's --under-replicated-partitions keeps a partition whose ISR is shorter than its
    replica list; an ISR as long, still holding a broker the assignment no longer names
    (a reassignment's new list written before the ISR shrank), is not counted (TL5-01)."""
    from kreplica.describe import PartitionDescription, TopicDescription, format_describe

    d = TopicDescription("q", (PartitionDescription(0, 1002, (1002, 1003), (1002, 1001), 3),
                               PartitionDescription(1, 1002, (1002, 1003), (1002,), 3)), {})
    assert format_describe(d, under_replicated=True) == (
        "\tTopic: q\tPartition: 1\tLeader: 1002\tReplicas: 1002,1003\tIsr: 1002\n")


def test_the_two_describe_filters_together_are_refused_as_kafka_topics_refuses_them(filter_store, capsys):
    """kafka-topics.sh's checkArgs (0.10) names each filter among the other's invalid
    options ("Option "[under-replicated-partitions]" can't be used with option
    "[unavailable-partitions]""), though its describeTopic would print a partition passing
    either; the command took both (157th review, found checking TL8-01's citation)."""
    with pytest.raises(SystemExit, match="--under-replicated-partitions can't be used with --unavailable-partitions"):
        main(["topics", "--zookeeper", "memory:1", "--describe", "--under-replicated-partitions",
              "--unavailable-partitions"])
    assert capsys.readouterr().out == ""


def test_format_describe_with_both_filters_prints_a_partition_passing_either():
    """The library's format_describe still takes both filters, as 0.10's describeTopic
    reads them: q-0 only under-replicated, q-1 only unavailable, q-2 neither (D2-09)."""
    from kreplica.describe import PartitionDescription, TopicDescription, format_describe

    d = TopicDescription("q", (PartitionDescription(0, 1001, (1001, 1002), (1001,), 0),
                               PartitionDescription(1, 1003, (1003,), (1003,), 0),
                               PartitionDescription(2, 1002, (1002,), (1002,), 0)), {})
    assert format_describe(d, True, frozenset({1001, 1002})) == Q0 + "\n" + Q1 + "\n"


def test_a_refused_create_says_nothing_was_created(memory_client, capsys):
    """"Created topic" is printed once the topic is written, as kafka-topics.sh prints it
    after AdminUtils returns: a create refused (foo exists) prints only its Error line (TL5-03)."""
    assert main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "foo",
                 "--partitions", "1", "--replication-factor", "1"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("Error: TOPIC_ALREADY_EXISTS: ")


@pytest.mark.parametrize("action, lines", [
    (["--list"], ["bar - marked for deletion", "bar2", "foo"]),  # kafka-topics.sh sorts getAllTopics (TL6-02)
    (["--describe"], ["Topic:bar", "Topic:bar2", "Topic:foo"]),
    (["--alter", "--config", "retention.ms=1000"],
     [f'Updated config for topic "{t}": retention.ms=1000' for t in ("bar", "bar2", "foo")]),
])
def test_a_pattern_takes_its_topics_in_name_order_whatever_order_the_store_lists_them(memory_client, action,
                                                                                      lines, capsys):
    """ZooKeeper lists a node's children in no particular order (the MemoryStore sorts
    them): --list, --describe and --alter with a --topic pattern go by name all the same
    (TL5-04, TL6-02)."""
    listed = memory_client.get_all_topics()
    memory_client.get_all_topics = lambda watch=None: sorted(listed, reverse=True)
    assert main(["topics", "--zookeeper", "memory:1", *action, "--topic", "bar.*|foo"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in out if not line.startswith("\t")] == lines


def test_create_places_replicas_with_an_unseeded_generator(seed003_store, monkeypatch):
    """kafka-topics.sh --create places replicas from an unseeded java.util.Random (a random
    first broker and shift): not from a generator of a fixed seed, which would place every
    topic created by count alike (TL5-05)."""
    import random
    import types

    from kreplica.tools import topics

    seeds = []

    def generator(*seed):
        seeds.append(seed)
        return random.Random(*seed)

    monkeypatch.setattr(topics, "random", types.SimpleNamespace(Random=generator))
    assert main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "new",
                 "--partitions", "3", "--replication-factor", "2"]) == 0
    assert seeds == [()] and len(seed003_store().get_topic_assignment("new")) == 3


def test_alter_prints_every_override_in_force_not_only_the_ones_it_changed(memory_client, capsys):
    # The line gives the topic's configs after the change (TL5-06).
    memory_client.set_topic_config("foo", {"segment.bytes": "1024"})
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo",
                 "--config", "retention.ms=1000"]) == 0
    assert capsys.readouterr().out == 'Updated config for topic "foo": retention.ms=1000,segment.bytes=1024\n'


def test_a_reassignment_file_that_is_not_utf8_is_named_as_not_json(tmp_path, capsys):
    # JSON is UTF-8 text: a file that is not is refused as the other bad files are, naming
    # the file, not with the codec's bare message.
    plan = tmp_path / "plan.json"
    plan.write_bytes(b'\xff{"version":1,"partitions":[]}')
    assert main(["reassign", "--zookeeper", "127.0.0.1:1", "--reassignment-json-file", str(plan)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: {plan}: not JSON: ") and "can't decode byte 0xff" in err and len(err.splitlines()) == 1


# The hundred-and-nineteenth review (docs/engine-audit.md, TL6-..): the sixth pass.
def test_a_malformed_partition_state_is_an_error_line_not_a_traceback(memory_client, capsys):
    """A partition state another tool wrote with a broker id where the ISR list should be:
    decoding it is a TypeError, which with_client turns into an ``Error:`` line and exit
    status 1 like every other bad input it names (TL6-06)."""
    from kreplica.meta import layout

    memory_client.session.create(layout.partition_state_path("foo", 0),
                                 b'{"controller_epoch":1,"leader":1001,"version":1,"leader_epoch":0,"isr":1001}',
                                 makepath=True)
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "foo"]) == 1
    assert capsys.readouterr() == ("", "Error: 'int' object is not iterable\n")


@pytest.mark.parametrize("node", [b'{"version":1,"partitions":{"0":1001}}', b'{"version":1,"partitions":[[1001]]}',
                                  b'{"version":1,"partitions":{"0":["1001"]}}', b'[1001]'])
def test_a_topic_node_of_another_shape_is_named_and_shown(memory_client, capsys, node):
    """A topic node with a broker id, or a list, where the partition map or a replica list
    should be: an ``Error:`` line naming the node and showing it, not Python's complaint
    about an int (or an AttributeError traceback, for the list)."""
    from kreplica.meta import layout

    memory_client.session.set(layout.topic_path("foo"), node)
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "foo"]) == 1
    expected = 'Error: /brokers/topics/foo: expected {"partitions": {"<id>": [<broker>, ...]}}, got '
    assert capsys.readouterr() == ("", expected + node.decode() + "\n")


def test_replicas_naming_a_broker_twice_are_refused_not_deduplicated(seed003_store, capsys):
    """``--replicas 1001,1001`` names one broker twice: refused as kafka-reassign-partitions
    refuses a duplicate replica, not quietly shrunk to a single replica (TL6-10)."""
    assert main(["reassign", "--zookeeper", "memory:1", "--topic", "bar", "--partition", "1",
                 "--replicas", "1001,1001"]) == 1
    assert capsys.readouterr() == ("", "Error: INVALID_REPLICA_ASSIGNMENT: bar-1: duplicate replicas in "
                                       "[1001, 1001]\n")
    assert seed003_store().get_partition_reassignment() == {}


# The hundred-and-fifty-seventh review (docs/engine-audit.md, TL8-..): the eighth pass.
def test_a_reassignment_file_may_move_the_same_partition_number_of_two_topics(seed003_store, tmp_path, capsys):
    """A duplicate is a topic-partition named twice, as Kafka's tool tells them
    (TopicAndPartition), not a partition number: bar-0 and wide-0 are two partitions (TL8-09)."""
    seed003_store().create_topic("wide", {0: [1001, 1002], 1: [1002, 1003]})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "wide", "partition": 0, "replicas": [1003, 1001]},
        {"topic": "bar", "partition": 0, "replicas": [1002, 1001, 1003]}]}))
    assert main(["reassign", "--zookeeper", "memory:1", "--reassignment-json-file", str(plan)]) == 0
    assert capsys.readouterr() == ("Successfully started reassignment of bar-0, wide-0\n", "")
    assert seed003_store().get_partition_reassignment() == {
        TopicPartition("bar", 0): [1002, 1001, 1003], TopicPartition("wide", 0): [1003, 1001]}


@pytest.mark.parametrize("action", ["start", "verify"])
def test_reassign_names_partitions_by_number_not_by_text(seed003_store, tmp_path, action, capsys):
    """Partition 10 comes after partition 2, in what a started reassignment names and in
    what --verify shows, as the TopicPartition order (topic, then partition number) gives
    it; as text, "wide-10" would come first (TL8-16, TL8-15)."""
    from kreplica.meta import layout

    if action == "start":
        seed003_store().create_topic("wide", {p: [1001, 1002, 1003] for p in range(11)})
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "wide", "partition": p, "replicas": [1003, 1002, 1001]} for p in (10, 2)]}))
        assert main(["reassign", "--zookeeper", "memory:1", "--reassignment-json-file", str(plan)]) == 0
        assert capsys.readouterr().out == "Successfully started reassignment of wide-2, wide-10\n"
    else:
        node = {"version": 1, "partitions": [{"topic": "wide", "partition": p, "replicas": [1001]} for p in (10, 2)]}
        seed003_store().session.create(layout.REASSIGN_PARTITIONS, json.dumps(node).encode(), makepath=True)
        assert main(["reassign", "--zookeeper", "memory:1", "--verify"]) == 0
        assert capsys.readouterr().out == "Reassignment in progress: wide-2 -> [1001], wide-10 -> [1001]\n"


def test_list_sorts_names_as_java_sorts_strings_capitals_first(memory_client, capsys):
    """kafka-topics.sh sorts `getAllTopics` as Scala sorts Strings, by UTF-16 code unit:
    "Zed" before "bar", not an alphabet that ignores case (TL8-17)."""
    memory_client.create_topic("Zed", {0: [1001]})
    assert main(["topics", "--zookeeper", "memory:1", "--list"]) == 0
    assert capsys.readouterr().out.splitlines() == ["Zed", "bar - marked for deletion", "bar2", "foo"]


# The hundred-and-seventy-sixth review (docs/engine-audit.md, TL9-..).
@pytest.mark.parametrize("item", ["retention.ms=1000=", "retention.ms = 1000 =  ", "\tretention.ms\x00=\x011000\n",
                                  "retention.ms=1000== ="],  # every trailing empty piece (TL9-01)
                         ids=["trailing-equals", "trailing-equals-and-blanks", "java-blanks", "trailing-equals-3"])
def test_a_config_item_is_split_and_trimmed_as_kafka_topics_reads_it(memory_client, item, capsys):
    """kafka-topics.sh splits a --config item with Java's split at each "=" and its blanks,
    which drops trailing empty pieces (so "k=v=" is k=v), and trims the key and the value
    with Java's trim, which takes NUL and SOH too.  The line after the change shows the
    overrides as stored."""
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo", "--config", item]) == 0
    assert capsys.readouterr().out == 'Updated config for topic "foo": retention.ms=1000\n'


@pytest.mark.parametrize("item, message", [
    ("retention.ms=1=2", "--config 'retention.ms=1=2': expected KEY=VALUE, a key and a value on either "
                         "side of one '='"),
    ("retention.ms==1000", "--config 'retention.ms==1000': expected KEY=VALUE, a key and a value on either "
                           "side of one '='"),
    ("retention.ms= ", "--config 'retention.ms= ': expected KEY=VALUE, a key and a value on either side of one '='"),
    ("=1000", "INVALID_CONFIG: unknown config key ''"),
    # Java's trim keeps a no-break space, and the number is then no number.
    ("retention.ms=\u00a01000", "INVALID_CONFIG: retention.ms='\\xa01000': expected an integer"),
], ids=["two-equals", "empty-middle", "no-value", "no-key", "no-break-space"])
def test_a_config_item_kafka_topics_refuses_is_an_error_line(memory_client, item, message, capsys):
    for action in (["--alter", "--topic", "foo"],
                   ["--create", "--topic", "new", "--partitions", "1", "--replication-factor", "1"]):
        assert main(["topics", "--zookeeper", "memory:1", *action, "--config", item]) == 1
        assert capsys.readouterr() == ("", f"Error: {message}\n")


def test_a_deleted_config_key_is_trimmed_as_kafka_topics_trims_it(memory_client, capsys):
    """kafka-topics.sh 0.10 trims each --delete-config name with Java's trim (a NUL and a
    newline too) before looking it up; kreplica refused it as an unknown key."""
    memory_client.set_topic_config("foo", {"retention.ms": "1000", "segment.bytes": "1024"})
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo",
                 "--delete-config", "\x00 retention.ms\n"]) == 0
    assert capsys.readouterr().out == 'Updated config for topic "foo": segment.bytes=1024\n'


def test_a_state_node_with_an_empty_isr_prints_its_stored_leader_not_none(memory_client, capsys):
    """0.10 prints "none" only for a partition without a state node: a node holding leader -1
    and an empty ISR prints its -1 and the empty ISR, and the node counts as a state
    (TL9-10)."""
    from kreplica.protocol import LeaderAndIsr

    memory_client.create_partition_states({TopicPartition("foo", 0): LeaderAndIsr(-1, 3, ())})
    assert main(["topics", "--zookeeper", "memory:1", "--describe", "--topic", "foo"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["\tTopic: foo\tPartition: 0\tLeader: -1\tReplicas: 1001\tIsr: "]


@pytest.mark.parametrize("counts, error", [(["--partitions", "0", "--replication-factor", "1"], "INVALID_PARTITIONS"),
                                           (["--partitions", "1", "--replication-factor", "0"],
                                            "INVALID_REPLICATION_FACTOR")],
                         ids=["partitions", "replication-factor"])
def test_a_count_of_0_is_the_clusters_error_line_as_kafka_topics_says_it(memory_client, counts, error, capsys):
    """kafka-topics.sh takes any Integer for the two counts and its placement refuses 0 with
    an error line and exit status 1, not a usage error (TL9-23)."""
    try:
        status = main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "new", *counts])
    except SystemExit as e:  # a usage error: exit status 2
        status = e.code
    out, err = capsys.readouterr()
    assert status == 1
    assert out == "" and err.startswith(f"Error: {error}: ")


# Adding partitions (kafka-topics.sh --alter --partitions).
@pytest.mark.parametrize("assignment", [[], ["--replica-assignment", ""]], ids=["none", "empty"])
def test_alter_partitions_grows_the_topic_and_says_where_the_new_ones_went(seed003_store, assignment, capsys):
    """Placed as AdminUtils.addPartitions (0.10) places them, which takes an empty
    --replica-assignment (kafka-topics.sh hands on the option's text) for none."""
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "bar", "--partitions", "5",
                 *assignment]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("WARNING: a key's partition is its hash modulo the partition count")
    # Partition 0's first replica is 1001 (index 0): p3 starts a round, shift 0 -> 1.
    assert out[1:] == ['Added partitions to topic "bar": now 5 (3:1001:1003:1002,4:1002:1001:1003).']
    assert seed003_store().get_topic_assignment("bar") == {
        0: [1001, 1003, 1002], 1: [1002, 1001, 1003], 2: [1003, 1002, 1001],
        3: [1001, 1003, 1002], 4: [1002, 1001, 1003]}


def test_alter_partitions_with_an_assignment_places_the_added_ones_in_its_order(seed003_store, capsys):
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "bar", "--partitions", "5",
                 "--replica-assignment", "1003:1001:1002, 1002:1003:1001", "--config", "retention.ms=1000"]) == 0
    assert capsys.readouterr().out.splitlines()[::2] == [
        'Updated config for topic "bar": retention.ms=1000',
        'Added partitions to topic "bar": now 5 (3:1003:1001:1002,4:1002:1003:1001).']
    client = seed003_store()
    assert {p: r for p, r in client.get_topic_assignment("bar").items() if p >= 3} == {
        3: [1003, 1001, 1002], 4: [1002, 1003, 1001]}
    assert client.get_topic_config("bar") == {"retention.ms": "1000"}


def _store_of(monkeypatch, brokers, assignments):
    """`kreplica topics` on a MemoryStore holding these live brokers and topic assignments
    (no partition states); returns a function opening a fresh client to read what it wrote."""
    from kreplica.meta import KafkaZkClient, MemoryStore
    from kreplica.runtime import SimScheduler
    from kreplica.tools import topics

    scheduler = SimScheduler(0)
    store = MemoryStore(scheduler)
    client = KafkaZkClient(store.session("test"), scheduler)
    for b in brokers:
        client.register_broker(b)
    for topic, assignment in assignments.items():
        client.create_topic(topic, assignment)
    monkeypatch.setattr(topics, "open_client", lambda connect: (client, store))
    return lambda: KafkaZkClient(store.session("check"), scheduler)


def test_alter_partitions_grows_each_topic_the_pattern_matches_from_its_own_count(monkeypatch, capsys):
    """kafka-topics.sh's alterTopic adds partitions to every topic --topic matches, each
    numbered on from its own last partition (TL10-04: the pattern itself taken as a name)."""
    fresh = _store_of(monkeypatch, [1001], {"foo": {0: [1001]}, "bar2": {0: [1001], 1: [1001]}, "bar": {0: [1001]}})
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo,bar2", "--partitions", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[1::2] == [
        'Added partitions to topic "bar2": now 3 (2:1001).',
        'Added partitions to topic "foo": now 3 (1:1001,2:1001).']
    check = fresh()
    assert check.get_topic_assignment("foo") == {0: [1001], 1: [1001], 2: [1001]}
    assert check.get_topic_assignment("bar2") == {0: [1001], 1: [1001], 2: [1001]}
    assert check.get_topic_assignment("bar") == {0: [1001]}


@pytest.mark.parametrize("topic, existing, count, added", [
    # Partition 0 led from 1002, index 1 of the live brokers: start 1 and replica shift 1
    # (a shift left at 0 would put 1001, not 1002, after 1003 in partition 1).
    ("t", {0: [1002, 1003]}, 4, {1: [1003, 1002], 2: [1001, 1003], 3: [1002, 1003]}),
    # Partition 0's first replica above every live broker: indexWhere finds none, and
    # max(0, -1) starts at the first one.
    ("u", {0: [1004, 1001]}, 3, {1: [1002, 1003], 2: [1003, 1001]}),
    # Partition 0's replica count is the factor, not the last partition's (one reassigned
    # to a single replica: TL10-23).
    ("v", {0: [1001, 1002], 1: [1003]}, 4, {2: [1003, 1001], 3: [1001, 1003]}),
    # Past partition 9 the added ones are still listed by number, 10 after 9 (TL12-06).
    ("w", {p: [1001] for p in range(9)}, 12, {9: [1001], 10: [1002], 11: [1003]}),
], ids=["start-at-1002", "start-past-the-last", "factor-of-partition-0", "past-partition-9"])
def test_alter_partitions_places_them_from_partition_0s_replicas_as_kafka_0_10(monkeypatch, topic, existing,
                                                                                 count, added, capsys):
    """AdminUtils.addPartitions (0.10) places the added partitions with partition 0's
    replication factor, from the index of the first live broker at or above partition
    0's first replica, which is also the replica shift, numbering on from the count."""
    fresh = _store_of(monkeypatch, [1001, 1002, 1003], {topic: existing})
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", topic, "--partitions", str(count)]) == 0
    shown = ",".join(f"{p}:{':'.join(map(str, r))}" for p, r in added.items())
    assert capsys.readouterr().out.splitlines()[1] == f'Added partitions to topic "{topic}": now {count} ({shown}).'
    assert fresh().get_topic_assignment(topic) == {**existing, **added}


@pytest.mark.parametrize("partition", [0, 1])
def test_alter_partitions_waits_for_a_reassignment_of_any_partition_of_the_topic(seed003_store, partition, capsys):
    """The controller rewrites a topic's assignment from what it knows as a reassignment
    completes, so a partition added meanwhile would be written away: refused whichever
    partition is moving (TL10-22: only partition 0's move refused)."""
    seed003_store().create_partition_reassignment({TopicPartition("bar", partition): [1003, 1001, 1002]})
    assert main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "bar", "--partitions", "5"]) == 1
    assert "a reassignment of 'bar' is in progress" in capsys.readouterr().err
    assert sorted(seed003_store().get_topic_assignment("bar")) == [0, 1, 2]


@pytest.mark.parametrize("argv, message", [
    (["--partitions", "3"], "has 3 partitions: the count can only be increased, not set to 3"),
    (["--partitions", "2"], "the count can only be increased, not set to 2"),
    # 0 is a count given, refused by the cluster as kafka-topics.sh's addPartitions refuses
    # it, not taken for no --partitions at all (TL10-07).
    (["--partitions", "0"], "^Error: INVALID_PARTITIONS: .*the count can only be increased, not set to 0"),
    (["--partitions", "4", "--replica-assignment", "1001:1002"], "replication factor is 3"),
    (["--partitions", "5", "--replica-assignment", "1001:1002:1003"], r"needs an assignment of partitions \[3, 4\]"),
])
def test_alter_partitions_refuses_a_count_or_an_assignment_that_does_not_fit(seed003_store, argv, message, capsys):
    try:
        status = main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "bar", *argv])
    except SystemExit as e:  # a usage message instead of the cluster's refusal
        status = e.code
    assert status == 1
    out, err = capsys.readouterr()
    assert re.search(message, err)
    # kafka-topics.sh's alterTopic warns before it tries to add them, so a refusal comes
    # after the warning too (TL12-10).
    assert len(out.splitlines()) == 1 and out.startswith("WARNING: a key's partition is its hash modulo")
    assert sorted(seed003_store().get_topic_assignment("bar")) == [0, 1, 2]


# Each action with the words it needs, and each option with a value and the actions it goes with.
_ACTIONS = {"list": ["--list"], "describe": ["--describe"], "delete": ["--delete", "--topic", "foo"],
            "alter": ["--alter", "--topic", "foo"],
            "create": ["--create", "--topic", "new", "--partitions", "1", "--replication-factor", "1"]}
_OPTIONS = {"config": (["--config", "retention.ms=1"], {"create", "alter"}),
            "delete-config": (["--delete-config", "retention.ms"], {"alter"}),
            # A count of 0 too: kafka-topics.sh refuses an option it was given, whatever its value (TL10-03).
            "partitions": (["--partitions", "0"], {"create", "alter"}),
            "factor": (["--replication-factor", "0"], {"create"}),
            "assignment": (["--replica-assignment", "1001"], {"create", "alter"}),
            # Given, though empty: `has` asks whether it is there, not what it says (TL11-06).
            "empty-assignment": (["--replica-assignment", ""], {"create", "alter"})}


@pytest.mark.parametrize("action, option", [
    (_ACTIONS[a], _OPTIONS[o][0]) for o in _OPTIONS for a in _ACTIONS
    if a not in _OPTIONS[o][1] and not (o in ("partitions", "factor") and a == "create")],
    ids=[f"{o}-{a}" for o in _OPTIONS for a in _ACTIONS
         if a not in _OPTIONS[o][1] and not (o in ("partitions", "factor") and a == "create")])
def test_an_option_beside_an_action_it_does_not_go_with_is_refused_not_ignored(memory_client, action, option,
                                                                                 capsys):
    """As kafka-topics.sh's checkArgs: --config and --partitions go with --create and --alter,
    --replica-assignment too, --replication-factor with --create, --delete-config with --alter;
    every other pairing is refused, not run with the option ignored (TL10-01, -02, -05)."""
    with pytest.raises(SystemExit, match=f"{option[0]} can't be used with {action[0]}"):
        main(["topics", "--zookeeper", "memory:1", *action, *option])
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("text", ["1001", ""], ids=["assignment", "empty"])
def test_a_replica_assignment_with_alter_needs_partitions(memory_client, text, capsys):
    # An empty one too, beside a config change it would leave unread (TL11-04): only
    # --partitions reads it, and there the empty text places the partitions as none does.
    with pytest.raises(SystemExit, match="--replica-assignment with --alter places added partitions: give --partitions"):
        main(["topics", "--zookeeper", "memory:1", "--alter", "--topic", "foo", "--replica-assignment", text,
              "--config", "retention.ms=1000"])
    assert capsys.readouterr().out == ""


@zookeeper
def test_alter_partitions_brings_the_new_ones_online_on_zookeeper(zk_cluster, capsys):
    c = zk_cluster
    c.create_topic("bar", partitions=1, replication_factor=2)
    assert main(["topics", "--zookeeper", c.connect, "--alter", "--topic", "bar", "--partitions", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith('Added partitions to topic "bar": now 3 (1:')
    assert c.run_until(lambda: c._all_have_leaders("bar"), 20_000)
    assert [p.partition for p in c.describe("bar").partitions] == [0, 1, 2]
    assert c.produce("bar", 2, [b"x"], acks="all") == 0


# The two-hundred-and-ninth review (docs/engine-audit.md, TL11-..).
@pytest.mark.parametrize("action", [["--create", "--topic", "new", "--replica-assignment", "1001:1002"],
                                    ["--alter", "--topic", "bar"]], ids=["create", "alter"])
def test_a_config_key_given_twice_keeps_its_last_value_as_kafka_topics_keeps_it(seed003_store, action, capsys):
    """kafka-topics.sh 0.10 sets the --config items into one Properties in the order
    given, so a key given twice keeps the value given last (TL11-03, TL11-14)."""
    assert main(["topics", "--zookeeper", "memory:1", *action,
                 "--config", "retention.ms=1000", "--config", "retention.ms=2000"]) == 0
    assert seed003_store().get_topic_config(action[2]) == {"retention.ms": "2000"}


@pytest.mark.parametrize("option", ["--partitions", "--replication-factor"])
def test_a_count_past_a_java_int_is_a_usage_error_as_kafka_topics_cannot_read_it(memory_client, option, capsys):
    """kafka-topics.sh declares both counts java.lang.Integer, so joptsimple cannot read
    3000000000 and the command fails; kreplica took it and placed 3000000000 partitions
    one by one, never ending.  The ends of the range are still read (the command then
    refuses the option beside --describe, which only a read value reaches)."""
    for text in ("2147483648", "-2147483649", "3000000000"):
        with pytest.raises(SystemExit) as e:
            main(["topics", "--zookeeper", "memory:1", "--create", "--topic", "new", option, text])
        assert e.value.code == 2
        assert f"argument {option}: '{text}' is not a Java int" in capsys.readouterr().err
    for text in ("2147483647", "-2147483648"):
        with pytest.raises(SystemExit, match=f"{option} can't be used with --describe"):
            main(["topics", "--zookeeper", "memory:1", "--describe", option, text])
