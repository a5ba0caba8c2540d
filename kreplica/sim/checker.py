"""The invariant checker: the six safety properties of issue 5, after every step.

Theory of operation (TigerBeetle VOPR's state checker).  The checker keeps one
*canonical committed history* per partition: the batch fingerprints (base, last,
epoch, CRC -- see :mod:`log_view`) that a leader held below its high watermark.
It only ever grows from the current leader.  After every simulator step the
world hands it the replicas that step touched; the checker reads only what is
new in each (a verified prefix per replica, reset when the replica truncates)
and compares:

1. A leader answers an acks=all write only while its ISR holds at least
   ``min.insync.replicas`` (the promise the rest of this invariant rests on), and
   an acked (acks=all) write must stay at its offset: a new leader whose log
   ends before it has lost it, and so has a leader whose committed data at that
   offset differs.  Losses caused by an unclean election or by the elected
   replica's own power loss (unflushed bytes dropped by a crash) are outside
   the protocol's promise: they are *counted*, attributed, and the canonical
   history is superseded from where the new leader's log leaves it: its log end,
   or the first committed batch it holds differently (an unclean leader may never
   have truncated a deposed epoch's batches; a leader back from a power loss may
   already have appended producers' batches where it dropped committed ones).
   A broker back from a power loss is always re-elected in a new epoch (its
   registration says it shut down uncleanly, see controller.py), so one still
   leading its old epoch gets no excuse: its log is checked against the committed
   history like any leader's.
   What a superseding election replaced stays excused for a replica still on an
   older epoch (a deposed leader, alone in its ISR after an unclean election,
   may go on committing and acking there until it is told); once it is on the
   new epoch it is judged from the superseded offset on again.
2. What a consumer read (below the HW it was served with) must stay committed.
3. Every follower that has finished truncating holds, below its HW, exactly the
   canonical batches (same offsets and batch CRC, which covers every record byte;
   the leader epoch in the header is not covered, so a retry re-appended under a
   newer epoch counts as the same batch).  The CRC is checked against the bytes,
   not only read from the header: a damaged batch keeps its intact CRC there.
4. One leader per (partition, leader epoch).
5. A leader's HW never goes backwards: within its leadership, nor when it is
   re-elected (a new epoch, the same broker) without having truncated since.
6. The controller epoch in the store never goes backwards, no two controller
   terms share an epoch, and a broker that receives a request from an older
   controller epoch changes nothing.

Retention is not a loss: a replica's log start moves up when it deletes old
segments, or when a follower adopts its leader's log start (KIP-107); the world
records each move, and a replica is judged only from its own log start and the
highest log start a current leader has had on.

The first violation is kept with the last events touching its partition; the
world stops the run there.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..replica.fetcher import FetchPhase
from ..replica.partition import Role
from .history import Event, History
from .log_view import DAMAGED, Fingerprint, read_fingerprints

# Module constants for the per-event check: Enum class attribute lookups are slow in 3.11.
_LEADER, _FOLLOWER, _FETCHING = Role.LEADER, Role.FOLLOWER, FetchPhase.FETCHING


class Invariant(enum.Enum):
    ACKED_WRITE_LOST = "1-acked-write-lost"
    CONSUMED_RECORD_VANISHED = "2-consumed-record-vanished"
    REPLICA_DIVERGENCE = "3-replica-divergence"
    TWO_LEADERS_ONE_EPOCH = "4-two-leaders-one-epoch"
    LEADER_HW_BACKWARDS = "5-leader-hw-backwards"
    CONTROLLER_EPOCH = "6-controller-epoch"
    LIVENESS = "liveness"
    # Not one of the six: the system under test raised out of a callback (a crash bug).
    UNHANDLED_EXCEPTION = "unhandled-exception"


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: Invariant
    time_ms: int
    tp: str | None
    broker: int | None
    message: str
    trace: tuple[Event, ...] = ()

    def describe(self) -> str:
        lines = [f"VIOLATION {self.invariant.value} at t={self.time_ms}ms "
                 f"tp={self.tp} broker={self.broker}: {self.message}",
                 (f"last events touching {self.tp}, with the faults among them ({len(self.trace)}):"
                  if self.tp is not None else f"last {len(self.trace)} events:")]
        lines += ["  " + e.to_json() for e in self.trace]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class CountedLoss:
    """An acknowledged write lost for a reason the protocol does not promise to survive."""

    tp: str
    offset: int
    cause: str  # "unclean-election" or "power-loss"
    leader: int
    leader_epoch: int
    time_ms: int


@dataclass(slots=True)
class Ack:
    last: int
    crc: int
    time_ms: int
    isr_size: int


@dataclass(slots=True)
class PartitionModel:
    canon: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # base -> last, epoch, crc
    canon_end: int = 0
    acked: dict[int, Ack] = field(default_factory=dict)
    consumed: dict[int, int] = field(default_factory=dict)  # base -> crc
    leaders: dict[int, int] = field(default_factory=dict)  # leader epoch -> broker
    epoch: int = -1
    leader: int = -1
    isr: tuple[int, ...] = ()
    # (broker, first dropped offset, time) for every power-loss crash
    drops: list[tuple[int, int, int]] = field(default_factory=list)
    # (broker, time of its power loss) -> when this replica was first seen again after it
    # restarted: until then its leader counts it at its LEO from before the crash
    back: dict[tuple[int, int], int] = field(default_factory=dict)
    committed_at: dict[int, int] = field(default_factory=dict)  # canon base -> when it was committed
    # (epoch of the election that superseded, from offset, cause) for every attributed loss
    superseded: list[tuple[int, int, str]] = field(default_factory=list)
    # The highest log start a current leader has had: below it the history is expired
    # (retention), and a follower's leftovers there are discarded by its next fetch.
    expired_below: int = 0
    # Leader epochs first seen served only after a newer election (see Checker._on_late_leader).
    late: set[int] = field(default_factory=set)
    # (epoch, ISR) the store showed shrinking in epochs newer than any served (on_store_state).
    pending_isrs: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)

    def superseded_for(self, epoch: int, unclean_only: bool = False) -> tuple[int, str] | None:
        """(from offset, cause) of the history that elections after ``epoch`` replaced: a
        replica still on ``epoch`` (a deposed leader or its follower, not yet told) holds it
        legitimately there. Only after an unclean election may a deposed leader go on
        committing and acking it (alone in its ISR); after a clean one the ISR write that
        would let it is fenced, so such an ack stays a finding (``unclean_only``)."""
        later = [(start, cause) for e, start, cause in self.superseded
                 if e > epoch and (not unclean_only or cause == "unclean-election")]
        return min(later) if later else None


@dataclass(slots=True)
class ReplicaView:
    partition: Any
    verified: int = 0  # offsets below this matched the canonical history
    hw: int = -1
    epoch: int = -1
    # Seen leading last time, and not truncated since: a re-election keeps its HW.
    led: bool = False


def tp_name(tp: Any) -> str:
    return f"{tp.topic}-{tp.partition}"


def _shrinks(isr: Sequence[int], of: Sequence[int]) -> bool:
    """Whether ``isr`` is what ``of`` may become without an election outside it (an empty
    ISR, not known yet, may become anything)."""
    return not of or set(isr) <= set(of)


def _first_difference(p: Any, m: PartitionModel, start: int, end: int) -> int | None:
    """The base of the first committed batch in [start, end) that the replica's log holds
    differently (or not at all, batched otherwise); None when it holds them all."""
    for base, last, _epoch, crc in read_fingerprints(p.log, start, end):
        known = m.canon.get(base)
        if known is None or (known[0], known[2]) != (last, crc):
            return max((b for b in m.canon if b <= base), default=base)
    return None


def _first_ack_not_held(p: Any, m: PartitionModel, start: int, end: int) -> int | None:
    """The first acked write starting in [start, end) that the replica does not hold as
    acked: acks the checker has not yet seen committed, which the committed history cannot
    compare (an ack may reach it before the step that committed its batch is judged)."""
    for base in sorted(b for b in m.acked if start <= b < end):
        ack = m.acked[base]
        held = read_fingerprints(p.log, base, base + 1)
        if not held or (held[0][0], held[0][1], held[0][3]) != (base, ack.last, ack.crc):
            return base
    return None


class Checker:
    """``unclean_default`` is the cluster's ``unclean.leader.election.enable``; a topic's
    override is reported with :meth:`on_topic_config`.  An election outside the ISR
    excuses what it loses only for a topic where unclean elections were enabled at some
    point of the run (a controller may still act on a setting it read before a change):
    elsewhere it is the controller's bug, and its losses are violations."""

    def __init__(self, history: History, trace_events: int = 30, unclean_default: bool = True,
                 min_isr_default: int = 1) -> None:
        self.history = history
        self.trace_events = trace_events
        self.unclean_default = unclean_default
        self.min_isr_default = min_isr_default
        # topic -> the lowest min.insync.replicas it was ever set to (overrides only)
        self._min_isr_floor: dict[str, int] = {}
        # topic -> whether its own unclean.leader.election.enable was ever true (overrides only)
        self._unclean_topics: dict[str, bool] = {}
        self.models: dict[str, PartitionModel] = {}
        self.views: dict[tuple[int, str], ReplicaView] = {}
        self.violation: Violation | None = None
        self.losses: list[CountedLoss] = []
        self.unclean_elections = 0
        self.elections: list[tuple[int, str, int, int]] = []  # time, tp, leader, epoch
        self.restarts: dict[int, list[int]] = {}  # broker -> the times it started again after a crash
        self.controller_epoch = -1
        self.term_epochs: dict[int, object] = {}  # controller epoch -> the term that took it
        self.acked_writes = 0
        # Batches consumers read that an attributed loss then removed (invariant 2's
        # counterpart of a counted lost ack: never silent).
        self.superseded_reads: list[CountedLoss] = []
        self.writes_completed = 0
        self.consumed_batches = 0
        self.checks = 0
        self._clock_ms = 0

    # ---- helpers ------------------------------------------------------------------------
    def _now(self) -> int:
        return self._clock_ms

    def set_time(self, now_ms: int) -> None:
        self._clock_ms = now_ms

    def model(self, tp: str) -> PartitionModel:
        m = self.models.get(tp)
        if m is None:
            m = self.models[tp] = PartitionModel()
        return m

    def fail(self, invariant: Invariant, tp: str | None, broker: int | None, message: str) -> None:
        if self.violation is not None:
            return
        self.history.record(self._now(), "violation", broker, tp, invariant=invariant.value, message=message)
        self.violation = Violation(invariant, self._now(), tp, broker, message,
                                   tuple(self.history.tail(tp, self.trace_events)))

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's history ends; a re-created one starts afresh."""
        prefix = topic + "-"
        for tp in [t for t in self.models if t.startswith(prefix) and t[len(prefix):].isdigit()]:
            del self.models[tp]
        for key in [k for k in self.views if k[1].startswith(prefix) and k[1][len(prefix):].isdigit()]:
            del self.views[key]
        # Its overrides go with it: deleting a topic removes /config/topics/<topic>, and a
        # re-created one runs with what its creation wrote (the world's creates write none).
        self._unclean_topics.pop(topic, None)
        self._min_isr_floor.pop(topic, None)

    def on_topic_config(self, topic: str, key: str, value: str) -> None:
        """An admin set a topic's config (asked for: the change may yet be refused)."""
        if key == "unclean.leader.election.enable":
            ever = self._unclean_topics.get(topic, self.unclean_default)
            self._unclean_topics[topic] = ever or value.lower() == "true"
        elif key == "min.insync.replicas":
            self._min_isr_floor[topic] = min(self._min_isr_floor.get(topic, self.min_isr_default), int(value))

    def unclean_allowed(self, tp: str) -> bool:
        """Whether an unclean election of ``tp`` could have been allowed at any point so far."""
        return self._unclean_topics.get(tp.rpartition("-")[0], self.unclean_default)

    def on_acks_all_answered(self, broker: int, tp: str, base: int, isr: tuple[int, ...]) -> None:
        """A leader answers an acks=all write without error, its ISR being ``isr`` (the
        largest it may count, a proposed shrink not yet written).  Below the lowest
        ``min.insync.replicas`` the topic ever had, that answer breaks acks=all's promise
        (Kafka's NotEnoughReplicas / NotEnoughReplicasAfterAppend)."""
        floor = self._min_isr_floor.get(tp.rpartition("-")[0], self.min_isr_default)
        if len(isr) < floor:
            self.fail(Invariant.ACKED_WRITE_LOST, tp, broker,
                      f"leader {broker} acked an acks=all write at offset {base} with ISR {list(isr)}, "
                      f"below min.insync.replicas={floor}")

    # ---- inputs from the workload and the faults ------------------------------------------
    def on_sent_unacknowledged(self) -> None:
        """An acks=0 write: done once sent, as its producer sees it (counted for throughput)."""
        self.writes_completed += 1

    def on_ack(self, tp: str, base: int, last: int, crc: int, acks: int, isr_size: int,
               leader: int | None = None, probe: bool = False) -> None:
        """An acknowledged write.  ``probe``: the liveness probe's, checked like the
        workload's but not counted in its throughput."""
        if not probe:
            self.writes_completed += 1
        if acks != -1:  # only acks=all carries the promise invariant 1 checks
            return
        m = self.model(tp)
        if not probe:
            self.acked_writes += 1
        gone = self._superseded_under(m, leader)
        if gone is not None and base >= gone[0]:
            # A deposed leader, not yet told, acked (its ISR alone meets min.insync.replicas)
            # where a later election already superseded its history: counted with that
            # election's cause, as if the ack had come just before it.
            self.losses.append(CountedLoss(tp, base, gone[1], m.leader, m.epoch, self._now()))
            self.history.record(self._now(), "counted_loss", leader, tp, offset=base, cause=gone[1],
                                epoch=m.epoch, deposed_leader=True)
            return
        known = m.canon.get(base)
        if known is not None and (known[0], known[2]) != (last, crc):
            self.fail(Invariant.ACKED_WRITE_LOST, tp, None,
                      f"write acked at offset {base} but the committed log holds another batch there")
            return
        # An ack may reach the checker before the step that committed its batch is judged:
        # an earlier ack of another batch at this offset is a write lost with no election
        # counting it (that would have cut it), and replacing it would let the new batch's
        # commit pass.
        before = m.acked.get(base)
        if before is not None and (before.last, before.crc) != (last, crc):
            self.fail(Invariant.ACKED_WRITE_LOST, tp, leader,
                      f"write acked at offset {base} where another acked write, not yet seen committed, lies")
            return
        m.acked[base] = Ack(last, crc, self._now(), isr_size)

    @staticmethod
    def _superseded_under(m: PartitionModel, leader: int | None,
                          unclean_only: bool = True) -> tuple[int, str] | None:
        """(from offset, cause) of what later elections (unclean ones only, by default)
        superseded of the history ``leader`` (not the newest leader) served in the last
        epoch it was seen leading."""
        if leader is None or leader == m.leader or not m.superseded:
            return None
        led = [e for e, b in m.leaders.items() if b == leader]
        return m.superseded_for(max(led), unclean_only=unclean_only) if led else None

    def on_consume(self, tp: str, batches: list[Fingerprint], high_watermark: int, leader: int) -> None:
        m = self.model(tp)
        # A deposed leader not yet told serves what it had committed.  Where a later
        # election superseded that history, by any cause, a read of it is that loss seen
        # late, counted with it: the zombie cannot commit anew there (after a clean
        # election its ISR shrink is fenced), so what it serves was committed before.
        # (Acks are stricter, on_ack: after a clean election a zombie's ack is a finding.)
        gone = self._superseded_under(m, leader, unclean_only=False)
        for base, last, _epoch, crc in batches:
            self.consumed_batches += 1
            if last >= high_watermark:
                self.fail(Invariant.CONSUMED_RECORD_VANISHED, tp, leader,
                          f"consumer got offsets {base}..{last} beyond the HW {high_watermark}")
                return
            if gone is not None and base >= gone[0]:
                # Attributed as on_ack attributes a deposed leader's ack: to the newest
                # leader and its epoch, as if read just before the election.
                self.superseded_reads.append(CountedLoss(tp, base, gone[1], m.leader, m.epoch, self._now()))
                continue
            known = m.canon.get(base)
            if known is not None and (known[0], known[2]) != (last, crc):
                self.fail(Invariant.CONSUMED_RECORD_VANISHED, tp, leader,
                          f"consumer read a batch at {base} that is not the committed one")
                return
            m.consumed[base] = crc

    def on_power_loss(self, broker: int, tp: str, first_dropped: int) -> None:
        self.model(tp).drops.append((broker, first_dropped, self._now()))

    def on_restart(self, broker: int) -> None:
        self.restarts.setdefault(broker, []).append(self._now())

    def on_retention(self, broker: int, tp: str, hw: int, start: int) -> None:
        """Retention moved a replica's log start to ``start``; its HW was ``hw``.

        Retention may delete only what is committed: the checker excuses every batch
        below a log start as expired, so a deletion above the HW would make a write
        acknowledged later vanish under that excuse (a planted bug that went unfound
        over 100 retention-chaos seeds until this rule)."""
        if start > hw:
            self.fail(Invariant.ACKED_WRITE_LOST, tp, broker,
                      f"retention moved the log start to {start}, above the HW {hw}: "
                      f"batches [{hw}, {start}) were deleted before they were committed")

    def on_truncate(self, broker: int, tp: str, offset: int) -> None:
        view = self.views.get((broker, tp))
        if view is not None:
            view.led = False
            if view.verified > offset:
                view.verified = offset

    def on_store_state(self, tp: str, leader: int, leader_epoch: int, isr: tuple[int, ...]) -> None:
        """The controller's view: an ISR it shrank while the partition had no live leader
        is what the next election must be judged against (clean or unclean).

        Without a leader an ISR only shrinks, except through an unclean election the
        checker never saw served: the controller chose a replica it still counted live
        (a crashed broker whose session had not expired), which never led, and then
        dropped the leader again, leaving that replica alone in the ISR.  Such an ISR is
        not adopted, so the replica's next election is judged against the ISR that last
        held the committed history, and counts as the unclean election it is (swarm
        config-churn seed 10780)."""
        m = self.models.get(tp)
        if m is None:
            return
        if leader == m.leader and leader_epoch == m.epoch:
            m.isr = tuple(isr)
        elif leader < 0 and _shrinks(isr, m.isr):
            m.isr = tuple(isr)
        elif leader_epoch > m.epoch:
            # A newer epoch no one has served yet: an ISR the controller shrank (a dead
            # leader's successor, a finished reassignment) is what elections after that
            # epoch are judged against (swarm control-plane-chaos seed 2990), not one of
            # that epoch or before (retention-chaos seed 217: a held preferred election
            # served after a later shrink was clean).
            known = m.pending_isrs[-1] if m.pending_isrs else (m.epoch, m.isr)
            if leader_epoch > known[0] and _shrinks(isr, known[1]):
                m.pending_isrs.append((leader_epoch, tuple(isr)))

    def on_controller_epoch(self, epoch: int) -> None:
        if epoch < self.controller_epoch:
            self.fail(Invariant.CONTROLLER_EPOCH, None, None,
                      f"controller epoch went back from {self.controller_epoch} to {epoch}")
        self.controller_epoch = max(self.controller_epoch, epoch)

    def on_controller_term(self, term: object, broker: int, epoch: int) -> None:
        """A controller seen acting in a term (``term`` names it: broker, incarnation,
        failover).  Each term must take an epoch of its own, or brokers cannot tell a
        deposed controller's requests from its successor's."""
        holder = self.term_epochs.setdefault(epoch, term)
        if holder != term:
            self.fail(Invariant.CONTROLLER_EPOCH, None, broker,
                      f"controller term {term} took epoch {epoch}, already taken by term {holder}")

    def on_stale_request_applied(self, broker: int, tp: str | None, request_epoch: int, broker_epoch: int) -> None:
        self.fail(Invariant.CONTROLLER_EPOCH, tp, broker,
                  f"broker applied a request of controller epoch {request_epoch} after seeing {broker_epoch}")

    # ---- the per-step check --------------------------------------------------------------------
    def observe(self, broker: int, tp: str, p: Any, fetch_phase: Any) -> None:
        """Check one replica after a step touched it."""
        self.checks += 1
        key = (broker, tp)
        view = self.views.get(key)
        if view is None or view.partition is not p:
            view = self.views[key] = ReplicaView(p)
        m = self.models.get(tp)
        if m is None:
            m = self.model(tp)
        if m.drops:
            self._note_back(m, broker)
        hw = p.log.high_watermark  # not through the partition's property: this runs ~20k times a run
        checked = hw
        epoch = p.leader_epoch
        if m.superseded and epoch < m.epoch:
            gone = m.superseded_for(epoch)
            if gone is not None:
                checked = min(hw, gone[0])
        role = p.role
        if role is _LEADER:
            self._observe_leader(broker, tp, p, m, view, hw, checked)
        elif role is _FOLLOWER and fetch_phase is _FETCHING and view.verified < checked:
            self._verify(broker, tp, p, m, view, checked, leader=False)
        view.hw = hw
        view.epoch = epoch
        view.led = role is _LEADER

    def _observe_leader(self, broker: int, tp: str, p: Any, m: PartitionModel, view: ReplicaView, hw: int,
                        checked: int) -> None:
        epoch = p.leader_epoch
        holder = m.leaders.get(epoch)
        if holder is None:
            m.leaders[epoch] = broker
            if epoch < m.epoch and broker != m.leader:
                m.late.add(epoch)
                checked = min(checked, self._on_late_leader(broker, tp, p, m, view, epoch))
        elif holder != broker:
            self.fail(Invariant.TWO_LEADERS_ONE_EPOCH, tp, broker,
                      f"brokers {holder} and {broker} both lead epoch {epoch}")
            return
        if epoch > m.epoch:
            self._on_election(broker, tp, p, m, view, epoch)
            if self.violation is not None:
                return
        elif view.epoch == epoch and hw < view.hw:
            self.fail(Invariant.LEADER_HW_BACKWARDS, tp, broker,
                      f"leader HW went back from {view.hw} to {hw} in epoch {epoch}")
            return
        if view.led and view.epoch < epoch and hw < view.hw:
            # Re-elected straight from leading (a preferred election, an ISR change the
            # controller wrote with a new epoch): nothing truncated its log, so the HW it
            # had committed stands.  Only a replica that truncated as a follower between
            # its leaderships may lead again from a lower HW.
            self.fail(Invariant.LEADER_HW_BACKWARDS, tp, broker,
                      f"leader HW went back from {view.hw} in epoch {view.epoch} to {hw} "
                      f"when re-elected in epoch {epoch}")
            return
        if epoch == m.epoch:
            m.isr = tuple(p.isr)
            start = p.log.log_start_offset
            if start > m.expired_below:
                m.expired_below = start
        if view.verified < checked:
            # Only the newest leader grows the history; a deposed one (not yet told) is checked
            # below what later elections superseded.
            self._verify(broker, tp, p, m, view, checked, leader=epoch == m.epoch)

    def _on_late_leader(self, broker: int, tp: str, p: Any, m: PartitionModel, view: ReplicaView,
                        epoch: int) -> int:
        """A leader first seen serving an epoch a newer election already ended: it was
        elected while paused, say, and is a zombie from its first step.

        Alone in its ISR it commits by itself, and what it commits from here on is not
        the committed history: a sole ISR member is the only clean choice, so the newer
        leader was elected uncleanly (in that election or one between).  The checker saw
        neither election unclean, having never seen this ISR served; the zombie's commits
        are superseded from here as that unclean election's (swarm rolling-restart seed
        2218).  With others in its ISR it cannot commit alone (its ISR shrink is fenced),
        so nothing is excused.  Returns the offset its checks now stop below.

        It may have committed before it was first seen: the held requests of a pause run
        back to back, so a LeaderAndIsr leaving it alone in the ISR commits at once what
        it appended uncommitted before its pause (swarm gc-pause-chaos seed 615), or in
        an epoch it led a moment before (seed 358).  So its commits count from its HW
        when it was last seen; for a replica never seen before (just restarted), from
        where its log enters an epoch no one was seen serving before a newer one.

        Below that HW it may also hold batches an earlier unclean election superseded,
        excused while it sat on an older epoch and never truncated: a leader deposed by
        that election, elected uncleanly again while paused.  Its commits count from the
        first committed batch it holds differently, if that is lower (swarm gc-pause-chaos
        seeds 5160 and 5773)."""
        hw = p.high_watermark
        if tuple(p.isr) != (broker,) or not self.unclean_allowed(tp):
            # Without unclean elections no newer leader could have been chosen over a
            # sole ISR member: nothing it holds differently is excused.
            return hw
        if view.hw >= 0:
            before = view.hw
        else:
            before = min([hw, *(s for e, s in p.log.leader_epoch_cache.entries if e in m.late or e not in m.leaders)])
        start = min(hw, m.canon_end, before)
        differs = _first_difference(p, m, m.expired_below, start)
        if differs is not None:
            start = differs
        self.history.record(self._now(), "late_leader", broker, tp, epoch=epoch, newest_epoch=m.epoch,
                            superseded_from=start)
        m.superseded.append((m.epoch, start, "unclean-election"))
        return start

    def _on_election(self, broker: int, tp: str, p: Any, m: PartitionModel, view: ReplicaView,
                     epoch: int) -> None:
        leo = p.log_end_offset
        prior = next((isr for e, isr in reversed(m.pending_isrs) if e < epoch), m.isr)
        unclean = bool(prior) and broker not in prior
        self.history.record(self._now(), "election", broker, tp, epoch=epoch, leo=leo,
                            isr=list(p.isr), previous_isr=list(prior), unclean=unclean)
        self.elections.append((self._now(), tp, broker, epoch))
        if unclean:
            self.unclean_elections += 1
        m.epoch, m.leader, m.isr = epoch, broker, tuple(p.isr)
        # A later epoch's ISR was kept as a shrink of the ISR known then; this election's
        # ISR may not contain it (one unclean election here, another there, both decided
        # while their winners were paused: swarm gc-pause-chaos seed 9015).  Only shrinks
        # of what is served now still stand.
        pending, known = [], m.isr
        for e, isr in m.pending_isrs:
            if e > epoch and _shrinks(isr, known):
                pending.append((e, isr))
                known = isr
        m.pending_isrs = pending
        self._settle_losses(broker, tp, p, m, view, epoch, unclean)

    def _settle_losses(self, broker: int, tp: str, p: Any, m: PartitionModel, view: ReplicaView, epoch: int,
                       unclean: bool) -> None:
        """Count and supersede the committed history a new leader no longer holds."""
        leo = p.log_end_offset
        end = self._unclean_end(p, m, leo) if unclean else self._surviving_end(broker, p, m, leo)
        lost = sorted(b for b in m.acked if m.acked[b].last >= end)
        tail = sorted(b for b in m.canon if m.canon[b][0] >= end)  # committed, now beyond what survived
        allowed = unclean and self.unclean_allowed(tp)
        if not lost and not tail:
            if allowed:
                # Nothing committed is lost yet, but the deposed leader, alone in its ISR,
                # may still commit in its old epoch beyond what was committed by now: that
                # is superseded too.  Not only beyond ``end``: the new leader's log past the
                # committed end is its own uncommitted tail, which may differ from what the
                # deposed leader commits there (swarm config-churn seed 1046).
                m.superseded.append((epoch, m.canon_end, "unclean-election"))
                # A read the checker has not yet seen committed may lie beyond ``end``: the
                # deposed leader committed it, and the new leader does not hold it.
                for base in sorted(b for b in m.consumed if b >= end):
                    self.superseded_reads.append(CountedLoss(tp, base, "unclean-election", broker, epoch,
                                                             self._now()))
                    del m.consumed[base]
            return
        first = min(lost[:1] + tail[:1])
        # An election outside the ISR where unclean elections were never enabled is the
        # controller's bug: the replica's own power loss explains what it lacks, not why
        # it was elected, so it excuses nothing there.
        cause = ("unclean-election" if allowed else None if unclean
                 else self._power_loss_cause(m, broker, first))
        if cause is None:
            if lost:
                why = (", elected outside the ISR while unclean.leader.election.enable was never "
                       "true for its topic") if unclean else ""
                self.fail(Invariant.ACKED_WRITE_LOST, tp, broker,
                          f"leader of epoch {epoch} ends at {leo} without the write acked at offset {lost[0]}"
                          + why)
            # An unacknowledged committed tail: the new leader's own commits there will
            # show the divergence (or the tail comes back before they do).
            return
        for base in lost:
            self.losses.append(CountedLoss(tp, base, cause, broker, epoch, self._now()))
            self.history.record(self._now(), "counted_loss", broker, tp, offset=base, cause=cause, epoch=epoch)
        for base in sorted(b for b in m.consumed if b >= end or (b in m.canon and m.canon[b][0] >= end)):
            self.superseded_reads.append(CountedLoss(tp, base, cause, broker, epoch, self._now()))
        self.history.record(self._now(), "superseded", broker, tp, from_offset=end, cause=cause,
                            committed_batches=len(tail))
        self._supersede(m, end)
        # Excused from the first batch cut, which may start below ``end``: a committed batch
        # straddling it goes whole, and a deposed leader's read or ack of it is that loss too.
        m.superseded.append((epoch, min(end, first), cause))
        # Every replica is judged again from there against the new history, once it is on
        # this epoch or a later one (before that, its old history is excused: observe).
        for (_b, name), other in self.views.items():
            if name == tp and other.verified > end:
                other.verified = end

    def _surviving_end(self, broker: int, p: Any, m: PartitionModel, leo: int) -> int:
        """Where the replica's pre-power-loss history ends: its LEO, or the first committed
        batch it holds differently, if it dropped that batch in a power loss after the commit.

        A replica that lost its unflushed tail and then led again (elected before anyone
        else came back) appends producers' batches (new ones and retries alike) from the
        dropped offset on: below its LEO it holds legitimate data that is not the committed
        history's, so its LEO is not where the loss starts.

        Only from the expired mark on, as for a late leader: below it the replica may hold
        what the history never did (leftovers an election superseded there), which is no
        committed batch it lost.

        Past the committed end it is compared with the acked writes the checker has not yet
        seen committed, as an unclean leader is (_unclean_end): one it dropped in its power
        loss and holds another batch in place of is where the loss starts, or it would be
        found only when the new leader commits its own batch there, as a violation.  An
        acked batch starting below the LEO and ending past it is compared too."""
        upto = min(leo, m.canon_end)
        froms = [f for b, f, _t in m.drops if b == broker and f < upto]
        start = max(min(froms), m.expired_below) if froms else upto
        differs = _first_difference(p, m, start, upto) if start < upto else None
        if differs is not None:
            return differs if self._power_loss_cause(m, broker, differs) else leo
        lacks = _first_ack_not_held(p, m, max(upto, m.expired_below), leo)
        return lacks if lacks is not None and self._power_loss_cause(m, broker, lacks) else leo

    @staticmethod
    def _unclean_end(p: Any, m: PartitionModel, leo: int) -> int:
        """Where an uncleanly elected replica's log leaves the committed history: its LEO,
        or the first committed batch it holds differently. Out of the ISR it may never have
        truncated a deposed epoch's batches, so it can differ from offset 0 on.

        Past the committed end it is compared with the acked writes the checker has not
        yet seen committed (an ack may reach it before the step that committed its batch
        is judged): one it does not hold is where its log leaves the history too, or the
        write would be found lost only when the new leader commits its own batch there,
        as a violation rather than this election's counted loss.  So is one that starts
        below the LEO and ends past it (the replica holds another batch at its base):
        ended at the LEO, the history would lose a read of that batch uncounted."""
        upto = min(leo, m.canon_end)
        differs = _first_difference(p, m, 0, upto)
        if differs is not None:
            return differs
        lacks = _first_ack_not_held(p, m, upto, leo)
        return lacks if lacks is not None else leo

    def _note_back(self, m: PartitionModel, broker: int) -> None:
        """The replica is seen again: the first sighting after a restart that followed its
        power loss is when it is back for its partition (see _power_loss_cause)."""
        for b, _f, t in m.drops:
            if b == broker and (b, t) not in m.back:
                restarted = next((r for r in self.restarts.get(b, ()) if r >= t), None)
                if restarted is not None:
                    m.back[(b, t)] = self._now()

    def _power_loss_cause(self, m: PartitionModel, broker: int, first: int) -> str | None:
        """Power loss, if the elected replica itself dropped ``first`` after it was committed,
        or before but while it was away: until it is back, hosting the partition again
        after its restart, its leader counts it at its LEO from before the crash, and may
        commit on the strength of bytes already lost (swarm control-plane-chaos seed 2414:
        committed 750 ms after the power loss, with the other ISR member down;
        retention-chaos seed 9038: committed 1.5 s after the restart, while the restarted
        broker waited 2.5 s for its old session to expire before it could register)."""
        since = m.committed_at.get(first)
        if since is None and first in m.acked:
            since = m.acked[first].time_ms
        for b, dropped_from, t in m.drops:
            if b != broker or dropped_from > first:
                continue
            back = m.back.get((b, t))
            if since is None or t >= since or (back is not None and since <= back):
                return "power-loss"
        return None

    @staticmethod
    def _supersede(m: PartitionModel, leo: int) -> None:
        """History from ``leo`` on is replaced by the new leader's (an attributed loss).

        A batch straddling ``leo`` goes whole, as truncation removes it whole."""
        cut = {b for b, (last, _e, _c) in m.canon.items() if last >= leo}
        cut |= {b for b, ack in m.acked.items() if ack.last >= leo}
        for d in (m.canon, m.acked, m.consumed, m.committed_at):
            for base in [b for b in d if b in cut or b >= leo]:
                del d[base]
        m.canon_end = max((last + 1 for last, _e, _c in m.canon.values()), default=0)

    def _verify(self, broker: int, tp: str, p: Any, m: PartitionModel, view: ReplicaView, hw: int,
                leader: bool) -> None:
        # Below the leader's log start a follower may still hold what an election superseded:
        # the leader's epoch cache no longer reaches back there (KAFKA-7415 answers a too-old
        # epoch with the first start it has), and the follower's next fetch either adopts the
        # leader's start (KIP-107) or, below it, starts over there.
        start = max(view.verified, m.expired_below)
        # An election that superseded the history from below the expired mark (an unclean
        # leader differing there, or one that lost data there in a power loss) leaves the
        # history ending below it, where no replica is read any more: the newest leader's
        # first batch at or past the mark continues the history, and is judged from there.
        across_the_mark = leader and m.canon_end < m.expired_below
        for base, last, epoch, crc in read_fingerprints(p.log, start, hw, verified=True):
            if last >= hw:
                break  # a batch straddling the HW is not committed yet
            known = m.canon.get(base)
            if crc == DAMAGED:
                self._diverged(broker, tp, m, base, leader, "its bytes do not match the batch's CRC")
                return
            if known is None:
                if leader and (base == m.canon_end or (across_the_mark and base > m.canon_end)):
                    self._extend(tp, m, base, last, epoch, crc, broker)
                    if self.violation is not None:
                        return
                elif base >= m.canon_end:
                    break  # beyond what any leader has committed yet: verify later
                else:
                    self._diverged(broker, tp, m, base, leader, "no committed batch starts there")
                    return
            elif (known[0], known[2]) != (last, crc):
                # Batches are compared by CRC (issue 5): a producer's retry that lands at
                # the offset it had before, under a newer epoch, holds the same records.
                self._diverged(broker, tp, m, base, leader,
                               f"holds (last={last}, epoch={epoch}, crc={crc:08x}), committed is "
                               f"(last={known[0]}, epoch={known[1]}, crc={known[2]:08x})")
                return
            view.verified = last + 1
            across_the_mark = False

    def _extend(self, tp: str, m: PartitionModel, base: int, last: int, epoch: int, crc: int, broker: int) -> None:
        m.canon[base] = (last, epoch, crc)
        m.committed_at[base] = self._now()
        m.canon_end = last + 1
        ack = m.acked.get(base)
        if ack is not None and (ack.last, ack.crc) != (last, crc):
            self.fail(Invariant.ACKED_WRITE_LOST, tp, broker,
                      f"write acked at offset {base} was replaced by another batch")
        seen = m.consumed.get(base)
        if seen is not None and seen != crc:
            self.fail(Invariant.CONSUMED_RECORD_VANISHED, tp, broker,
                      f"a consumer read a batch at offset {base} that the committed log no longer has")

    def _diverged(self, broker: int, tp: str, m: PartitionModel, base: int, leader: bool, what: str) -> None:
        role = "leader" if leader else "follower"
        if not leader:
            inv = Invariant.REPLICA_DIVERGENCE
        elif base in m.acked:
            inv = Invariant.ACKED_WRITE_LOST
        elif base in m.consumed:
            inv = Invariant.CONSUMED_RECORD_VANISHED
        else:
            inv = Invariant.REPLICA_DIVERGENCE
        self.fail(inv, tp, broker, f"{role} {broker} below its HW at offset {base}: {what}")

    # ---- the end of a run ------------------------------------------------------------------------
    def final_check(self, tp: str, replicas: dict[int, Any]) -> None:
        """After convergence: every replica's whole log equals the leader's and holds the history."""
        m = self.model(tp)
        leader = replicas.get(m.leader)
        if leader is None:
            return
        # Below a log start lies only what retention (or a follower adopting its leader's
        # start) deleted on purpose, each move recorded as a "log_start" event.
        start = leader.log.log_start_offset
        ref = read_fingerprints(leader.log, start, leader.log_end_offset, verified=True)
        by_base = {fp[0]: fp for fp in ref}
        for base, (last, epoch, crc) in m.canon.items():
            if last < start:
                continue
            found = by_base.get(base)
            if found is None or (found[1], found[3]) != (last, crc):
                self._diverged(m.leader, tp, m, base, True, "the converged leader lost a committed batch")
                return
        for b, p in sorted(replicas.items()):
            if b == m.leader:
                continue
            common = max(start, p.log.log_start_offset)
            mine = [(fp[0], fp[1], fp[3]) for fp in read_fingerprints(p.log, common, p.log_end_offset, verified=True)]
            # Both sides from the batch holding ``common`` (a log start may fall inside one).
            if mine != [(fp[0], fp[1], fp[3]) for fp in ref if fp[1] >= common]:
                self.fail(Invariant.REPLICA_DIVERGENCE, tp, b,
                          f"after convergence replica {b}'s log differs from leader {m.leader}'s")
                return
