"""`kreplica demo`: seed 003's story on an embedded 3-broker cluster, in virtual time.

1. Create topic ``bar`` (3 partitions, RF 3, seed 003's assignment) and produce
   with acks=all.
2. Controlled-shutdown 1001 and print ``--describe`` (ControlledShutdownLeaderSelector).
3. Restart 1001 and wait until every ISR is full again (leaders expand their ISRs).
4. Kill 1002 and print ``--describe`` (OfflinePartitionLeaderSelector; 0.10 behaviour).
5. Wait for the leader-imbalance check (``auto.leader.rebalance.enable``, on by
   default) to give bar-0 back to its preferred replica 1001: seed 003's published
   picture after the kill has it there, though no failure elects it.
6. Consume everything and check that every acknowledged record is there.
7. Print the election and ISR timeline with virtual timestamps.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.progress import Progress
from rich.table import Table

from .cli import argument, integer
from .cluster import Cluster, TimelineEvent

TOPIC = "bar"
BROKERS = (1001, 1002, 1003)
# The assignment seed 003's `--describe` shows.
ASSIGNMENT = {0: [1001, 1003, 1002], 1: [1002, 1001, 1003], 2: [1003, 1002, 1001]}
# Published leaders after each step of seed 003 (ISRs compared as sets).  After the kill,
# bar-0 is on 1001 again: its preferred replica, moved there by the imbalance check.
EXPECTED_AFTER_SHUTDOWN = {0: (1003, {1003, 1002}), 1: (1002, {1002, 1003}), 2: (1003, {1003, 1002})}
EXPECTED_AFTER_KILL = {0: (1001, {1003, 1001}), 1: (1001, {1003, 1001}), 2: (1003, {1003, 1001})}
CONFIG = {
    "min.insync.replicas": 2,
    "replica.lag.time.max.ms": 10_000,
    "zookeeper.session.timeout.ms": 6_000,
    "auto.leader.rebalance.enable": True,  # Kafka's default, and seed 003's cluster's
    # Kafka checks every 300 s; 10 s keeps the real-time (ZooKeeper) demo short.
    "leader.imbalance.check.interval.seconds": 10,
}


def _produce(c: Cluster, console: Console, acked: dict[int, list[tuple[int, bytes]]],
             label: str, batches: int, batch_size: int = 100) -> None:
    # Off a terminal the bar draws nothing, and stopping it would leave a blank line.
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task(f"produce acks=all ({label})", total=batches * 3)
        for i in range(batches):
            for p in range(3):
                values = [f"{label}-{p}-{i}-{j}".encode() for j in range(batch_size)]
                base = c.produce(TOPIC, p, values, acks="all")
                acked[p].extend((base + j, v) for j, v in enumerate(values))
                progress.advance(task)
    total = sum(len(v) for v in acked.values())
    console.print(f"  acknowledged so far: [bold]{total}[/] records (t={_elapsed_ms(c)} ms {_clock(c)})")


def _check(c: Cluster, console: Console, expected: dict[int, tuple[int, set[int]]]) -> bool:
    d = c.describe(TOPIC)
    ok = True
    for p in d.partitions:
        leader, isr = expected[p.partition]
        good = p.leader == leader and set(p.isr) == isr
        ok &= good
        mark = "[green]matches[/]" if good else "[red]differs[/]"
        console.print(f"  partition {p.partition}: leader {p.leader} isr {sorted(p.isr)} "
                      f"- seed 003 published leader {leader} isr {sorted(isr)}: {mark}", soft_wrap=True)
    return ok


def _isr_full(c: Cluster) -> bool:
    return all(len(p.isr) == len(p.replicas) for p in c.describe(TOPIC).partitions)


def _elapsed_ms(c: Cluster, time_ms: int | None = None) -> int:
    """Milliseconds since the cluster's clock started: virtual time starts at 0, real time
    at the epoch milliseconds of the cluster's creation."""
    return (c.now_ms() if time_ms is None else time_ms) - getattr(c.scheduler, "started_ms", 0)


def _clock(c: Cluster) -> str:
    return "virtual" if c.virtual_time else "real"


def _timeline_table(c: Cluster, events: list[TimelineEvent]) -> Table:
    table = Table(title=f"Leader-election and ISR timeline ({_clock(c)} time)")
    for col in ("t (ms)", "event", "broker", "details"):
        table.add_column(col)
    seen: dict[Any, Any] = {}
    for e in events:
        d = e.details
        if e.kind == "leader_and_isr":
            key = (d["tp"], "L")
            value = (d["leader_epoch"], d["isr"])
            if seen.get(key) == value:
                continue
            seen[key] = value
            text = f"{d['tp']} leader epoch {d['leader_epoch']} isr {list(d['isr'])}"
            kind = "becomes leader"
        elif e.kind == "isr_changed":
            seen[(d["tp"], "L")] = (d["leader_epoch"], d["isr"])
            text = f"{d['tp']} isr -> {list(d['isr'])} (state version {d['zk_version']})"
            kind = "leader changed ISR"
        elif e.kind in ("broker_killed", "broker_started", "controlled_shutdown_done", "session_expired"):
            text = ", ".join(f"{k}={v}" for k, v in d.items())
            kind = e.kind.replace("_", " ")
        else:
            continue
        table.add_row(str(_elapsed_ms(c, e.time_ms)), kind, str(e.broker), text)
    return table


HELP = "seed 003's story on an embedded 3-broker cluster: elections, ISR changes, no acknowledged loss"
METADATA_FORMS = "memory, zookeeper+local:///CHROOT or zookeeper://HOST:PORT/CHROOT"


def _metadata(text: str) -> str:
    from .meta.uri import parse_metadata_uri

    try:
        parse_metadata_uri(text)
    except ValueError as e:
        why = str(e) if text.startswith(("zookeeper://", "zookeeper+local://")) else f"{text!r} is not a metadata store"
        raise ValueError(f"{why}; use {METADATA_FORMS}") from None
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=integer, default=0, help="seed of the virtual-time run (default 0)")
    p.add_argument("--metadata", default="memory", type=argument(_metadata),
                   help="'memory' (default, virtual time), 'zookeeper+local:///kreplica' (a private "
                        "Debian ZooKeeper, real time) or 'zookeeper://HOST:PORT/CHROOT'")


def execute(args: argparse.Namespace) -> int:
    from .meta.store import StoreError
    from .meta.zk_server import ZooKeeperUnavailable

    try:
        return 0 if run(seed=args.seed, metadata=args.metadata) else 1
    except (StoreError, ZooKeeperUnavailable) as e:  # the store named cannot be reached or started
        print(f"Error: --metadata {args.metadata}: {e}", file=sys.stderr)
        return 1


def run(console: Console | None = None, seed: int = 0, metadata: str = "memory") -> bool:
    """Run the demo; True when every published outcome matched and nothing acknowledged was lost."""
    # Piped or in CI rich assumes 80 columns, which folds the timeline's details in two.
    console = console or (Console() if sys.stdout.isatty() else Console(width=120))
    acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: [], 2: []}
    ok = True
    # The demo owns the data dir, so it goes even when the cluster cannot start.
    with tempfile.TemporaryDirectory(prefix="kreplica-demo-") as data_dir, \
            Cluster.embedded(brokers=BROKERS, data_dir=data_dir, seed=seed, config=CONFIG, metadata=metadata) as c:
        clock = "virtual time" if c.virtual_time else "real time"
        console.print(Panel.fit(f"3-broker embedded cluster, metadata: {metadata}, {clock}, seed {seed}\n"
                                f"controller: broker {c.controller_id}"))
        c.create_topic(TOPIC, partitions=3, replication_factor=3,
                       assignment={p: list(r) for p, r in ASSIGNMENT.items()})
        c.run_until(lambda: _isr_full(c), 60_000)
        console.print("[bold]1. topic created[/]")
        console.print(c.describe_text(TOPIC), markup=False, highlight=False, soft_wrap=True)
        _produce(c, console, acked, "before", batches=20)

        console.print("[bold]2. controlled shutdown of 1001[/]")
        c.controlled_shutdown(1001)
        console.print(c.describe_text(TOPIC), markup=False, highlight=False, soft_wrap=True)
        ok &= _check(c, console, EXPECTED_AFTER_SHUTDOWN)
        _produce(c, console, acked, "1001-down", batches=10)

        console.print("[bold]3. restart 1001 and wait for the ISR to fill[/]")
        c.start(1001)
        full = c.run_until(lambda: _isr_full(c), 120_000)
        ok &= full
        console.print(f"  ISR full again: {full} (t={_elapsed_ms(c)} ms)")
        console.print(c.describe_text(TOPIC), markup=False, highlight=False, soft_wrap=True)

        console.print("[bold]4. kill 1002 (no clean shutdown; its session expires)[/]")
        c.kill(1002)
        c.run_until(lambda: all(p.leader != 1002 and 1002 not in p.isr
                                for p in c.describe(TOPIC).partitions), 60_000)
        console.print(c.describe_text(TOPIC), markup=False, highlight=False, soft_wrap=True)
        _produce(c, console, acked, "1002-down", batches=10)

        console.print("[bold]5. the leader-imbalance check gives bar-0 back to its preferred replica 1001[/]")
        ok &= c.run_until(lambda: c.describe(TOPIC).partitions[0].leader == 1001, 60_000)
        console.print(c.describe_text(TOPIC), markup=False, highlight=False, soft_wrap=True)
        ok &= _check(c, console, EXPECTED_AFTER_KILL)

        console.print("[bold]6. consume everything and verify every acknowledged record[/]")
        lost = 0
        for p in range(3):
            got = {r.offset: r.value for r in c.fetch(TOPIC, p, 0)}
            missing = [(o, v) for o, v in acked[p] if got.get(o) != v]
            lost += len(missing)
            console.print(f"  partition {p}: acknowledged {len(acked[p])}, read {len(got)}, "
                          f"missing or different {len(missing)}")
        ok &= lost == 0
        verdict = "[green]nothing acknowledged was lost[/]" if lost == 0 else f"[red]{lost} records lost[/]"
        console.print(f"  {verdict}")
        console.print(_timeline_table(c, c.timeline))
    console.print("[bold green]demo passed[/]" if ok else "[bold red]demo found a difference[/]")
    return ok
