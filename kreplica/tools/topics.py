"""Create, alter, delete, list and describe topics in a ZooKeeper-backed cluster (like kafka-topics.sh)."""
from __future__ import annotations

import argparse
import random
import re
import sys
from typing import Any, Callable

from ..arguments import JAVA_BLANKS, java_split
from ..cli import argument, integer_text

HELP = "create, alter, delete, list or describe topics (like kafka-topics.sh --zookeeper)"


def java_int(text: str) -> int:
    """``--partitions`` and ``--replication-factor`` as kafka-topics.sh declares them, a
    java.lang.Integer: outside -2**31 to 2**31 - 1 joptsimple cannot read the number and
    the command fails, where taking it would place, say, 3000000000 partitions one by one,
    never ending.  ValueError naming the text."""
    n = integer_text(text)
    if not -2**31 <= n < 2**31:
        raise ValueError(f"{text!r} is not a Java int (-2147483648 to 2147483647)")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]",
                   help="the cluster's ZooKeeper connect string (chroot defaults to /kreplica)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="print leader, replicas and ISR per partition")
    action.add_argument("--list", action="store_true", help="list the topics")
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--delete", action="store_true", help="mark a topic for deletion")
    action.add_argument("--alter", action="store_true",
                        help="change a topic's configs (--config, --delete-config; brokers apply them at once) "
                             "or add partitions (--partitions)")
    p.add_argument("--topic", help="the topic; except for --create, a regular expression matching whole "
                                   "names (commas meaning 'or'), as kafka-topics.sh takes it; all topics "
                                   "for --list and --describe when omitted")
    p.add_argument("--partitions", type=argument(java_int),
                   help="partition count for --create; for --alter, the larger count to grow the topic to")
    p.add_argument("--replication-factor", type=argument(java_int), help="replication factor for --create")
    p.add_argument("--replica-assignment", metavar="B1:B2,B1:B2",
                   help="explicit assignment for --create, or of the added partitions for --alter --partitions: "
                        "partitions separated by commas, replicas by colons")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config for --create or --alter (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="for --alter: drop a topic config, back to the broker's default (repeatable)")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="for --describe: only partitions whose ISR is smaller than their replica list")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="for --describe: only partitions without a leader, or led by a broker that is not live")


def parse_assignment(text: str) -> dict[int, list[int]]:
    """kafka-topics.sh 0.10's ``parseReplicaAssignment``: partitions split at commas,
    replicas at colons, each with Java's ``split``, so a trailing comma or colon is
    dropped (``1001:1002,`` is one partition) while an empty item before another is
    refused."""
    try:
        # Each broker id is read with .trim.toInt: Java's trim (U+0000 to U+0020), then
        # Integer.parseInt (no "1_001", which int() alone would take).
        assignment = {p: [integer_text(b.strip(JAVA_BLANKS)) for b in java_split(part, ":")]
                      for p, part in enumerate(java_split(text, ","))}
    except ValueError:
        assignment = {}
    if not assignment:  # Kafka 0.10 refuses "," too: its assignment has no partition
        raise SystemExit(f"bad --replica-assignment {text!r}: expected e.g. 1001:1002,1002:1003")
    return assignment


#: An "=" and the blanks around it, as Java's regular expression ``\s*=\s*`` reads it: its
#: ``\s`` is the six ASCII blanks only, where Python's takes every Unicode space.
_CONFIG_EQUALS = re.compile(r"[ \t\n\x0b\f\r]*=[ \t\n\x0b\f\r]*")


def topic_config(text: str) -> tuple[str, str]:
    """One ``--config`` item as kafka-topics.sh 0.10 reads it: split at each "=" and the
    blanks around it, Java's ``String.split`` dropping the trailing empty pieces, must leave
    exactly a key and a value, each then trimmed with Java's trim (U+0000 to U+0020).  So
    ``k=v=`` is k=v, while ``k=a=b``, ``k==v`` and ``k=`` (no value) are refused; an empty key
    is left to the config check, which knows no such key.  ValueError naming the item."""
    parts = _CONFIG_EQUALS.split(text)
    while parts and not parts[-1]:
        parts.pop()
    if len(parts) != 2:
        raise ValueError(f"--config {text!r}: expected KEY=VALUE, a key and a value on either side of one '='")
    return parts[0].strip(JAVA_BLANKS), parts[1].strip(JAVA_BLANKS)


def topic_filter(text: str) -> "re.Pattern[str]":
    """Kafka's ``--topic`` for ``--list`` (its ``Whitelist``): a regular expression matching
    whole names, commas meaning "or", spaces and surrounding quotes dropped.  The text is
    trimmed as its ``rawRegex.trim`` trims it: Java's String.trim (U+0000 to U+0020), not
    Python's notion of whitespace (which keeps a BEL and drops a no-break space)."""
    pattern = text.strip(JAVA_BLANKS).replace(",", "|").replace(" ", "").strip("\"'")
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"--topic {text!r}: not a regular expression: {e}") from None


def matching_topics(client: Any, text: str) -> list[str]:
    """The topics ``--topic`` names for --describe, --alter and --delete, sorted; an error
    when none matches (Kafka 0.10's --alter and --delete refuse; --describe printing
    nothing would hide a mistyped name)."""
    from .. import errors

    wanted = topic_filter(text)
    topics = [t for t in sorted(client.get_all_topics()) if wanted.fullmatch(t)]
    if not topics:
        raise errors.UnknownTopicOrPartition(f"no topic matches --topic {text!r}")
    return topics


def open_client(connect: str) -> tuple[Any, Any]:
    """A KafkaZkClient on its own session to the ZooKeeper at ``connect``; returns (client, store)."""
    from ..meta.kafka_zk_client import KafkaZkClient
    from ..meta.uri import parse_zookeeper_connect
    from ..meta.zookeeper_store import ZooKeeperStore
    from ..runtime import RealScheduler

    hosts, chroot = parse_zookeeper_connect(connect)
    scheduler = RealScheduler()
    store = ZooKeeperStore(hosts, chroot, scheduler)
    return KafkaZkClient(store.session("kreplica-cli"), scheduler), store


def with_client(connect: str, action: Callable[[Any], int]) -> int:
    """Run ``action(client)`` on its own ZooKeeper session.  Bad input (a Kafka error, a
    malformed connect string, JSON or number, an unreadable file, an unreachable
    ZooKeeper) prints ``Error: ...`` and returns 1, as Kafka's tools do, not a traceback."""
    from .. import errors
    from ..meta.store import StoreError

    bad_input = (errors.KReplicaError, StoreError, ValueError, KeyError, TypeError, OSError)
    try:
        client, store = open_client(connect)
    except bad_input as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    try:
        return action(client)
    except bad_input as e:
        # A KeyError's text is just the key: say what it is.
        print(f"Error: {e!r}" if isinstance(e, KeyError) else f"Error: {e}", file=sys.stderr)
        return 1
    finally:
        store.close()


# Which actions each option goes with, as kafka-topics.sh's checkArgs allows them; an option
# given beside another action is refused rather than silently ignored.
_OPTION_ACTIONS = {
    "config": ("--config", ("create", "alter")),
    "delete_config": ("--delete-config", ("alter",)),
    "partitions": ("--partitions", ("create", "alter")),
    "replication_factor": ("--replication-factor", ("create",)),
    "replica_assignment": ("--replica-assignment", ("create", "alter")),
}


def _check_options_go_with_the_action(args: argparse.Namespace) -> None:
    action = next(a for a in ("describe", "list", "create", "delete", "alter") if getattr(args, a))
    for dest, (flag, actions) in _OPTION_ACTIONS.items():
        value = getattr(args, dest)
        if value not in (None, []) and action not in actions:
            raise SystemExit(f"{flag} can't be used with --{action}")


def execute(args: argparse.Namespace) -> int:
    return with_client(args.zookeeper, lambda client: _execute(args, client))


def _execute(args: argparse.Namespace, client: Any) -> int:
    from ..describe import describe_topic, format_describe
    from ..meta import admin

    if (args.under_replicated_partitions or args.unavailable_partitions) and not args.describe:
        raise SystemExit("--under-replicated-partitions and --unavailable-partitions go with --describe")
    if args.under_replicated_partitions and args.unavailable_partitions:
        # As kafka-topics.sh's checkArgs: each filter names the other among its invalid options.
        raise SystemExit("--under-replicated-partitions can't be used with --unavailable-partitions")
    _check_options_go_with_the_action(args)
    if args.list:
        # An empty --topic is a pattern too (it matches nothing), as Kafka's Whitelist("").
        wanted = topic_filter(args.topic) if args.topic is not None else None
        deleting = set(client.get_topic_deletions())
        for t in sorted(client.get_all_topics()):
            if wanted is None or wanted.fullmatch(t):
                print(f"{t} - marked for deletion" if t in deleting else t)  # as Kafka 0.10
    elif args.describe:
        topics = (matching_topics(client, args.topic) if args.topic is not None
                  else sorted(client.get_all_topics()))
        live = frozenset(client.get_live_broker_ids()) if args.unavailable_partitions else None
        for t in topics:
            sys.stdout.write(format_describe(describe_topic(client, t), args.under_replicated_partitions, live))
    elif args.create:
        if args.topic == "":  # kafka-topics.sh 0.10's Topic.validate says so too
            raise SystemExit("--create: topic name is illegal, it can't be empty")
        if not args.topic:
            raise SystemExit("--create needs --topic")
        if args.replica_assignment is not None and (args.partitions is not None
                                                    or args.replication_factor is not None):
            # As kafka-topics.sh refuses it: the assignment gives both counts.
            raise SystemExit("--replica-assignment can't be used with --partitions or --replication-factor")
        # Given is given, as kafka-topics.sh's `has`: an empty assignment is a bad one, not none.
        assignment = parse_assignment(args.replica_assignment) if args.replica_assignment is not None else None
        if assignment is None and (args.partitions is None or args.replication_factor is None):
            raise SystemExit("--create needs --partitions and --replication-factor, or --replica-assignment")
        config = dict(topic_config(kv) for kv in args.config)
        # The command line is the edge: an unseeded RNG picks the placement, as Kafka's does.
        admin.create_topic(client, args.topic, args.partitions, args.replication_factor,
                           assignment=assignment, config=config or None, rng=random.Random())
        print(f'Created topic "{args.topic}".')
    elif args.alter:
        if not args.topic:
            raise SystemExit("--alter needs --topic")
        if args.replica_assignment is not None and args.partitions is None:
            raise SystemExit("--replica-assignment with --alter places added partitions: give --partitions")
        if not args.config and not args.delete_config and args.partitions is None:
            raise SystemExit("--alter needs --config KEY=VALUE, --delete-config KEY or --partitions N")
        changes = dict(topic_config(kv) for kv in args.config)
        deleted = [k.strip(JAVA_BLANKS) for k in args.delete_config]  # Java's trim, as kafka-topics.sh
        # AdminUtils.addPartitions (0.10) places the added partitions itself when the text
        # kafka-topics.sh hands on is null or empty, so an empty one is none here.
        added = parse_assignment(args.replica_assignment) if args.replica_assignment else None
        for t in matching_topics(client, args.topic):
            if changes or deleted:
                now = admin.alter_topic_config(client, t, changes, deleted)
                shown = ",".join(f"{k}={v}" for k, v in sorted(now.items())) or "(broker defaults)"
                print(f'Updated config for topic "{t}": {shown}')
            if args.partitions is not None:
                print("WARNING: a key's partition is its hash modulo the partition count: adding partitions "
                      "moves most keys to another partition, and their records' order is kept only within one")
                count = len(client.get_topic_assignment(t))
                # The assignment lists the added partitions in order, numbered on from the last.
                placed = admin.add_partitions(client, t, args.partitions,
                                              None if added is None else {count + i: r for i, r in added.items()})
                shown = ",".join(f"{p}:{':'.join(map(str, r))}" for p, r in sorted(placed.items()))
                print(f'Added partitions to topic "{t}": now {args.partitions} ({shown}).')
    elif args.delete:
        if not args.topic:
            raise SystemExit("--delete needs --topic")
        deleting = set(client.get_topic_deletions())
        for t in matching_topics(client, args.topic):
            if t in deleting:  # Kafka 0.10 answers its delete node's NodeExists so
                print(f"Topic {t} is already marked for deletion.")
                continue
            admin.delete_topic(client, t)
            # As kafka-topics.sh: with delete.topic.enable=false the controller drops the mark.
            print(f"Topic {t} is marked for deletion.")
            print("Note: This will have no impact if delete.topic.enable is not set to true.")
    return 0
