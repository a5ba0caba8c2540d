"""``kreplica bench NAME``: the benchmark tables, one module per benchmark.

To add one, write a module with ``add_arguments(parser)`` and ``execute(args) -> int``
and add one line to :data:`BENCHES`.
"""
from __future__ import annotations

import argparse

from ..cli import build_parser

HELP = "print a benchmark table (log, replication, failover, net)"

BENCHES: dict[str, str] = {
    "log": "kreplica.tools.bench_log",
    "replication": "kreplica.tools.bench_replication",
    "failover": "kreplica.tools.bench_failover",
    "net": "kreplica.tools.bench_net",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bench_argv", nargs=argparse.REMAINDER, metavar="NAME ...",
                        help=f"one of: {', '.join(BENCHES)}")


def execute(args: argparse.Namespace) -> int:
    inner = build_parser(BENCHES, "kreplica bench", args.bench_argv).parse_args(args.bench_argv)
    return int(inner._execute(inner) or 0)
