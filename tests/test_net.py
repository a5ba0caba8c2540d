"""Real sockets: the wire codec and the TCP transport (kreplica/net).

The whole-cluster scenarios over TCP are in test_cluster_stores.py (the ``tcp``
parameters of its ``cluster`` fixture); here, the pieces.
"""
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import re
import signal
import socket
import struct
import threading
import time
import types
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kreplica import Cluster
from kreplica.errors import KafkaStorageError
from kreplica.meta.store import ConnectionLoss
from kreplica.net import codec
from kreplica.net import tcp_transport
from kreplica.net.tcp_transport import TcpTransport
from kreplica.protocol import (FetchPartition, FetchRequest, FetchResponse, ProducePartition, ProduceRequest,
                               StopReplicaPartition, StopReplicaRequest, TopicPartition, UpdateMetadataResponse)
from kreplica.runtime import RealScheduler
from kreplica.transport import DISCONNECTED

TP = TopicPartition("t", 0)


# ---- the codec ---------------------------------------------------------------------------------
def _strategy(annotation):
    if annotation is int:
        return st.integers(-(2**63), 2**63 - 1)
    if annotation is bool:
        return st.booleans()
    if annotation is str:
        return st.text(max_size=12)
    if annotation is bytes or typing.get_args(annotation) == (bytes, memoryview):
        return st.binary(max_size=40)
    if annotation is TopicPartition:
        return st.builds(TopicPartition, st.text(max_size=12), st.integers(0, 2**31 - 1))
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args[1:] == (Ellipsis,):
            return st.lists(_strategy(args[0]), max_size=4).map(tuple)
        return st.tuples(*(_strategy(a) for a in args))
    hints = typing.get_type_hints(annotation)
    fields = [f.name for f in dataclasses.fields(annotation)]
    return st.builds(_checked(annotation), *(_strategy(hints[f]) for f in fields)).filter(bool)


def _checked(cls):
    """``cls``'s constructor, or None where it refuses the values (acks outside 0, 1, -1)."""
    def build(*values):
        try:
            return cls(*values)
        except ValueError:
            return None
    return build


@settings(max_examples=300, deadline=None)
@given(st.one_of(*(_strategy(cls) for cls in codec.MESSAGE_TYPES)))
def test_every_message_type_round_trips(message):
    body = codec.encode(message)
    assert codec.decode(body) == message
    assert type(codec.decode(body)) is type(message)



def _least(annotation):
    """The least value of ``annotation``; a message or a partition is built by ``_told``."""
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args[1:] == (Ellipsis,):
            return (_told(args[0]),) if dataclasses.is_dataclass(args[0]) else ()
        return tuple(_least(a) for a in args)
    if annotation is TopicPartition:
        return TP
    if dataclasses.is_dataclass(annotation):
        return _told(annotation)
    return {int: 0, bool: False, str: ""}.get(annotation, b"")


def _told(cls):
    """``cls`` built from what it must be told, its defaults left to it."""
    hints = typing.get_type_hints(cls)
    return cls(*(_least(hints[f.name]) for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING))


@pytest.mark.parametrize("cls", codec.MESSAGE_TYPES, ids=lambda cls: cls.__name__)
def test_every_message_type_built_with_its_defaults_round_trips(cls):
    """The round trip above names every field; a message an admin tool or a test builds
    leaves the defaulted ones out, so every default (and every default of the partitions
    it carries) must be a value of its field's type on the wire, not None."""
    message = _told(cls)
    assert codec.decode(codec.encode(message)) == message


def test_a_partition_state_is_new_only_when_its_builder_says_so():
    """Kafka's LeaderAndIsr IsNew is false unless set: the controller sets it only for a
    partition it has just created (partition_state_machine's NEW to ONLINE).  A state
    built without it, as the replication bench and the test harnesses build theirs, must
    not claim a new replica."""
    from kreplica.protocol import LeaderAndIsrPartitionState

    state = LeaderAndIsrPartitionState(TopicPartition("t", 0), 1, 1, 0, (1,), 0, (1,))
    assert state.is_new is False and state.topic_config == ()

def test_every_message_type_is_on_the_wire_and_disconnected_too():
    import kreplica.protocol as protocol

    messages = {cls for name in protocol.__all__ if (name.endswith("Request") or name.endswith("Response"))
                and isinstance(cls := getattr(protocol, name), type)}
    assert messages == set(codec.MESSAGE_TYPES)
    assert codec.decode(codec.encode(DISCONNECTED)) is DISCONNECTED


def test_a_fetch_answer_leaves_its_node_as_a_copy():
    """Encoding detaches: a record view the sender changes afterwards is not what arrives."""
    buffer = bytearray(b"abcdef")
    body = codec.encode(FetchResponse(0, (_data(memoryview(buffer)),)))
    buffer[:] = b"zzzzzz"
    assert codec.decode(body).partitions[0].records == b"abcdef"


def _data(records):
    from kreplica.protocol import FetchPartitionData

    return FetchPartitionData(TP, 0, 1, 0, 2, records)


@pytest.mark.parametrize("body, complaint", [
    (b"", "empty"),
    (bytes([200]), "unknown message type 200"),
    (codec.encode(UpdateMetadataResponse(0)) + b"\0", "1 bytes left over"),
    (codec.encode(DISCONNECTED) + b"\0", "unknown message type 16"),  # DISCONNECTED has no fields
    (codec.encode(UpdateMetadataResponse(0))[:-1], "does not decode"),
    (codec.encode(ProduceRequest(1, 100, (ProducePartition(TP, b"xy"),)))[:-1], "past the end"),
    (bytes([codec.MESSAGE_TYPES.index(FetchRequest)]) + struct.pack(">q", 1) + struct.pack(">I", 2**31),
     "cannot fit"),
    (codec.encode(FetchRequest(1, (FetchPartition(TopicPartition("\xe9", 0), 0),))).replace(
        "\xe9".encode(), b"\xff\xff"), "does not decode"),  # a topic name that is not UTF-8
    (bytes([0]) + struct.pack(">q", 2) + codec.encode(ProduceRequest(1, 100, ()))[9:],
     "acks must be 0, 1 or -1"),  # the message's own check refuses what the wire carried
    (codec.encode(StopReplicaRequest(0, 1, (StopReplicaPartition(TP, True),)))[:34],
     "does not decode"),  # cut just before the partition's `delete` byte
])
def test_a_frame_that_does_not_decode_is_a_wire_error(body, complaint):
    with pytest.raises(codec.WireError, match=complaint) as e:
        codec.decode(body)
    assert e.value.name == "CORRUPT_MESSAGE"


def test_a_peer_of_another_wire_version_is_refused():
    hello = codec.HELLO_BODY.pack(7, codec.WIRE_VERSION + 1)
    with pytest.raises(codec.WireError, match="wire version"):
        codec.read_hello(hello)
    with pytest.raises(codec.WireError, match="wire version"):  # nor an older one
        codec.read_hello(codec.HELLO_BODY.pack(7, codec.WIRE_VERSION - 1))
    assert codec.read_hello(codec.HELLO_BODY.pack(-100, codec.WIRE_VERSION)) == -100


def test_a_hello_of_the_wrong_size_is_a_wire_error():
    """A HELLO body cut short or run long is a broken stream (WireError, which closes the
    connection quietly), not a struct.error escaping the server's connection task."""
    body = codec.HELLO_BODY.pack(7, codec.WIRE_VERSION)
    for wrong in (body[:-1], body + b"\0", b""):
        with pytest.raises(codec.WireError, match="a HELLO of"):
            codec.read_hello(wrong)


def test_an_object_that_is_not_a_message_is_refused_before_the_wire():
    with pytest.raises(TypeError, match="not a message"):
        codec.encode(TP)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(UpdateMetadataResponse):  # the wire carries a type number, not a subclass's own fields
        tag: str = "lost on the way"

    with pytest.raises(TypeError, match="Tagged is not a message"):
        codec.encode(Tagged(0))


def test_the_wire_format_is_pinned_byte_for_byte():
    """The format the module's docstring describes, built here with struct alone: type
    numbers, field order and widths are what processes of one WIRE_VERSION agree on
    (a round trip through one build cannot see a change to them).  A change here is a
    new WIRE_VERSION."""
    q, u32 = (lambda v: struct.pack(">q", v)), (lambda v: struct.pack(">I", v))
    produce = ProduceRequest(-1, 100, (ProducePartition(TopicPartition("t", 0), b"xy"),))
    assert codec.encode(produce) == (bytes([0]) + q(-1) + q(100) + u32(1) + u32(1) + b"t" + q(0)
                                     + u32(2) + b"xy")
    fetch = FetchRequest(7, (FetchPartition(TopicPartition("t", 2), 5, 3, 1, 9),), 500, 1, 1024, "committed")
    assert codec.encode(fetch) == (bytes([2]) + q(7) + u32(1) + u32(1) + b"t" + q(2) + q(5) + q(3) + q(1) + q(9)
                                   + q(500) + q(1) + q(1024) + u32(9) + b"committed")
    assert codec.encode(UpdateMetadataResponse(3)) == bytes([11]) + q(3)
    stop = StopReplicaRequest(0, 1, (StopReplicaPartition(TopicPartition("t", 0), True),))
    assert codec.encode(stop) == (bytes([8]) + q(0) + q(1) + u32(1) + u32(1) + b"t" + q(0) + b"\x01" + q(-1)
                                  + q(-1))  # a bool is one byte
    assert codec.decode(codec.encode(stop)).partitions[0].delete is True
    assert codec.encode(DISCONNECTED) == bytes([16])
    # Immutable bytes, as annotated: a body is hashable and no one holding it can change it.
    assert type(codec.encode(produce)) is bytes and type(codec.encode(DISCONNECTED)) is bytes
    assert codec.frame(codec.RESPONSE, 7, b"xy") == struct.pack(">IBI", 7, 2, 7) + b"xy"
    # The version is pinned with the format: a build that moved it alone would refuse every
    # process of the build before it (a rolling restart would split the cluster in two).
    assert codec.WIRE_VERSION == 1
    assert codec.hello(-2) == struct.pack(">IBI", 11, 0, 0) + struct.pack(">iH", -2, 1)


def test_the_controllers_requests_are_pinned_byte_for_byte_and_decode_to_their_own_types():
    """The annotations of kreplica.protocol are the wire format: a flag annotated as an int
    (eight bytes, not one) or a config pair as a tuple of any length (a count in front of
    each pair) round-trips in one build, equal to what was sent, and is misread by a process
    of the build before.  What decodes must also be of the field's own type: a bool, not the
    int 1, and a TopicPartition, not a pair that merely compares equal to one."""
    from kreplica.protocol import (LeaderAndIsrPartitionState, LeaderAndIsrRequest, UpdateMetadataPartitionState,
                                   UpdateMetadataRequest)

    q, u32 = (lambda v: struct.pack(">q", v)), (lambda v: struct.pack(">I", v))
    text = lambda s: u32(len(s)) + s  # noqa: E731
    ints = lambda *vs: u32(len(vs)) + b"".join(q(v) for v in vs)  # noqa: E731
    state = LeaderAndIsrPartitionState(TopicPartition("t", 0), 1, 2, 3, (2, 3), 4, (2, 3), True,
                                       (("retention.ms", "1000"),))
    leader_and_isr = LeaderAndIsrRequest(0, 1, (state,), (2,), True, 5)
    assert codec.encode(leader_and_isr) == (
        bytes([6]) + q(0) + q(1) + u32(1)
        + text(b"t") + q(0) + q(1) + q(2) + q(3) + ints(2, 3) + q(4) + ints(2, 3) + b"\x01"
        + u32(1) + text(b"retention.ms") + text(b"1000")
        + ints(2) + b"\x01" + q(5))
    got = codec.decode(codec.encode(leader_and_isr))
    assert got.is_init is True and got.partition_states[0].is_new is True
    update = UpdateMetadataRequest(0, 1, (UpdateMetadataPartitionState(TopicPartition("t", 1), 1, 2, 3, (2,), 4, (2,)),),
                                   (2,), (TopicPartition("gone", 0),), 5)
    assert codec.encode(update) == (
        bytes([10]) + q(0) + q(1) + u32(1)
        + text(b"t") + q(1) + q(1) + q(2) + q(3) + ints(2) + q(4) + ints(2) + ints()
        + ints(2) + u32(1) + text(b"gone") + q(0) + q(5))
    got = codec.decode(codec.encode(update))
    assert type(got.deleted[0]) is TopicPartition and str(got.deleted[0]) == "gone-0"
    assert type(got.partition_states[0].tp) is TopicPartition


# Every dataclass of kreplica.protocol, its fields in the order a frame carries them (LeaderAndIsr,
# stored as named JSON and sent in none, is listed with them as it is exported with them).
WIRE_FIELDS = {
    "AlterIsrRequest": "broker_id tp leader_epoch new_isr zk_version controller_epoch",
    "AlterIsrResponse": "tp error_code leader_epoch isr zk_version",
    "ControlledShutdownRequest": "broker_id broker_epoch",
    "ControlledShutdownResponse": "error_code partitions_remaining",
    "EpochEndOffset": "tp error_code leader_epoch end_offset",
    "FetchPartition": "tp fetch_offset current_leader_epoch log_start_offset max_bytes",
    "FetchPartitionData": "tp error_code high_watermark log_start_offset log_end_offset records",
    "FetchRequest": "replica_id partitions max_wait_ms min_bytes max_bytes isolation",
    "FetchResponse": "error_code partitions",
    "LeaderAndIsr": "leader leader_epoch isr zk_version controller_epoch",
    "LeaderAndIsrPartitionState": "tp controller_epoch leader leader_epoch isr zk_version replicas is_new topic_config",
    "LeaderAndIsrRequest": "controller_id controller_epoch partition_states live_leaders is_init broker_epoch",
    "LeaderAndIsrResponse": "error_code partition_errors",
    "OffsetForLeaderPartition": "tp leader_epoch current_leader_epoch",
    "OffsetsForLeaderEpochRequest": "replica_id partitions",
    "OffsetsForLeaderEpochResponse": "partitions",
    "ProducePartition": "tp records",
    "ProducePartitionResult": "tp error_code base_offset log_append_time_ms",
    "ProduceRequest": "acks timeout_ms partitions",
    "ProduceResponse": "partitions",
    "StopReplicaPartition": "tp delete leader_epoch",
    "StopReplicaRequest": "controller_id controller_epoch partitions broker_epoch",
    "StopReplicaResponse": "error_code partition_errors",
    "UpdateMetadataPartitionState": "tp controller_epoch leader leader_epoch isr zk_version replicas offline_replicas",
    "UpdateMetadataRequest": "controller_id controller_epoch partition_states live_brokers deleted broker_epoch",
    "UpdateMetadataResponse": "error_code",
}


def test_every_message_keeps_the_field_order_its_wire_version_carries():
    """The frame carries fields by place, not by name: two fields of one type swapped in a
    class (an AlterIsr's leader epoch and version, both ints) round-trip in one build and
    are misread by a process of the build before, under the same WIRE_VERSION."""
    import kreplica.protocol as protocol

    got = {c.__name__: " ".join(f.name for f in dataclasses.fields(c))
           for c in vars(protocol).values() if isinstance(c, type) and dataclasses.is_dataclass(c)}
    assert got == WIRE_FIELDS and codec.WIRE_VERSION == 1
    assert TopicPartition._fields == ("topic", "partition")


# Each message type's number (its place in the list) and what its fields are on the wire,
# nested types spelled out: [T] a counted sequence, (A, B) a fixed pair, ``bytes | memoryview``
# records (written as bytes).
WIRE_SCHEMA = [
    "ProduceRequest(acks: int, timeout_ms: int, partitions: [ProducePartition(tp: TopicPartition(topic: str, partition: int), records: bytes | memoryview)])",
    "ProduceResponse(partitions: [ProducePartitionResult(tp: TopicPartition(topic: str, partition: int), error_code: int, base_offset: int, log_append_time_ms: int)])",
    "FetchRequest(replica_id: int, partitions: [FetchPartition(tp: TopicPartition(topic: str, partition: int), fetch_offset: int, current_leader_epoch: int, log_start_offset: int, max_bytes: int)], max_wait_ms: int, min_bytes: int, max_bytes: int, isolation: str)",
    "FetchResponse(error_code: int, partitions: [FetchPartitionData(tp: TopicPartition(topic: str, partition: int), error_code: int, high_watermark: int, log_start_offset: int, log_end_offset: int, records: bytes | memoryview)])",
    "OffsetsForLeaderEpochRequest(replica_id: int, partitions: [OffsetForLeaderPartition(tp: TopicPartition(topic: str, partition: int), leader_epoch: int, current_leader_epoch: int)])",
    "OffsetsForLeaderEpochResponse(partitions: [EpochEndOffset(tp: TopicPartition(topic: str, partition: int), error_code: int, leader_epoch: int, end_offset: int)])",
    "LeaderAndIsrRequest(controller_id: int, controller_epoch: int, partition_states: [LeaderAndIsrPartitionState(tp: TopicPartition(topic: str, partition: int), controller_epoch: int, leader: int, leader_epoch: int, isr: [int], zk_version: int, replicas: [int], is_new: bool, topic_config: [(str, str)])], live_leaders: [int], is_init: bool, broker_epoch: int)",
    "LeaderAndIsrResponse(error_code: int, partition_errors: [(TopicPartition(topic: str, partition: int), int)])",
    "StopReplicaRequest(controller_id: int, controller_epoch: int, partitions: [StopReplicaPartition(tp: TopicPartition(topic: str, partition: int), delete: bool, leader_epoch: int)], broker_epoch: int)",
    "StopReplicaResponse(error_code: int, partition_errors: [(TopicPartition(topic: str, partition: int), int)])",
    "UpdateMetadataRequest(controller_id: int, controller_epoch: int, partition_states: [UpdateMetadataPartitionState(tp: TopicPartition(topic: str, partition: int), controller_epoch: int, leader: int, leader_epoch: int, isr: [int], zk_version: int, replicas: [int], offline_replicas: [int])], live_brokers: [int], deleted: [TopicPartition(topic: str, partition: int)], broker_epoch: int)",
    "UpdateMetadataResponse(error_code: int)",
    "ControlledShutdownRequest(broker_id: int, broker_epoch: int)",
    "ControlledShutdownResponse(error_code: int, partitions_remaining: [TopicPartition(topic: str, partition: int)])",
    "AlterIsrRequest(broker_id: int, tp: TopicPartition(topic: str, partition: int), leader_epoch: int, new_isr: [int], zk_version: int, controller_epoch: int)",
    "AlterIsrResponse(tp: TopicPartition(topic: str, partition: int), error_code: int, leader_epoch: int, isr: [int], zk_version: int)",
]


def _wire_schema(annotation) -> str:
    """``annotation`` as the codec reads it (kreplica/net/codec.py's ``_codec``)."""
    if annotation in (int, bool, str, bytes):
        return annotation.__name__
    if isinstance(annotation, types.UnionType):
        return " | ".join(a.__name__ for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args[1:] == (Ellipsis,):
            return f"[{_wire_schema(args[0])}]"
        return "(" + ", ".join(_wire_schema(a) for a in args) + ")"
    hints = typing.get_type_hints(annotation)
    names = ([f.name for f in dataclasses.fields(annotation)] if dataclasses.is_dataclass(annotation)
             else list(annotation._fields))
    return f"{annotation.__name__}(" + ", ".join(f"{n}: {_wire_schema(hints[n])}" for n in names) + ")"


def test_every_message_keeps_the_types_and_numbers_its_wire_version_carries():
    """The annotations are the format: a flag annotated as an int is eight bytes, not one,
    a count goes in front of a pair annotated as a tuple of any length, a message moved in
    MESSAGE_TYPES takes another's number.  Each round-trips in one build and is misread by
    a process of the build before; the controller's requests are pinned byte for byte
    above, this pins every message's types (a change here is a new WIRE_VERSION)."""
    assert [_wire_schema(cls) for cls in codec.MESSAGE_TYPES] == WIRE_SCHEMA and codec.WIRE_VERSION == 1


# ---- the transport -----------------------------------------------------------------------------
@pytest.fixture
def net():
    sched = RealScheduler()
    transport = TcpTransport(sched)
    yield sched, transport
    transport.close()


def _fetch(offset=0):
    return FetchRequest(1, (FetchPartition(TP, offset),))


def _echo(got):
    def handler(src, request, respond):
        got.append((src, request))
        respond(FetchResponse(0, (_data(b"answer-%d" % request.partitions[0].fetch_offset),)))
    return handler


def _held_request(sched, t):
    """Node 1 asks node 2, which holds the request unanswered: (node 2's responders, node 1's answers)."""
    held, answers = [], []
    t.register(2, lambda src, request, respond: held.append(respond))
    t.send(1, 2, _fetch(), answers.append)
    assert sched.run_until(lambda: held, 5_000)
    return held, answers


def test_a_request_and_its_answer_cross_real_sockets(net):
    sched, t = net
    got, answers = [], []
    port = t.register(2, _echo(got))
    assert t.address(2) == ("127.0.0.1", port)
    with socket.create_connection(("127.0.0.1", port)):  # something really listens there
        pass
    t.send(1, 2, _fetch(7), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    assert got == [(1, _fetch(7))]
    assert answers[0].partitions[0].records == b"answer-7"
    assert t.messages_delivered == 1


def test_a_link_keeps_its_requests_in_order_and_answers_find_their_senders(net):
    sched, t = net
    got = []
    t.register(2, _echo(got))
    answers = {1: [], 3: []}
    for i in range(200):
        src = 1 if i % 2 else 3
        t.send(src, 2, _fetch(i), answers[src].append)
    assert sched.run_until(lambda: len(answers[1]) + len(answers[3]) == 200, 10_000)
    assert [r.partitions[0].fetch_offset for src, r in got if src == 1] == list(range(1, 200, 2))
    assert [a.partitions[0].records for a in answers[3]] == [b"answer-%d" % i for i in range(0, 200, 2)]


def test_a_long_poll_answers_later_on_the_same_connection(net):
    sched, t = net
    held, answers = _held_request(sched, t)
    sched.advance(50)
    assert answers == []
    held[0](UpdateMetadataResponse(0))
    assert sched.run_until(lambda: answers, 5_000) and answers == [UpdateMetadataResponse(0)]
    with pytest.raises(RuntimeError, match="node 2 answered FetchRequest twice"):  # the answering node
        held[0](UpdateMetadataResponse(0))


def test_a_node_that_is_not_listening_refuses(net):
    sched, t = net
    answers = []
    t.send(1, 9, _fetch(), answers.append)
    assert sched.run_until(lambda: answers, 5_000) and answers == [DISCONNECTED]


def test_a_node_going_away_disconnects_what_it_had_not_answered(net):
    """Each request it held is refused once, in the order it was sent (the order the link
    carried them, and the order an answer would have kept), not the reverse."""
    sched, t = net
    held, answers = [], []
    t.register(2, lambda src, request, respond: held.append(respond))
    for i in range(3):
        t.send(1, 2, _fetch(i), lambda answer, i=i: answers.append((i, answer)))
    assert sched.run_until(lambda: len(held) == 3, 5_000)
    t.unregister(2)
    assert sched.run_until(lambda: len(answers) == 3, 5_000)
    assert answers == [(0, DISCONNECTED), (1, DISCONNECTED), (2, DISCONNECTED)]
    held[0](UpdateMetadataResponse(0))  # a crashed process's late answer goes nowhere
    sched.advance(100)
    assert len(answers) == 3


def test_answers_on_their_way_to_a_node_that_went_away_are_lost(net):
    sched, t = net
    t.register(1, _echo([]))
    held, answers = _held_request(sched, t)
    t.unregister(1)
    held[0](UpdateMetadataResponse(0))
    sched.advance(200)
    assert answers == []


def test_a_restarted_node_listens_anew_and_its_old_incarnation_gets_nothing(net):
    sched, t = net
    first, second, answers = [], [], []
    old_port = t.register(2, _echo(first))
    t.send(1, 2, _fetch(1), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    t.unregister(2)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", old_port)).close()
    assert t.address(2) is None
    new_port = t.register(2, _echo(second))
    t.send(1, 2, _fetch(2), answers.append)
    assert sched.run_until(lambda: len(answers) == 2, 5_000)
    assert [r.partitions[0].fetch_offset for _, r in first] == [1]
    assert [r.partitions[0].fetch_offset for _, r in second] == [2]
    assert new_port == t.address(2)[1]


def test_garbage_on_a_port_closes_that_connection_only(net):
    sched, t = net
    got, answers = [], []
    port = t.register(2, _echo(got))
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(codec.hello(5) + codec.frame(codec.REQUEST, 1, bytes([250])))
        s.settimeout(5)
        assert s.recv(10) == b""  # the server hung up on it
    t.send(1, 2, _fetch(3), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    assert [src for src, _ in got] == [1]


def test_a_frame_claiming_more_than_the_largest_is_a_broken_stream(net):
    """A length past MAX_FRAME_BYTES is garbage, not a message to wait for: the connection closes."""
    sched, t = net
    port = t.register(2, _echo([]))
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(codec.hello(5) + codec.FRAME_HEADER.pack(codec.MAX_FRAME_BYTES + 1, codec.REQUEST, 1))
        s.settimeout(5)
        assert s.recv(10) == b""


def test_close_stops_the_sockets_and_the_thread():
    sched = RealScheduler()
    t = TcpTransport(sched)
    port = t.register(2, _echo([]))
    answers = []
    t.send(1, 2, _fetch(), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    t.close()
    t.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port)).close()
    assert not t._thread.is_alive()
    t.send(1, 2, _fetch(), answers.append)  # a timer that outlived its cluster is refused, not lost
    assert sched.run_until(lambda: len(answers) == 2, 1_000) and answers[1] is DISCONNECTED


def test_brokers_register_the_port_they_really_listen_on(tmp_path):
    with TcpTransport() as t, Cluster.embedded(data_dir=tmp_path, transport=t) as c:
        assert not c.virtual_time
        for bid, broker in c.brokers.items():
            doc = json.loads(c.zk.session.get(f"/brokers/ids/{bid}")[0])
            assert doc["port"] == broker.port == t.address(bid)[1]
            assert doc["host"] == "127.0.0.1"


def test_every_request_from_a_live_sender_is_answered_once_while_nodes_come_and_go(net):
    """Stress: 2,000 requests over six links while the receivers restart at random, some
    answering at once and some later.  Each request of a sender that stays up gets exactly
    one answer: its response or DISCONNECTED, never none and never two."""
    import random

    sched, t = net
    rng = random.Random(7)
    held = []  # (node, respond)

    def handler_of(node):
        def handler(src, request, respond):
            if rng.random() < 0.3:
                held.append((node, respond))  # answered later, or never if the node goes first
            else:
                respond(UpdateMetadataResponse(request.partitions[0].fetch_offset))
        return handler

    for node in (2, 3, 4):
        t.register(node, handler_of(node))
    answers = {}

    def on_answer(i):
        return lambda response: answers.setdefault(i, []).append(response)

    for i in range(2_000):
        src, dst = rng.choice((1, 5)), rng.choice((2, 3, 4))
        t.send(src, dst, _fetch(i), on_answer(i))
        if i % 100 == 50:
            node = rng.choice((2, 3, 4))
            t.unregister(node)
            held[:] = [(n, r) for n, r in held if n != node]  # its connections are gone
            sched.advance(5)
            t.register(node, handler_of(node))
        if held and rng.random() < 0.5:
            held.pop(rng.randrange(len(held)))[1](UpdateMetadataResponse(-1))

    def all_answered():  # requests still arriving are held too: answer them as they come
        while held:
            held.pop()[1](UpdateMetadataResponse(-1))
        return len(answers) == 2_000

    assert sched.run_until(all_answered, 20_000), 2_000 - len(answers)
    assert all(len(a) == 1 for a in answers.values())
    kinds = {type(a[0]) for a in answers.values()}
    assert kinds <= {UpdateMetadataResponse, type(DISCONNECTED)} and UpdateMetadataResponse in kinds


# ---- races the scheduler's thread sees (2026-11-26 mutation review) ---------------------------
def _when_posted(sched, name):
    """An Event set once the transport hands a call of its method ``name`` to the scheduler,
    which the test has not run yet: what is on its way, caught before it arrives."""
    import threading

    posted = threading.Event()
    post = sched.call_soon_threadsafe

    def spy(fn, *args):
        post(fn, *args)
        if getattr(fn, "__name__", None) == name:
            posted.set()

    sched.call_soon_threadsafe = spy
    return posted


def test_a_request_for_an_earlier_incarnation_never_reaches_the_next_one(net):
    """A request read from the socket of node 2's first incarnation, waiting for the
    scheduler's thread when node 2 restarts, is not handed to the restarted node."""
    sched, t = net
    first, second, answers = [], [], []
    t.register(2, _echo(first))
    dispatched = _when_posted(sched, "_dispatch")
    t.send(1, 2, _fetch(1), answers.append)
    assert dispatched.wait(5)
    t.unregister(2)
    t.register(2, _echo(second))
    assert sched.run_until(lambda: answers, 5_000) and answers == [DISCONNECTED]
    assert first == second == []


@pytest.mark.parametrize("hung", [False, True], ids=["at-once", "over-a-hung-loop"])
def test_an_answer_on_its_way_to_a_node_that_goes_away_is_lost(net, monkeypatch, hung):
    """The answer was read from the socket and waits for the scheduler's thread when its
    addressee goes away: it is dropped, as one still on the wire is. So too when the
    unregister raised TimeoutError over a hung loop: the node is gone all the same (its
    handler is)."""
    sched, t = net
    t.register(1, _echo([]))
    held, answers = _held_request(sched, t)
    answered = _when_posted(sched, "_answer")
    held[0](UpdateMetadataResponse(0))
    assert answered.wait(5)
    if hung:
        with _hung_loop(t, monkeypatch), pytest.raises(TimeoutError):
            t.unregister(1)
    else:
        t.unregister(1)
    sched.advance(0)  # runs what was handed over
    assert answers == []


def test_a_restarted_sender_gets_nothing_its_earlier_incarnation_was_waiting_for(net):
    """Node 1 restarts while node 2 holds its request: the restarted node is not told
    DISCONNECTED for a request it never sent."""
    import asyncio

    sched, t = net
    t.register(1, _echo([]))
    held, answers = _held_request(sched, t)
    link = t._links[(1, 2)].task
    t.unregister(1)
    t.register(1, _echo([]))
    asyncio.run_coroutine_threadsafe(asyncio.wait([link]), t._loop).result(5)  # the old link has ended
    sched.advance(0)  # and what it handed the scheduler has run
    assert answers == []


def _two_processes(sched):
    """A server transport and a client transport that finds the server's nodes by ``resolve``,
    as broker processes do; the client's lookups are recorded."""
    server = TcpTransport(sched)
    lookups = []
    client = TcpTransport(sched, resolve=lambda node: lookups.append(node) or server.address(node))
    return server, client, lookups


def test_a_node_of_another_process_going_away_disconnects_what_it_had_not_answered():
    """Closing the server's side of each connection is what tells a client in another
    process: the listening socket closing alone leaves accepted connections open. The
    client's cache of looked-up addresses is the scheduler's state, as the lookups are:
    the connection's end, seen on the socket thread, hands the forgetting to the
    scheduler with the refusal, not done there and then from the socket thread (under a
    ``send`` reading and filling the cache on the scheduler's thread)."""
    sched = RealScheduler()
    server, client, lookups = _two_processes(sched)
    with server, client:
        held, answers = [], []
        server.register(2, lambda src, request, respond: held.append(respond))
        client.send(1, 2, _fetch(), answers.append)
        assert sched.run_until(lambda: held, 5_000) and client._resolved == {2: server.address(2)}
        link = client._links[(1, 2)]
        server.unregister(2)
        assert _eventually(lambda: link.task.done())  # the socket thread has seen the end
        assert 2 in client._resolved and answers == []  # both handed over; the scheduler has not run
        assert sched.run_until(lambda: answers, 5_000) and answers == [DISCONNECTED]
        assert client._resolved == {} and lookups == [2]


def test_a_peers_address_is_kept_until_its_connection_ends_then_looked_up_again():
    """One lookup per connection, not per request (a broker's lookup is a ZooKeeper read);
    after the peer restarts on a new port it is looked up again and reached there."""
    sched = RealScheduler()
    server, client, lookups = _two_processes(sched)
    with server, client:
        held = []

        def handler(src, request, respond):
            if request.partitions[0].fetch_offset == 0:
                held.append(respond)
            else:
                respond(UpdateMetadataResponse(request.partitions[0].fetch_offset))

        server.register(2, handler)
        answers = []
        for i in (1, 2, 0):
            client.send(1, 2, _fetch(i), answers.append)
        assert sched.run_until(lambda: len(answers) == 2 and held, 5_000)
        assert answers == [UpdateMetadataResponse(1), UpdateMetadataResponse(2)] and lookups == [2]
        server.unregister(2)
        assert sched.run_until(lambda: len(answers) == 3, 5_000) and answers[2] is DISCONNECTED
        server.register(2, handler)
        client.send(1, 2, _fetch(3), answers.append)
        assert sched.run_until(lambda: len(answers) == 4, 5_000)
        assert answers[3] == UpdateMetadataResponse(3) and lookups == [2, 2]


def test_closing_with_connections_open_leaves_no_task_behind(caplog):
    """close() ends the connections' own tasks before the loop closes: none is destroyed
    pending (asyncio's "Task was destroyed but it is pending!")."""
    import gc
    import logging

    sched = RealScheduler()
    t = TcpTransport(sched)
    held, answers = _held_request(sched, t)
    loop = t._loop
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        t.close()
        # Whether or not the collector gets to a leftover task, none may be left unfinished.
        assert loop.is_closed() and [task for task in asyncio.all_tasks(loop) if not task.done()] == []
        del t, held
        gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


# ---- framing, correlation and connection lifetimes (2026-11-26, second mutation review) --------
def test_a_large_answer_crosses_whole_not_as_the_first_chunk_read(net):
    """A frame is read whole however the stream splits it: a fetch answer as large as a
    FetchRequest asks for by default (max_bytes 10 MiB, replica.fetch.response.max.bytes'
    default) arrives in many TCP reads, and every byte of it is in the one answer
    delivered; its frame, the records with their headers, is within MAX_FRAME_BYTES."""
    sched, t = net
    size = FetchRequest(0, ()).max_bytes
    records = (bytes(range(256)) * (size // 256 + 1))[:size]  # no two neighbouring chunks alike
    t.register(2, lambda src, request, respond: respond(FetchResponse(0, (_data(records),))))
    answers = []
    t.send(1, 2, _fetch(), answers.append)
    assert sched.run_until(lambda: answers, 10_000)
    assert len(answers) == 1 and answers[0].partitions[0].records == records


def test_a_long_poll_keeps_its_correlation_id_while_hundreds_pass_it(net):
    """Correlation ids are not reused while a request awaits its answer: a long-poll held
    while 600 later requests on its link are answered still gets its own answer."""
    sched, t = net

    held = []

    def handler(src, request, respond):
        offset = request.partitions[0].fetch_offset
        if offset == 0:
            held.append(respond)
        else:
            respond(UpdateMetadataResponse(offset))

    t.register(2, handler)
    answers = {}
    for i in range(601):
        t.send(1, 2, _fetch(i), lambda r, i=i: answers.setdefault(i, []).append(r))
    assert sched.run_until(lambda: held and len(answers) == 600, 10_000)
    assert all(answers[i] == [UpdateMetadataResponse(i)] for i in range(1, 601))
    held[0](UpdateMetadataResponse(-7))
    assert sched.run_until(lambda: 0 in answers, 5_000), "the long-poll's answer went astray"
    assert answers[0] == [UpdateMetadataResponse(-7)]


def test_a_connection_that_ends_is_no_longer_held_by_its_node(net):
    """The server forgets an accepted connection once it ends: a node that clients keep
    reconnecting to does not accumulate closed sockets."""
    sched, t = net
    got = []
    port = t.register(2, _echo(got))
    for i in range(5):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(codec.hello(5) + codec.frame(codec.REQUEST, 1, codec.encode(_fetch(i))))
            assert sched.run_until(lambda: len(got) == i + 1, 5_000)  # the server holds it now
            s.settimeout(5)
            assert s.recv(4)  # and has answered on it
    deadline = time.monotonic() + 5
    while t._accepted[2] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert t._accepted[2] == set()


def test_a_hung_loop_times_the_caller_out(monkeypatch):
    """register (like unregister and close) waits for the socket thread at most
    LOOP_CALL_TIMEOUT_S: a hung loop is an error for the caller, not a hang. The listen it
    gave up on runs once the loop wakes and closes its port at once: the caller was told
    the node is not registered, so nothing may be reachable there."""
    import asyncio
    import socket
    import threading

    from kreplica.net import tcp_transport

    port = _free_port()
    t = TcpTransport(RealScheduler(), listen_ports={2: port})
    release = threading.Event()
    try:
        with monkeypatch.context() as m:
            m.setattr(tcp_transport, "LOOP_CALL_TIMEOUT_S", 0.2)
            t._loop.call_soon_threadsafe(release.wait, 3)  # the loop's thread is stuck
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                t.register(2, _echo([]))
            assert time.monotonic() - started < 2
        release.set()
        t._on_loop(asyncio.sleep(0.2))  # the loop has woken and run the listen given up on
        assert t.address(2) is None and not t._servers
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        assert t.register(2, _echo([])) == port  # the node can register again, on its port
    finally:
        release.set()
        t.close()


def test_a_listen_that_ran_before_its_register_gave_up_is_closed(monkeypatch):
    """The other order of the race above: the listen finished just as the caller's wait
    ran out, so the loop learns it was abandoned after the server is up. It is stopped by
    the loop on its own: the abandon is handed to the socket thread, which owns the servers
    and is woken by the handing. Run on the caller's thread instead, it read the loop's
    state from outside (a listen finishing meanwhile was missed, its port left open for
    good), and the stop it started sat in the loop's queue, the port open, until something
    else woke the loop."""
    port = _free_port()
    t = TcpTransport(RealScheduler(), listen_ports={4: port})
    try:
        on_loop = t._on_loop

        def listened_as_the_wait_ran_out(coro):
            on_loop(coro)
            raise TimeoutError

        with monkeypatch.context() as m:
            m.setattr(t, "_on_loop", listened_as_the_wait_ran_out)
            with pytest.raises(TimeoutError):
                t.register(4, _echo([]))
        assert _eventually(lambda: not t._servers, 2.0)  # nothing here calls into the loop
        assert t.address(4) is None and 4 not in t._addresses
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        t.close()


def test_late_answers_of_a_node_that_went_away_are_not_written_to_its_closed_sockets(net, caplog):
    """A handler that answers after its node went away (a crashed process's late answers)
    writes nothing: the connection is closed, and asyncio would warn of each write past
    the fifth ("socket.send() raised exception.")."""
    import logging

    sched, t = net
    held, answers = [], []
    t.register(2, lambda src, request, respond: held.append(respond))
    for i in range(8):
        t.send(1, 2, _fetch(i), answers.append)
    assert sched.run_until(lambda: len(held) == 8, 5_000)
    t.unregister(2)
    assert sched.run_until(lambda: len(answers) == 8, 5_000) and set(answers) == {DISCONNECTED}
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        for respond in held:
            respond(UpdateMetadataResponse(0))
        t._on_loop(asyncio.sleep(0.05))  # the writes handed to the loop have run
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_a_frame_shorter_than_its_header_is_a_broken_stream(net, caplog):
    """A length under the 5 header bytes it counts is garbage: the connection closes
    quietly (a WireError), not with an exception escaping the server's connection task."""
    import logging

    sched, t = net
    port = t.register(2, _echo([]))
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(codec.hello(5) + codec.FRAME_HEADER.pack(2, codec.REQUEST, 1))
            s.settimeout(5)
            assert s.recv(10) == b""
        t._on_loop(asyncio.sleep(0.05))  # the connection's task has finished
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def _free_port():
    """A loopback port nothing listens on (free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_node_listens_on_the_port_it_was_given_and_again_after_a_restart():
    """listen_ports (a broker's --port) is where the node listens, at each start, not a
    free port of the system's choosing."""
    wanted = _free_port()
    sched = RealScheduler()
    with TcpTransport(sched, listen_ports={2: wanted}) as t:
        assert t.register(2, _echo([])) == wanted and t.address(2) == ("127.0.0.1", wanted)
        t.unregister(2)
        assert t.register(2, _echo([])) == wanted
        answers = []
        t.send(1, 2, _fetch(5), answers.append)
        assert sched.run_until(lambda: answers, 5_000)
        assert answers[0].partitions[0].records == b"answer-5"


def test_a_restarted_senders_link_outlives_the_end_of_its_earlier_incarnations_connection():
    """Node 1's connection to a peer in another process cannot close while a large request
    is still unwritten (the peer is not reading).  Node 1 restarts and talks to the peer on
    a new connection; when the old one finally ends, the new link stays node 1's link: its
    next request goes on the same connection, not a third."""
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def accept():
        for _ in range(3):
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    sched = RealScheduler()
    t = TcpTransport(sched, resolve=lambda node: listener.getsockname())
    try:
        t.register(1, _echo([]))
        t.send(1, 9, ProduceRequest(1, 100, (ProducePartition(TP, b"x" * (32 << 20)),)), None)
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.01)
        t.unregister(1)  # its writer closes, but waits for 32 MB the peer never reads
        t.register(1, _echo([]))
        t.send(1, 9, _fetch(1), None)
        while len(accepted) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(accepted) == 2
        accepted[0].close()  # now the old connection ends
        t._on_loop(asyncio.sleep(0.2))
        t.send(1, 9, _fetch(2), None)
        t._on_loop(asyncio.sleep(0.2))
        assert len(accepted) == 2, "the restarted node's link was forgotten: a third connection"
    finally:
        t.close()
        listener.close()
        for s in accepted:
            s.close()


# ---- finding broker processes (kreplica.net.remote) ---------------------------------------------
def test_a_peer_is_not_found_while_unregistered_portless_or_the_store_is_out_of_reach():
    """Each is a refused connection to the sender, never an exception on the scheduler's thread
    (a port past 65535, written by another client, made the link's task log an OverflowError)."""
    from kreplica.meta.layout import BrokerInfo
    from kreplica.meta.store import ConnectionLoss, SessionExpired
    from kreplica.net.remote import registered_address

    class Zk:
        def __init__(self, found):
            self.found = found

        def get_broker(self, broker_id):
            if isinstance(self.found, Exception):
                raise self.found
            return self.found

    info = BrokerInfo(3, "127.0.0.1", 9093, ("PLAINTEXT://127.0.0.1:9093",), 0)
    assert registered_address(Zk(info), 3) == ("127.0.0.1", 9093)
    assert registered_address(Zk(None), 3) is None
    for port in (-1, 0, 65536, 2**31 - 1):
        assert registered_address(Zk(dataclasses.replace(info, port=port)), 3) is None, port
    assert registered_address(Zk(dataclasses.replace(info, port=65535)), 3) == ("127.0.0.1", 65535)
    assert registered_address(Zk(ConnectionLoss("cannot reach ZooKeeper")), 3) is None
    assert registered_address(Zk(SessionExpired("the broker's session expired")), 3) is None  # not renewed yet


def test_a_peer_is_found_at_the_host_it_registered():
    """Not at loopback: a peer registered on another host is reached there."""
    from kreplica.meta.layout import BrokerInfo
    from kreplica.net.remote import registered_address

    class Zk:
        def get_broker(self, broker_id):
            return BrokerInfo(3, "10.1.2.3", 9093, ("PLAINTEXT://10.1.2.3:9093",), 0)

    assert registered_address(Zk(), 3) == ("10.1.2.3", 9093)


@pytest.mark.parametrize("failure", [ConnectionLoss("cannot reach ZooKeeper"), KeyboardInterrupt()],
                         ids=["store", "ctrl-c"])
def test_a_client_that_fails_to_connect_leaves_no_socket_thread_behind(monkeypatch, failure):
    """Nor when the failure is Ctrl-C while it waits for a controller."""
    import threading

    from kreplica.net import remote

    def unreachable(*args, **kwargs):
        raise failure

    monkeypatch.setattr(remote, "Cluster", unreachable)
    before = {th for th in threading.enumerate() if th.name == "kreplica-tcp"}
    with pytest.raises(type(failure)):
        remote.connect("zookeeper://127.0.0.1:1/nowhere")
    assert {th for th in threading.enumerate() if th.name == "kreplica-tcp"} <= before


def test_a_restarted_node_gets_the_answers_to_its_new_requests(net):
    """A node that went away and registered again is up: what it sends now is answered
    (the in-process cluster tests cannot see this: a follower back at the leader's log end
    rejoins the ISR on its first fetch, answered or not)."""
    sched, t = net
    t.register(2, _echo([]))
    t.register(1, _echo([]))
    t.unregister(1)
    t.register(1, _echo([]))
    answers = []
    t.send(1, 2, _fetch(4), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    assert answers[0].partitions[0].records == b"answer-4"


# ---- `kreplica broker` in this process (kreplica.net.broker_process, 2026-11-26, second mutation review)
def _store_closes(monkeypatch):
    """A list that gets True each time a store opened from now on is closed."""
    from kreplica.meta import uri

    closed = []
    real_open = uri.open_store

    def open_store(*args, **kwargs):
        store = real_open(*args, **kwargs)
        close = store.close
        store.close = lambda: (closed.append(True), close())[-1]
        return store

    monkeypatch.setattr(uri, "open_store", open_store)
    return closed


def _run_in_process(tmp_path, monkeypatch, config=(), after_start=None, signal_after_start=True, **run_args):
    """broker_process.run on a memory store in this process, quiet and SIGTERMed once it runs
    unless told otherwise: (exit status, store closes seen).  A SIGTERM that reaches no handler of
    the broker's fails the test rather than ending pytest."""
    from kreplica.broker import Broker
    from kreplica.config import validate
    from kreplica.net import broker_process

    closed = _store_closes(monkeypatch)
    if after_start is not None:
        real_start = Broker.start
        monkeypatch.setattr(Broker, "start", lambda self: (real_start(self), after_start(self))[0])
    if signal_after_start:
        real_noting = broker_process._noting_signals

        @contextlib.contextmanager
        def noting_then_signalled(signalled):
            with real_noting(signalled):
                os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` would, once the broker runs
                yield

        monkeypatch.setattr(broker_process, "_noting_signals", noting_then_signalled)

    def not_the_broker(signum, frame):
        raise AssertionError("SIGTERM reached the test, not the broker's own handler")

    previous = signal.signal(signal.SIGTERM, not_the_broker)
    try:
        status = broker_process.run(1, "memory", tmp_path, validate(dict(config)), **{"quiet": True, **run_args})
        assert signal.getsignal(signal.SIGTERM) is not_the_broker  # given back when run returns
    finally:
        signal.signal(signal.SIGTERM, previous)
    return status, closed


def test_sigterm_runs_the_controlled_shutdown_then_ends_the_session_and_gives_back_the_handlers(
        tmp_path, monkeypatch, capsys):
    status, closed = _run_in_process(tmp_path, monkeypatch)
    assert "controlled shutdown" in capsys.readouterr().err
    assert status in (0, 1) and closed == [True]  # the session ends now, not at its timeout


def test_a_broker_that_dies_mid_shutdown_is_not_waited_for(tmp_path, monkeypatch, capsys):
    """The controlled shutdown waits for the controller's answer or the broker's end,
    whichever comes first, never the whole retry bound once the broker is gone."""
    from kreplica.broker import Broker

    def die_when_asked(self, done):
        self.kill()

    monkeypatch.setattr(Broker, "controlled_shutdown", die_when_asked)
    started = time.monotonic()
    status, closed = _run_in_process(tmp_path, monkeypatch, {"controlled.shutdown.max.retries": 0,
                                                             "controller.socket.timeout.ms": 8000})
    assert status == 1 and "leaderships left behind" in capsys.readouterr().err
    assert time.monotonic() - started < 4


def test_a_broker_that_stops_on_its_own_ends_the_process(tmp_path, monkeypatch, capsys):
    """run returns 1 once the broker is no longer alive (a storage failure, say), without
    waiting for a signal; the SIGTERM 3 s later is only there to end a run that waits."""
    def stop_soon(broker):
        broker.scheduler.call_later(300, broker.kill)
        broker.scheduler.call_later(3_000, os.kill, os.getpid(), signal.SIGTERM)

    status, closed = _run_in_process(
        tmp_path, monkeypatch, after_start=stop_soon, signal_after_start=False)
    assert status == 1 and "broker 1 stopped" in capsys.readouterr().err and closed == [True]


# ---- framing at the edges, peers that break the protocol (2026-11-27, third mutation review) ----
def _recv_until_closed(s):
    """Read ``s`` until its peer closes it; socket.timeout if the peer keeps it open."""
    while s.recv(65536):
        pass


def test_a_frame_of_exactly_the_largest_size_is_read(net, monkeypatch):
    """MAX_FRAME_BYTES is the largest frame allowed, not the first refused (it is read at
    each frame, so a small bound stands in for 256 MiB)."""
    sched, t = net
    got = []
    body = codec.encode(_fetch(4))
    monkeypatch.setattr(codec, "MAX_FRAME_BYTES", len(body) + 5)
    port = t.register(2, _echo(got))
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(5)
        s.sendall(codec.hello(5) + codec.frame(codec.REQUEST, 9, body))
        assert sched.run_until(lambda: got, 5_000) and got == [(5, _fetch(4))]
        header = b""
        while len(header) < codec.FRAME_HEADER.size:
            header += s.recv(codec.FRAME_HEADER.size - len(header))
        _, kind, correlation_id = codec.FRAME_HEADER.unpack(header)
        assert (kind, correlation_id) == (codec.RESPONSE, 9)


@pytest.mark.parametrize("opening", [
    codec.frame(codec.REQUEST, 1, codec.HELLO_BODY.pack(5, codec.WIRE_VERSION)),  # a HELLO's body, not a HELLO
    codec.hello(5) + codec.frame(codec.RESPONSE, 1, codec.encode(_fetch(3))),  # a client sending an answer
], ids=["no-hello", "response-from-a-client"])
def test_a_client_must_open_with_a_hello_then_send_only_requests(net, opening):
    """Anything else is a broken peer: the server hangs up and handles none of it, not
    even a well-formed request after it."""
    sched, t = net
    got = []
    port = t.register(2, _echo(got))
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(5)
        s.sendall(opening + codec.frame(codec.REQUEST, 2, codec.encode(_fetch(4))))
        _recv_until_closed(s)  # hung up on, nothing answered
    sched.advance(0)
    assert got == []


def _stray_answer_then_the_real_one(correlation_id):
    """An answer under an id the link never used, which is dropped; then the real one."""
    return (codec.frame(codec.RESPONSE, correlation_id + 1000, codec.encode(UpdateMetadataResponse(1)))
            + codec.frame(codec.RESPONSE, correlation_id, codec.encode(UpdateMetadataResponse(2))))


def _a_request_from_the_server(correlation_id):
    """A server that sends a REQUEST frame is broken: the link ends, its request DISCONNECTED."""
    return codec.frame(codec.REQUEST, correlation_id, codec.encode(UpdateMetadataResponse(2)))


def _an_answer_that_does_not_decode(correlation_id):
    """An answer whose body is no message (a peer of another build, a broken stream): the
    link ends and its request is refused, not left waiting for an answer that will not
    come while the connection stays up."""
    return codec.frame(codec.RESPONSE, correlation_id, codec.encode(UpdateMetadataResponse(2))[:-1])


@pytest.mark.parametrize("reply, answer", [
    (_stray_answer_then_the_real_one, UpdateMetadataResponse(2)),
    (_a_request_from_the_server, DISCONNECTED),
    (_an_answer_that_does_not_decode, DISCONNECTED),
], ids=["unknown-correlation-id", "request-from-a-server", "answer-that-does-not-decode"])
def test_a_peer_of_another_process_is_answered_by_frame_kind_and_correlation_id(reply, answer):
    """A plain socket stands in for a broker process; a link it breaks is closed at the
    client's end as the link ends, not later by the collector ("unclosed <StreamWriter>")."""
    import warnings

    sched = RealScheduler()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    t = TcpTransport(sched, resolve=lambda node: listener.getsockname()[:2])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answers = []
            t.send(1, 2, _fetch(), answers.append)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                head = len(codec.hello(1)) + codec.FRAME_HEADER.size
                data = b""
                while len(data) < head:
                    data += conn.recv(65536)
                _, kind, correlation_id = codec.FRAME_HEADER.unpack_from(data, len(codec.hello(1)))
                assert kind == codec.REQUEST
                conn.sendall(reply(correlation_id))
                assert sched.run_until(lambda: answers, 5_000)
                assert answers == [answer]
                if answer is DISCONNECTED:
                    _recv_until_closed(conn)
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    finally:
        t.close()
        listener.close()


def test_a_connect_that_fails_with_an_os_error_is_a_refusal_not_a_task_exception(monkeypatch, caplog):
    """Not every failed connect is a ConnectionError: an unreachable network is a plain
    OSError.  The sender sees DISCONNECTED, and nothing escapes the link's task (asyncio's
    "Task exception was never retrieved")."""
    import errno
    import gc
    import logging

    async def unreachable(host, port):
        raise OSError(errno.ENETUNREACH, "Network is unreachable")

    monkeypatch.setattr(asyncio, "open_connection", unreachable)
    sched = RealScheduler()
    t = TcpTransport(sched, resolve=lambda node: ("192.0.2.1", 9092))
    answers = []
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        try:
            t.send(1, 2, _fetch(), answers.append)
            assert sched.run_until(lambda: answers, 5_000) and answers == [DISCONNECTED]
        finally:
            t.close()
        gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_a_closed_transport_lets_nodes_go_but_takes_no_new_ones(net):
    """A broker stopped after its cluster's transport closed is simply gone; registering
    one is refused as a closed transport, not a RuntimeError from the closed loop."""
    from kreplica import errors

    sched, t = net
    t.register(2, _echo([]))
    t.close()
    t.unregister(2)
    assert t.address(2) is None
    with pytest.raises(errors.InvalidRequest, match="closed"):
        t.register(3, _echo([]))


def test_a_client_needs_a_shared_store_and_finds_the_brokers_at_their_registrations(monkeypatch):
    """connect refuses a store other processes cannot share, and its transport looks each
    broker up in the cluster's own registrations (a stand-in Cluster, no ZooKeeper)."""
    from kreplica import errors
    from kreplica.meta.layout import BrokerInfo
    from kreplica.net import remote

    class Zk:
        base = 9000

        def get_broker(self, broker_id):
            port = self.base + broker_id
            return BrokerInfo(broker_id, "127.0.0.1", port, (f"PLAINTEXT://127.0.0.1:{port}",), 0)

    made = []

    class Cluster:
        def __init__(self, brokers, directory, metadata, seed, config, transport, remote):
            self.transport, self.zk = transport, Zk()
            self.given = (brokers, metadata, seed, config, remote)
            made.append(self)

    monkeypatch.setattr(remote, "Cluster", Cluster)
    threads = {th for th in threading.enumerate() if th.name == "kreplica-tcp"}
    try:
        for private in ("memory", "zookeeper+local:///k"):  # the latter's server is this process's own
            said = re.escape(f"metadata={private!r}: broker processes share")
            with pytest.raises(errors.InvalidConfig, match=said) as e:
                remote.connect(private)  # the argument named, as the config's checks name theirs
            # The refusal is the whole story: no ValueError of the check's own chained to it.
            assert e.value.__cause__ is None and e.value.__suppress_context__
        assert made == []
        assert {th for th in threading.enumerate() if th.name == "kreplica-tcp"} <= threads  # refused first
        shared = "zookeeper://127.0.0.1:1/k"
        assert remote.require_shared_store(shared) == shared  # what the caller passes on is what it gave
        cluster = remote.connect("zookeeper://127.0.0.1:1/k", {"acks": "all"}, seed=5)
        assert cluster.transport.resolve(3) == ("127.0.0.1", 9003)
        assert cluster.given == ((), "zookeeper://127.0.0.1:1/k", 5, {"acks": "all"}, True)
        renewed = Zk()  # the client's session expired and the cluster opened another
        renewed.base = 9100
        cluster.zk = renewed
        assert cluster.transport.resolve(3) == ("127.0.0.1", 9103)  # looked up on the session it has now
        # The transport connect made is the client's own, open once connect returns: a
        # request to a broker listening where its registration says is answered.
        sched = cluster.transport.scheduler = RealScheduler()
        with TcpTransport(sched) as brokers:
            renewed.base = brokers.register(3, _echo([])) - 3
            answers = []
            cluster.transport.send(-1, 3, _fetch(), answers.append)
            assert sched.run_until(lambda: answers, 5_000) and answers[0] is not DISCONNECTED, answers
    finally:
        for cluster in made:
            cluster.transport.close()


# ---- `kreplica broker`'s arguments and exit statuses ----------------------------------------
def _broker_argv(tmp_path, *extra, broker_id=1):
    return ["broker", "--id", str(broker_id), "--zookeeper", "127.0.0.1:1", "--data-dir", str(tmp_path), *extra]


def _broker_command(tmp_path, monkeypatch, *extra, broker_id=1, fails_with=None, argv=None):
    """`kreplica broker ...` (or ``argv`` as given) with broker_process.run replaced: (exit
    status, run's calls as (args, kwargs)); the stand-in raises ``fails_with`` when given,
    else returns 0."""
    from kreplica import cli
    from kreplica.net import broker_process

    calls = []

    def run(*args, **kwargs):
        calls.append((args, kwargs))
        if fails_with is not None:
            raise fails_with
        return 0

    monkeypatch.setattr(broker_process, "run", run)
    return cli.main(argv if argv is not None else _broker_argv(tmp_path, *extra, broker_id=broker_id)), calls


def test_the_broker_command_exits_2_for_bad_arguments_and_1_when_it_cannot_run(tmp_path, monkeypatch, capsys):
    """2 for what the user typed (a config Kafka does not have, an advertised port 0),
    1 for a broker that could not run (its --port taken): a message, not a traceback."""
    from kreplica import cli

    assert cli.main(_broker_argv(tmp_path, "--config", "no.such.key=1")) == 2
    assert "Error: --config" in capsys.readouterr().err
    # Required, as zookeeper.connect: no cluster, directory or broker id assumed (a broker
    # started without --id is not silently broker 0, taking over broker 0's partitions).
    for missing in ("--zookeeper", "--data-dir", "--id"):
        argv = _broker_argv(tmp_path)
        del argv[argv.index(missing):argv.index(missing) + 2]
        with pytest.raises(SystemExit) as e:
            _broker_command(tmp_path, monkeypatch, argv=argv)
        assert e.value.code == 2 and missing in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(_broker_argv(tmp_path, "--advertised-port", "0"))
    assert e.value.code == 2 and "--advertised-port" in capsys.readouterr().err
    for connect in ("127.0.0.1", "127.0.0.1:zk/kreplica"):  # not HOST:PORT: the run is never tried
        with pytest.raises(SystemExit) as e:
            _broker_command(tmp_path, monkeypatch, "--zookeeper", connect)
        assert e.value.code == 2 and "--zookeeper" in capsys.readouterr().err
    status, _ = _broker_command(tmp_path, monkeypatch, "--port", "9092",
                                fails_with=OSError(98, "Address already in use"))
    assert status == 1 and "Error: broker 1: [Errno 98] Address already in use" in capsys.readouterr().err


def test_the_broker_registers_the_port_it_listens_on_unless_told_to_advertise_another(tmp_path, monkeypatch, capsys):
    """Without --advertised-port the registration carries the listening port; with it, that port."""
    ports = []
    _run_in_process(tmp_path, monkeypatch, after_start=lambda broker: ports.append(broker.port))
    out = capsys.readouterr().out
    import re

    listening = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", out).group(1))
    assert ports[-1] == listening and "registered as" not in out
    _run_in_process(tmp_path, monkeypatch, after_start=lambda broker: ports.append(
        (broker.port, broker.transport.address(1)[1])), advertised_port=19093)
    out = capsys.readouterr().out
    registered, listening = ports[-1]
    assert registered == 19093 and listening != 19093
    assert f"listening on 127.0.0.1:{listening}, registered as port 19093" in out, out


@pytest.mark.parametrize("failure", [RuntimeError("a failure once started"), KeyboardInterrupt()],
                         ids=["error", "ctrl-c-before-the-handlers"])
def test_a_broker_whose_run_fails_goes_as_a_crashed_process_does(tmp_path, monkeypatch, capsys, failure):
    """An exception out of the run kills the broker (it writes nothing more) before the
    transport and the session close under it; so does Ctrl-C before the run notes
    signals (a KeyboardInterrupt while the broker starts)."""
    started = []

    def fail(broker):
        started.append(broker)
        raise failure

    with pytest.raises(type(failure)):
        _run_in_process(tmp_path, monkeypatch, after_start=fail, signal_after_start=False, quiet=False)
    assert len(started) == 1 and not started[0].alive
    out = capsys.readouterr().out
    assert " broker 1 broker_killed" in out and "broker_stopped" not in out, out  # not a clean stop


def test_a_run_that_fails_while_it_waits_for_signals_gives_the_handlers_back(tmp_path, monkeypatch):
    """A failure in the main loop (a callback on the scheduler's thread raising) still
    gives SIGINT and SIGTERM back to whatever handled them before: Ctrl-C in the program
    that called run is not left noted in a list that nobody reads any more."""
    def fail(broker):
        def raise_in_the_loop():
            raise RuntimeError("a failure in the loop")
        broker.scheduler.call_later(50, raise_in_the_loop)

    before = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(RuntimeError, match="in the loop"):
            _run_in_process(tmp_path, monkeypatch, after_start=fail, signal_after_start=False)
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, before)


# ---- resets, wrapped ids, lookups, a hung close and the broker command (2026-11-27, fourth mutation review)
def _eventually(condition, timeout_s=5.0):
    """Poll ``condition`` (state of the socket thread) until it holds or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_a_client_that_resets_its_connection_is_dropped_quietly(net, caplog):
    """A peer that dies mid-connection resets it (RST, not FIN): the server's read fails with
    ConnectionResetError, which ends that connection like any broken peer, logging nothing,
    and the node goes on serving."""
    import logging

    sched, t = net
    got, answers = [], []
    port = t.register(2, _echo(got))
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(codec.hello(5) + codec.frame(codec.REQUEST, 1, codec.encode(_fetch(1))))
        assert sched.run_until(lambda: got, 5_000)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # linger 0: the kernel resets the connection
        assert _eventually(lambda: not t._accepted[2]), "the server still holds the reset connection"
        t._on_loop(asyncio.sleep(0.05))  # what the ended connection task hands asyncio has run
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
    t.send(1, 2, _fetch(2), answers.append)
    assert sched.run_until(lambda: answers, 5_000) and answers[0].partitions[0].records == b"answer-2"


def test_correlation_ids_wrap_at_32_bits_and_answers_still_find_their_requests(net):
    """The frame's correlation id is a u32: a link past 2**32 - 1 requests wraps to 0, rather
    than failing to frame the next request (which would then never be answered)."""
    sched, t = net
    t.register(2, _echo([]))
    answers = []
    t.send(1, 2, _fetch(0), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    t._links[(1, 2)].ids = itertools.count(0xFFFFFFFF)  # as after four billion requests on the link
    for i in (1, 2, 3):
        t.send(1, 2, _fetch(i), answers.append)
    assert sched.run_until(lambda: len(answers) == 4, 5_000), len(answers)
    assert [a.partitions[0].records for a in answers] == [b"answer-%d" % i for i in range(4)]


def test_a_node_not_registered_is_let_go_without_complaint(net):
    """unregister of a node that never registered, or went already (a broker stopped twice,
    killed after a stop), does nothing; the node can still register again after."""
    sched, t = net
    t.unregister(7)
    t.register(2, _echo([]))
    t.unregister(2)
    t.unregister(2)
    assert t.address(2) is None
    t.register(2, _echo([]))
    answers = []
    t.send(1, 2, _fetch(6), answers.append)
    assert sched.run_until(lambda: answers, 5_000) and answers[0].partitions[0].records == b"answer-6"


def test_a_node_registered_here_is_reached_without_a_lookup():
    """``resolve`` (a ZooKeeper read in a broker process) is for nodes of other processes:
    a node that listens in this transport is reached where it listens, never looked up."""
    sched = RealScheduler()
    lookups = []
    with TcpTransport(sched, resolve=lambda node: lookups.append(node)) as t:
        t.register(2, _echo([]))
        answers = []
        t.send(1, 2, _fetch(5), answers.append)
        assert sched.run_until(lambda: answers, 5_000)
        assert answers[0].partitions[0].records == b"answer-5" and lookups == []


def test_close_gives_up_on_a_hung_loop_without_raising(monkeypatch):
    """close runs in cleanup paths (a broker's `finally`, a cluster's close): a socket thread
    that does not answer within LOOP_CALL_TIMEOUT_S is left behind (a daemon thread), not
    a TimeoutError that would skip the rest of the cleanup."""
    import threading

    t = TcpTransport(RealScheduler())
    release = threading.Event()
    try:
        monkeypatch.setattr(tcp_transport, "LOOP_CALL_TIMEOUT_S", 0.2)
        t._loop.call_soon_threadsafe(release.wait, 10)  # the loop's thread is stuck
        started = time.monotonic()
        t.close()
        assert time.monotonic() - started < 5 and t._thread.is_alive()
    finally:
        release.set()
        t._thread.join(10)
    assert not t._thread.is_alive()
    # The loop may have stopped before the shutdown handed to it ran: finish it here (no
    # coroutine left never awaited), then close the loop.  Each task is run as it is: a
    # task wrapping them (asyncio.wait) would be one more task, and the shutdown cancels
    # every task but its own.
    for task in asyncio.all_tasks(t._loop):
        if not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                t._loop.run_until_complete(task)
    t._loop.close()


def test_the_broker_command_hands_run_what_was_typed(tmp_path, monkeypatch):
    """Broker id 0 is a broker id (Kafka's first); --port, --advertised-port, --quiet and
    --config reach the run as given, a key given twice taking its last value (as Kafka's
    repeated --override)."""
    status, calls = _broker_command(tmp_path, monkeypatch, "--port", "9092", "--advertised-port", "19092",
                                    "--config", "min.insync.replicas=3", "--quiet",
                                    "--config", "min.insync.replicas=2", broker_id=0)
    assert status == 0 and len(calls) == 1
    (broker_id, metadata, data_dir, config), kwargs = calls[0]
    assert (broker_id, data_dir) == (0, tmp_path) and metadata.startswith("zookeeper://127.0.0.1:1")
    assert config["min.insync.replicas"] == 2
    assert kwargs == {"quiet": True, "port": 9092, "advertised_port": 19092}
    status, calls = _broker_command(tmp_path, monkeypatch, "--port", "0")  # said outright: any free port
    assert status == 0 and calls[0][1]["port"] == 0
    assert calls[0][1]["advertised_port"] is None  # none given: the port it listens on is registered


@pytest.mark.parametrize("failure, said", [
    (ConnectionLoss("cannot reach it"), "Error: --zookeeper 127.0.0.1:1"),
    (KafkaStorageError("the log directory failed"), "Error: broker 1: KAFKA_STORAGE_ERROR: the log directory failed"),
], ids=["store", "storage"])
def test_the_broker_command_says_which_part_failed_and_exits_1(tmp_path, monkeypatch, capsys, failure, said):
    """A store out of reach names the connect string; any other kreplica error (a storage
    failure) names the broker: a message, not a traceback."""
    status, _ = _broker_command(tmp_path, monkeypatch, fails_with=failure)
    assert status == 1 and said in capsys.readouterr().err


def test_the_broker_listens_on_its_port_and_quietly_prints_only_that(tmp_path, monkeypatch, capsys):
    """--port is where the broker's transport listens; with --quiet the listening line is
    all it prints, also when --advertised-port names that same port (nothing else is
    registered, so no "registered as" follows)."""
    for advertised in (None, "the same"):
        wanted = _free_port()
        _run_in_process(tmp_path, monkeypatch, port=wanted, advertised_port=advertised and wanted)
        assert capsys.readouterr().out.splitlines() == [f"broker 1 listening on 127.0.0.1:{wanted}"], advertised


def test_the_broker_prints_its_state_changes_unless_quiet(tmp_path, monkeypatch, capsys):
    """Without --quiet each state change (its registration, say) is a line of its own."""
    _run_in_process(tmp_path, monkeypatch, quiet=False)
    lines = capsys.readouterr().out.splitlines()
    assert any(" broker 1 " in line and "listening" not in line for line in lines), lines


def test_the_broker_runs_on_its_configured_session_and_looks_peers_up_on_it(tmp_path, monkeypatch):
    """The store's session timeout is zookeeper.session.timeout.ms; peers are looked up on
    the broker's current session, and while it has none (an expiry not yet renewed) none
    is found rather than the lookup failing on the scheduler's thread."""
    seen = []

    def look(broker):
        resolve = broker.transport.resolve
        zk, broker.zk = broker.zk, None
        try:
            seen.append((broker.store.session_timeout_ms, resolve(1), resolve(2)))
        finally:
            broker.zk = zk
        seen.append((resolve(1), broker.port))

    _run_in_process(tmp_path, monkeypatch, {"zookeeper.session.timeout.ms": 7000}, after_start=look)
    (registered, port), = seen[1:]
    assert seen[0] == (7000, None, None) and registered == ("127.0.0.1", port)


@pytest.mark.parametrize("store_close", ["closes", "interrupted"])
def test_the_broker_closes_its_transport_when_it_ends(tmp_path, monkeypatch, store_close):
    """Its sockets and their thread go with the run, not with the interpreter; so too when
    the store's close is cut short (a second Ctrl-C while the session closes): the
    transport, whose close never raises, is closed before the store."""
    import threading

    from kreplica.meta import uri

    def socket_threads():
        return {th for th in threading.enumerate() if th.name == "kreplica-tcp"}

    real_open = uri.open_store

    def open_store(*args, **kwargs):
        store = real_open(*args, **kwargs)
        close = store.close

        def close_then_interrupted():
            close()
            raise KeyboardInterrupt

        if store_close == "interrupted":
            store.close = close_then_interrupted
        return store

    monkeypatch.setattr(uri, "open_store", open_store)
    before = socket_threads()
    with pytest.raises(KeyboardInterrupt) if store_close == "interrupted" else contextlib.nullcontext():
        _run_in_process(tmp_path, monkeypatch)
    assert socket_threads() <= before


def test_a_state_change_is_one_line_stamped_to_the_millisecond(monkeypatch, capsys):
    """Local wall-clock time (as Kafka's log4j stamps its lines) to three zero-padded
    millisecond digits, the broker, the change and its details; no trailing space when it
    has none."""
    from kreplica.net import broker_process

    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: int(real_time()) + 0.0625)  # 62 ms past the second
    monkeypatch.setenv("TZ", "IST-5:30")  # local time, as Kafka's log4j stamps, 5:30 off UTC here
    time.tzset()
    try:
        local = {time.strftime("%H:%M", time.localtime())}
        broker_process._print_event("registered", 3, epoch=5, port=9092)
        broker_process._print_event("session_expired", 3)
        broker_process._print_event("leader_and_isr", 3, tp=TopicPartition("t", 0), leader=3, leader_epoch=2,
                                    isr=(3, 1))
        local.add(time.strftime("%H:%M", time.localtime()))  # a minute may turn meanwhile
    finally:
        monkeypatch.undo()
        time.tzset()
    first, second, third = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.062 broker 3 registered epoch=5 port=9092", first), first
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.062 broker 3 session_expired", second), repr(second)
    # The details in the order the broker gives them, each as Kafka writes it (a partition as t-0).
    assert third.endswith(" broker 3 leader_and_isr tp=t-0 leader=3 leader_epoch=2 isr=(3, 1)"), third
    assert first[:5] in local, (first, local)


@pytest.mark.parametrize("moved, status, said", [
    (True, 0, "every leadership moved"),
    (False, 1, "leaderships left behind"),
])
def test_the_exit_status_is_the_controllers_answer_to_the_controlled_shutdown(
        tmp_path, monkeypatch, capsys, moved, status, said):
    """The answer comes after a while (a controller round trip) and is waited for; only an
    answer that every leadership moved is 0. That the shutdown began is said at once."""
    from kreplica.broker import Broker

    said_when_asked = []

    def answer_later(self, done):
        said_when_asked.append(capsys.readouterr().err)
        self.scheduler.call_later(200, done, moved)

    monkeypatch.setattr(Broker, "controlled_shutdown", answer_later)
    got, _ = _run_in_process(tmp_path, monkeypatch)
    assert got == status and said in capsys.readouterr().err
    # The shutdown is said as it begins, before the controller is asked, not once the
    # wait for it (minutes at most by default) is over.
    assert said_when_asked == ["broker 1: controlled shutdown\n"]


def test_the_controlled_shutdown_is_waited_for_through_its_backoffs(tmp_path, monkeypatch, capsys):
    """Attempts last controller.socket.timeout.ms at most and are
    controlled.shutdown.retry.backoff.ms apart: a shutdown answered at its third attempt
    (no controller for the first two, one being elected) is waited for through both
    backoffs, however short the timeout, and its yes is the exit status."""
    asked = []

    def no_controller_twice(broker):
        real = broker.zk.get_controller_id

        def get_controller_id(*args, **kwargs):
            if broker.shutting_down and not args and not kwargs and len(asked) < 2:
                asked.append(None)
                return None
            return real(*args, **kwargs)

        broker.zk.get_controller_id = get_controller_id

    status, _ = _run_in_process(tmp_path, monkeypatch, {"controller.socket.timeout.ms": 150,
                                                        "controlled.shutdown.retry.backoff.ms": 400},
                                after_start=no_controller_twice)
    assert asked == [None, None]
    assert status == 0 and "every leadership moved" in capsys.readouterr().err


def test_a_signal_during_the_controlled_shutdown_goes_to_the_callers_handler(tmp_path, monkeypatch, capsys):
    """The broker notes SIGTERM and SIGINT only while it runs; its controlled shutdown
    (minutes at most by default) runs with the caller's handlers given back, so a second
    Ctrl-C gives up on it and the broker goes as a crashed process does, rather than the
    signal being noted in a list nobody reads any more."""
    from kreplica.broker import Broker

    def interrupted_meanwhile(self, done):
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, while the controller is asked
        self.scheduler.call_later(200, done, True)

    monkeypatch.setattr(Broker, "controlled_shutdown", interrupted_meanwhile)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            _run_in_process(tmp_path, monkeypatch, quiet=False)
    finally:
        signal.signal(signal.SIGINT, before)
    out = capsys.readouterr().out
    assert " broker 1 broker_killed" in out and "broker_stopped" not in out, out


# ---- after close, answers nobody asked for, late encoding, lookups (2026-11-27, fifth mutation review)
def test_a_send_after_close_is_refused_on_the_schedulers_turn_and_may_want_no_answer():
    """As every answer, the refusal arrives when the scheduler runs it, not inside ``send``
    (a caller holding a lock or mid-update is not re-entered); a send that wants no answer
    (``on_response`` None) is simply dropped."""
    sched = RealScheduler()
    t = TcpTransport(sched)
    t.close()
    answers = []
    t.send(1, 2, _fetch(), answers.append)
    t.send(1, 2, _fetch(), None)
    assert answers == []
    sched.advance(0)
    assert answers == [DISCONNECTED]
    assert t.messages_delivered == 0  # nothing went out on a socket
    with pytest.raises(TypeError, match="not a message"):  # the caller's bug is loud, closed or not
        t.send(1, 2, TP, None)


def test_an_answer_to_a_request_that_wanted_none_is_dropped_and_the_link_goes_on(net):
    """A request sent without ``on_response`` is still answered on the wire; that answer
    goes nowhere, and the answers after it on the same link reach their senders."""
    sched, t = net
    got, answers = [], []
    t.register(2, _echo(got))
    t.send(1, 2, _fetch(1), None)
    t.send(1, 2, _fetch(2), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    assert [r.partitions[0].fetch_offset for _, r in got] == [1, 2]
    assert answers[0].partitions[0].records == b"answer-2"


def test_a_request_is_on_the_wire_as_it_was_when_sent():
    """``send`` encodes at once: records a producer hands over as a view of its own buffer,
    and changes right after (its next batch), arrive as they were, however long the socket
    thread takes to get to them; an object that is not a message is refused by ``send``
    itself, on the caller's thread."""
    import threading

    sched = RealScheduler()
    with TcpTransport(sched) as t:
        got = []
        t.register(2, lambda src, request, respond: (got.append(request), respond(UpdateMetadataResponse(0))))
        buffer = bytearray(b"first batch")
        busy = threading.Event()
        t._loop.call_soon_threadsafe(busy.wait, 5)  # the socket thread is elsewhere for now
        try:
            t.send(1, 2, ProduceRequest(1, 100, (ProducePartition(TP, memoryview(buffer)),)), None)
            buffer[:] = b"next batch!"
            with pytest.raises(TypeError, match="not a message"):
                t.send(1, 2, TP, None)
        finally:
            busy.set()
        assert sched.run_until(lambda: got, 5_000)
        assert got[0].partitions[0].records == b"first batch"


def test_the_end_of_one_peers_connection_forgets_only_that_peers_address():
    """A peer that goes away is looked up again; the others' addresses stay kept (each
    lookup is a ZooKeeper read in a broker process, per request if they were forgotten)."""
    sched = RealScheduler()
    server, client, lookups = _two_processes(sched)
    with server, client:
        for node in (2, 3):
            server.register(node, _echo([]))
        answers = []
        for node in (2, 3):
            client.send(1, node, _fetch(node), answers.append)
        assert sched.run_until(lambda: len(answers) == 2, 5_000)
        server.unregister(2)  # its connection from node 1 ends: node 2's address is forgotten
        assert _eventually(lambda: (1, 2) not in client._links)
        sched.advance(0)  # what the ended link handed the scheduler has run
        client.send(1, 3, _fetch(4), answers.append)
        assert sched.run_until(lambda: len(answers) == 3, 5_000)
        assert answers[2].partitions[0].records == b"answer-4" and lookups == [2, 3]
        client.send(1, 2, _fetch(9), answers.append)
        assert sched.run_until(lambda: len(answers) == 4, 5_000) and answers[3] is DISCONNECTED
        assert lookups == [2, 3, 2]


def test_a_transport_left_open_does_not_keep_its_process_from_exiting():
    """The socket thread is a daemon: a script that forgets to close its client (or ends
    in an exception before it could) still exits."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("from kreplica.net.tcp_transport import TcpTransport\n"
            "from kreplica.runtime import RealScheduler\n"
            "t = TcpTransport(RealScheduler())\n"
            "t.register(2, lambda src, request, respond: None)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the process did not exit: its socket thread kept it alive")
    assert proc.returncode == 0, err


@pytest.mark.parametrize("restarted", [False, True], ids=["gone", "registered-again"])
def test_a_connection_accepted_as_its_node_goes_away_is_closed_at_once(net, restarted):
    """A connection the server accepted just before its node went away, whose serving
    starts after, is hung up on: it would otherwise be read forever, its requests for the
    old incarnation dropped and never answered (its sender waiting for no one). So too
    when the node has registered again by then: the connection is the first incarnation's,
    not one of the new incarnation's. The writer is held, as a server's protocol holds it:
    the hang-up is `_serve`'s own close, not the collector's."""
    sched, t = net
    t.register(2, _echo([]))
    t.unregister(2)
    if restarted:
        t.register(2, _echo([]))  # a new incarnation listens, with a set of connections of its own
    ours, theirs = socket.socketpair()
    held = []

    async def serve_late():
        reader, writer = await asyncio.open_connection(sock=ours)
        held.append(writer)
        await t._serve(2, 1, reader, writer)

    with theirs:
        theirs.settimeout(5)
        theirs.sendall(codec.hello(5) + codec.frame(codec.REQUEST, 1, codec.encode(_fetch())))
        served = asyncio.run_coroutine_threadsafe(serve_late(), t._loop)
        try:
            with contextlib.suppress(ConnectionResetError):  # closed with the request unread
                _recv_until_closed(theirs)
        except socket.timeout:
            raise AssertionError("the late connection was kept open") from None
        finally:
            if held:
                t._loop.call_soon_threadsafe(held[0].close)
    served.result(5)
    assert not t._accepted.get(2)


def test_each_line_the_broker_prints_is_out_at_once_not_left_in_a_buffer(tmp_path, monkeypatch):
    """Run by a supervisor (or test_broker_processes), its stdout is a pipe, which Python
    buffers by blocks: the listening line, which whoever started it waits for, and each
    state change are flushed as printed, not when the buffer fills or the process ends."""
    import io
    import sys

    from kreplica.net import broker_process

    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))  # as on a pipe
    seen = {}
    real_noting = broker_process._noting_signals

    @contextlib.contextmanager
    def noting(signalled):  # the run has printed its listening line and waits for signals
        seen["running"] = raw.getvalue().decode()
        with real_noting(signalled):
            yield

    monkeypatch.setattr(broker_process, "_noting_signals", noting)
    _run_in_process(tmp_path, monkeypatch, quiet=False)
    written = raw.getvalue().decode()
    sys.stdout.flush()
    assert raw.getvalue().decode() == written, "lines were left in the buffer"
    running = seen["running"].splitlines()
    assert running[-1].startswith("broker 1 listening on 127.0.0.1:")
    assert any(" broker 1 " in line for line in running[:-1]), running  # its registration, say


def test_close_refuses_what_a_sender_still_waits_for_wherever_its_peer_listens():
    """A sender that is no node of this transport (a client) is still there when the
    transport closes under it: each request it still waits on is refused, DISCONNECTED,
    as a send after close is, whether its peer listened in this transport or in another
    process (the latter was left waiting for an answer no socket could bring)."""
    sched = RealScheduler()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    t = TcpTransport(sched, resolve=lambda node: listener.getsockname()[:2])
    held, local, remote = [], [], []
    try:
        t.register(2, lambda src, request, respond: held.append(respond))
        t.send(1, 2, _fetch(), local.append)
        t.send(1, 9, _fetch(), remote.append)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            data = b""
            while len(data) < len(codec.hello(1)) + codec.FRAME_HEADER.size:
                data += conn.recv(65536)  # the request to 9 is on the wire, its answer awaited
            assert sched.run_until(lambda: held, 5_000)
            t.close()
            assert sched.run_until(lambda: local and remote, 5_000), (local, remote)
            assert local == remote == [DISCONNECTED]
    finally:
        t.close()
        listener.close()


# ---- incarnations given up on, hosts, silent peers, answers as given (2026-11-27, sixth mutation review)
@contextlib.contextmanager
def _hung_loop(t, monkeypatch):
    """The socket thread stuck (3 s at most) and a caller's wait for it cut to 0.2 s, for
    the block; the loop is freed when the block ends."""
    release = threading.Event()
    try:
        with monkeypatch.context() as m:
            m.setattr(tcp_transport, "LOOP_CALL_TIMEOUT_S", 0.2)
            t._loop.call_soon_threadsafe(release.wait, 3)
            yield
    finally:
        release.set()


def test_a_register_after_one_given_up_on_is_a_new_incarnation_its_leftovers_cannot_close(monkeypatch):
    """A register that timed out over a hung loop used up its incarnation: its listen,
    run once the loop woke, failed (the port was taken) before it could learn it was
    given up on. The next register is a new incarnation, which that leftover cannot
    close: the node really listens where register said."""
    port = _free_port()
    blocker = socket.create_server(("127.0.0.1", port))  # taken while the first register runs
    sched = RealScheduler()
    t = TcpTransport(sched, listen_ports={2: port})
    try:
        with _hung_loop(t, monkeypatch), pytest.raises(TimeoutError):
            t.register(2, _echo([]))
        t._on_loop(asyncio.sleep(0.05))  # the listen given up on has run, and failed
        blocker.close()
        got, answers = [], []
        assert t.register(2, _echo(got)) == port
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        t.send(1, 2, _fetch(3), answers.append)
        assert sched.run_until(lambda: answers, 5_000)
        assert answers[0].partitions[0].records == b"answer-3"
    finally:
        blocker.close()
        t.close()


def test_nodes_listen_and_are_reached_on_the_transports_host():
    """``host`` is where every node listens and where its address says it is; a node of
    the same transport is reached there too (127.0.0.2: loopback, but not 127.0.0.1)."""
    sched = RealScheduler()
    with TcpTransport(sched, host="127.0.0.2") as t:
        port = t.register(2, _echo([]))
        assert t.address(2) == ("127.0.0.2", port)
        answers = []
        t.send(1, 2, _fetch(4), answers.append)
        assert sched.run_until(lambda: answers, 5_000)
        assert answers[0].partitions[0].records == b"answer-4"


def test_a_connection_that_never_says_hello_is_closed_when_its_node_goes_away(net):
    """A peer that connected and said nothing yet (a slow or stuck client) is one of the
    node's connections all the same: when the node goes away it is hung up on, not left
    open waiting for a HELLO that a gone node could never serve."""
    sched, t = net
    t.register(2, _echo([]))
    with socket.create_connection(t.address(2), timeout=2) as silent:
        _eventually(lambda: t._accepted.get(2), 2.0)  # the server holds it (not left in the backlog)
        t.unregister(2)
        try:
            with contextlib.suppress(ConnectionResetError):
                _recv_until_closed(silent)
        except socket.timeout:
            raise AssertionError("the silent connection was kept open") from None


def test_an_answer_is_encoded_as_it_is_given_and_a_bad_one_fails_in_the_handler(net):
    """``respond`` encodes on the handler's thread, as ``send`` does: records the handler
    changes next are not what arrives, and an answer that is no message raises TypeError
    in the handler, not on the socket thread with its requester left waiting."""
    sched, t = net
    release = threading.Event()
    refused, answers = [], []

    def handler(src, request, respond):
        if request.partitions[0].fetch_offset == 1:
            with pytest.raises(TypeError, match="not a message"):
                respond(TP)
            refused.append(True)
            return
        buffer = bytearray(b"as-given")
        t._loop.call_soon_threadsafe(release.wait, 3)  # the loop writes only after the change below
        respond(FetchResponse(0, (_data(memoryview(buffer)),)))
        buffer[:] = b"changed!"
        release.set()

    try:
        t.register(2, handler)
        t.send(1, 2, _fetch(1), None)
        t.send(1, 2, _fetch(2), answers.append)
        assert sched.run_until(lambda: answers, 5_000)
        assert refused == [True] and answers[0].partitions[0].records == b"as-given"
    finally:
        release.set()


def test_a_gone_senders_request_that_never_connected_is_not_answered_after_its_restart(net):
    """Node 1 goes away while its link to node 2 is still connecting, and registers again
    before the scheduler runs: the restarted node is not told DISCONNECTED for the request
    its earlier incarnation sent (as for a link that had connected)."""
    sched, t = net
    t.register(1, _echo([]))
    t.register(2, _echo([]))
    answers = []
    release = threading.Event()
    t._loop.call_soon_threadsafe(release.wait, 3)  # the send and the stop reach the loop together
    t.send(1, 2, _fetch(), answers.append)
    threading.Timer(0.1, release.set).start()
    t.unregister(1)  # the stop runs while the link's task is still connecting
    t.register(1, _echo([]))
    t._on_loop(asyncio.sleep(0.05))  # whatever the stop and the link's end handed over is queued
    sched.advance(0)
    assert answers == []



def test_a_transport_closes_at_the_end_of_a_with_block_and_lets_its_error_through():
    """``with TcpTransport() as t`` closes it however the block ends, and an error in the
    block is the caller's, not swallowed by the close."""
    with pytest.raises(ValueError, match="in the block"):
        with TcpTransport(RealScheduler()) as t:
            raise ValueError("in the block")
    assert t._closed and not t._thread.is_alive()


def test_a_node_with_an_advertised_port_listens_on_a_free_one_and_is_reached_there():
    """``advertised_ports`` is what ``register`` returns, the port a proxy in front of the
    node holds; the node itself listens on a free port (none in ``listen_ports``), and
    nodes of this transport reach it where it listens."""
    proxy = socket.create_server(("127.0.0.1", 0))  # the advertised port is the proxy's
    advertised = proxy.getsockname()[1]
    sched = RealScheduler()
    try:
        with TcpTransport(sched, advertised_ports={2: advertised}) as t:
            assert t.register(2, _echo([])) == advertised
            assert t.address(2)[1] != advertised
            answers = []
            t.send(1, 2, _fetch(6), answers.append)
            assert sched.run_until(lambda: answers, 5_000)
            assert answers[0].partitions[0].records == b"answer-6"
    finally:
        proxy.close()


def test_a_string_that_is_no_utf8_is_refused_when_encoded_not_by_the_peer():
    """A topic name holding a lone surrogate cannot be UTF-8: ``encode`` (in ``send``, on
    the caller's thread) raises, rather than putting on the wire a frame that the peer
    refuses as a broken stream, taking every request on that link down with it."""
    with pytest.raises(UnicodeEncodeError):
        codec.encode(FetchRequest(1, (FetchPartition(TopicPartition("t\udc80", 0), 0),)))



# ---- failed registers, stale addresses, renewed sessions, the stamp (2026-11-27, seventh mutation review)
def test_a_register_that_fails_leaves_the_node_gone_and_found_where_it_listens_now():
    """Node 1 went away here and another process's node 1 holds its port now: registering
    it here again fails (the port is taken) and leaves it as it was, no node of this
    transport and still gone. An answer on its way to its earlier incarnation is lost, and
    a request to node 1 is looked up and reaches it where it listens now."""
    port = _free_port()
    sched = RealScheduler()
    other = TcpTransport(sched, listen_ports={1: port})
    t = TcpTransport(sched, listen_ports={1: port}, resolve=lambda node: other.address(node))
    with other, t:
        t.register(1, _echo([]))
        held, answers = _held_request(sched, t)  # node 1 asks node 2, which holds the request
        answered = _when_posted(sched, "_answer")
        held[0](UpdateMetadataResponse(0))
        assert answered.wait(5)  # the answer waits for the scheduler's thread
        t.unregister(1)
        got = []
        other.register(1, _echo(got))
        with pytest.raises(OSError):
            t.register(1, _echo([]))
        sched.advance(0)
        assert answers == [] and t.address(1) is None
        replies = []
        t.send(2, 1, _fetch(8), replies.append)
        assert sched.run_until(lambda: replies, 5_000)
        assert replies[0].partitions[0].records == b"answer-8" and [src for src, _ in got] == [2]


@pytest.mark.parametrize("retried", ["later", "from-the-refusal"])
def test_an_address_that_refuses_is_looked_up_again_at_the_next_send(retried):
    """A peer's address found stale (nothing listens there: the peer restarted on another
    port) is forgotten when the connection to it is refused, as when one that was made
    ends: the next request looks the peer up again and reaches it where it listens now,
    rather than being refused at the stale address for as long as the process lives.
    So too a request sent again from the refusal's own callback (a sender that retries at
    once): the address is forgotten before the refusals reach their senders."""
    where = {2: ("127.0.0.1", _free_port())}
    lookups = []
    sched = RealScheduler()
    with TcpTransport(sched) as server, \
            TcpTransport(sched, resolve=lambda node: lookups.append(node) or where[node]) as client:
        answers = []

        def restarted_and_sent_again():
            server.register(2, _echo([]))
            where[2] = server.address(2)
            client.send(1, 2, _fetch(2), answers.append)

        def refused(answer):
            answers.append(answer)
            if retried == "from-the-refusal":
                restarted_and_sent_again()

        client.send(1, 2, _fetch(1), refused)
        assert sched.run_until(lambda: answers, 5_000) and answers[0] is DISCONNECTED
        if retried == "later":
            restarted_and_sent_again()
        assert sched.run_until(lambda: len(answers) == 2, 5_000)
        assert answers[1] is not DISCONNECTED, "sent again to the stale address"
        assert answers[1].partitions[0].records == b"answer-2" and lookups == [2, 2]


def test_a_broker_whose_transport_cannot_be_made_says_why_and_ends_its_session(tmp_path, monkeypatch):
    """The transport's event loop cannot be made (no file descriptor left, say): run raises
    that OSError, which `kreplica broker` reports as the broker's error, and the store's
    session closes all the same, not an AttributeError from closing a transport never made."""
    import errno

    from kreplica.config import validate
    from kreplica.net import broker_process

    def no_descriptor_left(*args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files")

    closed = _store_closes(monkeypatch)
    monkeypatch.setattr(tcp_transport, "TcpTransport", no_descriptor_left)
    with pytest.raises(OSError, match="Too many open files"):
        broker_process.run(1, "memory", tmp_path, validate({}), quiet=True)
    assert closed == [True]


def test_a_state_changes_stamp_is_one_reading_of_the_clock_its_milliseconds_cut(monkeypatch, capsys):
    """The time of day and the milliseconds come from one reading of the clock, and the
    milliseconds are cut, not rounded: at 13:46:40.9996 the line says 13:46:40.999. Read
    twice, a second turning between the reads stamped a line at 13:46:41.0001 as
    13:46:40.000, a second early; rounded, .9996 was .000 of the same second. An afternoon
    reads on a 24-hour clock, as log4j's HH (a 12-hour clock said 01:46:40.999)."""
    from kreplica.net import broker_process

    monkeypatch.setattr(time, "time", lambda: 1_000_000_000.9996)  # 2001-09-09 01:46:40.9996 UTC
    monkeypatch.setenv("TZ", "NZST-12")  # local time 12 hours ahead of UTC: 13:46:40.9996
    time.tzset()
    try:
        broker_process._print_event("session_expired", 3)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert capsys.readouterr().out == "13:46:40.999 broker 3 session_expired\n"


# ---- answers given as their node goes away (2026-11-27, eighth mutation review) ---------------
@pytest.mark.parametrize("given", [b"given", bytes(range(256)) * (40 * 1024)], ids=["small", "10-mib"])
def test_an_answer_given_just_before_its_node_goes_away_reaches_its_sender(net, given):
    """What a node answered before it went away is on the wire and reaches its sender, as
    in-process and as from a node of another process; only what it had not answered comes
    back DISCONNECTED. Here the answer and the unregister come in one scheduler step: the
    sender's end of the connection is not closed under the answer, unread. A large answer
    (10 MiB, more than the sockets' buffers take at once) is still being written when the
    node goes away: the node's end is closed once what it holds is sent, not aborted with
    the rest of the answer thrown away."""
    sched, t = net
    answers = {}
    held = []

    def handler(src, request, respond):
        if request.partitions[0].fetch_offset == 0:
            held.append(respond)  # never answered
        else:
            respond(FetchResponse(0, (_data(given),)))
            t.unregister(2)  # a crash right after answering

    t.register(2, handler)
    t.send(1, 2, _fetch(0), lambda answer: answers.setdefault(0, answer))
    assert sched.run_until(lambda: held, 5_000)
    t.send(1, 2, _fetch(4), lambda answer: answers.setdefault(4, answer))
    assert sched.run_until(lambda: len(answers) == 2, 5_000)
    assert answers[0] is DISCONNECTED
    assert answers[4] is not DISCONNECTED and answers[4].partitions[0].records == given


def test_a_client_that_stops_sending_still_reads_what_it_was_answered(net):
    """A client (of another process, or any that speaks the format) may shut its sending
    side once it has asked, and read on. The server's end of the connection ends when it
    reads that, and closes once what it had written is sent: a large answer still in its
    buffer reaches the client whole, then the connection ends, rather than being aborted
    with the answer cut short."""
    sched, t = net
    records = bytes(range(256)) * (40 * 1024)  # 10 MiB: the sockets' buffers take part of it
    answered = []

    def handler(src, request, respond):
        respond(FetchResponse(0, (_data(records),)))
        answered.append(src)

    t.register(2, handler)
    with socket.create_connection(t.address(2), timeout=5) as s:
        s.sendall(codec.hello(7) + codec.frame(codec.REQUEST, 1, codec.encode(_fetch())))
        assert sched.run_until(lambda: answered, 5_000) and answered == [7]
        t._on_loop(asyncio.sleep(0))  # the answer's write has run: the rest of it is buffered
        s.shutdown(socket.SHUT_WR)
        assert _eventually(lambda: not t._accepted[2])  # the server read the end, and ended its side
        data = bytearray()
        with contextlib.suppress(ConnectionResetError):  # an aborted connection: checked below
            while chunk := s.recv(1 << 20):
                data += chunk
    length, kind, correlation_id = codec.FRAME_HEADER.unpack_from(data)
    assert (kind, correlation_id) == (codec.RESPONSE, 1) and len(data) == 4 + length, len(data)
    assert codec.decode(bytes(data[codec.FRAME_HEADER.size:])).partitions[0].records == records


# ---- ports past 65535, a peer forgotten twice, down marks (2026-11-28, ninth mutation review) ----
@pytest.mark.parametrize("option", ["--port", "--advertised-port"])
def test_a_port_past_65535_is_a_bad_argument_not_a_traceback_or_a_registration_nobody_can_reach(
        tmp_path, monkeypatch, capsys, option):
    """A TCP port is at most 65535. ``--port 65536`` was handed to the run, whose listen
    failed with an OverflowError traceback; ``--advertised-port 65536`` was registered, and
    every peer, which takes a registration past 65535 as no usable port, found the broker
    unregistered while it ran. Both are refused as ``--advertised-port 0`` is: exit 2,
    the option named with the reason, the run never tried; 65535 itself is a port."""
    with pytest.raises(SystemExit) as e:
        _broker_command(tmp_path, monkeypatch, option, "65536")
    assert e.value.code == 2 and f"argument {option}: 65536: must be at most 65535" in capsys.readouterr().err
    low = 0 if option == "--port" else 1  # the reason for a port below the option's own bound too
    with pytest.raises(SystemExit) as e:
        _broker_command(tmp_path, monkeypatch, option, str(low - 1))
    assert e.value.code == 2 and f"argument {option}: {low - 1}: must be at least {low}" in capsys.readouterr().err
    status, calls = _broker_command(tmp_path, monkeypatch, option, "65535")
    assert status == 0 and calls[0][1][option[2:].replace("-", "_")] == 65535


@pytest.mark.parametrize("ports, message", [
    ({"listen_ports": {1: 70000}}, "node 1: listen port 70000 is not from 0 to 65535"),
    ({"listen_ports": {1: -1}}, "listen port -1"),
    ({"advertised_ports": {2: 65536}}, "node 2: advertised port 65536 is not from 1 to 65535"),
    ({"advertised_ports": {2: 0}}, "advertised port 0"),
    ({"listen_ports": {1: "9092"}}, "listen port '9092'"),
    ({"advertised_ports": {2: True}}, "advertised port True"),  # an int to Python, no port to a peer
    ({"listen_ports": {1: 9092.5}}, "listen port 9092.5"),  # asyncio would listen on 9092
    ({"advertised_ports": {2: 9092.0}}, "advertised port 9092.0"),  # registered as 9092.0
])
def test_a_transport_refuses_a_port_that_is_none_before_it_starts(tmp_path, ports, message):
    """From Python, where no command line checks it, ``run(port=70000)`` ended in the
    listen's OverflowError after the store's session had opened; the transport now refuses
    a port that is none as it is made, a ValueError naming the node and the port, and no
    loop thread is left behind. The bounds themselves are ports."""
    from kreplica.config import validate
    from kreplica.net import broker_process

    threads = threading.active_count()
    with pytest.raises(ValueError, match=re.escape(message)):
        TcpTransport(RealScheduler(), **ports)
    assert threading.active_count() == threads
    with pytest.raises(ValueError, match="listen port 70000"):
        broker_process.run(1, "memory", tmp_path, validate({}), quiet=True, port=70000)
    with TcpTransport(RealScheduler(), listen_ports={1: 0}, advertised_ports={1: 65535}) as t:
        assert t.register(1, _echo([])) == 65535


def test_a_transport_keeps_the_ports_it_checked_not_the_callers_dicts():
    """The ports are checked once, as the transport is made: what the caller does with its
    own dicts afterwards (a config reused for the next broker, say) must not reach ports
    nobody checked, nor change where a node listens or what it registers."""
    listen, advertised = {1: 0}, {1: 9092}
    with TcpTransport(RealScheduler(), listen_ports=listen, advertised_ports=advertised) as t:
        listen[1], advertised[1] = 70000, 0
        listen[2] = 1
        assert t.listen_ports == {1: 0} and t.advertised_ports == {1: 9092}
        assert t.register(1, _echo([])) == 9092
        assert t.address(1)[1] not in (0, 70000)


def test_two_senders_whose_connections_to_one_peer_end_each_forget_it_without_error():
    """Two nodes of this process (a broker and a client, say) each have a connection to a
    peer of another process; it goes away, both connections end and each forgets the
    peer's address. The second forgetting finds it gone already: no error on the
    scheduler's thread (which would end a broker process's main loop), both senders are
    refused, and the next request looks the peer up again and reaches it."""
    sched = RealScheduler()
    server, client, lookups = _two_processes(sched)
    with server, client:
        held = []
        server.register(2, lambda src, request, respond: held.append(respond))
        answers = {1: [], 3: []}
        for src in (1, 3):
            client.send(src, 2, _fetch(), answers[src].append)
        assert sched.run_until(lambda: len(held) == 2, 5_000) and lookups == [2]  # one lookup, kept
        server.unregister(2)
        try:
            refused = sched.run_until(lambda: answers[1] and answers[3], 5_000)
        except Exception as e:
            raise AssertionError(f"the scheduler's thread raised {e!r}") from None
        assert refused and answers == {1: [DISCONNECTED], 3: [DISCONNECTED]}
        server.register(2, _echo([]))
        client.send(3, 2, _fetch(5), answers[3].append)
        assert sched.run_until(lambda: len(answers[3]) == 2, 5_000)
        assert answers[3][1].partitions[0].records == b"answer-5" and lookups == [2, 2]


def test_a_node_that_registers_takes_only_itself_off_the_down_list(net):
    """Node 1 went away with an answer to it already read off the wire; node 3 starts (or
    restarts) before the scheduler gets to that answer. Node 3 is up again, node 1 is
    still gone: the answer is dropped, not handed to the callback of a node that is no
    more (as the in-process transport)."""
    sched, t = net
    t.register(1, _echo([]))
    held, answers = _held_request(sched, t)
    answered = _when_posted(sched, "_answer")
    held[0](UpdateMetadataResponse(0))
    assert answered.wait(5)  # the answer waits for the scheduler's thread
    t.unregister(1)
    t.register(3, _echo([]))
    sched.advance(0)
    assert answers == []


def test_an_answer_is_written_on_the_socket_thread_not_the_handlers(net, monkeypatch):
    """The handler's thread hands the encoded answer to the socket thread, which alone
    touches the connection (asyncio's streams are not thread-safe): written from the
    handler's thread while the socket thread flushes an earlier large answer on the same
    connection, an answer could fail in the handler (the buffer being sent cannot grow)
    or interleave with it on the wire."""
    sched, t = net
    writers = []
    real_write = tcp_transport._write
    monkeypatch.setattr(tcp_transport, "_write",
                        lambda writer, frame: (writers.append(threading.current_thread()), real_write(writer, frame)))
    t.register(2, _echo([]))
    answers = []
    t.send(1, 2, _fetch(1), answers.append)
    assert sched.run_until(lambda: answers, 5_000)
    assert answers[0].partitions[0].records == b"answer-1"
    assert writers == [t._thread]


def test_a_node_going_away_closes_its_end_of_a_peers_connection_not_only_its_sending(net, caplog):
    """Its end of each connection it accepted is closed, not only shut for writing: a late
    answer of the gone node is not written (after a shut-down write asyncio's write
    raises, logged as an error on the socket thread), and a peer of another process
    that keeps its own end open (stopped, or slow to read the end of the stream) has
    what it sends next refused by a reset, not read and dropped by a node that is gone."""
    import logging

    sched, t = net
    held = []
    port = t.register(2, lambda src, request, respond: held.append(respond))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as peer:
        peer.sendall(codec.hello(5) + codec.frame(codec.REQUEST, 1, codec.encode(_fetch())))
        assert sched.run_until(lambda: held, 5_000)
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            t.unregister(2)
            held[0](UpdateMetadataResponse(0))  # a crashed process's late answer
            t._on_loop(asyncio.sleep(0.05))  # the write handed to the loop has run
        assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
        assert peer.recv(65536) == b""  # the end of the stream, nothing answered

        def refused():
            try:
                peer.sendall(codec.frame(codec.REQUEST, 2, codec.encode(_fetch())))
            except OSError:  # reset by the closed end
                return True
            return False

        assert _eventually(refused), "the gone node's end still reads what the peer sends"


# ---- refusals on the scheduler's turn, an idle broker, a client's open transport (2026-11-28,
# ---- eleventh mutation review)
def test_a_request_still_connecting_when_its_peer_goes_away_is_refused_on_the_schedulers_turn(net):
    """A request whose connection was still being made when its peer went away is refused,
    DISCONNECTED, as every answer is: on the scheduler's thread when it runs, not on the
    socket thread inside the ``unregister`` that stopped the peer (where the sender's state
    would change under the caller, from a thread the sans-I/O code never runs on)."""
    sched, t = net
    t.register(2, _echo([]))
    answers = []
    release = threading.Event()
    t._loop.call_soon_threadsafe(release.wait, 3)  # the send and the stop reach the loop together
    t.send(1, 2, _fetch(), lambda answer: answers.append((answer, threading.current_thread())))
    threading.Timer(0.1, release.set).start()
    t.unregister(2)  # the stop runs while the link's task is still connecting
    t._on_loop(asyncio.sleep(0.05))  # whatever the stop handed over is queued
    assert answers == []  # the scheduler has not run yet
    assert sched.run_until(lambda: answers, 5_000)
    assert answers == [(DISCONNECTED, threading.current_thread())]


def test_an_idle_broker_sleeps_between_its_checks_rather_than_spinning(tmp_path, monkeypatch):
    """While it waits for a signal, the broker's main loop sleeps a tick between its checks
    that the broker still runs (a handful a second), rather than spinning a core at 100%
    on a broker with nothing to do."""
    checks = []

    def count_then_signal(broker):
        advance = broker.scheduler.advance
        broker.scheduler.advance = lambda ms: (checks.append(ms), advance(ms))[-1]
        broker.scheduler.call_later(1_000, os.kill, os.getpid(), signal.SIGTERM)

    status, closed = _run_in_process(tmp_path, monkeypatch, after_start=count_then_signal,
                                     signal_after_start=False)
    assert status in (0, 1) and closed == [True]
    assert 0 < len(checks) < 20, f"{len(checks)} checks in a second"

