"""In-process transport: typed requests and responses between nodes, through the scheduler.

Theory of operation.  Every node (a broker, a test client) registers a handler
``handler(src, request, respond)``.  ``send(src, dst, request, on_response)``
carries the request to ``dst`` and, when the handler calls ``respond(response)``
(at once or later, as a long-poll does), carries the response back to
``on_response``.  Both legs go through :meth:`deliver`, the single place where a
message crosses a link; the default schedules it ``latency_ms`` later on the
injected scheduler, so delivery is deterministic under :class:`SimScheduler`.

What leaves a node is detached from it (:func:`on_the_wire`): records a message
carries as a view into the sender's memory (a leader's fetch answer reads its log
segments without copying) are copied as the message is sent, as a socket would
copy them, so nothing the sender does afterwards changes what is on its way.

A simulator subclasses this and overrides :meth:`deliver` to draw per-link
latencies, drop, duplicate or partition: a dropped message simply never arrives
(the sender's own timeout handles it, as over TCP).  A request to a node that is
not registered is answered with :data:`DISCONNECTED`, as a refused connection.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Protocol

from .protocol import ProduceRequest
from .runtime import Scheduler

Respond = Callable[[Any], None]
Handler = Callable[[int, Any, Respond], None]


class Transport(Protocol):
    """What brokers and the cluster need of a transport: this module's in-process one,
    the simulator's :class:`~kreplica.sim.network.SimNetwork`, or real sockets
    (:class:`~kreplica.net.tcp_transport.TcpTransport`).  ``register`` returns the
    port the node listens on, or None where there are no ports."""

    scheduler: Scheduler
    messages_delivered: int

    def register(self, node_id: int, handler: Handler) -> int | None: ...

    def unregister(self, node_id: int) -> None: ...

    def send(self, src: int, dst: int, request: Any, on_response: Respond | None) -> None: ...


class _Disconnected:
    """The response a sender sees when its destination is down (a refused connection)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DISCONNECTED"


DISCONNECTED = _Disconnected()


def on_the_wire(message: Any) -> Any:
    """``message`` as it leaves its node, with no view into memory the sender may reuse.

    A producer's records may be a view into a buffer it fills again, so they are
    copied as a socket would.  A fetch answer's records stay a zero-copy view into
    the leader's mapped log segment: the log never changes a byte under a live view
    (a truncation moves the viewed file aside, ``MappedFile.cut_for_write``), so an
    answer held on its way still carries what was read (swarm control-plane-chaos
    seed 8071), and replication pays no copy per fetch."""
    if type(message) is ProduceRequest:
        parts = message.partitions
        if any(type(d.records) is memoryview for d in parts):
            return ProduceRequest(message.acks, message.timeout_ms, tuple(
                replace(d, records=bytes(d.records)) if type(d.records) is memoryview else d for d in parts))
    return message


def answer_once(node: int, request: Any, carry: Respond) -> Respond:
    """The ``respond`` a handler on ``node`` gets for ``request``: it ``carry``s the answer
    back, once.  A handler answers once; a late second answer is a bug in the handler."""
    answered = False

    def respond(response: Any) -> None:
        nonlocal answered
        if answered:
            raise RuntimeError(f"node {node} answered {type(request).__name__} twice")
        answered = True
        carry(response)

    return respond


class InProcessTransport:
    def __init__(self, scheduler: Scheduler, latency_ms: int = 0) -> None:
        self.scheduler = scheduler
        self.latency_ms = latency_ms
        self._handlers: dict[int, Handler] = {}
        # Nodes that were registered and went away: responses to them are lost.
        # A sender that never registered (a plain client) still gets its answers.
        self._down: set[int] = set()
        self.messages_delivered = 0

    def register(self, node_id: int, handler: Handler) -> None:
        self._handlers[node_id] = handler
        self._down.discard(node_id)
        return None  # no ports in-process

    def unregister(self, node_id: int) -> None:
        if self._handlers.pop(node_id, None) is not None:
            self._down.add(node_id)

    def send(self, src: int, dst: int, request: Any, on_response: Respond | None) -> None:
        """Send ``request`` from ``src`` to ``dst``; ``on_response`` gets the response (or DISCONNECTED)."""
        self.deliver(src, dst, on_the_wire(request), lambda req: self._dispatch(src, dst, req, on_response))

    def _dispatch(self, src: int, dst: int, request: Any, on_response: Respond | None) -> None:
        handler = self._handlers.get(dst)
        if handler is None:
            if on_response is not None and src not in self._down:
                self.deliver(dst, src, DISCONNECTED, self._back_to(src, on_response))
            return

        def carry(response: Any) -> None:
            if on_response is not None and src not in self._down:
                self.deliver(dst, src, on_the_wire(response), self._back_to(src, on_response))

        handler(src, request, answer_once(dst, request, carry))

    def _back_to(self, src: int, on_response: Respond) -> Callable[[Any], None]:
        """The arrival of an answer (or a refusal) at ``src``: lost if ``src`` went away while it
        was on its way, as an answer on a socket dies with the process that was to read it."""
        def arrive(response: Any) -> None:
            if src not in self._down:
                on_response(response)
        return arrive

    def deliver(self, src: int, dst: int, message: Any, arrive: Callable[[Any], None]) -> None:
        """Carry one message across the link ``src -> dst``; ``arrive(message)`` is its arrival.

        The one method a fault-injecting simulator overrides (latency distributions,
        drops, duplicates, partitions).
        """
        self.messages_delivered += 1
        self.scheduler.call_later(self.latency_ms, arrive, message)
