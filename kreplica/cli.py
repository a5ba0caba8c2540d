"""The ``kreplica`` command line: one subcommand per module.

To add a subcommand, write a module with ``add_arguments(parser)`` and
``execute(args) -> int`` (exit status), an optional ``HELP`` line (else the
docstring's first line), and add one line to :data:`SUBCOMMANDS`.  Only the
chosen module is imported, so keep heavy imports inside ``execute``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import threading
from types import ModuleType
from typing import Any, Callable

SUBCOMMANDS: dict[str, str] = {
    "demo": "kreplica.demo",
    "broker": "kreplica.net.broker_process",
    "produce": "kreplica.tools.produce",
    "consume": "kreplica.tools.consume",
    "topics": "kreplica.tools.topics",
    "reassign": "kreplica.tools.reassign",
    "log-demo": "kreplica.tools.log_demo",
    "dump-log": "kreplica.tools.dump_log",
    "bench": "kreplica.tools.bench",
    "simulate": "kreplica.sim_cli",
    "sweep": "kreplica.tools.sweep",
}


def key_value(text: str) -> tuple[str, str]:
    """One ``KEY=VALUE`` item of a repeatable option (``--config``, ``--conf``), both sides
    stripped; ValueError naming the item when it is not one."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise ValueError(f"{text!r}: expected KEY=VALUE")
    return key.strip(), value.strip()


def argument(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type`` from a converter that raises ValueError with a readable message."""
    def parse(text: str) -> Any:
        try:
            return convert(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = convert.__name__
    return parse


def integer_text(text: str) -> int:
    """An integer as Kafka's tools read one (Java's ``Integer.valueOf``, see
    :func:`kreplica.arguments.java_integer`): a sign and decimal digits, nothing around
    them; ValueError naming the text otherwise."""
    from .arguments import java_integer

    if not java_integer(text):
        raise ValueError(f"{text!r} is not an integer")
    return int(text)


integer = argument(integer_text)
"""An argparse ``type``: any integer, written as :func:`integer_text` takes it."""


def integer_at_least(low: int) -> Callable[[str], int]:
    """A converter of an integer ``>= low``; ValueError naming the text otherwise."""
    def number(text: str) -> int:
        n = integer_text(text)
        if n < low:
            raise ValueError(f"{n}: must be at least {low}")
        return n
    return number


def at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer ``>= low``."""
    return argument(integer_at_least(low))


def _directory(text: str) -> str:
    if not os.path.exists(text):
        raise ValueError(f"{text!r}: no such directory")
    if not os.path.isdir(text):
        raise ValueError(f"{text!r}: not a directory")
    return text


#: An argparse ``type``: an existing directory (kept as written).
directory = argument(_directory)


def _zookeeper_connect(text: str) -> str:
    from .meta.uri import parse_zookeeper_connect

    parse_zookeeper_connect(text)
    return text


#: An argparse ``type``: a ZooKeeper connect string, ``HOST:PORT[,HOST:PORT...][/CHROOT]``
#: (kept as written; the chroot defaults to /kreplica where it is used).
zookeeper_connect = argument(_zookeeper_connect)


def _output_file(text: str) -> str:
    # lexists: a symbolic link to a file not there yet is there; unlinking it after the try
    # would remove the user's link and keep the file the try created at its target.
    existed = os.path.lexists(text)
    try:
        with open(text, "a"):
            pass
    except OSError as e:
        raise ValueError(f"{text!r}: {e.strerror}") from None
    if not existed:
        os.unlink(text)
    return text


#: An argparse ``type``: a file written at the end of a long run, tried before the run
#: (opened for appending, and removed again if it was not there).
output_file = argument(_output_file)


def reader_left() -> int:
    """For a command whose standard output's reader has left (``| head``) and which caught
    the BrokenPipeError: stdout goes to /dev/null, so that the flush at exit raises no
    second error (as Python's docs on SIGPIPE advise); returns the exit status, 1."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 1


#: What ``kreplica --help`` says it is (the module docstring is for who adds a command).
DESCRIPTION = ("kreplica: Kafka-style replication with a native log -- an embedded cluster, "
               "command-line tools, a deterministic simulator and fault sweeps on Spark.")


def _help(module: ModuleType) -> str:
    return _plain(getattr(module, "HELP", None) or (module.__doc__ or "").strip().split("\n")[0])


def _plain(doc: str) -> str:
    """A module docstring as a terminal shows it: reST's ``literals``, :role:`targets`,
    Markdown's `code` and the ``::`` before a literal block written as plain text."""
    doc = re.sub(r"``([^`]+)``", r"\1", doc)
    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    doc = re.sub(r"`([^`\n]+)`", r"\1", doc)
    return re.sub(r"::$", ":", doc, flags=re.MULTILINE)


def build_parser(commands: dict[str, str], prog: str, argv: list[str]) -> argparse.ArgumentParser:
    """A parser with a subparser per command; a command's module is imported only when it
    is the one asked for (or when listing all of them for --help)."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION,
                                     epilog=f"'{prog} COMMAND --help' gives a command's options.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # The command comes first (the only option before it is --help, which lists them all).
    chosen = argv[0] if argv else None
    for name, module_name in commands.items():
        if chosen in commands and name != chosen:
            sub.add_parser(name)
            continue
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=_help(module), description=_plain(module.__doc__ or ""),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_execute=module.execute)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it unwinds as from Ctrl-C: clusters
    close, a private ZooKeeper stops, temporary directories go."""


def _terminate_by_unwinding() -> Any:
    """Make SIGTERM raise :class:`Terminated` while a command runs; returns the handler
    it replaced, or None when it left things as they were (another handler was set by
    an embedding program, or this is not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def terminate(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the clean-up must not be cut short
        raise Terminated

    return signal.signal(signal.SIGTERM, terminate)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(SUBCOMMANDS, "kreplica", argv).parse_args(argv)
    previous = _terminate_by_unwinding()
    try:
        return int(args._execute(args) or 0)
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(f"kreplica {args.command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    raise SystemExit(main())
