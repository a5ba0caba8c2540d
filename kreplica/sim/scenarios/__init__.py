"""Scenario files: one TOML per scenario in this directory, loaded into a :class:`Scenario`.

A scenario is data: the cluster (``brokers``, ``config``, ``[[topics]]``), the
``[workload]``, the ``[network]`` link profile (and ``[nodes.<id>]`` profiles for
every link to or from one broker), optional ``[chaos]`` fault rates
and a list of scripted ``[[steps]]``.  A step names an ``action`` (a fault or an
admin call), when (``at_ms`` plus a seeded random ``jitter_ms``), and a
``target``: a broker id, ``"leader:<topic>-<p>"``, ``"follower:<topic>-<p>"``,
``"controller"``, ``"random"``, or ``"$name"`` for a broker an earlier step bound
with ``bind = "name"``.  A step with ``on = "election:<topic>-<p>"`` is armed at
``at_ms`` and fires ``jitter_ms`` (random) after the next election of that
partition -- the timing KIP-101's double failures need.  Everything else in the step is passed to the action.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..faults import FaultRates
from ..network import LinkProfile

HERE = Path(__file__).parent


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int = 1
    replication_factor: int = 3
    assignment: dict[int, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    acks: str = "all"
    produce_interval_ms: int = 50  # mean gap between one producer's batches
    batch_records: int = 2
    producers_per_partition: int = 1
    retries: int = 5
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 3000
    consumers: bool = True
    consumer_interval_ms: int = 100
    keys: int = 16
    admin_interval_ms: int = 0  # 0: no random admin actions


@dataclass(frozen=True, slots=True)
class Step:
    action: str
    at_ms: int = 0
    jitter_ms: int = 0
    target: Any = None
    bind: str | None = None
    on: str | None = None  # "election:<topic>-<p>": armed at at_ms, fires at the next such election
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str = ""
    brokers: int = 3
    config: dict[str, Any] = field(default_factory=dict)
    topics: tuple[TopicSpec, ...] = (TopicSpec("t", 3, 3),)
    workload: WorkloadSpec = WorkloadSpec()
    network: LinkProfile = LinkProfile()
    nodes: dict[int, LinkProfile] = field(default_factory=dict)  # per-broker link profiles
    chaos: FaultRates | None = None
    steps: tuple[Step, ...] = ()
    until_ms: int = 30_000
    liveness_ms: int = 60_000

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    def with_config(self, **overrides: Any) -> "Scenario":
        """A copy with Kafka config keys overridden (dotted names given with underscores too)."""
        config = dict(self.config)
        for k, v in overrides.items():
            config[k.replace("_", ".")] = v
        return replace(self, config=config)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the run header (replay rebuilds the scenario from it)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            out[f.name] = _plain(getattr(self, f.name))
        return out


def _plain(v: Any) -> Any:
    if hasattr(v, "__dataclass_fields__"):
        return {f.name: _plain(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    return v


def _build(cls: type, data: dict[str, Any] | None) -> Any:
    data = dict(data or {})
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
    return cls(**data)


def from_dict(data: dict[str, Any]) -> Scenario:
    topics = []
    for t in data.get("topics", [{"name": "t", "partitions": 3, "replication_factor": 3}]):
        t = dict(t)
        if t.get("assignment") is not None:
            t["assignment"] = {int(k): tuple(v) for k, v in t["assignment"].items()}
        topics.append(_build(TopicSpec, t))
    steps = []
    for s in data.get("steps", []):
        s = dict(s)
        known = {k: s.pop(k) for k in ("action", "at_ms", "jitter_ms", "target", "bind", "on") if k in s}
        params = dict(s.pop("params", {}) or {})
        params.update(s)
        steps.append(Step(params=params, **known))
    chaos = data.get("chaos")
    return Scenario(
        name=data["name"],
        description=data.get("description", ""),
        brokers=int(data.get("brokers", 3)),
        config=dict(data.get("config", {})),
        topics=tuple(topics),
        workload=_build(WorkloadSpec, data.get("workload")),
        network=_build(LinkProfile, data.get("network")),
        nodes={int(k): _build(LinkProfile, v) for k, v in (data.get("nodes") or {}).items()},
        chaos=_build(FaultRates, chaos) if chaos is not None else None,
        steps=tuple(steps),
        until_ms=int(data.get("until_ms", 30_000)),
        liveness_ms=int(data.get("liveness_ms", 60_000)),
    )


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.toml"))


def load(name: str) -> Scenario:
    """A scenario by name (a file in this directory) or by path to a TOML file."""
    path = Path(name)
    if not path.suffix:
        path = HERE / f"{name}.toml"
    if not path.exists():
        raise ValueError(f"no scenario {name!r}; known: {', '.join(names())}")
    with open(path, "rb") as f:
        return from_dict(tomllib.load(f))
