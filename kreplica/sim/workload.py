"""Workloads: producers, consumers and admin actions, all asynchronous on the world's clock.

Theory of operation.  Clients are nodes with negative ids on the simulated
network; they send typed requests and react to responses or to their own
timeouts, never blocking the scheduler (the Cluster's blocking conveniences are
for setup only).  A producer picks a key, maps it to a partition (the client's
:func:`~kreplica.cluster.partition_for_key`), sends batches with up to
``max_in_flight`` of them unanswered (Kafka's
max.in.flight.requests.per.connection; one by default), and retries retriable
errors and timeouts with backoff, so a batch may be written twice (at-least-once,
as Kafka without idempotence) and, with several in flight, behind a later one.
Every batch is unique (producer id and sequence in each value), so its CRC names
it.  Acknowledged batches (offset, CRC, ISR size) go to the checker.  A
consumer reads each partition from the leader, committed data only, and reports
each batch with the HW it was served with.  Leaders are found from the
partition-state nodes of the store, as Kafka's clients learn them from
metadata, and refreshed after an error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .. import errors
from ..cluster import partition_for_key
from ..config import parse_acks
from ..protocol import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from ..protocol.common import NO_LEADER
from ..records import encode_batch
from ..transport import DISCONNECTED
from .log_view import batch_crc, fingerprints

if TYPE_CHECKING:
    from .scenarios import WorkloadSpec
    from .world import World

RETRIABLE = frozenset({
    errors.NotLeaderOrFollower.code, errors.LeaderNotAvailable.code, errors.UnknownTopicOrPartition.code,
    errors.FencedLeaderEpoch.code, errors.NotEnoughReplicas.code, errors.NotEnoughReplicasAfterAppend.code,
    errors.NetworkException.code, errors.RequestTimedOut.code, errors.KafkaStorageError.code,
})


def error_name(code: int) -> str:
    try:
        return errors.error_for_code(code).name
    except (KeyError, ValueError):
        return str(code)


def request_once(world: "World", node: int, dst: int, request: Any, timeout_ms: int,
                 on_answer: Callable[[Any], None], on_timeout: Callable[[], None]) -> None:
    """Send ``request``; exactly one of ``on_answer(response)`` or ``on_timeout()`` runs.
    A duplicate, or an answer after the timeout, is dropped."""
    pending = True

    def answered(response: Any) -> None:
        nonlocal pending
        if pending:
            pending = False
            timer.cancel()
            on_answer(response)

    def timed_out() -> None:
        nonlocal pending
        if pending:
            pending = False
            on_timeout()

    timer = world.later(timeout_ms, timed_out)
    world.network.send(node, dst, request, answered)


class Producer:
    def __init__(self, world: "World", pid: int, topic: str, partitions: int, spec: "WorkloadSpec") -> None:
        self.world = world
        self.pid = pid
        self.node = -1000 - pid
        self.topic = topic
        self.partitions = partitions
        self.spec = spec
        self.acks = parse_acks(spec.acks)
        self.seq = 0
        self.running = False
        self.outstanding = 0  # batches (acks 1 or all) sent and not yet acknowledged or failed
        self.peak_outstanding = 0
        self.sent = self.acked = self.failed = 0

    def start(self) -> None:
        self.running = True
        self.world.later(self.world.rng.randint(0, self.spec.produce_interval_ms), self._next)

    def stop(self) -> None:
        self.running = False

    def _next(self) -> None:
        if not self.running or not self.world.cluster.zk.topic_exists(self.topic):
            return
        rng = self.world.rng
        key = b"k%d" % rng.randrange(self.spec.keys)
        p = partition_for_key(key, self.partitions)
        self.seq += 1
        values = [(key, b"p%d-s%d-r%d" % (self.pid, self.seq, i)) for i in range(self.spec.batch_records)]
        batch = encode_batch(values, timestamp_ms=self.world.now_ms())
        if self.acks:
            self.outstanding += 1
            self.peak_outstanding = max(self.peak_outstanding, self.outstanding)
        self._send(TopicPartition(self.topic, p), batch, 0)
        if self.acks and self.outstanding < self.spec.max_in_flight:
            self._schedule_next()  # room for another batch before this one is answered

    def _schedule_next(self) -> None:
        gap = self.world.rng.randint(1, 2 * self.spec.produce_interval_ms)
        self.world.later(gap, self._next)

    def _done(self) -> None:
        """A batch was acknowledged or given up on.  The next one is already scheduled
        unless every slot was taken (acks=0 sends never wait: one chain of sends)."""
        if not self.acks:
            return self._schedule_next()
        self.outstanding -= 1
        if self.outstanding == self.spec.max_in_flight - 1:
            self._schedule_next()

    def _send(self, tp: TopicPartition, batch: bytes, attempt: int) -> None:
        if not self.running:
            return
        leader = self.world.leader_of(tp)
        if leader == NO_LEADER:
            return self._retry(tp, batch, attempt, errors.LeaderNotAvailable.code)
        self.sent += 1
        req = ProduceRequest(self.acks, self.spec.request_timeout_ms, (ProducePartition(tp, batch),))
        if self.acks == 0:
            self.world.network.send(self.node, leader, req, None)
            self.world.record("produce", None, f"{tp.topic}-{tp.partition}", acks=0, leader=leader, crc=batch_crc(batch))
            self.world.checker.on_sent_unacknowledged()
            return self._schedule_next()
        request_once(self.world, self.node, leader, req, self.spec.request_timeout_ms + 500,
                     lambda resp: self._on_response(tp, batch, attempt, leader, resp),
                     lambda: self._retry(tp, batch, attempt, errors.RequestTimedOut.code))

    def _on_response(self, tp: TopicPartition, batch: bytes, attempt: int, leader: int, resp: Any) -> None:
        if resp is DISCONNECTED or not isinstance(resp, ProduceResponse):
            return self._retry(tp, batch, attempt, errors.NetworkException.code)
        r = resp.partitions[0]
        if r.error_code != errors.NONE:
            return self._retry(tp, batch, attempt, r.error_code)
        self.acked += 1
        crc = batch_crc(batch)
        last = r.base_offset + self.spec.batch_records - 1
        isr = self.world.isr_size(tp)
        name = f"{tp.topic}-{tp.partition}"
        self.world.record("ack", leader, name, offset=r.base_offset, last=last, crc=crc,
                          acks=self.acks, attempt=attempt)
        self.world.checker.on_ack(name, r.base_offset, last, crc, self.acks, isr, leader)
        self._done()

    def _retry(self, tp: TopicPartition, batch: bytes, attempt: int, code: int) -> None:
        self.world.forget_leader(tp)
        if attempt >= self.spec.retries or code not in RETRIABLE:
            self.failed += 1
            self.world.record("produce_failed", None, f"{tp.topic}-{tp.partition}",
                              error=error_name(code), crc=batch_crc(batch))
            return self._done()
        self.world.later(self.spec.retry_backoff_ms, self._send, tp, batch, attempt + 1)


class Probe:
    """The liveness phase's last question: once converged, does every partition still take
    an acks=all write?

    A cluster can converge (leaders, full ISRs, HW = LEO) and still commit nothing: a
    purgatory that never completes a produce, followers served only up to the HW.  Every
    safety invariant holds in such a run; planted bugs of that kind went unseen.  The probe
    sends one batch per partition from its own client and retries any error or timeout
    after ``retry_backoff_ms`` until the batch is acknowledged.  An acknowledged probe is
    an acks=all write like any other: the checker holds it to invariant 1.  A partition
    with fewer replicas than its ``min.insync.replicas`` can never take acks=all (Kafka
    refuses it, NOT_ENOUGH_REPLICAS, by configuration): its probe asks for acks=1."""

    NODE = -3000

    def __init__(self, world: "World", acks: dict[TopicPartition, int], spec: "WorkloadSpec") -> None:
        self.world = world
        self.spec = spec
        self.acks = acks  # tp -> -1, or 1 where acks=all cannot be met by configuration
        self.pending: dict[TopicPartition, str] = {tp: "not sent" for tp in acks}  # tp -> last error
        self._batches: dict[TopicPartition, bytes] = {}

    def start(self) -> None:
        for tp in list(self.pending):
            self._send(tp)

    def _send(self, tp: TopicPartition) -> None:
        if tp not in self.pending:
            return
        w = self.world
        leader = w.leader_of(tp)
        if leader == NO_LEADER:
            return self._retry(tp, errors.LeaderNotAvailable.code)
        batch = self._batches.get(tp)
        if batch is None:
            value = b"probe-%s-%d" % (tp.topic.encode(), tp.partition)
            batch = self._batches[tp] = encode_batch([(b"probe", value)], timestamp_ms=w.now_ms())
        req = ProduceRequest(self.acks[tp], self.spec.request_timeout_ms, (ProducePartition(tp, batch),))
        request_once(w, self.NODE, leader, req, self.spec.request_timeout_ms + 500,
                     lambda resp: self._on_response(tp, batch, leader, resp),
                     lambda: self._retry(tp, errors.RequestTimedOut.code))

    def _on_response(self, tp: TopicPartition, batch: bytes, leader: int, resp: Any) -> None:
        if resp is DISCONNECTED or not isinstance(resp, ProduceResponse):
            return self._retry(tp, errors.NetworkException.code)
        r = resp.partitions[0]
        if r.error_code != errors.NONE:
            return self._retry(tp, r.error_code)
        del self.pending[tp]
        crc = batch_crc(batch)
        name = f"{tp.topic}-{tp.partition}"
        acks = self.acks[tp]
        self.world.record("probe_ack", leader, name, offset=r.base_offset, crc=crc, acks=acks)
        self.world.checker.on_ack(name, r.base_offset, r.base_offset, crc, acks, self.world.isr_size(tp), leader,
                                  probe=True)

    def _retry(self, tp: TopicPartition, code: int) -> None:
        self.pending[tp] = error_name(code)
        self.world.forget_leader(tp)
        self.world.later(self.spec.retry_backoff_ms, self._send, tp)


class Consumer:
    """Reads one partition from its leader, committed records only, and reports them."""

    def __init__(self, world: "World", cid: int, tp: TopicPartition, interval_ms: int) -> None:
        self.world = world
        self.node = -2000 - cid
        self.tp = tp
        self.name = f"{tp.topic}-{tp.partition}"
        self.interval_ms = interval_ms
        self.position = 0
        self.running = False
        self.token = 0
        self.batches = 0

    def start(self) -> None:
        self.running = True
        self.world.later(self.world.rng.randint(0, self.interval_ms), self._poll)

    def stop(self) -> None:
        self.running = False

    def _poll(self) -> None:
        if not self.running or not self.world.cluster.zk.topic_exists(self.tp.topic):
            return
        leader = self.world.leader_of(self.tp)
        if leader == NO_LEADER:
            self.world.later(self.interval_ms, self._poll)
            return
        self.token += 1
        token = self.token
        req = FetchRequest(-1, (FetchPartition(self.tp, self.position),), isolation="committed")

        def on_response(resp: Any) -> None:
            if token == self.token:
                self.token += 1
                self._on_response(leader, resp)

        self.world.later(2000, self._on_timeout, token)
        self.world.network.send(self.node, leader, req, on_response)

    def _on_timeout(self, token: int) -> None:
        if token == self.token:
            self.token += 1
            self.world.forget_leader(self.tp)
            self._poll()

    def _on_response(self, leader: int, resp: Any) -> None:
        if not isinstance(resp, FetchResponse) or not resp.partitions:
            self.world.forget_leader(self.tp)
        else:
            d = resp.partitions[0]
            if d.error_code == errors.NONE:
                fps = [fp for fp in fingerprints(d.records, verified=True) if fp[1] >= self.position]
                if fps:
                    self.batches += len(fps)
                    self.world.record("consume", leader, self.name, first=fps[0][0], last=fps[-1][1],
                                      hw=d.high_watermark, batches=len(fps))
                    self.world.checker.on_consume(self.name, fps, d.high_watermark, leader)
                    self.position = fps[-1][1] + 1
            elif d.error_code == errors.OffsetOutOfRange.code:
                # auto.offset.reset=latest, from what the leader reports as committed
                reset = d.high_watermark if d.high_watermark >= 0 else 0
                self.world.record("consumer_reset", leader, self.name, position=self.position, to=reset)
                self.position = reset
            else:
                self.world.forget_leader(self.tp)
        self.world.later(self.interval_ms, self._poll)
