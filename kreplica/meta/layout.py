"""Kafka's ZooKeeper layout: the paths and the JSON each node holds.

Byte-compatible with what a Kafka broker writes: compact JSON (no spaces), the
same keys, timestamps as strings of milliseconds, and the partition-state field
order Kafka's own znodes show (``controller_epoch, leader, version,
leader_epoch, isr``).  Decoders accept what Kafka writes, including later
versions of the topic node (``adding_replicas``/``removing_replicas``) and key
orders other than ours.  Path and codec only: no I/O here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..arguments import java_integer
from ..protocol.common import LeaderAndIsr, TopicPartition

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
#: our extension: which broker epoch's unclean restart a controller has fully handled
UNCLEAN_SHUTDOWNS_HANDLED = "/brokers/unclean_shutdowns_handled"

#: persistent parents a broker makes sure of at startup (as Kafka's ``createTopLevelPaths``)
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, DELETE_TOPICS, ISR_CHANGE_NOTIFICATION)


# Skips json.loads' encoding sniffing: our nodes are UTF-8 JSON, read by the thousand.
_raw_decode = json.JSONDecoder().raw_decode


def _loads(data: bytes) -> Any:
    return _raw_decode(data.decode())[0]


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def isr_change_path(name: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{name}"


def config_change_path(name: str) -> str:
    return f"{CONFIG_CHANGES}/{name}"


def change_sequence(name: str) -> int:
    """The number ZooKeeper appended to a sequential node's name."""
    return int(name.rsplit("_", 1)[1])


# -- /brokers/ids/<id>

@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    endpoints: tuple[str, ...]
    timestamp_ms: int
    jmx_port: int = -1
    rack: str | None = None
    #: set when the broker recovered from an unclean shutdown (see :func:`encode_broker`)
    unclean_shutdown_controller_epoch: int | None = None


#: Our one additive key in a broker registration (Kafka's own readers ignore unknown keys).
UNCLEAN_SHUTDOWN_KEY = "unclean_shutdown_controller_epoch"


def encode_broker(broker_id: int, host: str, port: int, timestamp_ms: int,
                  rack: str | None = None, unclean_shutdown_controller_epoch: int | None = None) -> bytes:
    """Version 4 broker registration with one PLAINTEXT listener.

    Extension (KIP-966's unclean-shutdown registration, where a broker registers
    with previous broker epoch -1 after an unclean shutdown): a broker whose logs
    recovered from an unclean shutdown adds ``unclean_shutdown_controller_epoch``,
    the controller epoch it read from the store after restarting.  Every
    leadership it held before the crash was written by a controller of that epoch
    or older, which is how a controller tells a standing leadership that predates
    the crash from one it has already re-assigned (:mod:`kreplica.controller.controller`).
    Absent after a clean shutdown; Kafka's fields are unchanged.
    """
    obj: dict[str, Any] = {
        "version": 4,
        "host": host,
        "port": port,
        "endpoints": [f"PLAINTEXT://{host}:{port}"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "jmx_port": -1,
        "timestamp": str(timestamp_ms),
    }
    if rack is not None:
        obj["rack"] = rack
    if unclean_shutdown_controller_epoch is not None:
        obj[UNCLEAN_SHUTDOWN_KEY] = int(unclean_shutdown_controller_epoch)
    return _dumps(obj)


def unclean_shutdown_handled_path(broker_id: int) -> str:
    return f"{UNCLEAN_SHUTDOWNS_HANDLED}/{broker_id}"


def encode_unclean_shutdown_handled(broker_epoch: int, controller_epoch: int) -> bytes:
    """Extension: a controller of ``controller_epoch`` has handled the unclean restart
    of the broker registered under ``broker_epoch`` (its registration's session), so no
    later controller needs to re-examine it (:mod:`kreplica.controller.controller`)."""
    return _dumps({"version": 1, "broker_epoch": int(broker_epoch), "controller_epoch": int(controller_epoch)})


def decode_unclean_shutdown_handled(data: bytes) -> int:
    """The broker epoch the marker vouches for."""
    return int(_loads(data)["broker_epoch"])


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    obj = json.loads(data)
    unclean = obj.get(UNCLEAN_SHUTDOWN_KEY)
    return BrokerInfo(broker_id, obj.get("host") or "", int(obj.get("port", -1)),
                      tuple(obj.get("endpoints", ())), int(obj.get("timestamp", 0)),
                      int(obj.get("jmx_port", -1)), obj.get("rack"),
                      None if unclean is None else int(unclean))


# -- /brokers/topics/<topic>

def encode_topic_assignment(assignment: Mapping[int, Iterable[int]]) -> bytes:
    parts = {str(p): [int(r) for r in assignment[p]] for p in sorted(assignment)}
    return _dumps({"version": 1, "partitions": parts})


def decode_topic_assignment(data: bytes, where: str = "a topic node") -> dict[int, list[int]]:
    """``{partition: replicas}``; ValueError naming ``where`` for a node of another shape
    (another tool's, or a hand edit), rather than whatever Python says about it."""
    obj = json.loads(data)
    parts = obj.get("partitions") if isinstance(obj, dict) else None
    # A partition id as Kafka's toInt reads one: int() alone also takes "1_0" (as 10) and " 1".
    if not isinstance(parts, dict) or not all(
            java_integer(p) and isinstance(r, list) and all(type(b) is int for b in r)
            for p, r in parts.items()):
        raise ValueError(f"{where}: expected {{\"partitions\": {{\"<id>\": [<broker>, ...]}}}}, "
                         f"got {data.decode(errors='replace')[:200]}")
    return {int(p): list(replicas) for p, replicas in sorted(parts.items(), key=lambda kv: int(kv[0]))}


# -- /brokers/topics/<t>/partitions/<p>/state

def encode_partition_state(state: LeaderAndIsr) -> bytes:
    # Formatted by hand: the controller writes thousands of these per failover.
    isr = ",".join(map(str, state.isr))
    return (f'{{"controller_epoch":{state.controller_epoch},"leader":{state.leader},'
            f'"version":1,"leader_epoch":{state.leader_epoch},"isr":[{isr}]}}').encode()


def decode_partition_state(data: bytes, zk_version: int) -> LeaderAndIsr:
    obj = _loads(data)
    return LeaderAndIsr(obj["leader"], obj["leader_epoch"], tuple(obj["isr"]), zk_version,
                        obj["controller_epoch"])


# -- /controller and /controller_epoch

def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    obj = json.loads(data)
    # Kafka 0.8 wrote the bare broker id; later versions the JSON object.
    return int(obj) if isinstance(obj, int) else int(obj["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(int(epoch)).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# -- /admin paths and ISR change notifications

def encode_reassignment(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    parts = [{"topic": tp[0], "partition": tp[1], "replicas": [int(r) for r in reassignment[tp]]}
             for tp in sorted(reassignment)]
    return _dumps({"version": 1, "partitions": parts})


def decode_reassignment(data: bytes) -> dict[TopicPartition, list[int]]:
    obj = json.loads(data)
    return {TopicPartition(e["topic"], int(e["partition"])): list(e["replicas"]) for e in obj["partitions"]}


def encode_partition_list(tps: Iterable[TopicPartition]) -> bytes:
    """The ``{"version":1,"partitions":[{"topic","partition"}]}`` shape of the preferred
    replica election and ISR change notification nodes."""
    parts = [{"topic": tp[0], "partition": tp[1]} for tp in sorted(set(tps))]
    return _dumps({"version": 1, "partitions": parts})


def decode_partition_list(data: bytes) -> set[TopicPartition]:
    obj = json.loads(data)
    return {TopicPartition(e["topic"], int(e["partition"])) for e in obj["partitions"]}


# -- /config/topics/<topic>

def encode_topic_config(config: Mapping[str, Any] | None) -> bytes:
    # Kafka keeps every config value as a string.
    values = {k: config_str(v) for k, v in sorted((config or {}).items())}
    return _dumps({"version": 1, "config": values})


def config_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def decode_topic_config(data: bytes) -> dict[str, str]:
    # As Kafka 2.x's ConfigEntityZNode.decode: the overrides are those of a "config" object;
    # a node without one (missing, null, or of another shape) holds none.
    obj = json.loads(data)
    config = obj.get("config") if isinstance(obj, dict) else None
    return dict(config) if isinstance(config, dict) else {}


# -- /config/changes/config_change_<seq>: which entity's config an admin changed

def encode_config_change(topic: str) -> bytes:
    return _dumps({"version": 2, "entity_path": f"topics/{topic}"})


def decode_config_change(data: bytes) -> str | None:
    """The topic a change notification names; None for other entities (brokers, clients)."""
    obj = json.loads(data)
    kind, _, name = str(obj.get("entity_path", "")).partition("/")
    if obj.get("version") == 1:  # Kafka 0.9-0.10 wrote the two fields apart
        kind, name = str(obj.get("entity_type", "")), str(obj.get("entity_name", ""))
    return name if kind == "topics" and name else None
