"""SimNetwork: the simulator's transport -- latency, loss, duplication, partitions, pauses.

Theory of operation (etcd-raft's test network, TigerBeetle's packet simulator).
Every message between two nodes crosses :meth:`SimNetwork.deliver`, which draws
a latency from the link's :class:`LinkProfile` with the world's seeded
``random.Random``, and may drop, duplicate or hold it.  Faults are injected only
where the real protocol tolerates them:

- Kafka's controller channel is a TCP connection that retries until it gets
  through, so controller requests (LeaderAndIsr, StopReplica, UpdateMetadata,
  ControlledShutdown) are never dropped or duplicated: a cut link *holds* them
  and delivers them, in order, when it heals.
- The data plane (produce, fetch, OffsetsForLeaderEpoch) has timeouts and
  retries, so its messages may be lost (random drops, a cut link), and requests
  may be duplicated (a retransmission: produce is at-least-once, fetch is
  idempotent).
- Links are FIFO (TCP) unless a profile allows reordering, which applies to
  client requests only (a client with several connections).

A host failure (:meth:`lose_in_flight`) loses what the node had sent but was
still in its queues or on the wire.  A paused node (a GC pause) neither sends nor
receives: what reaches it waits in its socket buffer and is handed over in order
at resume, ahead of anything still on the wire behind it; what it sends, and what
is sent to it, during the pause leaves at resume.  What it sent before the pause
is already on the wire and arrives as usual (the kernel does not pause with the
process).  A slow node (a slow disk) handles every request ``slow_ms`` late.  The metadata store is
reached through sessions, not messages: cutting a broker from the store sets its
session unreachable, and sessions the broker opens later (after an expiry or a restart) are cut
too.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..protocol import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    FetchRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ProduceRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from ..runtime import Scheduler
from ..transport import InProcessTransport

CONTROL_PLANE = (
    LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse, ControlledShutdownRequest, ControlledShutdownResponse,
)
DUPLICABLE = (ProduceRequest, FetchRequest)
_CONTROL_TYPES = frozenset(CONTROL_PLANE)
_DUPLICABLE_TYPES = frozenset(DUPLICABLE)

# around_arrival(src, dst, message, arrive): runs arrive(message); the checker wraps it.
Arrival = Callable[[int, int, Any, Callable[[Any], None]], None]


@dataclass(frozen=True, slots=True)
class LinkProfile:
    """One direction of a link: uniform latency plus an occasional slow tail."""

    latency_ms_min: int = 1
    latency_ms_max: int = 5
    tail_probability: float = 0.0
    latency_ms_tail: int = 50
    drop_probability: float = 0.0
    duplicate_probability: float = 0.0
    reorder: bool = False

    def draw_latency_ms(self, rng: random.Random) -> int:
        # random() arithmetic, not randint: this runs for every message.
        ms = self.latency_ms_min + int(rng.random() * (self.latency_ms_max - self.latency_ms_min + 1))
        if self.tail_probability and rng.random() < self.tail_probability:
            ms += int(rng.random() * (self.latency_ms_tail + 1))
        return ms


@dataclass(slots=True)
class NetworkStats:
    delivered: int = 0
    dropped: int = 0
    duplicated: int = 0
    held: int = 0
    reordered: int = 0  # client requests due before one their client sent earlier on that link


class SimNetwork(InProcessTransport):
    def __init__(self, scheduler: Scheduler | None, rng: random.Random,
                 profile: LinkProfile | None = None) -> None:
        super().__init__(scheduler, 0)  # type: ignore[arg-type]  # the cluster sets it
        self.rng = rng
        self.profile = profile or LinkProfile()
        self.links: dict[tuple[int, int], LinkProfile] = {}
        # A node's own profile covers every link to or from it (a broker in a far rack).
        self.node_profiles: dict[int, LinkProfile] = {}
        self.stats = NetworkStats()
        self._groups: dict[int, int] | None = None  # node -> partition group
        # Controller messages a cut link holds, each with its sender's incarnation then.
        self._held: dict[tuple[int, int], deque[tuple[Any, Callable[[Any], None], int]]] = {}
        self._paused: set[int] = set()
        # (src, dst, message, arrive, sent while paused): see _arrive for the order.
        self._paused_queue: deque[tuple[int, int, Any, Callable[[Any], None], bool]] = deque()
        # Arrivals a resumed node's socket buffer held, handed over at the resume instant
        # in order; a link here takes what arrives on it meanwhile behind them.
        self._handover: deque[tuple[int, int, Any, Callable[[Any], None]]] = deque()
        self._handover_links: set[tuple[int, int]] = set()
        self.slow_ms: dict[int, int] = {}
        self._last_due: dict[tuple[int, int], int] = {}
        self.store_cut: set[int] = set()
        self.around_arrival: Arrival | None = None
        self._sessions: dict[int, Any] = {}
        # Bumped when a node's host fails: what it had sent but not yet delivered is lost.
        self._incarnation: dict[int, int] = {}

    # ---- configuration ------------------------------------------------------------------
    def set_link(self, src: int, dst: int, profile: LinkProfile) -> None:
        self.links[(src, dst)] = profile

    def set_node(self, node: int, profile: LinkProfile) -> None:
        self.node_profiles[node] = profile

    def profile_for(self, src: int, dst: int) -> LinkProfile:
        if self.links or self.node_profiles:
            p = self.links.get((src, dst)) or self.node_profiles.get(dst) or self.node_profiles.get(src)
            if p is not None:
                return p
        return self.profile

    def partition(self, *groups: frozenset[int] | set[int] | list[int]) -> None:
        """Cut every link between nodes of different groups (nodes in no group are unaffected).

        Replaces a partition in place: controller messages held on a link the new
        groups no longer cut go on now, ahead of anything sent on it later."""
        self._groups = {n: i for i, g in enumerate(groups) for n in g}
        self._release_held()

    def calm(self) -> None:
        """No more random loss or duplication on any link (the liveness phase stops every
        fault); latencies, tails and reordering stay as they were."""
        def quiet(p: LinkProfile) -> LinkProfile:
            return replace(p, drop_probability=0.0, duplicate_probability=0.0)
        self.profile = quiet(self.profile)
        self.links = {link: quiet(p) for link, p in self.links.items()}
        self.node_profiles = {node: quiet(p) for node, p in self.node_profiles.items()}

    def heal(self) -> None:
        """Remove the partition; held controller messages are delivered in order."""
        self._groups = None
        self._release_held()

    def _release_held(self) -> None:
        """Send on, in order, the controller messages held on links no longer cut.  Each
        goes as sent by the incarnation that sent it: one whose host failed meanwhile is
        lost on arrival, as anything else it had in flight."""
        held, self._held = self._held, {}
        for (src, dst), queue in sorted(held.items()):
            if self._groups is not None and self.cut(src, dst):
                self._held[(src, dst)] = queue
            else:
                for message, arrive, sent_by in queue:
                    self._schedule(src, dst, message, arrive, None, sent_by)

    @property
    def partitioned(self) -> bool:
        return self._groups is not None

    def track_session(self, node: int, session: Any) -> None:
        """A broker session opened before :meth:`attach_store` (at cluster start)."""
        self._sessions[node] = session

    def cut(self, a: int, b: int) -> bool:
        g = self._groups
        if g is None or a == b:
            return False
        ga, gb = g.get(a), g.get(b)
        return ga is not None and gb is not None and ga != gb

    def pause(self, node: int) -> None:
        self._paused.add(node)
        session = self._sessions.get(node)
        if session is not None:
            session.set_reachable(False)

    def resume(self, node: int) -> None:
        self._paused.discard(node)
        if node not in self.store_cut:
            session = self._sessions.get(node)
            if session is not None:
                session.set_reachable(True)
        # What still touches a paused node keeps its place (and its kind).  What the
        # resumed node's socket buffer holds is handed over now, in order; what was sent
        # while a node was paused goes on through the network, after it.
        paused = self._paused
        queue, self._paused_queue = self._paused_queue, deque()
        going = []
        for entry in queue:
            src, dst, message, arrive, sent_while_paused = entry
            if dst in paused or (sent_while_paused and src in paused):
                self._paused_queue.append(entry)
            elif sent_while_paused:
                going.append(entry)
            else:
                self._hand_over_later(src, dst, message, arrive)
        for src, dst, message, arrive, _sent_while_paused in going:
            self.deliver(src, dst, message, arrive)

    def _hand_over_later(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None]) -> None:
        if not self._handover:
            # After what the resume released on the scheduler (the process's own timers).
            self.scheduler.call_later(0, self._hand_over)
        self._handover.append((src, dst, message, arrive))
        self._handover_links.add((src, dst))

    def _hand_over(self) -> None:
        """Give a resumed node what its socket buffer held (and what arrived behind it)."""
        queue, self._handover, self._handover_links = self._handover, deque(), set()
        incarnation = self._incarnation
        for src, dst, message, arrive in queue:
            # An arrival again, but of bytes already in the receiver's buffer: a host failure
            # of the sender since does not take them back (its current incarnation), and a
            # receiver paused again at this instant takes them back into its buffer.
            self._arrive(src, dst, message, arrive, incarnation.get(src, 0) if incarnation else 0)

    def _buffer(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None]) -> None:
        """Keep an arrival in a paused receiver's socket buffer, behind everything the buffer
        holds already, from any link: it is read in arrival order.  What the link's paused
        sender sent since stays ahead of it in the queue but leaves only at a resume, after
        the buffer was handed over (see :meth:`resume`); it used to be put ahead of that,
        which also put it ahead of what other links had delivered before it (the 165th
        review)."""
        self._paused_queue.append((src, dst, message, arrive, False))

    def lose_in_flight(self, node: int) -> None:
        """A host failure: messages ``node`` sent that have not arrived yet never will."""
        self._incarnation[node] = self._incarnation.get(node, 0) + 1

    def is_paused(self, node: int) -> bool:
        return node in self._paused

    # ---- the metadata store -------------------------------------------------------------
    def attach_store(self, store: Any) -> None:
        """Follow the sessions brokers open, so a store cut also covers later sessions."""
        open_session = store.session

        def session(name: str = "", on_expired: Callable[[], None] | None = None) -> Any:
            s = open_session(name, on_expired)
            if name.startswith("broker-"):
                node = int(name[len("broker-"):])
                self._sessions[node] = s
                if node in self.store_cut or node in self._paused:
                    s.set_reachable(False)
            return s

        store.session = session

    def cut_from_store(self, node: int) -> None:
        self.store_cut.add(node)
        session = self._sessions.get(node)
        if session is not None:
            session.set_reachable(False)

    def heal_store(self, node: int | None = None) -> None:
        nodes = list(self.store_cut) if node is None else [node]
        for n in nodes:
            self.store_cut.discard(n)
            session = self._sessions.get(n)
            if session is not None and n not in self._paused:
                session.set_reachable(True)

    # ---- delivery -----------------------------------------------------------------------
    def deliver(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None]) -> None:
        if self._paused and (src in self._paused or dst in self._paused):
            self.stats.held += 1
            self._paused_queue.append((src, dst, message, arrive, True))
            return
        control = type(message) in _CONTROL_TYPES
        if self._groups is not None and self.cut(src, dst):
            if control:
                self.stats.held += 1
                incarnation = self._incarnation
                self._held.setdefault((src, dst), deque()).append(
                    (message, arrive, incarnation.get(src, 0) if incarnation else 0))
            else:
                self.stats.dropped += 1
            return
        profile = self.profile_for(src, dst) if self.links or self.node_profiles else self.profile
        if not control:
            if profile.drop_probability and self.rng.random() < profile.drop_probability:
                self.stats.dropped += 1
                return
            if (profile.duplicate_probability and type(message) in _DUPLICABLE_TYPES
                    and self.rng.random() < profile.duplicate_probability):
                self.stats.duplicated += 1
                self._schedule(src, dst, message, arrive, profile)
        self._schedule(src, dst, message, arrive, profile)

    def _schedule(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None],
                  profile: LinkProfile | None = None, sent_by: int | None = None) -> None:
        """Put ``message`` on the wire; ``sent_by`` is the sender's incarnation that sent it
        (its current one unless given), checked again on arrival."""
        profile = profile or self.profile_for(src, dst)
        scheduler = self.scheduler
        delay = profile.draw_latency_ms(self.rng)
        if self.slow_ms:
            delay += self.slow_ms.get(dst, 0)
        link = (src, dst)
        now = scheduler.now_ms()
        due = now + delay
        last_due = self._last_due
        last = last_due.get(link, 0)
        if due < last:
            if profile.reorder and src < 0:
                self.stats.reordered += 1  # a client request overtakes one sent before it
            else:  # TCP keeps a link in order
                delay = last - now
                due = last
        if due > last:
            last_due[link] = due
        self.messages_delivered += 1
        self.stats.delivered += 1
        if sent_by is None:
            incarnation = self._incarnation
            sent_by = incarnation.get(src, 0) if incarnation else 0
        scheduler.call_later(delay, self._arrive, src, dst, message, arrive, sent_by)

    def _arrive(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None],
                incarnation: int = 0) -> None:
        if self._incarnation and incarnation != self._incarnation.get(src, 0):
            self.stats.dropped += 1
            return
        if self._handover_links and (src, dst) in self._handover_links:
            # Behind what a resumed receiver's buffer still holds on this link.
            self._handover.append((src, dst, message, arrive))
            return
        if self._paused and dst in self._paused:
            # Reached a paused receiver: it waits in its socket buffer, ahead of what its
            # link carried since the pause began (sent later: TCP keeps a link in order),
            # which would otherwise overtake it at resume (swarm config-churn seed 97: a
            # topic's deletion overtook the LeaderAndIsr creating it).  A paused sender's
            # message in flight arrives as usual: it left before the pause.
            self._buffer(src, dst, message, arrive)
            return
        hook = self.around_arrival
        if hook is None:
            arrive(message)
        else:
            hook(src, dst, message, arrive)
