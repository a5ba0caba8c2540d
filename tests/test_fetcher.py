"""The follower fetch loop against a scripted leader, and fetcher batching in a real cluster."""
import pytest

from kreplica import errors
from kreplica.protocol import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    OffsetsForLeaderEpochRequest,
    ProducePartition,
    ProduceRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    TopicPartition,
)
from kreplica.records import encode_batch
from kreplica.replica.fetcher import FetchPhase, PartitionFetchState
from replica_harness import Harness

TP = TopicPartition("f", 0)
LEADER, FOLLOWER = 1, 2
CONFIG = {"replica.fetch.backoff.ms": 100, "request.timeout.ms": 1000, "replica.fetch.wait.max.ms": 50}


class ScriptedLeader:
    """Broker 1 as a test double: records requests, answers with ``self.answer(request)``."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.requests: list[tuple[int, object]] = []
        self.answer = lambda req: None
        h.transport.register(LEADER, self.handle)

    def handle(self, src, request, respond):
        self.requests.append((self.h.scheduler.now_ms(), request))
        response = self.answer(request)
        if response is not None:
            respond(response)

    def fetches(self):
        return [(t, r.partitions[0].fetch_offset) for t, r in self.requests if isinstance(r, FetchRequest)]


def _state(epoch, leader, isr=(LEADER, FOLLOWER)):
    return LeaderAndIsrPartitionState(TP, 1, leader, epoch, isr, epoch, (LEADER, FOLLOWER))


def _follower_with_records(tmp_path, n, config=None):
    """Broker 2 leads epoch 0 alone and appends ``n`` records, then follows broker 1 in epoch 1."""
    h = Harness(tmp_path, (FOLLOWER,), config={**CONFIG, **(config or {})})
    rm = h.brokers[FOLLOWER]
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, (_state(0, FOLLOWER, (FOLLOWER,)),)))
    for i in range(n):
        batch = encode_batch([b"r%d" % i], timestamp_ms=0)
        rm.handle_produce(ProduceRequest(1, 1000, (ProducePartition(TP, batch),)), lambda r: None)
    leader = ScriptedLeader(h)
    return h, rm, leader


def _follow(rm, epoch=1):
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, (_state(epoch, LEADER),)))


def _answer(code, hw=0, leo=0, start=0, records=b""):
    return lambda req: FetchResponse(errors.NONE, (FetchPartitionData(TP, code, hw, start, leo, records),))


def test_fetch_state_table():
    s = PartitionFetchState(-1, 3)
    assert s.phase is FetchPhase.TRUNCATING
    s = s.to(FetchPhase.FETCHING, 7)
    assert (s.fetch_offset, s.phase) == (7, FetchPhase.FETCHING)
    with pytest.raises(errors.StateChangeFailed):
        s.to(FetchPhase.TRUNCATING, 0)


def test_appends_whole_batches_and_hw_is_min_of_leader_hw_and_own_leo(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 0)
    batch = encode_batch([b"a", b"b"], base_offset=0, leader_epoch=1, timestamp_ms=0)
    leader.answer = lambda req: (
        _answer(errors.NONE, hw=100, leo=2, records=batch)(req)
        if req.partitions[0].fetch_offset == 0 else None
    )
    _follow(rm)
    assert h.run_until(lambda: rm.partitions[TP].log_end_offset == 2, 1000)
    h.advance(1)
    p = rm.partitions[TP]
    assert p.high_watermark == 2
    assert bytes(p.log.read(0, 1 << 20)) == batch  # the leader's bytes, not re-encoded
    assert leader.fetches()[-1][1] == 2


def test_out_of_range_when_the_leader_has_less_truncates_to_its_leo(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 3)
    leader.answer = lambda req: (
        _answer(errors.OffsetOutOfRange.code, hw=1, leo=1)(req)
        if req.partitions[0].fetch_offset > 1 else None
    )
    _follow(rm)
    assert h.run_until(lambda: any(o == 1 for _, o in leader.fetches()), 1000)
    assert leader.fetches()[0][1] == 3
    assert rm.partitions[TP].log_end_offset == 1


def test_out_of_range_below_the_leaders_log_start_restarts_there(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 3)
    leader.answer = lambda req: (
        _answer(errors.OffsetOutOfRange.code, hw=10, leo=10, start=5)(req)
        if req.partitions[0].fetch_offset < 5 else None
    )
    _follow(rm)
    assert h.run_until(lambda: any(o == 5 for _, o in leader.fetches()), 1000)
    p = rm.partitions[TP]
    assert (p.log_start_offset, p.log_end_offset) == (5, 5)


def test_fenced_epoch_stops_fetching_until_a_newer_leader_and_isr(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 0)
    leader.answer = _answer(errors.FencedLeaderEpoch.code)
    _follow(rm)
    h.advance(2000)
    assert len(leader.fetches()) == 1
    assert not any(f.states for f in rm.fetchers.values())
    leader.answer = lambda req: None
    _follow(rm, epoch=2)
    h.advance(10)
    assert len(leader.fetches()) == 2


@pytest.mark.parametrize("code", [errors.NotLeaderOrFollower.code, errors.UnknownLeaderEpoch.code])
def test_retriable_errors_back_off(tmp_path, code):
    h, rm, leader = _follower_with_records(tmp_path, 0)
    leader.answer = _answer(code)
    _follow(rm)
    h.advance(350)
    times = [t for t, _ in leader.fetches()]
    assert times == [0, 100, 200, 300]


def test_a_down_leader_is_retried_after_backoff(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 0)
    h.transport.unregister(LEADER)
    _follow(rm)
    h.advance(250)
    h.transport.register(LEADER, leader.handle)
    h.advance(100)
    assert [t for t, _ in leader.fetches()] == [300]


def test_a_lost_request_is_abandoned_after_the_request_timeout(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 0)
    _follow(rm)  # the scripted leader never answers
    h.advance(2500)
    # timeout = request.timeout.ms + replica.fetch.wait.max.ms, then the backoff
    assert [t for t, _ in leader.fetches()] == [0, 1150, 2300]


def test_corrupt_data_is_not_appended(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 0)
    bad = bytearray(encode_batch([b"a"], timestamp_ms=0))
    bad[-1] ^= 0xFF
    leader.answer = _answer(errors.NONE, hw=1, leo=1, records=bytes(bad))
    _follow(rm)
    h.advance(150)
    assert rm.partitions[TP].log_end_offset == 0
    assert [t for t, _ in leader.fetches()] == [0, 100]


def test_leader_epoch_strategy_asks_before_fetching(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 3, {"replica.truncation.strategy": "leader-epoch"})
    from kreplica.protocol import EpochEndOffset, OffsetsForLeaderEpochResponse

    leader.answer = lambda req: (
        OffsetsForLeaderEpochResponse((EpochEndOffset(TP, errors.NONE, 0, 2),))
        if isinstance(req, OffsetsForLeaderEpochRequest) else None
    )
    _follow(rm)
    h.advance(1)
    kinds = [type(r).__name__ for _, r in leader.requests]
    assert kinds == ["OffsetsForLeaderEpochRequest", "FetchRequest"]
    assert leader.requests[0][1].partitions[0].leader_epoch == 0
    assert rm.partitions[TP].log_end_offset == 2 and leader.fetches() == [(0, 2)]


def test_an_empty_newer_epoch_does_not_loop_the_epoch_requests(tmp_path):
    """A follower that led epoch 2 without appending has an epoch starting at its LEO.
    The leader answers epoch 1, which the follower never had; truncating to the LEO
    is a no-op, so the empty epoch must be dropped or the same question repeats
    forever (simulator, random-chaos seeds 430 and 484)."""
    h, rm, leader = _follower_that_led_epoch_2(tmp_path, ())
    assert rm.partitions[TP].log.leader_epoch_cache.latest_epoch == 2
    _leader_held_epochs_0_and_1(leader, epoch_1_end=3)
    _follow(rm, epoch=3)
    h.advance(1)
    assert _asked_epochs(leader) == [2, 0]
    assert leader.fetches() == [(0, 3)]
    assert rm.partitions[TP].log_end_offset == 3


def _follower_that_led_epoch_2(tmp_path, values=(b"x", b"y")):
    """Broker 2 holds epoch 0 [0, 3), then leads epoch 2 alone and appends ``values`` from 3."""
    h, rm, leader = _follower_with_records(tmp_path, 3, {"replica.truncation.strategy": "leader-epoch"})
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, (_state(2, FOLLOWER, (FOLLOWER,)),)))
    for v in values:
        rm.handle_produce(ProduceRequest(1, 1000, (ProducePartition(TP, encode_batch([v], timestamp_ms=0)),)),
                          lambda r: None)
    return h, rm, leader


def _leader_held_epochs_0_and_1(leader, epoch_1_end):
    """The scripted leader held epoch 0 [0, 3) and epoch 1 [3, ``epoch_1_end``)."""
    from kreplica.protocol import EpochEndOffset, OffsetsForLeaderEpochResponse

    def answer(req):
        # Answer a few epoch requests only, so a looping fetcher ends the test (and fails it).
        if not isinstance(req, OffsetsForLeaderEpochRequest) or len(leader.requests) > 5:
            return None
        asked = req.partitions[0].leader_epoch
        epoch, end = (1, epoch_1_end) if asked >= 1 else (0, 3)
        return OffsetsForLeaderEpochResponse((EpochEndOffset(TP, errors.NONE, epoch, end),))

    leader.answer = answer


def _asked_epochs(leader):
    return [r.partitions[0].leader_epoch for _, r in leader.requests if isinstance(r, OffsetsForLeaderEpochRequest)]


def test_one_fetcher_per_source_broker_batching_its_partitions(tmp_path):
    h = Harness(tmp_path, (1, 2, 3))
    tps = [TopicPartition("t", i) for i in range(4)]
    for i, tp in enumerate(tps):
        h.create_partition(tp, (1, 2, 3), leader=1 if i < 3 else 2)
    for tp in tps:
        h.settle(tp)
    assert sorted(h.brokers[3].fetchers) == [1, 2]
    assert sorted(h.brokers[2].fetchers) == [1]
    assert set(h.brokers[3].fetchers[1].states) == set(tps[:3])
    from_3_to_1 = [m for _, src, dst, m in h.transport.log if (src, dst) == (3, 1) and isinstance(m, FetchRequest)]
    assert from_3_to_1 and all(len(m.partitions) == 3 for m in from_3_to_1[-2:])
    h.close()


# ---- second replica-layer mutant pass (twenty-fifth review) ------------------------------------
def _epoch_answer(epoch, end, code=errors.NONE):
    from kreplica.protocol import EpochEndOffset, OffsetsForLeaderEpochResponse

    return OffsetsForLeaderEpochResponse((EpochEndOffset(TP, code, epoch, end),))


def test_the_divergence_is_clamped_to_where_our_copy_of_the_leaders_epoch_ends(tmp_path):
    """KIP-279: the leader's epoch 0 ran to offset 4, ours to 3 (we led epoch 2 from 3).
    Offset 3 differs between the two logs, so the follower cuts back to 3, the smaller of
    the two ends, not to the leader's end."""
    h, rm, leader = _follower_that_led_epoch_2(tmp_path)
    assert rm.partitions[TP].log_end_offset == 5
    leader.answer = lambda req: _epoch_answer(0, 4) if isinstance(req, OffsetsForLeaderEpochRequest) else None
    _follow(rm, epoch=3)
    h.advance(1)
    assert rm.partitions[TP].log_end_offset == 3
    assert leader.fetches() == [(0, 3)]


def test_a_leader_without_epochs_makes_the_follower_truncate_to_its_hw(tmp_path):
    from kreplica.protocol.offsets_for_leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET

    h, rm, leader = _follower_with_records(tmp_path, 3, {"replica.truncation.strategy": "leader-epoch"})
    rm.partitions[TP].log.update_high_watermark(1)
    leader.answer = lambda req: (_epoch_answer(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
                                 if isinstance(req, OffsetsForLeaderEpochRequest) else None)
    _follow(rm)
    h.advance(1)
    assert rm.partitions[TP].log_end_offset == 1
    assert leader.fetches() == [(0, 1)]


def test_a_fenced_epoch_answer_drops_the_partition_not_retried(tmp_path):
    h, rm, leader = _follower_with_records(tmp_path, 3, {"replica.truncation.strategy": "leader-epoch"})
    leader.answer = lambda req: _epoch_answer(-1, -1, errors.FencedLeaderEpoch.code)
    _follow(rm)
    h.advance(1000)
    assert len(leader.requests) == 1
    assert not any(f.states for f in rm.fetchers.values())
    assert rm.partitions[TP].log_end_offset == 3


def _another_partition_keeps_the_fetcher(rm):
    """f-1 follows the same leader, so the fetcher outlives TP's removal and re-adding."""
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, (LeaderAndIsrPartitionState(
        TopicPartition("f", 1), 1, LEADER, 1, (LEADER, FOLLOWER), 1, (LEADER, FOLLOWER)),)))


def test_a_late_epoch_answer_for_a_replaced_state_is_ignored(tmp_path):
    """The fetcher stays (another partition keeps it) while TP is re-added under a newer
    epoch; the answer to the old epoch question then arrives and must not truncate."""
    h, rm, leader = _follower_with_records(tmp_path, 3, {"replica.truncation.strategy": "leader-epoch"})
    _another_partition_keeps_the_fetcher(rm)
    held = []

    def handle(src, request, respond):
        leader.requests.append((h.scheduler.now_ms(), request))
        if isinstance(request, OffsetsForLeaderEpochRequest):
            if not held:
                held.append(respond)  # the first question's answer comes late
            else:
                respond(_epoch_answer(0, 3))

    h.transport.register(LEADER, handle)
    _follow(rm)
    h.advance(1)
    assert held and rm.partitions[TP].log_end_offset == 3
    _follow(rm, epoch=2)  # TP re-added to the same fetcher
    held[0](_epoch_answer(0, 1))  # the late answer: would cut TP back to 1
    h.advance(1)
    assert rm.partitions[TP].log_end_offset == 3
    asked = [r for _, r in leader.requests if isinstance(r, OffsetsForLeaderEpochRequest)]
    assert len(asked) == 2 and asked[1].partitions[0].current_leader_epoch == 2


def test_each_partition_asks_for_replica_fetch_max_bytes_and_the_fetch_for_the_response_max(tmp_path):
    h, rm, leader = _follower_with_records(
        tmp_path, 0, {"replica.fetch.max.bytes": 1234, "replica.fetch.response.max.bytes": 56789,
                      "replica.fetch.min.bytes": 7})
    _follow(rm)
    h.advance(1)
    req = leader.requests[0][1]
    assert isinstance(req, FetchRequest)
    assert (req.partitions[0].max_bytes, req.max_bytes) == (1234, 56789)
    # The long-poll is the follower's: replica.fetch.min.bytes and replica.fetch.wait.max.ms.
    assert (req.min_bytes, req.max_wait_ms) == (7, CONFIG["replica.fetch.wait.max.ms"])


def test_a_fetch_names_the_leader_epoch_it_follows(tmp_path):
    """KIP-320: each partition of a follower's fetch carries the leader epoch its state was
    made for, so a leader in another epoch fences (or defers) it instead of serving a
    follower that has not yet heard of the change."""
    h, rm, leader = _follower_with_records(tmp_path, 0)
    _follow(rm, epoch=3)
    h.advance(1)
    req = leader.requests[0][1]
    assert isinstance(req, FetchRequest)
    assert (req.partitions[0].fetch_offset, req.partitions[0].current_leader_epoch) == (0, 3)


def test_a_late_fetch_answer_for_a_replaced_state_is_ignored(tmp_path):
    """The fetcher stays (another partition keeps it) while TP is re-added under a newer
    epoch; the answer to the fetch sent under the old epoch then arrives and must not
    move TP's log: the new epoch starts with its own truncation."""
    h, rm, leader = _follower_with_records(tmp_path, 3)
    _another_partition_keeps_the_fetcher(rm)
    held = []

    def handle(src, request, respond):
        leader.requests.append((h.scheduler.now_ms(), request))
        if isinstance(request, FetchRequest) and not held:
            held.append(respond)

    h.transport.register(LEADER, handle)
    _follow(rm)
    h.advance(1)
    assert held and rm.partitions[TP].log_end_offset == 3
    _follow(rm, epoch=2)  # TP re-added to the same fetcher
    # The late answer: "the leader has only 1", which would cut TP back.
    held[0](FetchResponse(errors.NONE, (FetchPartitionData(TP, errors.OffsetOutOfRange.code, 1, 0, 1),)))
    h.advance(1)
    assert rm.partitions[TP].log_end_offset == 3
    fetcher = rm.fetchers[LEADER]
    assert fetcher.states[TP].leader_epoch == 2 and fetcher.states[TP].fetch_offset == 3


def test_adding_a_fetched_partition_again_starts_it_over_under_the_new_epoch(tmp_path):
    """``add_partition`` replaces a partition's state: the new epoch, truncating again."""
    h, rm, leader = _follower_with_records(tmp_path, 3)
    _follow(rm)
    h.advance(1)
    fetcher = rm.fetchers[LEADER]
    assert fetcher.states[TP].phase is FetchPhase.FETCHING
    fetcher.add_partition(TP, 7)
    assert fetcher.states[TP] == PartitionFetchState(-1, 7)


def test_an_out_of_range_answer_without_the_leaders_end_backs_off_and_keeps_the_log(tmp_path):
    """An OFFSET_OUT_OF_RANGE that does not say where the leader's log ends is no ground
    to truncate: the partition backs off and asks again from where it was."""
    h, rm, leader = _follower_with_records(tmp_path, 3)
    leader.answer = _answer(errors.OffsetOutOfRange.code, hw=-1, leo=-1, start=-1)
    _follow(rm)
    h.advance(1)
    assert rm.partitions[TP].log_end_offset == 3
    assert h.run_until(lambda: len(leader.fetches()) >= 2, 1000)
    first, second = leader.fetches()[:2]
    assert first[1] == second[1] == 3 and second[0] - first[0] >= 100


# ---- fourth replica-layer mutant pass (sixty-fifth review) ---------------------------------------
def test_the_leaders_log_start_is_adopted_under_the_hw_the_same_answer_brings(tmp_path):
    """KIP-107 bounds a follower's log start by its HW: the answer's HW is applied first,
    so one answer carrying records, HW 4 and log start 2 leaves the follower starting at
    2, not held at its old HW 0 until the next answer."""
    h, rm, leader = _follower_with_records(tmp_path, 0)
    batch = encode_batch([b"a", b"b", b"c", b"d"], base_offset=0, leader_epoch=1, timestamp_ms=0)
    leader.answer = lambda req: (
        _answer(errors.NONE, hw=4, leo=4, start=2, records=batch)(req)
        if req.partitions[0].fetch_offset == 0 else None
    )
    _follow(rm)
    h.advance(1)
    p = rm.partitions[TP]
    assert (p.log_end_offset, p.high_watermark, p.log_start_offset) == (4, 4, 2)
    assert len(leader.fetches()) == 2  # the second (at 4) is never answered


def test_an_unknown_leader_epoch_answer_to_the_epoch_question_is_retried(tmp_path):
    """The leader has not taken the epoch the follower asks under yet (its LeaderAndIsr is
    late): UNKNOWN_LEADER_EPOCH is retried after the backoff, not the end of fetching the
    way FENCED_LEADER_EPOCH is."""
    h, rm, leader = _follower_with_records(tmp_path, 3, {"replica.truncation.strategy": "leader-epoch"})
    answers = iter([_epoch_answer(-1, -1, errors.UnknownLeaderEpoch.code), _epoch_answer(0, 3)])
    leader.answer = lambda req: next(answers) if isinstance(req, OffsetsForLeaderEpochRequest) else None
    _follow(rm)
    h.advance(150)
    epoch_asks = [t for t, r in leader.requests if isinstance(r, OffsetsForLeaderEpochRequest)]
    assert epoch_asks == [0, 100]
    assert leader.fetches() == [(100, 3)]
    assert rm.partitions[TP].log_end_offset == 3


# ---- fifth replica-layer mutant pass (eighty-fifth review) ---------------------------------------
def test_a_fetcher_with_nothing_ready_wakes_for_the_partition_delayed_least(tmp_path):
    """TP backs off from 0 to 100, f-1 from 50 to 150: the fetcher idles until the earlier
    of the two, so TP is fetched again at 100, not held back to f-1's 150."""
    h, rm, leader = _follower_with_records(tmp_path, 0)
    other = TopicPartition("f", 1)
    _follow(rm)
    _another_partition_keeps_the_fetcher(rm)
    error = errors.NotLeaderOrFollower.code

    def handle(src, request, respond):
        leader.requests.append((h.scheduler.now_ms(), request))
        asked = [fp.tp for fp in request.partitions]
        if asked == [TP, other]:  # the first fetch: TP backs off, f-1 has nothing new
            respond(FetchResponse(errors.NONE, (FetchPartitionData(TP, error, 0, 0, 0),
                                                FetchPartitionData(other, errors.NONE, 0, 0, 0))))
        elif asked == [other] and h.scheduler.now_ms() == 0:  # answered at 50: f-1 backs off
            h.scheduler.call_later(50, respond, FetchResponse(errors.NONE, (
                FetchPartitionData(other, error, 0, 0, 0),)))

    h.transport.register(LEADER, handle)
    h.advance(120)
    assert [(t, [fp.tp for fp in r.partitions]) for t, r in leader.requests] == [
        (0, [TP, other]), (0, [other]), (100, [TP])]


def test_a_down_leader_is_asked_for_epochs_again_only_after_the_backoff(tmp_path):
    """The leader-epoch strategy's question to a leader that is down comes back
    DISCONNECTED: asked again after replica.fetch.backoff.ms, not at once in a loop."""
    h, rm, leader = _follower_with_records(tmp_path, 3, {"replica.truncation.strategy": "leader-epoch"})
    h.transport.unregister(LEADER)
    _follow(rm)

    def asked():
        return [t for t, src, dst, m in h.transport.log
                if (src, dst) == (FOLLOWER, LEADER) and isinstance(m, OffsetsForLeaderEpochRequest)]

    assert not h.run_until(lambda: len(asked()) > 10, 250)
    assert asked() == [0, 100, 200]
    assert rm.partitions[TP].log_end_offset == 3


def test_a_partition_added_to_an_idle_fetcher_is_fetched_at_once_not_at_the_backoffs_end(tmp_path):
    """TP backs off from 0 to 100; f-1 joins the same fetcher at 30.  The join's wake
    replaces the later one, so f-1 is fetched at 30 and TP at 100 as planned."""
    h, rm, leader = _follower_with_records(tmp_path, 0)
    other = TopicPartition("f", 1)
    _follow(rm)
    error = errors.NotLeaderOrFollower.code

    def handle(src, request, respond):  # TP is refused; a fetch of f-1 waits unanswered
        leader.requests.append((h.scheduler.now_ms(), request))
        if [fp.tp for fp in request.partitions] == [TP]:
            respond(FetchResponse(errors.NONE, (FetchPartitionData(TP, error, 0, 0, 0),)))

    h.transport.register(LEADER, handle)
    h.advance(30)
    _another_partition_keeps_the_fetcher(rm)
    h.advance(75)
    assert [(t, [fp.tp for fp in r.partitions]) for t, r in leader.requests] == [(0, [TP]), (30, [other])]


def test_an_answer_arriving_after_its_request_timed_out_is_ignored(tmp_path):
    """The first fetch is answered only at 1200, after its timeout (1050) and the retry
    sent at 1150: the late answer must neither end the retry's wait nor start a third
    fetch beside it (one request in flight at a time)."""
    h, rm, leader = _follower_with_records(tmp_path, 0)

    def handle(src, request, respond):
        leader.requests.append((h.scheduler.now_ms(), request))
        if len(leader.requests) == 1:
            h.scheduler.call_later(1200, respond, FetchResponse(errors.NONE, (
                FetchPartitionData(TP, errors.NONE, 0, 0, 0),)))

    h.transport.register(LEADER, handle)
    _follow(rm)
    h.advance(2350)
    # the retry, never answered, times out at 2200 and is sent again after the backoff
    assert [t for t, _ in leader.fetches()] == [0, 1150, 2300]


# ---- ninth replica-layer mutant pass (hundred-and-sixty-first review) ----------------------------
def test_a_failed_fetch_backs_off_only_the_partitions_still_followed(tmp_path):
    """f-1 is stopped while the fetch naming it and TP is in flight; the whole fetch then
    fails at 10 (a top-level error).  TP, still followed, backs off and is fetched again at 110;
    f-1 is no longer the fetcher's to back off (nor to look up)."""
    h, rm, leader = _follower_with_records(tmp_path, 0)
    other = TopicPartition("f", 1)
    _follow(rm)
    _another_partition_keeps_the_fetcher(rm)
    held = []

    def handle(src, request, respond):  # only the first fetch is answered, when the test says
        leader.requests.append((h.scheduler.now_ms(), request))
        if len(leader.requests) == 1:
            held.append(respond)

    h.transport.register(LEADER, handle)
    h.advance(10)
    rm.handle_stop_replica(StopReplicaRequest(0, 1, (StopReplicaPartition(other, False),)))
    held[0](FetchResponse(errors.InvalidRequest.code, ()))
    h.advance(150)
    assert [(t, [fp.tp for fp in r.partitions]) for t, r in leader.requests] == [(0, [TP, other]), (110, [TP])]


def test_an_epoch_the_follower_never_had_cuts_to_the_end_of_its_own_earlier_epoch(tmp_path):
    """KIP-279: we hold epochs 0 [0, 3) and 2 [3, 5); the leader held 0 [0, 3) and 1 [3, 4).
    Asked for epoch 2 it answers epoch 1 ending at 4, which we never had: we cut back to
    where our own largest epoch below it (0) ends, 3, not to the leader's 4 (that would keep
    offset 3 of our epoch 2 and ask the same question forever), then ask for epoch 0."""
    h, rm, leader = _follower_that_led_epoch_2(tmp_path)
    assert rm.partitions[TP].log_end_offset == 5
    _leader_held_epochs_0_and_1(leader, epoch_1_end=4)
    _follow(rm, epoch=3)
    h.advance(1)
    assert _asked_epochs(leader) == [2, 0]
    assert leader.fetches() == [(0, 3)]
    assert rm.partitions[TP].log_end_offset == 3


# ---- eleventh replica-layer mutant pass (hundred-and-ninety-ninth review) -------------------------
def test_out_of_range_from_a_leader_ending_between_our_hw_and_our_end_truncates_to_its_end(tmp_path):
    """Our log ends at 3, the leader's HW has brought ours down to 1, and the leader (elected
    from behind) ends at 2: OFFSET_OUT_OF_RANGE means it has less than we fetch from, so we
    cut back to its end, 2, keeping what lies below; only a fetch below the leader's log
    start starts over there, with nothing kept."""
    h, rm, leader = _follower_with_records(tmp_path, 3)
    answers = iter([_answer(errors.NONE, hw=1, leo=3), _answer(errors.OffsetOutOfRange.code, hw=1, leo=2)])
    leader.answer = lambda req: next(answers, lambda r: None)(req)
    _follow(rm)
    assert h.run_until(lambda: len(leader.fetches()) == 3, 1000)
    p = rm.partitions[TP]
    assert [o for _, o in leader.fetches()] == [3, 3, 2]
    assert (p.log_start_offset, p.high_watermark, p.log_end_offset) == (0, 1, 2)


# ---- twelfth replica-layer mutant pass (two-hundred-and-eighteenth review) -----------------------
def test_a_round_that_truncates_a_new_partition_locally_still_fetches_the_others(tmp_path):
    """TP is fetching when f-1 joins (high-watermark strategy: truncated locally).  The round
    after TP's answer truncates f-1 and fetches both in one request, not f-1 alone."""
    h, rm, leader = _follower_with_records(tmp_path, 0)
    other = TopicPartition("f", 1)

    def handle(src, request, respond):  # every fetch answered empty 10 ms later (a long-poll)
        leader.requests.append((h.scheduler.now_ms(), request))
        datas = tuple(FetchPartitionData(fp.tp, errors.NONE, 0, 0, 0) for fp in request.partitions)
        h.scheduler.call_later(10, respond, FetchResponse(errors.NONE, datas))

    h.transport.register(LEADER, handle)
    _follow(rm)
    h.advance(5)
    _another_partition_keeps_the_fetcher(rm)
    h.advance(10)
    assert [(t, sorted(fp.tp.partition for fp in r.partitions)) for t, r in leader.requests] == [(0, [0]), (10, [0, 1])]
    h.close()


def test_a_lost_request_backs_off_its_partitions_even_when_another_joins_meanwhile(tmp_path):
    """The fetch of TP is lost (abandoned at 1050); f-1 joins at 1080, inside the backoff.
    f-1 is fetched at once, alone: TP waits out its backoff to 1150 rather than going
    back to a leader that has just failed to answer."""
    h, rm, leader = _follower_with_records(tmp_path, 0)
    _follow(rm)  # the scripted leader never answers
    h.advance(1080)
    _another_partition_keeps_the_fetcher(rm)
    h.advance(1)
    assert [(t, [fp.tp.partition for fp in r.partitions]) for t, r in leader.requests] == [(0, [0]), (1080, [1])]
    h.close()
