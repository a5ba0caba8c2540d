"""Planted bugs: the simulator must find each one.

A checker that reports nothing proves nothing until it has been seen to catch
bugs (TigerBeetle's VOPR is judged the same way).  Each mutant below replaces
one engine function with a plausible replication bug. The test runs seeds of a
shipped scenario until the first violation, and asserts two things: the
violation is of the invariant that bug breaks, and the same seed passes without
the bug. Every one of the six invariants is reached by at least one mutant.

Runs use leader-epoch truncation unless a mutant says otherwise. The seed each
bug is found at is recorded here and in docs/simulator.md. A change that
moves it is fine; a bug the simulator no longer finds is a regression of the
checker or the fault mix.
"""
from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any, Callable

import pytest

from kreplica.errors import NONE, NotLeaderOrFollower

from kreplica.broker import Broker
from kreplica.controller import leader_selectors
from kreplica.controller.leader_selectors import Election
from kreplica.log.leader_epoch_cache import LeaderEpochCache
from kreplica.log import log_segment
from kreplica.log.log import Log
from kreplica.meta import layout
from kreplica.meta.kafka_zk_client import KafkaZkClient
from kreplica.meta.store import NodeExists, Op, StoreError
from kreplica.protocol.common import LeaderAndIsr
from kreplica.replica.partition import Partition, Role
from kreplica.replica import replica_manager
from kreplica.replica.replica_manager import ReplicaManager
from kreplica.sim import scenarios
from kreplica.sim.checker import Invariant
from kreplica.sim.world import World

_offline = leader_selectors.offline
_preferred = leader_selectors.preferred
_controlled_shutdown = leader_selectors.controlled_shutdown
_read_partition = ReplicaManager._read_partition
_apply_alter_isr = Broker._apply_alter_isr
_register_controller = KafkaZkClient.register_controller_and_increment_epoch
_end_offset_for = LeaderEpochCache.end_offset_for
_delete_old_segments = Log.delete_old_segments
_make_leader = Partition.make_leader
_increment_controller_epoch = KafkaZkClient.increment_controller_epoch
_frame_batches = log_segment.frame_batches


def _hw_ignores_followers(self: Partition) -> bool:
    """The leader commits what it alone holds: acks=all waits on an HW nobody replicated."""
    if self.role is not Role.LEADER:
        return False
    log = self.log
    if log.log_end_offset <= log.high_watermark or log.maybe_increment_high_watermark(log.log_end_offset) is None:
        return False
    self._on_high_watermark(self.tp)
    return True


def _hw_without_the_monotonic_guard(self: Partition) -> bool:
    """The HW is the lowest LEO of the replicas that count, even when that is lower."""
    if self.role is not Role.LEADER:
        return False
    now = self._clock.now_ms()
    leos = [self.log.log_end_offset] + [
        r.log_end_offset for b, r in self.remote_replicas.items()
        if b in self.isr_state.maximal_isr or r.is_caught_up(now, self._lag_max_ms)]
    old = self.log.high_watermark
    if self.log.update_high_watermark(min(leos)) == old:
        return False
    self._on_high_watermark(self.tp)
    return True


def _expand_isr_before_caught_up(self: Partition, replica: Any) -> None:
    """Any fetching follower joins the ISR, caught up to the HW or not."""
    state = self.isr_state
    if state.is_inflight or replica.broker_id in state.isr or replica.broker_id not in self.assigned_replicas:
        return
    self._propose_isr(state.isr + (replica.broker_id,), expand=True)


def _hw_counts_the_committed_isr(self: Partition) -> bool:
    """The HW waits for the committed ISR only: a replica whose join is still being
    written (PendingExpand) counts only while caught up, as any non-member does."""
    if self.role is not Role.LEADER:
        return False
    log = self.log
    hw = log.high_watermark
    new_hw = log.log_end_offset
    if new_hw <= hw:
        return False
    now = self._clock.now_ms()
    for r in self.remote_replicas.values():
        leo = r.log_end_offset
        if leo < new_hw and (r.broker_id in self.isr_state.isr or r.is_caught_up(now, self._lag_max_ms)):
            if leo <= hw:
                return False
            new_hw = leo
    if log.maybe_increment_high_watermark(new_hw) is None:
        return False
    self._on_high_watermark(self.tp)
    return True


def _expand_isr_ignoring_the_epoch_start(self: Partition, replica: Any) -> None:
    """A follower joins the ISR once it reaches the HW, wherever the leader's epoch began."""
    state = self.isr_state
    if state.is_inflight or replica.broker_id in state.isr or replica.broker_id not in self.assigned_replicas:
        return
    if replica.log_end_offset >= self.log.high_watermark:
        self._propose_isr(state.isr + (replica.broker_id,), expand=True)


def _unclean_always(assigned: Any, current: Any, live: Any, unclean_enabled: bool) -> Any:
    """The offline selector ignores unclean.leader.election.enable."""
    return _offline(assigned, current, live, True)


def _epoch_not_bumped(self: LeaderAndIsr, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
    """An election keeps the leader epoch it replaces."""
    return LeaderAndIsr(leader, self.leader_epoch, tuple(isr), self.zk_version, self.controller_epoch)


def _stale_controller_applied(self: ReplicaManager, epoch: int) -> bool:
    """The broker remembers the newest controller epoch but never refuses an older one."""
    self.controller_epoch = max(self.controller_epoch, epoch)
    return False


def _epoch_end_is_the_leo(self: Partition, epoch: int) -> tuple[int, int]:
    """OffsetsForLeaderEpoch answers every epoch with the leader's LEO: nobody truncates."""
    return epoch, self.log.log_end_offset


def _consumer_reads_uncommitted(self: ReplicaManager, req: Any, fp: Any, is_follower: bool, budget: int) -> Any:
    """The broker ignores a consumer's isolation level and serves up to the LEO."""
    if not is_follower:
        req = dataclasses.replace(req, isolation="uncommitted")
    return _read_partition(self, req, fp, is_follower, budget)


def _preferred_outside_isr(assigned: Any, current: Any, live: Any) -> Any:
    """A preferred election moves leadership to the preferred replica, in the ISR or not."""
    pref = assigned[0]
    if current.leader != pref and pref in live and pref not in current.isr:
        return Election(current.with_leader(pref, current.isr + (pref,)), tuple(r for r in assigned if r in live))
    return _preferred(assigned, current, live)


def _controlled_shutdown_outside_isr(assigned: Any, current: Any, live_or_shutting_down: Any,
                                     shutting_down: Any) -> Any:
    """A controlled shutdown hands leadership to the first live replica, in the ISR or not."""
    isr = tuple(r for r in current.isr if r not in shutting_down)
    for r in assigned:
        if r in live_or_shutting_down and r not in shutting_down:
            return Election(current.with_leader(r, isr if r in isr else isr + (r,)),
                            tuple(b for b in assigned if b in live_or_shutting_down))
    return _controlled_shutdown(assigned, current, live_or_shutting_down, shutting_down)


def _isr_write_unconditional(self: Broker, request: Any, on_response: Any, proposer: Any) -> None:
    """A leader's ISR change overwrites whatever state the store holds (no version check)."""
    zk = self.zk
    if zk is None:
        return _apply_alter_isr(self, request, on_response, proposer)
    conditional = zk.update_partition_states

    def overwrite(states: Any) -> Any:
        current = {}
        for tp, state in states.items():
            try:
                _data, stat = zk.session.get(layout.partition_state_path(tp.topic, tp.partition))
            except StoreError:  # unreachable: left as it is, the write reports the error
                current[tp] = state
            else:
                current[tp] = dataclasses.replace(state, zk_version=stat.version)
        return conditional(current)

    zk.update_partition_states = overwrite
    try:
        _apply_alter_isr(self, request, on_response, proposer)
    finally:
        del zk.update_partition_states


def _controller_epoch_not_bumped(self: KafkaZkClient, broker_id: int) -> Any:
    """A new controller registers under its predecessor's epoch."""
    current = self.get_controller_epoch()
    if current is None:
        return _register_controller(self, broker_id)
    ops = [Op.create(layout.CONTROLLER, layout.encode_controller(broker_id, self.clock.now_ms()), ephemeral=True),
           Op.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(current[0]), current[1])]
    try:
        results = self.session.multi(ops)
    except NodeExists:
        return None
    return current[0], results[1].version


def _follower_append_keeps_no_epochs(self: Log, data: Any, run: Any, restamp_epoch: int | None) -> Any:
    """A follower's append does not record the leader epochs its batches start (the
    epoch cache a later truncation asks)."""
    now = self._clock.now_ms()
    base, last = run.base_offset, run.last_offset
    seg = self._segment_for(len(data), base, last, now)
    append_time = now if restamp_epoch is not None and self._log_append_time else None
    seg.append_run(data, run, restamp_epoch, append_time)
    max_ts = append_time if append_time is not None else run.max_timestamp
    return self._appended(base, last, max_ts, last - base + 1, run.count, len(data), restamp_epoch, now,
                          -1 if append_time is None else append_time)


def _hw_checkpoint_writes_the_leo(self: ReplicaManager) -> None:
    """The HW checkpoint records each log's end, not its HW."""
    hws = {tp: 0 for tp in self._unopened if tp not in self._checkpointed_hw}
    hws.update((tp, p.log_end_offset) for tp, p in self.partitions.items())
    self._checkpointed_hw = replica_manager._write_over(self._hw_checkpoint, self._checkpointed_hw, hws)


def _epoch_end_one_too_far(self: LeaderEpochCache, epoch: int) -> tuple[int, int]:
    """An earlier epoch's end is answered one offset too far: a truncating follower keeps
    the first offset it should have dropped."""
    found, end = _end_offset_for(self, epoch)
    if found >= 0 and end >= 0 and epoch != self.latest_epoch:
        return found, end + 1
    return found, end


def _produce_on_a_follower(self: Partition, records: Any, required_acks: int) -> Any:
    """A produce that reaches a deposed leader is appended anyway (its acks=all answer
    still fails: only the append is wrong)."""
    info = self.log.append_batches_as_leader(records, self.leader_epoch)
    if self.role is Role.LEADER:
        self.maybe_increment_leader_hw()
    return info


def _enough_replicas_without_min_isr(self: Partition, required_offset: int) -> tuple[int, int]:
    """acks=all completes once the HW passes the write, however small the ISR."""
    if self.role is not Role.LEADER:
        return True, NotLeaderOrFollower.code
    return (True, NONE) if self.log.high_watermark >= required_offset else (False, NONE)


def _append_without_min_isr(self: Partition, records: Any, required_acks: int) -> Any:
    """The leader appends acks=all writes however small its ISR."""
    if self.role is not Role.LEADER:
        raise NotLeaderOrFollower(f"{self.tp}: not the leader")
    info = self.log.append_batches_as_leader(records, self.leader_epoch)
    self.maybe_increment_leader_hw()
    return info


def _retention_ignores_the_hw(self: Log, now_ms: int | None = None) -> int:
    """Retention deletes old segments whether or not they are committed."""
    hw = self._hw
    self._hw = self._leo  # the bound retention respects, lifted
    try:
        return _delete_old_segments(self, now_ms)
    finally:
        self._hw = max(hw, self._log_start)


def _hw_reset_on_a_new_epoch(self: Partition, state: Any) -> bool:
    """A leader taking a new epoch starts its HW over from its log start, for its
    followers' fetches to raise again: a re-elected leader's HW falls."""
    if state.leader_epoch != self.leader_epoch:
        self.log.update_high_watermark(self.log.log_start_offset)
    return _make_leader(self, state)


def _controller_epoch_kept_on_re_election(self: KafkaZkClient, expected_version: int | None) -> Any:
    """A controller re-elected after losing the store for a while keeps the epoch it had."""
    if expected_version is None:
        return _increment_controller_epoch(self, None)
    data, stat = self.session.get(layout.CONTROLLER_EPOCH)
    return layout.decode_controller_epoch(data), stat.version


def _recovery_without_crcs(buf: Any, check_crc: bool = False, check_records: bool = False) -> Any:
    """Recovery frames a segment by its headers only: a torn batch whose header survived
    is kept, its damaged bytes under the CRC of the intact batch."""
    return _frame_batches(buf, check_crc=False, check_records=check_records)


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    target: tuple[Any, str]
    bug: Callable[..., Any]
    scenario: str
    found_at: int  # the first seed that finds it, 1.. (the test runs them all, in order)
    invariant: Invariant
    until_ms: int | None = 12_000
    strategy: str = "leader-epoch"
    also: tuple[tuple[Any, str, Callable[..., Any]], ...] = ()  # further functions the same bug replaces
    acks: str | None = None  # the producers' acks, where not the scenario's


MUTANTS = [
    Mutant("min-isr-not-enforced", (Partition, "check_enough_replicas_reach_offset"),
           _enough_replicas_without_min_isr, "random-chaos", 1, Invariant.ACKED_WRITE_LOST,
           also=((Partition, "append_records_to_leader", _append_without_min_isr),)),
    Mutant("hw-ignores-followers", (Partition, "maybe_increment_leader_hw"), _hw_ignores_followers,
           "random-chaos", 1, Invariant.REPLICA_DIVERGENCE),
    Mutant("acks-all-waits-for-nothing", (Partition, "check_enough_replicas_reach_offset"),
           lambda self, offset: (True, 0), "random-chaos", 1, Invariant.ACKED_WRITE_LOST),
    Mutant("isr-expands-before-caught-up", (Partition, "maybe_expand_isr"), _expand_isr_before_caught_up,
           "random-chaos", 26, Invariant.REPLICA_DIVERGENCE),
    # Each needs a scenario of its own: 0 in 50 (the second: 300) random-chaos, 100 swarm,
    # 60 control-plane-chaos and 100 slow-follower seeds (docs/simulator.md).
    Mutant("hw-ignores-a-joining-follower", (Partition, "maybe_increment_leader_hw"),
           _hw_counts_the_committed_isr, "isr-join-leader-loss", 1, Invariant.ACKED_WRITE_LOST,
           until_ms=None),
    Mutant("isr-expands-below-the-epoch-start", (Partition, "maybe_expand_isr"),
           _expand_isr_ignoring_the_epoch_start, "isr-join-new-leader", 2, Invariant.ACKED_WRITE_LOST,
           until_ms=None),
    # Seed 13 found it as an acked write lost until the checker stopped excusing a disallowed
    # election's loss as the winner's own power loss; seed 6 since, where that winner, back
    # from its power loss, commits over a consumed record.
    Mutant("unclean-election-always-allowed", (leader_selectors, "offline"), _unclean_always,
           "random-chaos", 6, Invariant.CONSUMED_RECORD_VANISHED),
    Mutant("preferred-leader-outside-isr", (leader_selectors, "preferred"), _preferred_outside_isr,
           "random-chaos", 39, Invariant.ACKED_WRITE_LOST),
    # Seed 31 found it as divergence until a departed sender stopped getting refusals (one
    # message fewer moves the network's draws); seed 76 since, by a consumed record lost.
    Mutant("controlled-shutdown-leader-outside-isr", (leader_selectors, "controlled_shutdown"),
           _controlled_shutdown_outside_isr, "random-chaos", 76, Invariant.CONSUMED_RECORD_VANISHED),
    Mutant("consumer-reads-uncommitted", (ReplicaManager, "_read_partition"), _consumer_reads_uncommitted,
           "random-chaos", 1, Invariant.CONSUMED_RECORD_VANISHED),
    Mutant("epoch-end-offset-is-the-leo", (Partition, "end_offset_for_epoch"), _epoch_end_is_the_leo,
           "random-chaos", 4, Invariant.REPLICA_DIVERGENCE),
    Mutant("epoch-end-offset-one-too-far", (LeaderEpochCache, "end_offset_for"), _epoch_end_one_too_far,
           "kip101-divergence", 1, Invariant.REPLICA_DIVERGENCE, until_ms=None),
    Mutant("produce-appended-on-a-follower", (Partition, "append_records_to_leader"), _produce_on_a_follower,
           "random-chaos", 85, Invariant.REPLICA_DIVERGENCE),
    Mutant("follower-append-keeps-no-epochs", (Log, "_append_run"), _follower_append_keeps_no_epochs,
           "random-chaos", 14, Invariant.REPLICA_DIVERGENCE),
    # Under leader-epoch truncation a too-high checkpointed HW is truncated away before it
    # matters (0 in 60 seeds); under the seeds' HW truncation it is the truncation point.
    Mutant("hw-checkpoint-writes-the-leo", (ReplicaManager, "checkpoint_high_watermarks"),
           _hw_checkpoint_writes_the_leo, "random-chaos", 15, Invariant.REPLICA_DIVERGENCE,
           strategy="high-watermark"),
    Mutant("leader-epoch-not-bumped", (LeaderAndIsr, "with_leader"), _epoch_not_bumped,
           "random-chaos", 1, Invariant.TWO_LEADERS_ONE_EPOCH),
    Mutant("hw-without-the-monotonic-guard", (Partition, "maybe_increment_leader_hw"),
           _hw_without_the_monotonic_guard, "random-chaos", 1, Invariant.LEADER_HW_BACKWARDS),
    # Judged across a re-election too: within one epoch alone, 0 in 50 random-chaos seeds.
    Mutant("hw-reset-on-a-new-epoch", (Partition, "make_leader"), _hw_reset_on_a_new_epoch,
           "random-chaos", 1, Invariant.LEADER_HW_BACKWARDS),
    Mutant("controller-epoch-not-bumped", (KafkaZkClient, "register_controller_and_increment_epoch"),
           _controller_epoch_not_bumped, "random-chaos", 1, Invariant.CONTROLLER_EPOCH),
    # Terms noted as they send, not only at sweeps: the re-elected term lasts less than
    # one sweep (0 in 60 control-plane-chaos seeds before).  Seed 5 found it until leaderless
    # OfflineReplica transitions came to send LeaderAndIsr; seed 38 until a departed sender
    # stopped getting refusals; seed 110 until the chaos planner restarted a broker whose
    # controlled shutdown outlasted the restart's draw (the 184th review); seed 138 since.
    Mutant("controller-re-elected-keeps-its-epoch", (KafkaZkClient, "increment_controller_epoch"),
           _controller_epoch_kept_on_re_election, "control-plane-chaos", 138, Invariant.CONTROLLER_EPOCH,
           until_ms=None),
    # Seed 2 keeps a torn batch whose header survived, found only by its bytes
    # (test_a_torn_batch_kept_by_recovery_is_found_by_its_bytes).
    Mutant("recovery-keeps-torn-batches", (log_segment, "frame_batches"), _recovery_without_crcs,
           "random-chaos", 2, Invariant.REPLICA_DIVERGENCE),
    Mutant("isr-write-unconditional", (Broker, "_apply_alter_isr"), _isr_write_unconditional,
           "random-chaos", 13, Invariant.LIVENESS),
    Mutant("stale-controller-requests-applied", (ReplicaManager, "_stale_controller"), _stale_controller_applied,
           "control-plane-chaos", 41, Invariant.CONTROLLER_EPOCH, until_ms=None),
    # Judged against the epochs the world saw the broker accept: against its own record
    # alone (which this bug never writes) nothing ever looked stale.
    Mutant("controller-epoch-neither-checked-nor-recorded", (ReplicaManager, "_stale_controller"),
           lambda self, epoch: False, "control-plane-chaos", 2, Invariant.CONTROLLER_EPOCH, until_ms=None),
    # With acks=all producers the HW trails the log end by a batch or two and retention
    # never reaches above it (0 in 100 retention-chaos seeds); acks=1 lets the log run ahead.
    Mutant("retention-ignores-the-hw", (Log, "delete_old_segments"), _retention_ignores_the_hw,
           "retention-chaos", 1, Invariant.ACKED_WRITE_LOST, until_ms=None, acks="1"),
]


def _scenario(m: Mutant) -> Any:
    sc = scenarios.load(m.scenario).with_config(**{"replica.truncation.strategy": m.strategy})
    if m.acks is not None:
        sc = replace(sc, workload=replace(sc.workload, acks=m.acks))
    return sc if m.until_ms is None else replace(sc, until_ms=m.until_ms)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_the_simulator_finds_a_planted_bug(mutant: Mutant, monkeypatch: pytest.MonkeyPatch) -> None:
    sc = _scenario(mutant)
    monkeypatch.setattr(*mutant.target, mutant.bug)
    for owner, name, bug in mutant.also:
        monkeypatch.setattr(owner, name, bug)
    first = None
    for seed in range(1, mutant.found_at + 1):
        r = World(sc, seed, keep_history=False).run()
        if not r.ok:
            first = seed, r.violation
            break
    assert first is not None, f"{mutant.name}: no violation in seeds 1..{mutant.found_at}"
    seed, violation = first
    assert violation.invariant is mutant.invariant, violation.describe()
    monkeypatch.undo()
    r = World(sc, seed, keep_history=False).run()
    assert r.ok, r.violation and r.violation.describe()


def test_a_torn_batch_kept_by_recovery_is_found_by_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """At seed 2 recovery keeps torn batches whose headers survived, their stored CRCs
    those of the intact batches: compared by the CRCs in their headers they pass."""
    monkeypatch.setattr(log_segment, "frame_batches", _recovery_without_crcs)
    sc = replace(scenarios.load("random-chaos").with_config(**{"replica.truncation.strategy": "leader-epoch"}),
                 until_ms=12_000)
    r = World(sc, 2, keep_history=False).run()
    assert r.violation is not None and r.violation.invariant is Invariant.REPLICA_DIVERGENCE
    assert "do not match" in r.violation.message


def test_every_invariant_is_reached_by_a_planted_bug() -> None:
    six = {i for i in Invariant if i.value[0].isdigit()}
    assert six <= {m.invariant for m in MUTANTS}
