"""@fast_init builds the same objects as the frozen dataclass's own __init__, faster."""
from __future__ import annotations

import dataclasses
import pickle
from dataclasses import FrozenInstanceError, InitVar, dataclass, field

import pytest

from kreplica.fast_init import fast_init
from kreplica.protocol import FetchPartitionData, ProduceRequest
from kreplica.protocol.common import LeaderAndIsr, TopicPartition


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple = ()


@fast_init
@dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: str = "b"
    c: tuple = ()


@pytest.mark.parametrize("args,kwargs", [((1,), {}), ((1, "x"), {}), ((1,), {"c": (2,)}), ((), {"a": 3, "b": "y"})])
def test_same_fields_as_the_dataclass_init(args, kwargs):
    assert dataclasses.astuple(Fast(*args, **kwargs)) == dataclasses.astuple(Plain(*args, **kwargs))


@pytest.mark.parametrize("args,kwargs", [((), {}), ((1, 2, 3, 4), {}), ((1,), {"a": 2}), ((1,), {"d": 2})])
def test_same_errors_for_bad_arguments(args, kwargs):
    with pytest.raises(TypeError):
        Plain(*args, **kwargs)
    with pytest.raises(TypeError):
        Fast(*args, **kwargs)


def test_still_frozen_equal_hashable_replaceable_and_picklable():
    f = Fast(1, "x", (2,))
    with pytest.raises(FrozenInstanceError):
        f.a = 2  # type: ignore[misc]
    assert f == Fast(1, "x", (2,)) and hash(f) == hash(Fast(1, "x", (2,)))
    assert repr(f) == "Fast(a=1, b='x', c=(2,))"
    assert dataclasses.replace(f, b="z") == Fast(1, "z", (2,))
    assert pickle.loads(pickle.dumps(f)) == f
    assert Fast.__init__.__qualname__ == "Fast.__init__"

    @fast_init
    @dataclass(frozen=True, slots=True)
    class Nested:  # a traceback names a nested class's __init__ by its qualified name
        a: int

    assert Nested.__init__.__qualname__ == f"{Nested.__qualname__}.__init__" and "<locals>" in Nested.__qualname__


def test_a_field_defaulting_to_none_or_zero_may_be_left_out():
    """Any default is a default, None and 0 as much as "b": such a field is optional."""

    @fast_init
    @dataclass(frozen=True, slots=True)
    class Defaults:
        a: int
        b: object = None
        c: int = 0

    assert dataclasses.astuple(Defaults(1)) == (1, None, 0)


def test_post_init_still_validates():
    with pytest.raises(ValueError, match="duplicate"):
        LeaderAndIsr(1, 0, (1, 1))
    with pytest.raises(ValueError, match="duplicate"):  # a repeat anywhere, not only next to it
        LeaderAndIsr(1, 0, (1, 2, 1))
    with pytest.raises(ValueError, match="duplicate"):  # nor quietly dropped by an election or an ISR change
        LeaderAndIsr(1, 0, (1, 2)).with_leader(2, (2, 1, 2))
    with pytest.raises(ValueError, match="duplicate"):
        LeaderAndIsr(1, 0, (1, 2)).with_isr((1, 1))
    with pytest.raises(ValueError, match="^acks must be 0, 1 or -1, not 2$"):  # the value refused named
        ProduceRequest(acks=2, timeout_ms=1, partitions=())
    with pytest.raises(ValueError, match="acks"):  # between -1 and 1 is not one of them
        ProduceRequest(acks=0.5, timeout_ms=1, partitions=())
    # Nor is the config's spelling of -1: "all" is parsed to -1 before a request is built
    # (config.parse_acks); taken as it was, a broker comparing acks with -1 read it as 1.
    with pytest.raises(ValueError, match="^acks must be 0, 1 or -1, not all$"):
        ProduceRequest(acks="all", timeout_ms=1, partitions=())


def test_a_topic_partition_is_built_only_with_both_its_topic_and_its_partition():
    """As Kafka's TopicPartition(topic, partition): a caller that leaves the partition out
    is refused, not handed partition 0 (a produce, a fetch or a state change aimed at
    another partition than the one meant, with nothing to say so)."""
    with pytest.raises(TypeError):
        TopicPartition("t")
    assert TopicPartition("t", 3) == ("t", 3)


def test_a_state_with_an_empty_isr_is_built_not_refused():
    """Only a repeated replica is refused: a state node holding leader -1 and no ISR member
    (one the topics tool describes, TL9-10, as Kafka's own LeaderAndIsr takes an empty ISR)
    is read back from the store and carried through an election, not a ValueError for every
    reader of the node."""
    from kreplica.meta.layout import decode_partition_state, encode_partition_state

    state = LeaderAndIsr(-1, 3, (), 0, 2)
    assert decode_partition_state(encode_partition_state(state), 5) == LeaderAndIsr(-1, 3, (), 5, 2)
    assert state.with_leader(-1, ()) == LeaderAndIsr(-1, 4, (), 0, 2)


def test_every_message_is_a_frozen_slotted_dataclass():
    """As kreplica.protocol promises: a message carries no per-instance dict (the brokers
    and the simulator build millions of them) and cannot be changed once sent; and it is
    built by @fast_init's __init__, not the dataclass's one setattr per field (a produce
    request's partitions, built per send, were left out of it unnoticed)."""
    import kreplica.protocol as protocol

    messages = [c for c in vars(protocol).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]
    assert len(messages) >= 20  # every request, response and part of one the package exports
    for cls in messages:
        assert "__slots__" in vars(cls) and cls.__dataclass_params__.frozen, cls.__name__
        assert "_set" in cls.__init__.__code__.co_names, cls.__name__


def test_the_messages_use_it():
    d = FetchPartitionData(TopicPartition("t", 0), 0, records=b"x")
    assert (d.high_watermark, d.log_start_offset, d.log_end_offset, d.records) == (-1, -1, -1, b"x")
    assert FetchPartitionData.__init__.__module__ == "kreplica.protocol.fetch"
    assert "_set" in FetchPartitionData.__init__.__code__.co_names


def test_refuses_what_it_does_not_build():
    with pytest.raises(TypeError, match="frozen"):
        fast_init(dataclass(slots=True)(type("Mutable", (), {"__annotations__": {"a": int}})))
    # A class that is no dataclass at all is refused as one, not with an AttributeError.
    with pytest.raises(TypeError, match="is for frozen dataclasses; NotADataclass is not one"):
        fast_init(type("NotADataclass", (), {"__annotations__": {"a": int}}))
    with pytest.raises(TypeError, match="plain field"):
        @fast_init
        @dataclass(frozen=True)
        class Factory:
            a: list = field(default_factory=list)
    with pytest.raises(TypeError, match="plain field"):
        @fast_init
        @dataclass(frozen=True, kw_only=True)
        class KwOnly:
            a: int = 0
    # A field the dataclass leaves out of __init__ must not become a parameter of fast_init's.
    with pytest.raises(TypeError, match="plain field"):
        @fast_init
        @dataclass(frozen=True)
        class NotInInit:
            a: int
            b: int = field(default=0, init=False)
    # An InitVar is no field: fast_init's __init__ would neither take it nor hand it on.
    with pytest.raises(TypeError, match="InitVar or ClassVar"):
        @fast_init
        @dataclass(frozen=True)
        class WithInitVar:
            a: int
            scale: InitVar[int] = 1

            def __post_init__(self, scale: int) -> None:
                pass


@pytest.mark.parametrize("names,values", [(("a", "b"), (1,)), (("a",), (1, "x"))])
def test_set_fields_refuses_names_and_values_of_different_lengths(names, values):
    from kreplica._fast_init import set_fields

    obj = Plain(0)
    with pytest.raises(ValueError, match=f"^{len(names)} field names for {len(values)} values$"):
        set_fields(obj, names, values)
    assert dataclasses.astuple(obj) == (0, "b", ())


@dataclass(frozen=True, slots=True)
class _Checked:
    a: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("a must be at least 0")


def test_a_post_init_inherited_from_a_base_dataclass_still_runs():
    """The dataclass's own __init__ calls ``__post_init__`` wherever the class gets it, so
    a message refining a checked one is checked too."""
    @fast_init
    @dataclass(frozen=True, slots=True)
    class Refined(_Checked):
        b: int = 0

    assert dataclasses.astuple(Refined(1, 2)) == (1, 2)
    with pytest.raises(ValueError, match="at least 0"):
        Refined(-1)


def test_a_message_with_no_fields_builds():
    """Kafka has requests without fields (ApiVersions v0); ``()`` is no one-field tuple."""
    @fast_init
    @dataclass(frozen=True, slots=True)
    class Empty:
        pass

    assert Empty() == Empty() and dataclasses.astuple(Empty()) == ()
