"""The follower fetch loop: one fetcher per source broker, all its partitions in one fetch.

Theory of operation (seed 001 becomeFollower, seed 004 section 4).  A partition
joins a fetcher TRUNCATING, with the leader epoch it follows.  Truncation
follows ``replica.truncation.strategy``:

- ``high-watermark`` (the seeds' design): truncate the log to the local HW, at once;
- ``leader-epoch`` (KIP-101/KIP-279): ask the leader (OffsetsForLeaderEpoch) where
  the follower's latest epoch ends there, and truncate to the divergence point;
  when the leader does not know that epoch, truncate to the end of the largest
  common epoch and ask again.

Then the partition is FETCHING from its LEO: responses are appended as the
leader's whole batches (never re-encoded) and HW = min(leader HW, own LEO).
OFFSET_OUT_OF_RANGE truncates to the leader's LEO (the leader has less) or
restarts at the leader's log start (the leader has deleted what we need);
FENCED_LEADER_EPOCH drops the partition until a newer LeaderAndIsr re-adds it;
other errors back off ``replica.fetch.backoff.ms``.  One request is in flight at
a time; a lost request is abandoned after ``request.timeout.ms``.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from .. import errors
from ..fast_init import fast_init
from ..protocol import (
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    TopicPartition,
)
from ..protocol.offsets_for_leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from ..runtime import Scheduler
from .partition import Partition, Role

Send = Callable[[int, Any, Callable[[Any], None]], None]


class FetchPhase(enum.Enum):
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


# A fetch state is born TRUNCATING; KIP-279 may need several truncation rounds.
LEGAL_PREVIOUS: dict[FetchPhase, frozenset[FetchPhase]] = {
    FetchPhase.TRUNCATING: frozenset({FetchPhase.TRUNCATING}),
    FetchPhase.FETCHING: frozenset({FetchPhase.TRUNCATING, FetchPhase.FETCHING}),
}

# The per-fetch paths compare against these: an Enum member looked up on its class goes
# through a descriptor in Python 3.11 (see partition._LEADER).
_FETCHING, _FOLLOWER = FetchPhase.FETCHING, Role.FOLLOWER


@fast_init
@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    fetch_offset: int
    leader_epoch: int
    phase: FetchPhase = FetchPhase.TRUNCATING
    delayed_until_ms: int = 0

    def to(self, phase: FetchPhase, fetch_offset: int) -> "PartitionFetchState":
        if self.phase not in LEGAL_PREVIOUS[phase]:
            raise errors.StateChangeFailed(f"fetch state {self.phase.value} -> {phase.value} is illegal")
        return PartitionFetchState(fetch_offset, self.leader_epoch, phase)

    def delayed(self, until_ms: int) -> "PartitionFetchState":
        # Built directly: dataclasses.replace walks the fields by name, ~10x the cost, and a
        # fetcher whose leader is down delays every partition on every retry.
        return PartitionFetchState(self.fetch_offset, self.leader_epoch, self.phase, until_ms)


class ReplicaFetcher:
    def __init__(
        self,
        broker_id: int,
        source_broker: int,
        scheduler: Scheduler,
        config: dict[str, Any],
        send: Send,
        lookup: Callable[[TopicPartition], Partition | None],
    ) -> None:
        self.broker_id = broker_id
        self.source_broker = source_broker
        self._scheduler = scheduler
        self._send = send
        self._lookup = lookup
        self.strategy: str = config["replica.truncation.strategy"]
        self._max_wait_ms: int = config["replica.fetch.wait.max.ms"]
        self._min_bytes: int = config["replica.fetch.min.bytes"]
        self._max_bytes: int = config["replica.fetch.max.bytes"]
        self._response_max_bytes: int = config["replica.fetch.response.max.bytes"]
        self._backoff_ms: int = config["replica.fetch.backoff.ms"]
        self._timeout_ms: int = config["request.timeout.ms"] + self._max_wait_ms
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self._inflight = 0  # sequence number of the request in flight, 0 for none
        self._seq = 0
        self._wake: Any = None
        self._wake_due = -1
        self._timeout: Any = None
        self._running = True
        self.fetches_sent = 0

    # ---- membership --------------------------------------------------------------------
    def add_partition(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.states[tp] = PartitionFetchState(-1, leader_epoch)
        self._schedule(0)

    def remove_partition(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)

    def shutdown(self) -> None:
        self._running = False
        self.states.clear()
        for timer in (self._wake, self._timeout):
            if timer is not None:
                timer.cancel()
        self._wake = self._timeout = None
        self._inflight = 0

    # ---- the loop ------------------------------------------------------------------------
    def _schedule(self, delay_ms: int) -> None:
        if not self._running or self._inflight:
            return
        due = self._scheduler.now_ms() + delay_ms
        if self._wake is not None:
            if self._wake_due <= due:
                return
            self._wake.cancel()
        self._wake_due = due
        self._wake = self._scheduler.call_later(delay_ms, self._run)

    def _run(self) -> None:
        self._wake = None
        if not self._running or self._inflight:
            return
        now = self._scheduler.now_ms()
        ready, truncating, fetching = [], [], []
        for tp, s in self.states.items():  # one pass: this runs once per fetch
            if s.delayed_until_ms <= now:
                ready.append(tp)
                (fetching if s.phase is _FETCHING else truncating).append(tp)
        if truncating:
            if self._truncate(truncating):
                return  # an OffsetsForLeaderEpoch request is in flight
            # what was truncated locally fetches in this same request
            fetching = [tp for tp in ready if (s := self.states.get(tp)) is not None and s.phase is _FETCHING]
        if fetching:
            self._send_fetch(fetching)
            return
        delayed = [s.delayed_until_ms for s in self.states.values() if s.delayed_until_ms > now]
        if delayed:
            self._schedule(min(delayed) - now)

    def _begin(self, request: Any, handler: Callable[[int, Any], None]) -> None:
        self._seq += 1
        seq = self._inflight = self._seq
        self._timeout = self._scheduler.call_later(self._timeout_ms, self._on_timeout, seq)
        self._send(self.source_broker, request, lambda response: self._on_response(seq, response, handler))

    def _on_response(self, seq: int, response: Any, handler: Callable[[int, Any], None]) -> None:
        if seq != self._inflight or not self._running:
            return  # late (timed out) or from before a shutdown
        self._inflight = 0
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout = None
        handler(seq, response)
        self._schedule(0)

    def _on_timeout(self, seq: int) -> None:
        if seq != self._inflight:
            return
        self._inflight = 0
        self._timeout = None
        self._delay_all(self.states)
        self._schedule(self._backoff_ms)

    def _delay_all(self, tps: Any) -> None:
        until = self._scheduler.now_ms() + self._backoff_ms
        for tp in list(tps):
            if tp in self.states:
                self.states[tp] = self.states[tp].delayed(until)

    def _follower(self, tp: TopicPartition, state: PartitionFetchState) -> Partition | None:
        """The partition if it still follows with the epoch this state was made for."""
        p = self._lookup(tp)
        if p is None or p.role is not _FOLLOWER or p.leader_epoch != state.leader_epoch:
            self.states.pop(tp, None)
            return None
        return p

    # ---- truncation ------------------------------------------------------------------------
    def _truncate(self, tps: list[TopicPartition]) -> bool:
        """Truncate what can be done locally; True if an epoch request was sent."""
        asks = []
        for tp in tps:
            state = self.states[tp]
            p = self._follower(tp, state)
            if p is None:
                continue
            latest = p.log.leader_epoch_cache.latest_epoch if self.strategy == "leader-epoch" else -1
            if latest < 0:
                # The seeds' rule, and the fallback when we know no epoch.
                p.truncate_to(p.high_watermark)
                self.states[tp] = state.to(FetchPhase.FETCHING, p.log_end_offset)
            else:
                asks.append(OffsetForLeaderPartition(tp, latest, state.leader_epoch))
        if not asks:
            return False
        request = OffsetsForLeaderEpochRequest(self.broker_id, tuple(asks))
        sent = {a.tp: self.states[a.tp] for a in asks}
        self._begin(request, lambda seq, response: self._on_epochs(sent, response))
        return True

    def _on_epochs(self, sent: dict[TopicPartition, PartitionFetchState], response: Any) -> None:
        if not isinstance(response, OffsetsForLeaderEpochResponse):
            self._delay_all(sent)
            return
        for answer in response.partitions:
            state = self.states.get(answer.tp)
            # A late answer to a request sent under an older epoch (or before the
            # partition was re-added) must not touch the current state: the
            # simulator found a stale FENCED_LEADER_EPOCH stopping a follower for good.
            if state is None or state != sent.get(answer.tp) or state.phase is not FetchPhase.TRUNCATING:
                continue
            p = self._follower(answer.tp, state)
            if p is None:
                continue
            if answer.error_code == errors.FencedLeaderEpoch.code:
                self.states.pop(answer.tp, None)
                continue
            if answer.error_code != errors.NONE:
                self._delay_all([answer.tp])
                continue
            offset, complete = self._divergence(p, answer)
            if offset < p.log_end_offset:
                p.truncate_to(offset)
            elif not complete:
                # Our newer epoch starts at our LEO and holds no records (we led it and
                # appended nothing): truncating the log to its end is a no-op, so drop the
                # empty epoch explicitly, or the next request asks the same question
                # forever and starves every other partition of this fetcher (found by the
                # simulator: random-chaos seeds 430 and 484, leader-epoch).
                p.log.leader_epoch_cache.truncate_from_end(offset)
            phase = FetchPhase.FETCHING if complete else FetchPhase.TRUNCATING
            self.states[answer.tp] = state.to(phase, p.log_end_offset)

    @staticmethod
    def _divergence(p: Partition, answer: EpochEndOffset) -> tuple[int, bool]:
        """KIP-279: where the follower's log leaves the leader's; (offset, truncation complete)."""
        leo = p.log_end_offset
        if answer.end_offset == UNDEFINED_OFFSET:
            return p.high_watermark, True  # the leader keeps no epochs: the seeds' rule
        if answer.leader_epoch == UNDEFINED_EPOCH:
            return min(answer.end_offset, leo), True
        epoch, end = p.log.leader_epoch_cache.end_offset_for(answer.leader_epoch)
        if end < 0:
            return min(answer.end_offset, leo), True
        if epoch != answer.leader_epoch:
            # We never had the leader's epoch: cut back to our largest earlier epoch, ask again.
            return min(end, leo), False
        return min(answer.end_offset, end, leo), True

    # ---- fetching ----------------------------------------------------------------------------
    def _send_fetch(self, tps: list[TopicPartition]) -> None:
        parts = []
        sent: dict[TopicPartition, PartitionFetchState] = {}
        for tp in tps:
            state = self.states[tp]
            p = self._follower(tp, state)
            if p is None:
                continue
            parts.append(
                FetchPartition(tp, state.fetch_offset, state.leader_epoch, p.log.log_start_offset, self._max_bytes)
            )
            sent[tp] = state
        if not parts:
            self._schedule(0)
            return
        request = FetchRequest(
            replica_id=self.broker_id,
            partitions=tuple(parts),
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._response_max_bytes,
        )
        self.fetches_sent += 1
        self._begin(request, lambda seq, response: self._on_fetch(sent, response))

    def _on_fetch(self, sent: dict[TopicPartition, PartitionFetchState], response: Any) -> None:
        if not isinstance(response, FetchResponse) or response.error_code != errors.NONE:
            self._delay_all(sent)
            return
        for data in response.partitions:
            state = self.states.get(data.tp)
            if state is None:
                continue
            was = sent.get(data.tp)
            if state is not was and state != was:  # identity first: the usual case, no field compare
                continue  # re-added or moved on since this fetch was sent
            p = self._follower(data.tp, state)
            if p is None:
                continue
            code = data.error_code
            if code == errors.NONE:
                try:
                    if len(data.records):
                        p.append_records_to_follower(data.records)
                    p.update_follower_high_watermark(data.high_watermark)
                    p.update_follower_log_start_offset(data.log_start_offset)
                except errors.KReplicaError:
                    self._delay_all([data.tp])
                    continue
                leo = p.log.log_end_offset
                if leo != state.fetch_offset or state.phase is not _FETCHING or state.delayed_until_ms:
                    self.states[data.tp] = state.to(_FETCHING, leo)
                # else: nothing new arrived; the state it was sent with stays as it is
            elif code == errors.OffsetOutOfRange.code:
                self._on_out_of_range(p, state, data.log_end_offset, data.log_start_offset)
            elif code == errors.FencedLeaderEpoch.code:
                self.states.pop(data.tp, None)
            else:
                self._delay_all([data.tp])

    def _on_out_of_range(
        self, p: Partition, state: PartitionFetchState, leader_leo: int, leader_start: int
    ) -> None:
        if leader_leo < 0:
            self._delay_all([p.tp])
            return
        if leader_leo < state.fetch_offset:
            # The leader has less than we do (it was elected from behind): cut back to it.
            p.truncate_to(leader_leo)
        else:
            # We are below the leader's log start: what we need is gone; start over there.
            p.truncate_fully_and_start_at(leader_start)
        self.states[p.tp] = state.to(FetchPhase.FETCHING, p.log_end_offset)
