import pytest
from hypothesis import given, settings, strategies as st

from kreplica.log.checkpoints import LeaderEpochCheckpointFile
from kreplica.log.leader_epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache


def make(tmp_path, leo=100):
    state = {"leo": leo}
    cp = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    return LeaderEpochCache(cp, lambda: state["leo"]), state, cp


def test_assign_and_end_offsets(tmp_path):
    c, state, _ = make(tmp_path)
    assert c.latest_epoch == UNDEFINED_EPOCH
    assert c.end_offset_for(0) == (-1, -1)
    assert c.assign(1, 0)
    assert not c.assign(1, 5)  # the same leader appending again
    c.assign(2, 10)
    c.assign(4, 30)
    assert c.entries == [(1, 0), (2, 10), (4, 30)]
    assert c.latest_epoch == 4
    assert c.end_offset_for(1) == (1, 10)
    assert c.end_offset_for(2) == (2, 30)
    assert c.end_offset_for(3) == (2, 30)  # epoch 3 never wrote: answer from the floor epoch
    assert c.end_offset_for(4) == (4, 100)  # the latest epoch runs to the LEO
    assert c.end_offset_for(0) == (0, 0)  # older than everything known
    assert c.end_offset_for(5) == (-1, -1)
    assert c.end_offset_for(-1) == (-1, -1)


def test_assign_drops_conflicting_entries(tmp_path):
    c, _, _ = make(tmp_path)
    c.assign(1, 0)
    c.assign(2, 10)
    c.assign(3, 20)
    c.assign(2, 15)  # a lower epoch re-assigned: everything from epoch 2 on is replaced
    assert c.entries == [(1, 0), (2, 15)]
    c.assign(5, 12)  # an earlier start offset: entries starting at/after it go
    assert c.entries == [(1, 0), (5, 12)]


def test_truncation_from_end_and_start(tmp_path):
    c, _, cp = make(tmp_path)
    for e, s in [(0, 0), (1, 10), (2, 20), (3, 30)]:
        c.assign(e, s)
    c.truncate_from_end(20)
    assert c.entries == [(0, 0), (1, 10)]
    c.truncate_from_end(50)  # beyond the last start: nothing to drop
    assert c.entries == [(0, 0), (1, 10)]
    c.truncate_from_start(15)
    assert c.entries == [(1, 15)]
    c.truncate_from_start(5)  # below the first start: nothing to drop
    assert c.entries == [(1, 15)]
    assert cp.read() == [(1, 15)]
    c.clear()
    assert cp.read() == [] and c.latest_epoch == -1


def test_truncation_from_end_at_the_latest_epochs_start_drops_it(tmp_path):
    """The log truncated to where the latest epoch began holds nothing it wrote: the
    epoch goes (Kafka drops every entry starting at or after the end offset)."""
    c, _, cp = make(tmp_path)
    c.assign(0, 0)
    c.assign(1, 20)
    c.truncate_from_end(20)
    assert c.entries == [(0, 0)] and cp.read() == [(0, 0)]
    assert c.end_offset_for(1) == (-1, -1)


def test_persisted_and_reloaded(tmp_path):
    c, _, _ = make(tmp_path)
    c.assign(0, 0)
    c.assign(7, 99)
    reloaded, _, _ = make(tmp_path)
    assert reloaded.entries == [(0, 0), (7, 99)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n7 99\n"


@settings(deadline=None)  # each example fsyncs checkpoint files: slow on a busy disk
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 1000)), max_size=30))
def test_entries_stay_strictly_increasing(tmp_path_factory, ops):
    c, _, _ = make(tmp_path_factory.mktemp("lec"))
    for epoch, start in ops:
        c.assign(epoch, start)
        epochs = [e for e, _ in c.entries]
        starts = [s for _, s in c.entries]
        assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))
        # either the new entry is last, or it was the same leader appending later
        assert c.entries[-1] == (epoch, start) or (c.latest_epoch == epoch and c.start_offset_for(epoch) <= start)


def test_assigning_the_latest_epoch_at_its_own_start_again_changes_nothing(tmp_path, monkeypatch):
    """Every write of the checkpoint costs an fsync of it and of its directory."""
    c, _, cp = make(tmp_path)
    assert c.assign(3, 10)
    writes = []
    real = cp.write
    monkeypatch.setattr(cp, "write", lambda entries: (writes.append(list(entries)), real(entries))[1])
    assert not c.assign(3, 10)
    assert not c.assign(3, 12)
    assert writes == [] and c.entries == [(3, 10)]


def test_the_start_of_an_epoch_the_cache_never_held_is_undefined(tmp_path):
    """``start_offset_for`` answers only for an epoch the cache holds: an epoch between two
    known ones (a leader that wrote nothing here) has no start, not the next one's."""
    c, _, _ = make(tmp_path)
    c.assign(1, 0)
    c.assign(3, 10)
    assert (c.start_offset_for(1), c.start_offset_for(3)) == (0, 10)
    assert c.start_offset_for(2) == c.start_offset_for(0) == c.start_offset_for(4) == -1


def test_truncation_from_end_past_the_latest_epochs_start_writes_nothing(tmp_path, monkeypatch):
    """A truncation that keeps every epoch (the new end past the latest one's start, one
    past included) leaves the checkpoint alone: each write costs an fsync of the file and
    of its directory, and a log truncation asks on every truncate_to."""
    c, _, cp = make(tmp_path)
    c.assign(1, 0)
    c.assign(3, 10)
    writes = []
    real = cp.write
    monkeypatch.setattr(cp, "write", lambda entries: (writes.append(list(entries)), real(entries))[1])
    c.truncate_from_end(11)
    c.truncate_from_end(50)
    assert writes == [] and c.entries == [(1, 0), (3, 10)]


def test_truncation_from_start_at_the_first_epochs_start_writes_nothing(tmp_path):
    """Every open truncates the cache from its log start: when the first epoch starts
    there already (or later), the checkpoint is not replaced, which would cost an fsync of
    the file and of its directory per partition per open."""
    c, _, cp = make(tmp_path)
    c.assign(1, 5)
    c.assign(3, 10)
    before = cp.path.stat().st_ino  # a write replaces the file: a new inode
    c.truncate_from_start(5)
    c.truncate_from_start(2)
    assert cp.path.stat().st_ino == before and c.entries == [(1, 5), (3, 10)]


def test_an_epoch_or_start_offset_below_0_is_refused_and_nothing_is_written(tmp_path):
    c, _, cp = make(tmp_path)
    c.assign(1, 0)
    for epoch, start in [(2, -1), (-1, 5)]:
        with pytest.raises(ValueError):
            c.assign(epoch, start)
    assert c.entries == [(1, 0)] and cp.read() == [(1, 0)]


def test_the_earliest_epoch_is_the_first_held(tmp_path):
    c, _, _ = make(tmp_path)
    assert c.earliest_epoch == UNDEFINED_EPOCH
    c.assign(2, 0)
    c.assign(5, 40)
    assert (c.earliest_epoch, c.latest_epoch) == (2, 5)
    c.truncate_from_start(50)  # epoch 2's offsets gone: 5 is the earliest left
    assert c.earliest_epoch == 5


def test_a_truncation_from_a_negative_end_keeps_every_epoch_and_writes_nothing(tmp_path):
    """Kafka's truncateFromEnd acts only for an end offset >= 0: an undefined end (-1)
    is no truncation, not one that drops every epoch (and writes the empty checkpoint)."""
    c, _, cp = make(tmp_path)
    c.assign(1, 0)
    c.assign(3, 10)
    before = cp.path.stat().st_ino  # a write replaces the file: a new inode
    c.truncate_from_end(-1)
    assert c.entries == [(1, 0), (3, 10)] and cp.path.stat().st_ino == before


def test_a_cache_read_back_from_its_checkpoint_is_not_rewritten_by_a_flush(tmp_path):
    """What was read from the checkpoint is already durable: a flush of a freshly loaded
    cache (a log's first flush after every open) leaves the file alone until an epoch is
    learnt from appended batches."""
    c, _, cp = make(tmp_path)
    c.assign(1, 0)
    c.assign(3, 10)
    loaded = LeaderEpochCache(cp, lambda: 100)
    before = cp.path.stat().st_ino  # a write replaces the file: a new inode
    loaded.flush()
    assert cp.path.stat().st_ino == before
    loaded.assign(4, 20, durable=False)
    loaded.flush()
    assert cp.path.stat().st_ino != before and cp.read() == [(1, 0), (3, 10), (4, 20)]
