import bisect
import os

import numpy as np
from hypothesis import given, settings, strategies as st

from kreplica.log.time_index import TimeIndex


def test_format_and_trim(tmp_path):
    ti = TimeIndex(tmp_path / "00000000000000000010.timeindex", 10, 1200, writable=True)
    assert os.path.getsize(ti.path) == 1200
    assert ti.maybe_append(1_700_000_000_000, 12)
    ti.seal()
    assert ti.path.read_bytes() == (1_700_000_000_000).to_bytes(8, "big") + (2).to_bytes(4, "big")


def test_only_newer_timestamps_are_appended(tmp_path):
    ti = TimeIndex(tmp_path / "t", 0, 1200, writable=True)
    assert ti.maybe_append(100, 1)
    assert not ti.maybe_append(100, 2)
    assert not ti.maybe_append(90, 3)
    assert ti.maybe_append_many(np.array([95, 120, 110, 130]), np.array([4, 5, 6, 7])) == 2
    assert ti.array()["timestamp"].tolist() == [100, 120, 130]


def test_lookup_and_truncate(tmp_path):
    ti = TimeIndex(tmp_path / "t", 1000, 1200, writable=True)
    assert ti.lookup(5) == (-1, 1000)
    ti.maybe_append_many(np.array([10, 20, 30]), np.array([1001, 1005, 1009]))
    assert ti.lookup(9) == (-1, 1000)
    assert ti.lookup(10) == (10, 1001)
    assert ti.lookup(29) == (20, 1005)
    assert ti.lookup(10**15) == (30, 1009)
    ti.truncate_to(1005)
    assert ti.last_entry() == (10, 1001)
    assert ti.lookup(25) == (10, 1001)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-5, 10**13), max_size=2000, unique=True), st.lists(st.integers(-10, 10**13), max_size=40))
def test_random_lookups_match_a_sorted_map(tmp_path_factory, stamps, targets):
    stamps.sort()
    ti = TimeIndex(tmp_path_factory.mktemp("ti") / "t", 0, 12 * 2000, writable=True)
    ti.maybe_append_many(np.array(stamps, dtype=np.int64), np.arange(len(stamps), dtype=np.int64))
    assert ti.entries == len([s for s in stamps if s > -1])  # nothing below the "no entry" marker
    kept = [s for s in stamps if s > -1]
    for t in targets:
        i = bisect.bisect_right(kept, t) - 1
        assert ti.lookup(t) == ((kept[i], stamps.index(kept[i])) if i >= 0 else (-1, 0))


def test_many_appends_take_a_newer_timestamp_at_the_last_entrys_offset_as_one_append_does(tmp_path):
    """Kafka's rule: an entry may repeat the last entry's offset with a newer timestamp."""
    one = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 1200, writable=True)
    many = TimeIndex(tmp_path / "00000000000000000001.timeindex", 0, 1200, writable=True)
    assert one.maybe_append(10, 5) and one.maybe_append(20, 5)
    assert many.maybe_append_many(np.array([10]), np.array([5])) == 1
    assert many.maybe_append_many(np.array([20]), np.array([5])) == 1
    assert many.array().tolist() == one.array().tolist()
    one.close()
    many.close()


def test_a_newer_timestamp_at_an_offset_below_the_last_entrys_is_refused(tmp_path):
    """Offsets in the time index never go back (Kafka's TimeIndex refuses such an entry):
    one append refuses it as a run of appends does."""
    ti = TimeIndex(tmp_path / "t", 0, 1200, writable=True)
    assert ti.maybe_append(100, 5)
    assert not ti.maybe_append(200, 3)
    assert ti.maybe_append_many(np.array([200]), np.array([3])) == 0
    assert ti.array().tolist() == [(100, 5)]
    assert ti.lookup(10**6) == (100, 5)
