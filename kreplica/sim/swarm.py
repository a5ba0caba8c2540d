"""Swarm testing: a different cluster, configuration and fault mix for every seed.

Theory of operation (TigerBeetle VOPR's swarm, after Groce et al., "Swarm
Testing").  One fixed fault mix explores one corner of the state space; drawing
the mix itself from the seed explores many.  :func:`swarm_scenario` derives,
from the seed alone, the cluster size (3 to 7 brokers), topic shape and
replication factor, the configuration (acks, ``min.insync.replicas``,
``unclean.leader.election.enable``, ``replica.truncation.strategy``), the
rate of each fault (some switched off entirely), the network (latency, its
slow tail, message loss and duplication, clients' requests overtaking one
another) and how many batches a producer keeps in flight, on top of a base
scenario.
The result is an ordinary :class:`Scenario`, recorded in the run header, so a
swarm seed replays like any other.

A base with a script (``[[steps]]``, or topics with a fixed assignment) keeps its
topics and steps: the swarm only adds brokers to the ones the script names, and
draws the configuration and a background of random faults around the story.  A
base's ``[nodes.<id>]`` and ``[links."<from>-<to>"]`` profiles likewise keep every
broker they name.

A base whose point is its mix says ``swarm_mix = "base"``: each fault's drawn rate
then scales the base's own rate instead (the draw's mean is 1x; a fault the draw
switches off stays off), and the base's fault durations and admin cadence stay;
its network keeps its latencies, with loss and duplication scaled the same way.
gc-pause-chaos keeps its long, dense pauses that way, and config-churn its config
change every second.  Either mix takes the same draws in the same order, so a seed
gives the same cluster and configuration under both.
"""
from __future__ import annotations

import random
from dataclasses import replace

from .faults import PER_MINUTE, FaultRates
from .network import LinkProfile
from .scenarios import Scenario, TopicSpec, WorkloadSpec, load

# A fault's drawn rate per virtual minute, when not switched off; its mean is 1x of a base's rate.
_RATE_RANGE = (0.2, 4.0)
_MEAN_RATE = sum(_RATE_RANGE) / 2


def swarm_scenario(seed: int, base: Scenario | None = None) -> Scenario:
    base = base or load("random-chaos")
    scripted = bool(base.steps) or any(t.assignment for t in base.topics)
    rng = random.Random(f"swarm:{seed}")
    # Brokers the base's link profiles name stay, as a script's do: a [nodes.7] profile
    # over a drawn 6-broker cluster names no broker, and that seed could not run.
    named = max([*base.nodes, *(b for pair in base.links for b in pair)], default=0)
    fewest = max(3, base.brokers if scripted else named)
    brokers = rng.randint(fewest, max(fewest, 7))
    rf = rng.randint(2, min(brokers, 4))
    partitions = rng.randint(1, 8)
    topics = base.topics if scripted else (TopicSpec("t", partitions, rf),)
    rf = min(t.replication_factor for t in topics)
    acks = rng.choice(["0", "1", "all", "all"])
    min_isr = rng.randint(1, rf)
    unclean = rng.random() < 0.25
    strategy = rng.choice(["high-watermark", "leader-epoch"])
    rates = {name: (0.0 if rng.random() < 0.3 else round(rng.uniform(*_RATE_RANGE), 2)) for name in PER_MINUTE}
    chaos = FaultRates(
        **rates,
        power_loss_fraction=round(rng.uniform(0.0, 0.5), 2),
        torn_fraction=round(rng.random(), 2),
        downtime_ms_max=rng.choice([2000, 5000, 10000]),
        pause_ms_max=rng.choice([500, 2000, 6000]),
        partition_ms_max=rng.choice([1000, 4000, 8000]),
        max_down=rng.randint(1, max(1, rf - 1)),
        cascade=rng.choice([0.0, 0.0, 0.1, 0.3]),
    )
    config = dict(base.config)
    config.update({
        "min.insync.replicas": min_isr,
        "unclean.leader.election.enable": unclean,
        "replica.truncation.strategy": strategy,
        "acks": acks,
    })
    workload = replace(base.workload if base.workload else WorkloadSpec(), acks=acks,
                       produce_interval_ms=rng.choice([20, 50, 100, 200]),
                       admin_interval_ms=rng.choice([0, 0, 5000]))
    # Drawn last: adding it left a seed's cluster, configuration and faults as they were.
    network = _draw_network(rng)
    # Drawn after the network, for the same reason: client requests that may overtake one
    # another (a client with several connections), and producers with several batches
    # unanswered, so that a retry can land behind a later batch.
    reorder = rng.random() < 0.3
    max_in_flight = rng.choice([1, 1, 2, 5])
    if base.swarm_mix == "base":
        chaos, workload, network = _around_base(base, chaos, workload, network)
    network = replace(network, reorder=reorder)
    workload = replace(workload, max_in_flight=max_in_flight)
    return replace(
        base,
        network=network,
        name=f"swarm-{seed}",
        description=f"swarm seed {seed} over {base.name}",
        brokers=brokers,
        config=config,
        topics=topics,
        workload=workload,
        chaos=chaos,
        until_ms=min(base.until_ms, 30_000),
        swarm_mix="swarm",  # the drawn scenario is concrete: nothing left to vary
    )


# Loss and duplication per message, when not switched off; their mean is 1x of a base's.
_LOSS_RANGE = (0.0002, 0.01)
_MEAN_LOSS = sum(_LOSS_RANGE) / 2


def _draw_network(rng: random.Random) -> LinkProfile:
    """Every link's profile: a latency range, an occasional slow tail, message loss and
    duplication (the network applies those to the data plane only)."""
    low = rng.choice([1, 1, 2, 5])
    return LinkProfile(
        latency_ms_min=low,
        latency_ms_max=low + rng.choice([0, 4, 10, 30]),
        tail_probability=rng.choice([0.0, 0.01, 0.1, 0.3]),
        latency_ms_tail=rng.choice([20, 50, 200]),
        drop_probability=0.0 if rng.random() < 0.3 else round(rng.uniform(*_LOSS_RANGE), 4),
        duplicate_probability=0.0 if rng.random() < 0.3 else round(rng.uniform(*_LOSS_RANGE), 4),
    )


def _around_base(base: Scenario, drawn: FaultRates, workload: WorkloadSpec,
                 network: LinkProfile) -> tuple[FaultRates, WorkloadSpec, LinkProfile]:
    """``swarm_mix = "base"``: the drawn rates as multiples of the base's, its durations,
    admin cadence and latencies kept."""
    losses = {name: round(getattr(base.network, name) * getattr(network, name) / _MEAN_LOSS, 6)
              for name in ("drop_probability", "duplicate_probability")}
    network = replace(base.network, **losses)
    own = base.chaos
    assert own is not None  # Scenario.validate requires a [chaos] mix to vary
    rates = {name: round(getattr(own, name) * getattr(drawn, name) / _MEAN_RATE, 2) for name in PER_MINUTE}
    chaos = replace(drawn, **rates, downtime_ms_max=own.downtime_ms_max, pause_ms_max=own.pause_ms_max,
                    partition_ms_max=own.partition_ms_max)
    if base.workload.admin_interval_ms:
        workload = replace(workload, admin_interval_ms=base.workload.admin_interval_ms)
    return chaos, workload, network

