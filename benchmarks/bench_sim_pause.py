"""The cost of a broker's PausableScheduler on the unpaused path (issue 5's 200k events/s target).

Each broker of a simulated world schedules its timers through a
:class:`~kreplica.sim.pausable_scheduler.PausableScheduler` over the shared
SimScheduler.  This measures self-rescheduling timer chains (the shape of a
fetcher's backoff or a purgatory's expiry: schedule, fire, schedule again) run
directly on the SimScheduler and through a view, side by side; and whole
chaos worlds without pauses (the same history either way: the view is
transparent unpaused) with the brokers on their views or on the shared scheduler.

    .venv/bin/python benchmarks/bench_sim_pause.py            # the table
    .venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-enable benchmarks/bench_sim_pause.py
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from kreplica.runtime import SimScheduler
from kreplica.sim import scenarios
from kreplica.sim.pausable_scheduler import PausableScheduler
from kreplica.sim.world import World


def timer_chains(events: int, through_view: bool, chains: int = 64) -> tuple[int, float]:
    """``events`` timer firings in ``chains`` self-rescheduling chains; (events run, CPU s)."""
    shared = SimScheduler(1)
    sched: Any = PausableScheduler(shared) if through_view else shared
    left = [events]

    def tick(delay: int) -> None:
        left[0] -= 1
        if left[0] > 0:
            sched.call_later(delay, tick, delay)

    for i in range(chains):
        sched.call_later(i % 7, tick, 1 + i % 5)
    c0 = time.process_time()
    shared.advance(10**9)
    return shared.events_run, time.process_time() - c0


def pause_free_worlds(through_view: bool, seeds: tuple[int, ...] = (1, 2, 3, 4)) -> tuple[int, float, list[str]]:
    """bench_sim's 60 virtual s chaos run with pauses off; (scheduler events, CPU s, history hashes)."""
    sc = scenarios.load("random-chaos").with_config(**{"replica.truncation.strategy": "leader-epoch"})
    sc = replace(sc, brokers=3, until_ms=60_000, topics=(replace(sc.topics[0], partitions=10),),
                 workload=replace(sc.workload, produce_interval_ms=100), chaos=replace(sc.chaos, pause=0.0))
    events, cpu, hashes = 0, 0.0, []
    for seed in seeds:
        world = World(sc, seed)
        if not through_view:
            def shared_scheduler(bid: int, shared: Any, world: World = world) -> Any:
                world.processes[bid] = PausableScheduler(shared)  # crash() still finds one to kill
                return shared
            world._process_scheduler = shared_scheduler  # type: ignore[method-assign]
        c0 = time.process_time()
        r = world.run()
        cpu += time.process_time() - c0
        events += r.scheduler_events
        hashes.append(r.history_hash)
    return events, cpu, hashes


@pytest.mark.benchmark(group="sim-pause")
@pytest.mark.parametrize("through_view", [False, True], ids=["shared", "view"])
def test_timer_chain_rate(benchmark, through_view):
    events, _ = benchmark.pedantic(timer_chains, args=(100_000, through_view), rounds=3, iterations=1)
    assert events >= 100_000


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="PausableScheduler overhead, unpaused (best of 5)")
    for col in ("path", "timer events / CPU s", "CPU ns / event"):
        table.add_column(col)
    for label, view in (("SimScheduler directly", False), ("through a PausableScheduler", True)):
        events, cpu = min((timer_chains(200_000, view) for _ in range(5)), key=lambda r: r[1])
        table.add_row(label, f"{events / cpu:,.0f}", f"{cpu / events * 1e9:,.0f}")
    Console().print(table)
    worlds = Table(title="whole chaos worlds, pauses off, seeds 1-4 (best of 2)")
    for col in ("brokers on", "events / CPU s", "same histories"):
        worlds.add_column(col)
    runs = {view: min((pause_free_worlds(view) for _ in range(2)), key=lambda r: r[1]) for view in (False, True)}
    for view, label in ((False, "the shared SimScheduler"), (True, "their PausableSchedulers")):
        events, cpu, hashes = runs[view]
        worlds.add_row(label, f"{events / cpu:,.0f}", str(hashes == runs[not view][2]))
    Console().print(worlds)


if __name__ == "__main__":
    main()
