"""InProcessTransport: latency through the scheduler, refused connections, one overridable link."""
import pytest

from kreplica.runtime import SimScheduler
from kreplica.transport import DISCONNECTED, InProcessTransport, answer_once


def _echo(src, request, respond):
    respond(("echo", src, request))


def test_request_and_response_each_take_the_latency():
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    t.register(1, _echo)
    got = []
    t.send(9, 1, "ping", lambda r: got.append((s.now_ms(), r)))
    s.advance(100)
    assert got == [(10, ("echo", 9, "ping"))]


def test_a_handler_may_answer_later():
    s = SimScheduler()
    t = InProcessTransport(s)
    t.register(1, lambda src, req, respond: s.call_later(50, respond, req * 2))
    got = []
    t.send(2, 1, 21, got.append)
    s.advance(49)
    assert got == []
    s.advance(1)
    assert got == [42]


def test_down_nodes_refuse_and_lose_answers():
    s = SimScheduler()
    t = InProcessTransport(s)
    got = []
    t.send(2, 1, "x", got.append)
    s.advance(1)
    assert got == [DISCONNECTED]
    # A registered sender that went down never sees the answer to its request.
    t.register(1, lambda src, req, respond: s.call_later(10, respond, "late"))
    t.register(2, _echo)
    t.send(2, 1, "x", got.append)
    s.advance(1)
    t.unregister(2)
    s.advance(20)
    assert got == [DISCONNECTED]


def test_an_answer_on_its_way_to_a_node_that_went_away_is_lost_when_it_arrives():
    """Whether the asker is there is also read when its answer gets there: a node that went
    away after its answer (or a refusal) left never sees it, as an answer on a socket dies
    with the process that was to read it, rather than running the dead node's callback."""
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    t.register(1, _echo)
    t.register(2, _echo)
    got = []
    t.send(2, 1, "answered", got.append)
    t.send(2, 3, "refused", got.append)  # 3 is not there
    s.advance(5)  # both requests arrive; the answer and the refusal leave for node 2
    t.unregister(2)  # which goes away before they get there
    s.advance(10)
    assert got == [] and t.messages_delivered == 4


def test_answering_twice_is_a_handler_bug():
    s = SimScheduler()
    t = InProcessTransport(s)

    def twice(src, req, respond):
        respond(1)
        respond(2)

    t.register(1, twice)
    t.send(2, 1, "x", lambda r: None)
    # The node whose handler answered twice is named, not the node that asked.
    with pytest.raises(RuntimeError, match="^node 1 answered str twice$"):
        s.advance(1)


def test_an_answer_counts_from_the_call_even_when_carrying_it_raises():
    """answer_once marks the request answered before it carries the answer: an answer
    whose carrying raised (over TCP, a response the codec refuses) was still given, so a
    handler that catches the error and answers again is refused, and its second answer
    is never carried."""
    carried = []

    def carry(response):
        if response == "unencodable":
            raise ValueError("cannot encode")
        carried.append(response)

    respond = answer_once(1, "x", carry)
    with pytest.raises(ValueError, match="cannot encode"):
        respond("unencodable")
    with pytest.raises(RuntimeError, match="^node 1 answered str twice$"):
        respond("fine")
    assert carried == []


def test_a_simulator_overrides_deliver_for_faults():
    class Lossy(InProcessTransport):
        def deliver(self, src, dst, message, arrive):
            if (src, dst) == (1, 2):
                return  # the link 1 -> 2 drops everything
            super().deliver(src, dst, message, arrive)

    s = SimScheduler()
    t = Lossy(s)
    t.register(1, _echo)
    got = []
    t.send(3, 1, "a", got.append)
    t.send(2, 1, "b", got.append)  # the request arrives, its answer is dropped
    s.advance(1)
    assert got == [("echo", 3, "a")]


def test_a_fetch_answer_on_its_way_keeps_the_bytes_it_was_sent_with(tmp_path):
    """Swarm control-plane-chaos seed 8071: a leader answers a fetch with a view into its
    log segment; before the answer arrives it truncates and appends other batches at
    the same file positions.  The answer must still carry what was read."""
    from kreplica.log import Log
    from kreplica.protocol import FetchPartitionData, FetchRequest, FetchResponse, TopicPartition
    from kreplica.runtime import ManualClock

    tp = TopicPartition("t", 0)
    log = Log.open(tmp_path / "leader", {"segment.bytes": 1 << 20}, ManualClock())
    try:
        log.append_as_leader([b"old-1", b"old-2"], leader_epoch=11)
        s = SimScheduler()
        t = InProcessTransport(s, latency_ms=5)
        sent = []

        def leader(src, request, respond):
            records = log.read(0, 1 << 20).view
            sent.append(bytes(records))
            respond(FetchResponse(0, (FetchPartitionData(tp, 0, 0, 0, log.log_end_offset, records),)))

        t.register(1, leader)
        got = []
        t.send(2, 1, FetchRequest(2, ()), got.append)
        s.advance(5)                      # answered; the answer is on its way
        log.truncate_to(0)
        log.append_as_leader([b"new-1", b"new-2"], leader_epoch=12)
        s.advance(5)
        assert bytes(got[0].partitions[0].records) == sent[0]
        assert bytes(log.read(0, 1 << 20).view) != sent[0]
    finally:
        log.close()


class _Links(InProcessTransport):
    """Records the link every message crosses."""

    def __init__(self, scheduler):
        super().__init__(scheduler)
        self.links = []

    def deliver(self, src, dst, message, arrive):
        self.links.append((src, dst))
        super().deliver(src, dst, message, arrive)


def test_an_answer_and_a_refusal_come_back_over_the_reverse_link():
    s = SimScheduler()
    t = _Links(s)
    t.register(1, _echo)
    got = []
    t.send(2, 1, "to-1", got.append)
    t.send(2, 3, "to-3", got.append)  # 3 is not there
    s.advance(1)
    assert got == [("echo", 2, "to-1"), DISCONNECTED]
    assert repr(got[1]) == "DISCONNECTED"  # as a failed assertion or a trace shows it
    assert t.links == [(2, 1), (2, 3), (1, 2), (3, 2)]
    assert t.messages_delivered == 4


def test_whether_the_addressee_is_there_is_read_as_the_request_arrives():
    """A request finds what is at its destination when it gets there, as a connection is
    refused or taken by whatever listens at that moment: a node that went away while the
    request was on its way refuses it (its old handler never sees it), and one that came
    up meanwhile serves it."""
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    served = []
    t.register(1, lambda src, req, respond: (served.append(req), respond("old")))
    got = []
    t.send(2, 1, "to 1", got.append)
    t.send(2, 3, "to 3", got.append)
    t.unregister(1)  # crashes before the request arrives
    t.register(3, _echo)  # starts before the request arrives
    s.advance(20)
    assert got == [DISCONNECTED, ("echo", 2, "to 3")] and served == []


def test_a_node_registered_again_gets_the_answers_to_its_requests():
    s = SimScheduler()
    t = InProcessTransport(s)
    t.register(1, _echo)
    t.register(2, _echo)
    t.unregister(2)
    t.register(2, _echo)  # restarted
    got = []
    t.send(2, 1, "x", got.append)
    s.advance(1)
    assert got == [("echo", 2, "x")]


@pytest.mark.parametrize("acks", [1, 0, -1])
def test_a_produce_request_leaves_with_copies_of_every_view_it_carries(acks):
    """A producer may fill its buffer again as soon as send() returns; records sent as a
    view must arrive as they were, also when another partition's records are bytes, and
    whatever the acks (an acks=0 send waits for no answer, but its records still travel).
    Only the partitions carrying a view are rebuilt; one whose records are bytes crosses as
    the object sent (rebuilt, every partition of every such request cost an object more)."""
    from kreplica.protocol import ProducePartition, ProduceRequest, TopicPartition

    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    arrived = []
    t.register(1, lambda src, request, respond: arrived.append(request))
    buffer = bytearray(b"[first]")
    # A view onto part of the buffer: what crosses is the part viewed, not the buffer under it.
    request = ProduceRequest(acks, 1000, (ProducePartition(TopicPartition("t", 0), b"bytes"),
                                          ProducePartition(TopicPartition("t", 1), memoryview(buffer)[1:-1])))
    t.send(2, 1, request, None)
    buffer[:] = b"[again]"
    s.advance(5)
    assert [bytes(p.records) for p in arrived[0].partitions] == [b"bytes", b"first"]
    assert type(arrived[0].partitions[1].records) is bytes
    assert (arrived[0].acks, arrived[0].timeout_ms) == (acks, 1000)  # the copy keeps the rest
    assert arrived[0].partitions[0] is request.partitions[0]  # only the views are copied, not every partition


def test_unregistering_a_node_that_never_registered_leaves_its_answers_coming():
    """Only a node that was registered and went away loses its answers; a plain client
    (never registered) keeps getting them even if its id is unregistered."""
    s = SimScheduler()
    t = InProcessTransport(s)
    t.register(1, _echo)
    t.unregister(2)  # 2 never registered: nothing to take down
    got = []
    t.send(2, 1, "x", got.append)
    s.advance(1)
    assert got == [("echo", 2, "x")]


def test_a_request_sent_without_a_callback_to_a_missing_node_is_simply_lost():
    """acks=0 produce sends with no on_response: a refused connection has no one to tell,
    and must not send a refusal back to None (a TypeError inside the scheduler)."""
    s = SimScheduler()
    t = InProcessTransport(s)
    t.send(2, 3, "x", None)  # 3 is not there
    s.advance(1)
    assert t.messages_delivered == 1


def test_a_nodes_request_to_itself_crosses_the_transport_and_is_counted():
    """The controller's broker sends LeaderAndIsr to itself as to any other broker: both
    legs go through deliver() and count, as in Kafka, where it goes over a socket."""
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=3)
    t.register(1, _echo)
    got = []
    t.send(1, 1, "self", lambda r: got.append((s.now_ms(), r)))
    s.advance(10)
    assert got == [(6, ("echo", 1, "self"))]
    assert t.messages_delivered == 2


def test_a_node_registered_again_is_served_by_its_new_handler():
    """Registering a node that is already registered replaces its handler, as
    TcpTransport's does: requests go to the handler registered last."""
    s = SimScheduler()
    t = InProcessTransport(s)
    assert t.register(1, lambda src, req, respond: respond("old")) is None  # no ports in-process
    t.register(1, _echo)
    got = []
    t.send(2, 1, "x", got.append)
    s.advance(1)
    assert got == [("echo", 2, "x")]


def test_a_read_only_view_into_a_buffer_the_producer_refills_is_copied_too():
    """Read-only is a promise about the view, not about the memory under it: a producer's
    ``memoryview(buffer).toreadonly()`` changes when the buffer is filled again. What
    arrives is the request as sent, records as bytes, equal to one built from them."""
    from kreplica.protocol import ProducePartition, ProduceRequest, TopicPartition

    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    arrived = []
    t.register(1, lambda src, request, respond: arrived.append(request))
    buffer = bytearray(b"first")
    t.send(2, 1, ProduceRequest(-1, 500, (ProducePartition(TopicPartition("t", 0), memoryview(buffer).toreadonly()),)),
           None)
    buffer[:] = b"again"
    s.advance(5)
    assert arrived == [ProduceRequest(-1, 500, (ProducePartition(TopicPartition("t", 0), b"first"),))]
    assert type(arrived[0].partitions) is tuple and type(arrived[0].partitions[0].records) is bytes


def test_a_node_that_went_away_refuses_what_is_sent_to_it():
    """Unregistering a node (a crash, a stop) takes its handler away: a request sent to it
    afterwards is refused, as a closed port refuses it, and never reaches the old handler."""
    s = SimScheduler()
    t = InProcessTransport(s)
    served = []
    t.register(1, lambda src, req, respond: (served.append(req), respond("served")))
    t.unregister(1)
    got = []
    t.send(2, 1, "x", got.append)
    s.advance(1)
    assert got == [DISCONNECTED] and served == []


def test_a_sender_that_went_away_gets_no_refusal_either():
    """A refusal is an answer like any other: a sender that went away (a crashed broker
    whose request was still on its way to a node that is down) never sees it, as over
    sockets, where its connection died with it. A sender that never registered (a plain
    client) still gets it."""
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    t.register(2, _echo)
    t.register(3, _echo)
    got = []
    t.send(2, 1, "x", lambda r: got.append(("from 2", r)))
    t.send(3, 1, "x", lambda r: got.append(("from 3", r)))
    t.send(9, 1, "x", lambda r: got.append(("from 9", r)))
    t.unregister(2)  # before its request reaches node 1, which is not there
    s.advance(100)
    assert got == [("from 3", DISCONNECTED), ("from 9", DISCONNECTED)]
    assert t.messages_delivered == 3 + 2  # three requests, two refusals: none sent to 2


def test_a_produce_request_with_no_view_leaves_as_the_object_sent():
    """Only views are copied: a request whose records are all bytes (what every client in
    kreplica sends) crosses as it was sent, not rebuilt, request and partitions, at every
    send; an answer, which keeps its zero-copy views, is never rebuilt either."""
    from kreplica.protocol import FetchPartitionData, FetchResponse, ProducePartition, ProduceRequest, TopicPartition
    from kreplica.transport import on_the_wire

    request = ProduceRequest(1, 1000, (ProducePartition(TopicPartition("t", 0), b"bytes"),
                                       ProducePartition(TopicPartition("t", 1), bytearray(b"owned"))))
    assert on_the_wire(request) is request
    answer = FetchResponse(0, (FetchPartitionData(TopicPartition("t", 0), 0, records=memoryview(b"log")),))
    assert on_the_wire(answer) is answer
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    arrived = []
    t.register(1, lambda src, req, respond: arrived.append(req))
    t.send(2, 1, request, None)
    s.advance(5)
    assert arrived[0] is request


def test_a_message_counts_when_it_leaves_not_when_it_arrives():
    """messages_delivered counts what was put on a link, as SimNetwork and TcpTransport
    count it: a request still on its way is counted, and its answer once it is sent."""
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    t.register(1, _echo)
    t.send(2, 1, "x", lambda r: None)
    assert t.messages_delivered == 1
    s.advance(5)  # the request arrives and the answer leaves
    assert t.messages_delivered == 2


def test_a_node_that_went_away_from_one_transport_is_not_down_on_another():
    """Each transport keeps its own nodes that went away: two clusters in one process (two
    tests, an embedder's two Cluster objects) share node ids, and broker 2 stopped in one
    must not lose the answers of broker 2 in the other."""
    s = SimScheduler()
    first, second = InProcessTransport(s), InProcessTransport(s)
    for t in (first, second):
        t.register(1, _echo)
        t.register(2, _echo)
    first.unregister(2)
    got = []
    second.send(2, 1, "x", got.append)
    s.advance(1)
    assert got == [("echo", 2, "x")]


def test_a_node_registered_again_takes_only_itself_off_the_down_list():
    """A restarted node gets its answers again; the nodes still down do not: registering
    node 2 again leaves node 3, which went away with it, without answers or refusals."""
    s = SimScheduler()
    t = InProcessTransport(s, latency_ms=5)
    for node in (1, 2, 3):
        t.register(node, _echo)
    t.unregister(2)
    t.unregister(3)
    t.register(2, _echo)  # 2 restarts; 3 stays down
    got = []
    t.send(2, 1, "from 2", lambda r: got.append((2, r)))
    t.send(3, 1, "from 3", lambda r: got.append((3, r)))  # a timer the stopped node left behind
    t.send(3, 9, "to nobody", lambda r: got.append((3, r)))
    s.advance(100)
    assert got == [(2, ("echo", 2, "from 2"))]
