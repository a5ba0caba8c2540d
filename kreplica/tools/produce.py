"""`kreplica produce`: standard input to a topic, one record per line (like kafka-console-producer.sh).

Each line is a record's value; with ``--key-separator`` the text before the first
separator is its key.  Records go to ``--partition`` when given; otherwise a keyed
record goes to the partition of its key (:func:`kreplica.cluster.partition_for_key`)
and unkeyed ones round-robin over the topic's partitions.

Lines go in batches of what the input holds at the moment (at most ``--batch-size``
records a request): a file piped in goes in large batches, a line typed at a
terminal as soon as it is typed.  Each batch is acknowledged (``--acks``, all by
default) before the next is read, so when the command ends every record it read
was acknowledged; an error names the first one that was not, and exits 1.

The brokers are ``kreplica broker`` processes sharing the ZooKeeper at ``--zookeeper``.
"""
from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
from typing import Any, Iterator

from ..cli import argument, at_least, zookeeper_connect

HELP = "send standard input to a topic, one record per line (like kafka-console-producer.sh)"
READ_BYTES = 1 << 16
#: What ends a line for Java's ``BufferedReader.readLine``, which kafka-console-producer.sh
#: reads its input with: a CRLF, a lone LF or a lone CR.
_LINE_END = re.compile(rb"\r\n|\r|\n")


def add_zookeeper_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]", type=zookeeper_connect,
                   help="the ZooKeeper of the `kreplica broker` processes (chroot defaults to /kreplica)")


def _separator(text: str) -> str:
    if not text:  # bytes.partition refuses an empty separator: the first line would fail
        raise ValueError("empty: a separator is at least one character")
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_zookeeper_argument(p)
    p.add_argument("--topic", required=True, help="the topic to write to")
    p.add_argument("--partition", type=at_least(0), default=None,
                   help="write every record to this partition (default: by key, else round-robin)")
    p.add_argument("--key-separator", default=None, metavar="SEP", type=argument(_separator),
                   help="lines are KEY SEP VALUE; a line without SEP has no key (default: no keys)")
    p.add_argument("--acks", choices=("all", "1", "0", "-1"), default="all",
                   help="acknowledgement each batch waits for (default all)")
    p.add_argument("--batch-size", type=at_least(1), default=1000,
                   help="most records in one request (default 1000)")


def partition_count(c: Any, topic: str, partition: int | None) -> int:
    """How many partitions ``topic`` has; UNKNOWN_TOPIC_OR_PARTITION when it lacks ``partition``."""
    from .. import errors

    count = len(c.describe(topic).partitions)
    if partition is not None and partition >= count:
        raise errors.UnknownTopicOrPartition(f"{topic} has {count} partitions, not {partition}")
    return count


def lines(fd: int) -> Iterator[list[bytes]]:
    """The input's complete lines, a list for each read: what was there at the moment (a last
    line without a newline comes at the end of the input).  A CRLF, an LF or a lone CR ends
    a line, none of it kept in the record, as kafka-console-producer.sh reads lines (Java's
    ``BufferedReader.readLine``)."""
    rest = b""
    after_cr = False
    while True:
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            if rest:
                yield [rest]
            return
        if after_cr and chunk.startswith(b"\n"):
            # The read before ended at a CR, which ended its line at once (as readLine does,
            # not waiting for more input): this LF is that CR's, no empty line of its own.
            chunk = chunk[1:]
        after_cr = chunk.endswith(b"\r")
        *complete, rest = _LINE_END.split(rest + chunk)
        if complete:
            yield complete


def execute(args: argparse.Namespace) -> int:
    from .. import errors
    from ..cluster import partition_for_key
    from ..meta.store import StoreError
    from ..net.remote import connect

    # The bytes given: a byte that is not UTF-8 reaches argv as a surrogate, which str.encode refuses.
    separator = os.fsencode(args.key_separator) if args.key_separator is not None else None
    done = "sent" if args.acks == "0" else "acknowledged"  # acks=0: nothing waits for the leader
    sent = 0
    try:
        with connect(f"zookeeper://{args.zookeeper}") as c:
            partitions = partition_count(c, args.topic, args.partition)
            round_robin = itertools.cycle(range(partitions))
            for batch in lines(sys.stdin.fileno()):
                by_partition: dict[int, list[Any]] = {}
                for line in batch:
                    record: Any = line
                    key = None
                    if separator is not None and separator in line:
                        key, _, value = line.partition(separator)
                        record = (key, value)
                    if args.partition is not None:
                        p = args.partition
                    elif key is not None:
                        p = partition_for_key(key, partitions)
                    else:
                        p = next(round_robin)
                    by_partition.setdefault(p, []).append(record)
                for p, records in sorted(by_partition.items()):
                    for i in range(0, len(records), args.batch_size):
                        chunk = records[i:i + args.batch_size]
                        c.produce(args.topic, p, chunk, acks=args.acks)
                        sent += len(chunk)
    except (errors.KReplicaError, StoreError) as e:
        print(f"Error: {e} ({sent} records {done} before it)", file=sys.stderr)
        return 1
    print(f"{sent} records {done} (acks={args.acks})", file=sys.stderr)
    return 0
