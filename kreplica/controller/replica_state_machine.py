"""ReplicaStateMachine: the seven replica states and their transitions (seeds 000, 002).

Theory of operation.  A replica is one (partition, broker) pair.  The controller
moves sets of replicas with :meth:`ReplicaStateMachine.handle_state_changes`;
each transition is checked against :data:`VALID_PREVIOUS_STATES`, an illegal
one fails with :class:`~kreplica.errors.StateChangeFailed` and leaves that
replica unchanged.  The actions are exactly the seeds':

* NonExistent -> New: LeaderAndIsr with the current leader/ISR to the replica
  (UpdateMetadata for the partition to every live broker comes with it).
* New -> Online: add the replica to the assigned replicas if missing.
* Online, Offline, DeletionIneligible -> Online: LeaderAndIsr with the current
  leader/ISR to the replica (and UpdateMetadata), if the partition ever had one.
* New, Online, Offline, DeletionIneligible -> Offline: StopReplica (no delete)
  to the replica; remove it from the ISR with a conditional write and send the
  shrunk state (and UpdateMetadata).  Seeds 000/002 send it to the leader only;
  we send it to every remaining assigned replica, as Kafka 2.x does, because the
  write bumps the leader epoch and our followers fetch with their epoch
  (FENCED_LEADER_EPOCH, KIP-320): a follower left on the old epoch would be
  fenced by its leader and fall out of the ISR.
* Offline -> DeletionStarted: StopReplica with delete to the replica.
* DeletionStarted -> DeletionSuccessful / DeletionIneligible: mark only.
* DeletionSuccessful -> NonExistent: drop the replica from the assigned replicas.

One departure from Kafka 0.8/0.10, taken from later Kafka: the ISR never shrinks
to empty.  When the last ISR member goes offline the partition keeps it in the
ISR (with no leader), so that it can be elected cleanly when it returns.
"""
from __future__ import annotations

import enum
from collections import defaultdict
from typing import Callable, Iterable

from .. import errors
from ..protocol import LeaderAndIsr, TopicPartition
from ..protocol.common import NO_LEADER
from .context import ControllerContext, PartitionReplica
from .request_batch import ControllerBrokerRequestBatch, StopReplicaCallback
from .state_writer import PartitionStateStore, write_states
from .transitions import raise_if_failed, split_legal


class ReplicaState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


R = ReplicaState

VALID_PREVIOUS_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, store: PartitionStateStore,
                 batch: ControllerBrokerRequestBatch,
                 being_deleted: Callable[[str], bool] = lambda topic: False) -> None:
        self._ctx = ctx
        self._store = store
        self._batch = batch
        self._being_deleted = being_deleted
        self.states: dict[PartitionReplica, ReplicaState] = {}

    def state(self, replica: PartitionReplica) -> ReplicaState:
        return self.states.get(replica, R.NON_EXISTENT)

    # -- lifecycle -------------------------------------------------------------
    def startup(self) -> dict[PartitionReplica, errors.KReplicaError]:
        """Seed the states as Kafka 0.10: replicas on live brokers Online, the rest
        DeletionIneligible (not deletable until their broker returns); then tell every
        live replica its state (Online -> Online).  Moving the dead ones on to
        OfflineReplica is the controller's call (:meth:`offline_dead_replicas`)."""
        live = self._ctx.live_or_shutting_down_broker_ids
        online: list[PartitionReplica] = []
        for tp, ar in self._ctx.partition_assignment.items():
            for r in ar:
                pr = PartitionReplica(tp, r)
                if r in live:
                    self.states[pr] = R.ONLINE
                    online.append(pr)
                else:
                    self.states[pr] = R.DELETION_INELIGIBLE
        return self.handle_state_changes(online, R.ONLINE)

    def offline_dead_replicas(self, excluded_topic: Callable[[str], bool]) -> dict[PartitionReplica, errors.KReplicaError]:
        """Replicas seeded DeletionIneligible on dead brokers -> OfflineReplica, which takes
        them out of the ISRs a dead controller left them in (what onBrokerFailure would
        have done).  Topics queued for deletion keep theirs Ineligible."""
        live = self._ctx.live_or_shutting_down_broker_ids
        dead = [pr for pr, s in self.states.items()
                if s is R.DELETION_INELIGIBLE and pr.replica not in live and not excluded_topic(pr.tp.topic)]
        return self.handle_state_changes(dead, R.OFFLINE)

    def shutdown(self) -> None:
        self.states.clear()

    # -- transitions -----------------------------------------------------------
    def handle_state_change(self, replica: PartitionReplica, target: ReplicaState,
                            callback: StopReplicaCallback | None = None) -> None:
        """One replica; raises the reason when the transition failed."""
        raise_if_failed(replica, self.handle_state_changes([replica], target, callback))

    def handle_state_changes(
        self,
        replicas: Iterable[PartitionReplica],
        target: ReplicaState,
        callback: StopReplicaCallback | None = None,
    ) -> dict[PartitionReplica, errors.KReplicaError]:
        """Move ``replicas`` to ``target``; returns the replicas that failed, with why."""
        legal, failed = split_legal(replicas, self.state, target, VALID_PREVIOUS_STATES,
                                    lambda pr: f"replica {pr.replica} of {pr.tp}")
        handler = {
            R.NEW: self._to_new,
            R.ONLINE: self._to_online,
            R.OFFLINE: self._to_offline,
        }.get(target)
        if handler is not None:
            handler(legal, failed)
        elif target is R.DELETION_STARTED:
            for pr in legal:
                self._batch.add_stop_replica([pr.replica], pr.tp, delete=True, callback=callback)
                self.states[pr] = target
        elif target is R.NON_EXISTENT:
            for pr in legal:
                ar = self._ctx.assignment(pr.tp)
                if pr.replica in ar:
                    self._ctx.set_assignment(pr.tp, [r for r in ar if r != pr.replica])
                del self.states[pr]
        else:  # DELETION_SUCCESSFUL, DELETION_INELIGIBLE: mark only
            for pr in legal:
                self.states[pr] = target
        self._batch.send(self._ctx.epoch)
        return failed

    def _send_current_state(self, pr: PartitionReplica) -> None:
        st = self._ctx.leadership.get(pr.tp)
        if st is not None:
            self._batch.add_leader_and_isr([pr.replica], pr.tp, st, self._ctx.assignment(pr.tp))

    def _to_new(self, legal: list[PartitionReplica], failed: dict) -> None:
        for pr in legal:
            self._send_current_state(pr)
            self.states[pr] = R.NEW

    def _to_online(self, legal: list[PartitionReplica], failed: dict) -> None:
        for pr in legal:
            if self.states.get(pr) is R.NEW:
                ar = self._ctx.assignment(pr.tp)
                if pr.replica not in ar:
                    self._ctx.set_assignment(pr.tp, [*ar, pr.replica])
            else:
                self._send_current_state(pr)
            self.states[pr] = R.ONLINE

    def _to_offline(self, legal: list[PartitionReplica], failed: dict) -> None:
        leaving: dict[TopicPartition, set[int]] = defaultdict(set)
        for pr in legal:
            self._batch.add_stop_replica([pr.replica], pr.tp, delete=False)
            if pr.tp in self._ctx.leadership:
                leaving[pr.tp].add(pr.replica)
            else:
                self.states[pr] = R.OFFLINE

        def propose(tp: TopicPartition, current: LeaderAndIsr) -> LeaderAndIsr | None:
            gone = leaving[tp]
            isr = tuple(r for r in current.isr if r not in gone)
            if not isr and current.isr:
                # Keep one member: the leader if it was in the ISR, else the first.
                keep = current.leader if current.leader in current.isr else current.isr[0]
                isr = (keep,)
            leader = NO_LEADER if current.leader in gone else current.leader
            if isr == current.isr and leader == current.leader:
                return None
            return LeaderAndIsr(leader, current.leader_epoch + 1, isr)

        result = write_states(self._store, self._ctx, list(leaving), propose)
        for tp, st in result.written.items():
            # Also when the partition is left leaderless (leader -1): its other replicas
            # stop fetching from the replica that went, and every broker's metadata shows
            # no leader (seed 002's OfflineReplica row).  Not for a topic being deleted:
            # its replicas are on their way out, and the deletion has already told every
            # broker the partitions are gone (as Kafka 0.10 skips it).
            if self._being_deleted(tp.topic):
                continue
            recipients = [r for r in self._ctx.assignment(tp) if r not in leaving[tp]]
            self._batch.add_leader_and_isr(recipients, tp, st, self._ctx.assignment(tp))
        for tp, gone in leaving.items():
            for r in gone:
                pr = PartitionReplica(tp, r)
                if tp in result.failed:
                    failed[pr] = result.failed[tp]
                else:
                    self.states[pr] = R.OFFLINE
