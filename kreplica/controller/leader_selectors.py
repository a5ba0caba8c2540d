"""The partition leader selectors, as pure functions.

Theory of operation.  The partition state machine delegates "who leads, with
which ISR, and who must be told" to a selector (seed 002: a strategy per
situation).  Each function here looks only at its arguments -- the assigned
replicas (AR, in assignment order), the current leader/ISR, and the broker sets
it needs -- and returns an :class:`Election` or raises.  The new state carries
``leader_epoch + 1`` and the *old* ``zk_version``: that is the version the
controller's conditional write expects to find (seed 001 step 3.3).

Where seed 000 (Kafka 0.8) and seed 003 (Kafka 0.10) differ, 0.10 is followed:
the offline selector elects the first live replica *in AR order* that is in the
live ISR, and keeps the live ISR in ISR order as the new ISR, which is what
makes seed 003's second scenario elect 1001 with ISR [1003, 1001].

:class:`BoundSelectors` closes the functions over a live
:class:`~kreplica.controller.context.ControllerContext` so the state machine can
call them as ``selector(tp, current)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Callable, Sequence

from .. import errors
from ..protocol import LeaderAndIsr, TopicPartition
from .context import ControllerContext


@dataclass(frozen=True, slots=True)
class Election:
    """A selector's decision: the state to write and the replicas sent LeaderAndIsr."""

    leader_and_isr: LeaderAndIsr
    receivers: tuple[int, ...]


Selector = Callable[[TopicPartition, LeaderAndIsr], Election]


def offline(
    assigned: Sequence[int],
    current: LeaderAndIsr,
    live: AbstractSet[int],
    unclean_enabled: bool,
) -> Election:
    """OfflinePartitionLeaderSelector (seed 003, Kafka 0.10).

    1. Some ISR member is alive: leader = first live AR replica in the live ISR,
       ISR = the live ISR.
    2. Else, unclean election disabled: NoReplicaOnline.
    3. Else: leader = first live AR replica, ISR = [leader] (possible data loss).
    4. No AR replica alive: NoReplicaOnline.
    Receivers: the live assigned replicas.
    """
    live_assigned = tuple(r for r in assigned if r in live)
    live_isr = tuple(r for r in current.isr if r in live)
    if live_isr:
        leader = next((r for r in live_assigned if r in live_isr), None)
        if leader is None:
            raise errors.NoReplicaOnline(
                f"live ISR {list(live_isr)} holds no assigned replica of {list(assigned)}"
            )
        return Election(current.with_leader(leader, live_isr), live_assigned)
    if not unclean_enabled:
        raise errors.NoReplicaOnline(
            f"no ISR member of {list(current.isr)} is alive (live brokers {sorted(live)}) "
            "and unclean.leader.election.enable is false"
        )
    if not live_assigned:
        raise errors.NoReplicaOnline(
            f"no assigned replica of {list(assigned)} is alive (live brokers {sorted(live)})"
        )
    leader = live_assigned[0]
    return Election(current.with_leader(leader, (leader,)), live_assigned)


def after_unclean_restart(
    assigned: Sequence[int],
    current: LeaderAndIsr,
    live: AbstractSet[int],
    unclean: AbstractSet[int],
) -> Election:
    """A leadership its broker held since before an unclean shutdown (KIP-966's gap).

    A new leader epoch in any case, and never an unclean election (the leader is in
    the ISR).  Preference among the live ISR: members that did not come back from an
    unclean shutdown (``unclean``: they may hold what the leader lost), then the
    leader itself, then other members back from one (each may have lost its own
    unflushed tail; nothing says whose loss is smaller).  Otherwise as the offline
    selector.
    """
    order = ([r for r in assigned if r not in unclean] + [current.leader]
             + [r for r in assigned if r in unclean and r != current.leader])
    return offline(order, current, live, unclean_enabled=False)


def reassigned(
    reassigned_replicas: Sequence[int],
    current: LeaderAndIsr,
    live: AbstractSet[int],
) -> Election:
    """ReassignedPartitionLeaderSelector (seed 002).

    Leader = first replica of RAR that is alive and in the current ISR; the ISR
    is kept; receivers are RAR.
    """
    if not reassigned_replicas:
        raise errors.NoReplicaOnline("the list of reassigned replicas is empty")
    for r in reassigned_replicas:
        if r in live and r in current.isr:
            return Election(current.with_leader(r, current.isr), tuple(reassigned_replicas))
    raise errors.NoReplicaOnline(
        f"no reassigned replica of {list(reassigned_replicas)} is alive and in ISR {list(current.isr)}"
    )


def preferred(
    assigned: Sequence[int],
    current: LeaderAndIsr,
    live: AbstractSet[int],
) -> Election:
    """PreferredReplicaPartitionLeaderSelector (seed 002).

    The preferred replica (first of AR) leads if it is alive and in the ISR; the
    ISR is kept; receivers are the live assigned replicas.  Raises
    ElectionNotNeeded when it already leads, PreferredLeaderNotAvailable when
    it cannot.
    """
    if not assigned:
        raise errors.PreferredLeaderNotAvailable("partition has no assigned replicas")
    pref = assigned[0]
    if current.leader == pref:
        raise errors.ElectionNotNeeded(f"preferred replica {pref} already leads")
    if pref in live and pref in current.isr:
        receivers = tuple(r for r in assigned if r in live)
        return Election(current.with_leader(pref, current.isr), receivers)
    raise errors.PreferredLeaderNotAvailable(
        f"preferred replica {pref} is not alive or not in ISR {list(current.isr)}"
    )


def controlled_shutdown(
    assigned: Sequence[int],
    current: LeaderAndIsr,
    live_or_shutting_down: AbstractSet[int],
    shutting_down: AbstractSet[int],
) -> Election:
    """ControlledShutdownLeaderSelector (seed 003).

    New ISR = current ISR minus the shutting-down brokers (ISR order kept);
    leader = first assigned replica, alive, that is in the new ISR.  Receivers
    are the assigned replicas still alive *including* the shutting-down ones,
    which must learn that they now follow.  Raises EligibleLeadersNotAvailable
    when no other ISR member remains.
    """
    live_assigned = tuple(r for r in assigned if r in live_or_shutting_down)
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    for r in live_assigned:
        if r in new_isr:
            return Election(current.with_leader(r, new_isr), live_assigned)
    raise errors.EligibleLeadersNotAvailable(
        f"no replica of ISR {list(current.isr)} is left besides shutting-down brokers {sorted(shutting_down)}"
    )


def noop(assigned: Sequence[int], current: LeaderAndIsr) -> Election:
    """NoOpLeaderSelector (seed 002): keep leader and ISR; tell every assigned replica."""
    return Election(current, tuple(assigned))


class BoundSelectors:
    """The selectors closed over a controller context (and its unclean policy)."""

    def __init__(self, ctx: ControllerContext, unclean_enabled: Callable[[str], bool]) -> None:
        self._ctx = ctx
        self._unclean = unclean_enabled

    def offline(self, tp: TopicPartition, current: LeaderAndIsr) -> Election:
        ctx = self._ctx
        return offline(ctx.assignment(tp), current, ctx.live_broker_ids, self._unclean(tp.topic))

    def reassigned(self, tp: TopicPartition, current: LeaderAndIsr) -> Election:
        ctx = self._ctx
        rar = ctx.partitions_being_reassigned[tp].new_replicas
        return reassigned(rar, current, ctx.live_broker_ids)

    def preferred(self, tp: TopicPartition, current: LeaderAndIsr) -> Election:
        ctx = self._ctx
        return preferred(ctx.assignment(tp), current, ctx.live_broker_ids)

    def controlled_shutdown(self, tp: TopicPartition, current: LeaderAndIsr) -> Election:
        ctx = self._ctx
        return controlled_shutdown(
            ctx.assignment(tp), current, ctx.live_or_shutting_down_broker_ids,
            ctx.shutting_down_broker_ids,
        )

    def after_unclean_restart(self, unclean: AbstractSet[int]) -> Selector:
        ctx = self._ctx
        return lambda tp, current: after_unclean_restart(ctx.assignment(tp), current, ctx.live_broker_ids, unclean)

    def noop(self, tp: TopicPartition, current: LeaderAndIsr) -> Election:
        return noop(self._ctx.assignment(tp), current)
