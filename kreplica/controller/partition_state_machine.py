"""PartitionStateMachine: the four partition states and their transitions (seed 000).

Theory of operation.  The controller moves sets of partitions to a target state
with :meth:`PartitionStateMachine.handle_state_changes`.  Each partition's
transition is checked against :data:`VALID_PREVIOUS_STATES`; an illegal one
fails with :class:`~kreplica.errors.StateChangeFailed` and leaves that
partition's state unchanged, the others proceed.  The actions are exactly seed
000's:

* NonExistent -> New: load the assigned replicas from the store into the context.
* New -> Online: first live assigned replica leads, all live assigned replicas
  are the ISR; the state node is created; LeaderAndIsr to the live assigned
  replicas and UpdateMetadata to every live broker.
* Online, Offline -> Online: the given selector picks leader, ISR and receivers;
  the state node is written conditionally; LeaderAndIsr to the receivers and
  UpdateMetadata to every live broker.
* New, Online, Offline -> Offline: only the state is marked.
* Offline -> NonExistent: only the state is marked.

All writes of one pass go to the store together (one create and one
conditional-update batch) and all requests of one pass go out as one
:class:`~kreplica.controller.request_batch.ControllerBrokerRequestBatch`.
"""
from __future__ import annotations

import enum
from typing import Callable, Iterable, Mapping, Protocol

from .. import errors
from ..protocol import LeaderAndIsr, TopicPartition
from .context import ControllerContext
from .leader_selectors import Election, Selector
from .request_batch import ControllerBrokerRequestBatch
from .state_writer import PartitionStateStore, write_states
from .transitions import raise_if_failed, split_legal


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


P = PartitionState

VALID_PREVIOUS_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
}


class AssignmentSource(Protocol):
    def get_topic_assignment(self, topic: str) -> Mapping[int, list[int]]: ...


class Store(AssignmentSource, PartitionStateStore, Protocol):
    pass


class PartitionStateMachine:
    def __init__(
        self,
        ctx: ControllerContext,
        store: Store,
        batch: ControllerBrokerRequestBatch,
        offline_selector: Selector,
        excluded_topic: Callable[[str], bool] = lambda topic: False,
    ) -> None:
        self._ctx = ctx
        self._store = store
        self._batch = batch
        self._offline_selector = offline_selector
        # Topics queued for deletion are never brought online (TopicDeletionManager).
        self._excluded_topic = excluded_topic
        self.states: dict[TopicPartition, PartitionState] = {}

    def state(self, tp: TopicPartition) -> PartitionState:
        return self.states.get(tp, P.NON_EXISTENT)

    # -- lifecycle -------------------------------------------------------------
    def startup(self) -> dict[TopicPartition, errors.KReplicaError]:
        """Seed the states from the context, then bring new/offline partitions online."""
        live = self._ctx.live_broker_ids
        for tp in self._ctx.partition_assignment:
            st = self._ctx.leadership.get(tp)
            if st is None:
                self.states[tp] = P.NEW
            elif st.leader in live:
                self.states[tp] = P.ONLINE
            else:
                self.states[tp] = P.OFFLINE
        return self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        self.states.clear()

    def trigger_online_partition_state_change(self) -> dict[TopicPartition, errors.KReplicaError]:
        """Every New or Offline partition not queued for deletion -> Online (offline selector)."""
        tps = [tp for tp, s in self.states.items()
               if s in (P.NEW, P.OFFLINE) and not self._excluded_topic(tp.topic)]
        return self.handle_state_changes(tps, P.ONLINE, self._offline_selector)

    # -- transitions -----------------------------------------------------------
    def handle_state_change(self, tp: TopicPartition, target: PartitionState,
                            selector: Selector | None = None) -> None:
        """One partition; raises the reason when the transition failed."""
        raise_if_failed(tp, self.handle_state_changes([tp], target, selector))

    def handle_state_changes(
        self,
        tps: Iterable[TopicPartition],
        target: PartitionState,
        selector: Selector | None = None,
    ) -> dict[TopicPartition, errors.KReplicaError]:
        """Move ``tps`` to ``target``; returns the partitions that failed, with why."""
        legal, failed = split_legal(tps, self.state, target, VALID_PREVIOUS_STATES,
                                    lambda tp: f"partition {tp}")
        if target is P.NEW:
            self._to_new(legal, failed)
        elif target is P.ONLINE:
            new = [tp for tp in legal if self.states.get(tp) is P.NEW]
            electing = [tp for tp in legal if self.states.get(tp) is not P.NEW]
            self._initialize_leader_and_isr(new, failed)
            self._elect_leaders(electing, selector or self._offline_selector, failed)
        else:
            for tp in legal:
                self.states[tp] = target
        self._batch.send(self._ctx.epoch)
        return failed

    def _to_new(self, tps: list[TopicPartition], failed: dict[TopicPartition, errors.KReplicaError]) -> None:
        assignments: dict[str, Mapping[int, list[int]]] = {}
        for tp in tps:
            if tp.topic not in assignments:
                assignments[tp.topic] = self._store.get_topic_assignment(tp.topic)
            replicas = assignments[tp.topic].get(tp.partition)
            if not replicas:
                failed[tp] = errors.StateChangeFailed(f"{tp} has no replicas assigned in the store")
                continue
            self._ctx.set_assignment(tp, replicas)
            self.states[tp] = P.NEW

    def _initialize_leader_and_isr(
        self, tps: list[TopicPartition], failed: dict[TopicPartition, errors.KReplicaError]
    ) -> None:
        ctx = self._ctx
        proposals: dict[TopicPartition, LeaderAndIsr] = {}
        receivers: dict[TopicPartition, list[int]] = {}
        for tp in tps:
            live = ctx.live_assigned(tp)
            if not live:
                failed[tp] = errors.NoReplicaOnline(
                    f"{tp}: no assigned replica of {ctx.assignment(tp)} is alive"
                )
                continue
            proposals[tp] = LeaderAndIsr(live[0], 0, tuple(live), 0, ctx.epoch)
            receivers[tp] = live
        if not proposals:
            return
        created, refused = self._store.create_partition_states(proposals)
        for tp, exc in refused.items():
            failed[tp] = errors.StateChangeFailed(
                f"{tp}: could not create its state node ({exc!r}); another controller wrote it?"
            )
        for tp, st in created.items():
            ctx.leadership[tp] = st
            self._batch.add_leader_and_isr(receivers[tp], tp, st, ctx.assignment(tp), is_new=True)
            self.states[tp] = P.ONLINE

    def _elect_leaders(
        self,
        tps: list[TopicPartition],
        selector: Selector,
        failed: dict[TopicPartition, errors.KReplicaError],
    ) -> None:
        if not tps:
            return
        elections: dict[TopicPartition, Election] = {}

        def propose(tp: TopicPartition, current: LeaderAndIsr) -> LeaderAndIsr:
            election = selector(tp, current)
            elections[tp] = election
            return election.leader_and_isr

        result = write_states(self._store, self._ctx, tps, propose)
        failed.update(result.failed)
        for tp, st in result.written.items():
            self._batch.add_leader_and_isr(elections[tp].receivers, tp, st, self._ctx.assignment(tp))
            self.states[tp] = P.ONLINE
