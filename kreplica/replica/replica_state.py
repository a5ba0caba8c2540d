"""What a leader knows about one remote replica of its partition.

Seed 004: the leader caches every follower's LEO, learned from the offset each
follower fetches at (a follower fetches from its own LEO).  ``last_caught_up_ms``
drives both ``maybe_increment_leader_hw`` (replicas caught up within
``replica.lag.time.max.ms`` count) and ``maybe_shrink_isr``.  Kafka's rule: a
fetch at or beyond the leader's LEO means caught up now; a fetch at or beyond
the LEO the leader had at this follower's *previous* fetch means the follower
was caught up as of that previous fetch.
"""
from __future__ import annotations

UNKNOWN_OFFSET = -1
# "Never caught up": far enough in the past for any clock, virtual time 0 included.
NEVER_MS = -(1 << 62)


class ReplicaState:
    __slots__ = (
        "broker_id",
        "log_end_offset",
        "log_start_offset",
        "last_fetch_ms",
        "last_fetch_leader_leo",
        "last_caught_up_ms",
        "high_watermark_sent",
    )

    def __init__(self, broker_id: int, last_caught_up_ms: int = NEVER_MS) -> None:
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_ms = 0
        self.last_fetch_leader_leo = UNKNOWN_OFFSET
        self.last_caught_up_ms = last_caught_up_ms
        # The HW in the last fetch answer this follower got (a newer HW ends a long-poll).
        self.high_watermark_sent = UNKNOWN_OFFSET

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, now_ms: int, leader_leo: int
    ) -> None:
        # Comparisons, not max(): this runs for every partition of every follower fetch.
        if fetch_offset >= leader_leo:
            if now_ms > self.last_caught_up_ms:
                self.last_caught_up_ms = now_ms
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            if self.last_fetch_ms > self.last_caught_up_ms:
                self.last_caught_up_ms = self.last_fetch_ms
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_ms = now_ms
        self.last_fetch_leader_leo = leader_leo

    def is_caught_up(self, now_ms: int, lag_max_ms: int) -> bool:
        return now_ms - self.last_caught_up_ms <= lag_max_ms

    def __repr__(self) -> str:
        return (
            f"ReplicaState(broker={self.broker_id}, leo={self.log_end_offset}, "
            f"caught_up={self.last_caught_up_ms})"
        )
