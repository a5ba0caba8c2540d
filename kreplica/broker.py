"""Broker: a ReplicaManager, a controller candidate and a metadata-store session.

Theory of operation.  A broker is the unit that lives and dies.  ``start()``
opens its store session, recovers its logs from ``data_dir``, registers the
ephemeral ``/brokers/ids/<id>`` node and stands for controller.  Requests reach
it through the transport and are dispatched by type: controller requests and
data-plane requests to the :class:`ReplicaManager`, controlled shutdown to the
controller when this broker is the active one.

ISR changes proposed by a leader (``AlterIsrRequest``) are carried out here, as
Kafka 0.10-2.6 brokers do: a write of the partition-state node conditional on
the version the leader knows, then an ``/isr_change_notification`` so the
controller learns of it.  A write that lost to a newer state (the controller
elected someone else meanwhile) is refused and dropped (seed 001 'D').  A write
whose outcome is unknown (the store connection was lost) is retried, the
partition's proposal still pending, until the store answers; a retry that finds
its own proposal already stored (the first attempt landed, its reply was lost)
succeeds, as Kafka's conditional ISR update does.  Dropping it instead would let
the leader forget a follower the store has in the ISR and move the HW without it.
The notification is retried too: the controller hears of the change only from it.

``kill()`` is a crash: nothing is flushed or closed cleanly, the session is
abandoned (the store expires it after ``zookeeper.session.timeout.ms``).  A
broker whose logs were not all closed cleanly says so in its registration, as
KIP-966's brokers do (they register with previous broker epoch -1): the node
carries the controller epoch it read after restarting, for the whole life of the
process (a session expiry re-registers with the same value), and the controller
then never lets it resume a leadership it held before the crash (see
:mod:`kreplica.controller.controller`).
``controlled_shutdown()`` asks the controller to move leadership away first
and retries while partitions remain (seed 003), then closes everything cleanly.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from . import errors
from .config import validate
from .controller.controller import KafkaController
from .meta import layout
from .meta.kafka_zk_client import KafkaZkClient
from .meta.store import ConnectionLoss, MetadataStore, NodeExists, Session, SessionExpired, StoreError
from .protocol import (
    AlterIsrRequest,
    AlterIsrResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsr,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from .replica.replica_manager import ReplicaManager
from .runtime import Scheduler
from .transport import DISCONNECTED, Transport

REGISTRATION_RETRY_MS = 500
ALTER_ISR_RETRY_MS = 100

# Observer of what a broker does: event(kind, broker_id, **details).
Observer = Callable[..., None]

# Controller requests fenced by broker epoch (KIP-380), and how each is refused.
_EPOCH_FENCED = {
    LeaderAndIsrRequest: LeaderAndIsrResponse,
    StopReplicaRequest: StopReplicaResponse,
    UpdateMetadataRequest: UpdateMetadataResponse,
}


class Broker:
    def __init__(
        self,
        broker_id: int,
        data_dir: str | os.PathLike[str],
        store: MetadataStore,
        transport: Transport,
        scheduler: Scheduler,
        config: dict[str, Any] | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.store = store
        self.transport = transport
        self.scheduler = scheduler
        self.config = validate(config)
        self.observer = observer or (lambda *a, **k: None)
        self.alive = False
        self.port: int | None = None  # where it listens over real sockets (None in-process)
        self.session: Session | None = None
        self.zk: KafkaZkClient | None = None
        # KIP-380's broker epoch: the session that registered /brokers/ids/<id> (-1 until then).
        self.broker_epoch = -1
        self._last_config_change: int | None = None
        self.controller: KafkaController | None = None
        self.replica_manager: ReplicaManager | None = None
        self.shutting_down = False
        # The controller epoch read after an unclean restart (None: the logs were closed cleanly).
        self.unclean_shutdown_controller_epoch: int | None = None

    # ---- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Recover logs, join the cluster, stand for controller."""
        self.replica_manager = ReplicaManager(
            self.broker_id, self.data_dir, self.scheduler, self.config,
            send=self._send, alter_isr=self._alter_isr,
        )
        self.replica_manager.startup()
        self.unclean_shutdown_controller_epoch = None
        self._last_config_change: int | None = None  # a new process starts listening afresh
        # Registered under the port it listens on, where it has one (real sockets).
        self.port = self.transport.register(self.broker_id, self._handle)
        self.alive = True
        try:
            self._open_session()
        except BaseException:
            self._leave(clean=True)  # no store to join: not half started, and start() may be retried
            raise
        self.observer("broker_started", self.broker_id)

    def _open_session(self) -> None:
        """A new store session (the previous one, if any, is closed first), then registration.

        Only the session in use may report its expiry: an abandoned one expiring later must
        not tear down the session that has registered since."""
        old, self.session = self.session, None
        if old is not None:
            try:
                old.close()
            except StoreError:
                pass
        session = self.store.session(f"broker-{self.broker_id}",
                                     on_expired=lambda: self._on_session_expired(session))
        self.session = session
        self.broker_epoch = -1  # KIP-380: known once this session has registered the broker
        self.zk = KafkaZkClient(session, self.scheduler)
        self._register(self.zk)

    def _register(self, zk: KafkaZkClient) -> None:
        """Register ``/brokers/ids/<id>``, then stand for controller.

        A restart soon after a crash finds the old session's ephemeral node still
        there; like Kafka since KAFKA-7165 we retry until the old session expires
        instead of failing the start.  A store out of reach is retried the same way
        (the session-expiry path takes over if the session is lost meanwhile).
        """
        if not self.alive or zk is not self.zk:
            return
        try:
            rm = self.replica_manager
            zk.ensure_persistent_paths()
            if rm is not None and rm.recovered_uncleanly and self.unclean_shutdown_controller_epoch is None:
                # Read after the crash: every leadership this broker held before it was
                # written by a controller of this epoch or older.
                current = zk.get_controller_epoch()
                self.unclean_shutdown_controller_epoch = -1 if current is None else current[0]
            endpoint = {} if self.port is None else {"port": self.port}
            zk.register_broker(self.broker_id, **endpoint,
                               unclean_shutdown_controller_epoch=self.unclean_shutdown_controller_epoch)
            self.broker_epoch = zk.session.session_id
        except (NodeExists, ConnectionLoss):
            self.scheduler.call_later(REGISTRATION_RETRY_MS, self._register, zk)
            return
        except SessionExpired:
            return  # _on_session_expired opens a new session and registers again
        self._watch_config_changes(zk)
        self.controller = KafkaController(self.broker_id, zk, self, self.scheduler, self.config)
        self.controller.startup()
        self.observer("broker_registered", self.broker_id)

    # ---- topic config changes (Kafka's DynamicConfigManager) ---------------------------------
    def _watch_config_changes(self, zk: KafkaZkClient) -> None:
        """Apply the topic overrides announced under ``/config/changes`` to the hosted replicas.

        The first listing of a process only marks where it starts: the replicas it starts
        get their topic's current overrides from the controller.  A later session (after
        an expiry) applies what it missed.
        """
        if not self.alive or zk is not self.zk:
            return
        try:
            names = zk.get_config_changes(watch=lambda _event: self._watch_config_changes(zk))
            last = self._last_config_change
            seqs = [layout.change_sequence(n) for n in names]
            if last is not None:
                fresh = [n for n, seq in zip(names, seqs) if seq > last]
                topics = sorted({t for t in zk.get_config_change_topics(fresh) if t})
                if topics and self.replica_manager is not None and self._apply_topic_configs(zk, topics):
                    self.observer("topic_config_applied", self.broker_id, topics=topics)
        except ConnectionLoss:
            self.scheduler.call_later(REGISTRATION_RETRY_MS, self._watch_config_changes, zk)
            return
        except SessionExpired:
            return  # the next session lists them again
        self._last_config_change = max(seqs, default=-1 if last is None else last)

    def _refresh_topic_configs(self, topics: list[str]) -> None:
        """Replicas just started took their topics' overrides from the LeaderAndIsr, which
        the controller may have built before a change this broker has already applied from
        ``/config/changes`` (to the replicas it hosted then): read the store's now, as
        Kafka reads it when it creates a replica.  Retried while the store is out of reach."""
        zk = self.zk
        if not self.alive or self.replica_manager is None or zk is None:
            return
        try:
            self._apply_topic_configs(zk, topics)
        except (ConnectionLoss, SessionExpired):
            self.scheduler.call_later(REGISTRATION_RETRY_MS, self._refresh_topic_configs, topics)

    def _apply_topic_configs(self, zk: KafkaZkClient, topics: list[str]) -> int:
        """Read the topics' overrides from the store and hand them to the hosted replicas;
        returns how many replicas took them."""
        assert self.replica_manager is not None
        got = zk.get_topic_configs(topics)
        return self.replica_manager.update_topic_configs({t: sorted(o.items()) for t, o in got.items()})

    def _on_session_expired(self, session: Any) -> None:
        """A new session, as Kafka's ZooKeeper client does: re-register and stand again."""
        if not self.alive or self.shutting_down or session is not self.session:
            return
        self.observer("session_expired", self.broker_id)
        if self.controller is not None:
            self.controller.shutdown()
        self._renew_session()

    def _renew_session(self) -> None:
        if not self.alive or self.shutting_down:
            return
        try:
            self._open_session()
        except (ConnectionLoss, SessionExpired):
            # The store is out of reach: try again later.
            self.scheduler.call_later(1000, self._renew_session)

    def kill(self) -> None:
        """Crash: no flush, no clean close; the store expires the abandoned session."""
        self._leave(clean=False)

    def stop(self) -> None:
        """Clean stop (after a controlled shutdown, or on close)."""
        self._leave(clean=True)

    def _leave(self, clean: bool) -> None:
        if not self.alive:
            return
        self.alive = False
        self.transport.unregister(self.broker_id)
        if self.controller is not None:
            self.controller.shutdown()
        if self.replica_manager is not None:
            self.replica_manager.shutdown(clean=clean)
        if self.session is not None:
            try:
                # A crashed process never says goodbye: its session just stops pinging.
                self.session.close() if clean else self.session.kill()
            except StoreError:
                pass
        self.observer("broker_stopped" if clean else "broker_killed", self.broker_id)

    # ---- controlled shutdown (seed 003) ---------------------------------------------
    def controlled_shutdown(self, on_done: Callable[[bool], None]) -> None:
        """Ask the controller to move leadership off this broker; retry while any remains.

        ``on_done(True)`` once the controller reports nothing left (then the broker
        stops cleanly); ``on_done(False)`` after ``controlled.shutdown.max.retries``
        failed attempts, ``controlled.shutdown.retry.backoff.ms`` apart (the broker
        stops anyway, as Kafka does; Kafka makes no attempt at all with 0).  An
        attempt unanswered within ``controller.socket.timeout.ms`` failed (Kafka's
        request timeout on that channel): the answer of a controller that crashed
        right after the request is lost, and waiting for it would hang the shutdown.
        """
        self.shutting_down = True
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = self.config["controlled.shutdown.retry.backoff.ms"]
        timeout_ms = self.config["controller.socket.timeout.ms"]
        attempt = answered = 0

        def finish(ok: bool) -> None:
            self.observer("controlled_shutdown_done", self.broker_id, ok=ok)
            self.stop()
            on_done(ok)

        def try_once() -> None:
            nonlocal attempt
            if not self.alive:
                return  # killed meanwhile: a dead process neither sends nor stops again
            attempt += 1
            controller_id = None
            try:
                controller_id = self.zk.get_controller_id() if self.zk else None
            except StoreError:
                pass
            if controller_id is None:
                return retry()
            this = attempt
            # KIP-380: a process not registered yet (its predecessor's session still holds the
            # registration) sends no epoch, as Kafka's broker before registering.
            request = ControlledShutdownRequest(self.broker_id, self.broker_epoch)
            self.transport.send(self.broker_id, controller_id, request,
                                lambda response: on_response(this, response))
            self.scheduler.call_later(timeout_ms, on_response, this, None)

        def on_response(which: int, response: Any) -> None:
            nonlocal answered
            if which != attempt or answered == which or not self.alive:
                return  # a late answer, the timeout of an attempt already answered, or a dead process
            answered = which
            if (isinstance(response, ControlledShutdownResponse) and response.error_code == 0
                    and not response.partitions_remaining):
                return finish(True)
            retry()

        def retry() -> None:
            if attempt >= retries:
                return finish(False)
            self.scheduler.call_later(backoff, try_once)

        if retries <= 0:
            return finish(False)
        try_once()

    # ---- requests ------------------------------------------------------------------
    def send(self, broker_id: int, request: Any, on_response: Callable[[Any], None]) -> None:
        """The controller's channel to brokers (this broker included)."""
        self._send(broker_id, request, on_response)

    def _send(self, dst: int, request: Any, on_response: Callable[[Any], None]) -> None:
        self.transport.send(self.broker_id, dst, request, on_response)

    def _handle(self, src: int, request: Any, respond: Callable[[Any], None]) -> None:
        rm = self.replica_manager
        assert rm is not None
        refusal = _EPOCH_FENCED.get(type(request))
        if refusal is not None and self._stale_broker_epoch(request.broker_epoch):
            respond(refusal(errors.StaleBrokerEpoch.code))
            return
        if isinstance(request, LeaderAndIsrRequest):
            unhosted = [ps.tp for ps in request.partition_states if ps.tp not in rm.partitions]
            response = rm.handle_leader_and_isr(request)
            self._observe_leader_and_isr(request, response)
            respond(response)
            started = sorted({tp.topic for tp in unhosted if tp in rm.partitions})
            if started:
                self._refresh_topic_configs(started)
            return
        if rm.handle_request(request, respond):
            return
        if isinstance(request, ControlledShutdownRequest):
            c = self.controller
            if c is None or not c.is_active:
                respond(ControlledShutdownResponse(errors.NotController.code))
            else:
                respond(c.handle_controlled_shutdown(request))
        else:
            respond(DISCONNECTED)

    def _stale_broker_epoch(self, broker_epoch: int) -> bool:
        """KIP-380: the request was addressed to an earlier registration of this broker.

        The broker epoch is the session that registered ``/brokers/ids/<id>`` (what
        the controller reads as the node's ephemeral owner).  A controller request
        delayed past this broker's restart -- or past its re-registration after a
        session expiry -- names an older session.  Without this check a restarted
        broker, which knows no controller epoch yet, would apply a deposed
        controller's LeaderAndIsr and could lead an old epoch on an empty log.
        Session ids need not grow, so any other session is stale; the controller
        cannot know a newer one than the broker (it reads it from the registration).
        """
        return broker_epoch >= 0 and (self.session is None or broker_epoch != self.session.session_id)

    def _observe_leader_and_isr(self, request: LeaderAndIsrRequest, response: LeaderAndIsrResponse) -> None:
        """The leader_and_isr event of each partition this broker was told to lead and did:
        a request of an older controller epoch, or a partition state older than the one its
        replica runs, is refused by the replica manager and changes nothing."""
        if response.error_code != errors.NONE:
            return
        applied = {tp for tp, code in response.partition_errors if code == errors.NONE}
        for s in request.partition_states:
            if s.leader == self.broker_id and s.tp in applied:
                self.observer("leader_and_isr", self.broker_id, tp=s.tp, leader=s.leader,
                              leader_epoch=s.leader_epoch, isr=s.isr,
                              controller_epoch=request.controller_epoch)

    # ---- ISR changes (seed 001 'D') ------------------------------------------------
    def _alter_isr(self, request: AlterIsrRequest, on_response: Callable[[AlterIsrResponse], None]) -> None:
        # Answer on the scheduler, never re-entrantly inside the partition's call.
        self.scheduler.call_soon(self._apply_alter_isr, request, on_response, self.replica_manager)

    def _apply_alter_isr(self, request: AlterIsrRequest, on_response: Callable[[AlterIsrResponse], None],
                         proposer: ReplicaManager | None) -> None:
        tp = request.tp
        if not self.alive or self.zk is None or self.replica_manager is not proposer:
            return  # the process that proposed it is gone
        p = proposer.partitions.get(tp)
        if p is None or not p.awaits_isr_answer(request):
            # Overtaken (a LeaderAndIsr, the replica stopped or deleted): a retry must not
            # write a dead proposal, perhaps into a topic re-created under the same name.
            return
        proposed = LeaderAndIsr(self.broker_id, request.leader_epoch, tuple(request.new_isr),
                                request.zk_version, request.controller_epoch)
        try:
            updated, conflicts, failures = self.zk.update_partition_states({tp: proposed})
            if tp in conflicts:
                stored = self.zk.get_partition_states([tp]).get(tp)
                if stored is not None and _same_state(stored, proposed):
                    updated, conflicts = {tp: stored}, []  # our own earlier attempt landed
        except StoreError:
            failures = {tp: None}
        if tp in failures:
            # Unknown outcome: try again (a proposal is never taken back unanswered).
            self.scheduler.call_later(ALTER_ISR_RETRY_MS, self._apply_alter_isr, request, on_response, proposer)
            return
        if tp in updated:
            state = updated[tp]
            self._announce_isr_change(tp, proposer)
            self.observer("isr_changed", self.broker_id, tp=tp, leader_epoch=state.leader_epoch,
                          isr=state.isr, zk_version=state.zk_version)
            on_response(AlterIsrResponse(tp, errors.NONE, state.leader_epoch, state.isr, state.zk_version))
        else:
            # Lost to a newer state (the controller's): the proposal is dropped.
            on_response(AlterIsrResponse(tp, errors.FencedLeaderEpoch.code))

    def _announce_isr_change(self, tp: TopicPartition, proposer: ReplicaManager) -> None:
        """The ``/isr_change_notification`` for an ISR this process wrote, retried while
        the store is out of reach.  The controller learns of the change only from it: a
        reassignment waiting for its new replicas to join the ISR (seed 000 step 4) never
        went on when the one attempt was lost right after the write.  A repeat is harmless:
        the controller re-reads the partition's state."""
        if not self.alive or self.zk is None or self.replica_manager is not proposer:
            return  # the process that wrote it is gone; the next controller reads the states
        try:
            self.zk.create_isr_change_notification([tp])
        except StoreError:
            self.scheduler.call_later(ALTER_ISR_RETRY_MS, self._announce_isr_change, tp, proposer)


def _same_state(a: LeaderAndIsr, b: LeaderAndIsr) -> bool:
    """The same partition state, whatever node version each was read or written at."""
    return (a.leader, a.leader_epoch, a.isr, a.controller_epoch) == (b.leader, b.leader_epoch, b.isr, b.controller_epoch)
