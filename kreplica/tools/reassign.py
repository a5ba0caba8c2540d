"""Start a partition reassignment or a preferred-leader election in a ZooKeeper-backed cluster."""
from __future__ import annotations

import argparse
import json
from typing import Any

HELP = "reassign partitions or elect preferred leaders (like kafka-reassign-partitions.sh)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]",
                   help="the cluster's ZooKeeper connect string")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--reassignment-json-file", metavar="FILE",
                      help='Kafka\'s JSON: {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}')
    what.add_argument("--replicas", metavar="B1,B2,B3", help="new replicas of --topic/--partition")
    what.add_argument("--preferred-election", action="store_true",
                      help="move leadership of --topic's partitions to their preferred replicas")
    what.add_argument("--verify", action="store_true", help="show whether a reassignment is in progress")
    p.add_argument("--topic", help="the topic of the partition --replicas moves")
    p.add_argument("--partition", type=int, help="the partition --replicas moves")


def execute(args: argparse.Namespace) -> int:
    from .topics import with_client

    return with_client(args.zookeeper, lambda client: _execute(args, client))


def _execute(args: argparse.Namespace, client: Any) -> int:
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
    if args.reassignment_json_file:
        with open(args.reassignment_json_file) as f:
            doc = json.load(f)
        plan = {TopicPartition(e["topic"], int(e["partition"])): [int(r) for r in e["replicas"]]
                for e in doc["partitions"]}
    else:
        if args.topic is None or args.partition is None:
            raise SystemExit("--replicas needs --topic and --partition")
        plan = {TopicPartition(args.topic, args.partition): [int(b) for b in args.replicas.split(",")]}
    admin.reassign_partitions(client, plan)
    print("Successfully started reassignment of " + ", ".join(str(tp) for tp in sorted(plan)))
    return 0
