"""Partition alone: the HW rule of seed 004, ISR proposals, reads around the HW, role changes."""
import pytest

from kreplica import errors
from kreplica.config import validate
from kreplica.log import Log
from kreplica.protocol import AlterIsrResponse, LeaderAndIsrPartitionState, TopicPartition
from kreplica.records import encode_batch
from kreplica.replica import Partition, Role
from kreplica.replica.isr_state import IsrPhase, IsrState
from kreplica.replica.replica_state import ReplicaState
from kreplica.runtime import ManualClock

TP = TopicPartition("p", 0)
LAG = 1000


class Rig:
    def __init__(self, tmp_path, min_isr=1):
        self.clock = ManualClock(10_000)
        self.log = Log.open(tmp_path / "p-0", {"segment.bytes": 1 << 20}, clock=self.clock)
        self.proposals = []
        self.hw_events = []
        config = validate({"replica.lag.time.max.ms": LAG, "min.insync.replicas": min_isr})
        self.p = Partition(
            TP, 1, self.log, config, self.clock,
            lambda req, cb: self.proposals.append((req, cb)), self.hw_events.append,
        )

    def lead(self, isr=(1, 2, 3), epoch=0, version=0):
        return self.p.make_leader(LeaderAndIsrPartitionState(TP, 1, 1, epoch, isr, version, (1, 2, 3)))

    def append(self, n=1):
        return self.p.append_records_to_leader(encode_batch([b"x"] * n, timestamp_ms=0), 1)

    def fetch(self, replica, offset):
        return self.p.update_follower_fetch_state(replica, offset, 0)


@pytest.fixture
def rig(tmp_path):
    r = Rig(tmp_path)
    yield r
    r.log.close()


def test_hw_is_the_lowest_leo_of_the_isr_and_never_moves_back(rig):
    rig.lead()
    rig.append(5)
    assert rig.p.high_watermark == 0  # no follower has fetched yet
    rig.fetch(2, 5)
    assert rig.p.high_watermark == 0  # broker 3 (ISR) still unknown
    assert rig.fetch(3, 3) is True
    assert rig.p.high_watermark == 3 and rig.hw_events == [TP]
    rig.fetch(3, 5)
    assert rig.p.high_watermark == 5
    # A follower reporting less (it truncated) never moves the HW back.
    rig.fetch(3, 2)
    assert rig.p.high_watermark == 5


def test_recently_caught_up_replica_outside_the_isr_holds_the_hw(rig):
    rig.lead(isr=(1, 2))
    rig.append(4)
    rig.fetch(2, 4)
    assert rig.p.high_watermark == 4
    rig.append(4)  # LEO 8
    rig.clock.advance(LAG + 1)
    assert rig.p.maybe_shrink_isr() is True  # 2 lags; while this is in flight 3 cannot join
    rig.fetch(3, 8)  # caught up now, outside the (maximal) ISR
    rig.fetch(3, 6)
    rig.fetch(2, 8)
    assert rig.p.isr_state.maximal_isr == {1, 2}
    assert rig.p.high_watermark == 6  # 3 counts: caught up within the lag time
    rig.clock.advance(LAG + 1)
    rig.fetch(2, 8)
    assert rig.p.high_watermark == 8  # 3 fell out of the window


def test_caught_up_time_rules():
    r = ReplicaState(2)
    r.update_fetch_state(fetch_offset=5, log_start_offset=0, now_ms=100, leader_leo=5)
    assert r.last_caught_up_ms == 100  # at the leader's LEO: caught up now
    r.update_fetch_state(fetch_offset=5, log_start_offset=0, now_ms=200, leader_leo=9)
    assert r.last_caught_up_ms == 100  # behind, and below the LEO of its previous fetch? no: 5 >= 5
    r.update_fetch_state(fetch_offset=9, log_start_offset=0, now_ms=300, leader_leo=12)
    assert r.last_caught_up_ms == 200  # reached the LEO the leader had at the previous fetch
    assert r.is_caught_up(1200, 1000) and not r.is_caught_up(1201, 1000)


def test_check_enough_replicas_reach_offset(tmp_path):
    rig = Rig(tmp_path, min_isr=2)
    rig.lead(isr=(1, 2))
    rig.append(1)
    assert rig.p.check_enough_replicas_reach_offset(1) == (False, errors.NONE)
    rig.fetch(2, 1)
    assert rig.p.check_enough_replicas_reach_offset(1) == (True, errors.NONE)
    rig.p.isr_state = IsrState((1,))
    assert rig.p.check_enough_replicas_reach_offset(1) == (True, errors.NotEnoughReplicasAfterAppend.code)
    rig.p.make_offline()
    assert rig.p.check_enough_replicas_reach_offset(1) == (True, errors.NotLeaderOrFollower.code)
    rig.log.close()


def test_min_isr_is_checked_before_appending_for_acks_all(tmp_path):
    rig = Rig(tmp_path, min_isr=2)
    rig.lead(isr=(1,))
    with pytest.raises(errors.NotEnoughReplicas):
        rig.p.append_records_to_leader(encode_batch([b"x"], timestamp_ms=0), -1)
    assert rig.p.log_end_offset == 0
    rig.p.append_records_to_leader(encode_batch([b"x"], timestamp_ms=0), 1)
    assert rig.p.log_end_offset == 1
    # Kafka checks min.insync.replicas for acks=-1 only: acks=0 appends below it too.
    rig.p.append_records_to_leader(encode_batch([b"y"], timestamp_ms=0), 0)
    assert rig.p.log_end_offset == 2
    rig.log.close()


def test_expand_and_shrink_are_proposals_applied_on_success(rig):
    rig.lead(isr=(1, 2))
    rig.append(2)
    rig.fetch(2, 2)
    rig.fetch(3, 2)  # at the HW: join
    req, answer = rig.proposals[-1]
    assert (req.new_isr, req.zk_version, req.leader_epoch) == ((1, 2, 3), 0, 0)
    assert rig.p.isr == (1, 2) and rig.p.isr_state.phase is IsrPhase.PENDING_EXPAND
    assert rig.p.isr_state.maximal_isr == {1, 2, 3}
    answer(AlterIsrResponse(TP, errors.NONE, 0, (1, 2, 3), 1))
    assert rig.p.isr == (1, 2, 3) and rig.p.zk_version == 1
    # Broker 3 stops fetching; the leader moves on; after the lag time it is proposed out.
    rig.append(1)
    rig.clock.advance(LAG + 1)
    rig.fetch(2, 3)
    assert rig.p.out_of_sync_replicas() == (3,)
    assert rig.p.maybe_shrink_isr() is True
    req, answer = rig.proposals[-1]
    assert req.new_isr == (1, 2) and req.zk_version == 1
    assert rig.p.high_watermark == 2  # still held by 3 while the shrink is in flight
    answer(AlterIsrResponse(TP, errors.NONE, 0, (1, 2), 2))
    assert rig.p.isr == (1, 2) and rig.p.high_watermark == 3


def test_a_follower_at_the_leo_is_never_out_of_sync(rig):
    rig.lead(isr=(1, 2, 3))
    rig.append(1)
    rig.fetch(2, 1)
    rig.fetch(3, 1)
    rig.clock.advance(10 * LAG)
    assert rig.p.out_of_sync_replicas() == ()


def test_a_refused_proposal_is_dropped_and_a_stale_answer_ignored(rig):
    rig.lead(isr=(1, 2))
    rig.append(1)
    rig.fetch(2, 1)
    rig.fetch(3, 1)
    _, answer = rig.proposals[-1]
    answer(AlterIsrResponse(TP, errors.InvalidUpdateVersion.code))
    assert rig.p.isr == (1, 2) and not rig.p.isr_state.is_inflight
    rig.fetch(3, 1)
    _, late = rig.proposals[-1]
    rig.lead(isr=(1, 2), epoch=1, version=5)  # a newer LeaderAndIsr overtakes the answer
    late(AlterIsrResponse(TP, errors.NONE, 0, (1, 2, 3), 1))
    assert rig.p.isr == (1, 2) and rig.p.zk_version == 5


def test_isr_state_table():
    s = IsrState((1, 2)).pending_shrink((1,))
    with pytest.raises(errors.StateChangeFailed):
        s.pending_expand((1, 2, 3))
    assert s.committed((1,)).phase is IsrPhase.COMMITTED


def test_reads_around_the_hw(rig):
    rig.lead(isr=(1, 2))
    rig.append(2)
    rig.append(2)
    rig.fetch(2, 2)
    assert (rig.p.high_watermark, rig.p.log_end_offset) == (2, 4)
    committed = rig.p.read_records(0, 1 << 20, rig.p.high_watermark)
    from kreplica.records import decode_records

    assert [r.offset for r in decode_records(committed)] == [0, 1]
    assert len(rig.p.read_records(2, 1 << 20, rig.p.high_watermark)) == 0
    assert len(rig.p.read_records(4, 1 << 20, rig.p.high_watermark)) == 0
    with pytest.raises(errors.OffsetOutOfRange):
        rig.p.read_records(5, 1 << 20, rig.p.high_watermark)


def test_make_leader_records_the_epoch_and_make_follower_reports_changes(rig):
    rig.lead(epoch=0)
    rig.append(3)
    assert rig.log.leader_epoch_cache.entries == [(0, 0)]
    follower = LeaderAndIsrPartitionState(TP, 1, 2, 1, (1, 2, 3), 1, (1, 2, 3))
    assert rig.p.make_follower(follower) is True and rig.p.role is Role.FOLLOWER
    assert rig.p.make_follower(follower) is False  # same leader and epoch: the fetcher keeps going
    assert rig.p.remote_replicas == {}
    assert rig.p.make_leader(LeaderAndIsrPartitionState(TP, 1, 1, 2, (1, 2, 3), 2, (1, 2, 3))) is True
    assert rig.log.leader_epoch_cache.entries == [(0, 0), (2, 3)]
    assert rig.p.leader_epoch_start_offset == 3
    assert all(r.log_end_offset == -1 for r in rig.p.remote_replicas.values())
    assert rig.p.check_leader_epoch(1) == errors.FencedLeaderEpoch.code
    assert rig.p.check_leader_epoch(3) == errors.UnknownLeaderEpoch.code
    assert rig.p.check_leader_epoch(-1) == rig.p.check_leader_epoch(2) == errors.NONE


def test_a_follower_fetching_often_but_never_catching_up_leaves_the_isr(rig):
    """The shrink rule is the time a follower last caught up, not the time it last
    fetched: one that keeps fetching but stays behind (a full disk refusing its appends,
    a fetch size too small for the produce rate) must still drop out of the ISR."""
    rig.lead(isr=(1, 2, 3))
    rig.append(1)
    rig.fetch(2, 1)
    rig.fetch(3, 1)
    for _ in range(4):
        rig.clock.advance(LAG // 2)
        rig.append(1)
        rig.fetch(2, rig.p.log_end_offset)
        rig.fetch(3, 1)  # fetches every half lag period, always from the same offset
    assert rig.p.out_of_sync_replicas() == (3,)
    assert rig.p.maybe_shrink_isr() is True and rig.proposals[-1][0].new_isr == (1, 2)


def test_min_isr_after_the_append_counts_a_joining_replica(tmp_path):
    """The write waited for the replica being added (maximal ISR), so the answer counts it:
    two copies exist though the store's ISR has only the leader."""
    rig = Rig(tmp_path, min_isr=2)
    rig.lead(isr=(1,))
    rig.append(1)  # acks=1: nobody else counts, HW 1
    assert rig.p.high_watermark == 1
    rig.fetch(3, 1)  # at the HW: 3 is proposed in
    assert rig.p.isr_state.phase is IsrPhase.PENDING_EXPAND and rig.p.isr == (1,)
    rig.append(1)
    assert rig.p.check_enough_replicas_reach_offset(2) == (False, errors.NONE)  # 3 holds it
    rig.fetch(3, 2)
    assert rig.p.check_enough_replicas_reach_offset(2) == (True, errors.NONE)
    rig.log.close()


def test_a_new_leader_gives_its_isr_one_lag_period_to_fetch(rig):
    """make_leader counts the ISR as caught up now: followers that have not fetched from
    the new leader yet are not proposed out at its first shrink check."""
    rig.lead(isr=(1, 2, 3))
    rig.append(2)
    assert rig.p.out_of_sync_replicas() == ()
    assert rig.p.maybe_shrink_isr() is False
    rig.clock.advance(LAG)
    assert rig.p.out_of_sync_replicas() == ()
    rig.clock.advance(1)
    assert rig.p.out_of_sync_replicas() == (2, 3)  # never fetched: now they lag


def test_a_follower_joins_only_at_both_the_hw_and_the_epoch_start(rig):
    """Seed 004 and KIP-101: the ISR admits a follower whose LEO reached the leader's HW
    *and* the offset where the leader's current epoch began; either alone is not enough."""
    rig.lead(isr=(1, 2))
    rig.append(4)
    rig.fetch(2, 2)
    rig.lead(isr=(1, 2), epoch=1, version=1)  # re-elected with its HW behind its LEO
    assert (rig.p.high_watermark, rig.p.leader_epoch_start_offset) == (2, 4)
    rig.fetch(3, 3)  # at the HW, below the epoch start
    assert rig.proposals == []
    rig.fetch(2, 4)
    rig.append(2)
    rig.fetch(2, 6)
    assert rig.p.high_watermark == 6
    rig.fetch(3, 5)  # past the epoch start, below the HW
    assert rig.proposals == []
    rig.fetch(3, 6)
    assert [req.new_isr for req, _ in rig.proposals] == [(1, 2, 3)]


# ---- second replica-layer mutant pass (twenty-fifth review) ------------------------------------
def test_a_replica_removed_under_the_same_epoch_no_longer_holds_the_hw(rig):
    """A LeaderAndIsr for the same epoch (a newer zk_version) that drops replica 3 from the
    assignment forgets it: recently caught up, it would otherwise hold the HW back."""
    rig.lead(isr=(1, 2))
    rig.append(4)
    rig.fetch(3, 4)  # outside the ISR, caught up now
    rig.fetch(2, 4)
    assert rig.p.high_watermark == 4
    rig.p.make_leader(LeaderAndIsrPartitionState(TP, 1, 1, 0, (1, 2), 1, (1, 2)))
    assert sorted(rig.p.remote_replicas) == [2]
    rig.append(2)
    rig.fetch(2, 6)
    assert rig.p.high_watermark == 6


def test_a_first_fetch_below_the_leo_says_nothing_about_earlier_catching_up():
    """The previous-fetch rule needs a previous fetch: on the first one (no leader LEO
    recorded yet) a follower behind the LEO is not caught up, even at times below the lag."""
    r = ReplicaState(2)
    r.update_fetch_state(fetch_offset=0, log_start_offset=0, now_ms=50, leader_leo=5)
    assert not r.is_caught_up(60, 1000)
    r.update_fetch_state(fetch_offset=5, log_start_offset=0, now_ms=70, leader_leo=8)
    assert r.last_caught_up_ms == 50  # reached the LEO of its previous fetch


# ---- fourth replica-layer mutant pass (sixty-fifth review) ------------------------------------
def test_a_follower_exactly_at_the_epoch_start_joins(rig):
    """Both join bounds are inclusive: a follower whose LEO is exactly where the leader's
    epoch began (and the HW) is proposed into the ISR."""
    rig.lead(isr=(1, 2))
    rig.append(4)
    rig.fetch(2, 4)
    rig.lead(isr=(1, 2), epoch=1, version=1)  # epoch 1 starts at 4, the HW is 4 already
    assert (rig.p.high_watermark, rig.p.leader_epoch_start_offset) == (4, 4)
    rig.fetch(3, 4)
    assert [req.new_isr for req, _ in rig.proposals] == [(1, 2, 3)]


def test_a_replica_added_under_the_same_epoch_must_fetch_before_it_holds_the_hw(rig):
    """A LeaderAndIsr for the same epoch that adds replica 3 to the assignment (a
    reassignment) gives it no caught-up standing: it never fetched, so it does not
    hold the HW back."""
    rig.p.make_leader(LeaderAndIsrPartitionState(TP, 1, 1, 0, (1, 2), 0, (1, 2)))
    rig.append(4)
    rig.fetch(2, 4)
    assert rig.p.high_watermark == 4
    rig.p.make_leader(LeaderAndIsrPartitionState(TP, 1, 1, 0, (1, 2), 1, (1, 2, 3)))
    assert sorted(rig.p.remote_replicas) == [2, 3]
    rig.append(2)
    rig.fetch(2, 6)
    assert rig.p.high_watermark == 6


def test_min_isr_before_the_append_counts_the_committed_isr_not_a_joining_replica(tmp_path):
    """Before the append the store's ISR is what counts (Kafka's isr.size): a replica whose
    join is only proposed does not let an acks=all write in under min.insync.replicas."""
    rig = Rig(tmp_path, min_isr=2)
    rig.lead(isr=(1,))
    rig.append(1)
    rig.fetch(3, 1)
    assert rig.p.isr_state.phase is IsrPhase.PENDING_EXPAND and rig.p.isr_state.maximal_isr == {1, 3}
    with pytest.raises(errors.NotEnoughReplicas):
        rig.p.append_records_to_leader(encode_batch([b"x"], timestamp_ms=0), -1)
    assert rig.p.log_end_offset == 1
    rig.log.close()


# ---- fifth replica-layer mutant pass (eighty-fifth review) ---------------------------------------
def test_a_follower_reaching_the_hw_is_proposed_before_its_fetch_moves_the_hw(rig):
    """Kafka's updateFollowerFetchState checks the ISR before the HW: a follower outside
    the ISR whose fetch reaches the HW is proposed in (it counts in the maximal ISR at once)
    and holds the HW at its LEO, even after the lag window that let it hold the HW before
    has passed.  The other order moves the HW past it first and leaves it outside."""
    rig.lead(isr=(1, 2))
    rig.append(5)
    rig.fetch(3, 5)  # caught up now: proposed into the ISR ...
    _, answer = rig.proposals[-1]
    answer(AlterIsrResponse(TP, errors.InvalidUpdateVersion.code))  # ... and refused by the store
    rig.append(5)  # LEO 10
    rig.fetch(2, 10)
    assert rig.p.high_watermark == 5  # 3 holds it: caught up within the lag time
    rig.clock.advance(LAG + 1)
    rig.fetch(3, 7)  # no longer caught up, but at the HW and the epoch start
    assert [req.new_isr for req, _ in rig.proposals] == [(1, 2, 3), (1, 2, 3)]
    assert rig.p.isr_state.maximal_isr == {1, 2, 3}
    assert rig.p.high_watermark == 7


def test_a_stopped_leader_led_again_under_the_same_epoch_gives_its_isr_a_lag_period(rig):
    """StopReplica without delete, then a LeaderAndIsr for the same epoch: the replica was
    not leading, so it starts over as a new leader does (make_leader's reset), its ISR
    followers caught up "now" for one lag period, not out of sync before they can fetch."""
    rig.lead()
    rig.append(2)
    rig.fetch(2, 2)
    rig.fetch(3, 2)
    rig.p.make_offline()
    rig.clock.advance(LAG + 1)
    assert rig.lead() is True
    rig.append(1)
    assert rig.p.maybe_shrink_isr() is False and rig.proposals == []
    rig.clock.advance(LAG + 1)
    assert rig.p.maybe_shrink_isr() is True
    assert [req.new_isr for req, _ in rig.proposals] == [(1,)]


def test_an_isr_member_outside_the_assignment_is_proposed_out_once_it_lags(rig):
    """Seed 000 step 7 (reassignment): a leader that stays is sent AR = RAR while the ISR
    still names an old replica.  That member never fetches from this leader, so after the
    lag time the shrink check proposes it out like any lagging follower."""
    rig.p.make_leader(LeaderAndIsrPartitionState(TP, 1, 1, 0, (1, 2, 3), 0, (1, 2)))
    assert 3 not in rig.p.remote_replicas
    rig.append(2)
    rig.clock.advance(LAG + 1)
    rig.fetch(2, 2)
    assert rig.p.out_of_sync_replicas() == (3,)
    assert rig.p.maybe_shrink_isr() is True
    assert rig.proposals[-1][0].new_isr == (1, 2)


def test_a_leader_whose_isr_is_down_to_itself_moves_the_hw_when_it_takes_the_state(rig):
    """Kafka's makeLeader ends with maybeIncrementLeaderHW ("the ISR could be down to 1"):
    a leader told its ISR is itself alone commits its whole log at once, without waiting
    for a produce or a fetch."""
    rig.lead(isr=(1, 2))
    rig.append(3)
    assert rig.p.high_watermark == 0  # broker 2 has not fetched
    rig.lead(isr=(1,), epoch=1, version=1)
    assert rig.p.high_watermark == 3 and rig.hw_events == [TP]


# ---- ninth replica-layer mutant pass (hundred-and-sixty-first review) ----------------------------
def test_a_same_epoch_state_leaves_the_epoch_start_where_the_epoch_began(rig):
    """The epoch start is where this leader's epoch began (recorded when it became leader),
    not the LEO when a LeaderAndIsr of the same epoch (a newer zk_version) arrives: a
    follower reaching the HW after such a state joins the ISR though it is below that LEO."""
    rig.lead(isr=(1, 2))
    rig.append(5)
    rig.fetch(2, 3)  # the HW stops at 3, the LEO is 5
    rig.lead(isr=(1, 2), version=1)  # same epoch, newer zk_version
    assert (rig.p.high_watermark, rig.p.log_end_offset, rig.p.leader_epoch_start_offset) == (3, 5, 0)
    rig.fetch(3, 3)
    assert [req.new_isr for req, _ in rig.proposals] == [(1, 2, 3)]


# ---- eleventh replica-layer mutant pass (hundred-and-ninety-ninth review) -------------------------
def test_a_shrink_proposes_the_isr_less_the_laggards_never_a_replica_outside_it(rig):
    """Broker 3 is assigned but out of the ISR (down, or far behind).  When broker 2 lags
    too, the shrink proposes the ISR without 2, the leader alone: it must not bring 3
    back in with it, an ISR member that never caught up (it would hold the HW, and could
    be elected with committed records missing)."""
    rig.lead(isr=(1, 2))
    rig.append(1)
    rig.clock.advance(LAG + 1)
    assert rig.p.out_of_sync_replicas() == (2,)
    assert rig.p.maybe_shrink_isr() is True
    assert [req.new_isr for req, _ in rig.proposals] == [(1,)]
