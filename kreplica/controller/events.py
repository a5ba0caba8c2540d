"""The controller's input events, typed (seed 000's listeners, one dataclass each).

Theory of operation.  Everything that makes the active controller act arrives
as one of these frozen events, built by the watch layer from what it read from
the store when the watch fired (the read also re-registers the one-shot
watch), or by a timer, or by a broker's answer.
:meth:`KafkaController.process <kreplica.controller.controller.KafkaController.process>`
dispatches each to its handler, which drives the state machines.  An event
names the store's picture at the time it was read; the handler compares it with
the context to find what changed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..protocol import TopicPartition
from .context import PartitionReplica


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """``/brokers/ids`` children changed (BrokerChangeListener).

    ``broker_epochs[i]`` is the session that registered ``live_broker_ids[i]``;
    ``unclean_shutdowns`` pairs each broker whose registration says it recovered
    from an unclean shutdown with the controller epoch it registered with.
    """

    live_broker_ids: tuple[int, ...]
    broker_epochs: tuple[int, ...]
    unclean_shutdowns: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class TopicChange:
    """``/brokers/topics`` children changed (TopicChangeListener)."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PartitionModifications:
    """A topic's assignment node changed (AddPartitionsListener)."""

    topic: str
    assignment: tuple[tuple[int, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """``/admin/delete_topics`` children changed (DeleteTopicsListener)."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """``/admin/reassign_partitions`` changed (PartitionsReassignedListener)."""

    reassignment: tuple[tuple[TopicPartition, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """``/admin/preferred_replica_election`` changed (PreferredReplicaElectionListener)."""

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class TopicConfigChange:
    """``/config/changes`` children appeared: an admin changed topics' overrides."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """``/isr_change_notification`` children appeared (IsrChangeNotificationListener)."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AutoLeaderRebalance:
    """The leader-imbalance check timer fired."""


@dataclass(frozen=True, slots=True)
class StopReplicaAnswer:
    """A broker answered a StopReplica with delete for one replica."""

    replica: PartitionReplica
    error_code: int


ControllerEvent = Union[
    BrokerChange, TopicChange, PartitionModifications, TopicDeletion, PartitionReassignment,
    PreferredReplicaElection, IsrChangeNotification, AutoLeaderRebalance, StopReplicaAnswer,
]
