"""A leader's request to change its ISR (shrink or expand).

The leader never applies an ISR change alone: it proposes ``new_isr`` at the
state version it knows (``zk_version``).  The change takes effect only when the
conditional write of the partition state succeeds; a write that lost to the
controller's newer state is dropped (seed 001 'D').
"""
from __future__ import annotations

from dataclasses import dataclass

from ..fast_init import fast_init
from .common import TopicPartition


@fast_init
@dataclass(frozen=True, slots=True)
class AlterIsrRequest:
    broker_id: int
    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    zk_version: int
    controller_epoch: int


@fast_init
@dataclass(frozen=True, slots=True)
class AlterIsrResponse:
    tp: TopicPartition
    error_code: int
    # On success: the state as written, with its new version.
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    zk_version: int = -1
