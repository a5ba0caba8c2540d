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
from kreplica.records import decode_records, encode_batch
from kreplica.runtime import SimScheduler
from kreplica.sim import scenarios
from kreplica.sim.scenarios import WorkloadSpec
from kreplica.sim.workload import Producer
from kreplica.sim.world import World

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _producer(leader: int, send=None, retries: int = 5, partitions: int = 1, batches: int = 1, acks: str = "all",
              forgets: list | None = None, made: list | None = None, unacked: list | None = None,
              topic_exists=lambda topic: True, tps: list | None = None, rng: random.Random | None = None):
    """A producer (acks=all unless told) of topic t on a clock of its own and three brokers,
    stopped once ``batches`` batches were acknowledged, given up on or (acks=0) sent; returns
    it, the leader lookups' times, the recorded events and the checker's acks.  ``forgets``
    collects the times the producer dropped its cached leader, ``unacked`` those it told the
    checker of an acks=0 send, ``tps`` the partition each event names; ``made`` gets the
    producer before it starts; ``rng`` replaces the world's seeded draws."""
    sched = SimScheduler(1)
    lookups, events, acked = [], [], []
    spec = WorkloadSpec(retries=retries, retry_backoff_ms=100, produce_interval_ms=1000, acks=acks)

    def record(kind, broker=None, tp=None, **data):
        events.append((sched.now_ms(), kind, data))
        if tps is not None:
            tps.append(tp)
        if sum(k in ("ack", "produce_failed", "produce") for _, k, _ in events) >= batches:
            producer.stop()

    world = SimpleNamespace(
        rng=rng or random.Random(1), later=sched.call_later, now_ms=sched.now_ms, record=record,
        cluster=SimpleNamespace(brokers=dict.fromkeys((1, 2, 3)), zk=SimpleNamespace(topic_exists=topic_exists)),
        leader_of=lambda tp: lookups.append(sched.now_ms()) or leader,
        forget_leader=lambda tp: forgets is not None and forgets.append(sched.now_ms()),
        network=SimpleNamespace(send=send), isr_size=lambda tp: 3,
        checker=SimpleNamespace(on_ack=lambda *args, **kwargs: acked.append(args),
                                on_sent_unacknowledged=lambda: unacked is not None and unacked.append(sched.now_ms())))
    producer = Producer(world, 0, "t", partitions, spec)
    if made is not None:
        made.append(producer)
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
    commit it: retried, as NOT_ENOUGH_REPLICAS is, and every error Kafka's producer retries
    (a leader moved or not yet known, a full disk's KAFKA_STORAGE_ERROR, a timeout); only
    the error-free answer acks it."""
    codes = [errors.NotEnoughReplicasAfterAppend.code, errors.NotEnoughReplicas.code, errors.KafkaStorageError.code,
             errors.NotLeaderOrFollower.code, errors.LeaderNotAvailable.code, errors.UnknownTopicOrPartition.code,
             errors.FencedLeaderEpoch.code, errors.NetworkException.code, errors.RequestTimedOut.code, errors.NONE]

    def send(src, dst, request, respond):
        (part,) = request.partitions
        code = codes.pop(0)
        base = 40 if code == errors.NONE else -1
        respond(ProduceResponse((ProducePartitionResult(part.tp, code, base),)))

    producer, lookups, events, acked = _producer(2, send, retries=9)
    assert [kind for _, kind, _ in events] == ["ack"]
    assert (events[0][2]["offset"], events[0][2]["attempt"]) == (40, 9)
    assert len(acked) == 1 and acked[0][:2] == ("t-0", 40) and (producer.acked, producer.sent) == (1, 10)


def test_each_batch_carries_the_time_it_was_made_and_a_retry_keeps_it():
    """Kafka's producer stamps a record with the time it was made (CreateTime, the default
    message.timestamp.type), which time-based retention (retention.ms) and the time index go
    by: each batch carries the virtual time of its first send, and a retry of it, 100 ms
    later, the same bytes and so the same time."""
    sends = []

    def send(src, dst, request, respond):
        (part,) = request.partitions
        sends.append(part.records)
        code = errors.NotLeaderOrFollower.code if len(sends) % 2 else errors.NONE
        respond(ProduceResponse((ProducePartitionResult(part.tp, code, 10 * len(sends)),)))

    producer, lookups, events, acked = _producer(1, send, batches=3)
    assert len(sends) == len(lookups) == 6 and len(acked) == 3  # a leader lookup at each send
    for first, retried, batch, again in zip(lookups[::2], lookups[1::2], sends[::2], sends[1::2]):
        assert retried == first + 100 and again == batch
        assert {r.timestamp for r in decode_records(batch)} == {first}
    assert lookups[-1] > 1000


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


@pytest.mark.parametrize("acks, wire", [("0", 0), ("1", 1), ("all", -1)])
def test_a_producer_asks_for_its_acks_and_with_acks_0_sends_on_without_waiting(acks, wire):
    """The acks the workload is configured with are the acks on the wire and in the checker's
    ack; with acks=0 nothing is answered and the producer goes on sending all the same, each
    send told to the checker as a write completed without an answer (``writes_completed``).
    Every event names its partition as the history files it, "t-0" (an acks=0 send named it
    as the TopicPartition, written as ["t",0], so a violation's trace left those sends out)."""
    requests, unacked, tps = [], [], []

    def send(src, dst, request, respond):
        requests.append(request.acks)
        if respond is not None:
            (part,) = request.partitions
            respond(ProduceResponse((ProducePartitionResult(part.tp, errors.NONE, 10 * len(requests)),)))

    producer, lookups, events, acked = _producer(1, send, acks=acks, batches=5, unacked=unacked, tps=tps)
    assert requests == [wire] * 5 and tps == ["t-0"] * 5
    if wire == 0:
        assert [kind for _, kind, _ in events] == ["produce"] * 5 and acked == []
        assert unacked == [t for t, _, _ in events]
    else:
        assert [kind for _, kind, _ in events] == ["ack"] * 5
        # Each ack covers the batch's records, first to last (two records a batch).
        assert [(d["offset"], d["last"], d["acks"]) for _, _, d in events] == [
            (10 * n, 10 * n + 1, wire) for n in range(1, 6)]
        # The checker is told which leader acknowledged (a deposed leader's late ack is judged
        # against the history that leader served, not the newest one's).
        assert [(a[1], a[2], a[4], a[6:]) for a in acked] == [(10 * n, 10 * n + 1, wire, (1,)) for n in range(1, 6)]
        assert unacked == []


def test_an_error_that_no_retry_can_mend_gives_the_batch_up_at_once():
    """Only retriable errors are retried: a RECORD_TOO_LARGE answer fails the batch on its first try."""
    def send(src, dst, request, respond):
        (part,) = request.partitions
        respond(ProduceResponse((ProducePartitionResult(part.tp, errors.RecordTooLarge.code, -1),)))

    producer, lookups, events, acked = _producer(2, send)
    assert [(kind, data["error"]) for _, kind, data in events] == [("produce_failed", "RECORD_TOO_LARGE")]
    assert (producer.sent, producer.failed, len(lookups)) == (1, 1, 1)


@pytest.mark.parametrize("failure", ["not leader", "no answer"])
def test_every_failed_attempt_drops_the_cached_leader_before_the_retry_looks_it_up(failure):
    """A NOT_LEADER answer means the client's metadata is stale, and so may an attempt that
    timed out (its leader crashed, paused or cut off): the retry must look the leader up
    afresh, as a Kafka client refreshes its metadata after the error."""
    codes = [errors.NotLeaderOrFollower.code, errors.NotLeaderOrFollower.code, errors.NONE]

    def send(src, dst, request, respond):
        (part,) = request.partitions
        code = codes.pop(0)
        if code == errors.NONE or failure == "not leader":
            respond(ProduceResponse((ProducePartitionResult(part.tp, code, 7),)))

    forgets = []
    producer, lookups, events, acked = _producer(2, send, forgets=forgets)
    assert [kind for _, kind, _ in events] == ["ack"] and len(lookups) == 3
    # A forget after each failed attempt (its answer, or its timeout: the request's own
    # timeout and 500 ms), before the next lookup retry.backoff.ms later.
    wait = 0 if failure == "not leader" else WorkloadSpec().request_timeout_ms + 500
    assert forgets == [lookups[0] + wait, lookups[1] + wait]
    assert lookups[1:] == [lookups[0] + wait + 100, lookups[0] + 2 * (wait + 100)]


def _consumer(answer, intervals: int = 30, leader_of=lambda tp: 1, forgets: list | None = None,
              hws: list | None = None, topic_exists=lambda topic: True, leaders: list | None = None):
    """A consumer of t-0 on a clock of its own, polling every 100 ms for ``intervals``
    intervals; ``answer(request)`` gives the leader's FetchResponse (or None: no answer).
    Returns the requests, the recorded events and what the checker was told was read;
    ``forgets`` collects the times it dropped its cached leader, ``hws`` the HW it told the
    checker each read was served under, ``leaders`` the leader it named; ``topic_exists``
    is the store's answer."""
    from kreplica.protocol import TopicPartition
    from kreplica.sim.workload import Consumer

    sched = SimScheduler(1)
    requests, events, consumed = [], [], []

    def send(src, dst, request, respond):
        requests.append(request)
        response = answer(request)
        if response is not None and len(requests) <= 100:  # polls multiplying would never end
            for _ in range(2):  # a duplicated request's second answer, or any late one
                sched.call_later(1, respond, response)

    world = SimpleNamespace(
        rng=random.Random(1), later=sched.call_later, now_ms=sched.now_ms,
        record=lambda kind, broker=None, tp=None, **data: events.append((kind, data)),
        cluster=SimpleNamespace(zk=SimpleNamespace(topic_exists=topic_exists)),
        leader_of=leader_of, forget_leader=lambda tp: forgets is not None and forgets.append(sched.now_ms()),
        network=SimpleNamespace(send=send),
        checker=SimpleNamespace(on_consume=lambda name, fps, hw, leader: consumed.extend(fps) or
                                (hws is not None and hws.append(hw)) or
                                (leaders is not None and leaders.append(leader))))
    consumer = Consumer(world, 0, TopicPartition("t", 0), 100)
    consumer.start()
    sched.advance(intervals * 100 + 50)
    consumer.stop()
    return requests, events, consumed


def _leader_of_single_record_batches(leo: int, hw_of, damaged: tuple[int, ...] = ()):
    """A leader whose log holds one-record batches at 0 .. leo - 1, committed up to
    ``hw_of(number of the request)``; a fetch past its LEO is OFFSET_OUT_OF_RANGE.  The
    batches at ``damaged`` offsets have their last byte changed, their header CRC kept."""
    from kreplica.protocol import FetchPartitionData, FetchResponse

    log = [encode_batch([(b"k", b"v%d" % o)], base_offset=o) for o in range(leo)]
    for o in damaged:
        log[o] = log[o][:-1] + bytes([log[o][-1] ^ 0xFF])
    asked = [0]

    def answer(request):
        asked[0] += 1
        (part,) = request.partitions
        hw = hw_of(asked[0])
        o = part.fetch_offset
        if o > leo:
            return FetchResponse(0, (FetchPartitionData(part.tp, errors.OffsetOutOfRange.code, hw),))
        limit = hw if request.isolation == "committed" else leo
        return FetchResponse(0, (FetchPartitionData(part.tp, errors.NONE, hw, 0, leo, b"".join(log[o:limit])),))
    return answer


def test_a_consumer_reads_committed_offsets_each_once_from_where_it_left_off_one_poll_at_a_time():
    """One-record batches, the HW moving up two offsets a request and the LEO ahead of it, every
    answer arriving twice: the consumer asks for committed data only, each fetch from the
    offset after the last one read, reads every committed offset once, in order, none past
    the HW, and a second answer to one request starts no second chain of polls."""
    hws = []
    requests, events, consumed = _consumer(_leader_of_single_record_batches(60, lambda n: min(40, 2 * n)), hws=hws)
    assert {r.isolation for r in requests} == {"committed"}
    assert [base for base, *_ in consumed] == list(range(40))
    assert len(requests) <= 31  # one poll per 100 ms interval
    offsets = [r.partitions[0].fetch_offset for r in requests]
    assert offsets == sorted(offsets) and offsets[0] == 0 and offsets[-1] == 40
    reads = [d for kind, d in events if kind == "consume"]
    assert all(d["last"] < d["hw"] for d in reads)
    # The checker judges each read against the HW it was served under, not the leader's LEO (60).
    assert hws == [d["hw"] for d in reads] and max(hws) == 40
    assert [d["first"] for d in reads[1:]] == [d["last"] + 1 for d in reads[:-1]]


@pytest.mark.parametrize("reported, reset", [(25, 25), (-1, 0)], ids=["hw 25", "no hw"])
def test_a_consumer_past_the_log_end_resets_to_the_committed_end_the_leader_reports(reported, reset):
    """auto.offset.reset=latest: an OFFSET_OUT_OF_RANGE answer moves the position to the HW
    the answer carries, not back to the log's start; reading then goes on from there.  An
    answer carrying no HW (-1) resets to offset 0, never to the -1 itself."""
    from kreplica.protocol import FetchPartitionData, FetchResponse

    first = [True]
    inner = _leader_of_single_record_batches(30, lambda n: 30)

    def answer(request):
        if first[0]:  # say, retention moved the log start past the position
            first[0] = False
            return FetchResponse(0, (FetchPartitionData(request.partitions[0].tp, errors.OffsetOutOfRange.code,
                                                        reported),))
        return inner(request)

    requests, events, consumed = _consumer(answer, intervals=5)
    assert events[0] == ("consumer_reset", {"position": 0, "to": reset})
    assert [r.partitions[0].fetch_offset for r in requests[:2]] == [0, reset]
    assert [base for base, *_ in consumed] == list(range(reset, 30))


def test_a_producer_draws_its_keys_from_every_one_of_its_keys():
    """``keys`` distinct keys, each drawn: the workload's spread over partitions rests on it."""
    keys = set()

    def send(src, dst, request, respond):
        (part,) = request.partitions
        keys.update(r.key for r in decode_records(part.records))
        respond(ProduceResponse((ProducePartitionResult(part.tp, errors.NONE, 0),)))

    _producer(1, send, partitions=4, batches=200)
    assert keys == {b"k%d" % k for k in range(WorkloadSpec().keys)}


def test_request_once_runs_exactly_one_callback_whatever_answers_come():
    """A duplicated request is answered twice, and an answer may come after the client's
    timeout: the first answer (or the timeout) is the one outcome, the rest are dropped."""
    from kreplica.sim.workload import request_once

    sched = SimScheduler(1)
    answers: list = []

    def world(delays):
        def send(src, dst, request, respond):
            for d in delays:
                sched.call_later(d, respond, d)
        return SimpleNamespace(later=sched.call_later, network=SimpleNamespace(send=send))

    request_once(world([10, 20]), -1, 1, "req", 100, lambda r: answers.append(("dup", r)),
                 lambda: answers.append(("dup", "timeout")))
    request_once(world([150, 160]), -1, 1, "req", 100, lambda r: answers.append(("late", r)),
                 lambda: answers.append(("late", "timeout")))
    sched.advance(1000)
    assert answers == [("dup", 10), ("late", "timeout")]


def test_an_acks_0_producer_runs_one_chain_of_sends_and_a_stopped_producer_retries_nothing():
    """acks=0: each send schedules the next one, and nothing else does (one batch every
    produce_interval_ms on average).  A producer stopped while a retry waits sends no more."""
    sends = []

    def send(src, dst, request, respond):
        sends.append(request.acks)

    producer, lookups, events, acked = _producer(1, send, acks="0", batches=20)
    # 20 sends, each 1 to 2000 ms (mean 1000) after the one before: not a burst of chains.
    assert len(sends) == 20 and events[-1][0] > 20 * 1000 // 3

    answered = []

    def refuse_then_stop(src, dst, request, respond):
        answered.append(request)
        (part,) = request.partitions
        respond(ProduceResponse((ProducePartitionResult(part.tp, errors.NotLeaderOrFollower.code, -1),)))
        made[0].stop()  # the liveness phase begins while the retry waits out its backoff

    made: list = []
    _producer(2, refuse_then_stop, batches=1, made=made)
    assert len(answered) == 1 and made[0].sent == 1


def test_a_disconnected_answer_is_retried_like_a_network_error():
    from kreplica.transport import DISCONNECTED

    answers = [DISCONNECTED, None]

    def send(src, dst, request, respond):
        (part,) = request.partitions
        a = answers.pop(0)
        respond(a if a is not None else ProduceResponse((ProducePartitionResult(part.tp, errors.NONE, 3),)))

    producer, lookups, events, acked = _producer(2, send)
    assert [(kind, data.get("attempt")) for _, kind, data in events] == [("ack", 1)]
    assert (producer.sent, producer.failed, producer.acked) == (2, 0, 1)


def test_the_probe_retries_the_same_batch_at_a_fresh_leader_and_acks_each_partition_at_its_own_level():
    """The liveness probe: one batch per partition, the same bytes at every retry (a retry
    after a timeout must not add a second probe record), the cached leader dropped after
    each failure (finding no leader is one: retried like the others), the last error kept
    for the liveness message, and each ack reported to the checker at the acks it was sent
    with (1 where min.insync.replicas cannot be met, in the request as in the report),
    marked as the probe's (held to invariant 1, not counted in the workload's writes)."""
    from kreplica.protocol import TopicPartition
    from kreplica.sim.workload import Probe

    sched = SimScheduler(1)
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    script = {a: ["timeout", errors.NotLeaderOrFollower.code, errors.NONE], b: [errors.NONE], c: [errors.NONE]}
    sent, forgets, acked = [], [], []

    def send(src, dst, request, respond):
        (part,) = request.partitions
        sent.append((part.tp, request.acks, bytes(part.records)))
        step = script[part.tp].pop(0)
        if step != "timeout":
            respond(ProduceResponse((ProducePartitionResult(part.tp, step, 9),)))

    looked_up = []

    def leader_of(tp):  # t-2 has no leader at its first lookup
        looked_up.append(tp)
        return NO_LEADER if tp == c and looked_up.count(c) == 1 else 1

    world = SimpleNamespace(
        later=sched.call_later, now_ms=sched.now_ms, record=lambda *args, **kwargs: None,
        leader_of=leader_of, forget_leader=forgets.append, network=SimpleNamespace(send=send),
        isr_size=lambda tp: 3,
        checker=SimpleNamespace(on_ack=lambda name, first, last, crc, acks, *rest, **kw: acked.append((name, acks))
                                if kw.get("probe") is True else None))
    probe = Probe(world, {a: -1, b: 1, c: -1}, WorkloadSpec(request_timeout_ms=1000, retry_backoff_ms=100))
    probe.start()
    # t-2 found no leader: it is retried after the backoff like any failure, not left unsent.
    assert probe.pending == {a: "not sent", c: "LEADER_NOT_AVAILABLE"}
    sched.advance(1600)  # past the first attempt's timeout (1500 ms): the retry is answered NOT_LEADER
    assert probe.pending == {a: "NOT_LEADER_OR_FOLLOWER"}
    sched.advance(1000)
    assert probe.pending == {} and sorted(acked) == [("t-0", -1), ("t-1", 1), ("t-2", -1)]
    assert forgets == [c, a, a] and [tp for tp, _, _ in sent if tp == c] == [c]
    tries = [(acks, records) for tp, acks, records in sent if tp == a]
    assert len(tries) == 3 and len({r for _, r in tries}) == 1 and {k for k, _ in tries} == {-1}
    # The request asks for the partition's own level too: acks=all where min ISR cannot be met
    # would be refused NOT_ENOUGH_REPLICAS at every retry, the probe never acknowledged.
    assert [acks for tp, acks, _ in sent if tp == b] == [1]
    # Each partition's probe is its own batch (the value names it), even made in the same ms
    # (t-0's and t-1's, at 0).
    assert len({records for _, _, records in sent}) == 3


def test_a_producer_sends_nothing_more_once_its_topic_is_deleted():
    """A topic deleted mid-run (a delete_topic step) ends its history: its producers stop
    with it, and nothing is sent, retried or given up on for it afterwards."""
    sends = []

    def send(src, dst, request, respond):
        sends.append(request)
        (part,) = request.partitions
        respond(ProduceResponse((ProducePartitionResult(part.tp, errors.NONE, 0),)))

    producer, lookups, events, acked = _producer(1, send, batches=10, topic_exists=lambda topic: len(sends) < 3)
    assert len(sends) == 3 and [kind for _, kind, _ in events] == ["ack"] * 3 and producer.sent == 3


def test_a_consumer_polls_on_without_a_leader_and_drops_its_leader_after_a_failed_fetch():
    """No leader for the first polls: the consumer polls on at its interval.  Then a fetch
    is lost (2 s timeout, and it polls again at once), one answered NOT_LEADER_OR_FOLLOWER,
    one DISCONNECTED: after each the cached leader is dropped, the way a Kafka client
    refreshes its metadata; and reading goes on from offset 0."""
    from kreplica.protocol import FetchPartitionData, FetchResponse
    from kreplica.transport import DISCONNECTED

    lookups, forgets = [], []
    inner = _leader_of_single_record_batches(10, lambda n: 10)
    failures = [None, "not leader", DISCONNECTED]

    def answer(request):
        if failures:
            f = failures.pop(0)
            if f == "not leader":
                return FetchResponse(0, (FetchPartitionData(request.partitions[0].tp,
                                                            errors.NotLeaderOrFollower.code),))
            return f
        return inner(request)

    def leader_of(tp):
        lookups.append(1)
        return NO_LEADER if len(lookups) <= 3 else 1

    requests, events, consumed = _consumer(answer, intervals=40, leader_of=leader_of, forgets=forgets)
    assert len(lookups) > 6 and [base for base, *_ in consumed] == list(range(10))
    assert len(requests) >= 4 and {r.partitions[0].fetch_offset for r in requests[:4]} == {0}
    # The lost fetch's timeout, 2 s after it was sent; then each failed answer, 1 ms after its request.
    assert len(forgets) == 3 and forgets[0] >= 2000 and forgets[1] < forgets[2]
    # The lost fetch is asked again at its timeout, not an interval later: answered 1 ms after.
    assert forgets[1] == forgets[0] + 1


def test_a_consumer_tells_the_checker_a_batch_whose_bytes_do_not_match_its_crc_is_damaged():
    """A batch served with a record's bytes changed still names its committed CRC in its
    header (a torn write a recovery kept): the consumer verifies the bytes, so the checker
    is told the batch is DAMAGED and finds the read is not the committed batch."""
    from kreplica.sim.log_view import DAMAGED

    requests, events, consumed = _consumer(_leader_of_single_record_batches(5, lambda n: 5, damaged=(2,)),
                                           intervals=3)
    assert [base for base, *_ in consumed] == [0, 1, 2, 3, 4]
    assert [crc == DAMAGED for *_, crc in consumed] == [False, False, True, False, False]


def test_a_consumer_polls_nothing_more_once_its_topic_is_deleted():
    """A topic deleted mid-run (a delete_topic step) ends its history: its consumer stops
    with it and asks the store for no leader of it any more."""
    asked, lookups = [], []

    def leader_of(tp):
        lookups.append(tp)
        return 1

    requests, events, consumed = _consumer(_leader_of_single_record_batches(10, lambda n: 10), leader_of=leader_of,
                                           topic_exists=lambda topic: asked.append(topic) or len(asked) <= 3)
    assert len(requests) == 3 and len(asked) == 4 and len(lookups) == 3
    assert [base for base, *_ in consumed] == list(range(10))


def test_an_acks_0_producer_that_gives_a_batch_up_goes_on_with_the_next():
    """acks=0: a batch given up (no leader to send it to, no retries left) continues the
    chain of sends as a send would; the producer does not fall silent for the rest of the run."""
    producer, lookups, events, acked = _producer(NO_LEADER, retries=0, acks="0", batches=5)
    assert [kind for _, kind, _ in events] == ["produce_failed"] * 5 and producer.sent == 0
    assert [d["error"] for _, _, d in events] == ["LEADER_NOT_AVAILABLE"] * 5


def test_a_consumer_tells_the_checker_which_leader_served_each_read():
    """The checker excuses a deposed leader's read of history a later election superseded
    only if it knows who served it: each read names the broker the fetch went to."""
    leaders = []
    requests, events, consumed = _consumer(_leader_of_single_record_batches(10, lambda n: 10),
                                           leader_of=lambda tp: 3, leaders=leaders)
    assert [base for base, *_ in consumed] == list(range(10))
    assert leaders and set(leaders) == {3}


@pytest.mark.parametrize("draw", ["lowest", "highest"])
def test_a_producer_starts_within_one_interval_and_spaces_its_batches_up_to_two_intervals_apart(draw):
    """produce_interval_ms is the mean gap between a producer's batches: its first batch at
    a draw from 0 to one interval in (the producers do not all start at once), each next
    one a draw from 1 ms to two intervals after the last was answered."""
    class Edge(random.Random):
        def randint(self, a, b):
            return a if draw == "lowest" else b

    made = []

    def send(src, dst, request, respond):  # answered 1 ms later
        (part,) = request.partitions
        made[0].world.later(1, respond, ProduceResponse((ProducePartitionResult(part.tp, errors.NONE, 0),)))

    producer, lookups, events, acked = _producer(1, send, batches=4, made=made, rng=Edge(1))
    assert lookups == ([0, 2, 4, 6] if draw == "lowest" else [1000, 3001, 5002, 7003])


@pytest.mark.parametrize("draw", ["lowest", "highest"])
def test_a_consumer_first_polls_at_a_draw_within_one_interval(draw):
    """Consumers start spread over their first interval, as producers do: the first fetch at
    a draw from 0 to ``consumer_interval_ms`` after start, not all of them at once."""
    from kreplica.protocol import TopicPartition
    from kreplica.sim.workload import Consumer

    class Edge(random.Random):
        def randint(self, a, b):
            return a if draw == "lowest" else b

    sched = SimScheduler(1)
    sent = []
    world = SimpleNamespace(
        rng=Edge(1), later=sched.call_later, now_ms=sched.now_ms, leader_of=lambda tp: 1,
        forget_leader=lambda tp: None, cluster=SimpleNamespace(zk=SimpleNamespace(topic_exists=lambda topic: True)),
        network=SimpleNamespace(send=lambda src, dst, request, respond: sent.append(sched.now_ms())))
    Consumer(world, 0, TopicPartition("t", 0), 100).start()
    sched.advance(150)  # a fetch unanswered waits 2 s: one fetch in this window
    assert sent == ([0] if draw == "lowest" else [100])
