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

import pytest

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
    """Brokers (sessions + controller candidates) over one store.

    By default a MemoryStore on virtual time; pass ``store`` and ``sched`` (a
    ZooKeeperStore on a RealScheduler) to run the same scenario on ZooKeeper.
    """

    def __init__(self, broker_ids: list[int], *, candidates: list[int] | None = None,
                 config: dict[str, Any] | None = None, seed: int = 0,
                 store: Any = None, sched: Any = None,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS) -> None:
        self.sched = sched if sched is not None else SimScheduler(seed)
        self.real = store is not None
        self.session_timeout_ms = session_timeout_ms
        self.store = store if store is not None else MemoryStore(self.sched, session_timeout_ms)
        self.channel = RecordingChannel(self)
        self.config = validate({"auto.leader.rebalance.enable": False, **(config or {})})
        self.sessions: dict[int, Any] = {}
        self.controllers: dict[int, KafkaController] = {}
        admin_session = self.store.session("admin")
        self.admin = KafkaZkClient(admin_session, self.sched)
        self.admin.ensure_persistent_paths()
        self._candidates = None if candidates is None else set(candidates)
        self.start_all(list(broker_ids))

    # -- brokers
    def start(self, broker_id: int, unclean_shutdown: bool = False) -> None:
        self.start_all([broker_id], unclean_shutdown)

    def start_all(self, broker_ids: list[int], unclean_shutdown: bool = False) -> None:
        """Register every broker first, then start the controller candidates in order
        (the first one elected sees all of them alive).  ``unclean_shutdown``: the
        brokers' logs recovered from a crash, so they register as a Broker then does
        (with the controller epoch they read)."""
        zks = {}
        for b in broker_ids:
            session = self.store.session(f"broker-{b}")
            zks[b] = KafkaZkClient(session, self.sched)
            since = None
            if unclean_shutdown:
                current = zks[b].get_controller_epoch()
                since = -1 if current is None else current[0]
            zks[b].register_broker(b, unclean_shutdown_controller_epoch=since)
            self.sessions[b] = session
        for b in broker_ids:
            if self._candidates is None or b in self._candidates:
                c = KafkaController(b, zks[b], self.channel, self.sched, self.config)
                self.controllers[b] = c
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
            gone = lambda: str(broker_id) not in map(str, self.admin.get_live_broker_ids())
            assert self.wait_for(gone, 4 * self.session_timeout_ms)
        self.settle()

    def stop(self, broker_id: int) -> None:
        """A clean stop: the session closes and its ephemeral nodes go at once."""
        c = self.controllers.pop(broker_id, None)
        if c is not None:
            c.shutdown()
        self.sessions.pop(broker_id).close()
        self.settle()

    def settle(self, ms: int = 1) -> None:
        """Let watch deliveries and answers run (virtual: now; real: a short while)."""
        self.sched.advance(300 if self.real else ms)

    def wait_for(self, predicate: Callable[[], bool], timeout_ms: int = 10_000) -> bool:
        return self.sched.run_until(predicate, timeout_ms)

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


STORE_KINDS = ["memory", "zookeeper"]


def cluster_factory(request: Any, kind: str) -> Any:
    """For a fixture parametrized over :data:`STORE_KINDS`: a ``make(brokers, **kw)`` that
    builds clusters on that store (ZooKeeper: the conftest's server, a fresh chroot,
    wall-clock time) and a cleanup to call at teardown."""
    made: list[ControllerCluster] = []

    def make(broker_ids: list[int] | None = None, **kw: Any) -> ControllerCluster:
        if kind == "memory":
            c = ControllerCluster(broker_ids or [], **kw)
        else:
            from kreplica.runtime import RealScheduler

            factory = request.getfixturevalue("zk_store_factory")
            sched = RealScheduler()
            c = ControllerCluster(broker_ids or [], store=factory(sched, session_timeout_ms=4000),
                                  sched=sched, session_timeout_ms=4000, **kw)
            c.kazoo = request.getfixturevalue("kazoo_client")
            c.chroot = factory.chroot
        made.append(c)
        return c

    def cleanup() -> None:
        for c in made:
            for b in list(c.controllers):
                c.controllers[b].shutdown()
            c.store.close()

    return make, cleanup


@pytest.fixture(params=["memory", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def make_cluster(request: Any) -> Any:
    """``make(brokers, **kw)`` -> ControllerCluster, once per store kind (import it into a test module)."""
    make, cleanup = cluster_factory(request, request.param)
    yield make
    cleanup()
