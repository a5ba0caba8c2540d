"""Configuration: Kafka's key names and defaults, validated once, loudly.

Configs are plain dicts of dotted Kafka names.  :func:`validate` checks every key
against :data:`SPEC` and returns a complete, typed dict with defaults filled in.
An unknown key or a value of the wrong type or out of range raises
:class:`~kreplica.errors.InvalidConfig` naming the key.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import arguments
from .errors import InvalidConfig

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    kind: str  # "int", "bool", "str"
    default: Any
    check: Callable[[Any], bool] = lambda v: True
    doc: str = ""
    choices: tuple[str, ...] = ()


INT_MAX = (1 << 31) - 1  # Kafka's Int keys; a segment's .index positions are 4 bytes


def _at_least(n: int) -> Callable[[int], bool]:
    """A Kafka Long key's range from ``n``: nothing past a 64-bit signed long."""
    return lambda v: n <= v <= LONG_MAX


def _between(low: int, high: int) -> Callable[[int], bool]:
    return lambda v: low <= v <= high


SPEC: dict[str, Key] = {
    k.name: k
    for k in (
        # Log (topic-level) keys.
        Key("segment.bytes", "int", 1 << 30, _between(14, INT_MAX), "segment file size before a roll"),
        Key("segment.ms", "int", 7 * 24 * 3600 * 1000, _at_least(1), "segment age before a roll"),
        # At least two 12-byte time-index entries: one for appends, one kept for sealing.
        Key("segment.index.bytes", "int", 10 * 1024 * 1024, _between(24, INT_MAX), "max size of each index"),
        Key("index.interval.bytes", "int", 4096, _between(0, INT_MAX), "bytes between index entries"),
        Key("retention.bytes", "int", -1, _at_least(-1), "log size before deleting old segments"),
        Key("retention.ms", "int", 7 * 24 * 3600 * 1000, _at_least(-1), "segment age before deletion"),
        Key("flush.messages", "int", LONG_MAX, _at_least(1), "messages between forced fsyncs"),
        Key("flush.ms", "int", LONG_MAX, _at_least(0), "ms between forced fsyncs"),
        Key("max.message.bytes", "int", 1048588, _between(0, INT_MAX), "largest record batch accepted"),
        Key("message.timestamp.type", "str", "CreateTime", doc="CreateTime or LogAppendTime",
            choices=("CreateTime", "LogAppendTime")),
        Key("min.insync.replicas", "int", 1, _between(1, INT_MAX), "ISR size needed for acks=all"),
        Key("unclean.leader.election.enable", "bool", False, doc="allow out-of-sync leaders"),
        # Replication (broker-level) keys.
        Key("replica.lag.time.max.ms", "int", 30000, _at_least(1), "lag before ISR removal"),
        Key("replica.fetch.max.bytes", "int", 1048576, _between(1, INT_MAX), "per-partition fetch size"),
        Key("replica.fetch.response.max.bytes", "int", 10485760, _between(1, INT_MAX), "fetch response size"),
        Key("replica.fetch.wait.max.ms", "int", 500, _between(0, INT_MAX), "follower long-poll wait"),
        Key("replica.fetch.min.bytes", "int", 1, _between(1, INT_MAX), "follower long-poll min bytes"),
        Key("replica.fetch.backoff.ms", "int", 1000, _between(0, INT_MAX), "backoff after a fetch error"),
        Key("replica.high.watermark.checkpoint.interval.ms", "int", 5000, _at_least(1),
            "HW checkpoint period"),
        Key("log.flush.scheduler.interval.ms", "int", LONG_MAX, _at_least(1),
            "period of the check that flushes logs past flush.ms"),
        Key("log.retention.check.interval.ms", "int", 300000, _at_least(1),
            "period of the retention check over every hosted log"),
        Key("log.flush.offset.checkpoint.interval.ms", "int", 60000, _between(1, INT_MAX),
            "recovery-point-offset-checkpoint period"),
        Key("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, _between(1, INT_MAX),
            "log-start-offset-checkpoint period"),
        Key("replica.truncation.strategy", "str", "high-watermark",
            doc="high-watermark (the seeds' design) or leader-epoch (KIP-101/KIP-279)",
            choices=("high-watermark", "leader-epoch")),
        Key("request.timeout.ms", "int", 30000, _between(1, INT_MAX), "produce purgatory timeout"),
        Key("acks", "str", "all", doc="0, 1 or all", choices=("0", "1", "all", "-1")),
        # Controller keys.
        Key("auto.leader.rebalance.enable", "bool", True, doc="periodic preferred elections"),
        Key("leader.imbalance.per.broker.percentage", "int", 10, _between(0, INT_MAX),
            "imbalance that triggers a rebalance"),
        Key("leader.imbalance.check.interval.seconds", "int", 300, _at_least(1),
            "rebalance check period"),
        Key("controlled.shutdown.max.retries", "int", 3, _between(0, INT_MAX), "shutdown attempts"),
        Key("controlled.shutdown.retry.backoff.ms", "int", 5000, _at_least(0), "shutdown backoff"),
        Key("controller.socket.timeout.ms", "int", 30000, _between(1, INT_MAX),
            "wait for a controlled-shutdown answer before retrying"),
        Key("delete.topic.enable", "bool", True, doc="allow topic deletion"),
        Key("zookeeper.session.timeout.ms", "int", 18000, _between(1, INT_MAX), "metadata session timeout"),
        Key("default.replication.factor", "int", 1, _between(1, INT_MAX), "RF when none is given"),
        Key("num.partitions", "int", 1, _between(1, INT_MAX), "partitions when none are given"),
    )
}

LOG_KEYS = frozenset(
    {
        "segment.bytes", "segment.ms", "segment.index.bytes", "index.interval.bytes",
        "retention.bytes", "retention.ms", "flush.messages", "flush.ms", "max.message.bytes",
        "message.timestamp.type", "min.insync.replicas", "unclean.leader.election.enable",
    }
)


def _coerce(key: Key, value: Any) -> Any:
    # Kafka's ConfigDef trims text of every type before reading it, as Java's String.trim.
    text = value.strip(arguments.JAVA_BLANKS) if isinstance(value, str) else None
    if key.kind == "bool":
        if isinstance(value, bool):
            return value
        read = arguments.java_boolean(text) if text is not None else None
        if read is not None:
            return read
        raise InvalidConfig(f"{key.name}={value!r}: expected true or false")
    if key.kind == "int":
        if isinstance(value, bool):
            raise InvalidConfig(f"{key.name}={value!r}: expected an integer")
        # Text as Kafka's parser reads it (Integer.parseInt): decimal digits after an
        # optional sign, blanks around them trimmed.  Python's int() would also take "1_000".
        if text is not None and not arguments.java_integer(text):
            raise InvalidConfig(f"{key.name}={value!r}: expected an integer")
        try:
            v = int(value if text is None else text)
        except (TypeError, ValueError, OverflowError):  # OverflowError: a TOML inf
            raise InvalidConfig(f"{key.name}={value!r}: expected an integer") from None
        if text is None and not isinstance(value, int) and v != value:  # 1.5, Decimal("1.5"): not 1
            raise InvalidConfig(f"{key.name}={value!r}: expected an integer")
        if not key.check(v):
            raise InvalidConfig(f"{key.name}={value!r}: out of range")
        return v
    v = str(value) if text is None else text
    if key.choices and v not in key.choices:
        raise InvalidConfig(f"{key.name}={value!r}: expected one of {', '.join(key.choices)}")
    return v


def validate(config: Mapping[str, Any] | None, allowed: frozenset[str] | None = None) -> dict[str, Any]:
    """Return ``config`` complete with defaults, or raise InvalidConfig naming the bad key."""
    config = dict(arguments.mapping(config, "config", InvalidConfig))
    names = allowed if allowed is not None else frozenset(SPEC)
    out: dict[str, Any] = {}
    for name in names:
        out[name] = SPEC[name].default
    for name, value in config.items():
        if name not in names:
            raise InvalidConfig(f"unknown config key {name!r}")
        out[name] = _coerce(SPEC[name], value)
    if out.get("acks") == "-1":
        out["acks"] = "all"
    return out


_ACKS = {"all": -1, "-1": -1, -1: -1, "0": 0, 0: 0, "1": 1, 1: 1}


def parse_acks(acks: Any) -> int:
    """Kafka's acks as an int: 0, 1 or -1 (all).  Only ints and strings: True and 1.0
    equal 1 but are not an acks setting."""
    if type(acks) in (int, str) and acks in _ACKS:
        return _ACKS[acks]
    raise InvalidConfig(f"acks={acks!r}: expected 0, 1 or all")
