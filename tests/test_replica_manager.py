"""ReplicaManager: controller requests, acks and min ISR, ISR shrink/expand, fencing, HW checkpoint."""
import pytest

from kreplica import errors
from kreplica.log.checkpoints import OffsetCheckpointFile
from kreplica.protocol import (
    FetchPartition,
    FetchRequest,
    LeaderAndIsrRequest,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    ProducePartition,
    ProduceRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kreplica.records import decode_batches, decode_records, encode_batch
from kreplica.replica import Role
from kreplica.replica.isr_state import IsrPhase
from replica_harness import Harness, PartitionRecord

TP = TopicPartition("bar", 0)
FAST_LAG = {"replica.lag.time.max.ms": 1000}


def _cluster(tmp_path, config=None, brokers=(1, 2, 3)):
    h = Harness(tmp_path, brokers, config=dict(config or {}))
    h.create_partition(TP, brokers)
    h.settle(TP)
    return h


def _another_partition(h, tp, replicas=(1, 2, 3)):
    h.create_partition(tp, replicas)
    h.settle(tp)
    return tp


# ---- acks and min ISR --------------------------------------------------------------------
def test_acks_all_commits_on_every_replica(tmp_path):
    h = _cluster(tmp_path)
    r = h.produce_sync(TP, [b"a", b"b", b"c"])
    assert (r.error_code, r.base_offset) == (errors.NONE, 0)
    h.settle(TP)
    for b in (1, 2, 3):
        assert h.values(b, TP) == [(0, b"a"), (1, b"b"), (2, b"c")]
        assert h.partition(b, TP).high_watermark == 3
    h.close()


def test_acks_all_requests_in_flight_complete_in_order_and_leave_the_purgatory(tmp_path):
    h = _cluster(tmp_path)
    pendings = [h.produce(TP, [b"%d" % i] * 2, acks=-1) for i in range(4)]
    assert h.run_until(lambda: all(p.done for p in pendings), 1000)
    answers = [(p.response.partitions[0].error_code, p.response.partitions[0].base_offset) for p in pendings]
    assert answers == [(errors.NONE, 0), (errors.NONE, 2), (errors.NONE, 4), (errors.NONE, 6)]
    assert [p.answered_at_ms for p in pendings] == sorted(p.answered_at_ms for p in pendings)
    assert h.brokers[1].produce_purgatory.watched(TP) == 0
    h.close()


def test_acks_1_answers_after_the_local_append_only(tmp_path):
    h = _cluster(tmp_path)
    h.crash(2)
    h.crash(3)
    pending = h.produce(TP, [b"x"], acks=1)
    assert h.run_until(lambda: pending.done, 100)
    r = pending.response.partitions[0]
    assert (r.error_code, r.base_offset) == (errors.NONE, 0)
    leader = h.partition(1, TP)
    assert leader.log_end_offset == 1 and leader.high_watermark == 0
    h.close()


def test_acks_0_answers_at_once(tmp_path):
    h = _cluster(tmp_path)
    h.crash(3)
    pending = h.produce(TP, [b"x"], acks=0)
    assert h.run_until(lambda: pending.done, 1)
    assert pending.answered_at_ms == 0
    assert h.partition(1, TP).log_end_offset == 1
    h.close()


def test_a_produce_answer_on_a_create_time_topic_carries_no_log_append_time(tmp_path):
    """As Kafka's ProduceResponse: log_append_time_ms is -1 unless the topic stamps
    LogAppendTime, so a client keeps its own timestamps rather than reading 0 (1970)."""
    h = _cluster(tmp_path)
    for acks in (1, -1):
        r = h.produce_sync(TP, [b"a"], acks=acks)
        assert (r.error_code, r.log_append_time_ms) == (errors.NONE, -1)
    h.close()


def test_a_produce_answer_on_a_log_append_time_topic_carries_the_time_the_leader_stamped(tmp_path):
    """As Kafka's ProduceResponse: under LogAppendTime the answer gives the broker's stamp
    (the batch's max timestamp in the log), for acks=1 and acks=all alike; an answer
    without an offset (here a timed-out acks=all) gives -1."""
    h = _cluster(tmp_path, {"message.timestamp.type": "LogAppendTime"})
    for acks in (1, -1):
        h.advance(5000)
        stamped = h.scheduler.now_ms()
        r = h.produce_sync(TP, [b"a"], acks=acks)
        assert (r.error_code, r.log_append_time_ms) == (errors.NONE, stamped)
        batch = h.partition(1, TP).log.read(r.base_offset, 1 << 20)
        assert next(iter(decode_batches(batch.view))).max_timestamp == stamped
    h.crash(3)  # stays in the ISR (lag time 30 s): acks=all cannot be met
    r = h.produce_sync(TP, [b"b"], acks=-1, timeout_ms=200)
    assert (r.error_code, r.base_offset, r.log_append_time_ms) == (errors.RequestTimedOut.code, -1, -1)
    h.close()


def test_acks_all_times_out_when_a_follower_is_gone(tmp_path):
    h = _cluster(tmp_path)  # lag time 30 s: the dead follower stays in the ISR
    h.crash(3)
    pending = h.produce(TP, [b"x"], acks=-1, timeout_ms=200)
    assert h.run_until(lambda: pending.done, 1000)
    assert pending.response.partitions[0].error_code == errors.RequestTimedOut.code
    assert pending.answered_at_ms == 200
    h.close()


def test_min_isr_refuses_before_the_append(tmp_path):
    h = _cluster(tmp_path, {**FAST_LAG, "min.insync.replicas": 3})
    h.crash(3)
    h.produce_sync(TP, [b"first"], acks=1)  # leaves the dead follower behind the LEO
    h.advance(2000)
    assert h.states[TP].isr == (1, 2)
    leader = h.partition(1, TP)
    leo = leader.log_end_offset
    r = h.produce_sync(TP, [b"refused"], acks=-1)
    assert r.error_code == errors.NotEnoughReplicas.code
    assert leader.log_end_offset == leo  # nothing appended
    # acks=1 does not care about min ISR.
    assert h.produce_sync(TP, [b"ok"], acks=1).error_code == errors.NONE
    h.close()


def test_min_isr_after_the_append_when_the_isr_shrinks_meanwhile(tmp_path):
    h = _cluster(tmp_path, {**FAST_LAG, "min.insync.replicas": 3})
    h.crash(3)
    pending = h.produce(TP, [b"appended"], acks=-1, timeout_ms=10_000)
    assert h.run_until(lambda: pending.done, 10_000)
    # Appended while the ISR was full; the ISR shrank before the HW covered it.
    assert h.states[TP].isr == (1, 2)
    assert pending.response.partitions[0].error_code == errors.NotEnoughReplicasAfterAppend.code
    assert h.partition(1, TP).high_watermark == 1
    h.close()


def test_produce_to_a_follower_or_unknown_partition(tmp_path):
    h = _cluster(tmp_path)
    pending = h.produce(TP, [b"x"], acks=1, to=2)
    assert h.run_until(lambda: pending.done, 10)
    assert pending.response.partitions[0].error_code == errors.NotLeaderOrFollower.code
    other = TopicPartition("nope", 0)
    h.states[other] = h.states[TP]
    pending = h.produce(other, [b"x"], acks=1)
    assert h.run_until(lambda: pending.done, 10)
    assert pending.response.partitions[0].error_code == errors.UnknownTopicOrPartition.code
    h.close()


# ---- ISR maintenance -------------------------------------------------------------------------
def test_isr_shrinks_after_the_lag_time_and_expands_on_catch_up(tmp_path):
    h = _cluster(tmp_path, FAST_LAG)
    h.crash(3)
    h.produce_sync(TP, [b"a"], acks=1)
    leader = h.partition(1, TP)
    h.advance(900)
    assert leader.isr == (1, 2, 3)  # within replica.lag.time.max.ms
    h.advance(700)
    assert leader.isr == (1, 2) and h.states[TP].isr == (1, 2)
    assert h.states[TP].zk_version == 1 and leader.zk_version == 1
    # The HW no longer waits for broker 3.
    assert h.produce_sync(TP, [b"b"]).error_code == errors.NONE
    h.start(3)
    h.send_leader_and_isr(TP, [3])
    assert h.run_until(lambda: leader.isr == (1, 2, 3), 5000)
    assert h.states[TP].isr == (1, 2, 3) and h.states[TP].zk_version == 2
    h.settle(TP)
    assert h.values(3, TP) == [(0, b"a"), (1, b"b")]
    h.close()


def _held_shrink(tmp_path):
    """Broker 3 lags past the lag time; the leader's shrink proposal is parked in the store."""
    h = _cluster(tmp_path, FAST_LAG)
    h.crash(3)
    h.produce_sync(TP, [b"a"], acks=1)
    h.hold_alter_isr = True
    h.advance(1600)
    leader = h.partition(1, TP)
    assert leader.isr_state.phase is IsrPhase.PENDING_SHRINK
    assert len(h.held) == 1 and h.held[0][0].new_isr == (1, 2)
    h.hold_alter_isr = False
    return h, leader


def test_a_shrink_that_loses_to_the_controller_is_dropped(tmp_path):
    """Seed 001 'D': the controller's write wins; the leader's proposal does not apply."""
    h, leader = _held_shrink(tmp_path)
    # Meanwhile the controller rewrites the state (new version, same leader epoch).
    st = h.states[TP]
    st.isr = (1, 2, 3)
    st.zk_version += 1
    h.release_alter_isr()
    assert h.alter_isr_log[-1][1] == errors.InvalidUpdateVersion.code
    assert leader.isr == (1, 2, 3) and leader.isr_state.phase is IsrPhase.COMMITTED
    assert h.states[TP].isr == (1, 2, 3)
    # The controller's LeaderAndIsr then brings the new version; the next shrink uses it.
    h.send_leader_and_isr(TP, [1, 2])
    assert leader.zk_version == st.zk_version
    h.advance(600)
    assert h.states[TP].isr == (1, 2) and leader.isr == (1, 2)
    h.close()


def test_one_isr_proposal_at_a_time(tmp_path):
    h, leader = _held_shrink(tmp_path)
    assert leader.maybe_shrink_isr() is False
    # While shrinking, the leaving replica still counts for the HW (maximal ISR).
    assert leader.isr_state.maximal_isr == {1, 2, 3}
    h.release_alter_isr()
    assert leader.isr == (1, 2) and leader.isr_state.maximal_isr == {1, 2}
    h.close()


def test_a_replayed_leader_and_isr_does_not_drop_the_isr_proposal_in_flight(tmp_path):
    """A LeaderAndIsr at the epoch and version the leader already runs is a replay: it must
    not reset the ISR state, or the store's answer to the pending shrink is ignored and the
    leader keeps an ISR and version the store no longer holds."""
    h, leader = _held_shrink(tmp_path)
    assert h.send_leader_and_isr(TP, [1])[1].partition_errors == ((TP, errors.NONE),)
    assert leader.isr_state.phase is IsrPhase.PENDING_SHRINK
    h.release_alter_isr()
    assert h.states[TP].isr == (1, 2)
    assert leader.isr == (1, 2) and leader.zk_version == h.states[TP].zk_version
    h.close()


def test_only_the_proposal_in_flight_is_awaited(tmp_path):
    """The broker writes a proposal to the store only while the partition still awaits
    that very proposal: another ISR under the same epoch and version is a dead one (a
    proposal from before the replica was stopped and made leader again)."""
    from dataclasses import replace

    h, leader = _held_shrink(tmp_path)
    held = h.held[0][0]
    assert leader.awaits_isr_answer(held)
    assert not leader.awaits_isr_answer(replace(held, new_isr=(1, 2, 3)))
    # The same ISR proposed at another version or under another epoch is another proposal.
    assert not leader.awaits_isr_answer(replace(held, zk_version=held.zk_version + 1))
    assert not leader.awaits_isr_answer(replace(held, leader_epoch=held.leader_epoch + 1))
    h.release_alter_isr()
    assert not leader.awaits_isr_answer(held)
    h.close()


# ---- leadership and fencing ------------------------------------------------------------------
def test_new_leader_serves_empty_between_hw_and_leo(tmp_path):
    """Seed 001 section 7: the new leader's HW may lag; that range reads empty."""
    h = _cluster(tmp_path, brokers=(1, 2))
    h.produce_sync(TP, [b"a"])
    # Stop the follower from learning the next HW: crash the leader once the follower has the data.
    pending = h.produce(TP, [b"b"], acks=1)
    follower = h.partition(2, TP)
    assert h.run_until(lambda: follower.log_end_offset == 2, 1000)
    h.crash(1)
    assert follower.high_watermark == 1
    # Broker 1 stays in the ISR (the controller has not noticed yet): the HW waits for it.
    h.elect(TP, 2, isr=(2, 1))
    assert follower.is_leader and follower.high_watermark == 1
    empty = h.fetch(TP, 1)
    assert empty.error_code == errors.NONE and len(empty.records) == 0
    assert h.fetch(TP, 3).error_code == errors.OffsetOutOfRange.code
    h.close()


def test_stale_controller_epoch_and_leader_epoch(tmp_path):
    h = _cluster(tmp_path)
    rm = h.brokers[2]
    state = h.leader_and_isr_state(TP)
    resp = rm.handle_leader_and_isr(LeaderAndIsrRequest(0, h.controller_epoch - 1, (state,)))
    assert resp.error_code == errors.StaleControllerEpoch.code
    h.elect(TP, 2)
    assert h.partition(2, TP).is_leader and h.partition(2, TP).leader_epoch == 1
    # An older partition state from a current controller is ignored.
    resp = rm.handle_leader_and_isr(LeaderAndIsrRequest(0, h.controller_epoch, (state,)))
    assert resp.partition_errors == ((TP, errors.StaleControllerEpoch.code),)
    assert h.partition(2, TP).is_leader and h.partition(2, TP).leader_epoch == 1
    stop = StopReplicaRequest(0, h.controller_epoch - 1, (StopReplicaPartition(TP, True),))
    assert rm.handle_stop_replica(stop).error_code == errors.StaleControllerEpoch.code
    um = UpdateMetadataRequest(0, h.controller_epoch - 1, (), (1, 2, 3))
    assert rm.handle_update_metadata(um).error_code == errors.StaleControllerEpoch.code
    h.close()


def test_an_update_metadata_from_a_newer_controller_fences_the_deposed_ones_requests(tmp_path):
    """UpdateMetadata records its controller's epoch, as Kafka 0.10's maybeUpdateMetadataCache
    does: a broker that hears of a new controller first through it refuses what the deposed
    controller sends after (the hundred-and-twenty-sixth review's BR7-24)."""
    h = _cluster(tmp_path)
    rm = h.brokers[2]
    old, newer = h.controller_epoch, h.controller_epoch + 1
    assert rm.handle_update_metadata(UpdateMetadataRequest(0, newer, (), (1, 2, 3))).error_code == errors.NONE
    assert rm.controller_epoch == newer
    h.states[TP].leader, h.states[TP].leader_epoch = 2, 1
    resp = rm.handle_leader_and_isr(LeaderAndIsrRequest(0, old, (h.leader_and_isr_state(TP),)))
    assert resp.error_code == errors.StaleControllerEpoch.code
    assert not h.partition(2, TP).is_leader and h.partition(2, TP).leader_epoch == 0
    stop = StopReplicaRequest(0, old, (StopReplicaPartition(TP, True),))
    assert rm.handle_stop_replica(stop).error_code == errors.StaleControllerEpoch.code
    assert TP in rm.partitions
    h.close()


def test_fetch_leader_epoch_is_fenced(tmp_path):
    h = _cluster(tmp_path)
    h.elect(TP, 1)  # same leader, epoch 1
    assert h.fetch(TP, 0, current_leader_epoch=0).error_code == errors.FencedLeaderEpoch.code
    assert h.fetch(TP, 0, current_leader_epoch=2).error_code == errors.UnknownLeaderEpoch.code
    assert h.fetch(TP, 0, current_leader_epoch=1).error_code == errors.NONE
    assert h.fetch(TP, 0, to=2).error_code == errors.NotLeaderOrFollower.code
    h.close()


def test_a_parked_follower_fetch_is_answered_when_the_hw_passes_what_it_was_told(tmp_path):
    """Followers learn a new HW within one round trip (seed 004's two-fetch advance): the
    fetch that moves the HW is answered at once, and so is every other follower's fetch
    parked at the log end, without waiting out replica.fetch.wait.max.ms."""
    h = _cluster(tmp_path, {"replica.fetch.wait.max.ms": 5000})
    assert h.produce_sync(TP, [b"a"]).error_code == errors.NONE
    assert h.run_until(lambda: all(h.partition(b, TP).high_watermark == 1 for b in (2, 3)), 100)
    h.close()


def test_broker_0_fetching_is_a_follower_whose_parked_fetch_learns_the_hw(tmp_path):
    """Kafka's replica ids start at 0 (broker.id's default) and any id >= 0 is a follower:
    broker 0's fetch records its LEO (it holds the HW like any ISR member), and its fetch
    parked at the log end is answered as soon as the HW passes what it was told, not at
    replica.fetch.wait.max.ms."""
    h = _cluster(tmp_path, brokers=(1, 0, 2))
    h.crash(0)
    h.crash(2)  # both stay in the ISR (lag time 30 s): the HW waits for both
    assert h.produce_sync(TP, [b"a"], acks=1).error_code == errors.NONE
    rm = h.brokers[1]
    got = []
    rm.handle_fetch(FetchRequest(0, (FetchPartition(TP, 1, 0),), max_wait_ms=5000), got.append)
    assert not got and h.partition(1, TP).high_watermark == 0  # broker 2 holds the HW: parked
    rm.handle_fetch(FetchRequest(2, (FetchPartition(TP, 1, 0),), max_wait_ms=0), lambda r: None)
    assert h.partition(1, TP).high_watermark == 1  # broker 0's LEO counted
    assert got and got[0].partitions[0].high_watermark == 1
    h.close()


@pytest.mark.parametrize("change", ["epoch", "delete"])
def test_a_parked_fetch_is_answered_when_the_leader_epoch_changes(tmp_path, change):
    """A long-poll parked at the HW completes as soon as its partition's leader epoch
    changes, even with the same leader: the re-read tells the reader it is fenced
    instead of leaving it waiting out max_wait_ms on an epoch that is gone.  So does
    one whose partition a StopReplica deletes (Kafka's DelayedFetch completes when the
    broker no longer knows a partition): UNKNOWN_TOPIC_OR_PARTITION at the delete."""
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    h.settle(TP)
    rm = h.brokers[1]
    got = []
    rm.handle_fetch(FetchRequest(-1, (FetchPartition(TP, 1, 0),), max_wait_ms=5000), got.append)
    assert not got  # nothing past the HW: parked
    if change == "epoch":
        h.elect(TP, 1)  # same leader, epoch 1
        code = errors.FencedLeaderEpoch.code
    else:
        stop = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True, 0),))
        assert rm.handle_stop_replica(stop).error_code == errors.NONE
        code = errors.UnknownTopicOrPartition.code
    assert got and got[0].partitions[0].error_code == code
    h.close()


def test_old_leader_stops_accepting_and_waiting_produces_fail(tmp_path):
    h = _cluster(tmp_path)
    h.crash(3)
    pending = h.produce(TP, [b"x"], acks=-1)
    assert h.run_until(lambda: h.partition(1, TP).log_end_offset == 1, 100)
    h.elect(TP, 2, isr=(1, 2))
    assert h.run_until(lambda: pending.done, 100)
    assert pending.response.partitions[0].error_code == errors.NotLeaderOrFollower.code
    r = h.produce(TP, [b"y"], acks=1, to=1)
    assert h.run_until(lambda: r.done, 100)
    assert r.response.partitions[0].error_code == errors.NotLeaderOrFollower.code
    h.close()


def test_followers_told_there_is_no_leader_stop_fetching_keep_their_logs_and_follow_the_next(tmp_path):
    """The controller's OfflineReplica of a dead leader leaves leader -1 (seed 002): the
    other replicas stop fetching from it, truncate nothing, take no writes, and follow
    the leader the next election names."""
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a", b"b"])
    h.settle(TP)
    h.crash(1)
    h.elect(TP, -1, isr=(2, 3))
    for b in (2, 3):
        p = h.partition(b, TP)
        assert (p.is_leader, p.leader_epoch, p.log_end_offset) == (False, 1, 2)
        assert all(TP not in f.states for f in h.brokers[b].fetchers.values())
    refused = h.produce(TP, [b"x"], acks=1, to=2)
    assert h.run_until(lambda: refused.done, 100)
    assert refused.response.partitions[0].error_code == errors.NotLeaderOrFollower.code
    h.advance(1000)
    assert [h.partition(b, TP).log_end_offset for b in (2, 3)] == [2, 2]
    h.elect(TP, 2, isr=(2, 3))
    assert h.produce_sync(TP, [b"c"]).error_code == errors.NONE
    h.settle(TP)
    assert h.values(3, TP) == h.values(2, TP) == [(0, b"a"), (1, b"b"), (2, b"c")]
    h.close()


# ---- controller requests --------------------------------------------------------------------
def test_init_leader_and_isr_deletes_unlisted_partitions(tmp_path):
    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("old", 3))
    rm = h.brokers[2]
    assert (h.data_dir(2) / "old-3").is_dir()
    req = LeaderAndIsrRequest(0, h.controller_epoch, (h.leader_and_isr_state(TP),), is_init=True)
    assert rm.handle_leader_and_isr(req).error_code == errors.NONE
    assert other not in rm.partitions and not (h.data_dir(2) / "old-3").exists()
    assert TP in rm.partitions
    h.close()


def test_a_fetch_from_broker_zero_is_a_followers(tmp_path):
    """A replica id is a broker id, and Kafka numbers brokers from 0: only a negative id is
    a consumer's.  Broker 0's fetch reads to the leader's log end, its offset counts for the
    HW, and a long-poll of it is answered at once when the HW moved past what it was last
    told (the hundred-and-twenty-sixth review's BR7-20, BR7-30).  Driven by hand: the
    scheduler never runs, so no fetcher fetches meanwhile."""
    h = Harness(tmp_path, (0, 1, 2))
    h.create_partition(TP, (1, 0, 2))
    leader = h.brokers[1]
    produced = []
    leader.handle_produce(ProduceRequest(1, 1000, (ProducePartition(TP, encode_batch([b"a", b"b"])),)),
                          produced.append)
    assert produced[0].partitions[0].error_code == errors.NONE

    def fetch(replica, offset, max_wait_ms=0):
        got = []
        leader.handle_fetch(FetchRequest(replica, (FetchPartition(TP, offset),), max_wait_ms=max_wait_ms), got.append)
        return [d for r in got for d in r.partitions]

    [first] = fetch(0, 0)
    assert first.high_watermark == 0 and len(decode_records(first.records)) == 2  # above the HW
    fetch(0, 2)
    fetch(2, 2)
    p = h.partition(1, TP)
    assert p.remote_replicas[0].log_end_offset == 2 and p.high_watermark == 2
    [news] = fetch(0, 2, max_wait_ms=500)
    assert news.high_watermark == 2 and not news.records
    h.close()


def test_a_follower_made_leader_stops_fetching_from_the_old_leader(tmp_path):
    """A LeaderAndIsr that makes a follower the leader removes its fetcher first, as Kafka
    0.10's makeLeaders does: a leader fetches from no one, and the old leader, now its
    follower, fetches from it (the hundred-and-twenty-sixth review's BR7-18)."""
    h = _cluster(tmp_path)
    assert list(h.brokers[2].fetchers) == [1] and not h.brokers[1].fetchers
    h.elect(TP, 2)
    assert not h.brokers[2].fetchers
    assert list(h.brokers[1].fetchers) == [2] and list(h.brokers[3].fetchers) == [2]
    h.close()


def test_stop_replica_with_and_without_delete(tmp_path):
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    rm = h.brokers[3]
    keep = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, False),))
    assert rm.handle_stop_replica(keep).partition_errors == ((TP, errors.NONE),)
    assert rm.partitions[TP].role is Role.NONE and not rm.fetchers
    assert (h.data_dir(3) / "bar-0").is_dir()
    # The same state sent again brings the stopped replica back to following.
    h.send_leader_and_isr(TP, [3])
    assert rm.partitions[TP].role is Role.FOLLOWER and list(rm.fetchers) == [1]
    delete = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True),))
    rm.handle_stop_replica(delete)
    assert TP not in rm.partitions and not (h.data_dir(3) / "bar-0").exists()
    assert not rm.fetchers  # a deleted follower's fetcher goes too (Kafka removes it first)
    h.close()


def test_update_metadata_feeds_the_cache(tmp_path):
    h = _cluster(tmp_path)
    rm = h.brokers[1]
    state = UpdateMetadataPartitionState(TP, h.controller_epoch, 1, 0, (1, 2, 3), 0, (1, 2, 3))
    req = UpdateMetadataRequest(0, h.controller_epoch, (state,), (1, 2, 3))
    assert rm.handle_update_metadata(req).error_code == errors.NONE
    assert rm.metadata_cache.leader_for(TP) == 1
    assert rm.metadata_cache.live_brokers == {1, 2, 3}
    rm.handle_update_metadata(UpdateMetadataRequest(0, h.controller_epoch, (), (1, 2), deleted=(TP,)))
    assert rm.metadata_cache.leader_for(TP) is None
    h.close()


def test_update_metadata_merges_partition_states_and_records_its_controller(tmp_path):
    """The controller sends UpdateMetadata for the partitions that changed only: each one
    updates those states and keeps the others, as Kafka's MetadataCache.updateCache does, and
    the cache names the controller that sent it (the hundred-and-twenty-sixth review's BR7-16,
    BR7-17)."""
    h = _cluster(tmp_path)
    cache = h.brokers[1].metadata_cache
    other = TopicPartition("bar", 1)
    epoch = h.controller_epoch
    first = UpdateMetadataPartitionState(TP, epoch, 1, 0, (1, 2, 3), 0, (1, 2, 3))
    second = UpdateMetadataPartitionState(other, epoch, 2, 0, (2, 3, 1), 0, (2, 3, 1))
    h.brokers[1].handle_update_metadata(UpdateMetadataRequest(3, epoch, (first,), (1, 2, 3)))
    assert (cache.controller_id, cache.controller_epoch) == (3, epoch)
    h.brokers[1].handle_update_metadata(UpdateMetadataRequest(2, epoch + 1, (second,), (1, 2, 3)))
    assert cache.leader_for(TP) == 1 and cache.leader_for(other) == 2
    assert (cache.controller_id, cache.controller_epoch) == (2, epoch + 1)
    h.close()


def test_update_metadata_replaces_the_live_brokers(tmp_path):
    """A broker the controller no longer lists as live leaves the cache's live set."""
    h = _cluster(tmp_path)
    cache = h.brokers[1].metadata_cache
    h.brokers[1].handle_update_metadata(UpdateMetadataRequest(0, h.controller_epoch, (), (1, 2, 3)))
    h.brokers[1].handle_update_metadata(UpdateMetadataRequest(0, h.controller_epoch, (), (1, 3)))
    assert cache.live_brokers == {1, 3}
    h.close()


def test_a_stop_without_delete_answers_a_waiting_produce_at_once(tmp_path):
    """A leader stopped (not deleted) tells an acks=all produce waiting on it that it no
    longer leads, rather than letting it wait out its timeout; a consumer's long-poll
    parked on it (same leader epoch, no longer leading) is answered at once too."""
    h = _cluster(tmp_path)  # lag time 30 s: the dead follower stays in the ISR
    h.crash(3)
    pending = h.produce(TP, [b"x"], acks=-1, timeout_ms=10_000)
    polled = _consumer_long_poll(h, 0, 10_000)
    h.advance(10)
    assert not pending.done and polled == []
    stop = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, False),))
    h.brokers[1].handle_stop_replica(stop)
    assert h.run_until(lambda: pending.done and bool(polled), 10)
    assert pending.response.partitions[0].error_code == errors.NotLeaderOrFollower.code
    assert polled[0][1].partitions[0].error_code == errors.NotLeaderOrFollower.code
    h.close()


def test_a_deleted_partition_leaves_every_checkpoint_file(tmp_path):
    """After a delete the broker's checkpoint files no longer name the partition, so a
    replica created again under the same name restores nothing of the old one."""
    from kreplica.replica.replica_manager import (
        HW_CHECKPOINT_FILE, LOG_START_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE)

    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a", b"b"])
    h.settle(TP)
    rm = h.brokers[2]
    rm.checkpoint_high_watermarks()
    for name in (LOG_START_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE):
        rm.checkpoint_logs(name)
    assert OffsetCheckpointFile(h.data_dir(2) / HW_CHECKPOINT_FILE).read() == {TP: 2}
    rm.handle_stop_replica(StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True),)))
    rm.checkpoint_high_watermarks()
    for name in (LOG_START_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE):
        rm.checkpoint_logs(name)
    for name in (HW_CHECKPOINT_FILE, LOG_START_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE):
        assert TP not in OffsetCheckpointFile(h.data_dir(2) / name).read(), name
    h.close()


def test_a_stop_replica_with_delete_removes_a_replica_the_restart_has_not_opened_yet(tmp_path):
    """A restarted broker told to delete a partition before any LeaderAndIsr named it (the
    topic was deleted while it was down): its dir and checkpoint entries go all the same,
    as Kafka 0.10's stopReplica deletes the log its LogManager loaded at startup (the
    hundred-and-twenty-sixth review's BR7-23)."""
    from kreplica.replica.replica_manager import HW_CHECKPOINT_FILE

    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    h.settle(TP)
    h.crash(3, clean=True)
    rm = h.start(3)
    assert TP not in rm.partitions and (h.data_dir(3) / "bar-0").is_dir()
    delete = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True),))
    assert rm.handle_stop_replica(delete).partition_errors == ((TP, errors.NONE),)
    assert not (h.data_dir(3) / "bar-0").exists()
    rm.checkpoint_high_watermarks()
    assert TP not in OffsetCheckpointFile(h.data_dir(3) / HW_CHECKPOINT_FILE).read()
    h.close()


def test_leader_and_isr_for_a_partition_not_assigned_here(tmp_path):
    h = _cluster(tmp_path)
    state = h.leader_and_isr_state(TP)
    h2 = Harness(tmp_path / "other", (9,))
    resp = h2.brokers[9].handle_leader_and_isr(LeaderAndIsrRequest(0, 1, (state,)))
    assert resp.partition_errors == ((TP, errors.UnknownTopicOrPartition.code),)
    h.close()
    h2.close()


# ---- HW checkpoint --------------------------------------------------------------------------
def test_hw_checkpoint_periodic_clean_shutdown_and_restore(tmp_path):
    h = _cluster(tmp_path, {"replica.high.watermark.checkpoint.interval.ms": 1000})
    h.produce_sync(TP, [b"a", b"b"])
    h.settle(TP)
    path = h.data_dir(2) / "replication-offset-checkpoint"
    h.advance(1000)
    assert OffsetCheckpointFile(path).read() == {TP: 2}
    h.produce_sync(TP, [b"c"])
    h.settle(TP)
    assert OffsetCheckpointFile(path).read() == {TP: 2}  # not yet: the next period
    h.crash(2, clean=True)
    assert OffsetCheckpointFile(path).read() == {TP: 3}
    h.start(2)
    h.send_leader_and_isr(TP, [2])
    assert h.partition(2, TP).high_watermark == 3
    # The HW is what is written, not the LEO: records above it stay uncommitted after a
    # restart (with 3 gone but in the ISR, "d" reaches 2 and the HW stays at 3).
    h.settle(TP)
    h.crash(3)
    h.produce(TP, [b"d"], acks=1)
    assert h.run_until(lambda: h.partition(2, TP).log_end_offset == 4, 1000)
    h.crash(2, clean=True)
    assert OffsetCheckpointFile(path).read() == {TP: 3}
    h.start(2)
    h.send_leader_and_isr(TP, [2])
    assert (h.partition(2, TP).high_watermark, h.partition(2, TP).log_end_offset) == (3, 4)
    h.close()


def test_recovery_point_and_log_start_checkpoints_as_kafkas_log_manager_writes_them(tmp_path):
    h = _cluster(tmp_path, {"log.flush.offset.checkpoint.interval.ms": 1000,
                            "log.flush.start.offset.checkpoint.interval.ms": 2000, "flush.messages": 1})
    other = _another_partition(h, TopicPartition("foo", 3))
    h.produce_sync(TP, [b"a", b"b"])
    h.settle(TP)
    recovery, start = (OffsetCheckpointFile(h.data_dir(2) / name)
                       for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"))
    h.advance(1000)
    assert recovery.read() == {TP: 2, other: 0} and not start.path.exists()  # each on its own period
    h.advance(1000)
    assert start.read() == {TP: 0, other: 0}
    h.produce_sync(TP, [b"c"])
    h.settle(TP)
    h.partition(2, other).truncate_fully_and_start_at(7)  # as a follower far behind does
    h.crash(2, clean=True)  # a clean shutdown writes both, after the logs closed
    assert recovery.read() == {TP: 3, other: 7} and start.read() == {TP: 0, other: 7}
    # Restarted, logs not yet named by a LeaderAndIsr keep their entries; opened ones move.
    h.start(2)
    h.send_leader_and_isr(TP, [1, 2, 3])
    h.produce_sync(TP, [b"d"])
    h.settle(TP)
    h.advance(2000)
    assert recovery.read() == {TP: 4, other: 7} and start.read() == {TP: 0, other: 7}
    h.close()


def test_consumer_fetch_budget_and_partitions(tmp_path):
    h = _cluster(tmp_path)
    for i in range(5):
        h.produce_sync(TP, [b"v%d" % i])
    leader = h.brokers[1]
    got = []
    req = FetchRequest(-1, (FetchPartition(TP, 0, max_bytes=1),), max_wait_ms=0)
    leader.handle_fetch(req, got.append)
    # At least one whole batch even when it exceeds max_bytes (progress is guaranteed).
    assert got and got[0].partitions[0].error_code == errors.NONE and len(got[0].partitions[0].records) > 0
    h.close()


@pytest.mark.parametrize("isolation,visible", [("committed", 1), ("uncommitted", 2)])
def test_consumer_isolation(tmp_path, isolation, visible):
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    h.crash(3)
    pending = h.produce(TP, [b"b"], acks=1)
    assert h.run_until(lambda: pending.done, 100)
    d = h.fetch(TP, 0, isolation=isolation)
    from kreplica.records import decode_records

    assert [r.value for r in decode_records(d.records)] == [b"a", b"b"][:visible]
    h.close()


# ---- long-poll, multi-partition produce, StopReplica fencing ----------------------------------
def _consumer_long_poll(h, offset, max_wait_ms, min_bytes=1):
    got = []
    req = FetchRequest(-1, (FetchPartition(TP, offset),), max_wait_ms=max_wait_ms, min_bytes=min_bytes)
    h.transport.send(-7, 1, req, lambda r: got.append((h.scheduler.now_ms(), r)))
    return got


def test_consumer_long_poll_wakes_when_the_hw_moves(tmp_path):
    h = _cluster(tmp_path)
    start = h.scheduler.now_ms()
    got = _consumer_long_poll(h, 0, 5000)
    h.advance(100)
    assert got == []  # parked: nothing committed yet
    h.produce_sync(TP, [b"a"])
    assert h.run_until(lambda: bool(got), 100)
    at, resp = got[0]
    d = resp.partitions[0]
    assert at - start < 5000 and d.high_watermark == 1 and len(d.records) > 0
    h.close()


def test_long_poll_answers_empty_at_max_wait(tmp_path):
    h = _cluster(tmp_path)
    start = h.scheduler.now_ms()
    got = _consumer_long_poll(h, 0, 300)
    h.advance(1000)
    at, resp = got[0]
    assert at - start == 300 and len(resp.partitions[0].records) == 0
    h.close()


def test_long_poll_waits_for_min_bytes(tmp_path):
    h = _cluster(tmp_path)
    start = h.scheduler.now_ms()
    got = _consumer_long_poll(h, 0, 2000, min_bytes=1000)
    h.produce_sync(TP, [b"small"])  # committed, but fewer bytes than asked for
    h.advance(100)
    assert got == []
    h.produce_sync(TP, [b"y" * 1000])
    assert h.run_until(lambda: bool(got), 100)
    at, resp = got[0]
    assert at - start < 2000 and len(resp.partitions[0].records) >= 1000
    h.close()


def test_a_committed_long_poll_beyond_the_hw_in_a_later_segment_is_answered_at_once(tmp_path):
    """Kafka's DelayedFetch completes a fetch whose offset lies in a later segment than the
    end it may read to (for a committed reader, the HW): a consumer that read ahead of a
    new leader's lagging HW is answered at once, not after max_wait_ms."""
    h = _cluster(tmp_path, {"segment.bytes": 1024})
    h.crash(2)
    h.crash(3)  # in the ISR still: the HW stays at 0
    for i in range(6):
        h.produce_sync(TP, [b"v" * 400], acks=1)
    log = h.partition(1, TP).log
    assert log.high_watermark == 0 and log.log_end_offset == 6 and len(log.segments) > 1
    start = h.scheduler.now_ms()
    got = _consumer_long_poll(h, 6, 5000)
    assert h.run_until(lambda: bool(got), 100)
    at, resp = got[0]
    d = resp.partitions[0]
    assert at == start and (d.error_code, len(d.records)) == (errors.NONE, 0)
    h.close()


def test_a_long_poll_counts_each_partitions_bytes_up_to_its_own_max_bytes(tmp_path):
    """Kafka's DelayedFetch accumulates min(bytes available, the partition's max_bytes):
    committed data beyond a partition's max_bytes does not meet min_bytes, so the fetch
    waits out max_wait_ms (and then answers what it may read)."""
    h = _cluster(tmp_path)
    for i in range(10):
        h.produce_sync(TP, [b"w" * 100])
    assert h.partition(1, TP).high_watermark == 10
    start = h.scheduler.now_ms()
    got = []
    req = FetchRequest(-1, (FetchPartition(TP, 0, -1, -1, 300),), max_wait_ms=2000, min_bytes=1000)
    h.transport.send(-7, 1, req, lambda r: got.append((h.scheduler.now_ms(), r)))
    h.advance(1000)
    assert got == []
    assert h.run_until(lambda: bool(got), 2000)
    at, resp = got[0]
    assert at - start == 2000 and 0 < len(resp.partitions[0].records) <= 300
    h.close()


def _produce_answer(h, req):
    """Send a client produce to broker 1; each partition's (error code, base offset)."""
    got = []
    h.transport.send(-7, 1, req, got.append)
    assert h.run_until(lambda: bool(got), 1000)
    return {r.tp: (r.error_code, r.base_offset) for r in got[0].partitions}


def test_an_acks_all_produce_timing_out_on_one_partition_answers_the_other_that_committed(tmp_path):
    """Kafka's DelayedProduce checks every partition of the request each time: at the
    timeout only the partitions still short of their offset answer REQUEST_TIMED_OUT; one
    whose HW passed its write answers NONE with its offset, whatever its place in the request."""
    from kreplica.protocol import ProducePartition, ProduceRequest
    from kreplica.records import encode_batch

    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("bar", 1), (1, 2))
    h.crash(3)  # stays in TP's ISR (lag time 30 s): TP cannot commit
    batch = encode_batch([b"x"], timestamp_ms=0)
    req = ProduceRequest(-1, 500, (ProducePartition(TP, batch), ProducePartition(other, batch)))
    codes = _produce_answer(h, req)
    assert codes == {TP: (errors.RequestTimedOut.code, -1), other: (errors.NONE, 0)}
    assert h.partition(1, other).high_watermark == 1
    h.close()


def test_one_produce_request_many_partitions(tmp_path):
    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("bar", 1))
    from kreplica.protocol import ProducePartition, ProduceRequest
    from kreplica.records import encode_batch

    batch = encode_batch([b"x"], timestamp_ms=0)
    unknown = TopicPartition("nope", 0)
    req = ProduceRequest(-1, 5000, tuple(ProducePartition(tp, batch) for tp in (TP, other, unknown)))
    got = []
    h.transport.send(-7, 1, req, got.append)
    assert h.run_until(lambda: bool(got), 1000)
    codes = {r.tp: r.error_code for r in got[0].partitions}
    assert codes == {TP: errors.NONE, other: errors.NONE, unknown: errors.UnknownTopicOrPartition.code}
    assert h.partition(1, TP).high_watermark == h.partition(1, other).high_watermark == 1
    h.close()


def test_a_partition_refused_at_the_append_keeps_its_error_while_another_waits(tmp_path):
    """An acks=all produce over two partitions: one refuses the batch at once (too large),
    the other waits for its followers.  When the second commits, the first still answers
    its refusal, not the success of a write it never took."""
    from kreplica.protocol import ProducePartition, ProduceRequest
    from kreplica.records import encode_batch

    h = _cluster(tmp_path, {"max.message.bytes": 2000})
    other = _another_partition(h, TopicPartition("bar", 1))
    big = encode_batch([b"x" * 4000], timestamp_ms=0)
    small = encode_batch([b"y"], timestamp_ms=0)
    req = ProduceRequest(-1, 5000, (ProducePartition(TP, big), ProducePartition(other, small)))
    codes = _produce_answer(h, req)
    assert codes == {TP: (errors.RecordTooLarge.code, -1), other: (errors.NONE, 0)}
    assert h.partition(1, TP).log_end_offset == 0
    h.close()


def test_stop_replica_with_an_older_leader_epoch_is_fenced(tmp_path):
    h = _cluster(tmp_path)
    h.elect(TP, 1)  # epoch 1
    rm = h.brokers[2]
    old = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True, leader_epoch=0),))
    assert rm.handle_stop_replica(old).partition_errors == ((TP, errors.FencedLeaderEpoch.code),)
    assert TP in rm.partitions
    h.close()


def test_a_stop_replica_without_a_leader_epoch_is_not_checked_against_the_partitions(tmp_path):
    """A StopReplica partition built without an epoch carries -1, Kafka's "no epoch": it is
    applied whatever epoch the partition is in, never fenced as older."""
    h = _cluster(tmp_path)
    h.elect(TP, 1)  # epoch 1
    rm = h.brokers[2]
    unchecked = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True),))
    assert rm.handle_stop_replica(unchecked).partition_errors == ((TP, errors.NONE),)
    assert TP not in rm.partitions
    h.close()


def test_a_corrupt_produce_is_refused_and_nothing_is_appended(tmp_path):
    h = _cluster(tmp_path)
    from kreplica.protocol import ProducePartition, ProduceRequest
    from kreplica.records import encode_batch

    bad = bytearray(encode_batch([b"x"], timestamp_ms=0))
    bad[-1] ^= 0x01
    got = []
    h.transport.send(-7, 1, ProduceRequest(-1, 1000, (ProducePartition(TP, bytes(bad)),)), got.append)
    assert h.run_until(lambda: bool(got), 100)
    assert got[0].partitions[0].error_code == errors.CorruptMessage.code
    assert h.partition(1, TP).log_end_offset == 0
    h.close()


def test_the_replication_bench_commits_every_batch(tmp_path):
    """``kreplica bench replication`` end to end on a tiny load (no timing asserted)."""
    from kreplica.tools.bench_replication import run

    r = run(100, batch_records=10, count=20, in_flight=4, data_dir=str(tmp_path), repeat=1)
    assert r["batches"] == 20 and r["follower_fetches"] > 0
    assert r["committed_records_per_s"] > 0 and r["single_append_records_per_s"] > 0


def test_an_unknown_isolation_level_is_refused_not_read_to_the_log_end(tmp_path):
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    h.crash(3)
    pending = h.produce(TP, [b"b"], acks=1)  # appended on the leader, not committed
    assert h.run_until(lambda: pending.done, 100)
    got = []
    # Kafka's own spelling reads transactions' LSO; here it would have read past the HW.
    h.brokers[1].handle_fetch(FetchRequest(-1, (FetchPartition(TP, 0),), isolation="read_committed"), got.append)
    assert got[0].error_code == errors.InvalidRequest.code
    assert got[0].partitions[0].error_code == errors.InvalidRequest.code and got[0].partitions[0].records == b""
    h.close()


def test_retention_runs_on_every_broker_and_a_follower_behind_it_starts_over(tmp_path):
    cfg = {"segment.bytes": 4096, "retention.bytes": 8192, "log.retention.check.interval.ms": 1000,
           "replica.lag.time.max.ms": 1000}
    h = _cluster(tmp_path, cfg)
    h.crash(3)
    for i in range(60):
        h.produce_sync(TP, [b"x" * 200])
    leader, follower = h.partition(1, TP), h.partition(2, TP)
    assert leader.log_start_offset == 0
    h.advance(1000)
    assert leader.log_start_offset > 0 and follower.log_start_offset > 0  # each broker's own check
    assert leader.log.size_in_bytes() <= 8192 + 4096 and leader.log_end_offset == 60
    assert h.fetch(TP, 0).error_code == errors.OffsetOutOfRange.code
    # Broker 3 left at offset 0, below what the leader kept: it starts over at the log start.
    h.start(3)
    h.send_leader_and_isr(TP, [3])
    assert h.run_until(lambda: leader.isr == (1, 2, 3), 10_000), h.describe(TP)
    back = h.partition(3, TP)
    assert back.log_start_offset == leader.log_start_offset and back.log_end_offset == 60
    h.close()


def test_a_fetch_one_below_the_log_start_is_out_of_range(tmp_path):
    """The offset just below the log start is gone too: a consumer and a follower asking
    for it are told OFFSET_OUT_OF_RANGE with the leader's log start."""
    cfg = {"segment.bytes": 4096, "retention.bytes": 8192, "log.retention.check.interval.ms": 1000}
    h = _cluster(tmp_path, cfg)
    for i in range(60):
        h.produce_sync(TP, [b"x" * 200])
    leader = h.partition(1, TP)
    h.advance(1000)
    start = leader.log_start_offset
    assert start > 0
    d = h.fetch(TP, start - 1)
    assert (d.error_code, d.log_start_offset) == (errors.OffsetOutOfRange.code, start)
    answers = []
    req = FetchRequest(3, (FetchPartition(TP, start - 1, -1, 0, 1 << 20),), max_wait_ms=0)
    h.brokers[1].handle_fetch(req, answers.append)
    assert answers[0].partitions[0].error_code == errors.OffsetOutOfRange.code
    assert leader.remote_replicas[3].log_end_offset == 60  # the refused fetch recorded nothing
    h.close()


def test_followers_adopt_the_leaders_log_start_and_drop_what_lies_below_it(tmp_path):
    """KIP-107: a leader that deleted more than its followers would (here only its own log
    has a byte limit) moves their log start with its fetch answers; their next retention
    pass deletes the segments below it."""
    from dataclasses import replace

    h = _cluster(tmp_path, {"segment.bytes": 4096, "log.retention.check.interval.ms": 1000})
    for i in range(60):
        h.produce_sync(TP, [b"x" * 200])
    h.settle(TP)
    leader, followers = h.partition(1, TP), [h.partition(b, TP) for b in (2, 3)]
    leader.log.config = replace(leader.log.config, retention_bytes=8192)
    assert leader.log.delete_old_segments() > 0
    start = leader.log_start_offset
    assert start > 0 and all(f.log_start_offset == 0 for f in followers)
    h.produce_sync(TP, [b"y"])  # the next fetch answers carry the new start
    h.settle(TP)
    assert [f.log_start_offset for f in followers] == [start, start]
    h.advance(1000)  # each follower's own retention pass
    for f in followers:
        assert f.log.segments[0].base_offset <= start
        assert len(f.log.segments) == 1 or f.log.segments[1].base_offset > start
    assert followers[0].log.size_in_bytes() <= leader.log.size_in_bytes() + 4096
    h.close()


def test_flush_ms_is_honoured_for_a_produce_followed_by_silence(tmp_path):
    h = _cluster(tmp_path, {"flush.ms": 100, "log.flush.scheduler.interval.ms": 50})
    h.produce_sync(TP, [b"a"])
    h.settle(TP)
    logs = [h.partition(b, TP).log for b in (1, 2, 3)]
    assert all(log.recovery_point == 0 for log in logs)  # within flush.ms of the last flush
    h.advance(200)
    assert [log.recovery_point for log in logs] == [1, 1, 1]  # leader and followers alike
    h.close()


# ---- review findings: delayed operations and follower appends -----------------------------
def test_a_parked_fetch_below_the_new_log_start_does_not_break_the_next_produce(tmp_path):
    # A consumer long-poll (min_bytes above what is there) parks at offset 0; retention
    # then moves the log start past it.  The next produce re-checks the parked fetch:
    # it completes with OFFSET_OUT_OF_RANGE, and the produce is answered as committed.
    cfg = {"segment.bytes": 4096, "retention.bytes": 8192, "log.retention.check.interval.ms": 1000}
    h = Harness(tmp_path, (1,), config=cfg)
    h.create_partition(TP, (1,))
    for _ in range(60):
        h.produce_sync(TP, [b"x" * 200])
    rm, leader = h.brokers[1], h.partition(1, TP)
    fetched = []
    rm.handle_fetch(FetchRequest(-1, (FetchPartition(TP, 0),), max_wait_ms=30_000, min_bytes=1 << 20),
                    fetched.append)
    assert not fetched
    h.advance(1000)
    assert leader.log_start_offset > 0
    r = h.produce_sync(TP, [b"y"])
    assert (r.error_code, r.base_offset) == (errors.NONE, 60)
    assert leader.high_watermark == leader.log_end_offset == 61
    assert [d.error_code for d in fetched[0].partitions] == [errors.OffsetOutOfRange.code]


def test_an_uncommitted_long_poll_wakes_for_data_above_the_hw(tmp_path):
    h = _cluster(tmp_path, {"replica.lag.time.max.ms": 10_000})
    h.produce_sync(TP, [b"a"])
    h.settle(TP)
    h.crash(3)                     # the HW stays at 1 until the ISR shrinks
    rm, leader = h.brokers[1], h.partition(1, TP)
    got = []
    rm.handle_fetch(FetchRequest(-1, (FetchPartition(TP, 1),), max_wait_ms=5000, isolation="uncommitted"),
                    got.append)
    assert not got                 # nothing past offset 1 yet: parked
    p = h.produce(TP, [b"b"], acks=1)
    h.run_until(lambda: p.done, 100)
    assert leader.high_watermark == 1 and leader.log_end_offset == 2
    assert got and len(got[0].partitions[0].records) > 0   # woken by the append, not the timeout
    # Parked at the LEO, above the HW: it waits rather than answering empty at once.
    again = []
    rm.handle_fetch(FetchRequest(-1, (FetchPartition(TP, 2),), max_wait_ms=5000, isolation="uncommitted"),
                    again.append)
    assert not again


def test_a_produce_naming_a_partition_twice_completes_when_both_appends_commit(tmp_path):
    h = _cluster(tmp_path, {"replica.fetch.max.bytes": 1})   # one batch per follower fetch
    got = []
    req = ProduceRequest(-1, 3000, (ProducePartition(TP, encode_batch([b"a"], timestamp_ms=0)),
                                    ProducePartition(TP, encode_batch([b"b", b"c"], timestamp_ms=0))))
    h.transport.send(-100, 1, req, got.append)
    assert h.run_until(lambda: bool(got), 2000)                # well before the 3 s timeout
    assert [(r.error_code, r.base_offset) for r in got[0].partitions] == [(errors.NONE, 0), (errors.NONE, 1)]


def test_a_lagging_follower_catches_up_after_max_message_bytes_is_lowered(tmp_path):
    h = _cluster(tmp_path, FAST_LAG)
    h.crash(3, clean=True)
    assert h.produce_sync(TP, [b"x" * 5000]).error_code == errors.NONE   # under the old limit
    h.advance(2000)
    assert h.partition(1, TP).isr == (1, 2)
    for b in (1, 2):
        h.brokers[b].update_topic_configs({"bar": [("max.message.bytes", "2000")]})
    # The leader's log takes the new limit at once: a batch over it is refused now.
    assert h.produce_sync(TP, [b"y" * 5000]).error_code == errors.RecordTooLarge.code
    h.start(3)
    h.send_leader_and_isr(TP, [3])
    h.brokers[3].update_topic_configs({"bar": [("max.message.bytes", "2000")]})
    assert h.run_until(lambda: h.partition(1, TP).isr == (1, 2, 3), 20_000)
    assert h.partition(3, TP).log_end_offset == 1


def test_a_long_poll_asking_for_zero_bytes_is_answered_at_once(tmp_path):
    # Kafka answers as soon as the readable bytes reach min_bytes: with 0, at once.
    h = _cluster(tmp_path)
    got = []
    h.brokers[1].handle_fetch(FetchRequest(-1, (FetchPartition(TP, 0),), max_wait_ms=5000, min_bytes=0),
                              got.append)
    assert got and got[0].partitions[0].error_code == errors.NONE
    assert len(got[0].partitions[0].records) == 0


def test_a_long_poll_naming_no_partition_is_answered_at_once(tmp_path):
    h = _cluster(tmp_path)
    got = []
    h.brokers[1].handle_fetch(FetchRequest(-1, (), max_wait_ms=5000, min_bytes=1), got.append)
    assert got and got[0].error_code == errors.NONE and got[0].partitions == ()


def test_a_restarted_replica_keeps_the_log_start_it_checkpointed(tmp_path):
    # The follower adopts its leader's log start (KIP-107) inside one of its segments; a
    # restart must not fall back to that segment's base and serve what lies below again.
    h = _cluster(tmp_path, {"segment.bytes": 4096})
    for _ in range(40):
        h.produce_sync(TP, [b"x" * 200])
    h.settle(TP)
    follower = h.partition(2, TP)
    follower.log.maybe_increment_log_start_offset(25)
    assert follower.log_start_offset == 25 and 25 not in [s.base_offset for s in follower.log.segments]
    h.crash(2, clean=True)                      # writes log-start-offset-checkpoint
    h.start(2)
    h.send_leader_and_isr(TP, [2])
    follower = h.partition(2, TP)
    assert follower.log_start_offset == 25
    with pytest.raises(errors.OffsetOutOfRange):
        follower.read_records(24, 1 << 20, follower.log_end_offset)


def test_an_offsets_for_leader_epoch_refusal_carries_no_epoch_and_no_offset(tmp_path):
    """As Kafka's: an error answer's epoch and end offset are UNDEFINED (-1), never an offset
    a follower could truncate to."""
    from kreplica.protocol import OffsetForLeaderPartition, OffsetsForLeaderEpochRequest

    h = _cluster(tmp_path)
    follower = next(b for b in (1, 2, 3) if h.partition(b, TP).role is not Role.LEADER)
    answer = h.brokers[follower].handle_offsets_for_leader_epoch(OffsetsForLeaderEpochRequest(
        follower, (OffsetForLeaderPartition(TP, 0), OffsetForLeaderPartition(TopicPartition("none", 0), 0))))
    assert [(e.error_code, e.leader_epoch, e.end_offset) for e in answer.partitions] == [
        (errors.NotLeaderOrFollower.code, -1, -1), (errors.UnknownTopicOrPartition.code, -1, -1)]
    h.close()


def test_a_fetch_asks_for_kafkas_default_sizes_unless_told():
    # max.partition.fetch.bytes (1 MiB) per partition, replica.fetch.response.max.bytes
    # (10 MiB) per answer, min 1 byte, committed records, no epoch check.
    request = FetchRequest(-1, (FetchPartition(TP, 0),))
    assert (request.max_bytes, request.min_bytes, request.isolation) == (10 << 20, 1, "committed")
    assert (request.partitions[0].max_bytes, request.partitions[0].current_leader_epoch,
            request.partitions[0].log_start_offset) == (1 << 20, -1, -1)


# ---- second replica-layer mutant pass (twenty-fifth review) ------------------------------------
def test_a_timed_out_acks_all_produce_answers_no_base_offset(tmp_path):
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    h.crash(3)
    pending = h.produce(TP, [b"x"], acks=-1, timeout_ms=200)
    assert h.run_until(lambda: pending.done, 1000)
    r = pending.response.partitions[0]
    assert (r.error_code, r.base_offset) == (errors.RequestTimedOut.code, -1)
    h.close()


def test_a_waiting_produce_whose_partition_is_deleted_answers_unknown_partition(tmp_path):
    h = _cluster(tmp_path)
    h.crash(3)
    pending = h.produce(TP, [b"x"], acks=-1, timeout_ms=5000)
    h.advance(10)
    assert not pending.done
    rm = h.brokers[1]
    rm.handle_stop_replica(StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True),)))
    assert h.run_until(lambda: pending.done, 10)
    assert pending.answered_at_ms < 100
    r = pending.response.partitions[0]
    assert (r.error_code, r.base_offset) == (errors.UnknownTopicOrPartition.code, -1)
    h.close()


def test_offsets_for_leader_epoch_fences_the_askers_epoch(tmp_path):
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    h.elect(TP, 1)  # same leader, epoch 1
    rm = h.brokers[1]

    def ask(current):
        req = OffsetsForLeaderEpochRequest(2, (OffsetForLeaderPartition(TP, 0, current),))
        return rm.handle_offsets_for_leader_epoch(req).partitions[0].error_code

    assert ask(0) == errors.FencedLeaderEpoch.code
    assert ask(2) == errors.UnknownLeaderEpoch.code
    assert ask(1) == errors.NONE
    # Left out, the current epoch is Kafka's -1: not checked, not taken as epoch 0 and fenced.
    unchecked = OffsetsForLeaderEpochRequest(2, (OffsetForLeaderPartition(TP, 0),))
    answer = rm.handle_offsets_for_leader_epoch(unchecked).partitions[0]
    # Epoch 0 ends where epoch 1 began, at the log end 1 (Kafka's EpochEndOffset: the epoch
    # asked about, and the start offset of the first epoch after it).
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (errors.NONE, 0, 1)
    h.close()


def test_the_response_budget_is_shared_by_the_partitions_in_order(tmp_path):
    """FetchRequest.max_bytes bounds the whole answer: the first partition with data gets
    at least one batch, even one larger than the budget; once the budget is spent the
    partitions after it answer empty."""
    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("bar", 1))
    h.produce_sync(TP, [b"a" * 100])
    h.produce_sync(other, [b"b" * 100])
    rm = h.brokers[1]
    size = len(h.fetch(TP, 0).records)

    def read(max_bytes):
        got = []
        req = FetchRequest(-1, (FetchPartition(TP, 0), FetchPartition(other, 0)), max_wait_ms=0,
                           max_bytes=max_bytes)
        rm.handle_fetch(req, got.append)
        return [len(d.records) for d in got[0].partitions]

    assert read(2 * size) == [size, size]
    assert read(size) == [size, 0]
    assert read(1) == [size, 0]
    h.close()


@pytest.mark.parametrize("case", ["unknown", "fenced"])
def test_a_long_poll_with_an_error_partition_is_answered_at_once(tmp_path, case):
    """Whatever partition of the fetch has the error: one named before a sound partition
    with nothing to read ends the long-poll as well."""
    h = _cluster(tmp_path)
    quiet = _another_partition(h, TopicPartition("bar", 1))
    h.produce_sync(TP, [b"a"])
    h.elect(TP, 1)  # epoch 1
    fp = (FetchPartition(TopicPartition("nope", 0), 0) if case == "unknown"
          else FetchPartition(TP, 1, current_leader_epoch=0))
    code = errors.UnknownTopicOrPartition.code if case == "unknown" else errors.FencedLeaderEpoch.code
    for parts in ((fp,), (fp, FetchPartition(quiet, 0))):
        got = []
        h.brokers[1].handle_fetch(FetchRequest(-1, parts, max_wait_ms=5000), got.append)
        assert got and [d.error_code for d in got[0].partitions] == [code, errors.NONE][:len(parts)]
    h.close()


def test_an_out_of_range_answer_does_not_count_as_telling_the_follower_the_hw(tmp_path):
    """The fetcher ignores the HW in an OFFSET_OUT_OF_RANGE answer, so the leader must not
    record it as sent: the follower's next fetch at the log end is answered at once."""
    h = _cluster(tmp_path)
    h.crash(2)
    h.crash(3)
    rm = h.brokers[1]
    p = h.partition(1, TP)
    for _ in range(5):
        h.produce(TP, [b"x"], acks=1)
    h.run_until(lambda: p.log_end_offset == 5, 10)
    p.update_follower_fetch_state(2, 5, 0)
    p.update_follower_fetch_state(3, 3, 0)
    assert p.high_watermark == 3
    p.remote_replicas[2].high_watermark_sent = 3
    p.update_follower_fetch_state(3, 5, 0)
    assert p.high_watermark == 5
    got = []
    rm.handle_fetch(FetchRequest(2, (FetchPartition(TP, 9),), max_wait_ms=5000), got.append)
    assert got[0].partitions[0].error_code == errors.OffsetOutOfRange.code
    got = []
    rm.handle_fetch(FetchRequest(2, (FetchPartition(TP, 5),), max_wait_ms=5000), got.append)
    assert got and got[0].partitions[0].high_watermark == 5
    h.close()


# ---- fourth replica-layer mutant pass (sixty-fifth review) ---------------------------------------
def test_a_consumer_fetch_with_no_wait_is_answered_inside_the_call(tmp_path):
    """max_wait_ms=0 never parks, even with nothing to read: the answer is given before
    handle_fetch returns, not by a zero-length timer on the scheduler."""
    h = _cluster(tmp_path)
    got = []
    h.brokers[1].handle_fetch(FetchRequest(-1, (FetchPartition(TP, 0),), max_wait_ms=0, min_bytes=1), got.append)
    assert len(got) == 1 and len(got[0].partitions[0].records) == 0
    assert h.brokers[1].fetch_purgatory.watched(TP) == 0
    # A request that does not say how long it may wait does not wait (Cluster.offsets and
    # the simulated consumers leave max_wait_ms out).
    h.brokers[1].handle_fetch(FetchRequest(-1, (FetchPartition(TP, 0),)), got.append)
    assert len(got) == 2 and len(got[1].partitions[0].records) == 0
    assert h.brokers[1].fetch_purgatory.watched(TP) == 0
    h.close()


def test_a_long_poll_wakes_for_data_on_any_of_its_partitions(tmp_path):
    """A parked fetch is watched under every partition it names: data committed on the
    second one answers it at once, not at max_wait_ms."""
    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("bar", 1))
    start = h.scheduler.now_ms()
    got = []
    req = FetchRequest(-1, (FetchPartition(TP, 0), FetchPartition(other, 0)), max_wait_ms=5000)
    h.transport.send(-7, 1, req, lambda r: got.append((h.scheduler.now_ms(), r)))
    h.advance(100)
    assert got == []
    h.produce_sync(other, [b"a"])
    assert h.run_until(lambda: bool(got), 100)
    at, resp = got[0]
    assert at - start < 5000 and len(resp.partitions[1].records) > 0
    h.close()


def test_stop_replica_with_the_current_leader_epoch_is_applied(tmp_path):
    """Only an older epoch is fenced: the controller's usual StopReplica carries the epoch
    the replica runs, and it must stop (and here delete) the replica."""
    h = _cluster(tmp_path)
    h.elect(TP, 1)  # epoch 1
    rm = h.brokers[2]
    current = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, True, leader_epoch=1),))
    assert rm.handle_stop_replica(current).partition_errors == ((TP, errors.NONE),)
    assert TP not in rm.partitions and not (h.data_dir(2) / "bar-0").exists()
    h.close()


def test_an_init_leader_and_isr_deletes_an_unlisted_partition_not_yet_opened(tmp_path):
    """After a restart a partition dir is found on disk but opens only when named: an INIT
    LeaderAndIsr that does not list it deletes it all the same, checkpoint entry included."""
    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("old", 3))
    h.crash(2, clean=True)
    rm = h.start(2)
    assert other not in rm.partitions and (h.data_dir(2) / "old-3").is_dir()
    req = LeaderAndIsrRequest(0, h.controller_epoch, (h.leader_and_isr_state(TP),), is_init=True)
    assert rm.handle_leader_and_isr(req).error_code == errors.NONE
    assert not (h.data_dir(2) / "old-3").exists()
    rm.checkpoint_high_watermarks()
    assert other not in OffsetCheckpointFile(h.data_dir(2) / "replication-offset-checkpoint").read()
    h.close()


def test_a_hw_checkpoint_before_the_leader_and_isr_keeps_the_restarted_replicas_hw(tmp_path):
    """A restarted broker checkpoints HWs on its timer before the controller names its
    partitions: a partition not opened yet keeps the HW the last run wrote, in the file
    and when it is opened."""
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a", b"b"])
    h.settle(TP)
    h.crash(2, clean=True)
    rm = h.start(2)
    rm.checkpoint_high_watermarks()
    assert OffsetCheckpointFile(h.data_dir(2) / "replication-offset-checkpoint").read() == {TP: 2}
    h.send_leader_and_isr(TP, [2])
    assert h.partition(2, TP).high_watermark == 2
    h.close()


def test_a_produce_with_two_batches_for_one_partition_is_refused_and_nothing_is_appended(tmp_path):
    """Kafka's produce (v3 and later) takes exactly one batch per partition: INVALID_RECORD,
    the other partitions of the request unaffected."""
    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("bar", 1))
    two = encode_batch([b"a"], timestamp_ms=0) + encode_batch([b"b"], timestamp_ms=0)
    got = []
    req = ProduceRequest(1, 1000, (ProducePartition(TP, two), ProducePartition(other, encode_batch([b"c"]))))
    h.transport.send(-7, 1, req, got.append)
    assert h.run_until(lambda: bool(got), 100)
    assert [r.error_code for r in got[0].partitions] == [errors.InvalidRecord.code, errors.NONE]
    assert h.partition(1, TP).log_end_offset == 0 and h.partition(1, other).log_end_offset == 1
    # Bytes after the batch that make no whole second frame are the append's to judge.
    got.clear()
    h.transport.send(-7, 1, ProduceRequest(1, 1000, (ProducePartition(TP, two[:-1]),)), got.append)
    assert h.run_until(lambda: bool(got), 100)
    assert got[0].partitions[0].error_code != errors.InvalidRecord.code
    assert h.partition(1, TP).log_end_offset == 0
    h.close()


# ---- fifth replica-layer mutant pass (eighty-fifth review) ---------------------------------------
def test_a_shrink_drops_every_lagging_follower_in_one_proposal(tmp_path):
    """Seed 004's maybeShrinkIsr proposes the ISR without every out-of-sync follower at
    once, not one follower per check period (each period more holds the HW back)."""
    h = _cluster(tmp_path, FAST_LAG)
    h.crash(2)
    h.crash(3)
    h.produce_sync(TP, [b"a"], acks=1)
    h.advance(1600)
    assert [(req.new_isr, code) for req, code in h.alter_isr_log] == [((1,), errors.NONE)]
    assert h.partition(1, TP).isr == (1,) and h.states[TP].isr == (1,)
    h.close()


def test_isr_proposals_carry_the_controller_epoch_of_the_state_the_leader_runs(tmp_path):
    """The leader writes an ISR change with the controller epoch of its partition state
    (Kafka's Partition.controllerEpoch), which the controller reads to tell an ISR written
    before a broker's unclean restart from one grown after it."""
    h = _cluster(tmp_path, FAST_LAG)
    h.crash(3)
    h.produce_sync(TP, [b"a"], acks=1)
    h.advance(1600)
    h.start(3)
    h.send_leader_and_isr(TP, [3])
    assert h.run_until(lambda: h.states[TP].isr == (1, 2, 3), 5000)
    assert [(req.new_isr, req.controller_epoch) for req, _ in h.alter_isr_log] == [
        ((1, 2), h.controller_epoch), ((1, 2, 3), h.controller_epoch)]
    h.close()


def test_a_topic_override_replaces_only_the_keys_it_names(tmp_path):
    """A topic's overrides go over the broker's config key by key: the broker's
    min.insync.replicas=3 stays under an override of retention.ms, at the replica's start
    and at a config change, and a later override of min.insync.replicas itself reaches
    the hosted partition at the next produce (Kafka's TopicConfigHandler)."""
    from dataclasses import replace

    h = Harness(tmp_path, (1, 2, 3), config={**FAST_LAG, "min.insync.replicas": 3})
    h.states[TP] = PartitionRecord((1, 2, 3), 1, 0, (1, 2, 3))
    state = replace(h.leader_and_isr_state(TP), topic_config=(("retention.ms", "3600000"),))
    for b in (1, 2, 3):
        h.brokers[b].handle_leader_and_isr(LeaderAndIsrRequest(0, h.controller_epoch, (state,)))
    h.settle(TP)
    # The override itself is in force from the replica's start (Kafka's getOrCreateLog).
    assert {h.partition(b, TP).log.config.retention_ms for b in (1, 2, 3)} == {3_600_000}
    h.crash(3)
    h.produce_sync(TP, [b"a"], acks=1)
    h.advance(2000)
    assert h.states[TP].isr == (1, 2)
    assert h.produce_sync(TP, [b"b"]).error_code == errors.NotEnoughReplicas.code
    h.brokers[1].update_topic_configs({"bar": [("retention.ms", "7200000")]})
    assert h.produce_sync(TP, [b"b"]).error_code == errors.NotEnoughReplicas.code
    h.brokers[1].update_topic_configs({"bar": [("min.insync.replicas", "2")]})
    assert h.produce_sync(TP, [b"b"]).error_code == errors.NONE
    h.close()


def test_a_fetch_that_moves_the_hw_carries_the_new_hw_back(tmp_path):
    """Seed 004: the follower's fetch offset is recorded before the answer is built, so
    the answer to the fetch that moves the HW carries the new HW, also when it carries
    records and goes out at once (not only through the long-poll's re-read)."""
    h = _cluster(tmp_path, brokers=(1, 2))
    h.crash(2)
    h.produce_sync(TP, [b"a"], acks=1)
    h.produce_sync(TP, [b"b"], acks=1)
    assert h.partition(1, TP).high_watermark == 0
    got = []
    h.brokers[1].handle_fetch(FetchRequest(2, (FetchPartition(TP, 1, 0),), max_wait_ms=500), got.append)
    assert len(got) == 1
    d = got[0].partitions[0]
    assert [batch.base_offset for batch in decode_batches(d.records)] == [1]
    assert d.high_watermark == h.partition(1, TP).high_watermark == 1
    h.close()


# ---- sixth replica-layer mutant pass (hundred-and-fourth review) --------------------------------
def test_a_partitions_own_max_bytes_bounds_its_read_under_a_larger_response_budget(tmp_path):
    """As Kafka's fetch: each partition reads at most its own max_bytes (but at least one
    whole batch), however much of the response's max_bytes is left."""
    h = _cluster(tmp_path)
    for v in (b"a" * 100, b"b" * 100, b"c" * 100):
        h.produce_sync(TP, [v])
    one = len(h.fetch(TP, 0).records) // 3
    got = []
    req = FetchRequest(-1, (FetchPartition(TP, 0, max_bytes=2 * one),), max_wait_ms=0, max_bytes=1 << 20)
    h.brokers[1].handle_fetch(req, got.append)
    d = got[0].partitions[0]
    assert [r.value for r in decode_records(d.records)] == [b"a" * 100, b"b" * 100]
    h.close()


def test_a_crash_writes_no_final_hw_checkpoint(tmp_path):
    """A crash (unclean shutdown) leaves replication-offset-checkpoint as the last periodic
    write left it; only a clean shutdown checkpoints the HWs on its way out."""
    h = _cluster(tmp_path, {"replica.high.watermark.checkpoint.interval.ms": 1000})
    h.produce_sync(TP, [b"a"])
    h.settle(TP)
    h.advance(1000)
    path = h.data_dir(2) / "replication-offset-checkpoint"
    assert OffsetCheckpointFile(path).read() == {TP: 1}
    h.produce_sync(TP, [b"b"])
    h.settle(TP)
    assert h.partition(2, TP).high_watermark == 2
    h.crash(2, clean=False)
    assert OffsetCheckpointFile(path).read() == {TP: 1}
    h.close()


def test_one_log_left_without_its_clean_shutdown_marker_makes_the_restart_unclean(tmp_path):
    """Kafka's LogManager recovers when any log dir lacks the clean-shutdown file: the
    broker says it recovered uncleanly whichever partition dir (first or last) lacks it."""
    from kreplica.log.log_dir import CLEAN_SHUTDOWN

    h = _cluster(tmp_path, brokers=(1,))
    later = TopicPartition("zz", 0)
    h.create_partition(later, (1,))
    h.produce_sync(TP, [b"a"])
    h.produce_sync(later, [b"b"])
    h.crash(1, clean=True)
    dirs = sorted(p for p in h.data_dir(1).iterdir() if p.is_dir())
    assert [d.name for d in dirs] == ["bar-0", "zz-0"]
    assert all((d / CLEAN_SHUTDOWN).exists() for d in dirs)
    (dirs[0] / CLEAN_SHUTDOWN).unlink()  # the first dir read is the unclean one
    assert h.start(1).recovered_uncleanly
    h.close()


def test_a_produce_ending_in_a_frame_shorter_than_any_record_is_corrupt_not_a_second_batch(tmp_path):
    """Kafka's batch iterator reads a 12-byte offset and length, and a length below
    LegacyRecord.RECORD_OVERHEAD_V0 (14) is a corrupt record, not a batch: one batch with
    such a frame after it is CORRUPT_MESSAGE, not the INVALID_RECORD of two batches."""
    h = _cluster(tmp_path)
    batch = encode_batch([b"x"], timestamp_ms=0)
    tail = (0).to_bytes(8, "big") + (13).to_bytes(4, "big") + b"\0" * 13
    got = []
    h.transport.send(-7, 1, ProduceRequest(-1, 1000, (ProducePartition(TP, batch + tail),)), got.append)
    assert h.run_until(lambda: bool(got), 100)
    assert got[0].partitions[0].error_code == errors.CorruptMessage.code
    assert h.partition(1, TP).log_end_offset == 0
    h.close()


# ---- eighth replica-layer mutant pass (hundred-and-forty-second review) ---------------------------
def test_a_follower_never_told_an_hw_learns_even_hw_0_from_its_first_fetch_at_once(tmp_path):
    """A follower the leader never answered has been told no HW: its first fetch is
    answered at once, whatever the HW (0 on a new partition), and only its next fetch at
    the log end long-polls for replica.fetch.wait.max.ms."""
    h = Harness(tmp_path, (1,))
    h.create_partition(TP, (1, 2, 3))  # brokers 2 and 3 not started: nobody fetched yet
    rm = h.brokers[1]
    assert h.partition(1, TP).high_watermark == 0
    got = []
    rm.handle_fetch(FetchRequest(2, (FetchPartition(TP, 0, 0),), max_wait_ms=5000), got.append)
    assert len(got) == 1 and got[0].partitions[0].high_watermark == 0
    rm.handle_fetch(FetchRequest(2, (FetchPartition(TP, 0, 0),), max_wait_ms=5000), got.append)
    assert len(got) == 1 and rm.fetch_purgatory.watched(TP) == 1  # told HW 0 already: parked
    h.close()


def test_an_acks_all_produce_is_answered_when_its_last_partition_commits_below_the_others_offset(tmp_path):
    """The produce purgatory orders a waiting produce under each partition by that
    partition's own required offset: a request whose other partition committed a higher
    offset earlier is answered as soon as the remaining partition's HW passes its write,
    not left until the timeout."""
    h = _cluster(tmp_path, FAST_LAG)
    other = _another_partition(h, TopicPartition("bar", 1), (1, 2))
    for _ in range(4):
        assert h.produce_sync(other, [b"o"]).error_code == errors.NONE  # other's LEO 4
    h.crash(3)  # holds TP's HW until the leader shrinks it out (lag 1 s)
    batch = encode_batch([b"x"], timestamp_ms=0)
    got = []
    h.transport.send(-7, 1, ProduceRequest(-1, 30000, (ProducePartition(TP, batch), ProducePartition(other, batch))),
                     got.append)
    assert h.run_until(lambda: h.partition(1, other).high_watermark == 5, 1000) and not got
    assert h.run_until(lambda: bool(got), 5000), "answered only at the timeout"
    assert {r.tp: (r.error_code, r.base_offset) for r in got[0].partitions} == {
        TP: (errors.NONE, 0), other: (errors.NONE, 4)}
    assert h.partition(1, TP).isr == (1, 2)
    h.close()


def test_a_crashed_leader_never_answers_its_waiting_produces(tmp_path):
    """A shutdown forgets the waiting acks=all produces with their timers (their
    connections go with the broker): a crashed leader answers nothing, not even
    REQUEST_TIMED_OUT when the produce's timeout passes."""
    h = _cluster(tmp_path)
    h.crash(2)
    h.crash(3)
    rm = h.brokers[1]
    got = []
    rm.handle_produce(ProduceRequest(-1, 200, (ProducePartition(TP, encode_batch([b"x"], timestamp_ms=0)),)),
                      got.append)
    assert not got and rm.produce_purgatory.watched(TP) == 1
    h.crash(1)
    h.advance(1000)
    assert not got
    h.close()


def test_a_same_epoch_state_change_leaves_a_followers_fetch_and_log_alone(tmp_path):
    """Kafka's makeFollower restarts fetching only when the leader or its epoch changed:
    a LeaderAndIsr of the same epoch (an ISR change at a newer version) keeps the
    follower's fetch state, so nothing above its HW is truncated and fetched again."""
    h = _cluster(tmp_path, brokers=(1, 2))
    h.produce_sync(TP, [b"a"])
    h.produce(TP, [b"b"], acks=1)
    follower = h.partition(2, TP)
    assert h.run_until(lambda: follower.log_end_offset == 2, 1000)
    h.crash(1)  # the follower never learns HW 2
    assert follower.high_watermark == 1
    fetcher = h.brokers[2].fetchers[1]
    st = h.states[TP]
    st.isr, st.zk_version = (1, 2), st.zk_version + 1
    assert h.send_leader_and_isr(TP, brokers=[2])[2].partition_errors[0][1] == errors.NONE
    h.advance(100)
    assert h.brokers[2].fetchers.get(1) is fetcher
    assert (fetcher.states[TP].phase.value, fetcher.states[TP].fetch_offset) == ("Fetching", 2)
    assert (follower.leader_epoch, follower.zk_version, follower.log_end_offset) == (0, st.zk_version, 2)
    h.close()


def test_an_out_of_range_answer_gives_the_leaders_log_end_not_its_hw(tmp_path):
    """A follower fetching past the leader's LEO (it kept more of an older leader's log)
    cuts back to the LEO the OFFSET_OUT_OF_RANGE answer carries: that is the leader's
    log end, not its HW, or the follower would drop records the leader still has."""
    h = _cluster(tmp_path)
    h.crash(2)
    h.crash(3)
    assert h.produce_sync(TP, [b"a", b"b"], acks=1).error_code == errors.NONE
    got = []
    h.brokers[1].handle_fetch(FetchRequest(2, (FetchPartition(TP, 7, 0),), max_wait_ms=0), got.append)
    d = got[0].partitions[0]
    assert (d.error_code, d.high_watermark, d.log_start_offset, d.log_end_offset) == (
        errors.OffsetOutOfRange.code, 0, 0, 2)
    h.close()


def test_an_epoch_question_for_an_epoch_the_leader_never_had_names_the_largest_one_below(tmp_path):
    """KIP-279: asked for an epoch it never had, the leader answers with its largest epoch
    below it and where that one ends (the next epoch's start), so the follower truncates
    to the end of the epoch both hold, not to the end of one only it holds."""
    h = Harness(tmp_path, (1,))
    h.create_partition(TP, (1,))
    assert h.produce_sync(TP, [b"a", b"b", b"c"]).error_code == errors.NONE  # epoch 0: [0, 3)
    h.elect(TP, 1)
    h.elect(TP, 1)  # epoch 1 led with no append: the cache keeps epoch 2 from offset 3
    assert h.produce_sync(TP, [b"d"]).error_code == errors.NONE
    rm = h.brokers[1]
    req = OffsetsForLeaderEpochRequest(2, tuple(OffsetForLeaderPartition(TP, e, 2) for e in (1, 2)))
    answer = rm.handle_offsets_for_leader_epoch(req)
    assert [(e.error_code, e.leader_epoch, e.end_offset) for e in answer.partitions] == [
        (errors.NONE, 0, 3), (errors.NONE, 2, 4)]
    h.close()


def test_a_follower_fetch_is_answered_at_once_when_a_later_partition_has_hw_news(tmp_path):
    """HW news on any partition of a follower's fetch answers it at once, not only news
    on the first partition named: the follower learns the second partition's HW now."""
    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("bar", 1))
    h.crash(2)
    h.crash(3)
    rm = h.brokers[1]
    for tp in (TP, other):
        h.produce(tp, [b"x"], acks=1)
    h.run_until(lambda: h.partition(1, TP).log_end_offset == h.partition(1, other).log_end_offset == 1, 10)
    first, second = h.partition(1, TP), h.partition(1, other)
    first.update_follower_fetch_state(2, 1, 0)  # 3 holds TP's HW at 0
    for b in (2, 3):
        second.update_follower_fetch_state(b, 1, 0)
    assert (first.high_watermark, second.high_watermark) == (0, 1)
    for p in (first, second):
        p.remote_replicas[2].high_watermark_sent = 0
    got = []
    rm.handle_fetch(FetchRequest(2, (FetchPartition(TP, 1, 0), FetchPartition(other, 1, 0)), max_wait_ms=5000),
                    got.append)
    assert got and [d.high_watermark for d in got[0].partitions] == [0, 1]
    h.close()


# ---- ninth replica-layer mutant pass (hundred-and-sixty-first review) ----------------------------
def test_a_crashed_leader_never_answers_its_parked_fetches(tmp_path):
    """A shutdown forgets the parked long-polls with their timers, as it does the waiting
    produces: a crashed leader answers nothing, not even an empty answer (or an unknown
    partition, its partitions being gone) when the fetch's max_wait_ms passes."""
    h = _cluster(tmp_path)
    got = _consumer_long_poll(h, 0, 200)
    h.advance(10)
    assert not got and h.brokers[1].fetch_purgatory.watched(TP) == 3  # with the followers' own
    h.crash(1)
    h.advance(1000)
    assert not got
    h.close()


def test_the_recovery_point_checkpoint_holds_what_was_flushed_not_the_log_end(tmp_path):
    """Kafka's checkpointRecoveryPointOffsets writes each log's recovery point: with
    nothing flushed yet (flush.messages and flush.ms never) that stays at 0 however far
    the log has grown, so a restart after a crash recovers every record, not none."""
    h = _cluster(tmp_path, {"log.flush.offset.checkpoint.interval.ms": 1000})
    h.produce_sync(TP, [b"a", b"b"])
    h.settle(TP)
    log = h.partition(2, TP).log
    assert (log.recovery_point, log.log_end_offset) == (0, 2)
    h.advance(1000)
    assert OffsetCheckpointFile(h.data_dir(2) / "recovery-point-offset-checkpoint").read() == {TP: 0}
    h.close()


def test_a_file_named_like_a_partition_is_no_partition(tmp_path):
    """Kafka's LogManager loads directories only: a stray file named as a partition dir
    would be (``notes-0``) neither makes a clean restart unclean nor is deleted as an
    unlisted partition by an INIT LeaderAndIsr."""
    h = _cluster(tmp_path, brokers=(1,))
    h.produce_sync(TP, [b"a"])
    h.crash(1, clean=True)
    stray = h.data_dir(1) / "notes-0"
    stray.write_text("not a log")
    rm = h.start(1)
    assert not rm.recovered_uncleanly
    init = LeaderAndIsrRequest(0, h.controller_epoch, (h.leader_and_isr_state(TP),), is_init=True)
    assert rm.handle_leader_and_isr(init).error_code == errors.NONE
    assert stray.read_text() == "not a log" and rm.partitions[TP].log_end_offset == 1
    h.close()


def test_a_topic_config_change_reaches_the_followers_replicas_too(tmp_path):
    """Kafka's TopicConfigHandler updates every hosted log of the topic, led or followed:
    a follower told min.insync.replicas=3 enforces it as soon as it leads, and its log
    takes the new retention at once."""
    h = _cluster(tmp_path)
    for b in (1, 2, 3):
        assert h.brokers[b].update_topic_configs({"bar": [("min.insync.replicas", "3"),
                                                          ("retention.ms", "7200000")]}) == 1
    assert h.partition(2, TP).log.config.retention_ms == 7_200_000
    h.crash(3)
    h.elect(TP, 2, isr=(2, 1))
    assert h.produce_sync(TP, [b"a"]).error_code == errors.NotEnoughReplicas.code
    h.close()


def test_an_init_leader_and_isr_keeps_a_listed_partition_whose_state_it_refuses(tmp_path):
    """An older leader epoch changes nothing (Kafka reports the stale epoch and goes on),
    not even in an INIT LeaderAndIsr: the partition is listed, so the INIT's deletion of
    unlisted partitions leaves its replica and data alone."""
    h = _cluster(tmp_path)
    h.produce_sync(TP, [b"a"])
    stale = h.leader_and_isr_state(TP)
    h.elect(TP, 1)
    rm = h.brokers[2]
    req = LeaderAndIsrRequest(0, h.controller_epoch, (stale,), is_init=True)
    assert rm.handle_leader_and_isr(req).partition_errors == ((TP, errors.StaleControllerEpoch.code),)
    p = rm.partitions[TP]
    assert (p.role, p.leader_epoch, p.log_end_offset) == (Role.FOLLOWER, 1, 1)
    assert (h.data_dir(2) / "bar-0").is_dir()
    h.close()


# ---- tenth replica-layer mutant pass (hundred-and-eightieth review) -------------------------------
def test_a_leader_stopped_with_a_proposal_in_flight_no_longer_awaits_it(tmp_path):
    """StopReplica without delete leaves the ISR state as it was (pending), but the
    replica leads nothing now: the broker must not write its dead proposal to the store."""
    h, leader = _held_shrink(tmp_path)
    held = h.held[0][0]
    stop = StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, False),))
    assert h.brokers[1].handle_stop_replica(stop).partition_errors == ((TP, errors.NONE),)
    assert leader.isr_state.phase is IsrPhase.PENDING_SHRINK
    assert not leader.awaits_isr_answer(held)
    h.close()


def test_a_clean_shutdown_checkpoints_the_closed_logs_and_a_crash_writes_no_checkpoint(tmp_path):
    """Kafka's LogManager.shutdown flushes and closes every log, then checkpoints recovery
    points and log starts: the file holds each log's end.  A crash (kill -9) writes
    nothing: the files keep what the last periodic checkpoint wrote, whatever was flushed
    after it."""
    from kreplica.replica.replica_manager import LOG_START_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE

    h = _cluster(tmp_path, {"log.flush.offset.checkpoint.interval.ms": 1000})
    h.produce_sync(TP, [b"a", b"b"])
    h.settle(TP)
    h.advance(1000)
    recovery, start = ({b: OffsetCheckpointFile(h.data_dir(b) / name) for b in (2, 3)}
                       for name in (RECOVERY_POINT_CHECKPOINT_FILE, LOG_START_CHECKPOINT_FILE))
    for b in (2, 3):  # nothing flushed yet; the log starts not due for a minute
        assert recovery[b].read() == {TP: 0} and not start[b].path.exists()
    h.crash(2, clean=True)
    assert recovery[2].read() == {TP: 2} and start[2].read() == {TP: 0}
    h.partition(3, TP).log.flush()
    assert h.partition(3, TP).log.recovery_point == 2
    h.crash(3)
    assert recovery[3].read() == {TP: 0} and not start[3].path.exists()
    h.close()


def test_a_topic_with_dashes_in_its_name_is_found_in_the_data_dir_at_startup(tmp_path):
    """A topic name may hold dashes; its partition dir ``<topic>-<partition>`` splits at
    the last one.  Found at startup, a crashed log makes the restart unclean, and an INIT
    LeaderAndIsr that does not list the partition deletes it."""
    dashed = TopicPartition("my-topic", 12)
    h = Harness(tmp_path, (1,))
    h.create_partition(dashed, (1,))
    assert h.produce_sync(dashed, [b"a"]).error_code == errors.NONE
    h.crash(1)
    rm = h.start(1)
    assert rm.recovered_uncleanly
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, h.controller_epoch, (), is_init=True))
    assert not (h.data_dir(1) / "my-topic-12").exists()
    h.close()


def test_a_topic_whose_overrides_were_all_removed_goes_back_to_the_brokers_config(tmp_path):
    """The store reads a topic without overrides as an empty config (the broker hands it
    on as no pairs): its replicas must drop the overrides they took, not keep them."""
    h = _cluster(tmp_path, brokers=(1,))
    rm = h.brokers[1]
    default = h.partition(1, TP).log.config.retention_ms
    assert rm.update_topic_configs({"bar": [("retention.ms", "7200000"), ("min.insync.replicas", "2")]}) == 1
    assert h.partition(1, TP).log.config.retention_ms == 7_200_000
    assert h.produce_sync(TP, [b"a"]).error_code == errors.NotEnoughReplicas.code
    assert rm.update_topic_configs({"bar": []}) == 1
    assert h.partition(1, TP).log.config.retention_ms == default != 7_200_000
    assert h.produce_sync(TP, [b"a"]).error_code == errors.NONE
    h.close()


def test_retention_keeps_running_on_a_replica_stopped_without_delete(tmp_path):
    """A replica stopped without delete keeps its log, and Kafka's LogManager keeps
    cleaning every log it holds: retention still deletes its old segments."""
    h = _cluster(tmp_path, {"segment.bytes": 4096, "retention.bytes": 8192}, brokers=(1,))
    for _ in range(60):
        h.produce_sync(TP, [b"x" * 200])
    rm = h.brokers[1]
    rm.handle_stop_replica(StopReplicaRequest(0, h.controller_epoch, (StopReplicaPartition(TP, False),)))
    log = h.partition(1, TP).log
    assert h.partition(1, TP).role is Role.NONE and log.log_start_offset == 0
    assert rm.cleanup_logs() > 0
    assert log.log_start_offset > 0 and log.size_in_bytes() <= 8192 + 4096
    h.close()


def test_a_newer_leader_epoch_is_applied_whatever_its_zk_version(tmp_path):
    """The leader epoch decides whether a LeaderAndIsr is new (Kafka compares epochs only);
    the zk_version tells a replay from an update only within one epoch."""
    from dataclasses import replace

    h = _cluster(tmp_path)
    state = h.leader_and_isr_state(TP)
    rm = h.brokers[2]
    newer = replace(state, leader=2, leader_epoch=state.leader_epoch + 1)
    assert newer.zk_version == rm.partitions[TP].zk_version
    assert rm.handle_leader_and_isr(LeaderAndIsrRequest(0, h.controller_epoch, (newer,))).partition_errors == (
        (TP, errors.NONE),)
    p = rm.partitions[TP]
    assert (p.role, p.leader_epoch) == (Role.LEADER, newer.leader_epoch) and h.fetch_phase(2, TP) is None
    h.close()


# ---- eleventh replica-layer mutant pass (hundred-and-ninety-ninth review) --------------------------
def test_a_partition_dir_the_hw_checkpoint_never_named_is_written_with_hw_0_before_it_opens(tmp_path):
    """A broker crashed before its first HW checkpoint named the partition; restarted, its
    HW timer fires before any LeaderAndIsr.  The file names every partition dir it holds,
    as Kafka 0.10's does (an HW never checkpointed reads as 0), and the entries the last
    run wrote for the others stay."""
    from kreplica.replica.replica_manager import HW_CHECKPOINT_FILE

    h = _cluster(tmp_path)
    other = _another_partition(h, TopicPartition("bar", 1))
    h.produce_sync(other, [b"a", b"b"])
    h.settle(other)
    h.brokers[2].checkpoint_high_watermarks()
    path = h.data_dir(2) / HW_CHECKPOINT_FILE
    OffsetCheckpointFile(path).write({other: 2})  # as if TP were created after this checkpoint
    h.crash(2)  # no final checkpoint
    rm = h.start(2)
    rm.checkpoint_high_watermarks()
    assert OffsetCheckpointFile(path).read() == {TP: 0, other: 2}
    h.close()


# ---- twelfth replica-layer mutant pass (two-hundred-and-eighteenth review) -----------------------
def test_a_fetch_naming_another_epoch_is_answered_by_its_epoch_before_its_offset(tmp_path):
    """A fetcher of an older epoch whose offset the leader does not hold is told it is
    fenced (it must wait for the newer LeaderAndIsr), never OFFSET_OUT_OF_RANGE, which would
    make it cut its log to a leader it does not follow; a newer epoch is UNKNOWN likewise."""
    h = _cluster(tmp_path)
    h.elect(TP, 1)  # same leader, epoch 1, empty log
    assert h.fetch(TP, 5, current_leader_epoch=1).error_code == errors.OffsetOutOfRange.code
    assert h.fetch(TP, 5, current_leader_epoch=0).error_code == errors.FencedLeaderEpoch.code
    assert h.fetch(TP, 5, current_leader_epoch=2).error_code == errors.UnknownLeaderEpoch.code
    h.close()


def test_a_leader_and_isr_arriving_over_a_pending_shrink_replaces_it(tmp_path):
    """The controller shrinks the ISR itself (new version) while the leader's own shrink is
    parked: its LeaderAndIsr is the state now, the proposal is over (its late answer is
    stale), and the leader proposes again from the new ISR when broker 3 returns."""
    h, leader = _held_shrink(tmp_path)
    st = h.states[TP]
    st.isr = (1, 2)
    st.zk_version += 1
    h.send_leader_and_isr(TP, [1, 2])
    assert leader.isr == (1, 2) and leader.isr_state.phase is IsrPhase.COMMITTED
    assert leader.isr_state.maximal_isr == {1, 2}
    h.release_alter_isr()
    assert leader.isr == (1, 2) and leader.zk_version == st.zk_version
    h.start(3)
    h.send_leader_and_isr(TP, [3])
    assert h.run_until(lambda: h.states[TP].isr == (1, 2, 3) and leader.isr == (1, 2, 3), 5000)
    h.close()
