"""ControllerBrokerRequestBatch: what the controller tells each broker, batched.

Theory of operation.  A state-machine pass (``handle_state_changes``) decides
many partitions at once; it adds per-broker LeaderAndIsr, UpdateMetadata and
StopReplica entries to the batch, and :meth:`send` turns them into at most one
request of each kind per broker (seed 001 A.4: "For efficiency, we can put
multiple commands in one RPC request").  Every request carries the sending
controller's epoch so brokers fence a deposed controller (seed 001 'D'), and the
addressee's broker epoch (KIP-380) so a request delayed past the broker's restart
or re-registration -- a controller frozen in a GC pause, say -- is refused by the
new incarnation, which knows no newer controller epoch yet.

Adding a LeaderAndIsr entry for a partition also queues UpdateMetadata for it
to every live (or shutting-down) broker, as seed 002 lists for each transition
that sends LeaderAndIsr.  A partition of a topic queued for deletion is named
deleted in every UpdateMetadata, as Kafka 0.10 filters ``partitionsToBeDeleted``
out of the live states: a broker starting, or a failover, while the deletion
waits for a dead broker must not bring the topic back into the brokers' metadata.
Requests to brokers that are not alive are dropped: the broker will get the full
picture when it comes back (onBrokerStartup).
Sending is sans-I/O: ``channel.send(broker_id, request, on_response)``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Protocol

from ..protocol import (
    LeaderAndIsr,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from .context import ControllerContext, PartitionReplica

# Called once per replica whose StopReplica(delete=True) was answered.
StopReplicaCallback = Callable[[PartitionReplica, int], None]


class Channel(Protocol):
    def send(self, broker_id: int, request: object, on_response: Callable[[object], None]) -> None: ...


class ControllerBrokerRequestBatch:
    def __init__(self, controller_id: int, ctx: ControllerContext, channel: Channel,
                 topic_config: Callable[[str], tuple[tuple[str, str], ...]] = lambda topic: (),
                 being_deleted: Callable[[str], bool] = lambda topic: False) -> None:
        self._controller_id = controller_id
        self._ctx = ctx
        self._channel = channel
        self._topic_config = topic_config
        # Topics queued for deletion: their partitions are only ever named deleted in
        # UpdateMetadata (Kafka 0.10's partitionsToBeDeleted), never live again.
        self._being_deleted = being_deleted
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}
        self._stop_callbacks: dict[int, dict[TopicPartition, StopReplicaCallback]] = {}
        self._update_metadata: dict[int, set[TopicPartition]] = {}
        self._update_metadata_deleted: set[TopicPartition] = set()
        self._init_brokers: set[int] = set()
        self.requests_sent = 0

    def new_batch(self) -> None:
        """Start a batch; a batch left unsent by an exception is discarded."""
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._stop_callbacks.clear()
        self._update_metadata.clear()
        self._update_metadata_deleted.clear()

    def mark_init(self, broker_ids: Iterable[int]) -> None:
        """The next LeaderAndIsr to these brokers is this controller's first (seed 001 C.3)."""
        self._init_brokers.update(broker_ids)

    def add_leader_and_isr(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        state: LeaderAndIsr,
        replicas: Iterable[int],
        is_new: bool = False,
    ) -> None:
        entry = LeaderAndIsrPartitionState(
            tp, state.controller_epoch, state.leader, state.leader_epoch, state.isr,
            state.zk_version, tuple(replicas), is_new, self._topic_config(tp.topic),
        )
        for b in broker_ids:
            if b >= 0:
                self._leader_and_isr.setdefault(b, {})[tp] = entry
        self.add_update_metadata(self._ctx.live_or_shutting_down_broker_ids, (tp,))

    def add_stop_replica(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        delete: bool,
        callback: StopReplicaCallback | None = None,
    ) -> None:
        leadership = self._ctx.leadership.get(tp)
        epoch = leadership.leader_epoch if leadership is not None else -1
        for b in broker_ids:
            prev = self._stop_replica.setdefault(b, {}).get(tp)
            # A delete request must not be downgraded by a later non-delete one.
            self._stop_replica[b][tp] = StopReplicaPartition(tp, delete or (prev is not None and prev.delete), epoch)
            if callback is not None:
                self._stop_callbacks.setdefault(b, {})[tp] = callback

    def add_update_metadata(
        self,
        broker_ids: Iterable[int],
        tps: Iterable[TopicPartition] | None = None,
        deleted: bool = False,
    ) -> None:
        """Queue metadata for ``tps`` (all known partitions when None) to the brokers."""
        chosen = set(self._ctx.leadership) if tps is None else set(tps)
        if deleted:
            self._update_metadata_deleted.update(chosen)
        for b in broker_ids:
            self._update_metadata.setdefault(b, set()).update(chosen)

    # -- sending -------------------------------------------------------------
    def send(self, controller_epoch: int) -> None:
        live = self._ctx.live_or_shutting_down_broker_ids
        cid = self._controller_id
        for b, states in sorted(self._leader_and_isr.items()):
            if b not in live:
                continue
            # Kafka 0.10 lists the live (or shutting-down) brokers among the leaders: not -1,
            # nor a dead leader of a state re-sent as found (a failover's, say).
            leaders = tuple(sorted({s.leader for s in states.values() if s.leader in live}))
            req = LeaderAndIsrRequest(cid, controller_epoch, tuple(states.values()), leaders,
                                      is_init=b in self._init_brokers, broker_epoch=self._broker_epoch(b))
            self._init_brokers.discard(b)
            self._emit(b, req, _ignore)
        self._send_update_metadata(controller_epoch, live)
        for b, parts in sorted(self._stop_replica.items()):
            if b not in live:
                continue
            req = StopReplicaRequest(cid, controller_epoch, tuple(parts.values()), self._broker_epoch(b))
            callbacks = self._stop_callbacks.get(b, {})
            self._emit(b, req, _stop_replica_handler(b, dict(callbacks), self._ctx, req.broker_epoch))
        self.new_batch()

    def _send_update_metadata(self, controller_epoch: int, live: frozenset[int]) -> None:
        if not self._update_metadata:
            return
        live_brokers = tuple(sorted(live))
        # Usually every broker gets the same partitions: build each distinct set once.
        built: dict[frozenset[TopicPartition], UpdateMetadataRequest] = {}
        for b, tps in sorted(self._update_metadata.items()):
            if b not in live:
                continue
            key = frozenset(tps)
            req = built.get(key)
            if req is None:
                states = []
                deleted = []
                for tp in sorted(key):
                    if tp in self._update_metadata_deleted or self._being_deleted(tp.topic):
                        deleted.append(tp)
                    else:
                        s = self._metadata_state(tp, live)
                        if s is not None:
                            states.append(s)
                req = UpdateMetadataRequest(self._controller_id, controller_epoch, tuple(states),
                                            live_brokers, tuple(deleted))
                built[key] = req
            self._emit(b, replace(req, broker_epoch=self._broker_epoch(b)), _ignore)

    def _broker_epoch(self, broker_id: int) -> int:
        return self._ctx.broker_epochs.get(broker_id, -1)

    def _metadata_state(self, tp: TopicPartition, live: frozenset[int]) -> UpdateMetadataPartitionState | None:
        st = self._ctx.leadership.get(tp)
        if st is None:
            return None
        replicas = tuple(self._ctx.assignment(tp))
        offline = tuple(r for r in replicas if r not in live)
        return UpdateMetadataPartitionState(
            tp, st.controller_epoch, st.leader, st.leader_epoch, st.isr, st.zk_version, replicas, offline
        )

    def _emit(self, broker_id: int, request: object, on_response: Callable[[object], None]) -> None:
        self.requests_sent += 1
        self._channel.send(broker_id, request, on_response)


def _ignore(response: object) -> None:
    """LeaderAndIsr/UpdateMetadata answers need no controller action (Kafka 0.10)."""


def _stop_replica_handler(
    broker_id: int, callbacks: dict[TopicPartition, StopReplicaCallback], ctx: ControllerContext,
    broker_epoch: int,
) -> Callable[[object], None]:
    def on_response(response: object) -> None:
        if not callbacks or not isinstance(response, StopReplicaResponse):
            return
        if ctx.broker_epochs.get(broker_id, -1) != broker_epoch:
            # Sent to a registration of the broker that has gone since (Kafka drops its channel to
            # a failed broker, queue and answers): a late answer -- STALE_BROKER_EPOCH from the
            # broker's next incarnation, say -- must not fail a deletion the new request carries on.
            return
        errors_by_tp = dict(response.partition_errors)
        for tp, cb in callbacks.items():
            code = response.error_code or errors_by_tp.get(tp, 0)
            cb(PartitionReplica(tp, broker_id), code)

    return on_response
