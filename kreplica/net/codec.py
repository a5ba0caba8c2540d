"""The wire format of kreplica's typed messages: frames on a TCP stream.

Theory of operation.  Every request and response is a frozen dataclass of
:mod:`kreplica.protocol` whose fields are ints, bools, strings, bytes, topic
partitions, tuples of these, or other such dataclasses.  The annotations say which,
so the format carries no field names or per-value tags: a message is its type's
number (its place in :data:`MESSAGE_TYPES`) followed by its fields in declaration
order.  Ints are 8-byte signed big-endian (offsets and epochs need 64 bits),
bools one byte, strings and bytes a 4-byte length and their bytes, tuples a
4-byte count and their items.

A frame on the stream is ``length (u32) | kind (u8) | correlation id (u32) | body``,
``length`` counting everything after itself.  The first frame on a connection is a
HELLO whose body is the connecting node's id (i32) and :data:`WIRE_VERSION`;
then the client sends REQUEST frames and the server answers each with a RESPONSE
frame carrying the request's correlation id.  This is kreplica's own framing,
not Kafka's wire protocol.

:data:`~kreplica.transport.DISCONNECTED`, which a broker shutting down answers
with, has a type number of its own and no fields.

Encoding copies: a fetch answer's records, a view into the leader's mapped
segment, are bytes in the frame once :func:`encode` returns.
"""
from __future__ import annotations

import dataclasses
import struct
import typing
from types import UnionType
from typing import Any, Callable

from .. import errors, protocol
from ..protocol import TopicPartition
from ..transport import DISCONNECTED

WIRE_VERSION = 1

HELLO, REQUEST, RESPONSE = 0, 1, 2
FRAME_HEADER = struct.Struct(">IBI")  # length, kind, correlation id
HELLO_BODY = struct.Struct(">iH")  # node id, wire version
MAX_FRAME_BYTES = 256 * 1024 * 1024  # a frame claiming more is a broken stream, not a message

MESSAGE_TYPES: tuple[type, ...] = (
    protocol.ProduceRequest, protocol.ProduceResponse,
    protocol.FetchRequest, protocol.FetchResponse,
    protocol.OffsetsForLeaderEpochRequest, protocol.OffsetsForLeaderEpochResponse,
    protocol.LeaderAndIsrRequest, protocol.LeaderAndIsrResponse,
    protocol.StopReplicaRequest, protocol.StopReplicaResponse,
    protocol.UpdateMetadataRequest, protocol.UpdateMetadataResponse,
    protocol.ControlledShutdownRequest, protocol.ControlledShutdownResponse,
    protocol.AlterIsrRequest, protocol.AlterIsrResponse,
)
_DISCONNECTED_ID = len(MESSAGE_TYPES)

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_U8 = struct.Struct(">B")

Encoder = Callable[[bytearray, Any], None]
Decoder = Callable[[memoryview, int], tuple[Any, int]]


class WireError(errors.CorruptMessage):
    """A frame that does not decode: a peer of another version, or a broken stream."""


# ---- one codec per annotation ------------------------------------------------------------------
def _int_enc(out: bytearray, v: int) -> None:
    out += _I64.pack(v)


def _int_dec(buf: memoryview, pos: int) -> tuple[int, int]:
    return _I64.unpack_from(buf, pos)[0], pos + 8


def _bool_enc(out: bytearray, v: bool) -> None:
    out.append(1 if v else 0)


def _bool_dec(buf: memoryview, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def _bytes_enc(out: bytearray, v: bytes | memoryview) -> None:
    out += _U32.pack(len(v))
    out += v


def _bytes_dec(buf: memoryview, pos: int) -> tuple[bytes, int]:
    n = _U32.unpack_from(buf, pos)[0]
    pos += 4
    if pos + n > len(buf):
        raise WireError(f"a {n}-byte field runs past the end of its frame")
    return bytes(buf[pos:pos + n]), pos + n


def _str_enc(out: bytearray, v: str) -> None:
    _bytes_enc(out, v.encode())


def _str_dec(buf: memoryview, pos: int) -> tuple[str, int]:
    raw, pos = _bytes_dec(buf, pos)
    return raw.decode(), pos


def _tuple_codec(item: Any) -> tuple[Encoder, Decoder]:
    enc_item, dec_item = _codec(item)

    def enc(out: bytearray, v: tuple) -> None:
        out += _U32.pack(len(v))
        for x in v:
            enc_item(out, x)

    def dec(buf: memoryview, pos: int) -> tuple[tuple, int]:
        n = _U32.unpack_from(buf, pos)[0]
        pos += 4
        if n > len(buf) - pos:  # every item takes at least a byte
            raise WireError(f"a tuple of {n} items cannot fit in its frame")
        items = []
        for _ in range(n):
            x, pos = dec_item(buf, pos)
            items.append(x)
        return tuple(items), pos

    return enc, dec


def _fields_codec(cls: type, annotations: list[Any]) -> tuple[Encoder, Decoder]:
    """A record type (dataclass or named tuple): its fields in order, no names."""
    codecs = [_codec(a) for a in annotations]
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else list(cls._fields)
    pairs = list(zip(names, (e for e, _ in codecs)))
    decoders = [d for _, d in codecs]

    def enc(out: bytearray, v: Any) -> None:
        for name, e in pairs:
            e(out, getattr(v, name))

    def dec(buf: memoryview, pos: int) -> tuple[Any, int]:
        values = []
        for d in decoders:
            x, pos = d(buf, pos)
            values.append(x)
        return cls(*values), pos

    return enc, dec


_SCALARS: dict[Any, tuple[Encoder, Decoder]] = {
    int: (_int_enc, _int_dec), bool: (_bool_enc, _bool_dec), str: (_str_enc, _str_dec),
    bytes: (_bytes_enc, _bytes_dec),
}
_RECORDS: dict[type, tuple[Encoder, Decoder]] = {}


def _codec(annotation: Any) -> tuple[Encoder, Decoder]:
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if isinstance(annotation, UnionType) and set(typing.get_args(annotation)) == {bytes, memoryview}:
        return _SCALARS[bytes]
    origin = typing.get_origin(annotation)
    if origin is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return _tuple_codec(args[0])
        parts = [_codec(a) for a in args]  # a fixed-size tuple: its items in order

        def enc(out: bytearray, v: tuple) -> None:
            for (e, _), x in zip(parts, v):
                e(out, x)

        def dec(buf: memoryview, pos: int) -> tuple[tuple, int]:
            items = []
            for _, d in parts:
                x, pos = d(buf, pos)
                items.append(x)
            return tuple(items), pos

        return enc, dec
    if isinstance(annotation, type) and (dataclasses.is_dataclass(annotation) or annotation is TopicPartition):
        if annotation not in _RECORDS:
            hints = typing.get_type_hints(annotation)
            names = ([f.name for f in dataclasses.fields(annotation)] if dataclasses.is_dataclass(annotation)
                     else list(annotation._fields))
            _RECORDS[annotation] = _fields_codec(annotation, [hints[n] for n in names])
        return _RECORDS[annotation]
    raise TypeError(f"no wire codec for {annotation!r}")


_BY_TYPE = {cls: (i, _codec(cls)[0]) for i, cls in enumerate(MESSAGE_TYPES)}
_BY_ID = [_codec(cls)[1] for cls in MESSAGE_TYPES]


# ---- messages and frames --------------------------------------------------------------------------
def encode(message: Any) -> bytes:
    """``message`` as a frame body: its type number, then its fields."""
    if message is DISCONNECTED:
        return bytes((_DISCONNECTED_ID,))
    found = _BY_TYPE.get(type(message))
    if found is None:
        raise TypeError(f"{type(message).__name__} is not a message kreplica sends over the wire")
    type_id, enc = found
    out = bytearray((type_id,))
    enc(out, message)
    return bytes(out)


def decode(body: bytes | memoryview) -> Any:
    """The message a frame body carries; :class:`WireError` if it does not decode whole."""
    buf = memoryview(body)
    if not len(buf):
        raise WireError("an empty frame body")
    type_id = buf[0]
    if type_id == _DISCONNECTED_ID and len(buf) == 1:
        return DISCONNECTED
    if type_id >= len(_BY_ID):
        raise WireError(f"unknown message type {type_id}")
    try:
        message, pos = _BY_ID[type_id](buf, 1)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError) as e:
        raise WireError(f"a {MESSAGE_TYPES[type_id].__name__} that does not decode: {e}") from None
    if pos != len(buf):
        raise WireError(f"{len(buf) - pos} bytes left over after a {MESSAGE_TYPES[type_id].__name__}")
    return message


def frame(kind: int, correlation_id: int, body: bytes) -> bytes:
    return FRAME_HEADER.pack(len(body) + 5, kind, correlation_id) + body


def hello(node_id: int) -> bytes:
    return frame(HELLO, 0, HELLO_BODY.pack(node_id, WIRE_VERSION))


def read_hello(body: bytes) -> int:
    """The connecting node's id; :class:`WireError` for another wire version."""
    if len(body) != HELLO_BODY.size:
        raise WireError(f"a HELLO of {len(body)} bytes")
    node_id, version = HELLO_BODY.unpack(body)
    if version != WIRE_VERSION:
        raise WireError(f"peer speaks wire version {version}, this node {WIRE_VERSION}")
    return node_id
