"""TCP transport: the in-process transport's interface over real loopback sockets.

Theory of operation.  Each registered node listens on its own port (``register``
returns it); ``send(src, dst, request, on_response)`` encodes the request
(:mod:`.codec`) and writes it on the connection from ``src`` to ``dst``, opened on
first use and kept, so a link keeps its messages in order as TCP does.  The
receiving node's handler answers with ``respond(response)``, at once or later (a
long-poll), and the answer goes back on the same connection under the request's
correlation id.

Two threads meet here.  The sockets live on an asyncio event loop in a thread of
the transport's own; handlers and ``on_response`` callbacks run on the
:class:`~kreplica.runtime.RealScheduler`'s thread, which the cluster drives, so the
sans-I/O broker code never sees a second thread.  The loop hands each message to
the scheduler with ``call_soon_threadsafe``; the scheduler's side hands frames to
the loop the same way.  Each side only ever touches its own state.

Failures look as they do in the in-process transport, because they are real:
- a request to a node that is not listening (never started, crashed, stopped) is
  refused, and its sender sees :data:`~kreplica.transport.DISCONNECTED`;
- a node that goes away (``unregister``: a crash or a stop) closes its server and
  every connection to and from it, so requests it had not answered come back
  DISCONNECTED to their senders (what it answered first still reaches them), and
  answers on their way to it are lost;
- a node that starts again listens on a new port, and nothing sent to its previous
  incarnation reaches it.

A node listens on a free port unless ``listen_ports`` names one, and ``register``
returns the port it should be reached at: ``advertised_ports`` may name another
(Kafka's advertised.listeners), a proxy's in front of it, say.

Nodes in other processes are found with ``resolve(node_id)``, called on the
scheduler's thread for a node not registered here: a broker process reads the
peer's ``/brokers/ids/<id>`` registration, which carries the port it listens on.
The address is kept until a connection to it ends (a peer that restarts listens
on a new port), then asked for again.

A frame that does not decode closes its connection: the far end sees the
connection drop, as with any broken peer.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from typing import Any, Callable

from .. import errors
from ..runtime import Scheduler
from ..transport import DISCONNECTED, answer_once
from . import codec

Respond = Callable[[Any], None]
Handler = Callable[[int, Any, Respond], None]
Address = tuple[str, int]
Resolve = Callable[[int], "Address | None"]

MAX_PORT = 65535
LOOP_CALL_TIMEOUT_S = 10.0  # listening or closing a port takes milliseconds; 10 s is a hung loop


class _Link:
    """One node's connection to another, on the loop thread: requests waiting to be
    written until it connects, and the callbacks of those awaiting an answer."""

    def __init__(self) -> None:
        self.writer: asyncio.StreamWriter | None = None
        self.queued: list[bytes] = []
        self.pending: dict[int, Respond | None] = {}
        self.ids = itertools.count(1)
        self.task: asyncio.Task | None = None
        self.closed = False


def _checked_ports(ports: dict[int, int] | None, what: str, low: int) -> dict[int, int]:
    """A copy of ``ports`` once every one is a TCP port from ``low`` to 65535: past it a
    listen fails later with OverflowError, and a registered port past it is no usable port
    to the peers (:func:`~.remote.registered_address`)."""
    checked = dict(ports or {})
    for node, port in checked.items():
        if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= MAX_PORT:
            raise ValueError(f"node {node}: {what} port {port!r} is not from {low} to {MAX_PORT}")
    return checked


class TcpTransport:
    """See the module's theory of operation.  ``host`` is the address every node listens
    on (loopback by default), ``resolve`` finds nodes of other processes;
    :meth:`close` stops it all (idempotent)."""

    real_time = True  # sockets run on the wall clock: a cluster over them cannot use virtual time

    def __init__(self, scheduler: Scheduler | None = None, host: str = "127.0.0.1",
                 resolve: Resolve | None = None, listen_ports: dict[int, int] | None = None,
                 advertised_ports: dict[int, int] | None = None) -> None:
        self.scheduler = scheduler
        self.host = host
        self.resolve = resolve
        self.listen_ports = _checked_ports(listen_ports, "listen", 0)
        self.advertised_ports = _checked_ports(advertised_ports, "advertised", 1)
        self.messages_delivered = 0
        # Scheduler-thread state.
        self._handlers: dict[int, Handler] = {}
        self._resolved: dict[int, Address] = {}
        self._incarnations: dict[int, int] = {}
        self._down: set[int] = set()
        # Loop-thread state.
        self._addresses: dict[int, Address] = {}
        self._servers: dict[int, asyncio.base_events.Server] = {}
        self._listening: dict[int, int] = {}  # the incarnation each server listens for
        self._abandoned: set[tuple[int, int]] = set()  # listens whose register timed out
        self._accepted: dict[int, set[asyncio.StreamWriter]] = {}
        self._links: dict[tuple[int, int], _Link] = {}
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kreplica-tcp", daemon=True)
        self._thread.start()

    # ---- the scheduler's side ------------------------------------------------------------------
    def register(self, node_id: int, handler: Handler) -> int:
        """Start listening for ``node_id``; returns the port to reach it at."""
        if self._closed:
            raise errors.InvalidRequest("the transport is closed")
        incarnation = self._incarnations.get(node_id, 0) + 1
        self._incarnations[node_id] = incarnation
        try:
            port = self._on_loop(self._listen(node_id, incarnation, self.listen_ports.get(node_id, 0)))
        except TimeoutError:
            # The loop is hung: the listen may still run when it wakes, and must not leave
            # a port open for a node the caller was told is not registered.
            self._loop.call_soon_threadsafe(self._abandon_listen, node_id, incarnation)
            raise
        self._handlers[node_id] = handler
        self._down.discard(node_id)
        return self.advertised_ports.get(node_id, port)

    def unregister(self, node_id: int) -> None:
        """The node is gone: its port closes, and so does every connection to and from it."""
        if self._handlers.pop(node_id, None) is None:
            return
        self._down.add(node_id)
        self._incarnations[node_id] += 1  # what its old connections still deliver is dropped
        if not self._closed:
            self._on_loop(self._stop_node(node_id))

    def address(self, node_id: int) -> Address | None:
        """Where ``node_id`` listens, or None while it is not registered."""
        return self._addresses.get(node_id) if node_id in self._handlers else None

    def send(self, src: int, dst: int, request: Any, on_response: Respond | None) -> None:
        """Send ``request`` from ``src`` to ``dst``; ``on_response`` gets the answer, or
        DISCONNECTED if ``dst`` is not listening or goes away before answering."""
        body = codec.encode(request)  # encoded here: what the sender changes next is not on the wire
        if self._closed:  # a timer that outlived its cluster: no socket carries this any more
            if on_response is not None:
                self.scheduler.call_soon(on_response, DISCONNECTED)
            return
        self.messages_delivered += 1
        remote = None
        if dst not in self._handlers and self.resolve is not None:
            remote = self._resolved.get(dst)
            if remote is None:
                remote = self.resolve(dst)
                if remote is not None:
                    self._resolved[dst] = remote
        self._loop.call_soon_threadsafe(self._send_on_loop, src, dst, body, on_response, remote)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError, TimeoutError):
            self._on_loop(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(LOOP_CALL_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> "TcpTransport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _on_loop(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(LOOP_CALL_TIMEOUT_S)

    def _forget(self, dst: int) -> None:
        self._resolved.pop(dst, None)  # a connection to it ended: look it up again next time

    def _answer(self, src: int, on_response: Respond | None, response: Any) -> None:
        # Answers on their way to a node that has since gone away are lost, as in-process.
        if on_response is not None and src not in self._down:
            on_response(response)

    def _dispatch(self, node: int, incarnation: int, src: int, correlation_id: int, request: Any,
                  writer: asyncio.StreamWriter) -> None:
        handler = self._handlers.get(node)
        if handler is None or self._incarnations.get(node) != incarnation:
            return  # it arrived for an incarnation that has gone: its connection is closing

        def carry(response: Any) -> None:
            frame = codec.frame(codec.RESPONSE, correlation_id, codec.encode(response))
            self._loop.call_soon_threadsafe(_write, writer, frame)

        handler(src, request, answer_once(node, request, carry))

    # ---- the loop's side -----------------------------------------------------------------------
    async def _listen(self, node: int, incarnation: int, port: int) -> int:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._serve(node, incarnation, reader, writer)

        server = await asyncio.start_server(on_connect, self.host, port, reuse_address=True)
        port = server.sockets[0].getsockname()[1]
        if (node, incarnation) in self._abandoned:  # its register timed out meanwhile
            self._abandoned.discard((node, incarnation))
            server.close()
            return port
        self._listening[node] = incarnation
        self._servers[node] = server
        self._accepted[node] = set()
        self._addresses[node] = (self.host, port)
        return port

    async def _serve(self, node: int, incarnation: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        accepted = self._accepted.get(node)
        if accepted is None or self._listening.get(node) != incarnation:
            # Accepted by a server that has closed since (its node went away, and may listen
            # again as a new incarnation): hung up on, not served for an incarnation that is gone.
            writer.close()
            return
        accepted.add(writer)
        try:
            kind, _, body = await _read_frame(reader)
            if kind != codec.HELLO:
                raise codec.WireError(f"a connection opened with frame kind {kind}, not HELLO")
            src = codec.read_hello(body)
            while True:
                kind, correlation_id, body = await _read_frame(reader)
                if kind != codec.REQUEST:
                    raise codec.WireError(f"a client sent frame kind {kind}")
                request = codec.decode(body)
                self.scheduler.call_soon_threadsafe(self._dispatch, node, incarnation, src, correlation_id,
                                                    request, writer)
        except (asyncio.IncompleteReadError, ConnectionError, codec.WireError, asyncio.CancelledError):
            # A broken peer, or the transport closing: either way the connection just ends
            # (a cancelled task left to raise would be logged by asyncio's server).
            pass
        finally:
            accepted.discard(writer)
            writer.close()

    def _send_on_loop(self, src: int, dst: int, body: bytes, on_response: Respond | None,
                      remote: Address | None) -> None:
        key = (src, dst)
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = _Link()
            link.task = self._loop.create_task(self._run_link(src, dst, link, remote))
        correlation_id = next(link.ids) & 0xFFFFFFFF
        link.pending[correlation_id] = on_response
        frame = codec.frame(codec.REQUEST, correlation_id, body)
        if link.writer is None:
            link.queued.append(frame)
        else:
            link.writer.write(frame)

    async def _run_link(self, src: int, dst: int, link: _Link, remote: Address | None) -> None:
        """Connect (to ``dst`` here if it listens here, else at ``remote``), send what waited,
        then read answers until the connection ends; then every request still unanswered is
        answered DISCONNECTED."""
        writer = None
        try:
            address = self._addresses.get(dst) if dst in self._servers else remote
            if address is None:
                return  # nothing listens for dst: refused
            reader, writer = await asyncio.open_connection(*address)
            if link.closed:
                return
            writer.write(codec.hello(src))
            for frame in link.queued:
                writer.write(frame)
            link.queued.clear()
            link.writer = writer
            while True:
                kind, correlation_id, body = await _read_frame(reader)
                if kind != codec.RESPONSE:
                    raise codec.WireError(f"a server sent frame kind {kind}")
                response = codec.decode(body)
                if correlation_id in link.pending:
                    on_response = link.pending.pop(correlation_id)
                    self.scheduler.call_soon_threadsafe(self._answer, src, on_response, response)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, codec.WireError):
            pass
        finally:
            if self._links.get((src, dst)) is link:
                del self._links[(src, dst)]
            if writer is not None:
                writer.close()
            if remote is not None:
                self.scheduler.call_soon_threadsafe(self._forget, dst)
            if not link.closed:  # a link closed by its own node going away answers no one
                for on_response in link.pending.values():
                    self.scheduler.call_soon_threadsafe(self._answer, src, on_response, DISCONNECTED)
            link.pending.clear()

    def _abandon_listen(self, node: int, incarnation: int) -> None:
        if self._listening.get(node) == incarnation:  # it listened before the caller gave up
            self._loop.create_task(self._stop_node(node))
        else:  # it has not listened yet: it closes its server when it does
            self._abandoned.add((node, incarnation))

    async def _stop_node(self, node: int) -> None:
        self._listening.pop(node, None)
        server = self._servers.pop(node, None)
        self._addresses.pop(node, None)
        if server is not None:
            server.close()
        for writer in self._accepted.pop(node, set()):
            writer.close()
        for (src, dst), link in list(self._links.items()):
            if src == node:
                link.closed = True  # its answers are lost with it
            if src == node or dst == node:
                self._drop_link(src, dst, link, hang_up=src == node)

    def _drop_link(self, src: int, dst: int, link: _Link, hang_up: bool = True) -> None:
        self._links.pop((src, dst), None)
        if link.writer is not None and not hang_up:
            # Its far end is the node going away, which closes its side: what it answered
            # before is read first, then the connection's end refuses the rest. Closed
            # here, an answer already given would be dropped unread; this end only stops
            # sending (and a far end that stays up hangs up when it reads that).
            link.writer.write_eof()
        elif link.writer is not None:
            link.writer.close()
        elif link.task is not None:
            link.task.cancel()
            if not link.closed:
                for on_response in link.pending.values():
                    self.scheduler.call_soon_threadsafe(self._answer, src, on_response, DISCONNECTED)
                link.pending.clear()

    async def _shutdown(self) -> None:
        for node in list(self._servers):
            await self._stop_node(node)
        # What is left are the links of senders that are no node here (a client): they are
        # still there, so what they wait for is refused, as a send after close is.
        for (src, dst), link in list(self._links.items()):
            self._drop_link(src, dst, link)
        # The connections' own tasks end here, not destroyed pending when the loop closes.
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _write(writer: asyncio.StreamWriter, frame: bytes) -> None:
    if not writer.is_closing():
        writer.write(frame)


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, int, bytes]:
    header = await reader.readexactly(codec.FRAME_HEADER.size)
    length, kind, correlation_id = codec.FRAME_HEADER.unpack(header)
    if not 5 <= length <= codec.MAX_FRAME_BYTES:
        raise codec.WireError(f"a frame of {length} bytes")
    body = await reader.readexactly(length - 5)
    return kind, correlation_id, body
