"""Start a partition reassignment or a preferred-leader election in a ZooKeeper-backed cluster."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..arguments import java_split
from ..cli import integer, integer_text

HELP = "reassign partitions or elect preferred leaders (like kafka-reassign-partitions.sh)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]",
                   help="the cluster's ZooKeeper connect string")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--reassignment-json-file", metavar="FILE",
                      help='Kafka\'s JSON: {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}')
    what.add_argument("--replicas", metavar="B1,B2,B3",
                      help="new replicas of --topic/--partition, read as kafka-reassign-partitions.sh "
                           "reads --broker-list")
    what.add_argument("--preferred-election", action="store_true",
                      help="move leadership of --topic's partitions to their preferred replicas")
    what.add_argument("--verify", action="store_true", help="show whether a reassignment is in progress")
    p.add_argument("--topic", help="the topic of the partition --replicas moves")
    p.add_argument("--partition", type=integer, help="the partition --replicas moves")


def execute(args: argparse.Namespace) -> int:
    from .topics import with_client

    try:  # a bad plan is refused before connecting
        plan = _plan(args)
    except (OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return with_client(args.zookeeper, lambda client: _execute(args, client, plan))


def _plan(args: argparse.Namespace) -> dict[Any, list[int]] | None:
    """The reassignment asked for, {TopicPartition: replicas}, or None (--verify,
    --preferred-election); ValueError saying what is wrong with it."""
    from ..protocol import TopicPartition

    if args.reassignment_json_file is not None:  # "" too: a name no file has, not "no file"
        return _plan_file(args.reassignment_json_file)
    if args.replicas is None:
        return None
    if args.topic is None or args.partition is None:
        raise SystemExit("--replicas needs --topic and --partition")
    try:
        # As kafka-reassign-partitions.sh reads its one list of broker ids, --broker-list:
        # Java's split at commas (a trailing comma dropped), each id by Integer.parseInt
        # with nothing trimmed -- not int(), which takes " 1002", "1_002" and digits of
        # any plane.
        replicas = [integer_text(b) for b in java_split(args.replicas, ",")]
    except ValueError:
        raise ValueError(f"--replicas {args.replicas!r}: expected broker ids, e.g. 1001,1002") from None
    return {TopicPartition(args.topic, args.partition): replicas}


def _plan_file(path: str) -> dict[Any, list[int]]:
    """Kafka's reassignment JSON; ValueError naming the file and the entry that is wrong."""
    from ..protocol import TopicPartition

    with open(path, encoding="utf-8") as f:  # JSON is UTF-8 text (RFC 8259), whatever the locale
        try:
            doc = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not JSON: {e}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f'{path}: expected {{"version": 1, "partitions": [...]}}')
    plan = {}
    for i, e in enumerate(entries):
        try:
            # JSON integers only: int() would take 1.5 as 1, true as 1 and "2" as 2, moving
            # a partition or a broker the file does not name.
            ints = [e["partition"], *e["replicas"]] if isinstance(e["replicas"], list) else None
            if not isinstance(e["topic"], str) or ints is None or any(type(v) is not int for v in ints):
                raise TypeError
            tp = TopicPartition(e["topic"], e["partition"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f'{path}: partitions[{i}]: expected {{"topic": NAME, "partition": N, '
                             f'"replicas": [BROKER, ...]}}, got {json.dumps(e)}') from None
        if tp in plan:  # Kafka refuses it too: which of the two lists was meant?
            raise ValueError(f"{path}: partitions[{i}]: {tp} is named twice")
        plan[tp] = list(e["replicas"])
    return plan


def _execute(args: argparse.Namespace, client: Any, plan: dict[Any, list[int]] | None = None) -> int:
    from ..meta import admin
    from ..protocol import TopicPartition

    if args.verify:
        pending = client.get_partition_reassignment()
        print("Reassignment in progress: " + (", ".join(f"{tp} -> {r}" for tp, r in sorted(pending.items()))
                                              or "none"))
        return 0
    if args.preferred_election:
        if not args.topic:
            raise SystemExit("--preferred-election needs --topic")
        parts = client.get_topic_assignment(args.topic)
        admin.elect_preferred_leaders(client, [TopicPartition(args.topic, p) for p in parts])
        print(f"Started preferred replica election for {args.topic}.")
        return 0
    admin.reassign_partitions(client, plan)
    print("Successfully started reassignment of " + ", ".join(str(tp) for tp in sorted(plan)))
    return 0
