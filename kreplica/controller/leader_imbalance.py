"""Auto leader rebalance: which partitions go back to their preferred replica.

Kafka 0.10's ``checkAndTriggerPartitionRebalance`` as a pure function of the
controller's view.  For each broker, its *preferred* partitions are those whose
assignment lists it first; its imbalance is the share of them that some other
broker leads.  When that share exceeds ``leader.imbalance.per.broker.percentage``
and the broker is alive, every such partition whose ISR holds the broker gets a
preferred replica election.  A share exactly at the limit moves nothing.
"""
from __future__ import annotations

from collections import defaultdict
from typing import AbstractSet, Callable, Mapping, Sequence

from ..protocol import LeaderAndIsr, TopicPartition


def partitions_to_rebalance(
    assignment: Mapping[TopicPartition, Sequence[int]],
    leadership: Mapping[TopicPartition, LeaderAndIsr],
    live_brokers: AbstractSet[int],
    imbalance_percentage: int,
    excluded_topic: Callable[[str], bool] = lambda topic: False,
) -> set[TopicPartition]:
    """The partitions to hand back to their preferred (first assigned) replica."""
    by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp, replicas in assignment.items():
        if replicas and tp in leadership and not excluded_topic(tp.topic):
            by_preferred[replicas[0]].append(tp)
    limit = imbalance_percentage / 100.0
    chosen: set[TopicPartition] = set()
    for broker, tps in by_preferred.items():
        led_elsewhere = [tp for tp in tps if leadership[tp].leader != broker]
        if broker in live_brokers and len(led_elsewhere) / len(tps) > limit:
            chosen.update(tp for tp in led_elsewhere if broker in leadership[tp].isr)
    return chosen
