"""Workloads: a producer's retries, acknowledgements and partitions by key, and a consumer's reads."""
from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace

import pytest

from kreplica import errors
from kreplica.cluster import partition_for_key
from kreplica.protocol import ProduceResponse
from kreplica.protocol.common import NO_LEADER
from kreplica.protocol.produce import ProducePartitionResult
from kreplica.records import decode_records
from kreplica.runtime import SimScheduler
from kreplica.sim import scenarios
from kreplica.sim.scenarios import WorkloadSpec
from kreplica.sim.workload import Producer
from kreplica.sim.world import World

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _producer(leader: int, send=None, retries: int = 5, partitions: int = 1, batches: int = 1):
    """A producer (acks=all) of topic t on a clock of its own and three brokers, stopped once
    ``batches`` batches were acknowledged or given up on; returns it, the leader lookups'
    times, the recorded events and the checker's acks."""
    sched = SimScheduler(1)
    lookups, events, acked = [], [], []
    spec = WorkloadSpec(retries=retries, retry_backoff_ms=100, produce_interval_ms=1000)

    def record(kind, broker=None, tp=None, **data):
        events.append((sched.now_ms(), kind, data))
        if sum(k in ("ack", "produce_failed") for _, k, _ in events) >= batches:
            producer.stop()

    world = SimpleNamespace(
        rng=random.Random(1), later=sched.call_later, now_ms=sched.now_ms, record=record,
        cluster=SimpleNamespace(brokers=dict.fromkeys((1, 2, 3)), zk=SimpleNamespace(topic_exists=lambda topic: True)),
        leader_of=lambda tp: lookups.append(sched.now_ms()) or leader, forget_leader=lambda tp: None,
        network=SimpleNamespace(send=send), isr_size=lambda tp: 3,
        checker=SimpleNamespace(on_ack=lambda *args, **kwargs: acked.append(args)))
    producer = Producer(world, 0, "t", partitions, spec)
    producer.start()
    sched.advance(batches * 10_000)
    return producer, lookups, events, acked


@pytest.mark.parametrize("retries", [0, 3])
def test_a_batch_is_tried_retries_plus_one_times_then_given_up(retries):
    producer, lookups, events, acked = _producer(NO_LEADER, retries=retries)
    assert len(lookups) == retries + 1 and lookups[-1] - lookups[0] == 100 * retries  # retry.backoff.ms apart
    assert [(t, kind, data["error"]) for t, kind, data in events] == [
        (lookups[-1], "produce_failed", "LEADER_NOT_AVAILABLE")]
    assert (producer.failed, producer.acked, acked) == (1, 0, [])


def test_a_batch_is_acknowledged_only_by_an_answer_without_error():
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND means the leader appended the batch but could not
    commit it: retried, as NOT_ENOUGH_REPLICAS is; only the error-free answer acks it."""
    codes = [errors.NotEnoughReplicasAfterAppend.code, errors.NotEnoughReplicas.code, errors.NONE]

    def send(src, dst, request, respond):
        (part,) = request.partitions
        code = codes.pop(0)
        base = 40 if code == errors.NONE else -1
        respond(ProduceResponse((ProducePartitionResult(part.tp, code, base),)))

    producer, lookups, events, acked = _producer(2, send)
    assert [kind for _, kind, _ in events] == ["ack"]
    assert (events[0][2]["offset"], events[0][2]["attempt"]) == (40, 2)
    assert len(acked) == 1 and acked[0][:2] == ("t-0", 40) and (producer.acked, producer.sent) == (1, 3)


def test_each_batch_goes_to_the_partition_of_its_key_and_every_partition_gets_some():
    """Four partitions on three brokers: a key's records all go to its own partition."""
    sent = []

    def send(src, dst, request, respond):
        (part,) = request.partitions
        sent.append((part.tp.partition, {r.key for r in decode_records(part.records)}))
        respond(ProduceResponse((ProducePartitionResult(part.tp, errors.NONE, 0),)))

    _producer(1, send, partitions=4, batches=40)
    assert len(sent) == 40 and {p for p, _ in sent} == {0, 1, 2, 3}
    assert all(len(keys) == 1 and partition_for_key(keys.pop(), 4) == p for p, keys in sent)


def test_a_consumer_reads_each_committed_batch_once_in_offset_order():
    """Without faults, each partition's consumer reads on from where its last read ended:
    no batch twice, none skipped."""
    sc = replace(scenarios.load("seed003-controlled-shutdown"), steps=(), until_ms=3000)
    world = World(sc, 1)
    r = world.run()
    assert r.ok and r.converged, r.violation and r.violation.describe()
    reads: dict[str, list[tuple[int, int]]] = {}
    for e in world.history.events:
        if e.kind == "consume":
            reads.setdefault(e.tp, []).append((e.data["first"], e.data["last"]))
    assert sorted(reads) == [f"{t.name}-{p}" for t in sc.topics for p in range(t.partitions)]
    for spans in reads.values():
        assert spans[0][0] == 0 and len(spans) > 3
        assert all(later[0] == earlier[1] + 1 for earlier, later in zip(spans, spans[1:]))
