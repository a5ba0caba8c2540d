"""Topic descriptions, and ``kafka-topics.sh --describe``'s text layout (0.10, seed 003).

Read straight from the metadata store (assignment + partition-state nodes), so
the same code serves the embedded Cluster and ``kreplica topics --describe``
against a live ZooKeeper.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import errors
from .meta.kafka_zk_client import KafkaZkClient
from .protocol import TopicPartition
from .protocol.common import NO_LEADER


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # NO_LEADER (-1) when the state says so, or when there is no state yet
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    # False until the controller writes the partition-state node (a topic just created).
    has_state: bool = True


@dataclass(frozen=True, slots=True)
class TopicDescription:
    topic: str
    partitions: tuple[PartitionDescription, ...]
    config: dict[str, str]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


def describe_topic(zk: KafkaZkClient, topic: str) -> TopicDescription:
    assignment = zk.get_topic_assignment(topic) if zk.topic_exists(topic) else None
    if not assignment:
        raise errors.UnknownTopicOrPartition(f"topic {topic!r} does not exist")
    tps = [TopicPartition(topic, p) for p in sorted(assignment)]
    states = zk.get_partition_states(tps)
    parts = []
    for tp in tps:
        s = states.get(tp)
        parts.append(PartitionDescription(
            tp.partition,
            s.leader if s else NO_LEADER,
            tuple(assignment[tp.partition]),
            tuple(s.isr) if s else (),
            s.leader_epoch if s else -1,
            s is not None,
        ))
    return TopicDescription(topic, tuple(parts), zk.get_topic_config(topic))


def format_describe(d: TopicDescription, under_replicated: bool = False,
                    unavailable_on: frozenset[int] | None = None) -> str:
    """Kafka 0.10's layout.  ``under_replicated`` keeps only partitions whose ISR is smaller
    than their replica list; ``unavailable_on`` (the live brokers) keeps only partitions
    without a leader or led by a broker not among them.  With either filter the topic's
    summary line is left out and a partition passing either is printed, as 0.10's
    describeTopic reads them (its command line, and ``kreplica topics``, refuse the two
    together)."""
    lines = []
    if not under_replicated and unavailable_on is None:
        configs = ",".join(f"{k}={v}" for k, v in sorted(d.config.items()))
        lines.append(f"Topic:{d.topic}\tPartitionCount:{len(d.partitions)}\t"
                     f"ReplicationFactor:{d.replication_factor}\tConfigs:{configs}")
    for p in d.partitions:
        if under_replicated or unavailable_on is not None:
            lagging = under_replicated and len(p.isr) < len(p.replicas)
            leaderless = unavailable_on is not None and (
                not p.has_state or p.leader == NO_LEADER or p.leader not in unavailable_on)
            if not (lagging or leaderless):
                continue
        # 0.10 prints "none" only without a state node; a stored leader of -1 prints as is.
        leader = p.leader if p.has_state else "none"
        lines.append(f"\tTopic: {d.topic}\tPartition: {p.partition}\tLeader: {leader}\t"
                     f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
    return "".join(line + "\n" for line in lines)
