"""The deterministic simulator (issue 5): one seed drives a whole cluster, faults and workload.

Theory of operation (TigerBeetle VOPR, etcd-raft's test network).  A
:class:`~kreplica.sim.world.World` runs one scenario (:mod:`.scenarios`, data in
TOML) with one seed over the embedded Cluster on a :class:`~.network.SimNetwork`;
:mod:`.faults` breaks things, :mod:`.workload` produces and consumes,
:mod:`.checker` checks the six safety invariants after every step, :mod:`.history`
records everything and hashes it, :mod:`.swarm` randomizes the scenario per seed,
:mod:`.report` summarizes and plots.  ``kreplica simulate`` (``kreplica.sim_cli``)
is the command line.

    from kreplica.sim import World, load
    result = World(load("kip101-hw-truncation"), seed=7).run()
    result.ok, result.violation, result.losses, result.history_hash
"""
from __future__ import annotations

from .checker import Checker, CountedLoss, Invariant, Violation
from .history import Event, History
from .network import LinkProfile, SimNetwork
from .scenarios import Scenario, load, names
from .swarm import swarm_scenario
from .world import RunResult, World, run

__all__ = [
    "Checker", "CountedLoss", "Event", "History", "Invariant", "LinkProfile", "RunResult", "Scenario",
    "SimNetwork", "Violation", "World", "load", "names", "run", "swarm_scenario",
]
