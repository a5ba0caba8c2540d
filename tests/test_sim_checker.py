"""The invariant checker on real logs: each invariant is caught, attributed losses are counted."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kreplica.log import Log
from kreplica.replica.fetcher import FetchPhase
from kreplica.replica.partition import Role
from kreplica.runtime import ManualClock
from kreplica.sim.checker import Checker, Invariant
from kreplica.sim.history import History
from kreplica.records import encode_batch
from kreplica.sim.log_view import DAMAGED, fingerprints, read_fingerprints


class Replica(SimpleNamespace):
    """The few Partition attributes the checker reads, over a real Log."""

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset


@pytest.fixture
def make(tmp_path):
    logs = []

    def make(name: str, role: Role, epoch: int, isr=(1, 2)) -> Replica:
        log = Log.open(tmp_path / name, {"segment.bytes": 1 << 20}, ManualClock())
        logs.append(log)
        return Replica(log=log, role=role, leader_epoch=epoch, isr=tuple(isr))

    yield make
    for log in logs:
        log.close()


def append(r: Replica, values: list[bytes], epoch: int, commit: bool = True) -> tuple[int, int, int]:
    info = r.log.append_as_leader(values, leader_epoch=epoch)
    if commit:
        r.log.maybe_increment_high_watermark(r.log.log_end_offset)
    fp = read_fingerprints(r.log, info.first_offset, info.last_offset + 1)[0]
    return fp[0], fp[1], fp[3]


def test_follower_holding_the_leaders_batches_passes_and_a_different_batch_is_divergence(make):
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    append(leader, [b"a", b"b"], 0)
    append(follower, [b"a", b"b"], 0)  # same bytes, same CRC
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None and c.models["t-0"].canon_end == 2
    append(leader, [b"c"], 0)
    append(follower, [b"X"], 0)
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE
    assert "offset 2" in c.violation.message


def test_a_batch_whose_bytes_no_longer_match_its_crc_is_damaged():
    """The header keeps the intact batch's CRC; only the bytes tell (a torn write kept)."""
    a, b = bytes(encode_batch([b"a", b"b"], base_offset=0)), bytes(encode_batch([b"c"], base_offset=2))
    torn = bytearray(a + b)
    torn[len(a) - 1] ^= 0xFF  # the first batch's last record byte
    intact = fingerprints(a + b)
    assert fingerprints(bytes(torn)) == intact  # the headers alone cannot tell
    got = fingerprints(bytes(torn), verified=True)
    assert got == [intact[0][:3] + (DAMAGED,), intact[1]]
    assert fingerprints(a + b, verified=True) == intact


def test_read_fingerprints_keeps_the_batch_holding_start_and_reads_from_the_log_start(make):
    r = make("l", Role.LEADER, 0)
    whole = [append(r, values, 0) for values in ([b"a", b"b", b"c"], [b"d"], [b"e", b"f"])]
    assert [(fp[0], fp[1], fp[3]) for fp in read_fingerprints(r.log, 1, 4)] == whole[:2]  # 0..2 holds 1
    assert r.log.maybe_increment_log_start_offset(3)
    got = read_fingerprints(r.log, 0, 10)  # nothing below the log start is read
    assert [(fp[0], fp[1], fp[3]) for fp in got] == whole[1:]


def _flip_a_record_byte(replica) -> None:
    """Damage the replica's first batch on disk: one record byte, after the header (and its CRC)."""
    replica.log.flush()
    segment = next(replica.log.segments[0].log_file.path.parent.glob("*.log"))
    with open(segment, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_follower_holding_a_damaged_copy_of_a_committed_batch_is_divergence(make):
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    append(leader, [b"committed"], 0)
    append(follower, [b"committed"], 0)
    _flip_a_record_byte(follower)
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 2
    assert "do not match" in v.message



def test_a_followers_batches_beyond_the_committed_history_wait_for_it_a_damaged_one_too(make):
    """Below its HW a follower may hold batches the checker has not yet seen a leader
    commit: it judges them, a damaged copy among them, once that commit is seen."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    append(leader, [b"a"], 0)
    c.observe(1, "t-0", leader, None)
    for values in ([b"b"], [b"c"]):
        append(leader, values, 0)
    for values in ([b"a"], [b"b"], [b"c"]):
        append(follower, values, 0)
    end = len(follower.log.read(0).view)  # a, b and c, from the segment's first byte
    follower.log.flush()
    segment = next(follower.log.segments[0].log_file.path.parent.glob("*.log"))
    with open(segment, "r+b") as f:  # the last byte of c, its last record's
        f.seek(end - 1)
        byte = f.read(1)
        f.seek(end - 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None and c.views[(2, "t-0")].verified == 1
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 2
    assert "offset 2" in v.message and "do not match" in v.message

def test_retention_may_delete_only_what_is_committed():
    c = Checker(History())
    c.on_retention(1, "t-0", hw=120, start=100)
    c.on_retention(1, "t-0", hw=120, start=120)  # up to the HW: every deleted batch was committed
    assert c.violation is None
    c.on_retention(2, "t-0", hw=120, start=121)  # one offset above: already uncommitted
    v = c.violation
    assert v is not None and v.invariant is Invariant.ACKED_WRITE_LOST and v.broker == 2
    assert "[120, 121)" in v.message


def test_a_follower_is_judged_only_above_the_log_start_a_leader_has_had(make):
    """Below its leader's log start a follower may still hold history an election
    superseded: the leader's epoch cache no longer reaches there, and the follower's next
    fetch moves its own start up (KIP-107).  Above that start it is judged as ever."""
    c = Checker(History())
    leader, follower, other = (make(n, r, 0) for n, r in (("l", Role.LEADER), ("f", Role.FOLLOWER),
                                                          ("o", Role.FOLLOWER)))
    append(leader, [b"a", b"b"], 0)
    append(leader, [b"c"], 0)
    c.observe(1, "t-0", leader, None)
    assert leader.log.maybe_increment_log_start_offset(2)
    c.observe(1, "t-0", leader, None)
    append(follower, [b"X", b"Y"], 0)  # superseded leftovers below the leader's log start
    append(follower, [b"c"], 0)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None
    append(other, [b"a", b"b"], 0)
    append(other, [b"Z"], 0)  # above the log start: judged
    c.observe(3, "t-0", other, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE
    assert c.violation.broker == 3 and "offset 2" in c.violation.message


@pytest.mark.parametrize("phase", [FetchPhase.TRUNCATING, None], ids=["truncating", "no-fetch-state"])
def test_a_truncating_follower_is_not_judged_until_it_fetches(make, phase):
    """Nor is a follower no fetcher holds (the world hands it over with no phase: its
    fetch, and so its truncation, not begun yet or stopped)."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    append(leader, [b"a"], 0)
    append(follower, [b"stale"], 0)
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, phase)
    assert c.violation is None
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE


def test_new_leader_without_an_acked_write_is_a_loss(make):
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    new = make("new", Role.LEADER, 1, isr=(2,))
    c.observe(2, "t-0", new, None)
    assert c.violation.invariant is Invariant.ACKED_WRITE_LOST
    assert not c.losses


def test_acks_1_writes_are_not_promised(make):
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(old, [b"acks1"], 0, commit=False)
    c.on_ack("t-0", base, last, crc, 1, 2)
    c.observe(2, "t-0", make("new", Role.LEADER, 1, isr=(2,)), None)
    assert c.violation is None


def _ack_then_elect_an_outsider(c: Checker, make) -> Replica:
    """Broker 1 leads epoch 0 alone and acks a write; broker 3, outside that ISR and
    with an empty log, is then seen leading epoch 1."""
    old = make("old", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 1)
    outsider = make("outsider", Role.LEADER, 1, isr=(3,))
    c.observe(3, "t-0", outsider, None)
    return outsider


def test_unclean_election_losses_are_counted_and_attributed(make):
    c = Checker(History())
    outsider = _ack_then_elect_an_outsider(c, make)
    assert c.violation is None and c.unclean_elections == 1
    assert [(loss.offset, loss.cause, loss.leader) for loss in c.losses] == [(0, "unclean-election", 3)]
    # Every election is listed, clean or not (the world's re-election latency reads them).
    assert [(tp, leader, epoch) for _t, tp, leader, epoch in c.elections] == [("t-0", 1, 0), ("t-0", 3, 1)]
    # The new leader's history replaces the lost one: its own commits are fine.
    append(outsider, [b"after"], 1)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.models["t-0"].canon_end == 1


def test_an_election_superseding_one_partitions_history_judges_again_only_that_partitions_replicas(make):
    """The verified prefix is per replica and partition: an election that supersedes t-0's
    history from 0 sends t-0's replicas back there, not another partition's replica on
    the same broker, whose batches below its prefix have not changed."""
    c = Checker(History())
    other = make("other", Role.LEADER, 0, isr=(1,))
    append(other, [b"a", b"b"], 0)
    c.observe(1, "t-1", other, None)
    _ack_then_elect_an_outsider(c, make)
    assert c.violation is None and [loss.offset for loss in c.losses] == [0]
    assert c.views[(1, "t-0")].verified == 0 and c.views[(1, "t-1")].verified == 2



def test_a_replica_verified_short_of_where_an_election_supersedes_the_history_keeps_its_prefix(make):
    """A supersession sends back only the replicas verified past its offset: one verified
    less far (a follower that had fetched nothing yet) is still judged from its own
    prefix, so a batch it then holds differently below that offset is divergence."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a", b"b"], 0)
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    follower = make("f", Role.FOLLOWER, 0)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    outsider = make("outsider", Role.LEADER, 1, isr=(3,))
    append(outsider, [b"a", b"b"], 0, commit=False)  # the committed 0..1, not the acked write at 2
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and [(loss.offset, loss.cause) for loss in c.losses] == [(2, "unclean-election")]
    assert c.views[(1, "t-0")].verified == 2 and c.views[(2, "t-0")].verified == 0
    append(follower, [b"X", b"Y"], 1)
    follower.leader_epoch = 1
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 2
    assert "offset 0" in v.message

@pytest.mark.parametrize("enabled_by", ["nothing", "another topic's override", "a later override to false"])
def test_an_election_outside_the_isr_where_unclean_elections_were_never_enabled_is_a_loss(make, enabled_by):
    """The same election, with unclean.leader.election.enable false for the topic all
    along: the controller should not have made it, so its loss is a violation."""
    c = Checker(History(), unclean_default=False)
    if enabled_by == "another topic's override":
        c.on_topic_config("other", "unclean.leader.election.enable", "true")
    elif enabled_by == "a later override to false":
        c.on_topic_config("t", "unclean.leader.election.enable", "false")
    _ack_then_elect_an_outsider(c, make)
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST
    assert "elected outside the ISR" in c.violation.message and not c.losses
    # The history names the election unclean, allowed or not.
    assert [e.data["unclean"] for e in c.history.of_kind("election")][-1] is True


@pytest.mark.parametrize("unclean_default", [True, False])
def test_an_election_outside_the_isr_is_judged_by_the_topics_setting_even_where_the_winner_lost_the_write_in_a_power_loss(
        make, unclean_default):
    """Broker 3 lost the acked write in its own power loss, then was elected outside the
    ISR.  Where unclean elections were allowed that is the election's counted loss; where
    they were never enabled the controller should not have elected it, and its own power
    loss excuses nothing: the loss is a violation, as without the power loss."""
    c = Checker(History(), unclean_default=unclean_default)
    old = make("old", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 1)
    c.on_power_loss(3, "t-0", 0)
    c.observe(3, "t-0", make("outsider", Role.LEADER, 1, isr=(3,)), None)
    assert c.unclean_elections == 1
    if unclean_default:
        assert c.violation is None and [(loss.offset, loss.cause) for loss in c.losses] == [(0, "unclean-election")]
    else:
        v = c.violation
        assert v is not None and v.invariant is Invariant.ACKED_WRITE_LOST and v.broker == 3
        assert "elected outside the ISR" in v.message and not c.losses


def test_an_outsider_holding_another_batch_at_an_acked_offset_where_unclean_was_never_enabled_loses_it_at_once(make):
    """Swarm seed 23's outsider (it never truncated a deposed epoch's batches), where
    unclean.leader.election.enable was never true: its log ends past both acked offsets but
    holds other batches there, so both acked writes are lost at its election, reported then
    under the first (its HW, 0, would reach them only once it commits on)."""
    c = Checker(History(), unclean_default=False)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"never-committed"], 0, commit=False)
    append(outsider, [b"tail"], 0, commit=False)
    committed = make("committed", Role.LEADER, 1, isr=(1,))
    for value in (b"acked-at-0", b"acked-at-1"):
        base, last, crc = append(committed, [value], 1)
        c.observe(1, "t-0", committed, None)
        c.on_ack("t-0", base, last, crc, -1, 1)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 2, (3,)
    c.observe(3, "t-0", outsider, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.ACKED_WRITE_LOST and v.broker == 3
    assert "ends at 2 without the write acked at offset 0, elected outside the ISR" in v.message
    assert not c.losses


@pytest.mark.parametrize("spelled", ["true", "TRUE"])
def test_an_override_that_once_enabled_unclean_elections_excuses_the_topic(make, spelled):
    """Once enabled, a topic stays excused: a controller may act on what it read before.
    A boolean config is read regardless of case (Kafka's ConfigDef, kreplica's config)."""
    c = Checker(History(), unclean_default=False)
    c.on_topic_config("t", "unclean.leader.election.enable", spelled)
    c.on_topic_config("t", "unclean.leader.election.enable", "false")
    _ack_then_elect_an_outsider(c, make)
    assert c.violation is None
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(0, "unclean-election")]


def test_an_unclean_leader_that_never_truncated_a_deposed_epoch_supersedes_from_where_it_differs(make):
    """Swarm seed 23: the outsider still held an old epoch's batch at offset 0 (it never
    fetched from the later leaders), so the loss starts there, not at its log end; what a
    consumer read from the committed history goes with it, attributed, not a violation."""
    c = Checker(History())
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"never-committed"], 0, commit=False)
    append(outsider, [b"tail"], 0, commit=False)
    committed = make("committed", Role.LEADER, 1, isr=(1,))
    base, last, crc = append(committed, [b"acked-in-epoch-1"], 1)
    c.observe(1, "t-0", committed, None)
    c.on_ack("t-0", base, last, crc, -1, 1)
    c.on_consume("t-0", [(base, last, 1, crc)], committed.log.high_watermark, 1)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 2, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(0, "unclean-election")]
    superseded = [e for e in c.history.events if e.kind == "superseded"]
    assert superseded[-1].data["from_offset"] == 0


def test_a_deposed_leader_keeps_its_superseded_history_until_told_then_is_judged(make):
    """Swarm seed 1814: a leader paused through an unclean election of another broker
    commits alone in its old epoch at resume, where the new leader has already committed
    other batches. Not yet told, it holds the superseded history legitimately; once it
    follows the new epoch, whatever it failed to truncate is divergence."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"common"], 0)
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"common"], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (2,)
    c.observe(2, "t-0", outsider, None)       # unclean: 2 was not in the ISR
    append(outsider, [b"new"], 1)
    c.observe(2, "t-0", outsider, None)       # the new history is committed at offset 1
    append(old, [b"zombie"], 0)               # ... where the deposed leader commits alone
    c.observe(1, "t-0", old, None)
    assert c.violation is None and c.unclean_elections == 1
    old.role, old.leader_epoch = Role.FOLLOWER, 1   # told, but it kept its batch
    c.observe(1, "t-0", old, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE


def test_a_deposed_leader_committing_under_the_new_leaders_uncommitted_tail_is_a_counted_loss(make):
    """Swarm config-churn seed 1046: the unclean leader's log runs past the committed end
    with batches nobody committed (it appended them as a zombie leader of an older epoch).
    The deposed leader, paused through the election, resumes alone in its ISR and commits
    and acks other batches at those offsets: lost to the unclean election, not divergence."""
    c = Checker(History())
    old = make("old", Role.LEADER, 1, isr=(1,))
    append(old, [b"common"], 0)
    c.observe(1, "t-0", old, None)             # committed: offset 0
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"common"], 0, commit=False)
    append(outsider, [b"zombie-x"], 0, commit=False)
    append(outsider, [b"zombie-y"], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 2, (2,)
    c.observe(2, "t-0", outsider, None)       # unclean, LEO 3: nothing committed is lost
    outsider.log.maybe_increment_high_watermark(3)
    c.observe(2, "t-0", outsider, None)       # its tail is the history now
    base, last, crc = append(old, [b"acked-by-the-deposed"], 1)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=1)
    c.observe(1, "t-0", old, None)
    assert c.violation is None
    # Counted as if acked just before the election: with its leader and epoch, not the deposed one's.
    assert [(loss.offset, loss.cause, loss.leader, loss.leader_epoch)
            for loss in c.losses] == [(1, "unclean-election", 2, 2)]
    old.role, old.leader_epoch = Role.FOLLOWER, 2   # told, but it kept its batch
    c.observe(1, "t-0", old, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE


def test_an_unclean_election_the_store_decided_but_no_broker_served_is_still_unclean(make):
    """Swarm config-churn seed 10780: the leader, alone in its ISR, shut down while the
    other replica had crashed with its session still open. The controller elected that
    replica uncleanly (epoch 9), it never led, its session expired (epoch 10: no leader,
    ISR [it]), and it came back to be elected from that ISR (epoch 11) without the
    committed tail. The checker must count the loss to the unclean election, not call
    the last, clean-looking election a lost write."""
    c = Checker(History())
    old = make("old", Role.LEADER, 8, isr=(1,))
    append(old, [b"a"], 8)
    base, last, crc = append(old, [b"acked"], 8)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=1)
    c.observe(1, "t-0", old, None)
    short = make("short", Role.FOLLOWER, 8, isr=(1,))
    append(short, [b"a"], 8, commit=False)
    c.on_store_state("t-0", 3, 9, (3,))       # elected while down: not adopted yet
    c.on_store_state("t-0", -1, 10, (3,))     # no leader, the ISR grew: not adopted
    assert c.models["t-0"].isr == (1,)
    short.role, short.leader_epoch, short.isr = Role.LEADER, 11, (3,)
    c.observe(3, "t-0", short, None)
    assert c.violation is None and c.unclean_elections == 1
    assert [(loss.offset, loss.cause, loss.leader) for loss in c.losses] == [(base, "unclean-election", 3)]


def test_an_isr_the_store_shrank_without_a_leader_is_adopted(make):
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 3))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.on_store_state("t-0", -1, 1, (1,))      # the leader died; the controller kept it alone
    assert c.models["t-0"].isr == (1,)
    c.on_store_state("t-0", 3, 2, (3,))       # a leader no broker has served yet: later
    assert c.models["t-0"].isr == (1,)


def test_a_deposed_leaders_ack_and_read_of_superseded_history_are_a_counted_loss(make):
    """Swarm seed 1582: with min.insync.replicas=1 a deposed leader, alone in its ISR and
    cut off, acks an acks=all write after another broker's unclean election; the write
    is lost to that election, not by the next clean leader."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.LEADER, 1, isr=(2,))
    c.observe(2, "t-0", outsider, None)       # unclean, empty: superseded from 0
    base, last, crc = append(old, [b"acked-by-the-deposed"], 0)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=1)
    assert [(loss.offset, loss.cause, loss.leader) for loss in c.losses] == [(1, "unclean-election", 2)]
    # Swarm seed 2680: a consumer reads it from the deposed leader too; it goes with the ack.
    c.on_consume("t-0", read_fingerprints(old.log, base, last + 1), old.log.high_watermark, 1)
    # Counted with the ack it goes with: the superseding election's leader and epoch,
    # not the deposed leader that served it paired with an epoch it never led.
    assert [(r.offset, r.cause, r.leader, r.leader_epoch)
            for r in c.superseded_reads] == [(1, "unclean-election", 2, 1)]
    # The counted ack is in the history too, named as the deposed leader's.
    assert [(e.broker, e.data) for e in c.history.of_kind("counted_loss")] == [
        (1, {"offset": 1, "cause": "unclean-election", "epoch": 1, "deposed_leader": True})]
    append(outsider, [b"x"], 1)
    append(outsider, [b"y"], 1)               # the new history commits other batches there
    c.observe(2, "t-0", outsider, None)
    assert c.violation is None
    outsider.leader_epoch = 2
    c.observe(2, "t-0", outsider, None)       # a clean election of a leader without it
    assert c.violation is None
    # The newest leader's own acks get no such excuse.
    base, last, crc = append(outsider, [b"acked-by-the-leader"], 2, commit=False)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=2)
    outsider.log.truncate_to(base)
    outsider.leader_epoch = 3
    c.observe(2, "t-0", outsider, None)
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST


def test_a_leader_first_seen_in_an_epoch_already_ended_alone_in_its_isr_commits_the_unclean_loss(make):
    """Swarm rolling-restart seed 2218: broker 2, elected uncleanly (epoch 4) while paused,
    never served before broker 1 was elected again (epoch 5, judged clean against the
    ISR the checker knew).  Resumed, it leads epoch 4 alone in its ISR and commits and
    acks batches where epoch 5 commits others: lost to the unclean election, not a
    divergence; once told, it is judged again."""
    c = Checker(History())
    first = make("first", Role.LEADER, 3, isr=(1,))
    append(first, [b"a"], 3)
    c.observe(1, "t-0", first, None)
    zombie = make("zombie", Role.FOLLOWER, 3, isr=(1,))
    append(zombie, [b"a"], 3)
    zombie.log.maybe_increment_high_watermark(1)
    first.leader_epoch = 5
    c.observe(1, "t-0", first, None)          # epoch 5, clean to the checker
    append(first, [b"b"], 5)
    c.observe(1, "t-0", first, None)
    zombie.role, zombie.leader_epoch, zombie.isr = Role.LEADER, 4, (2,)
    c.observe(2, "t-0", zombie, None)         # first seen leading epoch 4, after epoch 5
    base, last, crc = append(zombie, [b"zombie"], 4)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=2)
    c.observe(2, "t-0", zombie, None)
    assert c.violation is None
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(1, "unclean-election")]
    assert [e.kind for e in c.history.events].count("late_leader") == 1
    zombie.role, zombie.leader_epoch = Role.FOLLOWER, 5   # told, but it kept its batch
    c.observe(2, "t-0", zombie, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE


def test_a_late_leader_that_committed_before_it_was_first_seen_alone_is_excused_from_its_epochs(make):
    """Swarm gc-pause-chaos seed 358: broker 2, paused, is made leader of epoch 4 with
    another replica in its ISR, then of epoch 5 alone (a controller fenced the other
    out); at resume its held requests run back to back: it becomes leader of epoch 4,
    appends a produce there, and commits it alone in epoch 5, all before the checker
    first sees it.  Its commits count from where its log enters epoch 4."""
    c = Checker(History())
    first = make("first", Role.LEADER, 3, isr=(1, 2))
    append(first, [b"a"], 3)
    c.observe(1, "t-0", first, None)
    zombie = make("zombie", Role.FOLLOWER, 3, isr=(1, 2))
    append(zombie, [b"a"], 3)
    zombie.log.maybe_increment_high_watermark(1)
    first.leader_epoch, first.isr = 6, (1,)
    c.observe(1, "t-0", first, None)          # epoch 6, clean to the checker
    append(first, [b"b"], 6)
    c.observe(1, "t-0", first, None)
    zombie.role, zombie.leader_epoch, zombie.isr = Role.LEADER, 4, (2, 3)
    c.observe(2, "t-0", zombie, None)         # first seen late with another in its ISR
    assert c.violation is None and "late_leader" not in [e.kind for e in c.history.events]
    append(zombie, [b"zombie"], 4, commit=False)
    zombie.log.leader_epoch_cache.assign(5, zombie.log.log_end_offset)
    zombie.leader_epoch, zombie.isr = 5, (2,)
    zombie.log.maybe_increment_high_watermark(zombie.log.log_end_offset)
    c.observe(2, "t-0", zombie, None)         # epoch 5, alone: its epoch-4 batch committed
    assert c.violation is None
    late = [e.data for e in c.history.events if e.kind == "late_leader"]
    assert late == [{"epoch": 5, "newest_epoch": 6, "superseded_from": 1}]


def test_a_late_leader_holding_what_an_earlier_unclean_election_superseded_is_excused_from_there(make):
    """Swarm gc-pause-chaos seeds 5160 and 5773: broker 3 led epoch 2 and committed a
    batch that broker 1's unclean election (epoch 4) then superseded.  As broker 3's
    follower fetch waited on a paused leader, it kept that batch below its HW, never
    truncating.  Paused again, it was elected uncleanly (epoch 6); first seen leading
    after epoch 7 began, alone in its ISR, it serves the superseded batch as committed.
    Its commits count from the first batch it holds differently, below the HW it was
    last seen with, not from that HW."""
    c = Checker(History())
    old = make("old", Role.LEADER, 2, isr=(3,))
    append(old, [b"a"], 2)
    append(old, [b"b"], 2)
    c.observe(3, "t-0", old, None)            # epoch 2: a, b committed
    new = make("new", Role.LEADER, 4, isr=(1,))
    append(new, [b"a"], 2)
    c.observe(1, "t-0", new, None)            # epoch 4, unclean: b superseded from 1
    append(new, [b"c"], 4)
    c.observe(1, "t-0", new, None)            # c committed at 1
    old.role, old.leader_epoch, old.isr = Role.FOLLOWER, 4, (1,)
    c.observe(3, "t-0", old, FetchPhase.TRUNCATING)  # told, but not truncated yet
    new.leader_epoch = 7
    c.observe(1, "t-0", new, None)            # epoch 7, clean to the checker
    old.role, old.leader_epoch, old.isr = Role.LEADER, 6, (3,)
    c.observe(3, "t-0", old, None)            # first seen leading epoch 6, after epoch 7
    assert c.violation is None, c.violation.describe()
    late = [e.data for e in c.history.events if e.kind == "late_leader"]
    assert late == [{"epoch": 6, "newest_epoch": 7, "superseded_from": 1}]
    old.role, old.leader_epoch, old.isr = Role.FOLLOWER, 7, (1,)   # told, but it kept b
    c.observe(3, "t-0", old, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE


def test_a_shrink_the_controller_wrote_in_a_newer_epoch_is_adopted_and_a_removed_member_elected_is_unclean(make):
    """Swarm control-plane-chaos seed 2990: a reassignment dropped broker 1 from the
    replicas (ISR [4, 1, 3] -> [4, 3], its log deleted), then epochs no one served left
    [3]; broker 1, added back empty, was elected uncleanly.  Judged against the last
    served ISR it looked clean and its empty log a lost ack."""
    c = Checker(History())
    old = make("old", Role.LEADER, 16, isr=(4, 1, 3))
    base, last, crc = append(old, [b"acked"], 16)
    c.on_ack("t-0", base, last, crc, -1, 3, leader=4)
    c.observe(4, "t-0", old, None)
    c.on_store_state("t-0", 4, 17, (4, 3))    # reassignment done: 1 is no replica any more
    c.on_store_state("t-0", 3, 18, (3,))      # 4 died; 3, paused, never served it
    c.on_store_state("t-0", 5, 19, (5, 3))    # an ISR that grew without being served: not adopted
    assert c.models["t-0"].pending_isrs == [(17, (4, 3)), (18, (3,))]
    empty = make("empty", Role.LEADER, 20, isr=(1,))
    c.observe(1, "t-0", empty, None)
    assert c.violation is None and c.unclean_elections == 1
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(0, "unclean-election")]


def test_a_pending_isr_that_a_newer_served_election_no_longer_contains_is_dropped(make):
    """Swarm gc-pause-chaos seed 9015: leader 2 (epoch 8, ISR [2]) crashed; the controller
    elected broker 3 uncleanly while it was paused (epoch 9, ISR [3]), then broker 2,
    back and paused, uncleanly again (epoch 10, ISR [2]). The store's epoch 10 looked
    like a shrink of epoch 8's ISR and was kept for later elections. Broker 3, resumed,
    led epoch 9 and committed b; broker 2 then led epoch 11 from ISR [2]. Judged against
    the kept [2], epoch 11 looked clean and b divergence: once epoch 9's ISR [3] is
    served, epoch 10's [2] is no shrink of it, and epoch 11 is the unclean election's."""
    c = Checker(History())
    old = make("old", Role.LEADER, 8, isr=(2,))
    append(old, [b"a"], 8)
    c.observe(2, "t-0", old, None)
    c.on_store_state("t-0", 3, 9, (3,))       # elected while paused: no shrink, not kept
    c.on_store_state("t-0", 2, 10, (2,))      # a shrink of epoch 8's ISR, as far as is known
    assert c.models["t-0"].pending_isrs == [(10, (2,))]
    three = make("three", Role.LEADER, 9, isr=(3,))
    append(three, [b"a"], 8)
    append(three, [b"b"], 9)
    c.observe(3, "t-0", three, None)          # epoch 9 served at last: unclean, b committed
    assert c.violation is None and c.unclean_elections == 1
    assert c.models["t-0"].pending_isrs == []
    two = make("two", Role.LEADER, 11, isr=(2,))
    append(two, [b"a"], 8)
    append(two, [b"c"], 11)
    c.observe(2, "t-0", two, None)
    assert c.violation is None, c.violation.describe()
    assert c.unclean_elections == 2
    assert [(e.data["from_offset"], e.data["cause"]) for e in c.history.events if e.kind == "superseded"] == [
        (1, "unclean-election")]


def test_an_election_is_judged_against_the_isr_before_its_epoch_not_a_later_shrink(make):
    """Retention-chaos seed 217: a preferred election (epoch 4, ISR [2, 3, 1]) reached its
    paused winner only after a later epoch had shrunk the ISR to [2, 3]; served late, it
    was still clean."""
    c = Checker(History())
    old = make("old", Role.LEADER, 3, isr=(2, 3, 1))
    append(old, [b"a"], 3)
    c.observe(2, "t-0", old, None)
    c.on_store_state("t-0", 2, 5, (2, 3))     # epoch 5 took 1 out, after epoch 4 chose it
    preferred = make("preferred", Role.LEADER, 4, isr=(2, 3, 1))
    append(preferred, [b"a"], 3)
    c.observe(1, "t-0", preferred, None)
    assert c.violation is None and c.unclean_elections == 0
    assert c.models["t-0"].pending_isrs == [(5, (2, 3))]   # still ahead for epoch 5's leader


def test_a_commit_counted_on_a_follower_that_had_already_lost_it_in_a_power_loss_is_power_loss(make):
    """Swarm control-plane-chaos seed 2414: the follower lost its unflushed tail; until it
    is back its leader counts it at its old LEO, and committed on its strength. When the
    follower is then elected without those batches, the loss is the power loss's.
    Back means hosting the partition again after its restart, not the restart alone
    (retention-chaos seed 9038: the restarted broker waited 2.5 s for its old session
    to expire before it could register, and the commit fell in between)."""
    def run(restart_before_commit: bool, seen_before_commit: bool = True) -> Checker:
        c = Checker(History())
        name = f"{restart_before_commit}{seen_before_commit}"
        leader = make(f"l{name}", Role.LEADER, 0, isr=(1, 2))
        follower = make(f"f{name}", Role.FOLLOWER, 0, isr=(1, 2))
        for r in (leader, follower):
            append(r, [b"a"], 0)
        c.set_time(100)
        c.observe(1, "t-0", leader, None)
        c.set_time(200)
        c.on_power_loss(2, "t-0", 1)              # it held offset 1 unflushed, now gone
        if restart_before_commit:
            c.set_time(250)
            c.on_restart(2)
            if seen_before_commit:
                c.observe(2, "t-0", follower, None)
            else:                                 # another replica's sighting is not its own
                c.observe(1, "t-0", leader, None)
        c.set_time(300)
        append(leader, [b"b"], 0)                 # committed on the follower's old LEO
        c.observe(1, "t-0", leader, None)
        c.set_time(400)
        c.on_restart(2)
        follower.role, follower.leader_epoch, follower.isr = Role.LEADER, 1, (2,)
        c.observe(2, "t-0", follower, None)       # elected without offset 1
        append(follower, [b"c"], 1)
        c.observe(2, "t-0", follower, None)
        return c

    c = run(restart_before_commit=False)
    assert c.violation is None
    assert ("superseded", "power-loss") in [(e.kind, e.data.get("cause")) for e in c.history.events]
    c = run(restart_before_commit=True)           # back before the commit: no excuse
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE
    c = run(restart_before_commit=True, seen_before_commit=False)   # restarted, not yet back
    assert c.violation is None
    assert ("superseded", "power-loss") in [(e.kind, e.data.get("cause")) for e in c.history.events]


def test_a_replica_back_from_a_power_loss_holding_the_committed_history_loses_nothing_when_elected(make):
    """The elected replica dropped offset 0 in a power loss after it was committed, then
    fetched it back whole and went on to an uncommitted batch beyond the committed end:
    it holds every committed batch, so its election supersedes and counts nothing (what
    it holds past the committed end is its own tail, not a difference)."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(leader, [b"a"], 0)
    c.set_time(10)
    c.observe(1, "t-0", leader, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    c.set_time(20)
    c.on_power_loss(2, "t-0", 0)
    c.set_time(30)
    c.on_restart(2)
    back = make("b", Role.FOLLOWER, 0, isr=(1, 2))
    append(back, [b"a"], 0)                       # fetched again: the same batch
    c.observe(2, "t-0", back, FetchPhase.FETCHING)
    append(back, [b"tail"], 0, commit=False)      # beyond the committed end
    c.set_time(40)
    back.role, back.leader_epoch, back.isr = Role.LEADER, 1, (2,)
    c.observe(2, "t-0", back, None)
    assert c.violation is None and not c.losses and c.unclean_elections == 0
    assert c.models["t-0"].canon_end == 1 and 0 in c.models["t-0"].acked
    assert "superseded" not in [e.kind for e in c.history.events]


def test_an_election_outside_the_isr_losing_nothing_excuses_no_later_ack_where_unclean_was_never_enabled(make):
    """Nothing committed is lost at the election, but the deposed leader, alone in its ISR,
    then acks a write the new leader's history does not hold. Where unclean elections were
    never enabled the election was the controller's bug, and that ack is a lost write,
    not an unclean election's counted loss."""
    c = Checker(History(), unclean_default=False)
    old = make("old", Role.LEADER, 0, isr=(1,))
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.LEADER, 1, isr=(3,))
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    base, last, crc = append(old, [b"acked by the deposed leader"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=1)
    assert c.violation is None and not c.losses
    append(outsider, [b"the new leader's own"], 1)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST
    assert not c.losses


def test_a_leader_first_seen_late_with_others_in_its_isr_is_excused_nothing(make):
    """With another replica in its ISR a late leader cannot commit alone: a batch it holds
    committed differently from the history is divergence."""
    c = Checker(History())
    first = make("first", Role.LEADER, 3, isr=(1, 2))
    append(first, [b"a"], 3)
    c.observe(1, "t-0", first, None)
    first.leader_epoch = 5
    c.observe(1, "t-0", first, None)
    append(first, [b"b"], 5)
    c.observe(1, "t-0", first, None)
    late = make("late", Role.LEADER, 4, isr=(2, 1))
    append(late, [b"a"], 3)
    append(late, [b"other"], 4)
    c.observe(2, "t-0", late, None)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE
    assert "late_leader" not in [e.kind for e in c.history.events]


def test_power_loss_of_the_elected_replica_is_counted_and_the_deposed_leader_stays_judged(make):
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    c.on_power_loss(2, "t-0", 0)
    new = make("new", Role.LEADER, 1, isr=(2,))
    c.observe(2, "t-0", new, None)             # clean: 2 was in the ISR; its loss is counted
    assert c.violation is None and [loss.cause for loss in c.losses] == ["power-loss"]
    # After a clean election the deposed leader's ISR write is fenced, so it cannot ack
    # alone: an ack from it is judged like any other, not excused as superseded.
    base, last, crc = append(old, [b"zombie"], 0)
    c.on_ack("t-0", base, last, crc, -1, 2, leader=1)
    append(new, [b"x"], 1)
    append(new, [b"y"], 1)
    c.observe(2, "t-0", new, None)
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST


@pytest.mark.parametrize("lost_by, verdict", [(2, "counted"), (3, "violation")])
def test_only_the_elected_replicas_own_power_loss_excuses_what_it_lacks(make, lost_by, verdict):
    # Broker 2 is elected cleanly with an empty log.  Its own power loss explains that and
    # is a counted loss; broker 3's power loss explains nothing about broker 2's log.
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    c.on_power_loss(lost_by, "t-0", 0)
    c.observe(2, "t-0", make("new", Role.LEADER, 1, isr=(2,)), None)
    if verdict == "counted":
        assert c.violation is None and [loss.cause for loss in c.losses] == ["power-loss"]
    else:
        assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST
        assert not c.losses


def test_a_batch_is_judged_by_its_crc_not_the_leader_epoch_its_header_carries(make):
    # The partition leader epoch sits before the CRC'd part of a v2 batch header: the same
    # records written under another epoch (a producer's retry landing where it was before,
    # a follower that copied them under a newer leader) are the same batch.
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 3)
    committed = append(leader, [b"a", b"b"], 0)
    copied = append(follower, [b"a", b"b"], 3)
    assert copied == committed  # base, last and CRC agree
    assert read_fingerprints(follower.log, 0, 2)[0][2] == 3  # the header's epoch does not
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None and c.views[(2, "t-0")].verified == 2


@pytest.mark.parametrize("seen, invariant", [
    ("acked", Invariant.ACKED_WRITE_LOST),
    ("consumed", Invariant.CONSUMED_RECORD_VANISHED),
    ("acked and consumed", Invariant.ACKED_WRITE_LOST),
    ("neither", Invariant.REPLICA_DIVERGENCE),
])
def test_a_leader_diverging_below_its_hw_is_judged_by_what_was_promised_there(make, seen, invariant):
    # The same leader, seen again at its epoch, now holds another batch at a committed
    # offset: an acked write lost (1) if that batch was acknowledged, a consumed record
    # vanished (2) if it was only read, else a plain divergence (3). Both acked and read:
    # the acked write, the stronger promise, is what is reported.
    c = Checker(History())
    first = make("first", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(first, [b"committed"], 0)
    c.observe(1, "t-0", first, None)
    if "acked" in seen:
        c.on_ack("t-0", base, last, crc, -1, 1)
    if "consumed" in seen:
        c.on_consume("t-0", [(base, last, 0, crc)], high_watermark=last + 1, leader=1)
    again = make("again", Role.LEADER, 0, isr=(1,))
    append(again, [b"something else"], 0)
    c.observe(1, "t-0", again, None)
    assert c.violation is not None and c.violation.invariant is invariant
    assert "leader 1 below its HW at offset 0" in c.violation.message


def test_a_follower_diverging_at_an_acked_and_read_offset_is_divergence_not_a_lost_write(make):
    """The leader still holds what it acked and served: a follower holding another batch
    there is a divergence (3), not the loss of the promises the leader keeps."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    base, last, crc = append(leader, [b"committed"], 0)
    c.observe(1, "t-0", leader, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    c.on_consume("t-0", [(base, last, 0, crc)], high_watermark=last + 1, leader=1)
    append(follower, [b"something else"], 0)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 2
    assert "follower 2 below its HW at offset 0" in v.message


def test_a_replica_on_an_old_epoch_is_excused_from_the_lowest_offset_later_elections_replaced():
    from kreplica.sim.checker import PartitionModel

    m = PartitionModel()
    m.superseded.extend([(3, 40, "power-loss"), (5, 100, "unclean-election")])
    assert m.superseded_for(2) == (40, "power-loss")  # both elections came later: the lower
    assert m.superseded_for(4) == (100, "unclean-election")  # only epoch 5's
    assert m.superseded_for(5) is None
    assert m.superseded_for(2, unclean_only=True) == (100, "unclean-election")
    # The lowest offset, not the first election listed after the epoch: a later election
    # may supersede from lower down than an earlier one did.
    m.superseded[:] = [(3, 100, "unclean-election"), (5, 40, "power-loss")]
    assert m.superseded_for(2) == (40, "power-loss")


def test_two_leaders_in_one_epoch(make):
    c = Checker(History())
    c.observe(1, "t-0", make("a", Role.LEADER, 3), None)
    c.observe(2, "t-0", make("b", Role.LEADER, 3), None)
    assert c.violation.invariant is Invariant.TWO_LEADERS_ONE_EPOCH


def test_leader_hw_going_back(make):
    c = Checker(History())
    leader = make("a", Role.LEADER, 0)
    append(leader, [b"a", b"b"], 0)
    c.observe(1, "t-0", leader, None)
    leader.log.update_high_watermark(1)
    c.observe(1, "t-0", leader, None)
    assert c.violation.invariant is Invariant.LEADER_HW_BACKWARDS
    assert "from 2 to 1 in epoch 0" in c.violation.message  # within the epoch, not a re-election


def test_a_leaders_hw_going_back_within_its_epoch_is_reported_even_after_a_truncation(make):
    """Within one leadership the HW never goes back, truncation or not: only a re-election
    after truncating as a follower may start lower."""
    c = Checker(History())
    leader = make("a", Role.LEADER, 3)
    append(leader, [b"a", b"b"], 3)
    c.observe(1, "t-0", leader, None)
    c.on_truncate(1, "t-0", 2)                # nothing cut, but the leader is no longer "led"
    leader.log.update_high_watermark(1)
    c.observe(1, "t-0", leader, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.LEADER_HW_BACKWARDS and v.broker == 1
    assert "in epoch 3" in v.message


def test_leader_hw_going_back_when_re_elected_without_truncating(make):
    """A leader re-elected in a new epoch (a preferred election, an epoch bump) keeps the
    HW it committed: nothing truncated its log.  Once it has truncated as a follower in
    between, a lower HW is legitimate."""
    c = Checker(History())
    leader = make("a", Role.LEADER, 0)
    append(leader, [b"a", b"b"], 0)
    c.observe(1, "t-0", leader, None)
    leader.leader_epoch = 1
    c.observe(1, "t-0", leader, None)  # the same HW in the new epoch
    assert c.violation is None
    leader.leader_epoch = 2
    leader.log.update_high_watermark(1)
    c.observe(1, "t-0", leader, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.LEADER_HW_BACKWARDS
    assert "re-elected in epoch 2" in v.message


def test_a_leader_that_truncated_as_a_follower_may_lead_again_from_a_lower_hw(make):
    c = Checker(History())
    r = make("a", Role.LEADER, 0)
    append(r, [b"a", b"b"], 0)
    c.observe(1, "t-0", r, None)
    r.role, r.leader_epoch = Role.FOLLOWER, 1
    c.observe(1, "t-0", r, FetchPhase.TRUNCATING)
    r.log.truncate_to(1)
    c.on_truncate(1, "t-0", 1)
    r.role, r.leader_epoch = Role.LEADER, 2
    c.observe(1, "t-0", r, None)
    assert c.violation is None


def test_consumer_beyond_the_hw_and_controller_epoch_going_back():
    c = Checker(History())
    c.on_consume("t-0", [(0, 0, 0, 7)], high_watermark=1, leader=1)
    assert c.violation is None
    c.on_consume("t-0", [(1, 1, 0, 8)], high_watermark=1, leader=1)
    assert c.violation.invariant is Invariant.CONSUMED_RECORD_VANISHED
    c2 = Checker(History())
    c2.on_controller_epoch(3)
    c2.on_controller_epoch(2)
    assert c2.violation.invariant is Invariant.CONTROLLER_EPOCH


def test_two_controller_terms_sharing_an_epoch():
    """A term seen again keeps its epoch; another term taking it is a violation, even
    though the store's epoch never went backwards."""
    c = Checker(History())
    c.on_controller_term((1, 0, 1), 1, 1)
    c.on_controller_term((1, 0, 1), 1, 1)
    c.on_controller_term((2, 0, 1), 2, 2)
    c.on_controller_term((1, 0, 2), 1, 3)
    assert c.violation is None
    c.on_controller_term((3, 0, 1), 3, 3)
    assert c.violation.invariant is Invariant.CONTROLLER_EPOCH
    assert "epoch 3" in c.violation.message


def test_an_acks_all_answer_below_the_lowest_min_isr_the_topic_had():
    """min.insync.replicas=2 by default, lowered to 1 for one topic by an admin: an
    answer with a single-member ISR is fine there, and a violation elsewhere."""
    c = Checker(History(), min_isr_default=2)
    c.on_acks_all_answered(1, "t-0", 0, (1, 2))
    c.on_topic_config("low", "min.insync.replicas", "1")
    c.on_topic_config("low", "min.insync.replicas", "3")
    c.on_acks_all_answered(1, "low-0", 0, (1,))
    assert c.violation is None
    c.on_acks_all_answered(3, "t-0", 2, (3,))
    assert c.violation.invariant is Invariant.ACKED_WRITE_LOST and c.violation.broker == 3  # the leader that answered
    assert "below min.insync.replicas=2" in c.violation.message


def test_violation_carries_the_partitions_last_events():
    h = History()
    for i in range(50):
        h.record(i, "ack", 1, "t-0", offset=i)
        h.record(i, "ack", 1, "t-1", offset=i)
    c = Checker(h, trace_events=10)
    c.set_time(99)
    c.fail(Invariant.REPLICA_DIVERGENCE, "t-0", 1, "boom")
    trace = c.violation.trace
    assert len(trace) == 10 and trace[0].data["offset"] == 41  # the last 9 acks, then the violation
    assert all(e.tp == "t-0" for e in trace) and trace[-1].kind == "violation"
    assert (trace[-1].broker, trace[-1].data) == (1, {"invariant": "3-replica-divergence", "message": "boom"})
    assert "VIOLATION 3-replica-divergence" in c.violation.describe()


def test_a_committed_tail_lost_by_the_elected_replicas_own_power_loss_is_superseded(make):
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"committed"], 0)  # committed, never acknowledged (the ack was lost)
    c.observe(1, "t-0", old, None)
    c.set_time(10)
    c.on_power_loss(1, "t-0", 0)
    again = make("again", Role.LEADER, 1, isr=(1,))  # the same broker, back with an empty log
    c.observe(1, "t-0", again, None)
    # The history says what was superseded: one committed batch, unacknowledged.
    assert [e.data for e in c.history.of_kind("superseded")] == [
        {"from_offset": 0, "cause": "power-loss", "committed_batches": 1}]
    append(again, [b"new"], 1)
    c.observe(1, "t-0", again, None)
    assert c.violation is None and c.models["t-0"].canon_end == 1


def test_a_power_loss_before_the_commit_excuses_nothing(make):
    c = Checker(History())
    c.on_power_loss(2, "t-0", 0)  # long ago; broker 2 caught up again afterwards
    c.set_time(100)
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    c.observe(2, "t-0", make("new", Role.LEADER, 1, isr=(2,)), None)
    assert c.violation.invariant is Invariant.ACKED_WRITE_LOST


def _committed_then_power_lost(make, c):
    """Broker 1 leads epoch 0, commits a batch a consumer reads, then loses it in a power loss."""
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(old, [b"committed-0", b"committed-1"], 0)
    c.observe(1, "t-0", old, None)
    c.on_consume("t-0", [(base, last, 0, crc)], high_watermark=last + 1, leader=1)
    c.set_time(10)
    c.on_power_loss(1, "t-0", 0)
    return make("back", Role.LEADER, 0, isr=(1, 2))  # the same broker restarted, log empty


def test_a_power_lost_leader_that_appends_before_its_election_is_not_divergence(make):
    # Seed 703 (high-watermark): the restarted broker was sent its standing epoch-0
    # leadership, took a producer's retry at offset 0, and was then elected for epoch 1
    # with that batch below its LEO.  The checker superseded from the LEO (2) and
    # called the producer's batch at 0 a vanished consumed record.
    c = Checker(History())
    back = _committed_then_power_lost(make, c)
    append(back, [b"retry-0", b"retry-1"], 0, commit=False)  # not yet observed as leader
    elected = Replica(log=back.log, role=Role.LEADER, leader_epoch=1, isr=(1,))
    back.log.maybe_increment_high_watermark(back.log.log_end_offset)
    c.observe(1, "t-0", elected, None)
    assert c.violation is None, c.violation
    assert [loss.cause for loss in c.losses] == []  # nothing at 0 was acked
    assert c.models["t-0"].canon_end == 2  # the new leader's batch is the history now
    superseded = [e for e in c.history.events if e.kind == "superseded"]
    assert [(e.data["from_offset"], e.data["cause"]) for e in superseded] == [(0, "power-loss")]
    # The read of the lost batch is that loss too, counted under its cause.
    assert [(r.offset, r.cause, r.leader, r.leader_epoch) for r in c.superseded_reads] == [(0, "power-loss", 1, 1)]


def test_a_power_lost_broker_resuming_its_old_epoch_is_a_violation(make):
    """The controller re-elects a broker back from an unclean shutdown in a new epoch
    (controller.py), so resuming the old one with a shorter log is not excused: the
    epoch would hold two histories."""
    c = Checker(History())
    back = _committed_then_power_lost(make, c)
    c.observe(1, "t-0", back, None)  # leading epoch 0 again, with nothing
    append(back, [b"new"], 0)
    c.observe(1, "t-0", back, None)
    assert c.violation is not None
    assert c.violation.invariant in (Invariant.ACKED_WRITE_LOST, Invariant.CONSUMED_RECORD_VANISHED)


def test_a_resumed_leader_that_lost_data_without_a_power_loss_is_still_caught(make):
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    base, last, crc = append(old, [b"committed"], 0)
    c.observe(1, "t-0", old, None)
    c.on_consume("t-0", [(base, last, 0, crc)], high_watermark=last + 1, leader=1)
    c.on_power_loss(2, "t-0", 0)  # another broker's power loss excuses nothing here
    back = make("back", Role.LEADER, 0, isr=(1, 2))
    c.observe(1, "t-0", back, None)
    append(back, [b"other"], 0)
    c.observe(1, "t-0", back, None)
    assert c.violation is not None and c.violation.invariant is Invariant.CONSUMED_RECORD_VANISHED


def test_records_consumers_read_and_an_unclean_election_then_removed_are_counted_not_dropped():
    from kreplica.sim import scenarios
    from kreplica.sim.report import Summary
    from kreplica.sim.world import World

    sc = scenarios.load("unclean-election").with_config(**{"replica.truncation.strategy": "leader-epoch"})
    r = next(r for r in (World(sc, s, keep_history=False).run() for s in range(1, 20)) if r.superseded_reads)
    assert r.ok and {read.cause for read in r.superseded_reads} == {"unclean-election"}
    summary = Summary()
    summary.add(r)
    rows = dict(summary.rows())
    assert rows["consumed batches then lost (counted, attributed)"] == str(len(r.superseded_reads))
    assert summary.to_dict()["superseded_reads"] == {"unclean-election": len(r.superseded_reads)}


def test_a_read_from_a_deposed_leader_of_what_a_power_loss_superseded_is_that_loss_counted(make):
    """Swarm gc-pause-chaos seed 18087: leader 4 (epoch 1, ISR [4, 3]) committed a, then
    paused; broker 3 lost a in a power loss and, 4's session gone, was elected cleanly
    from ISR [3] with an empty log (epoch 2: a superseded, cause power loss).  Resumed
    and not yet told, 4 served a to a consumer as committed.  That read is the power
    loss seen late, counted with it, not a consumer seeing a committed record vanish."""
    c = Checker(History())
    old = make("old", Role.LEADER, 1, isr=(4, 3))
    base, last, crc = append(old, [b"a"], 1)
    c.observe(4, "t-0", old, None)            # epoch 1: a committed
    c.on_power_loss(3, "t-0", 0)              # broker 3 drops everything from offset 0
    new = make("new", Role.LEADER, 2, isr=(3,))
    c.observe(3, "t-0", new, None)            # epoch 2, clean, empty: a superseded
    assert c.violation is None
    c.on_consume("t-0", [(base, last, 1, crc)], high_watermark=1, leader=4)
    assert c.violation is None, c.violation.describe()
    assert [(r.offset, r.cause) for r in c.superseded_reads] == [(0, "power-loss")]
    # An ack from the deposed leader there is still a finding after a clean election.
    c.on_ack("t-0", base, last, crc, -1, 2, leader=4)
    later = make("later", Role.LEADER, 2, isr=(3,))
    append(later, [b"b"], 2)
    c.observe(3, "t-0", later, None)
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST


# ---- rules only a planted checker bug showed untested (engine-audit.md, ninth review) ----


def test_an_ack_for_another_batch_than_the_committed_one_at_its_offset_is_a_loss(make):
    """The producer is told its batch is at an offset where the committed log holds a
    different one: that write is already lost, whenever the ack arrives."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0)
    base, last, crc = append(leader, [b"committed"], 0)
    c.observe(1, "t-0", leader, None)
    c.on_ack("t-0", base, last, crc, -1, 2, leader=1)  # the committed batch itself: fine
    assert c.violation is None
    _, _, other = append(make("o", Role.LEADER, 0), [b"acked-elsewhere"], 0)
    c.on_ack("t-0", base, last, other, -1, 2, leader=1)
    v = c.violation
    assert v is not None and v.invariant is Invariant.ACKED_WRITE_LOST and "another batch" in v.message


def test_a_read_of_another_batch_than_the_committed_one_at_its_offsets_is_a_vanished_record(make):
    """Same offsets, other bytes: the read is compared by CRC, not by where the batch ends."""
    c = Checker(History())
    leader, other = make("l", Role.LEADER, 0), make("o", Role.LEADER, 0)
    append(leader, [b"committed"], 0)
    c.observe(1, "t-0", leader, None)
    append(other, [b"something-else"], 0)
    c.on_consume("t-0", read_fingerprints(leader.log, 0, 1), 1, 1)
    assert c.violation is None
    c.on_consume("t-0", read_fingerprints(other.log, 0, 1), 1, 1)
    v = c.violation
    assert v is not None and v.invariant is Invariant.CONSUMED_RECORD_VANISHED and v.broker == 1
    assert "at 0 that is not the committed one" in v.message


def test_a_late_leader_with_others_in_its_isr_is_still_excused_from_what_a_later_election_superseded(make):
    """Not alone in its ISR, a late leader is excused nothing of its own; but what an
    unclean election after its epoch superseded, it may still hold, like any replica on an
    older epoch: it is judged only below that offset."""
    c = Checker(History())
    first = make("first", Role.LEADER, 0, isr=(1, 2))
    append(first, [b"a"], 0)
    c.observe(1, "t-0", first, None)          # epoch 0: a committed
    outsider = make("outsider", Role.LEADER, 2, isr=(3,))
    c.observe(3, "t-0", outsider, None)       # epoch 2, unclean, empty: superseded from 0
    append(outsider, [b"x"], 2)
    c.observe(3, "t-0", outsider, None)       # x committed at 0
    late = make("late", Role.LEADER, 1, isr=(2, 1))
    append(late, [b"a"], 0)
    c.observe(2, "t-0", late, None)           # epoch 1, first seen now, holding a at 0
    assert c.violation is None, c.violation.describe()
    assert "late_leader" not in [e.kind for e in c.history.events]


def test_a_deposed_leaders_ack_is_judged_by_the_elections_after_the_epoch_it_last_led(make):
    """Broker 1 led epoch 0, lost it to an unclean election (epoch 1), led again cleanly
    (epoch 2) and was deposed by a clean election (epoch 3).  Its ack as epoch 2's zombie
    is not excused by the unclean election that ended its first leadership: after a clean
    one its ISR shrink is fenced, so the ack is a finding once the new leader commits
    another batch there."""
    c = Checker(History())
    first = make("first", Role.LEADER, 0, isr=(1,))
    append(first, [b"a"], 0)
    c.observe(1, "t-0", first, None)
    two = make("two", Role.LEADER, 1, isr=(2, 1))
    c.observe(2, "t-0", two, None)                    # unclean, empty: a superseded from 0
    append(two, [b"b"], 1)
    c.observe(2, "t-0", two, None)
    again = make("again", Role.LEADER, 2, isr=(1, 2))
    append(again, [b"b"], 1)
    c.observe(1, "t-0", again, None)                  # epoch 2: clean, b kept
    two.leader_epoch, two.isr = 3, (2, 1)
    c.observe(2, "t-0", two, None)                    # epoch 3: clean again
    assert c.violation is None and c.unclean_elections == 1
    base, last, crc = append(again, [b"zombie"], 2)
    c.on_ack("t-0", base, last, crc, -1, 2, leader=1)
    assert not c.losses
    append(two, [b"x"], 3)
    c.observe(2, "t-0", two, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.ACKED_WRITE_LOST and "offset 1" in v.message


def test_a_follower_that_truncated_below_what_it_had_verified_is_judged_again_there(make):
    """The checker reads only what is new in a replica; a truncation below what it had
    verified (here of committed offsets, as a broken truncation would) makes the offsets
    new again, and what the follower fetches there is judged."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    for r in (leader, follower):
        append(r, [b"a"], 0)
        append(r, [b"b"], 0)
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None
    follower.log.truncate_to(1)
    c.on_truncate(2, "t-0", 1)
    append(follower, [b"X"], 0)                       # a committed offset, fetched again otherwise
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and "offset 1" in v.message


def test_a_truncation_above_what_a_follower_had_verified_leaves_the_rest_to_judge(make):
    """A follower verified up to its HW, 1, holds X at 1 and Y at 2 above it; a truncation
    to 2 (the end offset of its epoch, say) cuts only Y.  X is still unjudged: once the
    follower's HW passes it, it is judged, not skipped as if the truncation had verified it."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    for value in (b"a", b"b", b"c"):
        append(leader, [value], 0)
    c.observe(1, "t-0", leader, None)
    append(follower, [b"a"], 0)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    append(follower, [b"X"], 0, commit=False)
    append(follower, [b"Y"], 0, commit=False)
    follower.log.truncate_to(2)
    c.on_truncate(2, "t-0", 2)
    assert c.violation is None and c.views[(2, "t-0")].verified == 1
    follower.log.maybe_increment_high_watermark(2)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and "offset 1" in v.message


def test_a_deposed_leaders_log_start_does_not_excuse_what_followers_hold_below_it(make):
    """Only a current leader's log start marks history as expired: a deposed leader's
    retention is its own, and a follower is still judged above the current leader's."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0)
    for value in (b"a", b"b"):
        append(old, [value], 0)
    c.observe(1, "t-0", old, None)
    new = make("new", Role.LEADER, 1, isr=(2, 3))
    for value in (b"a", b"b"):
        append(new, [value], 0)
    c.observe(2, "t-0", new, None)                    # clean: 2 was in the ISR
    assert old.log.maybe_increment_log_start_offset(1)
    c.observe(1, "t-0", old, None)                    # the deposed leader, not yet told
    follower = make("f", Role.FOLLOWER, 1, isr=(2, 3))
    append(follower, [b"X"], 0)
    append(follower, [b"b"], 0)
    c.observe(3, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and "offset 0" in v.message


def test_a_batch_straddling_the_hw_is_not_committed(make):
    """A leader's HW inside a batch: the batch is not committed, and a clean successor
    without it may commit another batch at its offsets."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0)
    append(old, [b"a"], 0)
    append(old, [b"b0", b"b1"], 0, commit=False)
    old.log.update_high_watermark(2)                  # inside the batch [1, 2]
    c.observe(1, "t-0", old, None)
    new = make("new", Role.LEADER, 1)
    append(new, [b"a"], 0)
    append(new, [b"c"], 1)
    c.observe(2, "t-0", new, None)
    assert c.violation is None, c.violation.describe()
    assert c.models["t-0"].canon_end == 2 and not c.losses


def test_a_damaged_batch_straddling_the_hw_is_judged_only_once_committed(make):
    """A follower's torn batch that its HW is inside is not committed yet (its leader may
    still truncate it away): nothing is judged there until the HW passes it."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    append(leader, [b"a", b"b"], 0)
    c.observe(1, "t-0", leader, None)
    append(follower, [b"a", b"b"], 0, commit=False)
    _flip_a_record_byte(follower)
    follower.log.update_high_watermark(1)            # inside the batch [0, 1]
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None, c.violation.describe()
    follower.log.update_high_watermark(2)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and "do not match" in v.message


def test_after_convergence_a_follower_must_hold_the_leaders_bytes_not_only_its_offsets(make):
    """The final check compares whole logs, uncommitted tails too (after convergence
    HW = LEO): the same batch boundaries with other records are a divergence."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    append(leader, [b"a"], 0)
    c.observe(1, "t-0", leader, None)
    for r, value in ((leader, b"b"), (follower, b"a"), (follower, b"B")):
        append(r, [value], 0)
    c.final_check("t-0", {1: leader, 2: leader})      # the leader against itself: nothing
    assert c.violation is None
    c.final_check("t-0", {1: leader, 2: follower})
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 2
    assert "after convergence" in v.message


def test_after_convergence_followers_are_compared_with_the_leaders_whole_log_not_only_below_its_hw(make):
    """The leader's uncommitted tail is part of its log: a follower holding it too is
    equal, one without it differs."""
    c = Checker(History())
    leader, same, short = make("l", Role.LEADER, 0), make("s", Role.FOLLOWER, 0), make("x", Role.FOLLOWER, 0)
    for r in (leader, same, short):
        append(r, [b"a"], 0)
    c.observe(1, "t-0", leader, None)
    for r in (leader, same):
        append(r, [b"tail"], 0, commit=False)
    c.final_check("t-0", {1: leader, 2: same})
    assert c.violation is None, c.violation.describe()
    c.final_check("t-0", {1: leader, 2: same, 3: short})
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 3
    # Followers are compared in broker order, whatever order they are handed in: of two
    # that differ, the lower is named.
    again = Checker(History())
    again.observe(1, "t-0", leader, None)
    again.final_check("t-0", {3: short, 2: short, 1: leader})
    assert again.violation is not None and again.violation.broker == 2


@pytest.mark.parametrize("damaged", ["leader", "follower"])
def test_after_convergence_a_batch_damaged_on_disk_since_it_was_judged_is_found(make, damaged):
    """The final compare reads bytes, not only headers: a committed batch torn on disk after
    it was judged keeps its intact CRC in the header, and is found on either side."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    for r in (leader, follower):
        append(r, [b"committed"], 0)
    c.observe(1, "t-0", leader, None)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None
    _flip_a_record_byte(leader if damaged == "leader" else follower)
    c.final_check("t-0", {1: leader, 2: follower})
    v = c.violation
    assert v is not None and v.broker == (1 if damaged == "leader" else 2)
    assert v.invariant is Invariant.REPLICA_DIVERGENCE and "converge" in v.message


def test_after_convergence_a_leader_missing_a_committed_batch_is_found(make):
    """A committed batch the converged leader no longer holds at all (not only one it
    holds differently) is a loss, here of a record a consumer read."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0)
    append(leader, [b"a"], 0)
    base, last, crc = append(leader, [b"b"], 0)
    c.observe(1, "t-0", leader, None)
    c.on_consume("t-0", [(base, last, 0, crc)], leader.log.high_watermark, 1)
    leader.log.truncate_to(1)                         # the converged leader no longer has b
    c.final_check("t-0", {1: leader})
    v = c.violation
    assert v is not None and v.invariant is Invariant.CONSUMED_RECORD_VANISHED
    assert "lost a committed batch" in v.message and "offset 1" in v.message


def test_after_convergence_a_lost_batch_above_the_leaders_log_start_is_found_past_the_expired_ones(make):
    """Batches below the converged leader's log start are passed over, each of them, and
    the check goes on above: the leader no longer holding the committed 2 is found."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0)
    for value in (b"a", b"b", b"c"):
        append(leader, [value], 0)
    c.observe(1, "t-0", leader, None)
    assert leader.log.maybe_increment_log_start_offset(1)
    leader.log.truncate_to(2)
    c.final_check("t-0", {1: leader})
    v = c.violation
    assert v is not None and "lost a committed batch" in v.message and "offset 2" in v.message


def test_an_unclean_leader_whose_log_starts_at_the_last_offset_of_a_committed_batch_supersedes_it_whole(make):
    """The empty log starts at 2, the last offset of the committed batch 1..2: the batch
    goes whole, and the leader's own batch at 2 then continues the history."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    append(old, [b"b", b"c"], 0)
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    outsider.log.truncate_fully_and_start_at(2)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.models["t-0"].canon_end == 1
    append(outsider, [b"Y"], 1)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None, c.violation.describe()
    assert sorted(c.models["t-0"].canon) == [0, 2] and c.models["t-0"].canon_end == 3


def test_the_first_violation_is_kept_and_later_ones_are_not_recorded():
    """The run stops at its first violation; a check that fails after it (a callback of
    the same simulator event, before the world stops) neither replaces nor adds one."""
    c = Checker(History())
    c.on_controller_epoch(3)
    c.on_controller_epoch(2)
    c.on_consume("t-0", [(1, 1, 0, 8)], high_watermark=1, leader=1)
    assert c.violation.invariant is Invariant.CONTROLLER_EPOCH and c.violation.tp is None
    assert c.history.counts["violation"] == 1


def test_a_replica_on_an_unclean_elections_epoch_is_judged_by_that_epochs_history(make):
    """What an unclean election superseded is excused only on the epochs before it: a
    replica told of that election's epoch (if not yet of a newer one) must hold the new
    leader's history there."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    two = make("two", Role.LEADER, 1, isr=(2, 3))
    c.observe(2, "t-0", two, None)                    # unclean, empty: superseded from 0
    append(two, [b"X"], 1)
    c.observe(2, "t-0", two, None)
    two.leader_epoch = 2
    c.observe(2, "t-0", two, None)                    # a clean epoch after it
    assert c.violation is None and c.unclean_elections == 1
    old.role, old.leader_epoch = Role.FOLLOWER, 1     # told of epoch 1, but it kept a
    c.observe(1, "t-0", old, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and "offset 0" in v.message


def test_forgetting_a_topic_keeps_the_partitions_of_a_topic_its_name_prefixes(make):
    """``forget_topic("t")`` ends t-0's history, not that of a topic named ``t-x``
    (whose partitions are ``t-x-0``...): their committed histories must stay."""
    c = Checker(History())
    for name in ("t-0", "t-x-0", "t-1"):
        leader = make(name, Role.LEADER, 0)
        append(leader, [b"a"], 0)
        c.observe(1, name, leader, None)
    c.forget_topic("t")
    assert sorted(c.models) == ["t-x-0"] and c.models["t-x-0"].canon_end == 1
    assert [k for k in c.views] == [(1, "t-x-0")]


def test_a_re_created_topic_does_not_inherit_its_predecessors_overrides():
    """Deleting a topic removes its config node, so a topic re-created under its name runs
    with the defaults: an unclean election there is the controller's bug again, and an
    acks=all answer below the default min.insync.replicas breaks its promise. The overrides
    the deleted topic ever had used to stay, excusing both."""
    c = Checker(History(), unclean_default=False, min_isr_default=2)
    c.on_topic_config("t", "unclean.leader.election.enable", "true")
    c.on_topic_config("t", "min.insync.replicas", "1")
    c.on_topic_config("u", "unclean.leader.election.enable", "true")
    assert c.unclean_allowed("t-0")
    c.forget_topic("t")
    assert not c.unclean_allowed("t-0") and c.unclean_allowed("u-0")
    c.on_acks_all_answered(1, "t-0", 0, (1,))
    v = c.violation
    assert v is not None and "below min.insync.replicas=2" in v.message


def test_topic_overrides_apply_to_topics_whose_names_hold_dashes(make):
    """A partition's topic is its name up to the last dash: ``my-topic-0`` is partition 0
    of ``my-topic``, whose min.insync.replicas and unclean election overrides apply."""
    c = Checker(History(), unclean_default=False, min_isr_default=3)
    c.on_topic_config("my-topic", "min.insync.replicas", "2")
    c.on_acks_all_answered(1, "my-topic-0", 0, (1, 2))  # the override's floor, not the default's
    assert c.violation is None
    c.on_acks_all_answered(1, "my-topic-0", 1, (1,))
    assert c.violation is not None and "below min.insync.replicas=2" in c.violation.message
    c2 = Checker(History(), unclean_default=False)
    c2.on_topic_config("my-topic", "unclean.leader.election.enable", "true")
    assert c2.unclean_allowed("my-topic-0") and not c2.unclean_allowed("my-0")
    c3 = Checker(History(), unclean_default=True)
    c3.on_topic_config("my-topic", "unclean.leader.election.enable", "false")
    assert c3.unclean_allowed("my-topic-0")  # the default was true: once allowed, excused
    c3.on_topic_config("my", "unclean.leader.election.enable", "false")
    assert c3.unclean_allowed("my-0") and c3.unclean_allowed("my-topic-0")


def test_the_liveness_probes_acks_are_checked_but_not_counted_as_workload(make):
    """The probe's acks=all write is judged like any other, but the run's throughput
    (writes_completed, acked_writes) counts the workload's only."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0)
    base, last, crc = append(leader, [b"probe"], 0)
    c.observe(1, "t-0", leader, None)
    c.on_ack("t-0", base, last, crc, -1, 2, leader=1, probe=True)
    assert (c.writes_completed, c.acked_writes) == (0, 0)
    assert c.models["t-0"].acked[base].last == last
    c.on_ack("t-0", base, last, crc ^ 1, -1, 2, leader=1, probe=True)
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST
    c2 = Checker(History())
    c2.on_ack("t-0", 0, 0, 7, -1, 2, leader=1)
    assert (c2.writes_completed, c2.acked_writes) == (1, 1)
    # The workload's writes at the other levels count in its throughput too: an acks=1
    # answer, and an acks=0 send (done once sent, as its producer sees it).
    c2.on_ack("t-0", 1, 1, 8, 1, 2, leader=1)
    c2.on_sent_unacknowledged()
    assert (c2.writes_completed, c2.acked_writes) == (3, 1)


def test_a_consumer_read_of_a_batch_straddling_the_hw_is_beyond_it():
    """A batch is committed only whole: a consumer served offsets 0..2 with HW 2 got
    offset 2, which is not committed."""
    c = Checker(History())
    c.on_consume("t-0", [(0, 2, 0, 7)], high_watermark=2, leader=3)
    v = c.violation
    assert v is not None and v.invariant is Invariant.CONSUMED_RECORD_VANISHED
    assert "beyond the HW 2" in v.message
    assert v.broker == 3  # the leader that served it, not the partition's (none known here)


def test_a_leader_that_truncated_between_two_sightings_may_lead_again_from_a_lower_hw(make):
    """The truncation itself forgets that the replica led: a leader demoted, truncated
    and re-elected before the checker looked at it again (held requests of a pause run
    back to back) may lead from the lower HW."""
    c = Checker(History())
    r = make("a", Role.LEADER, 0)
    append(r, [b"a"], 0)
    append(r, [b"b"], 0)
    c.observe(1, "t-0", r, None)
    r.log.truncate_to(1)
    c.on_truncate(1, "t-0", 1)
    r.leader_epoch = 1  # led again, never seen as a follower
    c.observe(1, "t-0", r, None)
    assert c.violation is None


@pytest.mark.parametrize("promise", ["ack", "read"])
def test_a_deposed_leaders_ack_is_excused_only_from_the_superseded_offset_by_its_base(make, promise):
    """An unclean election superseded the history from offset 1; a deposed leader's ack
    (or a read it served) of a batch starting at 0 (running past 1) still promises offset
    0, which the election kept: judged against the committed batch there, not excused."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    append(old, [b"b"], 0)
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"a"], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (2,)
    c.observe(2, "t-0", outsider, None)       # unclean, LEO 1: superseded from 1
    assert c.violation is None and c.models["t-0"].superseded[-1][:2] == (1, 1)

    def promise_of(base: int, last: int) -> list:
        if promise == "ack":
            c.on_ack("t-0", base, last, 99, -1, 1, leader=1)
            return [loss.offset for loss in c.losses]
        c.on_consume("t-0", [(base, last, 0, 99)], 2, 1)
        return [r.offset for r in c.superseded_reads]

    assert promise_of(1, 1) == [1] and c.violation is None  # at the superseded offset: counted
    assert promise_of(0, 1) == [1]                          # starts below it: judged
    v = c.violation
    assert v is not None and v.invariant is (Invariant.ACKED_WRITE_LOST if promise == "ack"
                                             else Invariant.CONSUMED_RECORD_VANISHED)
    assert ("offset 0" if promise == "ack" else "at 0") in v.message


def test_a_pending_isr_is_kept_only_as_a_shrink_of_the_last_pending_one(make):
    """Unserved epochs chain: epoch 5 left [3] (1 taken out), so an epoch-6 ISR [1] is no
    shrink of it, though it is one of the served [1, 3] (broker 1 was put back only by an
    election outside the ISR no one served).  Not kept: broker 1 then elected in epoch 7
    is judged against [3], and its election is unclean."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 3))
    append(old, [b"a"], 0)
    c.observe(3, "t-0", old, None)
    c.on_store_state("t-0", 3, 5, (3,))
    c.on_store_state("t-0", 1, 6, (1,))
    c.on_store_state("t-0", 3, 4, (3,))       # an older epoch than one kept: nothing to add
    assert c.models["t-0"].pending_isrs == [(5, (3,))]
    one = make("one", Role.LEADER, 7, isr=(1,))
    append(one, [b"a"], 0)
    c.observe(1, "t-0", one, None)
    assert c.violation is None and c.unclean_elections == 1


def _store_states_then_elect_broker_1(make, c: Checker, isr, leader: int, states, epoch: int) -> list:
    """``leader`` serves epoch 0 with ``isr``; the store then shows ``states`` (leader,
    epoch, ISR); broker 1 is then seen leading ``epoch`` alone. Returns the ISRs kept
    pending before that election."""
    old = make("old", Role.LEADER, 0, isr=isr)
    append(old, [b"a"], 0)
    c.observe(leader, "t-0", old, None)
    for state in states:
        c.on_store_state("t-0", *state)
    pending = list(c.models["t-0"].pending_isrs)
    one = make("one", Role.LEADER, epoch, isr=(1,))
    append(one, [b"a"], 0)
    c.observe(1, "t-0", one, None)
    return pending


def test_a_pending_isr_is_judged_against_the_newest_pending_one_not_the_first(make):
    """Epoch 5 kept [1, 3] (the served ISR, unchanged), epoch 6 [3]; an epoch-7 ISR [1] is a
    shrink of the first but not of the newest, so it is not kept, and broker 1 elected in
    epoch 8 is judged against [3]: unclean."""
    c = Checker(History())
    pending = _store_states_then_elect_broker_1(make, c, (1, 3), 3, [(3, 5, (1, 3)), (3, 6, (3,)), (1, 7, (1,))], 8)
    assert pending == [(5, (1, 3)), (6, (3,))]
    assert c.violation is None and c.unclean_elections == 1
    # The election's event names the ISR it was judged against, not the last one served,
    # and apart from it the ISR the new leader serves.
    last = [e.data for e in c.history.of_kind("election")][-1]
    assert (last["previous_isr"], last["unclean"], last["isr"]) == ([3], True, [1])


def test_an_isr_is_a_set_the_store_may_list_in_another_order(make):
    """The store's [2, 1] in epoch 1 is the served [1, 2], kept as epoch 1's ISR; a later
    [2] of that same epoch adds nothing, so broker 1 elected in epoch 2 is clean."""
    c = Checker(History())
    pending = _store_states_then_elect_broker_1(make, c, (1, 2), 2, [(2, 1, (2, 1)), (2, 1, (2,))], 2)
    assert pending == [(1, (2, 1))]
    assert c.violation is None and c.unclean_elections == 0


def test_a_replica_on_an_old_epoch_is_judged_below_its_own_hw_and_the_superseded_offset(make):
    """A follower still on epoch 0 after an unclean election superseded from offset 2
    holds an uncommitted, different batch at 1 above its HW 1: the excuse lowers where it
    is judged (the superseded offset), it never raises it past its own HW."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    append(old, [b"b"], 0)
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"a"], 0, commit=False)
    append(outsider, [b"b"], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)       # unclean, nothing lost: superseded from 2
    assert c.violation is None and c.models["t-0"].superseded[-1][:2] == (1, 2)
    follower = make("follower", Role.FOLLOWER, 0, isr=(1,))
    append(follower, [b"a"], 0)
    append(follower, [b"X"], 0, commit=False)  # its uncommitted tail, above its HW 1
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None and c.views[(2, "t-0")].verified == 1


def test_a_leader_seen_as_a_follower_since_it_last_led_is_not_held_to_its_old_hw(make):
    """The re-election rule holds a leader to its HW only when it was seen leading last
    time: a leader demoted to follower follows its new leader's HW, which may be lower
    (that leader's HW lagged), and may lead again from there."""
    c = Checker(History())
    r = make("a", Role.LEADER, 0)
    append(r, [b"a"], 0)
    append(r, [b"b"], 0)
    c.observe(1, "t-0", r, None)
    r.role, r.leader_epoch = Role.FOLLOWER, 1
    c.observe(1, "t-0", r, FetchPhase.FETCHING)
    r.log.update_high_watermark(1)            # the new leader's lagging HW, not truncated
    r.role, r.leader_epoch = Role.LEADER, 2
    c.observe(1, "t-0", r, None)
    assert c.violation is None


def test_a_late_leaders_hw_is_not_compared_with_its_hw_as_a_follower_of_another_epoch(make):
    """Broker 1, a follower in epoch 0 with HW 2, truncated to 1 and was elected in epoch 1
    while paused; seen leading epoch 1 only after epoch 2's leader: its HW 1 is that of a
    new leadership, not an HW that went back within one."""
    c = Checker(History())
    r = make("one", Role.FOLLOWER, 0, isr=(1, 2))
    append(r, [b"a"], 0)
    append(r, [b"b"], 0)
    c.observe(1, "t-0", r, FetchPhase.FETCHING)
    r.log.truncate_to(1)
    c.on_truncate(1, "t-0", 1)
    two = make("two", Role.LEADER, 2, isr=(2, 1))
    append(two, [b"a"], 0)
    c.observe(2, "t-0", two, None)
    r.role, r.leader_epoch, r.isr = Role.LEADER, 1, (1, 2)
    assert r.log.high_watermark == 1
    c.observe(1, "t-0", r, None)
    assert c.violation is None


def test_a_late_leaders_commits_are_superseded_from_the_committed_end_not_the_last_shared_batch(make):
    """Broker 2, paused, was elected in epoch 4 alone and committed its epoch-3 tail y at
    offset 2, beyond what the newest leader (epoch 5) had committed (a, b: offsets 0, 1).
    What it shares with the history (b at 1) stays committed: superseded from 2, so a
    follower still on epoch 3 holding another batch at 1 below its HW is divergence."""
    c = Checker(History())
    first = make("first", Role.LEADER, 3, isr=(1,))
    append(first, [b"a"], 3)
    c.observe(1, "t-0", first, None)
    first.leader_epoch = 5
    append(first, [b"b"], 5)
    c.observe(1, "t-0", first, None)          # committed: a, b
    zombie = make("zombie", Role.FOLLOWER, 3, isr=(1,))
    for v in (b"a", b"b", b"y"):
        append(zombie, [v], 3, commit=False)
    append(zombie, [b"z"], 4)                 # its epoch 4 starts at 3; HW 4
    zombie.role, zombie.leader_epoch, zombie.isr = Role.LEADER, 4, (2,)
    c.observe(2, "t-0", zombie, None)
    assert c.violation is None
    assert [e.data["superseded_from"] for e in c.history.events if e.kind == "late_leader"] == [2]
    assert c.models["t-0"].superseded[-1] == (5, 2, "unclean-election")
    follower = make("follower", Role.FOLLOWER, 3, isr=(1,))
    append(follower, [b"a"], 3)
    append(follower, [b"X"], 3)
    c.observe(3, "t-0", follower, FetchPhase.FETCHING)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and "offset 1" in v.message


def test_a_consumed_batch_straddling_where_an_election_superseded_the_history_is_counted(make):
    """An unclean leader whose empty log starts at 1, inside the committed batch 0..2 a
    consumer read: that batch goes whole, and its read is counted, never dropped."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(old, [b"a", b"b", b"c"], 0)
    c.observe(1, "t-0", old, None)
    c.on_consume("t-0", [(base, last, 0, crc)], old.log.high_watermark, 1)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    outsider.log.truncate_fully_and_start_at(1)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    assert [(r.offset, r.cause) for r in c.superseded_reads] == [(0, "unclean-election")]
    assert not c.models["t-0"].consumed


def test_a_deposed_leaders_read_and_ack_of_the_batch_straddling_the_superseded_offset_are_counted(make):
    """The unclean leader's empty log starts at 1, inside the committed batch 0..2, which
    goes whole: the deposed leader, not yet told, serving a read of it or answering its
    ack late is that election's loss seen late, counted like a read or an ack of it made
    before the election, never left remembered where no batch can come again."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(old, [b"a", b"b", b"c"], 0)
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    outsider.log.truncate_fully_and_start_at(1)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    c.on_consume("t-0", [(base, last, 0, crc)], old.log.high_watermark, 1)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=1)
    assert c.violation is None
    assert [(r.offset, r.cause, r.leader) for r in c.superseded_reads] == [(0, "unclean-election", 3)]
    assert [(loss.offset, loss.cause, loss.leader) for loss in c.losses] == [(0, "unclean-election", 3)]
    assert not c.models["t-0"].consumed and not c.models["t-0"].acked
    # The history's superseded event says where the new leader's log leaves the history
    # (its LEO, 1); the excuse above starts lower, at the base of the batch cut whole.
    assert [(e.data["from_offset"], e.data["committed_batches"]) for e in c.history.of_kind("superseded")] == [
        (1, 1)]



def test_the_excuse_starts_at_the_straddling_committed_batch_even_where_the_first_lost_ack_lies_above_it(make):
    """The straddling batch 0..2 was committed but its ack never came; the write acked
    at 3 is the first ack lost.  The excuse still starts at the first batch cut, 0, not
    at that ack: the deposed leader's read of 0..2 is this election's loss seen late."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(old, [b"a", b"b", b"c"], 0)
    acked = append(old, [b"d"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", *acked, -1, 1, leader=1)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    outsider.log.truncate_fully_and_start_at(1)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and [loss.offset for loss in c.losses] == [3]
    c.on_consume("t-0", [(base, last, 0, crc)], old.log.high_watermark, 1)
    assert c.violation is None and not c.models["t-0"].consumed
    assert [(r.offset, r.cause, r.leader) for r in c.superseded_reads] == [(0, "unclean-election", 3)]


def test_of_two_reads_at_one_offset_before_its_commit_is_seen_the_later_one_is_judged(make):
    """Reads of a and then of another batch at offset 0 reach the checker before the step
    that committed a there is judged: the later read is what the commit is compared with,
    and it vanished."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(leader, [b"a"], 0)
    other = fingerprints(bytes(encode_batch([b"X"], base_offset=0)))[0]
    c.on_consume("t-0", [(base, last, 0, crc)], 1, 1)
    c.on_consume("t-0", [other], 1, 1)
    c.observe(1, "t-0", leader, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.CONSUMED_RECORD_VANISHED
    assert "offset 0" in v.message

def test_a_leader_whose_log_starts_inside_a_committed_batch_leaves_the_history_at_that_batch(make):
    """The unclean leader's log starts at 2, inside the committed batch 1..2, and holds
    another batch there: the history is superseded from that batch's base, 1, so a
    deposed leader's read of it is counted with the election."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    base, last, crc = append(old, [b"b", b"c"], 0)
    c.observe(1, "t-0", old, None)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    outsider.log.truncate_fully_and_start_at(2)
    append(outsider, [b"Y"], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    assert [e.data["from_offset"] for e in c.history.events if e.kind == "superseded"] == [1]
    c.on_consume("t-0", [(base, last, 0, crc)], old.log.high_watermark, 1)  # from the deposed leader
    assert c.violation is None and [r.offset for r in c.superseded_reads] == [1]


def test_an_acked_batch_straddling_the_superseded_offset_is_counted_once_and_forgotten(make):
    """The deposed leader's ack of 1..2 arrived before the checker saw it committed; the
    unclean leader ends at 2 with its own batch at 1. The ack is counted lost and goes
    whole with the history from 2: the new leader committing its batch at 1 is no
    further finding."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    base, last, crc = append(old, [b"b", b"c"], 0)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=1)  # not yet seen committed
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"a"], 0, commit=False)
    append(outsider, [b"X"], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and [(loss.offset, loss.cause) for loss in c.losses] == [(1, "unclean-election")]
    assert not c.models["t-0"].acked
    outsider.log.maybe_increment_high_watermark(2)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.models["t-0"].canon_end == 2


def test_a_read_batch_the_leader_then_commits_otherwise_is_a_vanished_record(make):
    """A consumer's read can reach the checker before the commit it was served under:
    the batch committed at that offset must then be the one it read."""
    c = Checker(History())
    c.on_consume("t-0", [(0, 0, 0, 0x1234)], high_watermark=1, leader=1)
    assert c.violation is None
    leader = make("l", Role.LEADER, 0)
    append(leader, [b"other"], 0)
    c.observe(2, "t-0", leader, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.CONSUMED_RECORD_VANISHED and "offset 0" in v.message
    assert v.broker == 2  # the leader that committed the other batch


def test_after_convergence_the_committed_batch_holding_the_leaders_log_start_is_compared(make):
    """The converged leader's log start may fall inside a batch (a follower adopting its
    leader's start): that batch is still held, whole, and must be the committed one."""
    c = Checker(History())
    first = make("first", Role.LEADER, 0)
    append(first, [b"a", b"b", b"c"], 0)
    c.observe(1, "t-0", first, None)
    again = make("again", Role.LEADER, 0)
    append(again, [b"x", b"y", b"z"], 0)
    assert again.log.maybe_increment_log_start_offset(1)
    c.final_check("t-0", {1: first})
    assert c.violation is None
    c.final_check("t-0", {1: again})
    v = c.violation
    assert v is not None and "lost a committed batch" in v.message and "offset 0" in v.message


def test_after_convergence_a_follower_is_compared_from_its_own_log_start_when_higher(make):
    """Retention on a follower may have deleted more than on its leader: the logs are
    compared from the higher of the two starts, not from the leader's."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    for r in (leader, follower):
        append(r, [b"a"], 0)
        append(r, [b"b"], 0)
    c.observe(1, "t-0", leader, None)
    assert follower.log.maybe_increment_log_start_offset(1)
    c.final_check("t-0", {1: leader, 2: follower})
    assert c.violation is None
    append(follower, [b"c"], 0)                       # ... but it holds more than the leader
    c.final_check("t-0", {1: leader, 2: follower})
    assert c.violation is not None and c.violation.broker == 2


def test_a_pending_isr_of_the_epoch_just_served_gives_way_to_the_isr_served_since(make):
    """The store's shrink for epoch 5 was kept until epoch 5 was served; from then on
    the served ISR is what counts: it grew back to [1, 2], so broker 2's election in
    epoch 6 is clean."""
    c = Checker(History())
    old = make("old", Role.LEADER, 4, isr=(1, 2))
    append(old, [b"a"], 4)
    c.observe(1, "t-0", old, None)
    c.on_store_state("t-0", 1, 5, (1,))       # 2 taken out with a new epoch
    old.leader_epoch, old.isr = 5, (1,)
    c.observe(1, "t-0", old, None)
    assert c.models["t-0"].pending_isrs == []
    old.isr = (1, 2)                          # 2 caught up again
    c.observe(1, "t-0", old, None)
    two = make("two", Role.LEADER, 6, isr=(2, 1))
    append(two, [b"a"], 4)
    c.observe(2, "t-0", two, None)
    assert c.violation is None and c.unclean_elections == 0 and not c.losses


def test_a_deposed_leaders_isr_is_not_what_the_next_election_is_judged_against(make):
    """Only the newest leader's ISR is the partition's: a deposed leader, not yet told,
    shrinking its own ISR to itself changes nothing, so broker 3, in the current ISR
    [2, 3], is elected cleanly."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2, 3))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    two = make("two", Role.LEADER, 1, isr=(2, 3))
    append(two, [b"a"], 0)
    c.observe(2, "t-0", two, None)
    old.isr = (1,)                            # the zombie's own shrink
    c.observe(1, "t-0", old, None)
    assert c.models["t-0"].isr == (2, 3)
    three = make("three", Role.LEADER, 2, isr=(3,))
    append(three, [b"a"], 0)
    c.observe(3, "t-0", three, None)
    assert c.violation is None and c.unclean_elections == 0


# ---- third mutation pass (forty-ninth review) ---------------------------------------------------


def test_every_batch_a_consumer_reads_is_counted_superseded_or_not():
    """``consumed_batches`` (the run's consumed-batches figure) counts every batch handed to
    a consumer, a read of superseded history from a deposed leader as well."""
    c = Checker(History())
    m = c.model("t-0")
    m.leaders, m.leader, m.epoch = {0: 1, 1: 2}, 2, 1
    m.superseded.append((1, 1, "unclean-election"))
    c.on_consume("t-0", [(0, 0, 0, 11), (1, 1, 0, 12), (2, 2, 0, 13)], 5, leader=1)  # 1, 2 superseded
    c.on_consume("t-0", [(0, 0, 0, 11)], 5, leader=2)
    assert c.violation is None and [r.offset for r in c.superseded_reads] == [1, 2]
    assert c.consumed_batches == 4


@pytest.mark.parametrize("case", ["ack-time", "acked-after-commit", "commit-time-superseded", "back-same-ms",
                                  "drop-above"])
def test_which_power_loss_excuses_a_missing_batch(case):
    """``_power_loss_cause``: the elected broker's drop excuses a missing batch only if the
    drop reached down to it (from at or below its offset), and came after the batch was
    committed, or acked when it never was, or before that but while the broker was away
    (not yet back, or back in the very millisecond of the commit)."""
    from kreplica.sim.checker import Ack

    c = Checker(History())
    m = c.model("t-0")
    if case == "ack-time":
        # Acked at 300, never committed; the drop at 200 came before the write existed.
        m.acked[5] = Ack(5, 2, 300, 1)
        m.drops.append((2, 5, 200))
        assert c._power_loss_cause(m, 2, 5) is None
    elif case == "acked-after-commit":
        # Committed at 100, its ack answered at 150; the drop at 120 came after the commit.
        m.canon[5], m.committed_at[5], m.canon_end = (5, 0, 1), 100, 6
        m.acked[5] = Ack(5, 1, 150, 1)
        m.drops.append((2, 5, 120))
        assert c._power_loss_cause(m, 2, 5) == "power-loss"
    elif case == "commit-time-superseded":
        # Committed at 100, superseded by an unclean election; the batch acked at 5 since
        # (at 300) is a new write, judged by its own time, not the old commit's.
        m.canon[5], m.committed_at[5], m.canon_end = (5, 0, 1), 100, 6
        Checker._supersede(m, 5)
        m.acked[5] = Ack(5, 2, 300, 1)
        m.drops.append((2, 5, 200))
        assert c._power_loss_cause(m, 2, 5) is None
    elif case == "back-same-ms":
        # Dropped at 100, back (hosting the partition again) at 300, committed at 300:
        # its leader still counted its old LEO when it committed.
        m.canon[5], m.committed_at[5], m.canon_end = (5, 0, 1), 300, 6
        m.drops.append((2, 5, 100))
        m.back[(2, 100)] = 300
        assert c._power_loss_cause(m, 2, 5) == "power-loss"
        m.committed_at[5] = 301
        assert c._power_loss_cause(m, 2, 5) is None
    else:
        # Committed at 200; the drop at 300 took only offsets from 8 on: 5 was not lost to it.
        m.canon[5], m.committed_at[5], m.canon_end = (5, 0, 1), 200, 6
        m.drops.append((2, 8, 300))
        assert c._power_loss_cause(m, 2, 5) is None
        m.drops.append((2, 5, 300))
        assert c._power_loss_cause(m, 2, 5) == "power-loss"


def test_a_leader_of_an_old_epoch_is_still_only_one_leader_of_it(make):
    """Invariant 4 holds for every epoch, not only the newest: a second broker seen
    leading an epoch a newer election already ended is a violation."""
    c = Checker(History())
    c.observe(1, "t-0", make("a", Role.LEADER, 1, isr=(1, 2, 3)), None)
    c.observe(2, "t-0", make("b", Role.LEADER, 2, isr=(2, 3)), None)
    assert c.violation is None
    c.observe(3, "t-0", make("c", Role.LEADER, 1, isr=(3,)), None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.TWO_LEADERS_ONE_EPOCH and v.broker == 3
    assert "epoch 1" in v.message


def test_a_leader_that_truncated_above_what_was_verified_may_lead_again_from_a_lower_hw(make):
    """Any truncation forgets that the replica led, not only one below its verified prefix:
    a leader with HW 3 inside its batch 1..4 (verified only to 1) truncates to 1 (the batch
    goes whole) and is re-elected, unseen between, with HW 1."""
    c = Checker(History())
    r = make("a", Role.LEADER, 0)
    append(r, [b"a"], 0)
    append(r, [b"b", b"c", b"d", b"e"], 0, commit=False)
    r.log.maybe_increment_high_watermark(3)
    c.observe(1, "t-0", r, None)
    assert c.views[(1, "t-0")].verified == 1 and c.views[(1, "t-0")].hw == 3
    r.log.truncate_to(2)
    assert r.log.log_end_offset == 1 and r.log.high_watermark == 1
    c.on_truncate(1, "t-0", 1)
    r.leader_epoch = 1
    c.observe(1, "t-0", r, None)
    assert c.violation is None


def _a_leader_that_deleted_below_2(c: Checker, make, isr) -> Replica:
    """Broker 1 leads epoch 0 and commits [a, b] at 0 and [c] at 2, then its retention
    deletes the first batch: the checker's expired mark is 2."""
    leader = make("l", Role.LEADER, 0, isr=isr)
    append(leader, [b"a", b"b"], 0)
    append(leader, [b"c"], 0)
    c.observe(1, "t-0", leader, None)
    assert leader.log.maybe_increment_log_start_offset(2)
    c.observe(1, "t-0", leader, None)
    assert c.models["t-0"].expired_below == 2
    return leader


def test_a_later_leader_with_a_lower_log_start_does_not_lower_the_expired_mark(make):
    """The mark is the highest log start a current leader has had: a new leader that has
    not deleted as much (its retention has not run) does not bring back what followers
    may still hold, superseded, below the old leader's start."""
    c = Checker(History())
    _a_leader_that_deleted_below_2(c, make, isr=(1, 2))
    nxt = make("n", Role.LEADER, 1)
    append(nxt, [b"a", b"b"], 0)
    append(nxt, [b"c"], 0)
    c.observe(3, "t-0", nxt, None)            # elected, log start 0
    follower = make("f", Role.FOLLOWER, 1)
    append(follower, [b"X", b"Y"], 0)         # superseded leftovers below 2
    append(follower, [b"c"], 0)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is None
    assert c.models["t-0"].expired_below == 2


def _re_elected_alone_beside_a_follower(make, c):
    """Leader 1 commits a, b in epoch 3 and is re-elected alone in epoch 6; returns broker
    2's replica, a follower of epoch 3 with an empty log."""
    first = make("first", Role.LEADER, 3, isr=(1, 2))
    append(first, [b"a"], 3)
    append(first, [b"b"], 3)
    c.observe(1, "t-0", first, None)
    first.leader_epoch, first.isr = 6, (1,)
    c.observe(1, "t-0", first, None)
    zombie = make("zombie", Role.FOLLOWER, 3, isr=(1, 2))
    return zombie


def _late_zombie(make, c, seen_hw, enters=2, unserved=None, phase=FetchPhase.FETCHING):
    """Leader 1 commits a, b in epoch 3 and is re-elected alone in epoch 6; broker 2 holds
    a, b (from epoch 3, b from epoch 5 if its log ``enters`` epoch 5 at 1, or from the
    ``unserved`` epoch no one was seen serving) and, unseen since (``seen_hw``: its HW when
    the checker last saw it, as a follower; None: never seen), was elected alone in epoch
    5, its HW 2."""
    zombie = _re_elected_alone_beside_a_follower(make, c)
    append(zombie, [b"a"], 3, commit=False)
    append(zombie, [b"b"], (unserved or 3) if enters == 2 else 5, commit=False)
    if seen_hw is not None:
        zombie.log.maybe_increment_high_watermark(seen_hw)
        c.observe(2, "t-0", zombie, phase)
    if enters == 2:
        zombie.log.leader_epoch_cache.assign(5, zombie.log.log_end_offset)
    assert zombie.log.leader_epoch_cache.entries[-1] == (5, enters)
    zombie.log.maybe_increment_high_watermark(2)
    zombie.role, zombie.leader_epoch, zombie.isr = Role.LEADER, 5, (2,)
    c.observe(2, "t-0", zombie, None)
    assert c.violation is None
    return [e.data["superseded_from"] for e in c.history.events if e.kind == "late_leader"]


@pytest.mark.parametrize("seen_hw, phase", [(0, FetchPhase.FETCHING), (1, FetchPhase.FETCHING),
                                            (1, FetchPhase.TRUNCATING)])
def test_a_late_leaders_commits_count_from_its_hw_when_last_seen_as_a_follower(make, seen_hw, phase):
    """Its HW when last seen counts, whatever role it had then, an HW of 0 included, and
    whatever of it the checker had verified (nothing, while it was truncating)."""
    c = Checker(History())
    assert _late_zombie(make, c, seen_hw, phase=phase) == [seen_hw]


def test_a_never_seen_late_leaders_commits_count_from_where_its_log_enters_its_own_late_epoch(make):
    """Never seen before: from the start of the first epoch no one was seen serving before
    a newer one, its own late epoch included (entered at 1 here, below its HW 2; epoch 3
    was served)."""
    c = Checker(History())
    assert _late_zombie(make, c, None, enters=1) == [1]
    assert c.models["t-0"].late == {5}



def test_the_newest_leader_seen_leading_an_older_epoch_is_no_late_zombie(make):
    """Only another broker first seen leading an epoch a newer election ended is a late
    leader whose commits an unclean election excuses: the newest leader itself, seen
    (alone in its ISR) in an older epoch no one was seen serving, is judged there like
    any deposed replica, and a batch it holds differently below its HW is divergence."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    new = make("new", Role.LEADER, 2, isr=(2,))
    append(new, [b"a"], 0)
    c.observe(2, "t-0", new, None)
    assert c.violation is None and c.unclean_elections == 0 and c.models["t-0"].leader == 2
    again = make("again", Role.LEADER, 1, isr=(2,))
    append(again, [b"X"], 1)
    c.observe(2, "t-0", again, None)
    assert not c.models["t-0"].late and not list(c.history.of_kind("late_leader"))
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 2
    assert "offset 0" in v.message


def test_a_power_lost_batch_below_every_committed_one_is_explained_by_the_power_loss(make):
    """The history began at the leader's log start, 2; broker 2, which lost its log from
    1 in a power loss after the commit, holds another batch, 1..2, across that start.  No
    batch the history holds starts at or below 1, so the difference has no commit time:
    the power loss explains it all the same, and the write acked at 2 is its counted loss."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    old.log.truncate_fully_and_start_at(2)
    acked = append(old, [b"a"], 0)
    c.set_time(100)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", *acked, -1, 2, leader=1)
    c.set_time(150)
    c.on_power_loss(2, "t-0", 1)
    new = make("new", Role.FOLLOWER, 0, isr=(1, 2))
    new.log.truncate_fully_and_start_at(1)
    append(new, [b"x", b"y"], 0)
    new.role, new.leader_epoch, new.isr = Role.LEADER, 1, (2,)
    c.set_time(200)
    c.observe(2, "t-0", new, None)
    assert c.violation is None and c.unclean_elections == 0
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(2, "power-loss")]
    assert [e.data["from_offset"] for e in c.history.of_kind("superseded")] == [1]

def test_read_fingerprints_keeps_the_batch_holding_the_last_offset_wanted(make):
    """[start, end) is read by the batches holding those offsets: one that starts below
    ``end`` and ends at or past it is one of them."""
    r = make("l", Role.LEADER, 0)
    whole = [append(r, values, 0) for values in ([b"a"], [b"b", b"c", b"d"], [b"e"])]
    assert [(fp[0], fp[1], fp[3]) for fp in read_fingerprints(r.log, 0, 2)] == whole[:2]
    assert [(fp[0], fp[1], fp[3]) for fp in read_fingerprints(r.log, 2, 3)] == whole[1:2]


def test_an_unclean_leader_holding_a_damaged_copy_of_an_acked_batch_has_lost_it_uncounted(make):
    """Damage is no election's doing: the outsider's torn copy of the acked batch is the
    same batch to the search for where its log leaves the history (its header says so),
    and is then judged by its bytes: an acked write lost, not a counted loss."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, 1)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"acked"], 0)
    _flip_a_record_byte(outsider)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.ACKED_WRITE_LOST and "do not match" in v.message
    assert c.unclean_elections == 1 and not c.losses


def test_a_leader_holding_a_damaged_copy_of_a_batch_below_its_hw_is_divergence(make):
    """The bytes are checked on the leader too: a damaged batch never becomes history."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0)
    append(leader, [b"committed"], 0)
    _flip_a_record_byte(leader)
    c.observe(1, "t-0", leader, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 1
    assert "do not match" in v.message and c.models["t-0"].canon == {}


# ---- fourth mutation pass (sixty-seventh review) ------------------------------------------------


def test_a_raised_min_isr_keeps_the_cluster_default_as_its_floor():
    """min.insync.replicas=2 by default, raised to 3 for one topic: a leader may still act on
    the 2 it read before the change, so an answer with an ISR of exactly 2 is no violation;
    one below 2 is."""
    c = Checker(History(), min_isr_default=2)
    c.on_topic_config("high", "min.insync.replicas", "3")
    c.on_acks_all_answered(1, "high-0", 0, (1, 2))
    assert c.violation is None
    c.on_acks_all_answered(1, "high-0", 1, (1,))
    assert c.violation is not None and "below min.insync.replicas=2" in c.violation.message


def test_a_leaderless_isr_the_store_shows_before_any_leader_was_seen_is_adopted(make):
    """Only followers seen so far (the ISR served is unknown, empty): a shrink the store shows
    without a leader is what the first election seen is judged against."""
    c = Checker(History())
    follower = make("f", Role.FOLLOWER, 0, isr=(1, 2))
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    c.on_store_state("t-0", -1, 1, (2,))
    assert c.models["t-0"].isr == (2,)
    leader = make("l", Role.LEADER, 2, isr=(1,))
    c.observe(1, "t-0", leader, None)
    assert c.violation is None and c.unclean_elections == 1


def test_an_election_is_judged_against_the_newest_pending_isr_before_its_epoch(make):
    """Two unserved epochs shrank the ISR in turn ([2, 3], then [3]): broker 2, elected in
    epoch 3, is outside the newest of them, so its election is unclean."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2, 3))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.on_store_state("t-0", 2, 1, (2, 3))     # 1 died; 2 elected, never seen serving
    c.on_store_state("t-0", 3, 2, (3,))       # 2 dropped too; 3 elected, never seen
    assert c.models["t-0"].pending_isrs == [(1, (2, 3)), (2, (3,))]
    two = make("two", Role.LEADER, 3, isr=(2,))
    append(two, [b"a"], 0)
    c.observe(2, "t-0", two, None)
    assert c.violation is None and c.unclean_elections == 1


def test_a_never_seen_late_leaders_commits_count_from_an_unserved_epoch_before_its_late_one(make):
    """Its log enters epoch 4, which no one was seen serving, at 1, before its late epoch 5
    (at 2): its commits count from 1."""
    c = Checker(History())
    assert _late_zombie(make, c, None, unserved=4) == [1]
    assert c.models["t-0"].late == {5}


def test_after_convergence_a_log_start_inside_a_batch_compares_that_batch_on_both_sides(make):
    """Leader and follower hold the same bytes from the same log start, inside a batch: the
    follower's read from there holds that batch, and so must the leader's side."""
    c = Checker(History())
    leader, follower = make("l", Role.LEADER, 0), make("f", Role.FOLLOWER, 0)
    for r in (leader, follower):
        append(r, [b"a", b"b", b"c"], 0)
        append(r, [b"d"], 0)
    c.observe(1, "t-0", leader, None)
    for r in (leader, follower):
        assert r.log.maybe_increment_log_start_offset(1)
    c.final_check("t-0", {1: leader, 2: follower})
    assert c.violation is None, c.violation.describe()


def test_after_convergence_the_leader_is_compared_from_its_own_log_start_above_the_mark(make):
    """Retention moved the converged leader's log start past batches the checker still
    holds (its last move not seen yet): below that start nothing is compared."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0)
    for value in (b"a", b"b", b"c"):
        append(leader, [value], 0)
    c.observe(1, "t-0", leader, None)
    assert leader.log.maybe_increment_log_start_offset(2) and c.models["t-0"].expired_below == 0
    c.final_check("t-0", {1: leader})
    assert c.violation is None, c.violation.describe()


def test_a_damaged_batch_after_intact_ones_is_found():
    """The fast path (one C scan over them all) stops at the first mismatch: batches before
    it keep their CRC, the damaged one and only it gets DAMAGED."""
    a, b, d = (bytes(encode_batch([v], base_offset=i)) for i, v in enumerate((b"a", b"b", b"c")))
    torn = bytearray(a + b + d)
    torn[len(a) + len(b) - 1] ^= 0xFF  # the second batch's last record byte
    intact = fingerprints(a + b + d)
    assert fingerprints(bytes(torn), verified=True) == [intact[0], intact[1][:3] + (DAMAGED,), intact[2]]


def test_every_damaged_batch_is_found_not_only_the_first():
    """Past the first mismatch each batch is checked on its own: an intact one keeps its
    CRC and a later damaged one is DAMAGED too."""
    batches = [bytes(encode_batch([v], base_offset=i)) for i, v in enumerate((b"a", b"b", b"c", b"d"))]
    torn = bytearray(b"".join(batches))
    for k in (1, 3):  # the second and the fourth batch's last record byte
        torn[sum(map(len, batches[:k + 1])) - 1] ^= 0xFF
    intact = fingerprints(b"".join(batches))
    assert fingerprints(bytes(torn), verified=True) == [
        intact[0], intact[1][:3] + (DAMAGED,), intact[2], intact[3][:3] + (DAMAGED,)]


@pytest.mark.parametrize("leftovers", [([b"X", b"Y"], [b"Z"]), ([b"X"], [b"Y", b"Z"])],
                         ids=["first-batch-at-the-mark", "first-batch-straddling-the-mark"])
def test_history_superseded_from_below_the_expired_mark_grows_again_from_the_newest_leader(make, leftovers):
    """The old leader deleted up to offset 2 (the mark); an outsider holding leftovers
    that differ from offset 0 is elected uncleanly, so the history is superseded from 0,
    below the mark, where no replica is read any more.  The history used to stop growing
    there for good (followers, acks and reads went unchecked); the new leader's batches
    from the mark on are the history now, from its batch holding the mark (which may start
    below it), and a follower differing there is caught."""
    c = Checker(History())
    _a_leader_that_deleted_below_2(c, make, isr=(1,))
    outsider = make("outsider", Role.LEADER, 1, isr=(3,))
    for values in leftovers:  # leftovers of an epoch no one committed, up to 2
        append(outsider, values, 0)
    append(outsider, [b"d"], 1)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    assert c.models["t-0"].canon_end == 4  # the batch holding 2 and d at 3: the history goes on
    follower = make("f", Role.FOLLOWER, 1, isr=(3, 2))
    for values in leftovers:
        append(follower, values, 0)
    append(follower, [b"other"], 1)
    c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE
    assert "offset 3" in c.violation.message


def test_read_fingerprints_reads_on_past_a_chunk_and_nothing_past_the_log_end(make):
    """A range longer than one read (a log over the 1 MiB chunk) is read chunk after chunk
    to its end; a range that starts past the log's end (a replica that is behind) holds
    no batch, rather than a read out of range."""
    r = make("l", Role.LEADER, 0)
    whole = [append(r, values, 0) for values in ([b"a" * 300], [b"b" * 300, b"c"], [b"d" * 300], [b"e"])]
    got = read_fingerprints(r.log, 0, 5, chunk_bytes=1)  # at least one whole batch a read
    assert [(fp[0], fp[1], fp[3]) for fp in got] == whole
    assert read_fingerprints(r.log, 7, 10) == []


def test_a_violation_prints_every_event_of_its_trace_under_a_header_naming_its_scope():
    """The printed trace is the whole kept trace, one indented JSON line per event, under a
    header naming the partition (with the faults among its events) or, for a violation of
    the whole cluster, only how many events it shows."""
    h = History()
    for i in range(5):
        h.record(i, "ack", 1, "t-0", offset=i)
    h.record(5, "crash", 2, None)
    c = Checker(h, trace_events=4)
    c.set_time(9)
    c.fail(Invariant.REPLICA_DIVERGENCE, "t-0", 1, "boom")
    trace = c.violation.trace
    assert [e.kind for e in trace] == ["ack", "ack", "ack", "crash", "violation"]
    lines = c.violation.describe().splitlines()
    assert lines[0] == "VIOLATION 3-replica-divergence at t=9ms tp=t-0 broker=1: boom"
    assert lines[1] == "last events touching t-0, with the faults among them (5):"
    assert lines[2:] == ["  " + e.to_json() for e in trace]
    whole = Checker(h, trace_events=3)
    whole.fail(Invariant.CONTROLLER_EPOCH, None, None, "went back")
    lines = whole.violation.describe().splitlines()
    assert lines[1] == "last 3 events:" and len(whole.violation.trace) == 3
    assert lines[2:] == ["  " + e.to_json() for e in whole.violation.trace]


def test_a_restart_in_the_millisecond_of_the_power_loss_brings_the_replica_back_at_its_next_sighting(make):
    """A restart that follows the power loss in the same millisecond still follows it: the
    replica's next sighting is when it is back, and a batch committed after that is no
    longer excused by the power loss."""
    c = Checker(History())
    m = c.model("t-0")
    c.set_time(200)
    c.on_power_loss(2, "t-0", 5)
    c.on_restart(2)
    c.set_time(250)
    c.observe(2, "t-0", make("f", Role.FOLLOWER, 0), FetchPhase.FETCHING)
    assert m.back == {(2, 200): 250}
    m.canon[5], m.committed_at[5], m.canon_end = (5, 0, 1), 300, 6
    assert c._power_loss_cause(m, 2, 5) is None


def test_a_late_leader_where_unclean_elections_were_never_enabled_is_excused_nothing(make):
    """Without unclean elections no newer leader could have been chosen over a sole ISR
    member: a late leader alone in its ISR supersedes nothing, and its ack of a batch the
    newest leader then commits otherwise is a lost acked write, not a counted loss."""
    c = Checker(History(), unclean_default=False)
    assert _late_zombie(make, c, 1) == []
    zombie = c.views[(2, "t-0")].partition
    base, last, crc = append(zombie, [b"zombie"], 5)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=2)
    c.observe(2, "t-0", zombie, None)
    first = c.views[(1, "t-0")].partition
    append(first, [b"c"], 6)
    c.observe(1, "t-0", first, None)
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST
    assert "replaced by another batch" in c.violation.message and not c.losses
    assert c.violation.broker == 1  # the leader that committed the other batch


def test_a_replica_power_lost_twice_leaves_the_history_at_the_first_batch_it_holds_differently(make):
    """Broker 2 lost its tail from 1 in one power loss and from 2 in a later one, appending
    other batches after each: elected, its history ends where the search from its lowest
    drop finds it first differing (1), not its latest drop (2), and its batch at 1
    continues the history."""
    c = Checker(History())
    c.set_time(100)
    first = make("first", Role.LEADER, 0, isr=(1, 2))
    for value in (b"a", b"b", b"c", b"d"):
        append(first, [value], 0)
    c.observe(1, "t-0", first, None)
    c.set_time(200)
    c.on_power_loss(2, "t-0", 1)
    c.set_time(400)
    c.on_power_loss(2, "t-0", 2)
    new = make("new", Role.LEADER, 1, isr=(2,))
    for value, epoch in ((b"a", 0), (b"X", 0), (b"W", 1)):
        append(new, [value], epoch, commit=False)
    new.log.maybe_increment_high_watermark(3)
    c.set_time(500)
    c.observe(2, "t-0", new, None)
    assert c.violation is None, c.violation.describe()
    superseded = [(e.data["from_offset"], e.data["cause"]) for e in c.history.events if e.kind == "superseded"]
    assert superseded == [(1, "power-loss")] and c.models["t-0"].canon_end == 3


def test_a_difference_no_power_loss_explains_is_judged_when_the_new_leaders_hw_reaches_it(make):
    """Broker 2 dropped offset 1 before it was committed and acked (its power loss excuses
    nothing there), and holds another batch at 1, uncommitted, when it is elected
    cleanly.  Its log does not end before the acked write: the election settles nothing;
    once its HW passes 1 its committed data there differs, and that is the lost write."""
    c = Checker(History())
    c.set_time(50)
    c.on_power_loss(2, "t-0", 1)
    c.set_time(100)
    first = make("first", Role.LEADER, 0, isr=(1, 2))
    append(first, [b"a"], 0)
    base, last, crc = append(first, [b"b"], 0)
    c.observe(1, "t-0", first, None)
    c.on_ack("t-0", base, last, crc, -1, 2)
    new = make("new", Role.LEADER, 1, isr=(2,))
    append(new, [b"a"], 0)
    append(new, [b"X"], 0, commit=False)
    c.set_time(200)
    c.observe(2, "t-0", new, None)
    assert c.violation is None and not c.losses
    new.log.maybe_increment_high_watermark(2)
    c.observe(2, "t-0", new, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.ACKED_WRITE_LOST and "below its HW at offset 1" in v.message


def test_a_late_leader_that_truncated_since_it_was_last_seen_counts_its_commits_from_its_hw_now(make):
    """Broker 2 was last seen as a follower with HW 2, then truncated to 1 and was made
    leader of epoch 5, alone, in the same step (held requests run back to back): what it
    commits from its HW now (1), not its HW when last seen, is the unclean election's."""
    c = Checker(History())
    zombie = _re_elected_alone_beside_a_follower(make, c)
    append(zombie, [b"a"], 3)
    append(zombie, [b"b"], 3)
    c.observe(2, "t-0", zombie, FetchPhase.FETCHING)
    assert zombie.log.truncate_to(1) and zombie.high_watermark == 1
    c.on_truncate(2, "t-0", 1)
    zombie.role, zombie.leader_epoch, zombie.isr = Role.LEADER, 5, (2,)
    c.observe(2, "t-0", zombie, None)
    assert [e.data["superseded_from"] for e in c.history.events if e.kind == "late_leader"] == [1]
    base, last, crc = append(zombie, [b"zombie"], 5)
    c.on_ack("t-0", base, last, crc, -1, 1, leader=2)
    c.observe(2, "t-0", zombie, None)
    assert c.violation is None, c.violation.describe()
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(1, "unclean-election")]


def test_a_new_leader_batching_the_history_otherwise_from_inside_a_committed_batch_is_divergence(make):
    """The history holds a, b, c as one batch at 0 and d at 3; the leader's log start was
    moved to 1, inside that batch.  A new leader holding b, c as a batch of its own at 1
    does not continue the history there (only a batch at its end does): no committed batch
    starts at 1, which is a divergence, even read from the expired mark."""
    c = Checker(History())
    first = make("first", Role.LEADER, 0, isr=(1, 2))
    append(first, [b"a", b"b", b"c"], 0)
    append(first, [b"d"], 0)
    c.observe(1, "t-0", first, None)
    assert first.log.maybe_increment_log_start_offset(1)
    c.observe(1, "t-0", first, None)
    assert c.models["t-0"].expired_below == 1 and c.models["t-0"].canon_end == 4
    new = make("new", Role.LEADER, 1, isr=(2, 1))
    for values in ([b"a"], [b"b", b"c"], [b"d"]):
        append(new, values, 0)
    c.observe(2, "t-0", new, None)
    v = c.violation
    assert v is not None and v.invariant is Invariant.REPLICA_DIVERGENCE and v.broker == 2
    assert "offset 1: no committed batch starts there" in v.message


def test_a_deposed_leader_keeps_what_a_power_loss_superseded_until_told(make):
    """Broker 2, elected cleanly, lost the committed batch at 0 in its power loss and
    commits its own there.  Broker 1, the deposed leader not yet told, still holds the old
    batch below its HW on epoch 0: excused, as after an unclean election, not divergence."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"committed"], 0)
    c.observe(1, "t-0", old, None)
    c.on_power_loss(2, "t-0", 0)
    new = make("new", Role.LEADER, 1, isr=(2,))
    c.observe(2, "t-0", new, None)
    append(new, [b"new"], 1)
    c.observe(2, "t-0", new, None)
    c.observe(1, "t-0", old, None)
    assert c.violation is None, c.violation.describe()
    assert c.models["t-0"].superseded == [(1, 0, "power-loss")] and c.models["t-0"].canon_end == 1
    old.role, old.leader_epoch = Role.FOLLOWER, 1   # told, but it kept its batch
    c.observe(1, "t-0", old, FetchPhase.FETCHING)
    assert c.violation is not None and c.violation.invariant is Invariant.REPLICA_DIVERGENCE


# ---- seventh checker mutation pass (hundred-and-twenty-second review) ----------------------------


def test_a_replica_power_lost_twice_is_back_only_at_its_first_sighting_after_the_second_restart(make):
    """Every restart counts, not only a broker's first: broker 2 lost its unflushed tail
    twice, restarting after each.  A write committed after its second restart but before
    it was next seen was counted on its LEO from before that crash, so its election
    without the batch is the power loss's counted loss, not a lost acked write."""
    c = Checker(History())
    leader = make("l", Role.LEADER, 0, isr=(1, 2))
    follower = make("f", Role.FOLLOWER, 0, isr=(1, 2))
    for r in (leader, follower):
        append(r, [b"a"], 0)
    c.set_time(100)
    c.observe(1, "t-0", leader, None)
    for lost_at, restarted_at, seen_at in ((150, 160, 170), (200, 250, 350)):
        c.set_time(lost_at)
        c.on_power_loss(2, "t-0", 1)
        c.set_time(restarted_at)
        c.on_restart(2)
        if lost_at == 200:
            c.set_time(300)                       # restarted, not yet back
            base, last, crc = append(leader, [b"b"], 0)
            c.observe(1, "t-0", leader, None)
            c.on_ack("t-0", base, last, crc, -1, 2)
        c.set_time(seen_at)
        c.observe(2, "t-0", follower, FetchPhase.FETCHING)
    assert c.models["t-0"].back == {(2, 150): 170, (2, 200): 350}
    c.set_time(400)
    follower.role, follower.leader_epoch, follower.isr = Role.LEADER, 1, (2,)
    c.observe(2, "t-0", follower, None)           # elected without offset 1
    assert c.violation is None
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(1, "power-loss")]


def test_a_read_the_checker_has_not_yet_seen_committed_is_counted_when_an_election_supersedes_it(make):
    """A consumer's answer can reach the checker before the step that committed its batch
    is judged: the read is remembered at its offset all the same, and an unclean election
    that then supersedes the history from below it counts it, as it counts the reads of
    batches the history already held."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    first = append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    second = append(old, [b"b"], 0)               # committed, not yet judged
    c.on_consume("t-0", [(b, last, 0, crc) for b, last, crc in (first, second)], old.log.high_watermark, 1)
    assert c.violation is None and sorted(c.models["t-0"].consumed) == [0, 1]
    assert c.models["t-0"].canon_end == 1
    outsider = make("outsider", Role.LEADER, 1, isr=(3,))
    c.observe(3, "t-0", outsider, None)           # elected with nothing
    assert c.violation is None and c.unclean_elections == 1
    assert [(r.offset, r.cause) for r in c.superseded_reads] == [(0, "unclean-election"), (1, "unclean-election")]
    assert c.models["t-0"].consumed == {}


def _read_before_judged_then_elect_a_holder_of_the_first(make, c: Checker, ack: bool,
                                                        holds=(b"a",)) -> Replica:
    """Broker 1 alone commits a (judged) and b (not yet judged); a consumer's read of both
    reaches the checker first (with b's ack, if ``ack``); broker 3, outside the ISR and
    holding ``holds`` (a alone by default), is then seen leading epoch 1: the history ends
    at 1 (at 2 if it holds b too)."""
    old = make("old", Role.LEADER, 0, isr=(1,))
    first = append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    second = append(old, [b"b"], 0)
    c.on_consume("t-0", [(b, last, 0, crc) for b, last, crc in (first, second)], old.log.high_watermark, 1)
    if ack:
        c.on_ack("t-0", *second, -1, 1, leader=1)
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    for value in holds:
        append(outsider, [value], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    return outsider


def test_a_read_not_yet_seen_committed_exactly_where_the_new_leader_ends_is_counted_with_the_lost_ack(make):
    c = Checker(History())
    _read_before_judged_then_elect_a_holder_of_the_first(make, c, ack=True)
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(1, "unclean-election")]
    assert [(r.offset, r.cause) for r in c.superseded_reads] == [(1, "unclean-election")]
    assert sorted(c.models["t-0"].consumed) == [0]


def test_an_ack_not_yet_seen_committed_where_the_unclean_leader_holds_another_batch_is_a_counted_loss(make):
    """b's ack reaches the checker before the step that committed b is judged; broker 3,
    outside the ISR, holds a and then its own batch X at 1 (it never had b), and is
    elected where unclean elections are allowed.  The acked write is that election's
    loss, counted at once, not a violation found when the new leader commits X there."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", *append(old, [b"b"], 0), -1, 1, leader=1)   # b not yet judged committed
    outsider = make("outsider", Role.FOLLOWER, 0, isr=(1,))
    append(outsider, [b"a"], 0, commit=False)
    append(outsider, [b"X"], 0, commit=False)
    outsider.role, outsider.leader_epoch, outsider.isr = Role.LEADER, 1, (3,)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None and c.unclean_elections == 1
    assert [(loss.offset, loss.cause, loss.leader) for loss in c.losses] == [(1, "unclean-election", 3)]
    outsider.log.maybe_increment_high_watermark(2)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None, c.violation.describe()
    assert c.models["t-0"].canon_end == 2


@pytest.mark.parametrize("lost_by, counted", [(2, True), (3, False)], ids=["its-own-power-loss", "another-brokers"])
def test_an_ack_not_yet_seen_committed_that_a_clean_leader_lost_in_its_power_loss_is_a_counted_loss(
        make, lost_by, counted):
    """The clean counterpart of the test above: b's ack reaches the checker before the step
    that committed b is judged; broker 2, in the ISR, had b unflushed and drops it in a power
    loss, takes a producer's batch X at 1 and is elected (cleanly) holding it below its LEO.
    Its own power loss explains the missing ack: counted at once, and X then commits as the
    history.  Another broker's power loss explains nothing: the new leader committing X over
    the acked write is a violation."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", *append(old, [b"b"], 0), -1, 2, leader=1)   # b not yet judged committed
    c.set_time(10)
    c.on_power_loss(lost_by, "t-0", 1)
    c.on_restart(lost_by)
    back = make("back", Role.FOLLOWER, 0, isr=(1, 2))
    append(back, [b"a"], 0, commit=False)
    append(back, [b"X"], 0, commit=False)
    back.role, back.leader_epoch, back.isr = Role.LEADER, 1, (2,)
    c.observe(2, "t-0", back, None)
    assert c.violation is None and c.unclean_elections == 0
    assert [(loss.offset, loss.cause, loss.leader) for loss in c.losses] == ([(1, "power-loss", 2)] if counted else [])
    back.log.maybe_increment_high_watermark(2)
    c.observe(2, "t-0", back, None)
    if counted:
        assert c.violation is None, c.violation.describe()
        assert c.models["t-0"].canon_end == 2
    else:
        assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST


def _elect_broker_2_holding(c: Checker, make, values, dropped_from: int | None = None) -> Replica:
    """Broker 2 (after its power loss from ``dropped_from``, and its restart, if given) is
    seen leading epoch 1 alone in its ISR, its log holding ``values`` uncommitted."""
    if dropped_from is not None:
        c.on_power_loss(2, "t-0", dropped_from)
        c.on_restart(2)
    new = make("new", Role.FOLLOWER, 0)
    for value in values:
        append(new, [value], 0, commit=False)
    new.role, new.leader_epoch, new.isr = Role.LEADER, 1, (2,)
    c.observe(2, "t-0", new, None)
    return new


@pytest.mark.parametrize("dropped_from, holds_b, lost", [(1, False, [1, 2]), (2, True, [2]), (2, False, [])],
                         ids=["both-dropped", "b-held-c-dropped", "b-missing-above-no-drop"])
def test_a_clean_leader_is_compared_with_uncommitted_acks_in_offset_order_each_judged_at_its_own_offset(
        make, dropped_from, holds_b, lost):
    """Acks of b (1) and c (2), answered c first, reach the checker before the step that
    committed them is judged; broker 2 drops from ``dropped_from`` in a power loss and is
    elected cleanly holding a producer's Y at 2 (and b, or X, at 1).  The acks are compared
    in offset order, each missing one's loss judged by a drop reaching its own offset: both
    lost when b is, c alone when b is held, and with b missing where no drop reached (an
    engine bug), nothing counted: b's loss is found when the new leader commits X there."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    b, c_ = append(old, [b"b"], 0), append(old, [b"c"], 0)
    c.on_ack("t-0", *c_, -1, 2, leader=1)
    c.on_ack("t-0", *b, -1, 2, leader=1)
    c.set_time(10)
    new = _elect_broker_2_holding(c, make, (b"a", b"b" if holds_b else b"X", b"Y"), dropped_from)
    assert c.violation is None
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(o, "power-loss") for o in lost]
    new.log.maybe_increment_high_watermark(3)
    c.observe(2, "t-0", new, None)
    if lost:
        assert c.violation is None, c.violation.describe()
    else:
        assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST
        assert "offset 1" in c.violation.message


def test_an_acked_write_expired_before_it_was_seen_committed_is_no_loss_of_a_clean_leader(make):
    """b's ack reaches the checker before the step that committed b is judged, and in that
    step the leader's retention also moved its log start past b: the expired mark (2) lies
    above the committed end (1).  Broker 2, in the ISR, dropped b in a power loss after the
    ack and is elected cleanly holding a producer's X there.  Below the mark is retention's,
    not a loss: nothing is counted."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", *append(old, [b"b"], 0), -1, 2, leader=1)
    assert old.log.maybe_increment_log_start_offset(2)
    c.observe(1, "t-0", old, None)
    m = c.models["t-0"]
    assert (m.canon_end, m.expired_below) == (1, 2)
    c.set_time(10)
    _elect_broker_2_holding(c, make, (b"a", b"X"), dropped_from=1)
    assert c.violation is None and c.losses == [] and list(c.history.of_kind("superseded")) == []


def test_a_committed_batch_a_clean_leader_lost_unexplained_ends_nothing_even_where_a_later_ack_is_explained(make):
    """Broker 2 lost power once before b was committed and was back before the commit (which
    that loss therefore does not explain), then again from 2 after c's ack.  Elected cleanly
    holding X where b was committed, its log is not judged to leave the history at c, though
    its second power loss explains c: b's loss explains nothing, so its end stays its LEO,
    no loss is counted, and b's loss is found when the new leader commits X."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.set_time(1)
    c.on_power_loss(2, "t-0", 0)
    c.on_restart(2)
    c.set_time(2)
    c.observe(2, "t-0", make("f", Role.FOLLOWER, 0), FetchPhase.FETCHING)   # back
    c.set_time(5)
    append(old, [b"b"], 0)
    c.observe(1, "t-0", old, None)
    c.set_time(6)
    c.on_ack("t-0", *append(old, [b"c"], 0), -1, 2, leader=1)
    c.set_time(8)
    new = _elect_broker_2_holding(c, make, (b"a", b"X", b"Y"), dropped_from=2)
    assert c.violation is None and c.losses == [] and c.models["t-0"].canon_end == 2
    new.log.maybe_increment_high_watermark(3)
    c.observe(2, "t-0", new, None)
    assert c.violation is not None and "offset 1" in c.violation.message


@pytest.mark.parametrize("power_lost", [False, True], ids=["nothing-counted-its-loss", "its-power-loss-counted"])
def test_a_write_acked_where_an_uncounted_acked_write_lies_is_a_loss_even_before_it_commits(make, power_lost):
    """Two acks at one offset, neither yet seen committed: b's (broker 1, ISR {1, 2}), then X's
    from broker 2, elected cleanly without b.  With no loss counted for b, X's ack is b's
    loss found (were X's ack to replace b's, X's commit would then pass, and b's loss would
    go unreported for good); after broker 2's own power loss counted b, X's ack is the
    history's."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", *append(old, [b"b"], 0), -1, 2, leader=1)
    c.set_time(10)
    new = _elect_broker_2_holding(c, make, (b"a", b"X"), dropped_from=1 if power_lost else None)
    x = next((base, last, crc) for base, last, _epoch, crc in read_fingerprints(new.log, 1, 2))
    assert c.violation is None and len(c.losses) == power_lost
    c.set_time(20)
    c.on_ack("t-0", *x, -1, 1, leader=2)   # X's ack reaches the checker before its commit is judged
    new.log.maybe_increment_high_watermark(2)
    c.observe(2, "t-0", new, None)
    if power_lost:
        assert c.violation is None, c.violation.describe()
        assert c.models["t-0"].canon[1][2] == x[2]
    else:
        v = c.violation
        assert v is not None and (v.invariant, v.time_ms, v.broker) == (Invariant.ACKED_WRITE_LOST, 20, 2)
        assert "offset 1" in v.message


@pytest.mark.parametrize("unclean", [False, True], ids=["own-power-loss", "unclean"])
def test_an_acked_batch_ending_past_the_new_leaders_leo_is_lost_from_its_base_with_its_read(make, unclean):
    """b (offsets 1-2) is acked and read before the step that committed it is judged; the
    new leader holds a and a producer's X at 1, so its LEO (2) falls inside b.  It holds
    another batch at b's base: its log leaves the history there, and the read of b is
    counted with the ack (ended at the LEO, the cut of b's ack took the read uncounted)."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1, 2))
    append(old, [b"a"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", *append(old, [b"b1", b"b2"], 0), -1, 2, leader=1)
    c.on_consume("t-0", read_fingerprints(old.log, 1, 3), 3, 1)
    c.set_time(10)
    if unclean:
        c.on_store_state("t-0", -1, 0, (1,))
    _elect_broker_2_holding(c, make, (b"a", b"X"), dropped_from=None if unclean else 1)
    cause = "unclean-election" if unclean else "power-loss"
    assert c.violation is None and c.unclean_elections == unclean
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(1, cause)]
    assert [(read.offset, read.cause) for read in c.superseded_reads] == [(1, cause)]
    assert [e.data["from_offset"] for e in c.history.of_kind("superseded")] == [1]


def test_a_read_not_yet_seen_committed_that_an_unclean_election_loses_alone_is_counted_not_a_vanished_record(make):
    """Nothing the checker saw committed is lost (the new leader holds a), but the read of
    b, committed by the deposed leader and not yet judged, is beyond where the new leader
    ends: it is that election's loss, counted, and the new leader's own batch at 1 is
    then no vanished record."""
    c = Checker(History())
    outsider = _read_before_judged_then_elect_a_holder_of_the_first(make, c, ack=False)
    assert not c.losses
    assert [(r.offset, r.cause, r.leader) for r in c.superseded_reads] == [(1, "unclean-election", 3)]
    append(outsider, [b"X"], 1)
    c.observe(3, "t-0", outsider, None)
    assert c.violation is None, c.violation.describe()
    assert c.models["t-0"].canon_end == 2 and sorted(c.models["t-0"].consumed) == [0]


def test_a_read_not_yet_seen_committed_that_the_unclean_leader_holds_too_is_kept_not_counted(make):
    """The outsider holds b as well: the read of b, past the committed end but not past
    where the new leader ends, lost nothing; it is kept, to be judged when b commits."""
    c = Checker(History())
    _read_before_judged_then_elect_a_holder_of_the_first(make, c, ack=False, holds=(b"a", b"b"))
    assert not c.losses and not c.superseded_reads
    assert sorted(c.models["t-0"].consumed) == [0, 1]


def _acked_with_a_pending_isr(c: Checker, make, isr, leader: int, shrunk) -> Replica:
    """Broker 1 leads epoch 0 with ``isr`` and acks a write; the store then shows epoch 1
    led by ``leader`` with the ISR ``shrunk``, which no broker has served yet."""
    old = make("old", Role.LEADER, 0, isr=isr)
    base, last, crc = append(old, [b"acked"], 0)
    c.observe(1, "t-0", old, None)
    c.on_ack("t-0", base, last, crc, -1, len(isr))
    c.on_store_state("t-0", leader, 1, shrunk)
    return old


def test_an_election_is_judged_against_the_isr_before_its_epoch_not_the_one_written_with_it(make):
    """The ISR the store shows in the election's own epoch is that election's outcome, not
    what it chose from: broker 2, in the ISR when chosen, is a clean choice even where the
    controller wrote epoch 1 with an ISR leaving its own leader out, and its missing the
    acked write is a lost write, not an unclean election's counted loss."""
    c = Checker(History())
    _acked_with_a_pending_isr(c, make, (1, 2, 3), 2, (3,))
    assert c.models["t-0"].pending_isrs == [(1, (3,))]
    new = make("new", Role.LEADER, 1, isr=(3,))
    c.observe(2, "t-0", new, None)
    assert c.unclean_elections == 0 and not c.losses
    assert c.violation is not None and c.violation.invariant is Invariant.ACKED_WRITE_LOST


def test_every_acked_write_an_unclean_election_loses_is_counted(make):
    """Two acknowledged writes beyond the new leader's log: both are counted, attributed to
    the election, not only the first (the run's counted-loss figures are per write)."""
    c = Checker(History())
    old = make("old", Role.LEADER, 0, isr=(1,))
    acked = [append(old, [value], 0) for value in (b"first", b"second")]
    c.observe(1, "t-0", old, None)
    for base, last, crc in acked:
        c.on_ack("t-0", base, last, crc, -1, 1)
    c.observe(3, "t-0", make("outsider", Role.LEADER, 1, isr=(3,)), None)
    assert c.violation is None and c.unclean_elections == 1
    assert [(loss.offset, loss.cause, loss.leader, loss.leader_epoch) for loss in c.losses] == [
        (0, "unclean-election", 3, 1), (1, "unclean-election", 3, 1)]
    assert c.models["t-0"].acked == {}
    # The history names each lost write by its own offset, not where the loss starts.
    assert [(e.broker, e.data) for e in c.history.of_kind("counted_loss")] == [
        (3, {"offset": offset, "cause": "unclean-election", "epoch": 1}) for offset in (0, 1)]


def test_a_store_state_led_by_broker_0_is_led_not_leaderless(make):
    """No leader is -1 (Kafka's LeaderAndIsr.NoLeader); broker 0 is a broker like any other
    (the cluster takes id 0).  The controller chose broker 0 for epoch 1 and left it alone in
    the ISR: that shrink stays pending for the elections after epoch 1, whatever the deposed
    leader, not yet told, still serves in epoch 0, so broker 2 then elected is unclean."""
    c = Checker(History())
    old = _acked_with_a_pending_isr(c, make, (0, 1, 2), 0, (0,))
    assert c.models["t-0"].pending_isrs == [(1, (0,))]
    c.observe(1, "t-0", old, None)               # the deposed leader, its ISR as it was
    c.observe(2, "t-0", make("two", Role.LEADER, 2, isr=(2,)), None)
    assert c.violation is None and c.unclean_elections == 1
    assert [(loss.offset, loss.cause) for loss in c.losses] == [(0, "unclean-election")]


def test_a_replica_back_from_a_power_loss_below_the_expired_mark_loses_nothing_it_holds_when_elected(make):
    """Below the expired mark a replica may hold what the history never did: broker 3 keeps
    leftovers at 0 and 1 that an unclean election superseded, the history now starting at
    the mark, 2.  A power loss drops its tail from 1 and it fetches everything back; elected
    again it holds every committed batch, so nothing is lost: its leftover at 1 is no
    difference of the committed history (retention is not a loss), and the write acked at 3
    is not a power loss's counted loss."""
    c = Checker(History())
    _a_leader_that_deleted_below_2(c, make, isr=(1,))

    def fill(r: Replica) -> list[tuple[int, int, int]]:
        return [append(r, [b"X"], 0), append(r, [b"Y"], 0), append(r, [b"Z"], 0), append(r, [b"d"], 1)]

    outsider = make("outsider", Role.LEADER, 1, isr=(3, 2))
    acked = fill(outsider)[3]
    c.set_time(10)
    c.observe(3, "t-0", outsider, None)           # unclean: superseded from 0, below the mark
    m = c.models["t-0"]
    assert sorted(m.canon) == [2, 3] and m.expired_below == 2
    c.on_ack("t-0", *acked, -1, 2, leader=3)
    two = make("two", Role.LEADER, 2, isr=(2, 3))
    fill(two)
    c.set_time(20)
    c.observe(2, "t-0", two, None)                # a clean election
    c.set_time(30)
    c.on_power_loss(3, "t-0", 1)
    c.set_time(40)
    c.on_restart(3)
    back = make("back", Role.FOLLOWER, 2, isr=(2, 3))
    fill(back)                                    # fetched back whole
    c.set_time(50)
    c.observe(3, "t-0", back, FetchPhase.FETCHING)
    c.set_time(60)
    back.role, back.leader_epoch = Role.LEADER, 3
    c.observe(3, "t-0", back, None)
    assert c.violation is None and not c.losses
    assert [e for e in c.history.events if e.kind == "superseded" and e.data["cause"] == "power-loss"] == []
    assert 3 in m.acked and sorted(m.canon) == [2, 3]
