from decimal import Decimal
from fractions import Fraction

import pytest

from kreplica import config, errors


def test_defaults_are_kafkas():
    c = config.validate({})
    assert c["segment.bytes"] == 1 << 30
    assert c["index.interval.bytes"] == 4096
    assert c["min.insync.replicas"] == 1
    assert c["unclean.leader.election.enable"] is False
    assert c["replica.truncation.strategy"] == "high-watermark"
    assert c["replica.lag.time.max.ms"] == 30000
    assert c["acks"] == "all" and c["request.timeout.ms"] == 30000


def test_strings_are_coerced():
    c = config.validate({"segment.bytes": "2048", "unclean.leader.election.enable": "true", "acks": "-1"})
    assert c["segment.bytes"] == 2048
    assert c["unclean.leader.election.enable"] is True
    assert c["acks"] == "all"


@pytest.mark.parametrize("text, value", [("true", True), ("TRUE", True), ("False", False), (True, True), (False, False),
                                         ("fal\u017fe", False), ("FAL\u017fE", False)])
def test_booleans_are_true_or_false_in_any_case(text, value):
    # Kafka reads booleans case-insensitively; a hand-written "TRUE" is not a bad value.
    # Its case is Java's String.equalsIgnoreCase's, char by char: LATIN SMALL LETTER LONG
    # S upper-cases to S, so "fal\u017fe" is false there (jshell; the 173rd review).
    assert config.validate({"unclean.leader.election.enable": text})["unclean.leader.election.enable"] is value


@pytest.mark.parametrize(
    "bad",
    [
        {"segment.byte": 1},
        {"segment.bytes": 1},
        {"segment.bytes": "lots"},
        {"segment.bytes": 8 << 30},  # above Kafka's Int: 4-byte index positions could not address it
        {"segment.index.bytes": 1 << 31},
        {"segment.index.bytes": 23},  # no time-index slot left for appends beside sealing's
        {"max.message.bytes": 1 << 31},
        {"min.insync.replicas": 0},
        {"acks": "2"},
        {"acks": 2},  # a TOML integer is checked against the choices as its text is
        {"unclean.leader.election.enable": 1},  # not a boolean, though Python would take it as one
        {"segment.ms": True},  # nor is true an integer
        {"segment.ms": 1.5},  # not silently 1
        {"segment.ms": float("inf")},  # TOML's inf: once an OverflowError traceback
        {"segment.ms": "1_000"},  # Python's int() reads this as 1000; Kafka's parser refuses it
        {"segment.ms": "1e3"},
        {"segment.ms": None},  # a TypeError from int() once, not naming the key
        {"segment.ms": [1000]},
        {"unclean.leader.election.enable": "maybe"},
        {"replica.truncation.strategy": "magic"},
        {"segment.ms": Decimal("1.5")},  # an embedder's exact numbers: not silently 1 either
        {"segment.ms": Fraction(3, 2)},
        {"segment.ms": float("nan")},  # TOML's nan: int() raises ValueError for it, not OverflowError
    ],
)
def test_bad_keys_and_values_name_the_key(bad):
    with pytest.raises(errors.InvalidConfig) as e:
        config.validate(bad)
    assert next(iter(bad)) in str(e.value)
    assert e.value.code == 40


@pytest.mark.parametrize("given", [[], (), "", 0])
def test_a_config_that_is_not_a_dict_is_refused_even_when_empty(given):
    """None is the one stand-in for "no config"; an empty list is not an empty dict."""
    with pytest.raises(errors.InvalidConfig, match="config must be a dict"):
        config.validate(given)
    assert config.validate(None) == config.validate({})


def test_a_config_may_be_any_mapping_not_only_a_dict():
    """The embedding API takes a mapping (a read-only view, a ChainMap of defaults under
    overrides): what it refuses is a value that is not one, as a list of pairs."""
    from collections import ChainMap
    from types import MappingProxyType

    assert config.validate(MappingProxyType({"acks": "1"}))["acks"] == "1"
    merged = ChainMap({"min.insync.replicas": "2"}, {"min.insync.replicas": 1, "flush.ms": 10})
    typed = config.validate(merged, allowed=config.LOG_KEYS)
    assert (typed["min.insync.replicas"], typed["flush.ms"]) == (2, 10)


def test_integer_text_is_read_as_kafkas_parser_reads_it():
    # Blanks around the digits are trimmed and a sign is taken, as in Kafka's ConfigDef.
    assert config.validate({"segment.ms": " 1000 ", "flush.ms": "+5"})["segment.ms"] == 1000
    assert config.validate({"flush.ms": "+5"})["flush.ms"] == 5
    # Java's Integer.parseInt reads any Unicode decimal digit (Character.digit), so
    # ARABIC-INDIC DIGIT FIVE then three zeros is 5000 there too.
    assert config.validate({"segment.ms": "\u0665000"})["segment.ms"] == 5000
    # But only digits of the Basic Multilingual Plane: parseInt reads UTF-16 units, and
    # OSMANYA DIGIT ONE (U+104A1) is two surrogates there, no digit (154th review; jshell).
    with pytest.raises(errors.InvalidConfig, match="expected an integer"):
        config.validate({"segment.ms": "\U000104A1000"})


@pytest.mark.parametrize("key, text, value", [
    ("unclean.leader.election.enable", " true ", True), ("delete.topic.enable", "\tFALSE\n", False),
    ("message.timestamp.type", " LogAppendTime ", "LogAppendTime"),
    ("replica.truncation.strategy", "leader-epoch\r\n", "leader-epoch"), ("acks", " -1", "all"),
    ("segment.ms", "\x0b1000\x0c", 1000),
    # String.trim removes every char up to U+0020, controls Python neither strips nor int()s.
    ("segment.ms", "\x00\x011000\x1f", 1000), ("unclean.leader.election.enable", "\x00true\x07", True),
])
def test_text_of_every_kind_is_trimmed_as_kafkas_configdef_trims_it(key, text, value):
    """ConfigDef trims a text value (Java's String.trim) before reading it as a boolean, a
    string or a number: " true" from a properties file is true, not a bad value."""
    got = config.validate({key: text})[key]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("key, text", [
    ("unclean.leader.election.enable", "\u00a0true"), ("message.timestamp.type", "CreateTime\u3000"),
    ("segment.ms", "\u20031000"),
])
def test_only_what_javas_trim_removes_is_trimmed(key, text):
    """String.trim removes U+0000..U+0020 and nothing else: a no-break or ideographic space
    is part of the value, which is then refused."""
    with pytest.raises(errors.InvalidConfig, match=key):
        config.validate({key: text})


def test_text_of_a_str_subclass_is_text():
    """An embedder's text may be a str subclass (a StrEnum member, NumPy's str_): it is
    trimmed and read as any text is, not refused as a number or boolean of the wrong type,
    and what comes back is a plain str."""
    class Text(str):
        pass

    out = config.validate({"segment.ms": Text(" 1000 "), "unclean.leader.election.enable": Text("TRUE"),
                           "message.timestamp.type": Text(" LogAppendTime"), "acks": Text("-1")})
    assert out["segment.ms"] == 1000 and type(out["segment.ms"]) is int
    assert out["unclean.leader.election.enable"] is True
    assert out["message.timestamp.type"] == "LogAppendTime" and type(out["message.timestamp.type"]) is str
    assert out["acks"] == "all"


def test_the_largest_segment_kafka_allows_is_accepted():
    assert config.validate({"segment.bytes": (1 << 31) - 1})["segment.bytes"] == (1 << 31) - 1


def test_error_codes_round_trip():
    assert errors.error_for_code(1) is errors.OffsetOutOfRange
    assert errors.NotEnoughReplicasAfterAppend.code == 20
    assert errors.error_for_name("FENCED_LEADER_EPOCH").code == 74
    with pytest.raises(errors.NotLeaderOrFollower):
        errors.raise_for_code(6, "x")
    errors.raise_for_code(0)


# Kafka's numbers and names (org.apache.kafka.common.protocol.Errors), and whether Kafka's
# exception for it is retriable.  Brokers, the simulator and the TCP frames only ever
# compare a class's code with itself, so nothing else notices a wrong number.
KAFKA_ERRORS = [
    ("OffsetOutOfRange", 1, "OFFSET_OUT_OF_RANGE", False),
    ("CorruptMessage", 2, "CORRUPT_MESSAGE", True),
    ("UnknownTopicOrPartition", 3, "UNKNOWN_TOPIC_OR_PARTITION", True),
    ("LeaderNotAvailable", 5, "LEADER_NOT_AVAILABLE", True),
    ("NotLeaderOrFollower", 6, "NOT_LEADER_OR_FOLLOWER", True),
    ("RequestTimedOut", 7, "REQUEST_TIMED_OUT", True),
    ("BrokerNotAvailable", 8, "BROKER_NOT_AVAILABLE", False),
    ("ReplicaNotAvailable", 9, "REPLICA_NOT_AVAILABLE", True),
    ("RecordTooLarge", 10, "RECORD_TOO_LARGE", False),  # Kafka's MESSAGE_TOO_LARGE
    ("StaleControllerEpoch", 11, "STALE_CONTROLLER_EPOCH", False),
    ("NetworkException", 13, "NETWORK_EXCEPTION", True),
    ("InvalidTopic", 17, "INVALID_TOPIC_EXCEPTION", False),
    ("RecordListTooLarge", 18, "RECORD_LIST_TOO_LARGE", False),
    ("NotEnoughReplicas", 19, "NOT_ENOUGH_REPLICAS", True),
    ("NotEnoughReplicasAfterAppend", 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
    ("InvalidRequiredAcks", 21, "INVALID_REQUIRED_ACKS", False),
    ("InvalidTimestamp", 32, "INVALID_TIMESTAMP", False),
    ("TopicAlreadyExists", 36, "TOPIC_ALREADY_EXISTS", False),
    ("InvalidPartitions", 37, "INVALID_PARTITIONS", False),
    ("InvalidReplicationFactor", 38, "INVALID_REPLICATION_FACTOR", False),
    ("InvalidReplicaAssignment", 39, "INVALID_REPLICA_ASSIGNMENT", False),
    ("InvalidConfig", 40, "INVALID_CONFIG", False),
    ("NotController", 41, "NOT_CONTROLLER", True),
    ("InvalidRequest", 42, "INVALID_REQUEST", False),
    ("KafkaStorageError", 56, "KAFKA_STORAGE_ERROR", True),
    ("ReassignmentInProgress", 60, "REASSIGNMENT_IN_PROGRESS", False),
    ("TopicDeletionDisabled", 73, "TOPIC_DELETION_DISABLED", False),
    ("FencedLeaderEpoch", 74, "FENCED_LEADER_EPOCH", True),
    ("UnknownLeaderEpoch", 75, "UNKNOWN_LEADER_EPOCH", True),
    ("UnsupportedCompressionType", 76, "UNSUPPORTED_COMPRESSION_TYPE", False),
    ("StaleBrokerEpoch", 77, "STALE_BROKER_EPOCH", False),
    ("PreferredLeaderNotAvailable", 80, "PREFERRED_LEADER_NOT_AVAILABLE", True),
    ("EligibleLeadersNotAvailable", 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True),
    ("ElectionNotNeeded", 84, "ELECTION_NOT_NEEDED", None),  # see docs/engine-audit.md
    ("NoReassignmentInProgress", 85, "NO_REASSIGNMENT_IN_PROGRESS", False),
    ("InvalidRecord", 87, "INVALID_RECORD", False),
    ("InvalidUpdateVersion", 95, "INVALID_UPDATE_VERSION", False),
]


@pytest.mark.parametrize("class_name, code, name, retriable", KAFKA_ERRORS)
def test_every_error_has_kafkas_code_and_name(class_name, code, name, retriable):
    cls = getattr(errors, class_name)
    assert (cls.code, cls.name) == (code, name)
    assert errors.error_for_code(code) is cls and errors.error_for_name(name) is cls
    if retriable is not None:
        assert cls.retriable is retriable
    with pytest.raises(cls, match=f"^{name}: why$"):
        errors.raise_for_code(code, "why")


def test_unknown_and_negative_codes_raise_the_unknown_server_error():
    for code in (-1, 4, 1000):
        with pytest.raises(errors.KReplicaError) as raised:
            errors.raise_for_code(code)
        assert type(raised.value) is errors.KReplicaError and str(raised.value) == "UNKNOWN_SERVER_ERROR"
    assert errors.NoReplicaOnline.code == errors.LeaderNotAvailable.code


# Kafka's documented defaults (broker, topic and producer configs of Kafka 3.x) for every
# key kreplica shares with it; replica.truncation.strategy is kreplica's own.
KAFKA_DEFAULTS = {
    "segment.bytes": 1 << 30, "segment.ms": 604_800_000, "segment.index.bytes": 10_485_760,
    "index.interval.bytes": 4096, "retention.bytes": -1, "retention.ms": 604_800_000,
    "flush.messages": (1 << 63) - 1, "flush.ms": (1 << 63) - 1, "max.message.bytes": 1_048_588,
    "message.timestamp.type": "CreateTime", "min.insync.replicas": 1,
    "unclean.leader.election.enable": False, "replica.lag.time.max.ms": 30_000,
    "replica.fetch.max.bytes": 1_048_576, "replica.fetch.response.max.bytes": 10_485_760,
    "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1, "replica.fetch.backoff.ms": 1000,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "log.flush.scheduler.interval.ms": (1 << 63) - 1, "log.retention.check.interval.ms": 300_000,
    "log.flush.offset.checkpoint.interval.ms": 60_000,
    "log.flush.start.offset.checkpoint.interval.ms": 60_000, "request.timeout.ms": 30_000,
    "acks": "all", "auto.leader.rebalance.enable": True, "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300, "controlled.shutdown.max.retries": 3,
    "controlled.shutdown.retry.backoff.ms": 5000, "controller.socket.timeout.ms": 30_000,
    "delete.topic.enable": True, "zookeeper.session.timeout.ms": 18_000,
    "default.replication.factor": 1, "num.partitions": 1,
}


def test_every_default_is_kafkas():
    """All of them, not a sample: a default no test looks at (max.message.bytes 1048576,
    the imbalance percentage 20) changes every run that leaves the key out, silently."""
    assert config.validate({}) == {**KAFKA_DEFAULTS, "replica.truncation.strategy": "high-watermark"}


# The lowest value each bounded integer key takes (Kafka's validators where kreplica follows
# them: segment.bytes >= 14, one v0 record's overhead; -1 for "no limit" on retention).
LOWEST = [
    ("segment.bytes", 14), ("segment.ms", 1), ("segment.index.bytes", 24), ("index.interval.bytes", 0),
    ("retention.bytes", -1), ("retention.ms", -1), ("flush.messages", 1), ("flush.ms", 0),
    ("max.message.bytes", 0), ("min.insync.replicas", 1), ("replica.lag.time.max.ms", 1),
    ("replica.fetch.wait.max.ms", 0), ("replica.fetch.backoff.ms", 0), ("request.timeout.ms", 1),
    ("leader.imbalance.per.broker.percentage", 0), ("controlled.shutdown.max.retries", 0),
    ("controlled.shutdown.retry.backoff.ms", 0), ("default.replication.factor", 1), ("num.partitions", 1),
    ("replica.fetch.max.bytes", 1), ("replica.fetch.response.max.bytes", 1), ("replica.fetch.min.bytes", 1),
    ("replica.high.watermark.checkpoint.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1),
    ("log.retention.check.interval.ms", 1), ("log.flush.offset.checkpoint.interval.ms", 1),
    ("log.flush.start.offset.checkpoint.interval.ms", 1), ("leader.imbalance.check.interval.seconds", 1),
    ("controller.socket.timeout.ms", 1), ("zookeeper.session.timeout.ms", 1),
]


def test_every_integer_key_has_its_lowest_value_listed():
    """A key left out of LOWEST has a floor no test looks at: a period of 0 (a timer firing
    in a loop) accepted for leader.imbalance.check.interval.seconds went unseen."""
    assert {k for k, _ in LOWEST} == {k.name for k in config.SPEC.values() if k.kind == "int"}


# The keys Kafka declares as Int (ConfigDef.Type.INT); every other integer key is a Long.
INT_KEYS = [
    "segment.bytes", "segment.index.bytes", "max.message.bytes", "index.interval.bytes",
    "min.insync.replicas", "replica.fetch.max.bytes", "replica.fetch.response.max.bytes",
    "replica.fetch.wait.max.ms", "replica.fetch.min.bytes", "replica.fetch.backoff.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "request.timeout.ms", "leader.imbalance.per.broker.percentage", "controlled.shutdown.max.retries",
    "controller.socket.timeout.ms", "zookeeper.session.timeout.ms", "default.replication.factor",
    "num.partitions",
]
LONG_KEYS = sorted({k.name for k in config.SPEC.values() if k.kind == "int"} - set(INT_KEYS))


# Kafka's Int keys end at Integer.MAX_VALUE: that is taken, one above it refused.
@pytest.mark.parametrize("key", INT_KEYS)
def test_each_int_sized_keys_highest_value_is_taken_and_the_one_above_refused(key):
    assert config.validate({key: config.INT_MAX})[key] == config.INT_MAX
    with pytest.raises(errors.InvalidConfig, match=f"{key}={config.INT_MAX + 1}: out of range"):
        config.validate({key: config.INT_MAX + 1})


# Its Long keys end at Long.MAX_VALUE: segment.ms = 2**64 was taken, a value no Kafka reads.
@pytest.mark.parametrize("key", LONG_KEYS)
def test_each_long_keys_highest_value_is_taken_and_the_one_above_refused(key):
    assert config.validate({key: config.LONG_MAX})[key] == config.LONG_MAX
    assert config.validate({key: str(config.LONG_MAX)})[key] == config.LONG_MAX
    with pytest.raises(errors.InvalidConfig, match=f"{key}={config.LONG_MAX + 1}: out of range"):
        config.validate({key: config.LONG_MAX + 1})


@pytest.mark.parametrize("key, lowest", LOWEST)
def test_each_integer_keys_lowest_value_is_taken_and_the_one_below_refused(key, lowest):
    assert config.validate({key: lowest})[key] == lowest
    assert config.validate({key: str(lowest)})[key] == lowest
    with pytest.raises(errors.InvalidConfig, match=f"{key}={lowest - 1}: out of range"):
        config.validate({key: lowest - 1})


@pytest.mark.parametrize("text", ["yes", "no", "1", "0", "on", "off", "t", "",
                                  "\u017false", "tru\u017f", "fal\u00dfe", "fal\u017f", "fal\u017fe\u017f"])
def test_a_boolean_is_the_word_true_or_false_and_nothing_else(text):
    # Kafka's ConfigDef takes "true" and "false" in any case and refuses the rest.
    with pytest.raises(errors.InvalidConfig, match="expected true or false"):
        config.validate({"unclean.leader.election.enable": text})


@pytest.mark.parametrize("text", ["createtime", "CREATETIME", "logappendtime"])
def test_a_choice_is_matched_exactly_as_kafka_matches_it(text):
    # Kafka's ValidString is case-sensitive; LogConfig compares with "LogAppendTime" as written.
    with pytest.raises(errors.InvalidConfig, match="expected one of CreateTime, LogAppendTime"):
        config.validate({"message.timestamp.type": text})


@pytest.mark.parametrize("given, acks", [(-1, "all"), ("-1", "all"), ("all", "all"), (0, "0"), (1, "1")])
def test_acks_from_toml_or_text_is_one_of_0_1_all(given, acks):
    """`acks = -1` in a scenario's [config] is a TOML integer: it is "all" as "-1" is."""
    assert config.validate({"acks": given})["acks"] == acks


@pytest.mark.parametrize("given, acks", [("all", -1), ("-1", -1), (-1, -1), ("1", 1), (1, 1), ("0", 0), (0, 0)])
def test_parse_acks_gives_kafkas_numbers(given, acks):
    assert config.parse_acks(given) == acks


def test_a_topics_stored_overrides_take_only_log_keys_over_the_brokers_config(tmp_path):
    """configs_with reads what the controller's store holds for a topic; a broker-only key
    there (written by another tool, or an older kreplica) must not change the broker's
    replication settings for that topic's replicas, as a topic-level key would."""
    from kreplica.replica.replica_manager import ReplicaManager
    from kreplica.runtime import SimScheduler

    rm = ReplicaManager(1, tmp_path, SimScheduler(0), {"retention.ms": 60_000}, send=lambda *a: None,
                        alter_isr=lambda *a: None)
    whole, log = rm.configs_with([("min.insync.replicas", "2")])
    assert whole["min.insync.replicas"] == 2 and log.retention_ms == 60_000
    assert whole["replica.lag.time.max.ms"] == rm.config["replica.lag.time.max.ms"]
    with pytest.raises(errors.InvalidConfig, match="unknown config key 'replica.lag.time.max.ms'"):
        rm.configs_with([("replica.lag.time.max.ms", "1")])


def test_kreplicas_own_errors_refine_kafkas_and_only_kafkas_retriable_ones_are_retriable():
    """An embedder catches ``InvalidRequest`` for a closed cluster (code 42) and reads
    ``retriable`` to decide whether to try again: an unknown server error, a refused
    controller state change and a metadata-store failure are not worth retrying."""
    assert issubclass(errors.ClusterClosed, errors.InvalidRequest) and errors.ClusterClosed.code == 42
    assert issubclass(errors.NoReplicaOnline, errors.LeaderNotAvailable) and errors.NoReplicaOnline.retriable
    # A refinement keeps the code and the name of the error it refines, so a reader of either
    # sees one error; the controller's StateChangeFailedException is no Kafka API error, so it
    # stays the unknown server error (-1), not a refusal of the request.
    assert str(errors.NoReplicaOnline("no live replica of t-0")) == "LEADER_NOT_AVAILABLE: no live replica of t-0"
    assert str(errors.ClusterClosed("closed")) == "INVALID_REQUEST: closed"
    assert (errors.StateChangeFailed.code, errors.StateChangeFailed.name) == (-1, "UNKNOWN_SERVER_ERROR")
    assert not issubclass(errors.StateChangeFailed, errors.InvalidRequest)
    from kreplica.meta.store import NoNode, StoreError

    # A closed cluster never opens again: retrying its calls is no use.
    for cls in (errors.KReplicaError, errors.StateChangeFailed, errors.ClusterClosed, StoreError, NoNode):
        assert cls.retriable is False, cls


def test_an_error_raised_without_a_message_has_an_empty_one_not_none():
    """A segment names the file of a header walk's KafkaStorageError as
    ``f"{file}: {e.message}"``: an error raised bare must give "", not "None"."""
    for cls in (errors.KReplicaError, errors.KafkaStorageError, errors.ClusterClosed):
        e = cls()
        assert (e.message, str(e), e.args) == ("", cls.name, (cls.name,))
    # Nor one raised by its code alone.
    with pytest.raises(errors.KafkaStorageError) as raised:
        errors.raise_for_code(errors.KafkaStorageError.code)
    assert (raised.value.message, str(raised.value)) == ("", "KAFKA_STORAGE_ERROR")


def test_an_unknown_error_name_is_refused_not_read_as_the_unknown_server_error():
    assert errors.error_for_name("UNKNOWN_SERVER_ERROR") is errors.KReplicaError
    with pytest.raises(KeyError):
        errors.error_for_name("NOT_LEADER_FOR_PARTITION")  # Kafka's old name for code 6
    with pytest.raises(KeyError):  # as Java's Errors.valueOf, the name is matched as written
        errors.error_for_name("fenced_leader_epoch")


@pytest.mark.parametrize("make", [lambda: errors.FencedLeaderEpoch("t-0 epoch 3"), lambda: errors.KReplicaError(),
                                  lambda: errors.ClusterClosed("closed")], ids=["message", "bare", "subclass"])
def test_an_error_survives_pickling_and_copying_as_it_was(make):
    """A seed run in a ``sim --jobs`` worker hands its error to the parent by pickle; the
    name was put in front of the message a second time ("FENCED_LEADER_EPOCH:
    FENCED_LEADER_EPOCH: t-0 epoch 3")."""
    import copy
    import pickle

    error = make()
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(again) is type(error)
        assert (str(again), again.message, again.args) == (str(error), error.message, error.args)


def test_a_failed_multis_op_index_survives_pickling_and_copying():
    """A store error raised by ``Session.multi`` names the op that failed in ``op_index``,
    set after construction; the client reads it to tell which write lost (a znode that
    already existed, say), so it must come back with the error from a worker or a copy."""
    import copy
    import pickle

    from kreplica.meta.store import NoNode

    error = NoNode("/brokers/topics/bar")
    error.op_index = 2
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert (type(again), str(again), again.op_index) == (NoNode, str(error), 2)
