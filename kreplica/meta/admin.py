"""Admin operations: what Kafka's topic, reassignment and election tools check and write.

Theory of operation.  The controller acts on what appears in the metadata store;
these functions are the user-facing door to it.  They validate first (Kafka's
topic-name rules, partition and replication counts, replicas naming registered
brokers, no duplicates, one reassignment at a time) and raise the Kafka-named
errors from :mod:`kreplica.errors`; then they write the same znodes Kafka's
``AdminZkClient`` and tools write, through :class:`KafkaZkClient`.

Replica placement is Kafka's rack-unaware assignment: brokers sorted, a random
start index and a random shift of the second replica; the shift grows by one
after every full round of brokers so followers spread evenly.  The randomness is
an injected ``random.Random``: the same seed, the same assignment.
"""
from __future__ import annotations

import random
import re
from typing import Iterable, Mapping, Sequence

from .. import arguments, errors
from .. import config as kconfig
from ..protocol.common import TopicPartition
from . import layout
from .kafka_zk_client import KafkaZkClient
from .store import BadVersion, NodeExists

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(topic: str) -> None:
    """Kafka's rules: 1..249 of ``[a-zA-Z0-9._-]``, and not ``.`` or ``..``."""
    arguments.text(topic, "topic name", errors.InvalidTopic)
    if not topic:
        raise errors.InvalidTopic("topic name is empty")
    if topic in (".", ".."):
        raise errors.InvalidTopic(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise errors.InvalidTopic(f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise errors.InvalidTopic(f"topic name {topic!r} has characters outside [a-zA-Z0-9._-]")


def collision_key(topic: str) -> str:
    # Kafka's metric names turn '.' into '_', so "a.b" and "a_b" may not both exist.
    return topic.replace(".", "_")


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int,
                    rng: random.Random, *, start_index: int | None = None,
                    replica_shift: int | None = None, first_partition: int = 0) -> dict[int, list[int]]:
    """Kafka's rack-unaware replica assignment.

    Partition p's first replica is broker ``(p + start) % n`` of the sorted list; the
    j-th follower sits ``1 + (shift + j) % (n - 1)`` places after it, and the shift
    grows by one each time p completes a round of the brokers.  Partitions are numbered
    from ``first_partition`` (partitions added to a topic continue its numbering).
    """
    if partitions <= 0:
        raise errors.InvalidPartitions(f"number of partitions must be larger than 0, got {partitions}")
    if replication_factor <= 0:
        raise errors.InvalidReplicationFactor(f"replication factor must be larger than 0, got {replication_factor}")
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise errors.InvalidReplicationFactor(
            f"replication factor: {replication_factor} larger than available brokers: {n}")
    start = rng.randrange(n) if start_index is None else start_index
    shift = rng.randrange(n) if replica_shift is None else replica_shift
    out: dict[int, list[int]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = replicas
    return out


def validate_assignment(assignment: Mapping[int, Sequence[int]], known_brokers: Iterable[int]) -> None:
    """Partitions 0..n-1, each with the same number (> 0) of distinct, registered brokers."""
    if not assignment:
        raise errors.InvalidReplicaAssignment("the assignment names no partitions")
    if sorted(assignment) != list(range(len(assignment))):
        raise errors.InvalidReplicaAssignment(
            f"partitions must be numbered 0..{len(assignment) - 1}, got {sorted(assignment)}")
    known = set(known_brokers)
    sizes = set()
    for p, replicas in sorted(assignment.items()):
        _validate_replicas(TopicPartition("", p), replicas, known)
        sizes.add(len(replicas))
    if len(sizes) > 1:
        raise errors.InvalidReplicaAssignment("all partitions must have the same number of replicas")


def _assignment_of(assignment: object) -> dict[int, list[int]]:
    """``{partition: [broker, ...]}`` with integer keys and broker lists, or INVALID_REPLICA_ASSIGNMENT
    (``{0: "1001"}`` is not the brokers 1, 0, 0, 1)."""
    bad = errors.InvalidReplicaAssignment
    return {arguments.integer(p, "assignment partition", bad): arguments.integers(rs, f"assignment[{p!r}]", bad)
            for p, rs in arguments.mapping(assignment, "assignment", bad).items()}


def _validate_replicas(tp: TopicPartition, replicas: Sequence[int], known: set[int]) -> None:
    where = f"partition {tp.partition}" if not tp.topic else str(tp)
    if not replicas:
        raise errors.InvalidReplicaAssignment(f"{where}: empty replica list")
    if len(set(replicas)) != len(replicas):
        raise errors.InvalidReplicaAssignment(f"{where}: duplicate replicas in {list(replicas)}")
    unknown = sorted(set(replicas) - known)
    if unknown:
        raise errors.InvalidReplicaAssignment(f"{where}: unknown brokers {unknown}")


def create_topic(client: KafkaZkClient, topic: str, partitions: int | None = None,
                 replication_factor: int | None = None,
                 assignment: Mapping[int, Sequence[int]] | None = None,
                 config: Mapping[str, object] | None = None,
                 rng: random.Random | None = None) -> dict[int, list[int]]:
    """Validate and write a new topic; returns its assignment.

    Either ``partitions`` and ``replication_factor`` (placed by :func:`assign_replicas`
    over the live brokers, with ``rng``) or an explicit ``assignment`` (whose counts
    must agree with any that are also given).
    """
    validate_topic_name(topic)
    if partitions is not None:
        partitions = arguments.integer(partitions, "partitions", errors.InvalidPartitions)
    if replication_factor is not None:
        replication_factor = arguments.integer(replication_factor, "replication_factor",
                                               errors.InvalidReplicationFactor)
    if assignment is not None:
        assignment = _assignment_of(assignment)
    kconfig.validate(config, allowed=kconfig.LOG_KEYS)
    existing = client.get_all_topics()
    if topic in existing:
        raise errors.TopicAlreadyExists(f"topic {topic!r} already exists")
    clash = [t for t in existing if collision_key(t) == collision_key(topic)]
    if clash:
        raise errors.InvalidTopic(f"topic {topic!r} collides with existing topic {clash[0]!r}")
    live = client.get_live_broker_ids()
    if assignment is not None:
        validate_assignment(assignment, live)
        if partitions is not None and partitions != len(assignment):
            raise errors.InvalidReplicaAssignment(
                f"{partitions} partitions requested but the assignment names {len(assignment)}")
        rf = len(next(iter(assignment.values())))
        if replication_factor is not None and replication_factor != rf:
            raise errors.InvalidReplicaAssignment(
                f"replication factor {replication_factor} requested but the assignment has {rf}")
        placed = dict(assignment)
    else:
        if partitions is None or replication_factor is None:
            raise errors.InvalidRequest("give partitions and replication_factor, or an assignment")
        if rng is None:
            raise errors.InvalidRequest("replica placement needs an injected random.Random")
        placed = assign_replicas(live, partitions, replication_factor, rng)
    client.create_topic(topic, placed, config)
    return placed


def add_partitions(client: KafkaZkClient, topic: str, partitions: int,
                   assignment: Mapping[int, Sequence[int]] | None = None) -> dict[int, list[int]]:
    """Grow ``topic`` to ``partitions`` partitions (kafka-topics.sh --alter --partitions);
    returns the new partitions' assignment.  The controller brings them online when it
    sees the topic's assignment change (Kafka's AddPartitionsListener).

    Without an ``assignment`` the new partitions are placed as Kafka 0.10 places them:
    the rack-unaware assignment over the live brokers with the replication factor of
    partition 0, numbered on from the topic's last partition, started (and shifted) at
    the first live broker from partition 0's first replica on, so no randomness is
    needed.  An explicit ``assignment`` names exactly the new partitions, each with that
    replication factor.  The count can only grow."""
    partitions = arguments.integer(partitions, "partitions", errors.InvalidPartitions)
    if assignment is not None:
        assignment = _assignment_of(assignment)
    existing, version = client.get_topic_assignment_and_version(topic)  # UNKNOWN_TOPIC_OR_PARTITION if none
    if any(tp.topic == topic for tp in client.get_partition_reassignment()):
        # The controller rewrites the topic's assignment as a reassignment completes, from
        # what it knows of the topic: partitions it has not yet seen would be written away
        # (refused as Kafka's CreatePartitions refuses it).
        raise errors.ReassignmentInProgress(f"a reassignment of {topic!r} is in progress: add partitions after it")
    if 0 not in existing:
        raise errors.InvalidReplicaAssignment(f"topic {topic!r} has no partition 0 to take a replication factor from")
    count, rf = len(existing), len(existing[0])
    if partitions <= count:
        raise errors.InvalidPartitions(
            f"topic {topic!r} has {count} partitions: the count can only be increased, not set to {partitions}")
    live = client.get_live_broker_ids()
    wanted = range(count, partitions)
    if assignment is None:
        ids = sorted(live)
        start = next((i for i, b in enumerate(ids) if b >= existing[0][0]), 0)
        # Fixed start and shift: the placement is a function of the topic and the brokers.
        added = assign_replicas(live, len(wanted), rf, random.Random(0), start_index=start,
                                replica_shift=start, first_partition=count)
    else:
        if sorted(assignment) != list(wanted):
            raise errors.InvalidReplicaAssignment(
                f"growing {topic!r} from {count} to {partitions} partitions needs an assignment of partitions "
                f"{list(wanted)}, not {sorted(assignment)}")
        known = set(live)
        for p, replicas in sorted(assignment.items()):
            _validate_replicas(TopicPartition(topic, p), replicas, known)
        odd = sorted(p for p, replicas in assignment.items() if len(replicas) != rf)
        if odd:
            raise errors.InvalidReplicaAssignment(
                f"partition {odd[0]}: {len(assignment[odd[0]])} replicas, but the topic's replication factor is {rf}")
        added = dict(assignment)
    try:
        # Conditional on the version read: a rewrite or another growth in between is not undone.
        client.set_topic_assignment(topic, {**existing, **added}, expected_version=version)
    except BadVersion:
        raise errors.InvalidPartitions(f"the assignment of {topic!r} changed while partitions were being added "
                                       "(another admin, or a reassignment completing): try again") from None
    return added


def alter_topic_config(client: KafkaZkClient, topic: str, set_config: Mapping[str, object] | None = None,
                       delete: Iterable[str] = ()) -> dict[str, str]:
    """Change a topic's overrides (kafka-configs.sh --alter): ``set_config`` adds or
    replaces keys, ``delete`` drops them (back to the broker's default).  Every broker
    hosting the topic applies the result; returns the overrides now in force."""
    changes = dict(arguments.mapping(set_config, "set_config", errors.InvalidConfig))
    # A bare string would be read as its characters: "retention.ms" as "r", "e", ...
    delete = arguments.texts(delete, "delete", errors.InvalidConfig)
    kconfig.validate(changes, allowed=kconfig.LOG_KEYS)
    unknown = sorted(set(delete) - kconfig.LOG_KEYS)
    if unknown:
        raise errors.InvalidConfig(f"unknown topic config {unknown[0]!r}")
    if not changes and not delete:  # as kafka-configs.sh refuses an --alter naming nothing
        raise errors.InvalidConfig("nothing to alter: name a config to set or one to delete")
    both = sorted(set(delete) & set(changes))
    if both:
        raise errors.InvalidConfig(f"topic config {both[0]!r} is both set and deleted: which one is meant?")
    if not client.topic_exists(topic):
        raise errors.UnknownTopicOrPartition(f"topic {topic!r} does not exist")
    current = client.get_topic_config(topic)
    for key in delete:
        current.pop(key, None)
    current.update({k: layout.config_str(v) for k, v in changes.items()})
    client.set_topic_config(topic, current)
    return current


def delete_topic(client: KafkaZkClient, topic: str) -> None:
    """Mark a topic for deletion (``/admin/delete_topics/<topic>``); the controller does the rest."""
    if not client.topic_exists(topic):
        raise errors.UnknownTopicOrPartition(f"topic {topic!r} does not exist")
    client.create_topic_deletion(topic)


def _partition_key(tp: Iterable[object]) -> TopicPartition:
    """A (topic, partition) pair named by the caller: a partition "0" is not partition 0."""
    try:
        if isinstance(tp, (str, bytes)):  # "bar-0" is not a pair, and "b0" would unpack as one
            raise TypeError
        topic, partition = tp
    except (TypeError, ValueError):
        raise errors.InvalidRequest(
            f"a partition must be a (topic, partition) pair, got {type(tp).__name__} {tp!r}") from None
    return TopicPartition(arguments.text(topic, "topic", errors.InvalidTopic),
                          arguments.integer(partition, "partition", errors.InvalidRequest, minimum=0))


def _existing_partitions(client: KafkaZkClient, tps: Iterable[TopicPartition]) -> dict[TopicPartition, list[int]]:
    tps = list(tps)
    current = client.get_replica_assignment(sorted({tp.topic for tp in tps}))
    missing = sorted(tp for tp in tps if tp not in current)
    if missing:
        raise errors.UnknownTopicOrPartition(f"unknown partitions {', '.join(map(str, missing))}")
    return current


def reassign_partitions(client: KafkaZkClient, reassignment: Mapping[TopicPartition, Sequence[int]]) -> None:
    """Write ``/admin/reassign_partitions`` after Kafka's checks; one reassignment at a time."""
    if not reassignment:
        raise errors.InvalidReplicaAssignment("the reassignment names no partitions")
    if client.reassignment_in_progress():
        raise errors.ReassignmentInProgress("a partition reassignment is already in progress")
    reassignment = {_partition_key(tp): arguments.integers(rs, f"replicas of {tp}", errors.InvalidReplicaAssignment)
                    for tp, rs in reassignment.items()}
    _existing_partitions(client, reassignment)
    # Kafka's tool checks the targets against every registered broker.
    known = set(client.get_live_broker_ids())
    for tp, replicas in sorted(reassignment.items()):
        _validate_replicas(tp, replicas, known)
    try:
        client.create_partition_reassignment(reassignment)
    except NodeExists as exc:
        raise errors.ReassignmentInProgress("a partition reassignment is already in progress") from exc


def elect_preferred_leaders(client: KafkaZkClient, partitions: Iterable[TopicPartition]) -> None:
    """Write ``/admin/preferred_replica_election`` for existing partitions."""
    tps = {_partition_key(tp) for tp in partitions}
    if not tps:
        raise errors.InvalidRequest("no partitions named for preferred leader election")
    _existing_partitions(client, tps)
    try:
        client.create_preferred_replica_election(tps)
    except NodeExists as exc:
        raise errors.InvalidRequest("a preferred replica election is already in progress") from exc
