"""A tiny fake broker side for the controller tests (no data plane).

Each "broker" is a store session that registers ``/brokers/ids/<id>`` plus a
controller candidate; one recording channel carries every controller request
and answers it with success on the scheduler (a test may install a responder
to answer otherwise).  Where a test needs an ISR change it writes the state
node as a leader would and creates an ISR change notification
(:meth:`ControllerCluster.leader_sets_isr`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kreplica.config import validate
from kreplica.controller import KafkaController
from kreplica.meta import KafkaZkClient, MemoryStore
from kreplica.meta import layout
from kreplica.protocol import (
    LeaderAndIsr,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kreplica.runtime import SimScheduler

SESSION_TIMEOUT_MS = 6000


@dataclass
class Sent:
    broker_id: int
    request: Any
    at_ms: int


class RecordingChannel:
    def __init__(self, cluster: "ControllerCluster") -> None:
        self.cluster = cluster
        self.sent: list[Sent] = []
        # broker id -> fn(request) -> response, or None to leave unanswered
        self.responders: dict[int, Callable[[Any], Any]] = {}

    def send(self, broker_id: int, request: Any, on_response: Callable[[Any], None]) -> None:
        self.sent.append(Sent(broker_id, request, self.cluster.sched.now_ms()))
        if broker_id not in self.cluster.sessions:
            return
        responder = self.responders.get(broker_id, success)
        response = responder(request)
        if response is not None:
            self.cluster.sched.call_soon(on_response, response)

    def requests(self, kind: type, broker_id: int | None = None) -> list[Any]:
        return [s.request for s in self.sent
                if isinstance(s.request, kind) and (broker_id is None or s.broker_id == broker_id)]

    def clear(self) -> None:
        self.sent.clear()


def success(request: Any) -> Any:
    if isinstance(request, LeaderAndIsrRequest):
        return LeaderAndIsrResponse(0, tuple((p.tp, 0) for p in request.partition_states))
    if isinstance(request, StopReplicaRequest):
        return StopReplicaResponse(0, tuple((p.tp, 0) for p in request.partitions))
    if isinstance(request, UpdateMetadataRequest):
        return UpdateMetadataResponse(0)
    raise TypeError(request)


class ControllerCluster:
    """Brokers (sessions + controller candidates) over one MemoryStore on virtual time."""

    def __init__(self, broker_ids: list[int], *, candidates: list[int] | None = None,
                 config: dict[str, Any] | None = None, seed: int = 0) -> None:
        self.sched = SimScheduler(seed)
        self.store = MemoryStore(self.sched, SESSION_TIMEOUT_MS)
        self.channel = RecordingChannel(self)
        self.config = validate({"auto.leader.rebalance.enable": False, **(config or {})})
        self.sessions: dict[int, Any] = {}
        self.controllers: dict[int, KafkaController] = {}
        admin_session = self.store.session("admin")
        self.admin = KafkaZkClient(admin_session, self.sched)
        self.admin.ensure_persistent_paths()
        self._candidates = set(broker_ids if candidates is None else candidates)
        for b in broker_ids:
            self.start(b)

    # -- brokers
    def start(self, broker_id: int) -> None:
        session = self.store.session(f"broker-{broker_id}")
        zk = KafkaZkClient(session, self.sched)
        zk.register_broker(broker_id)
        self.sessions[broker_id] = session
        if broker_id in self._candidates:
            c = KafkaController(broker_id, zk, self.channel, self.sched, self.config)
            self.controllers[broker_id] = c
            c.startup()
        self.settle()

    def kill(self, broker_id: int, wait_expiry: bool = True) -> None:
        """A crash: no clean close; the session expires after the timeout."""
        session = self.sessions.pop(broker_id)
        session.kill()
        c = self.controllers.pop(broker_id, None)
        if c is not None:
            c.shutdown()  # memory only: a dead process acts no more
        if wait_expiry:
            self.sched.advance(SESSION_TIMEOUT_MS + 100)
        self.settle()

    def stop(self, broker_id: int) -> None:
        """A clean stop: the session closes and its ephemeral nodes go at once."""
        c = self.controllers.pop(broker_id, None)
        if c is not None:
            c.shutdown()
        self.sessions.pop(broker_id).close()
        self.settle()

    def settle(self, ms: int = 1) -> None:
        self.sched.advance(ms)

    @property
    def controller(self) -> KafkaController:
        active = [c for c in self.controllers.values() if c.is_active]
        assert len(active) == 1, f"expected one active controller, got {[c.broker_id for c in active]}"
        return active[0]

    # -- admin and store views
    def create_topic(self, topic: str, assignment: dict[int, list[int]],
                     config: dict[str, Any] | None = None) -> None:
        self.admin.create_topic(topic, assignment, config)
        self.settle()

    def state(self, topic: str, partition: int) -> LeaderAndIsr:
        return self.admin.get_partition_states([TopicPartition(topic, partition)])[TopicPartition(topic, partition)]

    def assignment(self, topic: str) -> dict[int, list[int]]:
        return self.admin.get_topic_assignment(topic)

    def write_state(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: list[int],
                    controller_epoch: int = 0) -> None:
        """Put a partition state into the store directly (a scenario's "before" picture)."""
        path = layout.partition_state_path(*tp)
        data = layout.encode_partition_state(LeaderAndIsr(leader, leader_epoch, tuple(isr), 0, controller_epoch))
        session = self.admin.session
        if session.exists(path) is None:
            session.create(path, data, makepath=True)
        else:
            session.set(path, data)

    def leader_sets_isr(self, tp: TopicPartition, isr: list[int]) -> LeaderAndIsr:
        """What a leader does on an ISR change: a conditional write, then a notification."""
        current = self.state(*tp)
        new = LeaderAndIsr(current.leader, current.leader_epoch, tuple(isr), current.zk_version,
                           current.controller_epoch)
        updated, bad, failed = self.admin.update_partition_states({tp: new})
        assert not bad and not failed, (bad, failed)
        self.admin.create_isr_change_notification([tp])
        self.settle()
        return updated[tp]
