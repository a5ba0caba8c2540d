"""The leader's view of its ISR, including a change that is proposed but not yet written.

Theory of operation.  A leader never changes its ISR alone (seed 001 'D'): it
proposes the new ISR as a conditional write of the partition state at the
version it knows, and only a successful write makes it the ISR.  While a
proposal is in flight the partition is PENDING_EXPAND or PENDING_SHRINK and
proposes nothing else.  For safety the leader counts the *maximal* ISR meanwhile
(the committed ISR plus a replica being added; the old, larger ISR while
shrinking): the HW waits for every replica that is or may become a member, and
min-ISR checks after the append use that set, as Kafka's AlterIsr design does.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..errors import StateChangeFailed
from ..fast_init import fast_init


class IsrPhase(enum.Enum):
    COMMITTED = "Committed"
    PENDING_EXPAND = "PendingExpand"
    PENDING_SHRINK = "PendingShrink"


# The per-fetch checks compare against these: an Enum member looked up on its class goes
# through a descriptor in Python 3.11 (see partition._LEADER).
_COMMITTED, _PENDING_EXPAND = IsrPhase.COMMITTED, IsrPhase.PENDING_EXPAND

# Written once, checked on every transition (the seeds' assertValidPreviousStates).
LEGAL_PREVIOUS: dict[IsrPhase, frozenset[IsrPhase]] = {
    IsrPhase.COMMITTED: frozenset(IsrPhase),
    IsrPhase.PENDING_EXPAND: frozenset({IsrPhase.COMMITTED}),
    IsrPhase.PENDING_SHRINK: frozenset({IsrPhase.COMMITTED}),
}


@fast_init
@dataclass(frozen=True, slots=True)
class IsrState:
    """``isr`` is what the store holds (in its order); ``proposed`` is the in-flight ISR, if any."""

    isr: tuple[int, ...]
    phase: IsrPhase = IsrPhase.COMMITTED
    proposed: tuple[int, ...] = ()

    @property
    def is_inflight(self) -> bool:
        return self.phase is not _COMMITTED

    @property
    def maximal_isr(self) -> frozenset[int]:
        # Expand: count the joining replica already; shrink: keep the leaving ones.
        if self.phase is _PENDING_EXPAND:
            return frozenset(self.isr) | frozenset(self.proposed)
        return frozenset(self.isr)

    def _to(self, phase: IsrPhase, isr: tuple[int, ...], proposed: tuple[int, ...]) -> "IsrState":
        if self.phase not in LEGAL_PREVIOUS[phase]:
            raise StateChangeFailed(f"ISR state {self.phase.value} -> {phase.value} is illegal")
        return IsrState(isr, phase, proposed)

    def committed(self, isr: tuple[int, ...]) -> "IsrState":
        return self._to(IsrPhase.COMMITTED, tuple(isr), ())

    def pending_expand(self, new_isr: tuple[int, ...]) -> "IsrState":
        return self._to(IsrPhase.PENDING_EXPAND, self.isr, tuple(new_isr))

    def pending_shrink(self, new_isr: tuple[int, ...]) -> "IsrState":
        return self._to(IsrPhase.PENDING_SHRINK, self.isr, tuple(new_isr))
