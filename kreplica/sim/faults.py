"""Faults: the things that go wrong, applied to a running world, and the chaos planner.

Theory of operation (issue 5, TigerBeetle VOPR).  Each fault is one function of
the world that records itself in the history before acting, so a failing seed's
trace shows exactly what was done and when.  The catalogue:

- ``crash``: the broker's host fails (``Broker.kill``: no flush, no clean close,
  its session abandoned); by default what it had sent but not yet delivered is
  lost with it (``lose_in_flight``), as a host's queues are.  With ``lose_unflushed`` it is a power loss: every byte
  the log had not fsynced (after its recovery point) is zeroed on disk, and
  with ``torn`` a prefix of the unflushed bytes (under 200) survives, as a torn write
  leaves one: it ends inside the first unflushed batch, or, when that batch is shorter,
  keeps it whole and ends inside a later one.  Recovery on restart must cut there.
- ``restart``, ``controlled_shutdown`` (seed 003), ``pause`` (a GC pause: the
  whole process frozen -- its own timers held until resume, then run late --
  no messages in or out, no store heartbeats), ``slow_disk`` (every request to the
  broker handled late), ``disk_full`` (appends fail with KAFKA_STORAGE_ERROR),
  ``kill_controller``, ``expire_session`` (heartbeats stop for a whole session
  timeout), network ``partition`` between broker sets and ``cut_store``.

:class:`ChaosPlanner` draws these at random rates from the world's seeded rng
while keeping at most ``max_down`` brokers down, and stops at the liveness
phase.  Failures may also cascade: with probability ``cascade`` a newly elected
leader fails within ``cascade_ms_max`` ms -- KIP-101's double failure, arising
on its own from whatever caused the first election.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KafkaStorageError
from ..log.mapped_file import zero_tail

if TYPE_CHECKING:
    from .world import World


@dataclass(frozen=True, slots=True)
class LostTail:
    """What a power loss takes from one partition log: everything after its last flush."""

    tp: Any
    first_offset: int
    segment: Path
    position: int
    later_segments: tuple[Path, ...]
    torn_bytes: int
    end: int  # the segment's written size: beyond it the preallocated file is zeros already


def unflushed_tails(rm: Any, rng: Any, torn: bool) -> list[LostTail]:
    """For each open log of a replica manager, where its unflushed bytes start."""
    out = []
    for tp, p in sorted(rm.partitions.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        log = p.log
        rp, leo = log.recovery_point, log.log_end_offset
        if rp >= leo:
            continue
        segments = log.segments
        i = max(j for j, s in enumerate(segments) if s.base_offset <= rp) if segments[0].base_offset <= rp else 0
        seg = segments[i]
        pos = seg.size if rp >= seg.next_offset else seg.position_of(rp)[0]
        torn_bytes = 0
        if torn and pos < seg.size:
            # Keep a prefix of the unflushed bytes (it may hold a short first batch whole):
            # the batch it ends in says, in its header, that it is longer.
            torn_bytes = rng.randint(1, min(seg.size - pos, 200) - 1) if seg.size - pos > 1 else 0
        later = tuple(s.log_file.path for s in segments[i + 1:])
        out.append(LostTail(tp, rp, seg.log_file.path, pos, later, torn_bytes, seg.size))
    return out


def drop_tail(tail: LostTail) -> None:
    """Zero the unflushed bytes on disk (the page cache is gone) and drop later segments."""
    start = tail.position + tail.torn_bytes
    # Only the written part needs zeroing; writing zeros over a whole preallocated
    # segment cost ~9 s of system time per crash with 1 GiB segments.  What the node
    # had already sent is not lost with its page cache: a view a message on its way
    # still holds keeps its bytes (zero_tail).
    if tail.end > start:
        zero_tail(os.fspath(tail.segment), start, tail.end)
    for path in tail.later_segments:
        for suffix in (".log", ".index", ".timeindex"):
            path.with_suffix(suffix).unlink(missing_ok=True)


def _own_end(world: "World", kind: str, broker: int) -> object:
    """A token for the ``kind`` fault now in place on ``broker``: only the timer holding
    it ends that fault, so an earlier fault's timer cannot end one that replaced it."""
    world.fault_ends[(kind, broker)] = token = object()
    return token


def _is_own_end(world: "World", kind: str, broker: int, token: object) -> bool:
    return world.fault_ends.get((kind, broker)) is token


# ---- the catalogue ------------------------------------------------------------------------

def crash(world: "World", broker: int, lose_unflushed: bool = False, torn: bool = False,
          lose_in_flight: bool = True) -> bool:
    b = world.cluster.brokers[broker]
    if not b.alive:
        return False
    tails = unflushed_tails(b.replica_manager, world.rng, torn) if lose_unflushed and b.replica_manager else []
    world.record("crash", broker, lose_unflushed=lose_unflushed, torn=torn, lose_in_flight=lose_in_flight,
                 dropped={f"{t.tp.topic}-{t.tp.partition}": t.first_offset for t in tails})
    # The process is gone: what its pause held never runs, nor anything it scheduled.
    world.processes[broker].kill()
    world.network.resume(broker)
    if lose_in_flight:
        world.network.lose_in_flight(broker)
    world.cluster.kill(broker)
    world._mark_leaderless(broker)  # time to re-elect counts from here, not from the next sample
    for t in tails:
        drop_tail(t)
        world.checker.on_power_loss(broker, f"{t.tp.topic}-{t.tp.partition}", t.first_offset)
    world.disk_full.discard(broker)
    return True


def restart(world: "World", broker: int) -> bool:
    b = world.cluster.brokers[broker]
    if b.alive:
        return False
    world.record("restart", broker)
    world.checker.on_restart(broker)
    world.cluster.start(broker)
    return True


def controlled_shutdown(world: "World", broker: int) -> bool:
    b = world.cluster.brokers[broker]
    if not b.alive or b.shutting_down:
        return False
    world.record("controlled_shutdown", broker)
    b.controlled_shutdown(lambda ok: world.record("controlled_shutdown_done", broker, ok=ok))
    return True


def pause(world: "World", broker: int, duration_ms: int, replace: bool = False) -> bool:
    """A stop-the-world pause of the broker's process for ``duration_ms``.

    Nothing of it runs (its :class:`PausableScheduler` holds every callback that
    comes due) and nothing reaches it or leaves it (the network holds messages,
    the store hears no heartbeats).  A broker paused already is refused, unless
    ``replace`` (a scenario's scripted step): then the process stays paused and the
    new pause lasts its own duration, the earlier one's end no longer applying.
    """
    view = world.processes[broker]
    if not world.cluster.brokers[broker].alive:
        return False
    paused = world.network.is_paused(broker) or view.paused
    if paused and not replace:
        return False
    world.record("pause", broker, duration_ms=duration_ms)
    if not paused:
        world.network.pause(broker)
        view.pause()
        world._mark_leaderless(broker)
    token = _own_end(world, "pause", broker)
    world.later(duration_ms, _resume, world, broker, view, token)
    return True


def _resume(world: "World", broker: int, view: Any, token: object) -> None:
    # A crash during the pause ended that process; a restarted one is not this pause's.
    # Nor does a pause a later one replaced end here.
    if world.processes.get(broker) is view and _is_own_end(world, "pause", broker, token):
        resume(world, broker)


def resume(world: "World", broker: int) -> None:
    """End a pause now (its timer, or the liveness phase's heal).

    Order at the resume instant, all on the shared scheduler: first the
    callbacks the process held, in the order they came due (its timers were due
    before anything else could reach it: a resumed JVM's scheduler threads run
    at once); then the store's queued notices (session expiry, watches) once
    the session reaches the store again; then what its socket buffers took in
    during the pause, in order, at the same instant (the network hands it over
    after the callbacks, as bytes waiting in a socket are read after the overdue
    tasks have started).  What it sent, or was sent, during the pause leaves
    now and arrives after its link latency.
    """
    view = world.processes.get(broker)
    paused = world.network.is_paused(broker) or (view is not None and view.paused)
    if not paused:
        return
    held = view.resume() if view is not None else 0
    world.record("resume", broker, held=held)
    world.network.resume(broker)
    world._mark_led_again(broker)


def slow_disk(world: "World", broker: int, delay_ms: int, duration_ms: int) -> bool:
    """``broker`` handles every request ``delay_ms`` late for ``duration_ms``.  One that
    replaces a slow disk still in place lasts its own duration: the earlier one's end no
    longer applies (it used to end the new one early)."""
    world.record("slow_disk", broker, delay_ms=delay_ms, duration_ms=duration_ms)
    world.network.slow_ms[broker] = delay_ms
    token = _own_end(world, "slow_disk", broker)
    world.later(duration_ms, _fast_disk, world, broker, token)
    return True


def _fast_disk(world: "World", broker: int, token: object) -> None:
    if not _is_own_end(world, "slow_disk", broker, token):
        return
    del world.fault_ends[("slow_disk", broker)]
    if world.network.slow_ms.pop(broker, None) is not None:
        world.record("disk_fast", broker)


def disk_full(world: "World", broker: int, duration_ms: int, replace: bool = False) -> bool:
    """``broker``'s disk is full for ``duration_ms``: its log appends fail.  A disk full
    already is refused, unless ``replace`` (a scripted step): then it lasts the new
    duration.  Only the newest fault's timer frees it: a crash frees a disk early
    (the restarted broker gets a working one), and the earlier timer must not end a
    later fault."""
    if not world.cluster.brokers[broker].alive or (broker in world.disk_full and not replace):
        return False
    world.record("disk_full", broker, duration_ms=duration_ms)
    world.disk_full.add(broker)
    world.instrument_broker(broker)
    token = _own_end(world, "disk_full", broker)
    world.later(duration_ms, _disk_freed, world, broker, token)
    return True


def _disk_freed(world: "World", broker: int, token: object) -> None:
    if broker in world.disk_full and _is_own_end(world, "disk_full", broker, token):
        world.disk_full.discard(broker)
        world.record("disk_freed", broker)


def full_disk_guard(world: "World", broker: int, append: Any) -> Any:
    """Wrap a log append so it fails as a full disk does while ``broker``'s disk is full."""
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if broker in world.disk_full:
            raise KafkaStorageError(f"broker {broker}: no space left on device")
        return append(*args, **kwargs)
    return guarded


def kill_controller(world: "World", lose_unflushed: bool = False) -> bool:
    cid = world.cluster.controller_id
    if cid is None or not world.cluster.brokers[cid].alive:
        return False
    world.record("kill_controller", cid)
    return crash(world, cid, lose_unflushed)


def expire_session(world: "World", broker: int) -> bool:
    b = world.cluster.brokers[broker]
    if not b.alive or b.session is None:
        return False
    world.record("expire_session", broker)
    session = b.session
    session.pause_heartbeats()
    world.later(world.session_timeout_ms + 10, session.resume_heartbeats)
    return True


def partition(world: "World", groups: list[list[int]], duration_ms: int) -> bool:
    """Cut the network between ``groups`` for ``duration_ms``. One that replaces a
    partition still in place (a scripted step during a swarm's chaos) lasts its own
    duration: the earlier one's heal no longer applies."""
    world.record("partition", None, groups=[sorted(g) for g in groups], duration_ms=duration_ms)
    world.network.partition(*[set(g) for g in groups])
    world.partition_in_place = token = object()
    world.later(duration_ms, _heal_partition, world, token)
    return True


def _heal_partition(world: "World", token: object) -> None:
    # A partition the liveness phase healed already (network.heal) has no end to record.
    if world.partition_in_place is token and world.network.partitioned:
        heal(world)


def heal(world: "World") -> None:
    world.partition_in_place = None
    world.record("heal", None)
    world.network.heal()


def cut_store(world: "World", broker: int, duration_ms: int, replace: bool = False) -> bool:
    """Cut ``broker`` off the metadata store for ``duration_ms``.  A broker cut off
    already is refused, unless ``replace`` (a scripted step): then the cut lasts its
    own duration, the earlier one's heal no longer applying."""
    cut = broker in world.network.store_cut
    if cut and not replace:
        return False
    world.record("cut_store", broker, duration_ms=duration_ms)
    if not cut:
        world.network.cut_from_store(broker)
    token = _own_end(world, "cut_store", broker)
    world.later(duration_ms, _heal_store, world, broker, token)
    return True


def _heal_store(world: "World", broker: int, token: object) -> None:
    if broker in world.network.store_cut and _is_own_end(world, "cut_store", broker, token):
        world.record("heal_store", broker)
        world.network.heal_store(broker)


# ---- random chaos -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FaultRates:
    """Expected faults per virtual minute, by kind; durations in ms."""

    crash: float = 2.0
    power_loss_fraction: float = 0.0  # of crashes, how many drop unflushed bytes
    torn_fraction: float = 0.5  # of power losses, how many tear the last batch
    controlled_shutdown: float = 0.5
    pause: float = 1.0
    slow_disk: float = 0.5
    disk_full: float = 0.0
    kill_controller: float = 0.5
    expire_session: float = 0.5
    partition: float = 1.0
    cut_store: float = 0.5
    downtime_ms_max: int = 8000
    pause_ms_max: int = 4000
    partition_ms_max: int = 6000
    max_down: int = 1
    # Correlated failures: the chance that a new leader fails 0..cascade_ms_max ms after
    # its election (an overloaded successor, a rack going down in steps).
    cascade: float = 0.0
    cascade_ms_max: int = 40


# The shortest fault the planner draws under each FaultRates *_ms_max bound: a bound below it
# leaves an empty range to draw from, so the scenario loader refuses one (Scenario.validate).
SHORTEST_MS = {"downtime_ms_max": 200, "pause_ms_max": 50, "partition_ms_max": 100}

# FaultRates' rates per virtual minute, one per kind of fault, in the order swarm draws them;
# the other fields are shapes (fractions of crashes, a chance per election, durations, a bound).
PER_MINUTE = ("crash", "controlled_shutdown", "pause", "slow_disk", "disk_full", "kill_controller",
              "expire_session", "partition", "cut_store")


class ChaosPlanner:
    """Draws faults each ``tick_ms`` with the world's rng until ``stop()``."""

    def __init__(self, world: "World", rates: FaultRates, tick_ms: int = 250) -> None:
        self.world = world
        self.rates = rates
        self.tick_ms = tick_ms
        self.running = False

    def start(self) -> None:
        self.running = True
        self.world.later(self.tick_ms, self._tick)

    def stop(self) -> None:
        self.running = False

    def on_election(self, tp: str, leader: int) -> None:
        """Maybe fail the new leader right after its election (a cascading failure)."""
        w, r = self.world, self.rates
        if not self.running or not r.cascade or w.rng.random() >= r.cascade:
            return
        w.later(w.rng.randint(0, r.cascade_ms_max), self._cascade, leader)

    def _cascade(self, leader: int) -> None:
        w = self.world
        down = len(w.cluster.brokers) - len(w.cluster.live_brokers())
        if self.running and down < self.rates.max_down and crash(w, leader):
            w.later(self._duration("downtime_ms_max"), restart, w, leader)

    def _restart_shut_down(self, broker: int) -> None:
        """Bring back a broker the planner shut down.  Its shutdown may outlast the delay
        drawn for the restart (attempts ``controlled.shutdown.retry.backoff.ms`` apart, a
        controller out of reach): the restart then waits for the broker to stop, looking
        again each tick, where it used to be refused and leave the broker down until the
        liveness phase (swarm seed 76, the 184th review)."""
        w = self.world
        b = w.cluster.brokers[broker]
        if b.alive and b.shutting_down:
            w.later(self.tick_ms, self._restart_shut_down, broker)
        else:
            restart(w, broker)

    def _duration(self, bound: str) -> int:
        """A fault's length in ms, drawn between its shortest and its ``FaultRates`` bound."""
        return self.world.rng.randint(SHORTEST_MS[bound], getattr(self.rates, bound))

    def _chance(self, per_minute: float) -> bool:
        return per_minute > 0 and self.world.rng.random() < per_minute * self.tick_ms / 60_000

    def _tick(self) -> None:
        if not self.running:
            return
        w, r, rng = self.world, self.rates, self.world.rng
        live = w.cluster.live_brokers()
        down = len(w.cluster.brokers) - len(live)
        if live:
            target = rng.choice(live)
            if down < r.max_down and self._chance(r.crash):
                power = rng.random() < r.power_loss_fraction
                if crash(w, target, power, power and rng.random() < r.torn_fraction):
                    w.later(self._duration("downtime_ms_max"), restart, w, target)
            elif down < r.max_down and self._chance(r.controlled_shutdown):
                if controlled_shutdown(w, target):
                    w.later(rng.randint(2000, r.downtime_ms_max + 2000), self._restart_shut_down, target)
            elif down < r.max_down and self._chance(r.kill_controller):
                cid = w.cluster.controller_id
                if cid is not None and kill_controller(w):
                    w.later(self._duration("downtime_ms_max"), restart, w, cid)
            elif self._chance(r.pause):
                pause(w, target, self._duration("pause_ms_max"))
            elif self._chance(r.slow_disk):
                slow_disk(w, target, rng.randint(5, 200), rng.randint(500, 5000))
            elif self._chance(r.disk_full):
                disk_full(w, target, rng.randint(200, 3000))
            elif self._chance(r.expire_session):
                expire_session(w, target)
            elif self._chance(r.partition) and len(live) > 1 and not w.network.partitioned:
                ids = sorted(w.cluster.brokers)
                rng.shuffle(ids)
                cut = rng.randint(1, len(ids) - 1)
                partition(w, [sorted(ids[:cut]), sorted(ids[cut:])], self._duration("partition_ms_max"))
            elif self._chance(r.cut_store):
                cut_store(w, target, self._duration("partition_ms_max"))
        w.later(self.tick_ms, self._tick)
