"""Shared value types: a partition's identity and its leader/ISR state."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..fast_init import fast_init

NO_LEADER = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@fast_init
@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The partition state the controller (and an ISR-changing leader) writes.

    ``zk_version`` is the version of the state node it was read at / written as;
    every write of this state is conditional on it (seed 001 step 3.3).
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = 0
    controller_epoch: int = 0

    def __post_init__(self) -> None:
        if len(set(self.isr)) != len(self.isr):
            raise ValueError(f"duplicate replicas in ISR {self.isr}")

    def with_leader(self, leader: int, isr: tuple[int, ...]) -> "LeaderAndIsr":
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.zk_version, self.controller_epoch)

    def with_isr(self, isr: tuple[int, ...]) -> "LeaderAndIsr":
        return LeaderAndIsr(self.leader, self.leader_epoch, tuple(isr), self.zk_version, self.controller_epoch)
