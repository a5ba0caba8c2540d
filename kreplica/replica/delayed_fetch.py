"""A long-poll fetch parked until enough data, a HW change or ``max_wait_ms`` (Kafka's DelayedFetch).

A fetch that found fewer than ``min_bytes`` waits, watched under its
partitions.  It completes early when, for any partition: this broker stopped
leading it or its leader epoch changed; the fetch offset fell beyond the end a
reader may see (the log was truncated) or below the log start (retention); the
leader's HW moved past what this follower was last told (so followers learn the
HW within one round trip, the two-fetch advance of seed 004); or the bytes now
readable reach ``min_bytes``.  The end a reader may see is the LEO for followers
and ``uncommitted`` consumers, the HW for ``committed`` ones.
Completion re-reads and answers through ``complete`` (the ReplicaManager's
fetch path), so a delayed answer is built exactly as an immediate one.
"""
from __future__ import annotations

from typing import Callable

from ..protocol import FetchRequest, TopicPartition
from .purgatory import DelayedOperation


class DelayedFetch(DelayedOperation):
    __slots__ = ("request", "_epochs", "_hw_sent", "_lookup", "_complete", "is_follower")

    def __init__(
        self,
        request: FetchRequest,
        leader_epochs: dict[TopicPartition, int],
        hw_sent: dict[TopicPartition, int],
        lookup: Callable[[TopicPartition], object | None],
        complete: Callable[[], None],
    ) -> None:
        super().__init__(request.max_wait_ms)
        self.request = request
        self.is_follower = request.replica_id >= 0
        self._epochs = leader_epochs
        self._hw_sent = hw_sent
        self._lookup = lookup
        self._complete = complete

    def try_complete(self) -> bool:
        accumulated = 0
        need = self.request.min_bytes
        is_follower = self.is_follower
        # The end the answer's read stops at: a follower's and an uncommitted reader's is the LEO.
        read_to_leo = is_follower or self.request.isolation != "committed"
        # Every produce and HW move on a watched partition re-checks the parked fetches, each
        # over all its partitions: the partition's offsets are read from its log once.
        for fp in self.request.partitions:
            p = self._lookup(fp.tp)
            if p is None or not p.is_leader or p.leader_epoch != self._epochs.get(fp.tp):
                return self.force_complete()
            log = p.log
            hw = log.high_watermark
            end = log.log_end_offset if read_to_leo else hw
            if fp.fetch_offset > end or fp.fetch_offset < log.log_start_offset:
                return self.force_complete()  # the re-read answers OFFSET_OUT_OF_RANGE
            if is_follower and hw > self._hw_sent.get(fp.tp, -1):
                return self.force_complete()
            if end > fp.fetch_offset:
                # A min_bytes of 1 (the default) needs no read to know it is met.
                accumulated += 1 if need <= 1 else len(p.read_records(fp.fetch_offset, fp.max_bytes, end))
        if accumulated >= need and accumulated > 0:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self._complete()
