"""Scenario files: one TOML per scenario in this directory, loaded into a :class:`Scenario`.

A scenario is data: the cluster (``brokers``, ``config``, ``[[topics]]``), the
``[workload]``, the ``[network]`` link profile (``[nodes.<id>]`` profiles for
every link to or from one broker, and ``[links."<from>-<to>"]`` for one direction of
one link, which wins over both), optional ``[chaos]`` fault rates
and a list of scripted ``[[steps]]``.  A step names an ``action`` (a fault or an
admin call), when (``at_ms`` plus a seeded random ``jitter_ms``), and a
``target``: a broker id, ``"leader:<topic>-<p>"``, ``"follower:<topic>-<p>"``,
``"controller"``, ``"random"``, or ``"$name"`` for a broker an earlier step bound
with ``bind = "name"`` (its target, or the controller a ``kill_controller`` step
kills).  A step with ``on = "election:<topic>-<p>"`` is armed at ``at_ms`` and
fires ``jitter_ms`` (random) after the next election of that partition -- the
timing KIP-101's double failures need.  Everything else in the step is passed to the action.

``swarm_mix`` says what ``--swarm`` varies for this scenario: ``"swarm"`` (the
default) draws its own fault rates and admin cadence; ``"base"`` scales this
scenario's own ``[chaos]`` rates per seed and keeps its fault durations and admin
cadence, so a scenario whose point is its mix (dense long pauses, a config change
every second) keeps that point under the swarm.

``extends = "<scenario>"`` starts from another scenario file (a shipped name, or a path,
read beside the extending file when it is relative): its tables
(``config``, ``workload``, ``network``, ``chaos``, ...) are merged key by key with
this file's, and anything else this file gives replaces the base's.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ...arguments import digits
from ...config import validate as validate_config
from ...errors import InvalidConfig, InvalidTopic
from ...meta.admin import collision_key, validate_topic_name
from ..faults import SHORTEST_MS, FaultRates
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
    alter_configs: bool = False  # admin actions also change the topics' configs
    # Batches a producer (acks 1 or all) has unanswered at once, as Kafka's
    # max.in.flight.requests.per.connection: above 1 a retry can land behind a later batch.
    max_in_flight: int = 1


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
    links: dict[tuple[int, int], LinkProfile] = field(default_factory=dict)  # (from, to) -> profile
    chaos: FaultRates | None = None
    steps: tuple[Step, ...] = ()
    until_ms: int = 30_000
    liveness_ms: int = 60_000
    swarm_mix: str = "swarm"  # what --swarm varies: "swarm" (its own mix) or "base" (this one's)

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    def with_config(self, **overrides: Any) -> "Scenario":
        """A copy with Kafka config keys overridden (dotted names given with underscores too).

        Each value is typed as :data:`kreplica.config.SPEC` types it ("2" -> 2, "true" ->
        True): the run header records the scenario's config, so an override given as text
        (``kreplica simulate --config``) and the same one given typed (a sweep's axis) must
        make the same scenario, or the same run gets two history hashes.  Raises ValueError
        naming a bad key or value.

        ``acks`` is what the producers ask for: the simulated clients send their workload's
        acks (the config key is only the default of ``Cluster.produce``, which they do not
        call), so an override of it sets both.
        """
        given = {k.replace("_", "."): v for k, v in overrides.items()}
        try:
            typed = validate_config(given)
        except InvalidConfig as e:
            raise ValueError(f"scenario {self.name}: {e}") from None
        workload = replace(self.workload, acks=typed["acks"]) if "acks" in given else self.workload
        return replace(self, config={**self.config, **{k: typed[k] for k in given}}, workload=workload)

    def validate(self) -> "Scenario":
        """Raise ValueError naming the first thing that cannot run here: a topic with more
        replicas than brokers, or a step or assignment naming a broker, topic, partition or
        bound name that does not exist.  A scenario error must not reach the run, where it
        would surface as an exception inside the system under test."""
        if self.brokers < 1:
            raise ValueError(f"scenario {self.name}: brokers = {self.brokers}, need at least 1")
        if self.until_ms < 0 or self.liveness_ms < 0:
            raise ValueError(f"scenario {self.name}: until_ms and liveness_ms must be >= 0")
        if self.swarm_mix not in SWARM_MIXES:
            raise ValueError(f"scenario {self.name}: swarm_mix = {self.swarm_mix!r}; known: {', '.join(SWARM_MIXES)}")
        if self.workload.max_in_flight < 1:
            raise ValueError(f"scenario {self.name}: workload max_in_flight = {self.workload.max_in_flight}, "
                             "need at least 1")
        if self.swarm_mix == "base" and self.chaos is None:
            raise ValueError(f"scenario {self.name}: swarm_mix = \"base\" needs a [chaos] mix to vary")
        try:
            validate_config(self.config)
        except InvalidConfig as e:
            raise ValueError(f"scenario {self.name}: {e}") from None
        if self.chaos is not None:
            short = [f"{k} = {getattr(self.chaos, k)}" for k, least in SHORTEST_MS.items()
                     if getattr(self.chaos, k) < least]
            if short:  # the planner would fail mid-run drawing a fault from an empty range
                raise ValueError(f"scenario {self.name}: [chaos] {', '.join(short)}: below the shortest fault the "
                                 "planner draws (" + ", ".join(f"{k} >= {v}" for k, v in SHORTEST_MS.items()) + ")")
        profiles = {"[network]": self.network, **{f"[nodes.{n}]": p for n, p in self.nodes.items()},
                    **{f'[links."{a}-{b}"]': p for (a, b), p in self.links.items()}}
        for table, profile in profiles.items():
            if profile.latency_ms_min > profile.latency_ms_max:
                raise ValueError(f"scenario {self.name}: {table} latency_ms_min = {profile.latency_ms_min} is above "
                                 f"latency_ms_max = {profile.latency_ms_max}")
        ids = set(self.broker_ids)
        partitions: dict[str, int] = {}
        for t in self.topics:
            where = f"scenario {self.name}: topic {t.name}"
            if t.name in partitions:  # the World would fail creating it the second time
                raise ValueError(f"{where}: named twice in [[topics]]")
            _check_topic_name(where, t.name)
            clash = [u for u in partitions if collision_key(u) == collision_key(t.name)]
            if clash:  # the World's create_topic refuses the second, as Kafka's admin does
                raise ValueError(f"{where}: collides with topic {clash[0]} ('.' and '_' are one to Kafka)")
            if t.partitions < 1 or not 1 <= t.replication_factor <= self.brokers:
                raise ValueError(f"{where}: {t.partitions} partition(s) of replication factor "
                                 f"{t.replication_factor} on {self.brokers} broker(s)")
            for p, replicas in (t.assignment or {}).items():
                if not 0 <= p < t.partitions:
                    raise ValueError(f"{where}: assignment names partition {p} of {t.partitions}")
                _check_replicas(f"{where}-{p} assignment", replicas, ids)
                if len(replicas) != t.replication_factor:  # the World's create_topic would refuse it
                    raise ValueError(f"{where}-{p} assignment: {len(replicas)} replicas, the replication factor "
                                     f"is {t.replication_factor}")
            unassigned = sorted(set(range(t.partitions)) - set(t.assignment)) if t.assignment else []
            if unassigned:
                raise ValueError(f"{where}: the assignment gives no replicas for partition(s) {unassigned} "
                                 f"of {t.partitions}")
            partitions[t.name] = t.partitions
        for nid in self.nodes:
            if nid not in ids:
                raise ValueError(f"scenario {self.name}: [nodes.{nid}] names no broker (brokers 1..{self.brokers})")
        for a, b in self.links:
            if a not in ids or b not in ids or a == b:
                raise ValueError(f"scenario {self.name}: [links.\"{a}-{b}\"] must join two brokers of 1..{self.brokers}")
        bound: set[str] = set()
        # A create_topic step naming a topic that exists and that no step deletes is sure to be
        # refused mid-run (TOPIC_ALREADY_EXISTS, or the '.'/'_' clash). Steps fire by time and
        # by election, not in the order written, so any delete_topic of the name excuses it.
        deleted = {collision_key(s.params["topic"]) for s in self.steps
                   if s.action == "delete_topic" and isinstance(s.params, dict) and isinstance(s.params.get("topic"), str)}
        made = {collision_key(t.name): t.name for t in self.topics}
        for i, step in enumerate(self.steps, 1):
            where = f"scenario {self.name}: step {i} ({step.action})"
            _check_step(where, step, ids, partitions, bound)
            if step.bind:
                bound.add(step.bind)
            if step.action == "create_topic":
                name = step.params["topic"]
                other = made.get(collision_key(name))
                if other is not None and collision_key(name) not in deleted:
                    said = "exists already" if other == name else f"collides with topic {other} ('.' and '_' are one to Kafka)"
                    raise ValueError(f"{where}: topic {name} {said}, and no step deletes it")
                made[collision_key(name)] = name
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the run header (replay rebuilds the scenario from it)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            out[f.name] = _plain(getattr(self, f.name))
        # Written only when set: headers (and so the history hashes) of scenarios without
        # link profiles stay as they were before links existed, and old histories replay.
        if self.links:
            out["links"] = {f"{a}-{b}": _plain(p) for (a, b), p in sorted(self.links.items())}
        else:
            del out["links"]
        if not self.workload.alter_configs:
            del out["workload"]["alter_configs"]
        if self.workload.max_in_flight == 1:
            del out["workload"]["max_in_flight"]
        if self.swarm_mix == "swarm":
            del out["swarm_mix"]
        return out


#: What ``--swarm`` may vary for a scenario: its own draws, or the scenario's mix.
SWARM_MIXES = ("swarm", "base")

#: What a step may do (World._run_step) and the parameters each one needs.
ACTIONS: dict[str, tuple[str, ...]] = {
    "crash": (), "crash_together": ("crashes",), "restart": (), "controlled_shutdown": (),
    "pause": ("duration_ms",), "slow_disk": ("duration_ms",), "disk_full": ("duration_ms",),
    "kill_controller": (), "expire_session": (), "isolate": ("duration_ms",),
    "partition": ("groups", "duration_ms"), "cut_store": ("duration_ms",),
    "reassign": ("topic", "partition", "replicas"), "elect_preferred": ("topic",),
    "create_topic": ("topic",), "delete_topic": ("topic",),
}
#: The parameters a step may give beyond those ACTIONS requires, and what each must be.
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "crash": ("lose_unflushed", "torn", "lose_in_flight"), "slow_disk": ("delay_ms",),
    "kill_controller": ("lose_unflushed",), "create_topic": ("partitions", "replication_factor"),
}
_PARAM_KINDS: dict[str, str] = {
    "duration_ms": "int", "delay_ms": "int", "partition": "int",
    "lose_unflushed": "bool", "torn": "bool", "lose_in_flight": "bool", "topic": "str",
}
#: The keys of one crash of a ``crash_together`` step.
_CRASH_KEYS = ("broker", "lose_unflushed", "torn", "lose_in_flight")
#: Actions aimed at one broker (``target``); the others name what they act on in parameters.
_TARGETED = {"crash", "restart", "controlled_shutdown", "pause", "slow_disk", "disk_full",
             "expire_session", "isolate", "cut_store"}


def _is_id(b: Any) -> bool:
    return type(b) is int  # True is 1 to a set of ids, and 2.0 is 2


def _check_replicas(where: str, replicas: Any, ids: set[int]) -> None:
    if not isinstance(replicas, (list, tuple)):
        raise ValueError(f"{where}: replicas = {replicas!r}, expected a list of broker ids")
    replicas = list(replicas)
    bad = [b for b in replicas if not _is_id(b) or b not in ids]
    if not replicas or bad or len(set(replicas)) != len(replicas):
        raise ValueError(f"{where}: replicas {replicas} must be distinct brokers of "
                         f"1..{max(ids)}" + (f" (no broker {bad[0]})" if bad else ""))


def _check_topic_name(where: str, name: str) -> None:
    """Kafka's topic name rules (the admin call's), checked before the run: the World's
    create_topic refused a bad name of ``[[topics]]`` as it started, and a step's mid-run."""
    try:
        validate_topic_name(name)
    except InvalidTopic as e:
        raise ValueError(f"{where}: {e.message}") from None


def _check_partition(where: str, name: str, partitions: dict[str, int]) -> None:
    topic, _, p = name.rpartition("-")
    if topic not in partitions or not digits(p) or int(p) >= partitions[topic]:
        raise ValueError(f"{where}: no partition {name!r} (topics: "
                         f"{', '.join(f'{t} x{n}' for t, n in partitions.items())})")


def _check_step(where: str, step: Step, ids: set[int], partitions: dict[str, int], bound: set[str]) -> None:
    if step.action not in ACTIONS:
        raise ValueError(f"{where}: unknown action; known: {', '.join(sorted(ACTIONS))}")
    if not isinstance(step.params, dict):
        raise ValueError(f"{where}: params = {step.params!r}, expected a table")
    missing = [k for k in ACTIONS[step.action] if k not in step.params]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    # A misspelt optional parameter (lose_unflushd = true) would be ignored, and a value of
    # the wrong type (duration_ms = "100", torn = "false") used as written, mid-run.
    allowed = (*ACTIONS[step.action], *_OPTIONAL.get(step.action, ()))
    unknown = sorted(str(k) for k in step.params if k not in allowed)
    if unknown:
        raise ValueError(f"{where}: unknown parameters {unknown}; {step.action} takes "
                         + (", ".join(allowed) if allowed else "none"))
    for name, value in step.params.items():
        kind = _PARAM_KINDS.get(name)
        if kind is not None:
            _check_scalar(where, name, value, kind)
    target = step.target
    if target is None:
        if step.action in _TARGETED:
            raise ValueError(f"{where}: needs a target")
    elif isinstance(target, int) and not isinstance(target, bool):
        if target not in ids:
            raise ValueError(f"{where}: target {target} is not a broker (brokers 1..{max(ids)})")
    elif not isinstance(target, str):
        raise ValueError(f"{where}: target {target!r} is neither a broker id nor a name")
    elif target.startswith("$"):
        if target[1:] not in bound:
            raise ValueError(f"{where}: target {target} is bound by no earlier step")
    elif target.partition(":")[0] in ("leader", "follower"):
        _check_partition(where, target.partition(":")[2], partitions)
    elif target not in ("controller", "random"):
        raise ValueError(f"{where}: unknown target {target!r}")
    # The World binds a step's broker (its target, or the controller a kill_controller step
    # kills): with neither, the name stays unbound and a step naming "$<name>" is skipped.
    if step.bind and target is None and step.action != "kill_controller":
        raise ValueError(f"{where}: bind = {step.bind!r} binds no broker: the step has no target "
                         "to bind")
    if step.on is not None:
        kind, _, name = step.on.partition(":") if isinstance(step.on, str) else ("", "", "")
        if kind != "election":
            raise ValueError(f"{where}: on = {step.on!r}, expected 'election:<topic>-<partition>'")
        _check_partition(where, name, partitions)
    prm = step.params
    if step.action == "reassign":
        _check_partition(where, f"{prm['topic']}-{prm['partition']}", partitions)
        _check_replicas(where, prm["replicas"], ids)
    elif step.action == "crash_together":
        if not isinstance(prm["crashes"], (list, tuple)) or not prm["crashes"]:
            raise ValueError(f"{where}: crashes = {prm['crashes']!r}, expected a list of tables")
        for crash in prm["crashes"]:
            if not isinstance(crash, dict):
                raise ValueError(f"{where}: crash {crash!r}, expected a table {{broker = <id>, ...}}")
            if not _is_id(crash.get("broker")) or crash.get("broker") not in ids:
                raise ValueError(f"{where}: crash of {crash.get('broker')!r}, not a broker of 1..{max(ids)}")
            unknown = sorted(str(k) for k in crash if k not in _CRASH_KEYS)
            if unknown:
                raise ValueError(f"{where}: crash of {crash['broker']}: unknown keys {unknown}; "
                                 f"a crash takes {', '.join(_CRASH_KEYS)}")
            for name in _CRASH_KEYS[1:]:
                if name in crash:
                    _check_scalar(f"{where}: crash of {crash['broker']}", name, crash[name], "bool")
        named = [crash["broker"] for crash in prm["crashes"]]
        twice = sorted({b for b in named if named.count(b) > 1})
        if twice:  # the broker is down by its second crash, which the World refuses and skips
            raise ValueError(f"{where}: crashes name broker {twice[0]} twice")
    elif step.action == "partition":
        groups = prm["groups"]
        if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in groups):
            raise ValueError(f"{where}: groups = {groups!r}, expected a list of lists of broker ids")
        for group in groups:
            bad = [b for b in group if not _is_id(b) or b not in ids]
            if bad:
                raise ValueError(f"{where}: group {list(group)} names no broker {bad[0]}")
        named = [b for group in groups for b in group]
        twice = sorted({b for b in named if named.count(b) > 1})
        if twice:  # the network would keep each in the last group naming it, cut from the others
            raise ValueError(f"{where}: groups {[list(g) for g in groups]} name broker {twice[0]} twice")
    elif step.action == "create_topic":
        # Passed to the admin call as written: "2" or 2.0 would be refused there, mid-run.
        count, rf = prm.get("partitions", 1), prm.get("replication_factor", 3)
        if type(count) is not int or count < 1:
            raise ValueError(f"{where}: partitions = {count!r}, expected an integer >= 1")
        if type(rf) is not int or not 1 <= rf <= len(ids):
            raise ValueError(f"{where}: replication factor {rf!r} on {len(ids)} broker(s)")
        _check_topic_name(where, prm["topic"])
        partitions[prm["topic"]] = count
    elif step.action == "elect_preferred" and prm["topic"] not in partitions:
        raise ValueError(f"{where}: no topic {prm['topic']!r}")


def _plain(v: Any) -> Any:
    if hasattr(v, "__dataclass_fields__"):
        return {f.name: _plain(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    return v


# A table's scalar fields by their declared type: what a value written for one must be.
# bool is an int to Python, so True is refused where a number goes.
_SCALARS: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}
_SAID = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}


def _build(cls: type, data: dict[str, Any] | None, where: str) -> Any:
    """``cls`` from the table ``where`` names, each scalar as its field declares it: a number never read from
    text or a bool (``consumers = "false"`` would be true, ``duration = "100"`` a string
    compared with numbers), and no count, time or rate below 0, nor a probability or
    fraction above 1."""
    data = dict(_table(data, where))
    declared = {f.name: str(f.type) for f in fields(cls)}
    unknown = set(data) - set(declared)
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    for name, value in data.items():
        _check_scalar(where, name, value, declared[name])
    return cls(**data)


def _check_scalar(where: str, name: str, value: Any, declared: str) -> None:
    """Refuse ``value`` for a field declared ``declared`` ("int", "float | None", ...) when
    it is not of that type or out of range; other declared types are not checked here."""
    kind = declared.removesuffix(" | None")
    kinds = _SCALARS.get(kind)
    if kinds is None or (value is None and kind != declared):
        return
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        raise ValueError(f"{where}: {name} = {value!r}, expected {_SAID[kind]}")
    if isinstance(value, float) and not math.isfinite(value):  # TOML's nan passes every comparison
        raise ValueError(f"{where}: {name} = {value!r}, expected a finite number")
    if bool not in kinds and str not in kinds:
        top = 1 if name.endswith(("_probability", "_fraction")) else None
        if value < 0 or (top is not None and value > top):
            raise ValueError(f"{where}: {name} = {value!r}, expected "
                             + ("a number from 0 to 1" if top else "a number >= 0"))


def _table(value: Any, where: str) -> dict[str, Any]:
    """A TOML table (None: empty), or ValueError naming ``where``: ``config = 5`` or
    ``workload = 3`` was a TypeError from ``dict()``, naming neither scenario nor key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where} = {value!r}, expected a table")
    return value


def _tables(value: Any, where: str) -> list[dict[str, Any]]:
    """An array of tables (``[[topics]]``, ``[[steps]]``); ``steps = "ab"`` is not one."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"{where} = {value!r}, expected an array of tables")
    return list(value)


def _ids(table: dict[str, Any], where: str) -> dict[int, Any]:
    """A table keyed by broker id (``[nodes.2]``, a topic's ``assignment``): "x" is none, and
    "2" and "02" (or " 2") are one number, which the table may give once: two keys of one
    number were read as one, the last silently winning."""
    out: dict[int, Any] = {}
    given: dict[int, Any] = {}
    for k, v in table.items():
        if not digits(str(k).strip()):
            raise ValueError(f"{where}: {k!r} is not a broker or partition number")
        if int(k) in out:
            raise ValueError(f"{where}: {given[int(k)]!r} and {k!r} are both {int(k)}")
        out[int(k)], given[int(k)] = v, k
    return out


def _links(table: dict[str, Any], at: str) -> dict[tuple[int, int], LinkProfile]:
    """``[links."<from>-<to>"]`` by the pair of brokers; "1-2" and "1 - 2" are one link,
    which the file may give once (the last was read, silently)."""
    out: dict[tuple[int, int], LinkProfile] = {}
    given: dict[tuple[int, int], Any] = {}
    for k, v in table.items():
        key = _link_key(k, at)
        if key in out:
            raise ValueError(f'{at}[links."{given[key]}"] and [links."{k}"] are both the link {key[0]}-{key[1]}')
        out[key], given[key] = _build(LinkProfile, v, at + f'[links."{k}"]'), k
    return out


def from_dict(data: dict[str, Any]) -> Scenario:
    if not isinstance(data.get("name"), str) or not data["name"]:
        raise ValueError(f"scenario: name = {data.get('name')!r}, expected a non-empty string")
    at = f"scenario {data.get('name')}: "
    topics = []
    for t in _tables(data.get("topics", [{"name": "t", "partitions": 3, "replication_factor": 3}]), at + "topics"):
        t = dict(t)
        if t.get("assignment") is not None:
            where = at + "[[topics]] assignment"
            # A value not a list is kept as written for validate() to refuse, naming the topic.
            t["assignment"] = {k: tuple(v) if isinstance(v, (list, tuple)) else v
                               for k, v in _ids(_table(t["assignment"], where), where).items()}
        topics.append(_build(TopicSpec, t, at + "[[topics]]"))
    steps = []
    for s in _tables(data.get("steps", []), at + "steps"):
        s = dict(s)
        where = at + f"step {len(steps) + 1}"
        known = {k: s.pop(k) for k in ("action", "at_ms", "jitter_ms", "target", "bind", "on") if k in s}
        params = dict(_table(s.pop("params", {}), where + ": params"))
        twice = sorted(set(params) & set(s))
        if twice:  # one would silently win over the other
            raise ValueError(f"{where}: {twice} given both in params and beside it")
        params.update(s)
        steps.append(_build(Step, {**known, "params": params}, where))
    chaos = data.get("chaos")
    return Scenario(
        name=data["name"],
        description=_text(data, "description", ""),
        brokers=_whole(data, "brokers", 3),
        config=dict(_table(data.get("config"), at + "config")),
        topics=tuple(topics),
        workload=_build(WorkloadSpec, data.get("workload"), at + "[workload]"),
        network=_build(LinkProfile, data.get("network"), at + "[network]"),
        nodes={k: _build(LinkProfile, v, at + f"[nodes.{k}]")
               for k, v in _ids(_table(data.get("nodes"), at + "nodes"), at + "[nodes]").items()},
        links=_links(_table(data.get("links"), at + "links"), at),
        chaos=_build(FaultRates, chaos, at + "[chaos]") if chaos is not None else None,
        steps=tuple(steps),
        until_ms=_whole(data, "until_ms", 30_000),
        liveness_ms=_whole(data, "liveness_ms", 60_000),
        swarm_mix=_text(data, "swarm_mix", "swarm"),
    ).validate()


def _whole(data: dict[str, Any], key: str, default: int) -> int:
    """``data[key]`` as given, an integer: 3.7 brokers or "100" ms are refused, not made 3 or 100."""
    value = data.get(key, default)
    _check_scalar(f"scenario {data.get('name')}", key, value, "int")
    return value


def _text(data: dict[str, Any], key: str, default: str) -> str:
    """``data[key]`` as given, a string: ``description = 5`` failed later in ``--list``
    and ``swarm_mix = 5`` was read as "5"."""
    value = data.get(key, default)
    _check_scalar(f"scenario {data.get('name')}", key, value, "str")
    return value


def _link_key(text: str, at: str = "") -> tuple[int, int]:
    a, sep, b = str(text).partition("-")
    if not sep or not digits(a.strip()) or not digits(b.strip()):
        raise ValueError(f'{at}[links."{text}"]: expected "<from broker>-<to broker>"')
    return int(a), int(b)


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.toml"))


#: What a scenario file may give at its top level (beside ``extends``): a misspelt
#: ``untill_ms = 5000`` was ignored, and the run took 30 s.
FILE_KEYS = tuple(f.name for f in fields(Scenario))


def load(name: str) -> Scenario:
    """A scenario by name (a file in this directory) or by path to a TOML file."""
    data = _read(name, ())
    if "name" not in data:
        raise ValueError(f"scenario file {name}: no name = \"...\" at its top level")
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise ValueError(f"scenario {data.get('name')}: unknown keys {unknown}; a scenario file takes "
                         f"extends, {', '.join(FILE_KEYS)}")
    return from_dict(data)


def _beside(path: Path, base: str) -> str:
    """Where ``extends = base`` in the file ``path`` points: a relative file path is read
    beside that file (as the file was written), else, if no such file is there, from the
    working directory (as before 2026-11-27); a name is a shipped scenario."""
    target = Path(base)
    if target.suffix and not target.is_absolute() and (path.parent / target).exists():
        return str(path.parent / target)
    return base


def _read(name: str, seen: tuple[str, ...]) -> dict[str, Any]:
    """The file's data, with what it ``extends`` merged under it."""
    path = Path(name)
    if not path.suffix:
        path = HERE / f"{name}.toml"
    if not path.exists():
        raise ValueError(f"no scenario {name!r}; known: {', '.join(names())}")
    if str(path) in seen:
        raise ValueError(f"scenario {name!r} extends itself: {' -> '.join((*seen, str(path)))}")
    with open(path, "rb") as f:
        data = tomllib.load(f)
    base = data.pop("extends", None)
    if base is None:
        return data
    merged = _read(_beside(path, str(base)), (*seen, str(path)))
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged
