"""TopicDeletionManager: deleting a topic through the replica deletion states.

Theory of operation.  An admin marks a topic with ``/admin/delete_topics/<t>``.
The topic is *queued*; while queued none of its partitions is brought online.
Deletion of a queued topic proceeds only while it is *eligible*: no partition
of it is being reassigned or in a preferred election and no earlier attempt
failed for a reason not yet cleared (a replica on a dead broker).

One attempt (:meth:`_on_topic_deletion`): every broker is told the topic's
partitions are gone (UpdateMetadata), its partitions go Offline, and each
replica not yet deleted goes OfflineReplica -> ReplicaDeletionStarted, which
sends StopReplica with delete.  A replica on a dead broker cannot answer: it
goes straight on to ReplicaDeletionIneligible and the topic becomes
ineligible.  Each StopReplica answer moves its replica to
ReplicaDeletionSuccessful (or Ineligible on error).  When all replicas are
Successful the topic is completed: replicas NonExistent, partitions
NonExistent, the topic's znodes and admin node removed, the context forgets it.
Deletion resumes (:meth:`resume_deletion_for_topics`) when a broker hosting one
of its replicas starts or a reassignment of it completes; Ineligible replicas
are then retried from OfflineReplica.

With ``delete.topic.enable=false`` the admin nodes are removed and nothing is
deleted, as Kafka does.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Iterable

from . import events
from .context import PartitionReplica
from .partition_state_machine import PartitionState
from .replica_state_machine import ReplicaState

if TYPE_CHECKING:
    from .controller import KafkaController

R = ReplicaState


class TopicDeletionManager:
    def __init__(self, controller: "KafkaController") -> None:
        self._c = controller
        self.topics_to_be_deleted: set[str] = set()
        self.topics_ineligible: set[str] = set()
        self.completed: list[str] = []

    @property
    def enabled(self) -> bool:
        return bool(self._c.config.get("delete.topic.enable", True))

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    # -- lifecycle ---------------------------------------------------------------
    def initialize(self, topics: Iterable[str]) -> None:
        """Failover: queue the admin path's topics; those with work in progress are ineligible."""
        ctx = self._c.ctx
        topics = set(topics)
        if not self.enabled:
            self._c.zk.delete_topic_deletions(sorted(topics))
            return
        gone = {t for t in topics if t not in ctx.all_topics}
        if gone:
            self._c.zk.delete_topic_deletions(sorted(gone))
        self.topics_to_be_deleted = topics - gone
        busy = {tp.topic for tp in ctx.partitions_being_reassigned}
        busy |= {tp.topic for tp in ctx.partitions_undergoing_preferred_election}
        dead = {pr.tp.topic for t in self.topics_to_be_deleted for pr in ctx.replicas_for_topic(t)
                if pr.replica not in ctx.live_or_shutting_down_broker_ids}
        self.topics_ineligible = self.topics_to_be_deleted & (busy | dead)

    def start(self) -> None:
        self._resume()

    def enqueue(self, topics: Iterable[str]) -> None:
        """The delete-topics watch: queue new topics (or clear the admin nodes when disabled)."""
        topics = set(topics)
        if not self.enabled:
            self._c.zk.delete_topic_deletions(sorted(topics))
            return
        ctx = self._c.ctx
        unknown = {t for t in topics if t not in ctx.all_topics}
        if unknown:
            self._c.zk.delete_topic_deletions(sorted(unknown))
        new = topics - unknown - self.topics_to_be_deleted
        if not new:
            return
        self.topics_to_be_deleted |= new
        busy = {tp.topic for tp in ctx.partitions_being_reassigned}
        self.topics_ineligible |= new & busy
        self._resume()

    # -- eligibility ---------------------------------------------------------------
    def mark_topic_ineligible(self, topics: Iterable[str]) -> None:
        self.topics_ineligible |= set(topics) & self.topics_to_be_deleted

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        queued = set(topics) & self.topics_to_be_deleted
        if queued:
            self.topics_ineligible -= queued
            self._resume()

    def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        """Replicas that could not be deleted (error answer or dead broker) -> Ineligible."""
        replicas = [pr for pr in replicas if pr.tp.topic in self.topics_to_be_deleted]
        if not replicas:
            return
        started = [pr for pr in replicas if self._c.rsm.state(pr) is R.DELETION_STARTED]
        self._c.rsm.handle_state_changes(started, R.DELETION_INELIGIBLE)
        self.mark_topic_ineligible({pr.tp.topic for pr in replicas})
        self._resume()

    def _eligible(self, topic: str) -> bool:
        ctx = self._c.ctx
        if topic in self.topics_ineligible:
            return False
        return not any(tp.topic == topic for tp in ctx.partitions_being_reassigned) and not any(
            tp.topic == topic for tp in ctx.partitions_undergoing_preferred_election)

    # -- the work ------------------------------------------------------------------
    def _resume(self) -> None:
        rsm = self._c.rsm
        for topic in sorted(self.topics_to_be_deleted):
            replicas = self._c.ctx.replicas_for_topic(topic)
            states = {rsm.state(pr) for pr in replicas}
            if states <= {R.DELETION_SUCCESSFUL}:
                self._complete(topic)
            elif R.DELETION_STARTED in states:
                continue  # answers still outstanding
            elif self._eligible(topic):
                self._on_topic_deletion(topic)

    def _on_topic_deletion(self, topic: str) -> None:
        c = self._c
        ctx = c.ctx
        partitions = ctx.partitions_for_topic(topic)
        c.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, partitions, deleted=True)
        c.psm.handle_state_changes(partitions, PartitionState.OFFLINE)
        pending = [pr for pr in ctx.replicas_for_topic(topic) if c.rsm.state(pr) is not R.DELETION_SUCCESSFUL]
        live = ctx.live_or_shutting_down_broker_ids
        c.rsm.handle_state_changes(pending, R.OFFLINE)
        c.rsm.handle_state_changes(pending, R.DELETION_STARTED, callback=self._answer_handler())
        dead = [pr for pr in pending if pr.replica not in live]
        if dead:
            c.rsm.handle_state_changes(dead, R.DELETION_INELIGIBLE)
            self.topics_ineligible.add(topic)
            # Retried from OfflineReplica when the broker returns (resume_deletion_for_topics).

    def _answer_handler(self) -> Callable[[PartitionReplica, int], None]:
        """StopReplica answers arrive later, outside any watch: run them as the
        controller runs its watch handlers (a failure ends the term, not the runtime).
        An answer to an earlier term's request is dropped, as a watch of that term is:
        the same controller may have resigned and won again meanwhile, and the new
        term's deletion must not fail on the old request's error."""
        c = self._c
        term = c._generation

        def on_answer(replica: PartitionReplica, error_code: int) -> None:
            if c.is_active and c._generation == term:
                c._react(functools.partial(c.process, events.StopReplicaAnswer(replica, error_code)))

        return on_answer

    def on_stop_replica_answer(self, replica: PartitionReplica, error_code: int) -> None:
        c = self._c
        if not c.is_active or c.rsm.state(replica) is not R.DELETION_STARTED:
            return
        if error_code:
            self.fail_replica_deletion([replica])
            return
        c.rsm.handle_state_changes([replica], R.DELETION_SUCCESSFUL)
        self._resume()

    def _complete(self, topic: str) -> None:
        c = self._c
        ctx = c.ctx
        c.rsm.handle_state_changes(ctx.replicas_for_topic(topic), R.NON_EXISTENT)
        partitions = ctx.partitions_for_topic(topic)
        c.psm.handle_state_changes(partitions, PartitionState.OFFLINE)
        c.psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
        for tp in partitions:
            c.psm.states.pop(tp, None)
        c.zk.delete_topic_znodes(topic)
        c.zk.delete_topic_deletions([topic])
        ctx.remove_topic(topic)
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible.discard(topic)
        self.completed.append(topic)
