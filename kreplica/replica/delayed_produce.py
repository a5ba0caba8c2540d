"""An acks=all produce waiting in purgatory until the HW covers what it appended (seed 004).

Each partition's required offset is its last appended offset + 1, and the
produce purgatory orders its watchers by it: when a partition's HW moves only
the requests it now covers re-check ``Partition.check_enough_replicas_reach_offset``
(every one does when leadership changes): done with no error, done
with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
``min.insync.replicas`` meanwhile, or NOT_LEADER_OR_FOLLOWER when this broker
stopped leading.  At ``timeout_ms`` the partitions still waiting get
REQUEST_TIMED_OUT.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import errors
from ..protocol import ProducePartitionResult, ProduceResponse, TopicPartition
from .purgatory import DelayedOperation


@dataclass(slots=True)
class ProduceStatus:
    tp: TopicPartition
    required_offset: int
    base_offset: int
    error_code: int
    waiting: bool
    log_append_time: int = -1  # the leader's stamp under LogAppendTime, given back with the offset


class DelayedProduce(DelayedOperation):
    __slots__ = ("statuses", "_lookup", "_respond")

    def __init__(
        self,
        timeout_ms: int,
        statuses: list[ProduceStatus],
        lookup: Callable[[TopicPartition], object | None],
        respond: Callable[[ProduceResponse], None],
    ) -> None:
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._lookup = lookup
        self._respond = respond

    def order(self, key: TopicPartition) -> int:
        # Watched by required offset: an HW move re-checks only requests it covers.  A
        # request naming a partition twice waits for its later append.
        return max((s.required_offset for s in self.statuses if s.tp == key), default=0)

    def try_complete(self) -> bool:
        pending = False
        for status in self.statuses:
            if not status.waiting:
                continue
            partition = self._lookup(status.tp)
            if partition is None:
                done, code = True, errors.UnknownTopicOrPartition.code
            else:
                done, code = partition.check_enough_replicas_reach_offset(status.required_offset)
            if done:
                status.waiting = False
                status.error_code = code
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        results = []
        for s in self.statuses:
            code = errors.RequestTimedOut.code if s.waiting else s.error_code
            if code == errors.NONE:
                results.append(ProducePartitionResult(s.tp, code, s.base_offset, s.log_append_time))
            else:
                results.append(ProducePartitionResult(s.tp, code))
        self._respond(ProduceResponse(tuple(results)))
