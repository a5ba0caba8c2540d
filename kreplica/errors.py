"""One error hierarchy, named and numbered as Kafka's error codes.

Every failure a caller can see is a :class:`KReplicaError` subclass carrying the
Kafka error ``code`` and ``name``.  Replica and controller code returns codes in
responses (sans-I/O); the embedding API (``Cluster``, ``Log``) raises these.
"""
from __future__ import annotations

from typing import ClassVar


class KReplicaError(Exception):
    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(f"{self.name}: {message}" if message else self.name)
        self.message = message

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuilt from the message as given: ``args`` already carries the name, and
        # BaseException's own reduce would put it in front a second time (an error
        # pickled from a ``sim --jobs`` worker, or copied).  Attributes set after
        # construction (``op_index``) come back with the instance dict.
        return type(self), (self.message,), self.__dict__


_BY_CODE: dict[int, type[KReplicaError]] = {-1: KReplicaError}
_BY_NAME: dict[str, type[KReplicaError]] = {"UNKNOWN_SERVER_ERROR": KReplicaError}


def _error(class_name: str, code: int, name: str, retriable: bool = False) -> type[KReplicaError]:
    cls = type(class_name, (KReplicaError,), {"code": code, "name": name, "retriable": retriable})
    cls.__module__ = __name__
    _BY_CODE[code] = cls
    _BY_NAME[name] = cls
    return cls


NONE = 0
OffsetOutOfRange = _error("OffsetOutOfRange", 1, "OFFSET_OUT_OF_RANGE")
CorruptMessage = _error("CorruptMessage", 2, "CORRUPT_MESSAGE", True)
UnknownTopicOrPartition = _error("UnknownTopicOrPartition", 3, "UNKNOWN_TOPIC_OR_PARTITION", True)
LeaderNotAvailable = _error("LeaderNotAvailable", 5, "LEADER_NOT_AVAILABLE", True)
NotLeaderOrFollower = _error("NotLeaderOrFollower", 6, "NOT_LEADER_OR_FOLLOWER", True)
RequestTimedOut = _error("RequestTimedOut", 7, "REQUEST_TIMED_OUT", True)
BrokerNotAvailable = _error("BrokerNotAvailable", 8, "BROKER_NOT_AVAILABLE")
ReplicaNotAvailable = _error("ReplicaNotAvailable", 9, "REPLICA_NOT_AVAILABLE", True)
# Kafka's MESSAGE_TOO_LARGE (code 10) is raised as RecordTooLargeException.
RecordTooLarge = _error("RecordTooLarge", 10, "RECORD_TOO_LARGE")
StaleControllerEpoch = _error("StaleControllerEpoch", 11, "STALE_CONTROLLER_EPOCH")
NetworkException = _error("NetworkException", 13, "NETWORK_EXCEPTION", True)
InvalidTopic = _error("InvalidTopic", 17, "INVALID_TOPIC_EXCEPTION")
RecordListTooLarge = _error("RecordListTooLarge", 18, "RECORD_LIST_TOO_LARGE")
NotEnoughReplicas = _error("NotEnoughReplicas", 19, "NOT_ENOUGH_REPLICAS", True)
NotEnoughReplicasAfterAppend = _error(
    "NotEnoughReplicasAfterAppend", 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True
)
InvalidRequiredAcks = _error("InvalidRequiredAcks", 21, "INVALID_REQUIRED_ACKS")
InvalidTimestamp = _error("InvalidTimestamp", 32, "INVALID_TIMESTAMP")
TopicAlreadyExists = _error("TopicAlreadyExists", 36, "TOPIC_ALREADY_EXISTS")
InvalidPartitions = _error("InvalidPartitions", 37, "INVALID_PARTITIONS")
InvalidReplicationFactor = _error("InvalidReplicationFactor", 38, "INVALID_REPLICATION_FACTOR")
InvalidReplicaAssignment = _error("InvalidReplicaAssignment", 39, "INVALID_REPLICA_ASSIGNMENT")
InvalidConfig = _error("InvalidConfig", 40, "INVALID_CONFIG")
NotController = _error("NotController", 41, "NOT_CONTROLLER", True)
InvalidRequest = _error("InvalidRequest", 42, "INVALID_REQUEST")
KafkaStorageError = _error("KafkaStorageError", 56, "KAFKA_STORAGE_ERROR", True)
ReassignmentInProgress = _error("ReassignmentInProgress", 60, "REASSIGNMENT_IN_PROGRESS")
TopicDeletionDisabled = _error("TopicDeletionDisabled", 73, "TOPIC_DELETION_DISABLED")
FencedLeaderEpoch = _error("FencedLeaderEpoch", 74, "FENCED_LEADER_EPOCH", True)
UnknownLeaderEpoch = _error("UnknownLeaderEpoch", 75, "UNKNOWN_LEADER_EPOCH", True)
UnsupportedCompressionType = _error("UnsupportedCompressionType", 76, "UNSUPPORTED_COMPRESSION_TYPE")
StaleBrokerEpoch = _error("StaleBrokerEpoch", 77, "STALE_BROKER_EPOCH")
PreferredLeaderNotAvailable = _error(
    "PreferredLeaderNotAvailable", 80, "PREFERRED_LEADER_NOT_AVAILABLE", True
)
EligibleLeadersNotAvailable = _error(
    "EligibleLeadersNotAvailable", 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True
)
ElectionNotNeeded = _error("ElectionNotNeeded", 84, "ELECTION_NOT_NEEDED")
NoReassignmentInProgress = _error("NoReassignmentInProgress", 85, "NO_REASSIGNMENT_IN_PROGRESS")
InvalidRecord = _error("InvalidRecord", 87, "INVALID_RECORD")
# AlterIsr: the conditional write of the partition state lost to a newer version.
InvalidUpdateVersion = _error("InvalidUpdateVersion", 95, "INVALID_UPDATE_VERSION")


class NoReplicaOnline(LeaderNotAvailable):
    """Controller: no live replica can lead (Kafka's NoReplicaOnlineException)."""


class StateChangeFailed(KReplicaError):
    """Controller: an illegal state-machine transition (Kafka's StateChangeFailedException)."""


class ClusterClosed(InvalidRequest):
    """The embedded Cluster was closed: its brokers, store session and temporary
    directory are gone, so every call but ``close()`` is refused."""


def error_for_code(code: int) -> type[KReplicaError]:
    return _BY_CODE.get(code, KReplicaError)


def error_for_name(name: str) -> type[KReplicaError]:
    return _BY_NAME[name]


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the exception for a non-zero Kafka error code."""
    if code != NONE:
        raise error_for_code(code)(message)
