"""`kreplica consume`: a topic's committed records to standard output (like kafka-console-consumer.sh).

Prints each record's value on a line of its own (with ``--print-key``, its key and a
tab first; with ``--print-offset``, ``partition:offset`` and a tab first of all).  A
missing key or value (a tombstone's) prints as ``null``, as Kafka's console consumer
prints it; an empty one as nothing.
Only committed records are read: those below the leader's high watermark.

It starts where new records will land, as Kafka's console consumer does, or at the
log start with ``--from-beginning``, or at ``--offset`` of one ``--partition``, and
follows the topic until ``--max-messages`` records are printed, until
``--timeout-ms`` passes with nothing new (a negative one, as Kafka's, is no timeout),
or until Ctrl-C; a reader that leaves (``| head``) ends it quietly, with exit status 1.

The brokers are ``kreplica broker`` processes sharing the ZooKeeper at ``--zookeeper``.
"""
from __future__ import annotations

import argparse
import sys
import time

from ..cli import at_least, integer, reader_left
from .produce import add_zookeeper_argument, partition_count

HELP = "print a topic's committed records (like kafka-console-consumer.sh)"
POLL_MS = 100  # the pause between polls that found nothing



def _shown(field: bytes | None) -> bytes:
    """A key or value as printed: ``null`` when the record has none (kafka-console-consumer's way)."""
    return b"null" if field is None else field

def add_arguments(p: argparse.ArgumentParser) -> None:
    add_zookeeper_argument(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--partition", type=at_least(0), default=None, help="read only this partition (default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at each partition's log start (default: at its end, new records only)")
    start.add_argument("--offset", type=at_least(0), default=None,
                       help="start at this offset (needs --partition)")
    p.add_argument("--max-messages", type=at_least(1), default=None, help="stop after this many records")
    p.add_argument("--timeout-ms", type=integer, default=None,
                   help="stop once this long passes with no new record (default, or negative: follow "
                        "until Ctrl-C, as kafka-console-consumer.sh takes a negative one)")
    p.add_argument("--print-key", action="store_true", help="print each record's key and a tab before its value")
    p.add_argument("--print-offset", action="store_true",
                   help="print PARTITION:OFFSET and a tab before each record")


def execute(args: argparse.Namespace) -> int:
    from .. import errors
    from ..meta.store import StoreError
    from ..net.remote import connect

    if args.offset is not None and args.partition is None:
        print("Error: --offset needs --partition", file=sys.stderr)
        return 2
    # kafka-console-consumer.sh 0.10 reads a negative --timeout-ms as no timeout at all.
    timeout_ms = args.timeout_ms if args.timeout_ms is not None and args.timeout_ms >= 0 else None
    out = sys.stdout.buffer
    printed = 0
    try:
        with connect(f"zookeeper://{args.zookeeper}") as c:
            count = partition_count(c, args.topic, args.partition)
            partitions = [args.partition] if args.partition is not None else list(range(count))
            position = {}
            for p in partitions:
                if args.offset is not None:
                    position[p] = args.offset
                else:
                    start, end = c.offset_range(args.topic, p)
                    position[p] = start if args.from_beginning else end
            last_new = time.monotonic()
            while args.max_messages is None or printed < args.max_messages:
                found = False
                for p in partitions:
                    for r in c.fetch(args.topic, p, position[p]):
                        if args.max_messages is not None and printed >= args.max_messages:
                            break
                        prefix = f"{p}:{r.offset}\t".encode() if args.print_offset else b""
                        if args.print_key:
                            prefix += _shown(r.key) + b"\t"
                        out.write(prefix + _shown(r.value) + b"\n")
                        printed += 1
                        position[p] = r.offset + 1
                        found = True
                out.flush()
                if found:
                    last_new = time.monotonic()
                elif timeout_ms is not None and (time.monotonic() - last_new) * 1000 >= timeout_ms:
                    break
                else:
                    c.advance(POLL_MS)
    except (errors.KReplicaError, StoreError) as e:
        print(f"Error: {e} ({printed} records printed before it)", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (| head): stop quietly, as dump-log does
        return reader_left()
    print(f"{printed} records", file=sys.stderr)
    return 0
