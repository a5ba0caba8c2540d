"""World: one seeded simulation run -- cluster, network, workload, faults, checker.

Theory of operation (TigerBeetle VOPR).  ``World(scenario, seed).run()`` builds
an embedded :class:`~kreplica.cluster.Cluster` on a :class:`SimNetwork`, with
every random choice drawn from ``random.Random`` instances derived from the one
seed, so the same seed and scenario give the same history, byte for byte.  It
then steps the scheduler one event at a time.  The network tells the world which
replicas each delivered message touched; after every step the checker looks at
exactly those (plus a full sweep every ``sample_ms``), and the first violation
stops the run.  At ``until_ms`` the liveness phase begins: faults and producers
stop, the network heals (and loses or duplicates nothing more), dead brokers
restart, and the cluster must converge
(a leader for every partition, the full replica set in sync, HW = LEO on every
replica) within ``liveness_ms``; then every replica's whole log is compared.

Hooks the world adds to the cluster, all from outside its modules: a wrapper
around each partition's truncation (to record it and reset the checker's
verified prefix) and around its log's appends (the full-disk fault), one around
each replica manager's produce handler (every acks=all answer against the
leader's ISR), and the network's arrival hook (touched replicas; stale
controller requests).  Every sweep also reports each acting controller's term
and epoch.  Each broker incarnation runs on its own :class:`PausableScheduler`
(the cluster's ``broker_scheduler`` hook, ``World.processes``), so a pause stops
its timers too.
"""
from __future__ import annotations

import os
import random
import secrets
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import errors
from ..meta import layout
from ..protocol import (
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    OffsetsForLeaderEpochResponse,
    ProduceRequest,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataRequest,
)
from ..protocol.common import NO_LEADER
from ..replica.partition import Role
from . import faults
from .checker import Checker, CountedLoss, Invariant, Violation, tp_name
from .history import HEADER_KIND, History
from .network import SimNetwork
from .pausable_scheduler import PausableScheduler
from .scenarios import Scenario, Step
from .workload import Consumer, Probe, Producer

# The liveness probe's bound: from convergence to every partition's acks=all write
# acknowledged and the replicas converged again with it.
PROBE_MS = 10_000
_FOLLOWER = Role.FOLLOWER  # a module constant: Enum class attribute lookups are slow in 3.11
_CONTROLLER_REQUESTS = frozenset((LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest))


def _tps(message: Any) -> list[TopicPartition]:
    field = _TP_FIELD.get(type(message))
    if field is None:
        return []
    return [p.tp for p in getattr(message, field)]


# The messages that name partitions, and the field that lists them (one dict lookup per arrival).
_TP_FIELD: dict[type, str] = {
    FetchRequest: "partitions",
    FetchResponse: "partitions",
    OffsetsForLeaderEpochResponse: "partitions",
    ProduceRequest: "partitions",
    LeaderAndIsrRequest: "partition_states",
    StopReplicaRequest: "partitions",
}


@dataclass(slots=True)
class RunResult:
    scenario: str
    seed: int
    history_hash: str
    events: int
    virtual_ms: int
    wall_s: float
    violation: Violation | None
    losses: list[CountedLoss]
    unclean_elections: int
    acked_writes: int
    consumed_batches: int
    availability: float
    reelect_ms: list[int]
    converged: bool
    scheduler_events: int
    samples: list[tuple[int, str, int, int, int, int, tuple[int, ...]]] = field(default_factory=list)
    faults: list[tuple[int, str, int | None]] = field(default_factory=list)
    writes_completed: int = 0  # acked at any level, or sent with acks=0 (acked_writes: acks=all only)
    superseded_reads: list[CountedLoss] = field(default_factory=list)  # consumed, then lost (attributed)

    @property
    def ok(self) -> bool:
        return self.violation is None


class World:
    def __init__(self, scenario: Scenario, seed: int, *, keep_history: bool = True,
                 sample_ms: int = 250, record_samples: bool = False, data_root: str | None = None,
                 keep_data: bool = False) -> None:
        self.scenario = scenario.validate()  # a scenario error is the caller's, not a finding
        self.seed = seed
        self.rng = random.Random(f"world:{seed}")
        self.history = History(keep_all=keep_history)
        self.checker = Checker(self.history)
        self.network = SimNetwork(None, random.Random(f"network:{seed}"), scenario.network)
        self.network.around_arrival = self._around_arrival
        self._deliver = self.network.deliver
        self.network.deliver = self._on_send
        for node, profile in sorted(scenario.nodes.items()):
            self.network.set_node(node, profile)
        for (src, dst), profile in sorted(scenario.links.items()):
            self.network.set_link(src, dst, profile)
        self.sample_ms = sample_ms
        self.record_samples = record_samples
        self.samples: list[tuple[int, str, int, int, int, int, tuple[int, ...]]] = []
        self.disk_full: set[int] = set()
        self.bound: dict[str, int] = {}
        # The network partition in place, if any: only its own timer heals it (faults.partition).
        self.partition_in_place: object | None = None
        # Each slow disk, pause, full disk and store cut in place, by (kind, broker): only
        # its own timer ends it (faults._own_end).
        self.fault_ends: dict[tuple[str, int], object] = {}
        self._armed: list[Step] = []
        self._deleting: set[str] = set()
        self._dirty: dict[tuple[int, TopicPartition], None] = {}
        self._tp_names: dict[TopicPartition, str] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._state_paths: dict[TopicPartition, str] = {}
        self._state_memo: dict[TopicPartition, tuple[bytes, tuple[int, int, tuple[int, ...]]]] = {}
        self._leaderless_since: dict[str, int] = {}
        # id(controller) -> (the controller, kept so its id is never reused; its serial)
        self._incarnations: dict[int, tuple[Any, int]] = {}
        self.reelect_ms: list[int] = []
        self._avail = [0, 0]
        self.producers: list[Producer] = []
        self.consumers: list[Consumer] = []
        self.chaos: faults.ChaosPlanner | None = None
        self._root = data_root
        self.keep_data = keep_data  # leave the brokers' log dirs for dump-log (``data_dir``)
        self._tmp: str | None = None
        self.cluster: Any = None
        self.session_timeout_ms = 0
        # Each broker incarnation's own scheduler view (faults.pause stops the whole process).
        self.processes: dict[int, PausableScheduler] = {}

    # ---- small services for faults and workloads ---------------------------------------------
    def now_ms(self) -> int:
        return self.cluster.scheduler.now_ms() if self.cluster is not None else 0

    def record(self, kind: str, broker: int | None = None, tp: str | None = None, **data: Any) -> None:
        self.history.record(self.now_ms(), kind, broker, tp, **data)

    def later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> Any:
        return self.cluster.scheduler.call_later(delay_ms, fn, *args)

    def _process_scheduler(self, bid: int, shared: Any) -> PausableScheduler:
        """The cluster's ``broker_scheduler`` hook: every (re)start runs on a fresh view."""
        view = self.processes[bid] = PausableScheduler(shared)
        return view

    def leader_of(self, tp: TopicPartition) -> int:
        leader = self._leaders.get(tp)
        if leader is None:
            leader = self._stored_leader(tp)
            if leader != NO_LEADER:
                self._leaders[tp] = leader
        return leader

    def _stored_leader(self, tp: TopicPartition) -> int:
        # A client's lookup after an error (~5k a run, most of them while the partition has no
        # leader): its one node, read as _store_states reads it, without the batching.
        got = self.cluster.zk.session.get_many([self._state_path(tp)])[0]
        return NO_LEADER if got is None else self._decoded_state(tp, got)[0]

    def _store_states(self, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int, tuple[int, ...]]]:
        """(leader, leader epoch, ISR) from the partitions' state nodes, in ``tps`` order, absent
        ones left out.  Every sweep reads them all (and clients one, after every failed
        request: _stored_leader), so a node's JSON is decoded only when its bytes changed."""
        session = self.cluster.zk.session
        wanted = [self._state_path(tp) for tp in tps]
        n = max(1, session.max_batch_ops)
        got = [g for i in range(0, len(wanted), n) for g in session.get_many(wanted[i:i + n])]
        return {tp: self._decoded_state(tp, g) for tp, g in zip(tps, got) if g is not None}

    def _state_path(self, tp: TopicPartition) -> str:
        path = self._state_paths.get(tp)
        if path is None:
            path = self._state_paths[tp] = layout.partition_state_path(tp.topic, tp.partition)
        return path

    def _decoded_state(self, tp: TopicPartition, got: Any) -> tuple[int, int, tuple[int, ...]]:
        """(leader, leader epoch, ISR) of a state node read as (bytes, stat); decoded only
        when its bytes changed since the last read."""
        m = self._state_memo.get(tp)
        if m is None or m[0] != got[0]:
            st = layout.decode_partition_state(got[0], got[1].version)
            m = self._state_memo[tp] = (got[0], (st.leader, st.leader_epoch, tuple(st.isr)))
        return m[1]

    def forget_leader(self, tp: TopicPartition) -> None:
        self._leaders.pop(tp, None)

    def isr_size(self, tp: TopicPartition) -> int:
        m = self.checker.models.get(tp_name(tp))
        return len(m.isr) if m is not None else 0

    # ---- building ---------------------------------------------------------------------------------
    def _build(self) -> None:
        from ..cluster import Cluster

        sc = self.scenario
        self._make_data_dir()
        self.record(HEADER_KIND, seed=self.seed, scenario=sc.to_dict())
        self.cluster = Cluster.embedded(brokers=sc.broker_ids, data_dir=self._tmp, seed=self.seed,
                                        config=sc.config, transport=self.network,
                                        broker_scheduler=self._process_scheduler)
        self.session_timeout_ms = self.cluster.config["zookeeper.session.timeout.ms"]
        self.checker.unclean_default = bool(self.cluster.config["unclean.leader.election.enable"])
        self.checker.min_isr_default = int(self.cluster.config["min.insync.replicas"])
        self.network.attach_store(self.cluster.store)
        self.cluster.observers.append(self._on_cluster_event)
        for bid, broker in self.cluster.brokers.items():
            if broker.session is not None:
                self.network.track_session(bid, broker.session)
        for t in sc.topics:
            assignment = {p: list(r) for p, r in t.assignment.items()} if t.assignment else None
            self.cluster.create_topic(t.name, t.partitions, t.replication_factor, assignment=assignment)
            self.record("create_topic", None, topic=t.name, partitions=t.partitions,
                        replication_factor=t.replication_factor)
        for bid in self.cluster.brokers:
            self.instrument_broker(bid)
        self._sweep()

    def _make_data_dir(self) -> None:
        """The run's data dir, named in ``_tmp`` before it is made: an interrupt (Ctrl-C, or
        the SIGTERM handler's KeyboardInterrupt) landing just after the mkdir still leaves
        close() the name to remove, where tempfile.mkdtemp would have lost it."""
        root = self._root or default_data_root()
        while True:
            self._tmp = os.path.join(root, f"kreplica-sim-{self.seed}-{secrets.token_hex(4)}")
            try:
                os.mkdir(self._tmp, 0o700)
                return
            except FileExistsError:
                continue

    def _start_workload(self) -> None:
        sc, w = self.scenario, self.scenario.workload
        pid = cid = 0
        for t in sc.topics:
            for _ in range(w.producers_per_partition * t.partitions):
                self.producers.append(Producer(self, pid, t.name, t.partitions, w))
                pid += 1
            if w.consumers:
                for p in range(t.partitions):
                    self.consumers.append(Consumer(self, cid, TopicPartition(t.name, p), w.consumer_interval_ms))
                    cid += 1
        for c in (*self.producers, *self.consumers):
            c.start()
        if w.admin_interval_ms:
            self.later(w.admin_interval_ms, self._admin_tick)
        if sc.chaos is not None:
            self.chaos = faults.ChaosPlanner(self, sc.chaos)
            self.chaos.start()
        for step in sc.steps:
            if step.on is not None:
                self.later(step.at_ms, self._armed.append, step)
                continue
            jitter = self.rng.randint(0, step.jitter_ms) if step.jitter_ms else 0
            self.later(step.at_ms + jitter, self._run_step, step)

    def _on_cluster_event(self, event: Any) -> None:
        """ISR changes a leader wrote to the store (seed 001 'D'): the checker's ISR must
        be the store's when it judges the next election clean or unclean."""
        if event.kind == "isr_changed":
            d = event.details
            name = tp_name(d["tp"])
            self.checker.on_store_state(name, event.broker, d["leader_epoch"], tuple(d["isr"]))
            self.record("isr_changed", event.broker, name, epoch=d["leader_epoch"], isr=list(d["isr"]))

    # ---- instrumentation ----------------------------------------------------------------------------
    def instrument_broker(self, bid: int) -> None:
        broker = self.cluster.brokers[bid]
        rm = broker.replica_manager
        if not broker.alive or rm is None:
            return
        if not getattr(rm, "_sim_hooks", False):
            self._instrument_produce(bid, rm)
        for tp, p in rm.partitions.items():
            if not getattr(p, "_sim_hooks", False):
                self._instrument(bid, tp, p)

    def _instrument_produce(self, bid: int, rm: Any) -> None:
        """Every acks=all answer a leader sends is checked against its ISR as it answers."""
        rm._sim_hooks = True
        handle = rm.handle_produce
        checker = self.checker

        def handle_produce(req: ProduceRequest, respond: Callable[[Any], None]) -> None:
            if req.acks != -1:
                handle(req, respond)
                return

            def answered(response: Any) -> None:
                for r in response.partitions:
                    p = rm.partitions.get(r.tp) if r.error_code == errors.NONE else None
                    if p is not None:
                        checker.on_acks_all_answered(bid, tp_name(r.tp), r.base_offset, p.isr_state.maximal_isr)
                respond(response)
            handle(req, answered)

        rm.handle_produce = handle_produce

    def _instrument(self, bid: int, tp: TopicPartition, p: Any) -> None:
        p._sim_hooks = True
        name = tp_name(tp)
        world = self

        def wrap_truncation(method: Callable[[int], Any], kind: str) -> Callable[[int], Any]:
            def truncating(offset: int) -> Any:
                before = p.log_end_offset
                result = method(offset)
                after = p.log_end_offset
                if after < before or kind == "truncate_fully":
                    world.record(kind, bid, name, offset=offset, leo_before=before, leo=after)
                    world.checker.on_truncate(bid, name, after if kind == "truncate" else 0)
                    world._dirty[(bid, tp)] = None
                return result
            return truncating

        p.truncate_to = wrap_truncation(p.truncate_to, "truncate")
        p.truncate_fully_and_start_at = wrap_truncation(p.truncate_fully_and_start_at, "truncate_fully")
        log = p.log

        def wrap_log_start(method: Callable[..., Any], cause: str) -> Callable[..., Any]:
            """Retention, or a follower adopting its leader's log start (KIP-107), removes
            committed batches on purpose: recorded, and the checker judges the replica
            from its new log start on."""
            def moving(*args: Any) -> Any:
                before = log.log_start_offset
                hw = log.high_watermark
                result = method(*args)
                if log.log_start_offset != before:
                    world.record("log_start", bid, name, cause=cause, start_before=before,
                                 start=log.log_start_offset)
                    if cause == "retention":
                        world.checker.on_retention(bid, name, hw, log.log_start_offset)
                    world._dirty[(bid, tp)] = None
                return result
            return moving

        log.delete_old_segments = wrap_log_start(log.delete_old_segments, "retention")
        log.maybe_increment_log_start_offset = wrap_log_start(log.maybe_increment_log_start_offset,
                                                              "leader's log start")
        log.append_batches_as_leader = faults.full_disk_guard(self, bid, log.append_batches_as_leader)
        log.append_as_follower = faults.full_disk_guard(self, bid, log.append_as_follower)

    # ---- the network hook: what each step touched ------------------------------------------------
    def _around_arrival(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None]) -> None:
        if dst < 0 or self.cluster is None:
            arrive(message)
            return
        kind = type(message)
        if kind in _CONTROLLER_REQUESTS:
            broker = self.cluster.brokers.get(dst)
            if broker is not None and broker.alive:
                self._arrive_controller_request(dst, broker, message, arrive)
            else:
                arrive(message)
        else:
            arrive(message)
        field = _TP_FIELD.get(kind)
        if field is not None:
            dirty = self._dirty
            for p in getattr(message, field):
                dirty[(dst, p.tp)] = None

    def _arrive_controller_request(self, dst: int, broker: Any, message: Any, arrive: Callable[[Any], None]) -> None:
        rm = broker.replica_manager
        # Stale against the newest epoch this process accepted a request of, as the world
        # saw them arrive, not only as the broker recorded them: a broker that recorded
        # none would otherwise never look stale (a planted bug that went unfound).
        accepted = getattr(rm, "_sim_controller_epoch", -1)
        before_epoch = max(rm.controller_epoch, accepted)
        tps = _tps(message)
        before = [self._partition_state(rm, tp) for tp in tps]
        if not broker._stale_broker_epoch(message.broker_epoch):  # refused before any epoch is read
            rm._sim_controller_epoch = max(accepted, message.controller_epoch)
        arrive(message)
        if isinstance(message, LeaderAndIsrRequest):
            self.instrument_broker(dst)
        if message.controller_epoch < before_epoch:
            after = [self._partition_state(rm, tp) for tp in tps]
            if after != before or rm.controller_epoch < before_epoch:
                changed = next((tp_name(tp) for tp, a, b in zip(tps, after, before) if a != b), None)
                self.checker.on_stale_request_applied(dst, changed, message.controller_epoch, before_epoch)

    @staticmethod
    def _partition_state(rm: Any, tp: TopicPartition) -> Any:
        p = rm.partitions.get(tp)
        return None if p is None else (p.role, p.leader_epoch, p.zk_version, p.isr)

    @staticmethod
    def _fetch_phase(rm: Any, tp: TopicPartition) -> Any:
        for fetcher in rm.fetchers.values():
            state = fetcher.states.get(tp)
            if state is not None:
                return state.phase
        return None

    def _check_dirty(self) -> None:
        dirty, self._dirty = self._dirty, {}
        checker = self.checker
        observe = checker.observe
        brokers = self.cluster.brokers
        deleting = self._deleting
        names = self._tp_names
        fetch_phase = self._fetch_phase
        # An arrival dirties the partitions of one broker, so entries come in runs of the same
        # broker: its lookups are made once per run (observing changes nothing in the cluster).
        last_bid = parts = rm = None
        for bid, tp in dirty:
            if bid != last_bid:
                last_bid = bid
                broker = brokers.get(bid)
                rm = broker.replica_manager if broker is not None and broker.alive else None
                parts = rm.partitions if rm is not None else None
            if parts is None:
                continue
            p = parts.get(tp)
            if p is None or (deleting and tp.topic in deleting):
                continue
            name = names.get(tp)
            if name is None:
                name = names[tp] = tp_name(tp)
            # Only a follower's check looks at its fetch phase.
            observe(bid, name, p, fetch_phase(rm, tp) if p.role is _FOLLOWER else None)
            if checker.violation is not None:
                return

    def _note_controller_terms(self) -> None:
        """Each live broker acting as controller, with the epoch of its term (checked
        at every sweep, and as it sends each request: see _on_send)."""
        for bid, broker in self.cluster.brokers.items():
            c = broker.controller if broker.alive else None
            if c is None or not c.is_active:
                continue
            self._note_term(bid, c)
            if self.checker.violation is not None:
                return

    def _note_term(self, bid: int, c: Any) -> None:
        incarnation = self._incarnations.setdefault(id(c), (c, len(self._incarnations)))[1]
        self.checker.on_controller_term((bid, incarnation, c.failovers), bid, c.epoch)

    def _on_send(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None]) -> None:
        """Every message a node sends.  A controller request is noted with the term that
        sends it: a term can end between two sweeps, and one that took its predecessor's
        epoch (a controller re-elected after losing the store) would go unseen there."""
        if type(message) in _CONTROLLER_REQUESTS and self.cluster is not None:
            broker = self.cluster.brokers.get(src)
            c = broker.controller if broker is not None else None
            if c is not None and c.is_active and c.epoch == message.controller_epoch:
                self._note_term(src, c)
        self._deliver(src, dst, message, arrive)

    def _note_elections(self) -> None:
        """Re-election latency: from a leader's loss to the next election of its partitions."""
        elections = self.checker.elections
        while self._seen_elections < len(elections):
            t, tp, leader, epoch = elections[self._seen_elections]
            self._seen_elections += 1
            if self.chaos is not None:
                self.chaos.on_election(tp, leader)
            for step in [s for s in self._armed if s.on == f"election:{tp}"]:
                self._armed.remove(step)
                jitter = self.rng.randint(0, step.jitter_ms) if step.jitter_ms else 0
                self.later(jitter, self._run_step, step)
            since = self._leaderless_since.pop(tp, None)
            if since is not None and epoch > 0:  # epoch 0: a new topic's first leader, no re-election
                self.reelect_ms.append(t - since)
            self._leaders.pop(_tp_of(tp), None)

    _seen_elections = 0

    def _sweep(self) -> None:
        """Check every replica (what no message announced: timers moving HWs, ISR shrinks)."""
        now = self.now_ms()
        self.checker.set_time(now)
        for bid in sorted(self.cluster.brokers):
            broker = self.cluster.brokers[bid]
            if not broker.alive or broker.replica_manager is None:
                continue
            self.instrument_broker(bid)
            for tp in list(broker.replica_manager.partitions):
                self._dirty[(bid, tp)] = None
        self._check_dirty()
        tps = [_tp_of(name) for name in self.checker.models]
        if tps:
            for tp, (leader, leader_epoch, isr) in self._store_states(tps).items():
                self.checker.on_store_state(tp_name(tp), leader, leader_epoch, isr)
        epoch = self.cluster.zk.get_controller_epoch()
        if epoch is not None:
            self.checker.on_controller_epoch(epoch[0])
        self._note_controller_terms()
        self._sample(now)

    def _sample(self, now: int) -> None:
        live = set(self.cluster.live_brokers())
        for name, m in self.checker.models.items():
            self._avail[1] += 1
            if m.leader in live and not self.network.is_paused(m.leader):
                self._avail[0] += 1
                self._leaderless_since.pop(name, None)  # back without an election (say, a leader restarted)
            else:
                self._leaderless_since.setdefault(name, now)
        if not self.record_samples:
            return
        for name, m in sorted(self.checker.models.items()):
            up = m.leader in live
            # A partition row (flag 2): the leader (0 when none is up) and the ISR.
            self.samples.append((now, name, m.leader if up else 0, -1, -1, 2, m.isr if up else ()))
        for bid in sorted(live):
            rm = self.cluster.brokers[bid].replica_manager
            for tp, p in rm.partitions.items():
                self.samples.append((now, tp_name(tp), bid, p.high_watermark, p.log_end_offset,
                                     int(p.is_leader), tuple(p.isr) if p.is_leader else ()))

    # ---- scripted steps and admin actions -------------------------------------------------------------
    def resolve(self, target: Any) -> int | None:
        if target is None or isinstance(target, int):
            return target
        if target == "controller":
            return self.cluster.controller_id
        if target == "random":
            live = self.cluster.live_brokers()
            return self.rng.choice(live) if live else None
        if target.startswith("$"):
            return self.bound.get(target[1:])
        role, _, name = target.partition(":")
        tp = _tp_of(name)
        leader = self.cluster.leader_for(tp.topic, tp.partition)
        if role == "leader":
            return leader if leader != NO_LEADER else None
        if role == "follower":
            replicas = self.cluster.zk.get_topic_assignment(tp.topic).get(tp.partition, [])
            others = [b for b in replicas if b != leader]
            return others[0] if others else None
        raise ValueError(f"unknown step target {target!r}")

    def _run_step(self, step: Step) -> None:
        # Skipped, and recorded as such: any step once the liveness phase (which heals everything
        # and stops faults) has begun; and a step whose target resolves to nobody -- "$killed"
        # when the kill found no controller, "leader:t-0" with no leader, "random" with every
        # broker down -- because background faults got there first.
        target = self.resolve(step.target) if self._phase == "run" else None
        if self._phase != "run" or (step.target is not None and target is None):
            reason = f"{self._phase} phase" if self._phase != "run" else "no such broker now"
            self.record("step_skipped", None, action=step.action, target=str(step.target), reason=reason)
            return
        if step.bind and target is not None:
            self.bound[step.bind] = target
        prm = dict(step.params)
        a = step.action
        c = self.cluster
        # A fault step the world refuses (its broker died meanwhile, say) is recorded as
        # skipped, as above; one landing on a pause, full disk or store cut the chaos
        # planner put in place replaces it and lasts the step's own duration.
        applied = True
        if a == "crash":
            applied = faults.crash(self, target, prm.get("lose_unflushed", False), prm.get("torn", False),
                                   prm.get("lose_in_flight", True))
        elif a == "crash_together":
            # Each crash refused (its broker down already) is recorded on its own; the others go on.
            for crash in prm["crashes"]:
                if not faults.crash(self, crash["broker"], crash.get("lose_unflushed", False),
                                    crash.get("torn", False), crash.get("lose_in_flight", True)):
                    self.record("step_skipped", None, action=a, target=str(crash["broker"]),
                                reason="refused by the world")
        elif a == "restart":
            applied = faults.restart(self, target)
        elif a == "controlled_shutdown":
            applied = faults.controlled_shutdown(self, target)
        elif a == "pause":
            applied = faults.pause(self, target, prm["duration_ms"], replace=True)
        elif a == "slow_disk":
            faults.slow_disk(self, target, prm.get("delay_ms", 50), prm["duration_ms"])
        elif a == "disk_full":
            applied = faults.disk_full(self, target, prm["duration_ms"], replace=True)
        elif a == "kill_controller":
            cid = c.controller_id
            applied = faults.kill_controller(self, prm.get("lose_unflushed", False))
            if applied and step.bind:
                self.bound[step.bind] = cid
        elif a == "expire_session":
            applied = faults.expire_session(self, target)
        elif a == "isolate":
            others = [b for b in c.brokers if b != target]
            faults.partition(self, [[target], others], prm["duration_ms"])
        elif a == "partition":
            faults.partition(self, prm["groups"], prm["duration_ms"])
        elif a == "cut_store":
            applied = faults.cut_store(self, target, prm["duration_ms"], replace=True)
        elif a == "reassign":
            self.record("reassign", None, f"{prm['topic']}-{prm['partition']}", replicas=prm["replicas"])
            self._admin(c.reassign, prm["topic"], prm["partition"], prm["replicas"], wait=False)
        elif a == "elect_preferred":
            self.record("elect_preferred", None, topic=prm["topic"])
            self._admin(c.elect_preferred_leaders, prm["topic"], wait=False)
        elif a == "create_topic":
            self._create_topic(prm["topic"], prm.get("partitions", 1), prm.get("replication_factor", 3))
        elif a == "delete_topic":
            self._delete_topic(prm["topic"])
        else:
            raise ValueError(f"unknown step action {a!r}")
        if not applied:
            self.record("step_skipped", None, action=a, target=str(step.target), reason="refused by the world")

    def _delete_topic(self, topic: str) -> None:
        # An accepted delete ends its history; replicas still being deleted are no longer
        # judged. A refused one (delete.topic.enable=false, no such topic) leaves it judged.
        self.record("delete_topic", None, topic=topic)
        if self._admin(self.cluster.delete_topic, topic, wait=False):
            self._deleting.add(topic)
            self._forget_topic(topic)

    def _create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        self.record("create_topic", None, topic=topic, partitions=partitions,
                    replication_factor=replication_factor)
        # Only an accepted create starts a new incarnation: a refused one (the topic exists, or
        # is still being deleted) leaves the checker judging the live topic, or still not
        # judging the dying one.
        if self._admin(self.cluster.create_topic, topic, partitions, replication_factor, wait=False):
            self._deleting.discard(topic)
            self._forget_topic(topic)

    def _forget_topic(self, topic: str) -> None:
        """The topic's history ends: the checker's models of it, and the leaderless stretch
        of any of its partitions, which no election of this incarnation will close (the
        next incarnation's first leader is no re-election)."""
        self.checker.forget_topic(topic)
        for name in [n for n in self._leaderless_since if _tp_of(n).topic == topic]:
            del self._leaderless_since[name]

    def _mark_led_again(self, broker: int) -> None:
        """``broker`` resumed from a pause: the partitions it still leads were not re-elected."""
        for name, m in self.checker.models.items():
            if m.leader == broker:
                self._leaderless_since.pop(name, None)

    def _mark_leaderless(self, broker: int | None) -> None:
        now = self.now_ms()
        for name, m in self.checker.models.items():
            if m.leader == broker:
                self._leaderless_since.setdefault(name, now)

    def _admin_tick(self) -> None:
        """Random admin actions mid-run: a side topic's create/delete, reassignment, preferred
        election and, with ``alter_configs``, a change of a topic's config."""
        if self._phase != "run":
            return
        rng, c = self.rng, self.cluster
        side = "admin-side"
        choice = rng.randrange(4 if self.scenario.workload.alter_configs else 3)
        if choice == 0:
            if c.zk.topic_exists(side):
                if not c.zk.get_topic_deletions():
                    self._delete_topic(side)
            elif not c.zk.get_topic_deletions():
                self._create_topic(side, 1, min(2, len(c.brokers)))
        elif choice == 1 and not c.zk.reassignment_in_progress():
            t = rng.choice(self.scenario.topics)
            p = rng.randrange(t.partitions)
            live = c.live_brokers()
            if len(live) >= t.replication_factor:
                replicas = rng.sample(live, t.replication_factor)
                self.record("reassign", None, f"{t.name}-{p}", replicas=replicas)
                self._admin(c.reassign, t.name, p, replicas, wait=False)
        elif choice == 3:
            t = rng.choice(self.scenario.topics)
            key, value = rng.choice(_config_changes(t.replication_factor))
            self.record("alter_config", None, topic=t.name, key=key, value=value)
            self.checker.on_topic_config(t.name, key, value)
            self._admin(c.alter_topic_config, t.name, {key: value}, wait=False)
        else:
            t = rng.choice(self.scenario.topics)
            self.record("elect_preferred", None, topic=t.name)
            self._admin(c.elect_preferred_leaders, t.name, wait=False)
        self.later(self.scenario.workload.admin_interval_ms, self._admin_tick)

    _phase = "setup"

    def _admin(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
        """An admin tool's call: a refusal (a broker just died, a topic is going) is recorded.
        True when the call was accepted."""
        try:
            fn(*args, **kwargs)
        except errors.KReplicaError as e:
            self.record("admin_refused", None, call=fn.__name__, error=e.name)
            return False
        return True

    # ---- running ------------------------------------------------------------------------------------------
    def _after_event(self) -> bool:
        """Runs between scheduler events: check what the last one touched; True stops."""
        if self._dirty:
            self.checker.set_time(self.cluster.scheduler.now_ms())
            self._check_dirty()
            self._note_elections()
        return self.checker.violation is not None

    def _step_until(self, end_ms: int, done: Callable[[], bool] | None = None) -> bool:
        """Step to ``end_ms`` (or until ``done()``), checking after every event."""
        sched = self.cluster.scheduler
        while self.checker.violation is None and sched.now_ms() < end_ms:
            try:
                sched.run_until(self._after_event, min(self.sample_ms, end_ms - sched.now_ms()))
            except Exception as e:  # noqa: BLE001 - a bug in the cluster is a finding, not a sim crash
                self.checker.set_time(sched.now_ms())
                frames = traceback.extract_tb(e.__traceback__)[-4:]
                where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
                self.checker.fail(Invariant.UNHANDLED_EXCEPTION, None, None,
                                  f"{type(e).__name__}: {e} (at {where})")
                break
            if self.checker.violation is not None:
                break
            self._sweep()
            self._note_elections()
            if done is not None and done():
                return True
        return False

    def run(self) -> RunResult:
        wall0 = time.perf_counter()
        try:
            self._build()
            events0 = self.cluster.scheduler.events_run
            self._phase = "run"
            self._start_workload()
            self._step_until(self.scenario.until_ms)
            converged = False
            if self.checker.violation is None:
                converged = self._liveness()
            return self._result(converged, time.perf_counter() - wall0, events0)
        finally:
            self.close()

    def _liveness(self) -> bool:
        self._phase = "liveness"
        self.record("liveness_start")
        if self.chaos is not None:
            self.chaos.stop()
        for c in (*self.producers, *self.consumers):
            c.stop()
        net = self.network
        net.heal()
        net.heal_store()
        net.calm()
        for b in sorted(self.cluster.brokers):
            faults.resume(self, b)
        net.slow_ms.clear()
        self.disk_full.clear()
        deadline = self.now_ms() + self.scenario.liveness_ms
        # A controlled shutdown still in progress finishes first; then the broker comes back.
        self._step_until(deadline, lambda: self._restart_stopped() and self._converged())
        ok = self.checker.violation is None and self._converged()
        if self.checker.violation is None and not ok:
            self.checker.set_time(self.now_ms())
            self.checker.fail(Invariant.LIVENESS, None, None,
                              f"no convergence within {self.scenario.liveness_ms} ms: {self._convergence_gap()}")
        if ok:
            ok = self._probe()
        if ok:
            self._final_check()
        self.record("liveness_end", converged=ok)
        return ok and self.checker.violation is None

    def _probe(self) -> bool:
        """Converged is not enough: every partition must still take an acks=all write
        (:class:`Probe`), and the replicas converge again with it, within PROBE_MS."""
        default_min_isr = int(self.cluster.config["min.insync.replicas"])
        acks = {}
        for tp, (_state, replicas) in sorted(self._partition_states().items(),
                                              key=lambda kv: (kv[0].topic, kv[0].partition)):
            overrides = self.cluster.zk.get_topic_config(tp.topic)
            min_isr = int(overrides.get("min.insync.replicas", default_min_isr))
            acks[tp] = -1 if len(replicas) >= min_isr else 1
        probe = Probe(self, acks, self.scenario.workload)
        self.record("probe_start", partitions=len(probe.pending))
        probe.start()
        self._step_until(self.now_ms() + PROBE_MS, lambda: not probe.pending and self._converged())
        if self.checker.violation is not None:
            return False
        gap = name = None
        if probe.pending:
            tp, error = next(iter(sorted(probe.pending.items(), key=lambda kv: (kv[0].topic, kv[0].partition))))
            name = tp_name(tp)
            gap = (f"{len(probe.pending)} partition(s) took no acks=all write within {PROBE_MS} ms of "
                   f"convergence: {name} (last error {error})")
        elif (why := self._convergence_gap()) is not None:
            gap = f"no convergence within {PROBE_MS} ms of the probe writes: {why}"
        if gap is not None:
            self.checker.set_time(self.now_ms())
            self.checker.fail(Invariant.LIVENESS, name, None, gap)
            return False
        return True

    def _restart_stopped(self) -> bool:
        for bid in sorted(self.cluster.brokers):
            b = self.cluster.brokers[bid]
            if not b.alive:
                faults.restart(self, bid)
        return True

    def _partition_states(self) -> dict[TopicPartition, tuple[Any, list[int]]]:
        out = {}
        zk = self.cluster.zk
        for topic in zk.get_all_topics():
            assignment = zk.get_topic_assignment(topic)
            tps = [TopicPartition(topic, p) for p in sorted(assignment)]
            states = zk.get_partition_states(tps)
            for tp in tps:
                out[tp] = (states.get(tp), assignment[tp.partition])
        return out

    def _convergence_gap(self) -> str | None:
        # A controlled shutdown still in progress is a broker about to stop: its partitions
        # may look converged now and lose it from their ISRs a moment later (swarm
        # gc-pause-chaos seed 1484, its shutdown done during the probe).  Wait for it to
        # finish; the broker then comes back (_restart_stopped).
        for bid, b in sorted(self.cluster.brokers.items()):
            if b.alive and b.shutting_down:
                return f"broker {bid}'s controlled shutdown is still in progress"
        if self.cluster.zk.get_topic_deletions() or self.cluster.zk.reassignment_in_progress():
            return "admin operation in progress"
        if self.scenario.workload.alter_configs and (gap := self._config_gap()) is not None:
            return gap
        for tp, (state, replicas) in sorted(self._partition_states().items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            if state is None or state.leader == NO_LEADER:
                return f"{tp_name(tp)} has no leader"
            if sorted(state.isr) != sorted(replicas):
                return f"{tp_name(tp)} ISR {list(state.isr)} != replicas {replicas}"
            # The store naming a leader is not enough: that broker must lead at that epoch.
            # A leader that never took up its LeaderAndIsr serves nothing, while every
            # replica, idle, still shows HW = LEO.
            if (gap := self._leader_gap(tp, state)) is not None:
                return gap
            offsets = set()
            for b in replicas:
                broker = self.cluster.brokers[b]
                p = broker.replica_manager.partitions.get(tp) if broker.alive and broker.replica_manager else None
                if p is None:
                    return f"{tp_name(tp)} not hosted on {b}"
                offsets.add((p.high_watermark, p.log_end_offset))
                if p.high_watermark != p.log_end_offset:
                    return f"{tp_name(tp)} on {b}: HW {p.high_watermark} != LEO {p.log_end_offset}"
            if len(offsets) != 1:
                return f"{tp_name(tp)} replicas disagree on HW/LEO {sorted(offsets)}"
        return None

    def _leader_gap(self, tp: TopicPartition, state: Any) -> str | None:
        """Why the store's leader of ``tp`` does not lead it at the store's leader epoch, if it does not."""
        broker = self.cluster.brokers.get(state.leader)
        rm = broker.replica_manager if broker is not None and broker.alive else None
        p = rm.partitions.get(tp) if rm is not None else None
        if p is None or not p.is_leader or p.leader_epoch != state.leader_epoch:
            role = "not hosted" if p is None else f"{p.role.value} at epoch {p.leader_epoch}"
            return f"{tp_name(tp)} leader {state.leader} (epoch {state.leader_epoch}) is not leading it: {role}"
        return None

    def _config_gap(self) -> str | None:
        for t in self.scenario.topics:
            if self.cluster.zk.topic_exists(t.name) and not self.cluster.topic_config_applied(t.name):
                return f"{t.name}: a broker has not applied the topic's config"
        return None

    def _converged(self) -> bool:
        return self._convergence_gap() is None

    def _final_check(self) -> None:
        self._sweep()
        for tp, (_state, replicas) in sorted(self._partition_states().items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            parts = {b: self.cluster.brokers[b].replica_manager.partitions[tp] for b in replicas}
            self.checker.final_check(tp_name(tp), parts)
            if self.checker.violation is not None:
                return

    def _result(self, converged: bool, wall_s: float, events0: int) -> RunResult:
        c = self.checker
        avail = self._avail[0] / self._avail[1] if self._avail[1] else 1.0
        fault_kinds = {"crash", "restart", "controlled_shutdown", "pause", "slow_disk", "disk_full",
                       "kill_controller", "expire_session", "partition", "heal", "cut_store", "heal_store"}
        fault_list = [(e.time_ms, e.kind, e.broker) for e in self.history.events if e.kind in fault_kinds]
        return RunResult(
            self.scenario.name, self.seed, self.history.hash, len(self.history), self.now_ms(), wall_s,
            c.violation, list(c.losses), c.unclean_elections, c.acked_writes, c.consumed_batches, avail,
            list(self.reelect_ms), converged, self.cluster.scheduler.events_run - events0,
            self.samples, fault_list, c.writes_completed, list(c.superseded_reads),
        )

    def close(self) -> None:
        try:
            if self.cluster is not None:
                try:
                    self.cluster.close()
                except Exception:  # noqa: BLE001 - a crashed world still frees its files
                    pass
        finally:  # a SystemExit (a pool worker's SIGTERM) inside the close too
            if self._tmp is not None and not self.keep_data:
                _remove_tree(self._tmp)

    @property
    def data_dir(self) -> str | None:
        """The cluster's data dir (``broker-N/<topic>-<partition>``), a temp dir made by the run."""
        return self._tmp


def _tp_of(name: str) -> TopicPartition:
    topic, _, p = name.rpartition("-")
    return TopicPartition(topic, int(p))


def _remove_tree(path: str) -> None:
    """shutil.rmtree that finishes when an interrupt lands inside it: the rest is removed,
    then the interrupt goes on.  (The SIGTERM handlers ignore a second SIGTERM, so the
    second pass is not cut short in turn.)"""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def _default_root() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def default_data_root() -> str:
    """Where a World makes its data dir when given no ``data_root``: /dev/shm when there
    is one (the runs are fsync-heavy and short-lived), else the temp dir."""
    return _default_root() or tempfile.gettempdir()


def run(scenario: Scenario, seed: int, **kwargs: Any) -> RunResult:
    return World(scenario, seed, **kwargs).run()


def _config_changes(replication_factor: int) -> list[tuple[str, str]]:
    """What a random admin may set on a topic: its min ISR, unclean election, retention."""
    return ([("min.insync.replicas", str(n)) for n in range(1, replication_factor + 1)]
            + [("unclean.leader.election.enable", v) for v in ("true", "false")]
            + [("retention.bytes", str(n)) for n in (-1, 4096, 16384)])
