"""Cluster: N in-process brokers, one metadata store, one runtime.

Theory of operation.  ``Cluster.embedded()`` builds brokers that talk through an
:class:`~kreplica.transport.InProcessTransport` on one scheduler.  With the
default ``metadata="memory"`` the scheduler is a :class:`SimScheduler`: virtual
time, seeded randomness, nothing moves until a call drives it (``advance``,
``run_until``, or a blocking convenience call such as ``produce``, which runs
the scheduler until its answer arrives).  With ``metadata="zookeeper://..."``
the store is a real ZooKeeper and time is real (:class:`RealScheduler`).  Over
real sockets (``transport=`` a :class:`~kreplica.net.tcp_transport.TcpTransport`,
which the caller closes after the cluster) time is real with either store.

The cluster is also a client: ``produce`` and ``fetch`` find the leader from
the partition-state nodes, send typed requests and, as Kafka's clients do,
retry the errors a leader answers before appending (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH,
NOT_ENOUGH_REPLICAS) and a broker that went away, raising the Kafka-named error
otherwise.  Unlike Kafka's producer, they raise REQUEST_TIMED_OUT and
NOT_ENOUGH_REPLICAS_AFTER_APPEND, which a leader answers after appending (a
retry would write the records twice: the caller decides), and
KAFKA_STORAGE_ERROR.  Admin calls write the
admin paths (``/admin/...``, ``/brokers/topics``) that the controller watches,
exactly as ``kafka-topics.sh`` and ``kafka-reassign-partitions.sh`` do.
"""
from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from . import arguments, errors
from .broker import Broker
from .config import parse_acks, validate
from .describe import PartitionDescription, TopicDescription, describe_topic, format_describe
from .meta import admin
from .meta.kafka_zk_client import KafkaZkClient
from .meta.store import StoreError
from .meta.uri import open_store, parse_metadata_uri
from .protocol import (
    ISOLATION_LEVELS,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from .protocol.common import NO_LEADER
from .records import Record, decode_batches, decode_records, encode_batch
from .runtime import RealScheduler, Scheduler, SimScheduler
from .transport import DISCONNECTED, InProcessTransport, Transport

CLIENT_ID = -100  # the cluster's own client node on the transport
# broker_scheduler(broker_id, cluster_scheduler) -> the scheduler one broker incarnation runs on.
BrokerScheduler = Callable[[int, Scheduler], Scheduler]
_RETRIABLE = {
    errors.NotLeaderOrFollower.code, errors.LeaderNotAvailable.code,
    errors.UnknownTopicOrPartition.code, errors.FencedLeaderEpoch.code,
    errors.NotEnoughReplicas.code, errors.NetworkException.code,
}


def _refused_once_closed(method: Callable[..., Any]) -> Callable[..., Any]:
    """Raise ClusterClosed instead of running ``method`` on a closed cluster, whose store
    session is closed and whose temporary directory a restarted broker would re-create."""
    @functools.wraps(method)
    def guarded(self: "Cluster", *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise errors.ClusterClosed(f"the cluster is closed: {method.__name__}() refused")
        return method(self, *args, **kwargs)
    return guarded


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition a keyed record goes to: a stable hash of the key (CRC32; Kafka's
    default partitioner uses murmur2), so one key's records stay in order on one partition.
    A topic has at least one partition: fewer is INVALID_PARTITIONS, not a ZeroDivisionError."""
    if partitions < 1:
        raise errors.InvalidPartitions(f"no partition for a key among {partitions} partitions")
    return zlib.crc32(key) % partitions


def _span(value: Any, name: str = "timeout_ms") -> int:
    """A span of milliseconds the caller waits: an int >= 0 (not 1.5, True or "5")."""
    return arguments.integer(value, name, errors.InvalidRequest, minimum=0)


def _topic(topic: Any) -> str:
    """A topic name as the store and the brokers key it: a str subclass as its plain text.
    Anything else is INVALID_TOPIC, as in :func:`_partition_of`: the store's paths are
    built from a name's text, so 7 or None named the topic "7" or "None"."""
    return arguments.text(topic, "topic", errors.InvalidTopic)


def _partition_of(topic: str, partition: int) -> TopicPartition:
    """The partition a caller names.  Checked up front: "0" or 0.0 would otherwise be
    retried as an unknown partition until the delivery timeout, and True taken for 1.  A
    topic that is no str is INVALID_TOPIC, as create_topic says, not an unknown topic."""
    if type(topic) is not str:
        topic = arguments.text(topic, "topic", errors.InvalidTopic)
    if type(partition) is not int or partition < 0:
        partition = arguments.integer(partition, "partition", errors.InvalidRequest, minimum=0)
    return TopicPartition(topic, partition)


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    time_ms: int
    kind: str
    broker: int
    details: dict[str, Any]


class Cluster:
    """See the module's theory of operation.  After :meth:`close` (idempotent) every
    method but ``now_ms`` and ``live_brokers`` raises :class:`~kreplica.errors.ClusterClosed`."""

    def __init__(self, broker_ids: Sequence[int], data_dir: str | Path | None, metadata: str,
                 seed: int, config: dict[str, Any] | None,
                 transport: Transport | None = None, latency_ms: int = 1,
                 broker_scheduler: BrokerScheduler | None = None, remote: bool = False) -> None:
        """``remote``: the brokers run in other processes (:func:`kreplica.net.remote.connect`),
        none here; the cluster closes ``transport`` when it closes."""
        # Broker ids are Kafka's broker.id: integers >= 0.  A negative id would collide with
        # NO_LEADER (-1) or with the cluster's own client node (CLIENT_ID) on the transport.
        broker_ids = arguments.integers(broker_ids, "broker ids", errors.InvalidRequest, minimum=0)
        if remote and broker_ids:
            raise errors.InvalidRequest("a client of remote brokers starts none of its own")
        if (not broker_ids and not remote) or len(set(broker_ids)) != len(broker_ids):
            raise errors.InvalidRequest(f"broker ids must be distinct and non-empty: {broker_ids!r}")
        self._closed = False
        self._remote = remote
        self._leaders: dict[TopicPartition, int] = {}  # a remote client's cached leaders
        self.config = validate(config)
        self.metadata = metadata
        try:
            kind = parse_metadata_uri(metadata).kind
        except ValueError as e:
            raise errors.InvalidConfig(f"metadata={metadata!r}: {e}") from None
        # Virtual time with the embedded store, unless the transport is real sockets:
        # their messages travel on the wall clock.
        self.virtual_time = kind == "memory" and not getattr(transport, "real_time", False)
        latency_ms = arguments.integer(latency_ms, "latency_ms", errors.InvalidRequest, minimum=0)
        seed = arguments.integer(seed, "seed", errors.InvalidRequest)
        if self.virtual_time and transport is None and latency_ms == 0 and self.config["replica.fetch.wait.max.ms"] == 0:
            # Every follower would fetch again at once, forever, without virtual time moving.
            raise errors.InvalidConfig("latency_ms=0 with replica.fetch.wait.max.ms=0: virtual time would never "
                                       "advance (followers re-fetch instantly); give either at least 1")
        self.scheduler = SimScheduler(seed) if self.virtual_time else RealScheduler(seed)
        self._broker_scheduler = broker_scheduler
        self._tmp = None
        if data_dir is None and not remote:
            self._tmp = tempfile.mkdtemp(prefix="kreplica-")
            data_dir = self._tmp
        self.data_dir = Path(data_dir) if data_dir is not None else None
        # ``is None``, not truthiness: a caller's transport that has a length (messages in
        # flight, 0 when idle) is still the caller's.
        self.transport = transport if transport is not None else InProcessTransport(self.scheduler, latency_ms)
        if transport is not None:
            transport.scheduler = self.scheduler
        self.timeline: list[TimelineEvent] = []
        self.observers: list[Callable[[TimelineEvent], None]] = []
        self.brokers: dict[int, Broker] = {}
        self.store = self._admin_session = None
        try:
            self.store = open_store(metadata, self.scheduler, self.config["zookeeper.session.timeout.ms"])
            self._open_admin_session()
            self.zk.ensure_persistent_paths()
            for bid in broker_ids:
                self.brokers[bid] = self._new_broker(bid)
                self.brokers[bid].start()
            if not self.run_until(lambda: self.controller_id is not None, 30_000):
                raise errors.RequestTimedOut("no controller was elected")
        except BaseException:
            self.close()  # an unreachable store, say: nothing started is left behind
            raise

    @classmethod
    def embedded(cls, brokers: Sequence[int] = (1001, 1002, 1003), data_dir: str | Path | None = None,
                 metadata: str = "memory", seed: int = 0, config: dict[str, Any] | None = None,
                 transport: Transport | None = None, latency_ms: int = 1,
                 broker_scheduler: BrokerScheduler | None = None) -> "Cluster":
        """In-process brokers; ``latency_ms`` is the one-way delay of every message.

        ``broker_scheduler(broker_id, scheduler)``, when given, returns the scheduler
        each broker incarnation (each start) runs on instead of the shared one -- the
        simulator's hook to pause one broker process as a whole.
        """
        return cls(brokers, data_dir, metadata, seed, config, transport, latency_ms, broker_scheduler)

    # ---- the admin session ---------------------------------------------------------
    def _open_admin_session(self) -> None:
        """A new store session for the cluster's own reads and admin writes; the expired one,
        if any, is closed once it is replaced (a store out of reach keeps it, to try again)."""
        session = self.store.session("admin")
        old, self._admin_session = self._admin_session, session
        self._zk = KafkaZkClient(session, self.scheduler)
        if old is not None:
            with contextlib.suppress(StoreError):
                old.close()

    @property
    def zk(self) -> KafkaZkClient:
        """The cluster's client of the store.  A session the store expired (a ZooKeeper
        outage longer than the session timeout) is replaced at the next use, as Kafka's
        ZooKeeper client re-initialises; otherwise every call after it failed for good."""
        if getattr(self._admin_session, "expired", False) and not self._closed:
            self._open_admin_session()
        return self._zk

    def _new_broker(self, bid: int) -> Broker:
        hook = self._broker_scheduler
        scheduler = self.scheduler if hook is None else hook(bid, self.scheduler)
        return Broker(bid, self.data_dir / f"broker-{bid}", self.store, self.transport,
                      scheduler, self.config, observer=self._observe)

    def _observe(self, kind: str, broker: int, **details: Any) -> None:
        event = TimelineEvent(self.scheduler.now_ms(), kind, broker, details)
        self.timeline.append(event)
        # Everyone observing when it happened hears it, though one stops observing meanwhile.
        for fn in tuple(self.observers):
            fn(event)

    # ---- time ----------------------------------------------------------------------
    def now_ms(self) -> int:
        return self.scheduler.now_ms()

    @_refused_once_closed
    def advance(self, ms: int) -> None:
        # 1.5 was cut to 1 by the simulated scheduler and True taken as 1: refused here, as
        # every other span the Cluster takes.
        self.scheduler.advance(_span(ms, "ms"))

    @_refused_once_closed
    def run_until(self, predicate: Callable[[], bool], timeout_ms: int = 30_000) -> bool:
        if not callable(predicate):  # else a TypeError from deep in the scheduler's loop
            raise errors.InvalidRequest(f"predicate must be callable, got {type(predicate).__name__}")
        return self.scheduler.run_until(predicate, _span(timeout_ms))

    # ---- membership ----------------------------------------------------------------
    @property
    @_refused_once_closed
    def controller_id(self) -> int | None:
        return self.zk.get_controller_id()

    def live_brokers(self) -> list[int]:
        if self._remote and not self._closed:
            return sorted(self.zk.get_live_broker_ids())
        return sorted(b for b, broker in self.brokers.items() if broker.alive)

    def _in_process(self, what: str) -> None:
        if self._remote:
            raise errors.InvalidRequest(f"{what} looks inside brokers, and these run in other processes")

    def _broker(self, broker_id: int) -> Broker:
        # "1001" would otherwise be reported as "no broker 1001" beside a running broker 1001.
        broker_id = arguments.integer(broker_id, "broker_id", errors.InvalidRequest)
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise errors.BrokerNotAvailable(f"no broker {broker_id} in this cluster") from None

    @_refused_once_closed
    def kill(self, broker_id: int) -> None:
        """Crash a broker: its session is abandoned and expires after the session timeout."""
        self._broker(broker_id).kill()

    @_refused_once_closed
    def start(self, broker_id: int) -> None:
        """(Re)start a broker, recovering its logs from disk."""
        old = self._broker(broker_id)
        if old.alive:
            raise errors.InvalidRequest(f"broker {broker_id} is already running")
        # The id it was built with (a plain int), not the one given: a NumPy integer names
        # the broker, but would reach the store's JSON as numpy.int64.
        broker_id = old.broker_id
        self.brokers[broker_id] = self._new_broker(broker_id)
        self.brokers[broker_id].start()

    @_refused_once_closed
    def controlled_shutdown(self, broker_id: int, timeout_ms: int = 120_000) -> bool:
        """Move leadership off ``broker_id`` (seed 003), then stop it; True if nothing was left."""
        broker = self._broker(broker_id)
        timeout_ms = _span(timeout_ms)  # before the shutdown starts, not after
        if not broker.alive:
            raise errors.BrokerNotAvailable(f"broker {broker_id} is not running")
        result: list[bool] = []
        broker.controlled_shutdown(result.append)
        if not self.run_until(lambda: bool(result) or not broker.alive, timeout_ms):
            raise errors.RequestTimedOut(f"controlled shutdown of {broker_id} did not finish")
        return bool(result) and result[0]  # killed before it finished: not a controlled shutdown

    # ---- admin ---------------------------------------------------------------------
    @_refused_once_closed
    def create_topic(self, topic: str, partitions: int | None = None, replication_factor: int | None = None,
                     assignment: dict[int, Sequence[int]] | None = None,
                     config: dict[str, Any] | None = None, wait: bool = True) -> None:
        """Write the topic's assignment (kafka-topics.sh --create); wait until every partition leads.

        Without an ``assignment``, ``partitions`` and ``replication_factor`` default to the
        broker configs ``num.partitions`` and ``default.replication.factor``, as a Kafka
        broker fills in a CreateTopics request that leaves them out; with one, they are
        checked against it when given.
        """
        topic = _topic(topic)
        if assignment is None:
            if partitions is None:
                partitions = self.config["num.partitions"]
            if replication_factor is None:
                replication_factor = self.config["default.replication.factor"]
        admin.create_topic(self.zk, topic, partitions, replication_factor,
                           assignment=assignment, config=config, rng=self.scheduler.rng)
        if wait and not self.run_until(lambda: self._all_have_leaders(topic), 60_000):
            raise errors.RequestTimedOut(f"partitions of {topic} got no leader")

    @_refused_once_closed
    def add_partitions(self, topic: str, partitions: int, assignment: dict[int, Sequence[int]] | None = None,
                       wait: bool = True) -> dict[int, list[int]]:
        """Grow ``topic`` to ``partitions`` partitions (kafka-topics.sh --alter --partitions);
        returns the new partitions' assignment.  Placed as Kafka 0.10 places them unless an
        ``assignment`` names each new partition's replicas (see :func:`admin.add_partitions`);
        with ``wait``, returns once every new partition leads (an old one that is offline
        is not waited for, as Kafka's CreatePartitions waits for the new ones only).  A key's
        partition (key hash modulo the count) changes for most keys."""
        topic = _topic(topic)
        added = admin.add_partitions(self.zk, topic, partitions, assignment)
        if wait and not self.run_until(lambda: self._all_have_leaders(topic, added), 60_000):
            raise errors.RequestTimedOut(f"new partitions of {topic} got no leader")
        return added

    def _all_have_leaders(self, topic: str, partitions: Iterable[int] | None = None) -> bool:
        """Does each partition of ``topic`` (or each of ``partitions``) have a ready leader?"""
        try:
            d = self.describe(topic)
        except errors.UnknownTopicOrPartition:
            return False
        wanted = d.partitions if partitions is None else [p for p in d.partitions if p.partition in partitions]
        return all(p.leader != NO_LEADER and self._leader_ready(topic, p) for p in wanted)

    def _leader_ready(self, topic: str, p: PartitionDescription) -> bool:
        if self._remote:  # elected, and live; produce and fetch retry until it has heard
            return p.leader in self.zk.get_live_broker_ids()
        broker = self.brokers.get(p.leader)
        if broker is None or not broker.alive or broker.replica_manager is None:
            return False
        part = broker.replica_manager.partitions.get(TopicPartition(topic, p.partition))
        return part is not None and part.is_leader and part.leader_epoch >= p.leader_epoch

    @_refused_once_closed
    def alter_topic_config(self, topic: str, set_config: dict[str, Any] | None = None,
                           delete: Sequence[str] = (), wait: bool = True) -> dict[str, str]:
        """Change a topic's overrides (kafka-configs.sh --alter --entity-type topics): ``set_config``
        adds or replaces keys, ``delete`` drops them.  Returns the overrides now in force;
        with ``wait``, once every live broker hosting the topic has applied them (brokers in
        other processes apply them as they hear of the change; nothing here waits)."""
        topic = _topic(topic)
        now = admin.alter_topic_config(self.zk, topic, set_config, delete)
        wait = wait and not self._remote
        if wait and not self.run_until(lambda: self.topic_config_applied(topic, now), 30_000):
            raise errors.RequestTimedOut(f"brokers did not apply the new config of {topic}")
        return now

    @_refused_once_closed
    def topic_config_applied(self, topic: str, overrides: dict[str, str] | None = None) -> bool:
        """Do all live replicas of ``topic`` run with ``overrides`` (default: what the store holds)?
        A topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION, not vacuously applied."""
        topic = _topic(topic)
        self._in_process("topic_config_applied")
        if not self.zk.topic_exists(topic):
            raise errors.UnknownTopicOrPartition(f"topic {topic!r} does not exist")
        if overrides is None:
            overrides = self.zk.get_topic_config(topic)
        for broker in self.brokers.values():
            rm = broker.replica_manager
            if not broker.alive or rm is None:
                continue
            config, log_config = rm.configs_with(sorted(overrides.items()))
            for tp, p in rm.partitions.items():
                if tp.topic == topic and (p.log.config != log_config
                                          or p.min_insync_replicas != config["min.insync.replicas"]):
                    return False
        return True

    @_refused_once_closed
    def delete_topic(self, topic: str, wait: bool = True) -> None:
        topic = _topic(topic)
        if not self.config["delete.topic.enable"]:
            # Kafka's brokers refuse DeleteTopics outright then (the controller would drop the request).
            raise errors.TopicDeletionDisabled(f"delete.topic.enable is false: {topic!r} stays")
        admin.delete_topic(self.zk, topic)
        if wait and not self.run_until(lambda: not self.zk.topic_exists(topic), 60_000):
            raise errors.RequestTimedOut(f"deletion of {topic} did not finish")

    @_refused_once_closed
    def reassign(self, topic: str, partition: int, replicas: Sequence[int], wait: bool = True,
                 timeout_ms: int = 120_000) -> None:
        tp = _partition_of(topic, partition)
        timeout_ms = _span(timeout_ms)
        admin.reassign_partitions(self.zk, {tp: replicas})
        if wait and not self.run_until(lambda: not self.zk.reassignment_in_progress(), timeout_ms):
            raise errors.RequestTimedOut(f"reassignment of {tp} did not finish")

    @_refused_once_closed
    def elect_preferred_leaders(self, topic: str, wait: bool = True, timeout_ms: int = 60_000) -> dict[int, int]:
        """Ask the controller to give each partition of ``topic`` to its preferred (first)
        replica, through ``/admin/preferred_replica_election``.  With ``wait``, returns the
        partitions still led by another replica, each with PREFERRED_LEADER_NOT_AVAILABLE's
        code (its preferred replica is down or out of the ISR) -- empty when all moved --
        and raises REQUEST_TIMED_OUT when the controller has not taken the request in
        ``timeout_ms``.  Without ``wait``, returns {} at once."""
        timeout_ms = _span(timeout_ms)
        topic = _topic(topic)  # a str subclass as its text, in the request and the errors alike
        d = self.describe(topic)
        admin.elect_preferred_leaders(self.zk, [TopicPartition(topic, p.partition) for p in d.partitions])
        if not wait:
            return {}
        if not self.run_until(lambda: not self.zk.get_preferred_replica_election(), timeout_ms):
            raise errors.RequestTimedOut(f"preferred leader election for {topic} was not taken up")
        return {p.partition: errors.PreferredLeaderNotAvailable.code
                for p in self.describe(topic).partitions if p.replicas and p.leader != p.replicas[0]}

    # ---- describe ------------------------------------------------------------------
    @_refused_once_closed
    def topics(self) -> list[str]:
        return sorted(self.zk.get_all_topics())

    @_refused_once_closed
    def describe(self, topic: str) -> TopicDescription:
        topic = _topic(topic)
        return describe_topic(self.zk, topic)

    @_refused_once_closed
    def describe_text(self, topic: str | None = None) -> str:
        """``kafka-topics.sh --describe`` output, in the 0.10 layout of seed 003."""
        topics = [topic] if topic is not None else self.topics()
        return "".join(format_describe(self.describe(t)) for t in topics)

    @_refused_once_closed
    def offsets(self, topic: str, partition: int) -> dict[int, tuple[int, int]]:
        """{broker_id: (log_end_offset, high_watermark)} for each live replica."""
        self._in_process("offsets")
        tp = _partition_of(topic, partition)
        self._assigned_replicas(tp)
        out = {}
        for bid, broker in sorted(self.brokers.items()):
            rm = broker.replica_manager
            if broker.alive and rm is not None and tp in rm.partitions:
                part = rm.partitions[tp]
                if part.log is not None:
                    out[bid] = (part.log_end_offset, part.high_watermark)
        return out

    def _assigned_replicas(self, tp: TopicPartition) -> list[int]:
        """The partition's replicas; UNKNOWN_TOPIC_OR_PARTITION when the topic lacks it."""
        replicas = self.zk.get_topic_assignment(tp.topic).get(tp.partition)
        if replicas is None:
            raise errors.UnknownTopicOrPartition(f"topic {tp.topic!r} has no partition {tp.partition}")
        return replicas

    # ---- client --------------------------------------------------------------------
    @_refused_once_closed
    def leader_for(self, topic: str, partition: int) -> int:
        tp = _partition_of(topic, partition)
        states = self.zk.get_partition_states([tp])
        if not states:
            self._assigned_replicas(tp)
            return NO_LEADER  # created, not yet elected
        return states[tp].leader

    def _request(self, dst: int, request: Any, timeout_ms: int) -> Any:
        box: list[Any] = []
        self.transport.send(CLIENT_ID, dst, request, box.append)
        if not self.run_until(lambda: bool(box), timeout_ms):
            return None
        return box[0]

    def _with_retries(self, topic: str, partition: int, attempt: Callable[[int], tuple[int, Any]],
                      retries: int | None, backoff_ms: int, delivery_timeout_ms: int) -> Any:
        """Kafka's client loop: find the leader, try, and on a retriable error back off,
        refresh and try again, until ``retries`` or ``delivery_timeout_ms`` runs out."""
        last = errors.LeaderNotAvailable.code
        # Checked before the first attempt: a bad back-off or deadline failed only at the
        # first retry (a TypeError, or ValueError from the scheduler), after a request was sent.
        if retries is not None:
            retries = arguments.integer(retries, "retries", errors.InvalidRequest, minimum=0)
        backoff_ms = _span(backoff_ms, "backoff_ms")
        delivery_timeout_ms = _span(delivery_timeout_ms, "delivery_timeout_ms")
        deadline = self.now_ms() + delivery_timeout_ms
        tries = 0
        tp = TopicPartition(topic, partition)
        while True:
            leader = self._leaders.get(tp)
            if leader is None:
                leader = self.leader_for(topic, partition)
                if self._remote and leader != NO_LEADER:
                    # A client of remote brokers keeps the leader it found, as Kafka's clients
                    # keep their metadata: reading it costs a ZooKeeper round trip each time.
                    self._leaders[tp] = leader
            if leader != NO_LEADER:
                tries += 1
                code, value = attempt(leader)
                if code == errors.NONE:
                    return value
                self._leaders.pop(tp, None)  # refreshed before the next attempt
                if code not in _RETRIABLE:
                    errors.raise_for_code(code, f"{topic}-{partition}")
                last = code
            if (retries is not None and tries > retries) or self.now_ms() >= deadline:
                errors.raise_for_code(last, f"{topic}-{partition}: gave up after {tries} attempts")
            self.advance(backoff_ms)

    @_refused_once_closed
    def produce(self, topic: str, partition: int, values: Iterable[Any], acks: Any = None,
                timeout_ms: int | None = None, retries: int | None = None, backoff_ms: int = 100,
                delivery_timeout_ms: int = 120_000) -> int:
        """Append ``values`` (bytes, or (key, value) tuples) to the leader; return the base offset.

        acks=all waits until the whole ISR has the records (HW past them); the
        Kafka-named error is raised when that cannot happen.
        """
        acks_i = parse_acks(self.config["acks"] if acks is None else acks)
        timeout = self.config["request.timeout.ms"] if timeout_ms is None else timeout_ms
        timeout = _span(timeout)
        tp = _partition_of(topic, partition)
        try:
            batch = encode_batch(list(values), timestamp_ms=self.now_ms())
        except (TypeError, ValueError) as e:
            raise errors.InvalidRecord(f"{tp}: {e}") from e

        def attempt(leader: int) -> tuple[int, Any]:
            req = ProduceRequest(acks_i, timeout, (ProducePartition(tp, batch),))
            if acks_i == 0:
                self.transport.send(CLIENT_ID, leader, req, None)
                return errors.NONE, -1
            resp = self._request(leader, req, timeout + 1000)
            if resp is None or resp is DISCONNECTED or not isinstance(resp, ProduceResponse):
                return errors.NetworkException.code, None
            r = resp.partitions[0]
            return r.error_code, r.base_offset

        return self._with_retries(tp.topic, tp.partition, attempt, retries, backoff_ms, delivery_timeout_ms)

    @_refused_once_closed
    def fetch(self, topic: str, partition: int, offset: int = 0, max_bytes: int = 1 << 20,
              isolation: str = "committed", retries: int | None = None, backoff_ms: int = 100,
              delivery_timeout_ms: int = 120_000) -> list[Record]:
        """Records from ``offset`` up to the leader's HW (committed), each with
        .offset .timestamp .key .value .headers.  ``isolation="uncommitted"`` reads to
        the leader's log end instead (what is not yet replicated)."""
        # A str first: a list or a dict is unhashable, and ``in`` a frozenset raised a bare TypeError.
        if not isinstance(isolation, str) or isolation not in ISOLATION_LEVELS:
            raise errors.InvalidRequest(f"isolation={isolation!r}: expected one of {sorted(ISOLATION_LEVELS)}")
        tp = _partition_of(topic, partition)
        if type(offset) is not int or offset < 0:  # no offset is negative (a consumer's seek refuses one)
            offset = arguments.integer(offset, "offset", errors.InvalidRequest, minimum=0)
        # A consumer's fetch.max.bytes: an int >= 0 (0 still returns the first batch, KIP-74).
        # "5" failed deep in the request loop with a bare TypeError, and -1 was sent on.
        max_bytes = arguments.integer(max_bytes, "max_bytes", errors.InvalidRequest, minimum=0)
        out: list[Record] = []
        position = offset
        while True:
            def attempt(leader: int) -> tuple[int, Any]:
                req = FetchRequest(-1, (FetchPartition(tp, position, max_bytes=max_bytes),),
                                   isolation=isolation)
                resp = self._request(leader, req, 30_000)
                if resp is None or resp is DISCONNECTED or not isinstance(resp, FetchResponse):
                    return errors.NetworkException.code, None
                return resp.partitions[0].error_code, resp.partitions[0]

            data = self._with_retries(tp.topic, tp.partition, attempt, retries, backoff_ms, delivery_timeout_ms)
            # The first batch may start before ``position`` (a fetch from mid-batch).
            out.extend(decode_records(data.records, start_offset=position))
            # The next fetch starts after the last batch answered, not after its last record,
            # as a Kafka consumer moves on: a compacted batch ends past its last record (or
            # holds none), and a fetch from inside it is answered that batch again.
            batches = list(decode_batches(data.records))
            if not batches or batches[-1].next_offset <= position:
                return out
            position = batches[-1].next_offset

    @_refused_once_closed
    def offset_range(self, topic: str, partition: int, retries: int | None = None, backoff_ms: int = 100,
                     delivery_timeout_ms: int = 120_000) -> tuple[int, int]:
        """(log start offset, high watermark) as the partition's leader has them: where a
        consumer can start and where the committed records end (a Kafka consumer's
        beginningOffsets and endOffsets)."""
        tp = _partition_of(topic, partition)

        def attempt(leader: int) -> tuple[int, Any]:
            # Offset 0 is below the log start once retention has run: the leader then answers
            # OFFSET_OUT_OF_RANGE, with both offsets all the same.
            req = FetchRequest(-1, (FetchPartition(tp, 0, max_bytes=1),))
            resp = self._request(leader, req, 30_000)
            if resp is None or resp is DISCONNECTED or not isinstance(resp, FetchResponse):
                return errors.NetworkException.code, None
            d = resp.partitions[0]
            code = errors.NONE if d.error_code == errors.OffsetOutOfRange.code else d.error_code
            return code, (d.log_start_offset, d.high_watermark)

        return self._with_retries(tp.topic, tp.partition, attempt, retries, backoff_ms, delivery_timeout_ms)

    # ---- teardown ------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for broker in self.brokers.values():
            if broker.alive:
                broker.stop()
        try:
            if self._admin_session is not None:
                self._admin_session.close()
        except Exception:  # noqa: BLE001 - best effort on teardown
            pass
        if self.store is not None:
            self.store.close()
        if self._remote:
            self.transport.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    @_refused_once_closed
    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

