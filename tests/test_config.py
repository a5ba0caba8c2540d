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


@pytest.mark.parametrize("text, value", [("true", True), ("TRUE", True), ("False", False), (True, True), (False, False)])
def test_booleans_are_true_or_false_in_any_case(text, value):
    # Kafka reads booleans case-insensitively; a hand-written "TRUE" is not a bad value.
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
        {"segment.ms": "\u0665000"},  # nor non-ASCII digits (ARABIC-INDIC DIGIT FIVE)
        {"segment.ms": "1e3"},
        {"unclean.leader.election.enable": "maybe"},
        {"replica.truncation.strategy": "magic"},
    ],
)
def test_bad_keys_and_values_name_the_key(bad):
    with pytest.raises(errors.InvalidConfig) as e:
        config.validate(bad)
    assert next(iter(bad)) in str(e.value)
    assert e.value.code == 40


def test_integer_text_is_read_as_kafkas_parser_reads_it():
    # Blanks around the digits are trimmed and a sign is taken, as in Kafka's ConfigDef.
    assert config.validate({"segment.ms": " 1000 ", "flush.ms": "+5"})["segment.ms"] == 1000
    assert config.validate({"flush.ms": "+5"})["flush.ms"] == 5


def test_the_largest_segment_kafka_allows_is_accepted():
    assert config.validate({"segment.bytes": (1 << 31) - 1})["segment.bytes"] == (1 << 31) - 1


def test_error_codes_round_trip():
    assert errors.error_for_code(1) is errors.OffsetOutOfRange
    assert errors.NotEnoughReplicasAfterAppend.code == 20
    assert errors.error_for_name("FENCED_LEADER_EPOCH").code == 74
    with pytest.raises(errors.NotLeaderOrFollower):
        errors.raise_for_code(6, "x")
    errors.raise_for_code(0)
