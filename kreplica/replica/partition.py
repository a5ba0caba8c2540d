"""One hosted replica of a partition: leader or follower role, ISR, HW and LEO.

Theory of operation (seeds 001 'C' and 004).  ``make_leader`` / ``make_follower``
apply a LeaderAndIsr partition state.  As leader the partition appends produced
batches (``append_records_to_leader``), records each follower's LEO from the
offset it fetches at (``update_follower_fetch_state``), and moves the HW with
``maybe_increment_leader_hw``: the smallest LEO among replicas that are in the
(maximal) ISR or caught up within ``replica.lag.time.max.ms``, never backwards.
ISR changes are proposals (``alter_isr``) that take effect only when the
conditional write of the partition state succeeds (seed 001 'D').  As follower
it appends whole batches as the leader assigned them and keeps
HW = min(leader HW, own LEO); the fetcher drives truncation and fetching.

Time comes from the injected clock; every HW advance is reported to
``on_high_watermark`` so the ReplicaManager can complete delayed operations.
"""
from __future__ import annotations

import enum
from typing import Any, Callable

from .. import errors
from ..protocol import AlterIsrRequest, AlterIsrResponse, LeaderAndIsrPartitionState, TopicPartition
from ..protocol.common import NO_LEADER
from ..runtime import Clock
from .isr_state import IsrState
from .replica_state import NEVER_MS, UNKNOWN_OFFSET, ReplicaState

AlterIsr = Callable[[AlterIsrRequest, Callable[[AlterIsrResponse], None]], None]


class Role(enum.Enum):
    NONE = "None"  # hosted but neither leading nor following (new, or stopped without delete)
    LEADER = "Leader"
    FOLLOWER = "Follower"


# Hot paths compare against these: an Enum member looked up on its class goes through a
# descriptor in Python 3.11 (~0.1 us each time, several times per simulated event).
_LEADER = Role.LEADER


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        broker_id: int,
        log: Any,
        config: dict[str, Any],
        clock: Clock,
        alter_isr: AlterIsr,
        on_high_watermark: Callable[[TopicPartition], None],
    ) -> None:
        self.tp = tp
        self.broker_id = broker_id
        self.log = log
        self._clock = clock
        self._alter_isr = alter_isr
        self._on_high_watermark = on_high_watermark
        self.update_config(config)
        self.role = Role.NONE
        self.assigned_replicas: tuple[int, ...] = ()
        self.isr_state = IsrState(())
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.zk_version = -1
        self.controller_epoch = -1
        # Offset at which this broker's current leader epoch began (ISR joins need it).
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.remote_replicas: dict[int, ReplicaState] = {}
        # Bumped by every state change so a late AlterIsr answer can tell it is stale.
        self._isr_generation = 0

    def update_config(self, config: dict[str, Any]) -> None:
        """The keys this partition reads (its log has its own LogConfig)."""
        self._lag_max_ms: int = config["replica.lag.time.max.ms"]
        self.min_insync_replicas: int = config["min.insync.replicas"]

    # ---- views --------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.role is _LEADER

    @property
    def isr(self) -> tuple[int, ...]:
        return self.isr_state.isr

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        """FENCED_LEADER_EPOCH for an older epoch, UNKNOWN_LEADER_EPOCH for a newer one."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return errors.NONE
        if current_leader_epoch < self.leader_epoch:
            return errors.FencedLeaderEpoch.code
        return errors.UnknownLeaderEpoch.code

    # ---- role changes (seed 001 'C') ------------------------------------------------
    def _apply_state(self, state: LeaderAndIsrPartitionState) -> bool:
        """Adopt the controller's state; True if the leader epoch is new."""
        new_epoch = state.leader_epoch != self.leader_epoch
        self.assigned_replicas = tuple(state.replicas)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.controller_epoch = state.controller_epoch
        self.isr_state = self.isr_state.committed(tuple(state.isr))
        self._isr_generation += 1
        return new_epoch

    def make_leader(self, state: LeaderAndIsrPartitionState) -> bool:
        """becomeLeader: take the ISR and epoch, record the epoch start, reset followers.

        Returns True when this broker was not the leader before.  The new HW may
        lag the old leader's; reads between it and the LEO are empty (seed 001 s.7).
        """
        now = self._clock.now_ms()
        new_epoch = self._apply_state(state)
        if new_epoch or self.role is not Role.LEADER:
            leo = self.log.log_end_offset
            cache = self.log.leader_epoch_cache
            if cache.latest_epoch < state.leader_epoch:
                cache.assign(state.leader_epoch, leo)
            self.leader_epoch_start_offset = leo
            # Followers must fetch again before they count; ISR members keep their
            # standing for one lag period (they were in sync a moment ago).
            self.remote_replicas = {
                b: ReplicaState(b, now if b in state.isr else NEVER_MS)
                for b in self.assigned_replicas
                if b != self.broker_id
            }
        else:
            for b in self.assigned_replicas:
                if b != self.broker_id and b not in self.remote_replicas:
                    self.remote_replicas[b] = ReplicaState(b)
            for b in [b for b in self.remote_replicas if b not in self.assigned_replicas]:
                del self.remote_replicas[b]
        was_leader = self.role is Role.LEADER
        self.role = Role.LEADER
        self.maybe_increment_leader_hw()
        return not was_leader

    def make_follower(self, state: LeaderAndIsrPartitionState) -> bool:
        """becomeFollower: stop leading; the fetcher then truncates and fetches.

        Returns True when the leader or its epoch changed (the fetcher must restart).
        """
        new_epoch = self._apply_state(state)
        changed = new_epoch or self.role is not Role.FOLLOWER
        self.role = Role.FOLLOWER
        self.remote_replicas = {}
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        return changed

    def make_offline(self) -> None:
        """StopReplica without delete: keep the log, serve nothing."""
        self.role = Role.NONE
        self.remote_replicas = {}
        self._isr_generation += 1

    # ---- leader: produce --------------------------------------------------------------
    def append_records_to_leader(self, records: Any, required_acks: int) -> Any:
        """Append ready producer batches (offsets and epoch restamped, never re-encoded)."""
        if self.role is not _LEADER:
            raise errors.NotLeaderOrFollower(f"{self.tp}: broker {self.broker_id} is not the leader")
        isr_size = len(self.isr_state.isr)
        if required_acks == -1 and isr_size < self.min_insync_replicas:
            raise errors.NotEnoughReplicas(
                f"{self.tp}: ISR {list(self.isr_state.isr)} is below min.insync.replicas="
                f"{self.min_insync_replicas}"
            )
        # The log copies the batches into its segment and restamps them there.
        info = self.log.append_batches_as_leader(records, self.leader_epoch)
        self.maybe_increment_leader_hw()
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """Seed 004's checkEnoughReplicasReachOffset: (done, error code)."""
        if self.role is not _LEADER:
            return True, errors.NotLeaderOrFollower.code
        if self.log.high_watermark >= required_offset:
            if len(self.isr_state.maximal_isr) >= self.min_insync_replicas:
                return True, errors.NONE
            return True, errors.NotEnoughReplicasAfterAppend.code
        return False, errors.NONE

    def maybe_increment_leader_hw(self) -> bool:
        """Seed 004's maybeIncrementLeaderHW: lowest LEO of the ISR and recently caught-up replicas."""
        if self.role is not _LEADER:
            return False
        log = self.log
        hw = log.high_watermark
        new_hw = log.log_end_offset
        if new_hw <= hw:
            return False  # the HW is at the LEO already (the usual case): no replica can move it
        maximal = None
        # Runs on every produce and every follower fetch: the ISR set and the clock are
        # read only for a replica that could hold the HW back, and a replica at or below
        # the HW settles it at once (the HW never moves backwards).
        for r in self.remote_replicas.values():
            leo = r.log_end_offset
            if leo < new_hw:
                if maximal is None:
                    maximal = self.isr_state.maximal_isr
                if r.broker_id in maximal or r.is_caught_up(self._clock.now_ms(), self._lag_max_ms):
                    if leo <= hw:
                        return False
                    new_hw = leo
        if new_hw <= hw or log.maybe_increment_high_watermark(new_hw) is None:
            return False
        self._on_high_watermark(self.tp)
        return True

    # ---- leader: followers' fetches ----------------------------------------------------
    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, follower_log_start: int
    ) -> bool:
        """Record a follower's LEO (its fetch offset), maybe expand the ISR, maybe move the HW."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None or self.role is not _LEADER:
            return False
        replica.update_fetch_state(fetch_offset, follower_log_start, self._clock.now_ms(), self.log.log_end_offset)
        self.maybe_expand_isr(replica)
        return self.maybe_increment_leader_hw()

    def maybe_expand_isr(self, replica: ReplicaState) -> None:
        """Propose adding a follower that reached the HW (and this epoch's start)."""
        state = self.isr_state
        if state.is_inflight or replica.broker_id in state.isr:
            return
        if replica.broker_id not in self.assigned_replicas:
            return
        leo = replica.log_end_offset
        if leo >= self.log.high_watermark and leo >= self.leader_epoch_start_offset:
            self._propose_isr(state.isr + (replica.broker_id,), expand=True)

    def out_of_sync_replicas(self) -> tuple[int, ...]:
        """ISR followers behind the leader's LEO and not caught up within the lag time."""
        now = self._clock.now_ms()
        leo = self.log.log_end_offset
        out = []
        for b in self.isr_state.isr:
            if b == self.broker_id:
                continue
            r = self.remote_replicas.get(b)
            if r is None or (r.log_end_offset != leo and not r.is_caught_up(now, self._lag_max_ms)):
                out.append(b)
        return tuple(out)

    def maybe_shrink_isr(self) -> bool:
        """Seed 004's maybeShrinkIsr: propose dropping lagging followers; True if proposed."""
        if self.role is not Role.LEADER or self.isr_state.is_inflight:
            return False
        out = self.out_of_sync_replicas()
        if not out:
            return False
        self._propose_isr(tuple(b for b in self.isr_state.isr if b not in out), expand=False)
        return True

    def _propose_isr(self, new_isr: tuple[int, ...], expand: bool) -> None:
        state = self.isr_state
        self.isr_state = state.pending_expand(new_isr) if expand else state.pending_shrink(new_isr)
        self._isr_generation += 1
        generation = self._isr_generation
        request = AlterIsrRequest(
            broker_id=self.broker_id,
            tp=self.tp,
            leader_epoch=self.leader_epoch,
            new_isr=new_isr,
            zk_version=self.zk_version,
            controller_epoch=self.controller_epoch,
        )
        self._alter_isr(request, lambda response: self._on_alter_isr(generation, response))

    def awaits_isr_answer(self, request: AlterIsrRequest) -> bool:
        """Is ``request`` still this leader's pending ISR proposal (nothing newer since)?"""
        return (self.role is Role.LEADER and self.isr_state.is_inflight and self.leader_epoch == request.leader_epoch
                and self.zk_version == request.zk_version and self.isr_state.proposed == tuple(request.new_isr))

    def _on_alter_isr(self, generation: int, response: AlterIsrResponse) -> None:
        if generation != self._isr_generation or self.role is not Role.LEADER:
            return  # a newer LeaderAndIsr (or proposal) replaced the state this answers
        if response.error_code != errors.NONE:
            # Lost to the controller's newer state: drop the change (seed 001 'D').
            self.isr_state = self.isr_state.committed(self.isr_state.isr)
            self._isr_generation += 1
            return
        self.isr_state = self.isr_state.committed(tuple(response.isr))
        self.zk_version = response.zk_version
        self._isr_generation += 1
        # A shrink can let the HW move (the lagging replica no longer holds it back).
        self.maybe_increment_leader_hw()

    # ---- reads ---------------------------------------------------------------------------
    def read_records(self, fetch_offset: int, max_bytes: int, upper_bound: int, prefault: bool = False) -> Any:
        """Whole batches from ``fetch_offset`` holding only offsets below ``upper_bound``.

        Outside [log start, LEO] raises OffsetOutOfRange; from ``upper_bound`` up to
        the LEO the answer is empty, not an error (seed 001 section 7).  ``prefault``
        when the bytes go out in a fetch response (all of them will be read).
        """
        log = self.log
        if fetch_offset > log.log_end_offset or fetch_offset < log.log_start_offset:
            raise errors.OffsetOutOfRange(
                f"{self.tp}: offset {fetch_offset} outside [{log.log_start_offset}, "
                f"{log.log_end_offset}]"
            )
        if fetch_offset >= upper_bound:
            return b""
        return log.read(fetch_offset, max_bytes, upper_bound, prefault=prefault).view

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The leader's answer to OffsetsForLeaderEpoch (KIP-101/279)."""
        return self.log.leader_epoch_cache.end_offset_for(epoch)

    # ---- follower -----------------------------------------------------------------------
    def append_records_to_follower(self, records: Any) -> None:
        """Append the leader's batches as they are (offsets, epochs and CRC kept)."""
        self.log.append_as_follower(records)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))

    def update_follower_log_start_offset(self, leader_log_start_offset: int) -> None:
        """KIP-107: a follower's log starts no earlier than its leader's (bounded by its HW)."""
        self.log.maybe_increment_log_start_offset(leader_log_start_offset)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    def __repr__(self) -> str:
        return (
            f"Partition({self.tp}, broker={self.broker_id}, {self.role.value}, "
            f"epoch={self.leader_epoch}, isr={list(self.isr)}, leo={self.log_end_offset}, "
            f"hw={self.high_watermark})"
        )
