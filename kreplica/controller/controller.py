"""KafkaController: one broker's controller candidate, sans-I/O (seeds 000, 001).

Theory of operation.  Every broker runs a :class:`KafkaController`; the one that
creates the ephemeral ``/controller`` node is active -- in the same store
transaction that bumps ``/controller_epoch`` conditionally, so no controller
ever acts under its predecessor's epoch.  On winning it runs
:meth:`_on_controller_failover` in seed 000's order: take the new epoch,
register the store listeners, load the context, start the
replica then the partition state machine, resume reassignments and preferred
elections, send UpdateMetadata to every broker, start the auto-rebalance timer
and the topic deletion manager.  From then on it only reacts: to store watches
(broker ids, topics, a topic's assignment, the admin paths, ISR change
notifications, ``/controller`` itself), to controlled-shutdown requests, to
StopReplica answers and to its own timers.

It never opens sockets, threads or reads the clock: requests go out through
``channel.send(broker_id, request, on_response)``, timers through the
scheduler, and watch callbacks arrive on the scheduler (the store promises
that).  A watch callback reads the store (re-registering the one-shot watch)
and turns what it read into a typed event (:mod:`.events`) for
:meth:`KafkaController.process`.  Each watch belongs to one *term*
(``_generation``); a watch of an older term is ignored and not re-registered.

Resignation: when ``/controller`` is no longer ours, a write finds the state
written by a newer controller epoch, or the session is lost, the controller
stops acting (no writes, no requests), drops its context and, while its
session lives, stands for election again.  Brokers fence requests that carry a
stale epoch.

Brokers back from an unclean shutdown (an extension after KIP-966, whose brokers
register with previous broker epoch -1 after one). A bounce this controller sees --
the same id under a new session -- is handled as failure then startup, so every
partition the broker led gets a new leader epoch. A bounce no controller saw (the
dead leader was the controller, and the next controller's failover reads the brokers
after it has re-registered; or it wins the election itself) would otherwise let the
broker resume its old leadership at the *old* leader epoch with a log that lost its
unflushed tail: it appends new batches at offsets where a follower holds other
batches of the same epoch, and leader-epoch truncation cannot tell the two histories
apart. So a broker whose logs did not all close cleanly registers
``unclean_shutdown_controller_epoch`` = N, the controller epoch it read after
restarting (:func:`kreplica.meta.layout.encode_broker`). Every leadership it held
before the crash was written by a controller of epoch <= N; every later leader
change is written by its controller's epoch. Hence the rule, applied at failover to
live brokers and in a broker change to new ones: a partition such a broker leads
under a state last written with controller epoch <= N is elected again before the
broker is told anything (:func:`~.leader_selectors.after_unclean_restart`: a live
ISR member that is not itself back from an unclean shutdown if there is one, else
the broker itself, always a new epoch); then the broker gets the startup treatment.
At failover, where it sits in such an ISR beside a live member that restarted
cleanly, it is taken out (offline, then online as a follower: the seen bounce's
treatment), so it re-joins only after fetching again the tail it may have lost.
Where no such member is live it stays: failing it out then left only a dead
(perhaps power-lost) member electable, and the simulator counted acked writes lost
that the restarted follower still held. (KIP-966's eligible-leader replicas, which
keep such choices open, are not modelled.)

Handled once per registration. The epoch rule alone cannot tell an ISR written
before the crash from one its leader grew after the broker fetched again: the
leader writes its leadership's controller epoch, which is N when the controller in
office at registration saw the bounce itself (gc-pause-chaos swarm seed 358, where
the next controller then took a re-joined follower out and left a paused broker
alone in the ISR). So once a controller has handled such a registration -- the seen
bounce's failure and startup, or the failover's elections and fences, every write
done -- it records the broker epoch it handled in
``/brokers/unclean_shutdowns_handled/<id>`` (:func:`kreplica.meta.layout.encode_unclean_shutdown_handled`),
and later controllers treat that registration as clean. A write that failed leaves
no record, and the next controller handles it again; a new registration (a new
broker epoch) is never covered by an older record.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, Mapping

from .. import errors
from ..arguments import JAVA_BLANKS, java_boolean
from ..meta import layout
from ..meta.kafka_zk_client import KafkaZkClient
from ..meta.store import BadVersion, SessionExpired, StoreError, WatchEvent
from ..protocol import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsr,
    TopicPartition,
)
from ..runtime import Scheduler, Timer
from . import events, reassignment
from .context import ControllerContext, PartitionReplica, ReassignmentContext
from .leader_imbalance import partitions_to_rebalance
from .leader_selectors import BoundSelectors
from .partition_state_machine import PartitionState, PartitionStateMachine
from .replica_state_machine import ReplicaState, ReplicaStateMachine
from .request_batch import Channel, ControllerBrokerRequestBatch
from .topic_deletion_manager import TopicDeletionManager

# How long a candidate waits before standing again after losing the store.
ELECTION_RETRY_MS = 1000
# Kafka waits this long after failover before the first imbalance check.
REBALANCE_INITIAL_DELAY_MS = 5000
#: Config change notifications are kept this long (Kafka's changeExpirationMs: 15 min).
CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000
#: What the admin nodes' decoders raise on JSON that is not a request (bad JSON, keys missing).
_UNREADABLE = (ValueError, KeyError, TypeError)


class _GatedChannel:
    """Sends only while the controller is active: a resigned controller says nothing."""

    def __init__(self, controller: "KafkaController", channel: Channel) -> None:
        self._controller = controller
        self._channel = channel

    def send(self, broker_id: int, request: object, on_response: Callable[[object], None]) -> None:
        if self._controller.is_active:
            self._channel.send(broker_id, request, on_response)


class KafkaController:
    """The controller candidate of broker ``broker_id``; see the module docstring."""

    def __init__(
        self,
        broker_id: int,
        zk: KafkaZkClient,
        channel: Channel,
        scheduler: Scheduler,
        config: Mapping[str, Any],
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.scheduler = scheduler
        self.config = config
        self._channel = _GatedChannel(self, channel)
        self._active = False
        self._running = False
        self._generation = 0
        self._timers: list[Timer] = []
        # Each topic's config overrides (/config/topics), read once per topic and term.
        self._topic_configs: dict[str, tuple[tuple[str, str], ...]] = {}
        # /config/changes children by name: when this controller first saw each.
        self._config_changes_seen: dict[str, int] = {}
        # Reassignment fault injection (sim/ and tests): called after each step.
        self.reassignment_step_hook: Callable[[TopicPartition, int], None] | None = None
        self.failovers = 0
        # Observer of every event processed, with the scheduler's time (timelines, sim).
        self.event_listener: Callable[[int, events.ControllerEvent], None] | None = None
        self._build()

    def _build(self) -> None:
        """Fresh context and state machines for a new term."""
        self.ctx = ControllerContext()
        self.batch = ControllerBrokerRequestBatch(self.broker_id, self.ctx, self._channel, self._topic_config,
                                                  lambda topic: self.deletion.is_topic_queued_for_deletion(topic))
        self.selectors = BoundSelectors(self.ctx, self._unclean_enabled)
        self.deletion = TopicDeletionManager(self)
        self.psm = PartitionStateMachine(self.ctx, self.zk, self.batch, self.selectors.offline,
                                         self._held_offline_for_deletion)
        self.rsm = ReplicaStateMachine(self.ctx, self.zk, self.batch, self.deletion.is_topic_queued_for_deletion)

    # -- public state ----------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    # -- election --------------------------------------------------------------
    def startup(self) -> None:
        """Stand for election; become controller if ``/controller`` is free."""
        self._running = True
        self.zk.ensure_persistent_paths()
        self._elect()

    def shutdown(self) -> None:
        """Stop standing and stop acting (the broker is going away)."""
        self._running = False
        self.resign()

    def _elect(self) -> None:
        if not self._running or self._active:
            return
        try:
            holder = self.zk.get_controller_id(watch=self._on_controller_event)
            if holder is None:
                # Win /controller and bump /controller_epoch in one transaction, so no
                # controller ever acts under its predecessor's epoch.
                won = self.zk.register_controller_and_increment_epoch(self.broker_id)
                if won is None:
                    return  # lost the race; the watch tells us when it frees up again
            elif holder == self.broker_id:
                # Still ours after losing the store for a while: a new term, a new epoch.
                current = self.zk.get_controller_epoch()
                won = self.zk.increment_controller_epoch(None if current is None else current[1])
            else:
                return
            self._on_controller_failover(*won)
        except SessionExpired:
            self._running = False
        except BadVersion:
            self._abdicate()
        except StoreError:
            self._schedule_election()

    def _on_controller_event(self, event: WatchEvent) -> None:
        """``/controller`` changed.  One bound method for every term, so the store keeps
        a single watch however often it is re-registered."""
        if not self._running:
            return
        try:
            holder = self.zk.get_controller_id(watch=self._on_controller_event)
        except SessionExpired:
            self.resign()
            self._running = False
            return
        except StoreError:
            self.resign()
            self._schedule_election()
            return
        if self._active and holder != self.broker_id:
            self.resign()
        if holder is None:
            self._elect()

    def _schedule_election(self) -> None:
        if self._running:
            self.scheduler.call_later(ELECTION_RETRY_MS, self._elect)

    def resign(self) -> None:
        """onControllerResignation: stop acting at once and forget the term's state."""
        if not self._active:
            return
        self._active = False
        self._generation += 1
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        self._topic_configs.clear()
        self._build()

    def _abdicate(self) -> None:
        """Give up after a failed failover: resign and free ``/controller`` for another."""
        self.resign()
        try:
            if self.zk.get_controller_id() == self.broker_id:
                self.zk.session.delete(layout.CONTROLLER)
        except StoreError:
            pass
        self._schedule_election()

    # -- failover (seed 000 onControllerFailover) --------------------------------
    def _on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        self._generation += 1
        # 1. the controller epoch, incremented conditionally by the election
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, epoch_zk_version
        self._active = True
        self.failovers += 1
        self._react(functools.partial(self._failover_steps, self._generation))

    def _failover_steps(self, gen: int) -> None:
        """Steps 2-11 of seed 000's onControllerFailover, in its order."""
        # 2. register listeners; their first reads are the source of truth loaded in 3.
        reassigning = self._reassignment_request(self._watch(gen, self._on_reassignment_change))
        preferred = self._preferred_election_request(self._watch(gen, self._on_preferred_change))
        topics = self.zk.get_all_topics(watch=self._watch(gen, self._on_topic_change))
        deleting = self.zk.get_topic_deletions(watch=self._watch(gen, self._on_delete_topics_change))
        live, unclean = self._read_registrations(
            self.zk.get_live_broker_ids(watch=self._watch(gen, self._on_broker_change)))
        isr_changes = self.zk.get_isr_change_notifications(watch=self._watch(gen, self._on_isr_change))
        self._config_changes_seen = dict.fromkeys(
            self.zk.get_config_changes(watch=self._watch(gen, self._on_config_change)), self.scheduler.now_ms())
        # 3. initialize the context
        self._initialize_context(live, topics, reassigning)
        # Back from an unclean shutdown and still leading from before it (module
        # docstring): told nothing until those partitions have a new epoch.
        stale = self._stale_leaderships(unclean)
        restarted = {st.leader for st in stale.values()}
        suspect = self._stale_isr_members(unclean, live)
        self.ctx.set_live_brokers(set(live) - restarted)
        self.deletion.initialize(deleting)
        self.batch.mark_init(self.ctx.live_or_shutting_down_broker_ids)
        # 4-5. replica state machine, then partition state machine
        self.rsm.startup()
        self.ctx.set_live_brokers(live)
        self.psm.startup()
        self._elect_after_unclean_restart(stale, unclean)
        # Dead brokers' replicas leave the ISRs only now, after the elections, so
        # a partition whose leader died is elected once (seed 003: leader_epoch 3).
        self.rsm.offline_dead_replicas(self.deletion.is_topic_queued_for_deletion)
        self._fence_stale_isr_members(suspect)
        if restarted:
            # Not the reassignments yet: step 7 validates the admin path's first.
            self.on_broker_startup(sorted(restarted), resume_reassignments=False)
        self._record_unclean_handled(unclean, stale)
        # 6. partition change listeners for every topic
        for topic in sorted(self.ctx.all_topics):
            self._watch_topic(topic)
        # 7-8. resume reassignments and preferred elections
        self._maybe_trigger_partition_reassignment(reassigning)
        self.process(events.PreferredReplicaElection(tuple(sorted(preferred))))
        # 9. leadership info to every broker
        self.send_update_metadata(self.ctx.live_or_shutting_down_broker_ids)
        # 10. auto leader rebalance
        if self.config.get("auto.leader.rebalance.enable", True):
            self._schedule_rebalance(REBALANCE_INITIAL_DELAY_MS)
        # 11. topic deletion
        self.deletion.start()
        # ISR changes announced while no controller was active.
        self.process(events.IsrChangeNotification(tuple(isr_changes)))

    def _initialize_context(self, live: Mapping[int, int], topics: Iterable[str],
                            reassigning: Mapping[TopicPartition, list[int]]) -> None:
        ctx = self.ctx
        ctx.set_live_brokers(live)
        ctx.broker_epochs = dict(live)
        ctx.all_topics = set(topics)
        for tp, replicas in self.zk.get_replica_assignment(sorted(ctx.all_topics)).items():
            ctx.set_assignment(tp, replicas)
        ctx.leadership.update(self.zk.get_partition_states(list(ctx.partition_assignment)))
        self._load_topic_configs(ctx.all_topics)
        for tp, rar in reassigning.items():
            if tp in ctx.partition_assignment:
                ctx.partitions_being_reassigned[tp] = ReassignmentContext(tuple(rar))

    # -- watches -----------------------------------------------------------------
    def _watch(self, gen: int, handler: Callable[[], None]) -> Callable[[WatchEvent], None]:
        """A one-shot watch bound to term ``gen``; it does nothing once the term is over."""

        def fire(event: WatchEvent) -> None:
            if gen != self._generation or not self._active:
                return
            self._react(handler)

        return fire

    def _guarded(self, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        """Run one action of the term: (True, its result), or (False, None) when the
        controllership or the store was lost mid-way -- the term then ends (a fresh
        term reloads everything, so a half-done action leaves nothing stale behind)."""
        try:
            return True, fn(*args)
        except errors.NotController:
            self._abdicate()
        except SessionExpired:
            self.resign()
            self._running = False
        except StoreError:
            self.resign()
            self._schedule_election()
        return False, None

    def _react(self, handler: Callable[[], None]) -> None:
        """Run a watch or timer handler.  Nobody waits for its outcome, so any Kafka
        error it meets (say, a topic deleted under a reassignment) also ends the term
        rather than leaving the context half-updated; the next term starts clean."""
        try:
            self._guarded(handler)
        except errors.KReplicaError:
            self.resign()
            self._schedule_election()
        except Exception:
            # Anything else is a bug, and surfaces.  The term ends first, /controller freed
            # (seed 000: a controller meeting an unexpected error while becoming controller
            # resigns, so that another election runs): kept, it left an active controller
            # with an empty context that handled nothing, for good.
            self._abdicate()
            raise

    def _act(self, fn: Callable[..., Any], *args: Any) -> Any:
        """An action requested from outside (a broker, an admin API)."""
        if not self._active:
            raise errors.NotController(f"broker {self.broker_id} is not the controller")
        done, result = self._guarded(fn, *args)
        if not done:
            raise errors.NotController(f"broker {self.broker_id} stopped being the controller")
        return result

    # -- watches: read the store (re-registering the one-shot watch), make the event --------
    def _on_broker_change(self) -> None:
        live = self.zk.get_live_broker_ids(watch=self._watch(self._generation, self._on_broker_change))
        epochs, unclean = self._read_registrations(live)
        self.process(events.BrokerChange(tuple(epochs), tuple(epochs.values()), tuple(sorted(unclean.items()))))

    def _read_registrations(self, broker_ids: Iterable[int]) -> tuple[dict[int, int], dict[int, int]]:
        """({broker: the session that registered it}, {broker: its unclean-shutdown
        controller epoch}) in one batched read.  A new session means the broker
        restarted, even when the controller never saw its id missing (Kafka 2.x's
        broker epoch, from the registration node's ephemeral owner)."""
        ids = sorted(broker_ids)
        got = self.zk.session.get_many([layout.broker_path(b) for b in ids])
        epochs, unclean = {}, {}
        for b, g in zip(ids, got):
            if g is None:
                continue
            epochs[b] = g[1].ephemeral_owner
            since = layout.decode_broker(b, g[0]).unclean_shutdown_controller_epoch
            if since is not None:
                unclean[b] = since
        if unclean:
            # Restarts a controller has already handled in full need no second look.
            handled = self.zk.get_unclean_shutdowns_handled(sorted(unclean))
            unclean = {b: e for b, e in unclean.items() if handled.get(b) != epochs[b]}
        return epochs, unclean

    def _record_unclean_handled(self, unclean: Mapping[int, int],
                                stale: Mapping[TopicPartition, LeaderAndIsr]) -> None:
        """Mark each of ``unclean`` (brokers back from an unclean shutdown whose
        registration this controller has just handled; ``stale``: their pre-crash
        leaderships as found before) as handled for its current broker epoch -- unless
        a write failed and left it still suspect: leading a ``stale`` partition at the
        same leader epoch, or in a pre-crash ISR beside a live member that restarted
        cleanly.  Once marked, an ISR holding it was written by a controller that knew
        of the restart or grown by a leader after it fetched again, so later failovers
        leave it there (module docstring)."""
        if not unclean:
            return
        leadership, live = self.ctx.leadership, self.ctx.live_broker_ids
        clean = live - set(unclean)
        suspect = {st.leader for tp, st in stale.items()
                   if tp in leadership and (leadership[tp].leader, leadership[tp].leader_epoch)
                   == (st.leader, st.leader_epoch)}
        suspect.update(b for st in leadership.values() if clean.intersection(st.isr)
                       for b in st.isr
                       if b in unclean and b != st.leader and st.controller_epoch <= unclean[b])
        for b in sorted(live.intersection(unclean) - suspect):
            self.zk.set_unclean_shutdown_handled(b, self.ctx.broker_epochs[b], self.epoch)

    def _stale_leaderships(self, unclean: Mapping[int, int]) -> dict[TopicPartition, LeaderAndIsr]:
        """The partitions led by a broker of ``unclean`` ({broker: controller epoch it
        registered with after an unclean shutdown}) under a state written with that epoch
        or an older one: leaderships from before its crash (module docstring)."""
        if not unclean:
            return {}
        return {tp: st for tp, st in self.ctx.leadership.items()
                if st.leader in unclean and st.controller_epoch <= unclean[st.leader]}

    def _stale_isr_members(self, unclean: Mapping[int, int],
                           live: Iterable[int]) -> list[PartitionReplica]:
        """Replicas of brokers back from an unclean shutdown that sit in an ISR written
        before the crash (controller epoch <= the one registered) beside a live member
        that did not restart uncleanly: they may have lost their unflushed tail, and the
        other member holds it. Read before any election rewrites those states."""
        if not unclean:
            return []
        clean = set(live) - set(unclean)
        return [PartitionReplica(tp, b)
                for tp, st in sorted(self.ctx.leadership.items())
                if clean.intersection(st.isr)
                for b in st.isr
                if b in unclean and st.controller_epoch <= unclean[b]]

    def _fence_stale_isr_members(self, suspect: list[PartitionReplica]) -> None:
        """Out of the ISR and back as followers (the seen bounce's failure then startup),
        so each re-joins only once it has fetched again what it may have lost."""
        leadership = self.ctx.leadership
        # One the election left leading (no other member could be) keeps its place.
        suspect = [pr for pr in suspect if pr.tp in leadership and leadership[pr.tp].leader != pr.replica]
        if suspect:
            self.rsm.handle_state_changes(suspect, ReplicaState.OFFLINE)
            self.rsm.handle_state_changes(suspect, ReplicaState.ONLINE)

    def _elect_after_unclean_restart(self, stale: Mapping[TopicPartition, LeaderAndIsr],
                                     unclean: Iterable[int]) -> None:
        """A new leader epoch for each of ``stale`` (:meth:`_stale_leaderships`), before its
        old leader hears of it again; brokers of ``unclean`` (back from an unclean shutdown)
        are the last choice."""
        if stale:
            self.psm.handle_state_changes(list(stale), PartitionState.ONLINE,
                                          self.selectors.after_unclean_restart(frozenset(unclean)))

    def _on_topic_change(self) -> None:
        topics = self.zk.get_all_topics(watch=self._watch(self._generation, self._on_topic_change))
        self.process(events.TopicChange(tuple(sorted(topics))))

    def _watch_topic(self, topic: str) -> dict[int, list[int]] | None:
        """Read a topic's assignment, watching it for added partitions; None when gone."""
        watch = self._watch(self._generation, functools.partial(self._on_partition_change, topic))
        try:
            return self.zk.get_topic_assignment(topic, watch=watch)
        except errors.UnknownTopicOrPartition:
            return None

    def _on_partition_change(self, topic: str) -> None:
        if topic not in self.ctx.all_topics:
            return
        assignment = self._watch_topic(topic)
        if assignment is not None:
            self.process(events.PartitionModifications(
                topic, tuple((p, tuple(r)) for p, r in sorted(assignment.items()))))

    def _on_delete_topics_change(self) -> None:
        topics = self.zk.get_topic_deletions(watch=self._watch(self._generation, self._on_delete_topics_change))
        self.process(events.TopicDeletion(tuple(sorted(topics))))

    def _on_reassignment_change(self) -> None:
        wanted = self._reassignment_request(self._watch(self._generation, self._on_reassignment_change))
        self.process(events.PartitionReassignment(tuple(sorted((tp, tuple(r)) for tp, r in wanted.items()))))

    def _on_preferred_change(self) -> None:
        tps = self._preferred_election_request(self._watch(self._generation, self._on_preferred_change))
        self.process(events.PreferredReplicaElection(tuple(sorted(tps))))

    # An admin node is written by tools other than ours too.  One that does not decode is a
    # request no controller can carry out: it is removed, as Kafka removes a reassignment it
    # cannot start "to unblock the admin client", and read as no request.  The decoder's
    # error used to escape a failover half done: that controller stayed active, handling nothing.
    def _reassignment_request(self, watch: Callable[[WatchEvent], None]) -> dict[TopicPartition, list[int]]:
        try:
            return self.zk.get_partition_reassignment(watch=watch)
        except _UNREADABLE:
            self.zk.delete_partition_reassignment()
            return {}

    def _preferred_election_request(self, watch: Callable[[WatchEvent], None]) -> set[TopicPartition]:
        try:
            return self.zk.get_preferred_replica_election(watch=watch)
        except _UNREADABLE:
            self.zk.delete_preferred_replica_election()
            return set()

    def _on_config_change(self) -> None:
        names = self.zk.get_config_changes(watch=self._watch(self._generation, self._on_config_change))
        self.process(events.TopicConfigChange(tuple(names)))

    def _on_isr_change(self) -> None:
        names = self.zk.get_isr_change_notifications(watch=self._watch(self._generation, self._on_isr_change))
        self.process(events.IsrChangeNotification(tuple(names)))

    # -- events ------------------------------------------------------------------------
    def process(self, event: events.ControllerEvent) -> None:
        """Handle one event of the current term (see :mod:`.events`)."""
        if self.event_listener is not None:
            self.event_listener(self.scheduler.now_ms(), event)
        _HANDLERS[type(event)](self, event)

    def _handle_broker_change(self, event: events.BrokerChange) -> None:
        ctx = self.ctx
        epochs = dict(zip(event.live_broker_ids, event.broker_epochs))
        live_now = set(epochs)
        before = ctx.live_or_shutting_down_broker_ids
        new, dead = live_now - before, before - live_now
        bounced = {b for b in live_now & before if ctx.broker_epochs.get(b, epochs[b]) != epochs[b]}
        ctx.broker_epochs = epochs
        unclean = {b: e for b, e in event.unclean_shutdowns if b in new | bounced}
        stale = self._stale_leaderships(unclean)
        # A bounced broker failed and started again: handled as both, in that order.
        if dead or bounced:
            ctx.set_live_brokers(live_now - bounced)
            self.on_broker_failure(sorted(dead | bounced))
        ctx.set_live_brokers(live_now)
        # A new broker back from an unclean shutdown that still leads from before it.
        everyone = dict(event.unclean_shutdowns)
        self._elect_after_unclean_restart(
            self._stale_leaderships({b: e for b, e in everyone.items() if b in new}), everyone)
        if new or bounced:
            self.on_broker_startup(sorted(new | bounced))
        self._record_unclean_handled(unclean, stale)

    def _handle_topic_change(self, event: events.TopicChange) -> None:
        topics = set(event.topics)
        ctx = self.ctx
        new, deleted = topics - ctx.all_topics, ctx.all_topics - topics
        ctx.all_topics = topics
        for topic in deleted:
            self._forget_topic(topic)
        if not new:
            return
        assignment = self.zk.get_replica_assignment(sorted(new))
        for tp, replicas in assignment.items():
            ctx.set_assignment(tp, replicas)
        self._load_topic_configs(new)
        self.on_new_topic_creation(new, set(assignment))

    def _handle_partition_modifications(self, event: events.PartitionModifications) -> None:
        """New partitions of an existing topic come online (AddPartitionsListener)."""
        if self.deletion.is_topic_queued_for_deletion(event.topic):
            return
        assignment = dict(event.assignment)
        new = {TopicPartition(event.topic, p) for p in assignment} - set(self.ctx.partition_assignment)
        if new:
            for tp in new:
                self.ctx.set_assignment(tp, assignment[tp.partition])
            self.on_new_partition_creation(new)

    def _handle_topic_deletion(self, event: events.TopicDeletion) -> None:
        self.deletion.enqueue(event.topics)

    def _handle_partition_reassignment(self, event: events.PartitionReassignment) -> None:
        for tp, rar in event.reassignment:
            if tp not in self.ctx.partitions_being_reassigned:
                reassignment.initiate(self, tp, rar)

    def _handle_preferred_replica_election(self, event: events.PreferredReplicaElection) -> None:
        """onPreferredReplicaElection for the admin path's partitions, then clear the path."""
        tps = {tp for tp in event.partitions if tp in self.ctx.partition_assignment
               and not self.deletion.is_topic_queued_for_deletion(tp.topic)}
        if tps:
            self._elect_preferred(tps)
        if event.partitions:
            self.zk.delete_preferred_replica_election()

    def _handle_isr_change_notification(self, event: events.IsrChangeNotification) -> None:
        """ISR changes written by leaders: refresh, tell every broker, continue reassignments."""
        if not event.names:
            return
        ctx = self.ctx
        tps = {tp for tp in self.zk.get_isr_change_partitions(event.names) if tp in ctx.partition_assignment}
        if tps:
            ctx.leadership.update(self.zk.get_partition_states(sorted(tps)))
            self.send_update_metadata(ctx.live_or_shutting_down_broker_ids, tps)
        self.zk.delete_isr_change_notifications(event.names)
        for tp in sorted(tps):
            if tp in ctx.partitions_being_reassigned and reassignment.new_replicas_in_isr(self, tp):
                reassignment.on_partition_reassignment(self, tp)

    def _handle_topic_config_change(self, event: events.TopicConfigChange) -> None:
        """Topics' overrides changed: forget the cached ones (replicas created from now on
        get the new), and elect where ``unclean.leader.election.enable`` now allows it
        (Kafka 2.x; brokers apply the rest themselves).  Notifications older than
        ``CONFIG_CHANGE_EXPIRY_MS`` on this controller's clock are deleted, as Kafka's
        listeners purge theirs."""
        now = self.scheduler.now_ms()
        fresh = [n for n in event.names if n not in self._config_changes_seen]
        for name in fresh:
            self._config_changes_seen[name] = now
        topics = {t for t in self.zk.get_config_change_topics(fresh) if t in self.ctx.all_topics}
        for topic in topics:
            self._topic_configs.pop(topic, None)
        if any(self._unclean_enabled(t) for t in topics):
            self.psm.trigger_online_partition_state_change()
        expired = [n for n, seen in self._config_changes_seen.items() if now - seen >= CONFIG_CHANGE_EXPIRY_MS]
        if expired:
            self.zk.delete_config_changes(expired)
            for name in expired:
                del self._config_changes_seen[name]

    def _handle_auto_leader_rebalance(self, event: events.AutoLeaderRebalance) -> None:
        self._check_and_trigger_partition_rebalance()

    def _handle_stop_replica_answer(self, event: events.StopReplicaAnswer) -> None:
        self.deletion.on_stop_replica_answer(event.replica, event.error_code)

    # -- callbacks (seed 000) ------------------------------------------------------
    def on_broker_startup(self, new_brokers: list[int], *, resume_reassignments: bool = True) -> None:
        """onBrokerStartup: metadata to the new brokers, their replicas online, elections, resumes.

        ``resume_reassignments=False`` (the failover's startup of brokers back from an
        unclean shutdown, which Kafka's failover never runs): the reassignments in the
        context are then the admin path's, not validated yet. Continued here, one naming
        a dead broker had its AR widened to OAR + RAR, and step 7 then took it for one
        already started and kept it, where Kafka drops it; step 7 resumes every valid one.
        """
        new_set = set(new_brokers)
        self.send_update_metadata(new_brokers)
        self.batch.mark_init(new_brokers)
        replicas = self.ctx.replicas_on_brokers(new_set)
        self.rsm.handle_state_changes(replicas, ReplicaState.ONLINE)
        self.psm.trigger_online_partition_state_change()
        for tp, rctx in sorted(self.ctx.partitions_being_reassigned.items()):
            if resume_reassignments and new_set.intersection(rctx.new_replicas):
                reassignment.on_partition_reassignment(self, tp)
        deleting = {pr.tp.topic for pr in replicas if self.deletion.is_topic_queued_for_deletion(pr.tp.topic)}
        if deleting:
            self.deletion.resume_deletion_for_topics(deleting)

    def on_broker_failure(self, dead_brokers: list[int]) -> None:
        """onBrokerFailure: dead leaders' partitions offline, re-elect, dead replicas offline."""
        ctx = self.ctx
        dead = set(dead_brokers)
        ctx.shutting_down_broker_ids -= dead
        queued = self._held_offline_for_deletion
        leaderless = [tp for tp, st in ctx.leadership.items() if st.leader in dead and not queued(tp.topic)]
        self.psm.handle_state_changes(leaderless, PartitionState.OFFLINE)
        self.psm.trigger_online_partition_state_change()
        on_dead = ctx.replicas_on_brokers(dead)
        self.rsm.handle_state_changes([pr for pr in on_dead if not queued(pr.tp.topic)],
                                      ReplicaState.OFFLINE)
        deleting = [pr for pr in on_dead if queued(pr.tp.topic)]
        if deleting:
            self.deletion.fail_replica_deletion(deleting)

    def _held_offline_for_deletion(self, topic: str) -> bool:
        """Is ``topic`` queued for deletion, so that its partitions are not elected and its
        dead replicas are failed for the deletion rather than taken offline?  Not while a
        reassignment of it is pending: the deletion waits for that (as Kafka's does), and a
        leaderless partition's new replicas can catch up only once it has a leader.  Held
        offline, the partition, the reassignment and the deletion waited on one another
        for good."""
        return self.deletion.is_topic_queued_for_deletion(topic) and not any(
            tp.topic == topic for tp in self.ctx.partitions_being_reassigned)

    def shutdown_broker(self, broker_id: int) -> set[TopicPartition]:
        """Controlled shutdown (seed 003): move its leaderships away, take it out of every ISR.

        Returns the partitions it still leads; the broker retries until none remain.
        """
        result: set[TopicPartition] = self._act(self._shutdown_broker, broker_id)
        return result

    def _shutdown_broker(self, broker_id: int) -> set[TopicPartition]:
        ctx = self.ctx
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise errors.BrokerNotAvailable(f"broker {broker_id} is not alive")
        ctx.shutting_down_broker_ids.add(broker_id)
        led, followed = [], []
        for tp in sorted(ctx.partitions_on_broker(broker_id)):
            st = ctx.leadership.get(tp)
            if st is None or len(ctx.assignment(tp)) <= 1:
                continue
            (led if st.leader == broker_id else followed).append(tp)
        self.psm.handle_state_changes(led, PartitionState.ONLINE, self.selectors.controlled_shutdown)
        # The OfflineReplica transition sends the StopReplica (no delete) and shrinks the ISR.
        self.rsm.handle_state_changes([PartitionReplica(tp, broker_id) for tp in followed],
                                      ReplicaState.OFFLINE)
        return {tp for tp in ctx.partitions_on_broker(broker_id)
                if len(ctx.assignment(tp)) > 1 and tp in ctx.leadership
                and ctx.leadership[tp].leader == broker_id}

    def handle_controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        """The ControlledShutdownRequest handler around :meth:`shutdown_broker`.

        KIP-380: a request from an earlier registration of the broker is refused with
        STALE_BROKER_EPOCH.  A broker that crashed mid shutdown and restarted would
        otherwise be shut down by its old request arriving late: out of every ISR and
        sent StopReplica, while the controller, counting it as shutting down, never
        sends it a LeaderAndIsr again (swarm gc-pause-chaos seed 651: its replicas
        never rejoined).  Session ids need not grow, so any other session is stale; a
        new registration the controller has not read yet is refused too, and the
        broker's retry gets through once it has.  A request without an epoch (from a
        process not registered yet) is not checked, as in Kafka."""
        known = self.ctx.broker_epochs.get(request.broker_id)
        if request.broker_epoch >= 0 and known is not None and request.broker_epoch != known:
            return ControlledShutdownResponse(errors.StaleBrokerEpoch.code)
        try:
            remaining = self.shutdown_broker(request.broker_id)
        except errors.KReplicaError as e:
            return ControlledShutdownResponse(e.code)
        return ControlledShutdownResponse(0, tuple(sorted(remaining)))

    def on_new_topic_creation(self, topics: Iterable[str], new_partitions: set[TopicPartition]) -> None:
        """onNewTopicCreation: watch each topic's partitions, then create its partitions."""
        for topic in sorted(topics):
            self._watch_topic(topic)
        self.on_new_partition_creation(new_partitions)

    def on_new_partition_creation(self, new_partitions: set[TopicPartition]) -> None:
        """onNewPartitionCreation: New, replicas New, Online (offline selector), replicas Online."""
        self.psm.handle_state_changes(new_partitions, PartitionState.NEW)
        replicas = self.ctx.replicas_for_partitions(new_partitions)
        self.rsm.handle_state_changes(replicas, ReplicaState.NEW)
        self.psm.handle_state_changes(new_partitions, PartitionState.ONLINE, self.selectors.offline)
        self.rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    def send_update_metadata(self, brokers: Iterable[int], tps: Iterable[TopicPartition] | None = None) -> None:
        self.batch.add_update_metadata(brokers, tps)
        self.batch.send(self.ctx.epoch)

    def _forget_topic(self, topic: str) -> None:
        for tp in self.ctx.partitions_for_topic(topic):
            self.psm.states.pop(tp, None)
            for r in self.ctx.assignment(tp):
                self.rsm.states.pop(PartitionReplica(tp, r), None)
        self.ctx.remove_topic(topic)
        self._topic_configs.pop(topic, None)

    def _unclean_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable: the topic's override, else the controller's config.

        Read once per topic and term (Kafka 0.10 read it per election); topics known
        at failover or creation are read in one batch by :meth:`_load_topic_configs`.
        """
        override = dict(self._topic_config(topic)).get("unclean.leader.election.enable")
        if override is None:
            return bool(self.config.get("unclean.leader.election.enable", False))
        # As Kafka's ConfigDef reads a boolean (and kreplica.config the broker's): blanks
        # around it trimmed, case ignored.  The node may come from another tool.
        return java_boolean(override.strip(JAVA_BLANKS)) is True

    def _topic_config(self, topic: str) -> tuple[tuple[str, str], ...]:
        """The topic's config overrides, as sorted (key, value) pairs: what the LeaderAndIsr
        that creates its replicas carries, and where its unclean setting comes from."""
        cached = self._topic_configs.get(topic)
        if cached is None:
            self._load_topic_configs([topic])
            cached = self._topic_configs[topic]
        return cached

    def _load_topic_configs(self, topics: Iterable[str]) -> None:
        for topic, overrides in self.zk.get_topic_configs(sorted(topics)).items():
            self._topic_configs[topic] = tuple(sorted((k, str(v)) for k, v in overrides.items()))

    # -- reassignment and preferred election -------------------------------------
    def _maybe_trigger_partition_reassignment(self, requested: Mapping[TopicPartition, list[int]]) -> None:
        """Resume the admin path's reassignments.  One naming a partition the store no longer
        holds (its topic deleted after the admin tool checked it) goes through :func:`initiate`
        too, which drops it, as Kafka 0.10's initializePartitionReassignment does: left in the
        path, it would refuse every later reassignment."""
        for tp, rar in sorted(requested.items()):
            if tp not in self.ctx.partition_assignment:
                reassignment.initiate(self, tp, rar, found_on_failover=True)
        for tp, rctx in sorted(self.ctx.partitions_being_reassigned.items()):
            del self.ctx.partitions_being_reassigned[tp]
            reassignment.initiate(self, tp, list(rctx.new_replicas), found_on_failover=True)

    def elect_preferred_leaders(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, errors.KReplicaError]:
        """Preferred replica election for ``tps``; returns the partitions not moved, with why."""
        result: dict[TopicPartition, errors.KReplicaError] = self._act(self._elect_preferred, tps)
        return result

    def _elect_preferred(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, errors.KReplicaError]:
        tps = set(tps)
        self.ctx.partitions_undergoing_preferred_election |= tps
        try:
            return self.psm.handle_state_changes(tps, PartitionState.ONLINE, self.selectors.preferred)
        finally:
            self.ctx.partitions_undergoing_preferred_election -= tps

    def _schedule_rebalance(self, delay_ms: int) -> None:
        gen = self._generation

        def tick() -> None:
            if gen != self._generation or not self._active:
                return
            self._react(functools.partial(self.process, events.AutoLeaderRebalance()))
            self._schedule_rebalance(int(self.config.get("leader.imbalance.check.interval.seconds", 300)) * 1000)

        self._timers = [t for t in self._timers if not t.cancelled]
        self._timers.append(self.scheduler.call_later(delay_ms, tick))

    def check_and_trigger_partition_rebalance(self) -> set[TopicPartition]:
        """Auto leader rebalance: per broker, when more than leader.imbalance.per.broker.percentage
        of the partitions it prefers are led elsewhere, elect it where it is alive and in sync.
        Returns the partitions it tried to move."""
        result: set[TopicPartition] = self._act(self._check_and_trigger_partition_rebalance)
        return result

    def _check_and_trigger_partition_rebalance(self) -> set[TopicPartition]:
        ctx = self.ctx
        if ctx.partitions_being_reassigned or ctx.partitions_undergoing_preferred_election:
            return set()
        chosen = partitions_to_rebalance(
            ctx.partition_assignment, ctx.leadership, ctx.live_broker_ids,
            int(self.config.get("leader.imbalance.per.broker.percentage", 10)),
            self.deletion.is_topic_queued_for_deletion)
        if chosen:
            self._elect_preferred(chosen)
        return chosen


_HANDLERS: dict[type, Callable[[KafkaController, Any], None]] = {
    events.BrokerChange: KafkaController._handle_broker_change,
    events.TopicChange: KafkaController._handle_topic_change,
    events.PartitionModifications: KafkaController._handle_partition_modifications,
    events.TopicDeletion: KafkaController._handle_topic_deletion,
    events.PartitionReassignment: KafkaController._handle_partition_reassignment,
    events.PreferredReplicaElection: KafkaController._handle_preferred_replica_election,
    events.IsrChangeNotification: KafkaController._handle_isr_change_notification,
    events.TopicConfigChange: KafkaController._handle_topic_config_change,
    events.AutoLeaderRebalance: KafkaController._handle_auto_leader_rebalance,
    events.StopReplicaAnswer: KafkaController._handle_stop_replica_answer,
}
