"""`kreplica broker`: one broker in this process, on real sockets, with a shared ZooKeeper.

Start one per broker id against the same ZooKeeper and they form a cluster: each
listens on a loopback port of its own, registers it under ``/brokers/ids/<id>``
and finds its peers there.  ``--zookeeper`` is the connect string the admin
tools take (``kreplica topics``, ``reassign``, ``produce``, ``consume``), with the
same default chroot; from Python, :func:`kreplica.net.remote.connect` is a client.

SIGTERM or Ctrl-C shuts the broker down as Kafka's does by default
(``controlled.shutdown.enable``): the controller moves its leaderships away
first, then it closes its logs cleanly.  SIGKILL is a crash: the logs recover at
the next start and the controller re-elects once the session expires.
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any, Iterator

from ..cli import argument, at_least, integer_at_least, key_value, zookeeper_connect

HELP = "run one broker in this process: real sockets, a shared ZooKeeper (a cluster of processes)"
TICK_MS = 200  # how long the main loop sleeps at most between checks that the broker still runs
MAX_PORT = 65535  # tcp_transport.MAX_PORT, not imported: the command line parses without asyncio


def _port(low: int) -> Any:
    """An argparse ``type``: a TCP port from ``low`` to 65535.  Past it a listen fails
    (OverflowError, a traceback) and a registration is no usable port to the peers
    (:func:`~.remote.registered_address`), so it is a bad argument, as one below ``low``."""
    at_least_low = integer_at_least(low)

    def port(text: str) -> int:
        n = at_least_low(text)
        if n > MAX_PORT:
            raise ValueError(f"{n}: must be at most {MAX_PORT}")
        return n

    return argument(port)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--id", type=at_least(0), required=True, help="this broker's broker.id")
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]", type=zookeeper_connect,
                   help="the cluster's ZooKeeper connect string, the same for every broker "
                        "(chroot defaults to /kreplica, as for kreplica topics)")
    p.add_argument("--data-dir", required=True, type=Path,
                   help="this broker's log directory (created if missing; recovered at start)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", type=argument(key_value),
                   help="a broker config by Kafka's name, e.g. min.insync.replicas=2 (repeatable)")
    p.add_argument("--port", type=_port(0), default=0,
                   help="the loopback port to listen on (default 0: any free one, new at each start)")
    p.add_argument("--advertised-port", type=_port(1), default=None,
                   help="the port registered for peers and clients to use, when it is not --port "
                        "(Kafka's advertised.listeners): a proxy's in front of this broker, say")
    p.add_argument("--quiet", action="store_true",
                   help="print only the listening line and errors, not each state change (registration, "
                        "leaderships taken, ISR changes, session expiry)")


def execute(args: argparse.Namespace) -> int:
    from .. import errors
    from ..config import validate
    from ..meta.store import StoreError

    try:
        config = validate(dict(args.config))
    except errors.KReplicaError as e:
        print(f"Error: --config: {e}", file=sys.stderr)
        return 2
    try:
        return run(args.id, f"zookeeper://{args.zookeeper}", args.data_dir, config, quiet=args.quiet,
                   port=args.port, advertised_port=args.advertised_port)
    except StoreError as e:
        print(f"Error: --zookeeper {args.zookeeper}: {e}", file=sys.stderr)
        return 1
    except errors.KReplicaError as e:  # a storage failure, say: the broker stops as if it crashed
        print(f"Error: broker {args.id}: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # --port taken, say
        print(f"Error: broker {args.id}: {e}", file=sys.stderr)
        return 1


def run(broker_id: int, metadata: str, data_dir: Path, config: dict, quiet: bool = False,
        port: int = 0, advertised_port: int | None = None) -> int:
    """Run the broker until it is signalled (0 after a controlled shutdown that moved every
    leadership, 1 if some were left) or stops on its own (1)."""
    from ..broker import Broker
    from ..meta.uri import open_store
    from ..runtime import RealScheduler
    from .remote import registered_address
    from .tcp_transport import TcpTransport

    scheduler = RealScheduler()
    store = open_store(metadata, scheduler, config["zookeeper.session.timeout.ms"])
    transport = broker = None
    try:
        transport = TcpTransport(scheduler, listen_ports={broker_id: port},
                                 advertised_ports={} if advertised_port is None else {broker_id: advertised_port})
        broker = Broker(broker_id, data_dir, store, transport, scheduler, config,
                        observer=None if quiet else _print_event)
        # Peers are looked up on the broker's own session, which it renews after an expiry
        # (a session of the resolver's own expired in a long pause and was never renewed:
        # every peer then looked unregistered, and the controller reached none of them).
        transport.resolve = lambda peer: None if broker.zk is None else registered_address(broker.zk, peer)
        broker.start()
        listening = transport.address(broker_id)
        print(f"broker {broker_id} listening on {transport.host}:{listening[1]}"
              + ("" if broker.port == listening[1] else f", registered as port {broker.port}"), flush=True)
        # A signal is noted and acted on between scheduler steps, never in the middle of one.
        signalled: list[int] = []
        with _noting_signals(signalled):
            while broker.alive and not signalled:
                scheduler.advance(TICK_MS)
        if signalled:
            return _controlled_shutdown(broker, scheduler)
        print(f"broker {broker_id} stopped", file=sys.stderr)
        return 1
    except BaseException:
        if broker is not None and broker.alive:
            broker.kill()  # failed: it goes as a crashed process does, writing nothing more
        raise
    finally:
        if transport is not None:
            transport.close()
        store.close()


def _print_event(kind: str, broker_id: int, **details: Any) -> None:
    """One state change as a log line: wall-clock time, the broker, what happened."""
    import time

    ms = int(time.time() * 1000)  # one reading: a second that turned between two would stamp a second early
    stamp = time.strftime("%H:%M:%S", time.localtime(ms // 1000)) + f".{ms % 1000:03d}"
    fields = " ".join(f"{k}={v}" for k, v in details.items())
    print(f"{stamp} broker {broker_id} {kind} {fields}".rstrip(), flush=True)


@contextlib.contextmanager
def _noting_signals(signalled: list[int]) -> Iterator[None]:
    def note(signum: int, frame: Any) -> None:
        signalled.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _controlled_shutdown(broker: Any, scheduler: Any) -> int:
    print(f"broker {broker.broker_id}: controlled shutdown", file=sys.stderr, flush=True)
    done: list[bool] = []
    broker.controlled_shutdown(done.append)
    config = broker.config
    bound = (config["controlled.shutdown.max.retries"] + 1) * (
        config["controller.socket.timeout.ms"] + config["controlled.shutdown.retry.backoff.ms"])
    scheduler.run_until(lambda: bool(done) or not broker.alive, bound)
    moved = bool(done) and done[0]
    print(f"broker {broker.broker_id}: stopped, "
          f"{'every leadership moved' if moved else 'leaderships left behind'}", file=sys.stderr)
    return 0 if moved else 1
