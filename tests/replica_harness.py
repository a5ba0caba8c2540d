"""A small harness that plays the controller for ReplicaManager tests (no controller yet).

Brokers are real ReplicaManagers over real logs in ``tmp_path/broker-N``, wired
by an :class:`InProcessTransport` on a :class:`SimScheduler`.  The harness keeps
each partition's state as the metadata store would (leader, leader epoch, ISR,
version), sends LeaderAndIsr, and applies AlterIsr proposals as conditional
writes: accepted only at the current version and leader epoch, which then
bumps the version (seed 001 'D').  ``hold_alter_isr`` parks proposals so a test
can let the controller write first.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from kreplica import errors
from kreplica.protocol import (
    AlterIsrRequest,
    AlterIsrResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from kreplica.records import decode_records, encode_batch
from kreplica.replica import ReplicaManager
from kreplica.replica.fetcher import FetchPhase
from kreplica.runtime import SimScheduler
from kreplica.transport import InProcessTransport

CLIENT = -100  # a producer/consumer that never registers (it still gets answers)


class RecordingTransport(InProcessTransport):
    """Keeps every message that crossed a link, in order (the seed-004 trace reads it)."""

    def __init__(self, scheduler: SimScheduler, latency_ms: int = 0) -> None:
        super().__init__(scheduler, latency_ms)
        self.log: list[tuple[int, int, int, Any]] = []

    def deliver(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None]) -> None:
        self.log.append((self.scheduler.now_ms(), src, dst, message))
        super().deliver(src, dst, message, arrive)


@dataclass
class PartitionRecord:
    """What the metadata store holds for one partition."""

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = 0


@dataclass
class Pending:
    """A client request in flight; ``response`` is set when it is answered."""

    response: Any = None
    answered_at_ms: int = -1

    @property
    def done(self) -> bool:
        return self.response is not None


@dataclass
class Harness:
    root: Path
    broker_ids: Iterable[int] = (1, 2, 3)
    config: dict[str, Any] = field(default_factory=dict)
    latency_ms: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.scheduler = SimScheduler(self.seed)
        self.transport = RecordingTransport(self.scheduler, self.latency_ms)
        self.controller_epoch = 1
        self.states: dict[TopicPartition, PartitionRecord] = {}
        self.brokers: dict[int, ReplicaManager] = {}
        self.alter_isr_log: list[tuple[AlterIsrRequest, int]] = []
        self.hold_alter_isr = False
        self.held: list[tuple[AlterIsrRequest, Callable[[AlterIsrResponse], None]]] = []
        self.broker_ids = tuple(self.broker_ids)
        # Small preallocated segments and indexes keep test data dirs small and quick to copy.
        self.config = {"segment.bytes": 1 << 20, "segment.index.bytes": 1 << 16, **self.config}
        for b in self.broker_ids:
            self.start(b)

    # ---- brokers --------------------------------------------------------------------------
    def data_dir(self, b: int) -> Path:
        return self.root / f"broker-{b}"

    def start(self, b: int) -> ReplicaManager:
        rm = ReplicaManager(
            b,
            self.data_dir(b),
            self.scheduler,
            self.config,
            send=lambda dst, req, on_response, b=b: self.transport.send(b, dst, req, on_response),
            alter_isr=lambda req, on_response: self.scheduler.call_soon(self._alter_isr, req, on_response),
        )
        rm.startup()
        self.transport.register(b, self._handler(rm))
        self.brokers[b] = rm
        return rm

    def crash(self, b: int, clean: bool = False) -> None:
        self.transport.unregister(b)
        self.brokers.pop(b).shutdown(clean=clean)

    def snapshot(self, b: int, dest: Path) -> None:
        """Copy a broker's data dir as it is now (what survives a power failure later)."""
        shutil.copytree(self.data_dir(b), dest)

    def restore(self, b: int, snapshot: Path) -> None:
        shutil.rmtree(self.data_dir(b))
        shutil.copytree(snapshot, self.data_dir(b))

    @staticmethod
    def _handler(rm: ReplicaManager) -> Callable[[int, Any, Callable[[Any], None]], None]:
        def handle(src: int, request: Any, respond: Callable[[Any], None]) -> None:
            if not rm.handle_request(request, respond):
                raise TypeError(f"unexpected request {request!r}")

        return handle

    # ---- the controller's part -----------------------------------------------------------
    def create_partition(self, tp: TopicPartition, replicas: tuple[int, ...], leader: int | None = None) -> None:
        leader = replicas[0] if leader is None else leader
        self.states[tp] = PartitionRecord(tuple(replicas), leader, 0, tuple(replicas))
        self.send_leader_and_isr(tp)

    def elect(self, tp: TopicPartition, leader: int, isr: tuple[int, ...] | None = None) -> None:
        """A controller election: new leader, new epoch, new version, sent to live replicas."""
        st = self.states[tp]
        st.leader = leader
        st.leader_epoch += 1
        st.zk_version += 1
        if isr is not None:
            st.isr = tuple(isr)
        self.send_leader_and_isr(tp)

    def leader_and_isr_state(self, tp: TopicPartition) -> LeaderAndIsrPartitionState:
        st = self.states[tp]
        return LeaderAndIsrPartitionState(
            tp, self.controller_epoch, st.leader, st.leader_epoch, st.isr, st.zk_version, st.replicas
        )

    def send_leader_and_isr(self, tp: TopicPartition, brokers: Iterable[int] | None = None) -> dict[int, Any]:
        state = self.leader_and_isr_state(tp)
        out = {}
        for b in brokers if brokers is not None else self.states[tp].replicas:
            if b in self.brokers:
                out[b] = self.brokers[b].handle_leader_and_isr(
                    LeaderAndIsrRequest(0, self.controller_epoch, (state,))
                )
        return out

    def _alter_isr(self, req: AlterIsrRequest, on_response: Callable[[AlterIsrResponse], None]) -> None:
        if self.hold_alter_isr:
            self.held.append((req, on_response))
            return
        on_response(self.apply_alter_isr(req))

    def release_alter_isr(self) -> None:
        held, self.held = self.held, []
        for req, on_response in held:
            on_response(self.apply_alter_isr(req))

    def apply_alter_isr(self, req: AlterIsrRequest) -> AlterIsrResponse:
        """The conditional write of the partition state (seed 001 step 3.3)."""
        st = self.states[req.tp]
        if req.leader_epoch != st.leader_epoch or req.broker_id != st.leader:
            code = errors.FencedLeaderEpoch.code
        elif req.zk_version != st.zk_version:
            code = errors.InvalidUpdateVersion.code
        else:
            st.isr = tuple(req.new_isr)
            st.zk_version += 1
            code = errors.NONE
        self.alter_isr_log.append((req, code))
        if code != errors.NONE:
            return AlterIsrResponse(req.tp, code)
        return AlterIsrResponse(req.tp, code, st.leader_epoch, st.isr, st.zk_version)

    # ---- clients ---------------------------------------------------------------------------
    def produce(
        self, tp: TopicPartition, values: list[bytes], acks: int = -1, timeout_ms: int = 30000,
        to: int | None = None,
    ) -> Pending:
        pending = Pending()
        batch = encode_batch(values, timestamp_ms=self.scheduler.now_ms())
        req = ProduceRequest(acks, timeout_ms, (ProducePartition(tp, batch),))

        def answered(response: Any) -> None:
            pending.response = response
            pending.answered_at_ms = self.scheduler.now_ms()

        self.transport.send(CLIENT, self.states[tp].leader if to is None else to, req, answered)
        return pending

    def produce_sync(self, tp: TopicPartition, values: list[bytes], acks: int = -1, timeout_ms: int = 30000) -> Any:
        pending = self.produce(tp, values, acks, timeout_ms)
        assert self.run_until(lambda: pending.done, timeout_ms + 1000)
        return pending.response.partitions[0]

    def fetch(
        self, tp: TopicPartition, offset: int, to: int | None = None, isolation: str = "committed",
        current_leader_epoch: int = -1,
    ) -> Any:
        """A consumer fetch (no long-poll); returns the partition's FetchPartitionData."""
        pending = Pending()
        req = FetchRequest(
            -1, (FetchPartition(tp, offset, current_leader_epoch),), max_wait_ms=0, isolation=isolation
        )
        self.transport.send(CLIENT, self.states[tp].leader if to is None else to, req,
                            lambda r: setattr(pending, "response", r))
        assert self.run_until(lambda: pending.done, 1000)
        response: FetchResponse = pending.response
        return response.partitions[0]

    # ---- time and inspection ---------------------------------------------------------------
    def run_until(self, predicate: Callable[[], bool], timeout_ms: int = 10_000) -> bool:
        return self.scheduler.run_until(predicate, timeout_ms)

    def advance(self, ms: int) -> None:
        self.scheduler.advance(ms)

    def partition(self, b: int, tp: TopicPartition) -> Any:
        return self.brokers[b].partitions[tp]

    def fetch_phase(self, b: int, tp: TopicPartition) -> FetchPhase | None:
        for fetcher in self.brokers[b].fetchers.values():
            if tp in fetcher.states:
                return fetcher.states[tp].phase
        return None

    def caught_up(self, tp: TopicPartition) -> bool:
        """Every live replica fetching with the leader's LEO and HW."""
        st = self.states[tp]
        if st.leader not in self.brokers:
            return False
        leader = self.partition(st.leader, tp)
        for b in st.replicas:
            if b == st.leader or b not in self.brokers or tp not in self.brokers[b].partitions:
                continue
            f = self.partition(b, tp)
            if self.fetch_phase(b, tp) is not FetchPhase.FETCHING:
                return False
            if f.log_end_offset != leader.log_end_offset or f.high_watermark != leader.high_watermark:
                return False
        return True

    def settle(self, tp: TopicPartition, timeout_ms: int = 10_000) -> None:
        assert self.run_until(lambda: self.caught_up(tp), timeout_ms), self.describe(tp)

    def values(self, b: int, tp: TopicPartition, upto: int | None = None) -> list[tuple[int, bytes]]:
        """(offset, value) of every record in broker ``b``'s log (below ``upto`` if given)."""
        log = self.partition(b, tp).log
        end = log.log_end_offset if upto is None else upto
        if end <= log.log_start_offset:
            return []
        data = log.read(log.log_start_offset, 1 << 30).view
        return [(r.offset, r.value) for r in decode_records(data) if r.offset < end]

    def describe(self, tp: TopicPartition) -> str:
        parts = [f"store={self.states[tp]}"]
        for b, rm in self.brokers.items():
            p = rm.partitions.get(tp)
            parts.append(f"{b}: {p!r} fetch={self.fetch_phase(b, tp)}")
        return "\n".join(parts)

    def close(self) -> None:
        for b in list(self.brokers):
            self.crash(b, clean=True)
