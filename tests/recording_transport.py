"""An in-process transport that records every request and can hold messages in flight.

Cluster tests use it to build the races of seeds 000/001: a request delayed on
the wire until after the state it carries is stale.
"""
from kreplica.runtime import SimScheduler
from kreplica.transport import InProcessTransport


class RecordingTransport(InProcessTransport):
    """Records every request sent; holds the messages ``hold(src, dst, message)`` selects."""

    def __init__(self) -> None:
        super().__init__(SimScheduler(0), latency_ms=1)  # the Cluster installs its scheduler
        self.sent: list[tuple[int, int, int, object]] = []
        self.hold = lambda src, dst, message: False
        self.held: list[tuple[object, object]] = []

    def send(self, src, dst, request, on_response):
        self.sent.append((self.scheduler.now_ms(), src, dst, request))
        super().send(src, dst, request, on_response)

    def deliver(self, src, dst, message, arrive):
        if self.hold(src, dst, message):
            self.held.append((message, arrive))
            return
        super().deliver(src, dst, message, arrive)

    def release(self) -> None:
        """Deliver what was held, now."""
        held, self.held = self.held, []
        for message, arrive in held:
            arrive(message)

    def requests(self, kind, src=None):
        return [(t, s, d, r) for t, s, d, r in self.sent if isinstance(r, kind) and src in (None, s)]
