import bisect
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kreplica.errors import KafkaStorageError
from kreplica.log import _segment
from kreplica.log.offset_index import OffsetIndex


def test_extension_is_compiled():
    assert _segment.__file__.endswith(".so")


def test_preallocated_then_trimmed_on_seal(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1000, writable=True)
    assert os.path.getsize(idx.path) == 1000
    idx.append(105, 0)
    idx.append(130, 4200)
    idx.seal()
    assert os.path.getsize(idx.path) == 16
    assert idx.path.read_bytes() == bytes.fromhex("00000005 00000000 0000001e 00001068".replace(" ", ""))
    reopened = OffsetIndex(idx.path, 100, 1000, writable=False)
    assert reopened.entries == 2 and reopened.lookup(131) == (130, 4200)


def test_lookup_edges(tmp_path):
    idx = OffsetIndex(tmp_path / "i", 50, 800, writable=True)
    assert idx.lookup(70) == (50, 0)  # empty: start of the segment
    idx.append(60, 100)
    assert idx.lookup(59) == (50, 0)
    assert idx.lookup(60) == (60, 100)
    assert idx.lookup(10**12) == (60, 100)
    assert idx.lookup(3) == (50, 0)


def test_full_and_ordering_enforced(tmp_path):
    idx = OffsetIndex(tmp_path / "i", 0, 16, writable=True)
    idx.append(1, 10)
    with pytest.raises(KafkaStorageError):
        idx.append(1, 20)  # offsets must increase
    idx.append(2, 20)
    assert idx.is_full
    with pytest.raises(KafkaStorageError, match="full"):
        idx.append(3, 30)


def test_append_many_checks_order_and_width_and_writes_nothing_on_error(tmp_path):
    idx = OffsetIndex(tmp_path / "i", 100, 800, writable=True)
    idx.append_many(np.array([110, 120]), np.array([0, 50]))
    bad = [([115, 130], [60, 70]),  # not past the last entry
           ([130, 130], [60, 70]),  # not strictly rising
           ([130, 100 + 2**32], [60, 70]),  # relative offset wider than 4 bytes
           ([130], [2**32])]  # position wider than 4 bytes
    for offsets, positions in bad:
        with pytest.raises(KafkaStorageError):
            idx.append_many(np.array(offsets), np.array(positions))
        assert idx.entries == 2 and idx.last_entry() == (120, 50)
    idx.append_many(np.array([130, 140]), np.array([60, 70]))
    assert [idx.lookup(o) for o in (125, 135, 999)] == [(120, 50), (130, 60), (140, 70)]


def test_truncate_to(tmp_path):
    idx = OffsetIndex(tmp_path / "i", 0, 800, writable=True)
    idx.append_many(np.array([10, 20, 30, 40]), np.array([1, 2, 3, 4]))
    idx.truncate_to(30)
    assert idx.last_entry() == (20, 2)
    idx.truncate_to(25)
    assert idx.last_entry() == (20, 2)
    idx.truncate_to(0)
    assert idx.entries == 0
    idx.append(5, 9)  # appending again after truncation
    assert idx.lookup(100) == (5, 9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 5000), min_size=0, max_size=3000, unique=True),
    st.lists(st.integers(0, 200_000), min_size=1, max_size=50),
)
def test_random_lookups_match_a_sorted_map(tmp_path_factory, rels, targets):
    base = 1_000_000
    rels.sort()
    idx = OffsetIndex(tmp_path_factory.mktemp("oi") / "i", base, 8 * 4000, writable=True)
    offsets = np.array(rels, dtype=np.int64) * 7 + base
    idx.append_many(offsets, np.arange(len(rels), dtype=np.int64) * 3)
    for t in targets:
        target = base + t
        i = bisect.bisect_right(offsets.tolist(), target) - 1
        expected = (int(offsets[i]), i * 3) if i >= 0 else (base, 0)
        assert idx.lookup(target) == expected


def test_every_indexed_offset_finds_its_own_entry_in_the_cold_and_the_warm_section(tmp_path):
    """More entries than the warm section holds (8 KiB: 1024 entries), so lookups run both
    binary searches; an exact key is its own slot, the first warm one included."""
    idx = OffsetIndex(tmp_path / "i", 0, 8 * 2000, writable=True)
    offsets = np.arange(1, 2001, dtype=np.int64) * 3
    idx.append_many(offsets, np.arange(2000, dtype=np.int64) * 10)
    for i, offset in enumerate(offsets.tolist()):
        assert idx.lookup(offset) == (offset, 10 * i)
        assert idx.lookup(offset + 2) == (offset, 10 * i)


def test_append_many_may_fill_the_index_to_its_last_byte(tmp_path):
    idx = OffsetIndex(tmp_path / "i", 0, 24, writable=True)
    idx.append_many(np.array([1]), np.array([10]))
    idx.append_many(np.array([2, 3]), np.array([20, 30]))
    assert idx.is_full and [idx.lookup(o) for o in (1, 2, 3)] == [(1, 10), (2, 20), (3, 30)]
    with pytest.raises(KafkaStorageError, match="full"):
        idx.append_many(np.array([4]), np.array([40]))


def test_put_entries_refuses_entries_one_byte_past_the_buffer_and_writes_nothing():
    """put_entries writes without bounds checks, so its own fit check is all that keeps a
    run of entries inside the mapping: a run one byte longer than the room left (from 0
    or from a later start) is refused for both key widths, with no byte written past
    the room, and the same run in exactly its room is written."""
    keys, values = np.array([1, 2], np.int64), np.array([10, 20], np.int64)
    for key_bytes in (4, 8):
        need = 2 * (key_bytes + 4)
        for start in (0, 8):
            backing = np.zeros(64, np.uint8)
            with pytest.raises(ValueError, match="do not fit"):
                _segment.put_entries(backing[:start + need - 1], start, keys, values, key_bytes, 0)
            assert not backing.any()
            assert _segment.put_entries(backing[:start + need], start, keys, values, key_bytes, 0) == 2
            assert backing[:start].sum() == 0 and not backing[start + need:].any()


def test_put_entries_refuses_a_negative_start_and_fewer_values_than_keys_and_writes_nothing():
    """put_entries' other guards before its unchecked writes and reads: a start before
    the buffer would write in front of it (here into the backing array's first bytes),
    and fewer values than keys would read past the values (here the backing array's
    next value) and write that as a position."""
    keys = np.array([1, 2], np.int64)
    for key_bytes in (4, 8):
        backing = np.zeros(64, np.uint8)
        with pytest.raises(ValueError, match="do not fit"):
            _segment.put_entries(backing[16:], -8, keys, np.array([10, 20], np.int64), key_bytes, 0)
        with pytest.raises(ValueError, match="differ in length"):
            _segment.put_entries(backing, 0, keys, np.array([10, 20], np.int64)[:1], key_bytes, 0)
        with pytest.raises(ValueError, match="differ in length"):
            _segment.put_entries(backing, 0, keys[:1], np.array([10, 20], np.int64), key_bytes, 0)
        assert not backing.any()


@pytest.mark.parametrize("key_bytes", [0, 2, 6, 12])
def test_put_entries_refuses_a_key_width_other_than_four_or_eight_and_writes_nothing(key_bytes):
    """The docstring's "a big-endian key of key_bytes (4 or 8)": any other width would
    be measured at its own width by the fit check but written as a 4-byte key (the only
    other write path), so the entries land at the wrong stride.  It is refused first."""
    backing = np.zeros(64, np.uint8)
    with pytest.raises(ValueError, match="the key width is not 4 or 8"):
        _segment.put_entries(backing, 0, np.array([1, 2], np.int64), np.array([10, 20], np.int64), key_bytes, 0)
    assert not backing.any()


def test_a_lookup_in_an_index_with_no_entries_finds_no_slot_over_a_zero_filled_buffer():
    """index_slot's "below every key" (-1) for no entries even when the buffer is a
    preallocated, zero-filled one: read as an entry, its zero key is <= any target and
    would name slot 0, an entry that was never written.  (IndexFile._slot also checks
    for no entries; this pins the search itself.)"""
    buf = np.zeros(12 * 8, np.uint8)
    for entry_bytes, key_bytes in ((8, 4), (12, 8)):
        for warm in (0, 1, 1024):
            assert _segment.index_slot(buf, 0, entry_bytes, key_bytes, 10, warm) == -1


def test_a_lookup_reads_four_byte_keys_unsigned_in_the_warm_section_too():
    """Relative offsets are written as unsigned 4-byte keys (put_entries takes up to
    2**32 - 1, as recovery's bound does); a key past 2**31 is large, not negative."""
    entries = np.array([(1, 0), (2**31 + 5, 8)], dtype=[("k", ">u4"), ("v", ">u4")])
    buf = np.frombuffer(entries.tobytes(), dtype=np.uint8)
    assert _segment.index_slot(buf, 2, 8, 4, 10, 1) == 0  # the warm half starts above 10
    assert _segment.index_slot(buf, 2, 8, 4, 2**31 + 5, 1) == 1


def test_append_many_takes_keys_and_positions_to_the_full_four_bytes_and_refuses_negative_positions(tmp_path):
    """A relative offset and a position are unsigned 4-byte fields: put_entries takes either
    up to 2**32 - 1 (as OffsetIndex.append and recovery's bound do), never a negative
    position, which would be written as a huge one."""
    idx = OffsetIndex(tmp_path / "i", 100, 800, writable=True)
    idx.append_many(np.array([100 + 2**31 + 5]), np.array([10]))
    for positions in ([-1], [-(2**32)]):
        with pytest.raises(KafkaStorageError):
            idx.append_many(np.array([100 + 2**31 + 6]), np.array(positions))
        assert idx.entries == 1
    idx.append_many(np.array([100 + 2**32 - 1]), np.array([2**32 - 1]))
    assert idx.entries == 2
    assert idx.lookup(100 + 2**31 + 5) == (100 + 2**31 + 5, 10)
    assert idx.lookup(100 + 2**32 - 1) == (100 + 2**32 - 1, 2**32 - 1)


def test_entries_written_over_truncated_ones_are_fsynced_by_the_next_flush(tmp_path, monkeypatch):
    """A truncation moves the index file's durable mark back with its entries: left where
    it was, the entries written since over the same bytes counted as durable already."""
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 4096, writable=True)
    for i in range(1, 6):
        idx.append(10 * i, 100 * i)
    idx.flush()
    idx.truncate_to(20)
    idx.append(25, 150)
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    idx.flush()
    assert synced
    idx.close()


def test_entries_get_their_disk_blocks_before_they_are_written_through_the_map(tmp_path, monkeypatch):
    """Entries are copied in through a map of a sparse file, where a page with no disk
    block on a full disk is a SIGBUS at the copy: every append path (the segment's encoded
    entries, one entry, and the arrays of entries both indexes take) reserves the blocks
    first, and a full disk is a KafkaStorageError with the entries unchanged."""
    import errno
    import struct

    from kreplica.log.time_index import TimeIndex

    idx = OffsetIndex(tmp_path / "i", 0, 1 << 16, writable=True)
    tix = TimeIndex(tmp_path / "t", 0, 1 << 16, writable=True)

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(KafkaStorageError, match="reserving space in"):
        idx.append_encoded(struct.pack(">II", 1, 100))
    with pytest.raises(KafkaStorageError, match="reserving space in"):
        idx.append(1, 100)
    with pytest.raises(KafkaStorageError, match="reserving space in"):
        idx.append_many(np.array([1, 2]), np.array([100, 200]))
    with pytest.raises(KafkaStorageError, match="reserving space in"):
        tix.maybe_append_many(np.array([1000, 2000]), np.array([1, 2]))
    assert idx.entries == 0 and tix.entries == 0
    idx.close()
    tix.close()


def test_an_array_of_the_entries_is_a_copy_that_later_writes_leave_alone(tmp_path):
    idx = OffsetIndex(tmp_path / "i", 0, 800, writable=True)
    idx.append_many(np.array([10, 20, 30]), np.array([1, 2, 3]))
    kept = idx.array()
    idx.truncate_to(20)
    idx.append(25, 7)  # written over the slot that held (20, 2)
    assert kept.tolist() == [(10, 1), (20, 2), (30, 3)]
    assert idx.array().tolist() == [(10, 1), (25, 7)]
    idx.close()  # the map is not held by the copy: it closes
    assert os.path.getsize(idx.path) == 16


@pytest.mark.parametrize("offset", [99, 100 + 2**32])
def test_one_entry_outside_the_segments_relative_range_is_a_storage_error_and_writes_nothing(tmp_path, offset):
    idx = OffsetIndex(tmp_path / "i", 100, 800, writable=True)
    with pytest.raises(KafkaStorageError, match="does not follow"):
        idx.append(offset, 0)
    assert idx.entries == 0
    idx.append(100 + 2**32 - 1, 5)  # the widest relative offset four bytes hold
    assert idx.lookup(100 + 2**32) == (100 + 2**32 - 1, 5)


def test_entries_appended_to_an_empty_index_may_start_at_its_base(tmp_path):
    idx = OffsetIndex(tmp_path / "i", 100, 800, writable=True)
    idx.append_many(np.array([100, 110]), np.array([0, 50]))
    assert idx.entries == 2 and [idx.lookup(o) for o in (100, 109, 110)] == [(100, 0), (100, 0), (110, 50)]
