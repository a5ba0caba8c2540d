import os
import re

import pytest

from kreplica.errors import KafkaStorageError
from kreplica.log.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile
from kreplica.protocol.common import TopicPartition


def test_offset_checkpoint_is_kafkas_text_format(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    f.write({TopicPartition("bar", 1): 42, TopicPartition("bar", 0): 7, TopicPartition("foo", 3): 0})
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n3\nbar 0 7\nbar 1 42\nfoo 3 0\n"
    assert f.read() == {TopicPartition("bar", 0): 7, TopicPartition("bar", 1): 42, TopicPartition("foo", 3): 0}


def test_missing_file_reads_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {}
    assert LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint").read() == []


def test_rewrite_replaces_atomically_and_leaves_no_temp(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint")
    f.write({TopicPartition("t", 0): 1})
    f.write({TopicPartition("t", 0): 2})
    assert f.read() == {TopicPartition("t", 0): 2}
    assert sorted(os.listdir(tmp_path)) == ["log-start-offset-checkpoint"]


def test_leader_epoch_file_format(tmp_path):
    f = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    f.write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"
    assert f.read() == [(0, 0), (3, 120)]


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0 1\nt 1 2\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "zero\n0\n"],
)
def test_malformed_file_is_a_storage_error(tmp_path, text):
    (tmp_path / "cp").write_text(text)
    with pytest.raises(KafkaStorageError, match="malformed"):
        OffsetCheckpointFile(tmp_path / "cp").read()


def test_entries_separated_by_any_run_of_whitespace_are_read(tmp_path):
    """Kafka's reader splits an entry on any whitespace (``\\s+``): a file written by
    another tool with tabs or doubled spaces reads as the same entries."""
    (tmp_path / "cp").write_text("0\n2\nbar  0 7\nfoo\t3\t42 \n")
    assert OffsetCheckpointFile(tmp_path / "cp").read() == {TopicPartition("bar", 0): 7, TopicPartition("foo", 3): 42}
    (tmp_path / "le").write_text("0\n2\n0\t0\n3   120\n")
    assert LeaderEpochCheckpointFile(tmp_path / "le").read() == [(0, 0), (3, 120)]


def test_undecodable_file_is_a_storage_error(tmp_path):
    (tmp_path / "cp").write_bytes(b"0\n1\nt\xff 0 1\n")  # a torn or foreign file
    with pytest.raises(KafkaStorageError, match="malformed"):
        OffsetCheckpointFile(tmp_path / "cp").read()


def test_write_into_missing_dir_is_a_storage_error(tmp_path):
    with pytest.raises(KafkaStorageError):
        OffsetCheckpointFile(tmp_path / "nope" / "cp").write({TopicPartition("t", 0): 1})


def test_a_write_is_made_durable_before_and_after_its_rename(tmp_path, monkeypatch):
    """The temp file is fsynced before it replaces the old one (else a crash could leave
    the name on a file whose bytes never reached the disk), the directory after (else the
    old file could come back)."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").write({TopicPartition("t", 0): 1})
    target = os.path.realpath(tmp_path / "replication-offset-checkpoint")
    assert events == [("fsync", target + ".tmp"), ("replace", str(tmp_path / "replication-offset-checkpoint")),
                      ("fsync", os.path.realpath(tmp_path))]


@pytest.mark.parametrize("text", ["1\n0\n", "0\n1\n3\n", "0\n1\n3 10 7\n", "0\n1\n3 x\n"])
def test_a_bad_leader_epoch_checkpoint_is_refused_naming_the_file(tmp_path, text):
    """A leader-epoch line is exactly ``epoch start_offset``: a third field is damage, not
    something to ignore.  The error names the file, so the operator knows which to fix."""
    path = tmp_path / "t-0" / "leader-epoch-checkpoint"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(KafkaStorageError, match=re.escape(f"malformed checkpoint file {path}")):
        LeaderEpochCheckpointFile(path).read()


def test_an_offset_checkpoint_line_with_a_fourth_field_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n1\nfoo 0 7 9\n")
    with pytest.raises(KafkaStorageError, match=re.escape(str(path)) + ".*malformed line 'foo 0 7 9'"):
        OffsetCheckpointFile(path).read()


@pytest.mark.parametrize("topic", ["a b", ""])
def test_a_topic_name_the_format_cannot_hold_is_refused_before_anything_is_written(tmp_path, topic):
    """A space splits the line into four fields, an empty name leaves two: either way the
    file written could not be read back."""
    f = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    with pytest.raises(ValueError, match="cannot be checkpointed"):
        f.write({TopicPartition(topic, 0): 1})
    assert not os.path.exists(f.path) and os.listdir(tmp_path) == []


def test_a_replacement_that_fails_leaves_the_old_file_and_no_temp_file(tmp_path):
    from kreplica.log.checkpoints import replace_atomically

    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("old")

    def fill(fd):
        os.write(fd, b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        replace_atomically(path, fill)
    assert path.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["leader-epoch-checkpoint"]


def test_a_checkpoint_that_exists_but_cannot_be_read_is_a_storage_error_not_an_empty_one(tmp_path):
    """Only a missing file reads as no entries. A file there but unreadable (here a
    directory in its place; EACCES and EIO alike) read as empty would silently forget
    every leader epoch, and the next write would replace them for good."""
    path = tmp_path / "leader-epoch-checkpoint"
    path.mkdir()
    with pytest.raises(KafkaStorageError, match=re.escape(f"reading {path}")):
        LeaderEpochCheckpointFile(path).read()


def test_a_longer_temp_file_left_by_a_crash_is_written_over_whole(tmp_path):
    """A crash between a write's open and its rename leaves ``<name>.tmp``; a broker's data
    dir is not cleaned of it as a log's directory is. The next write truncates it: written
    over in place, its longer tail stayed after the new entries and the file renamed in
    could not be read back."""
    f = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    (tmp_path / "replication-offset-checkpoint.tmp").write_text("0\n2\nlong-topic-name 0 100\nt 1 5\n")
    f.write({TopicPartition("t", 0): 7})
    assert f.read() == {TopicPartition("t", 0): 7}
    assert sorted(os.listdir(tmp_path)) == ["replication-offset-checkpoint"]


def test_a_short_write_is_retried_until_the_whole_checkpoint_is_written(tmp_path, monkeypatch):
    """os.write may take fewer bytes than asked (interrupted by a signal): the rest is
    written too, or the checkpoint would come back truncated."""
    cp = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    offsets = {TopicPartition("t", p): 1000 + p for p in range(5)}
    cp.write(offsets)
    monkeypatch.undo()
    assert cp.read() == offsets


def test_a_checkpoint_named_relative_to_the_working_directory_is_written_and_read(tmp_path, monkeypatch):
    """A bare file name lives in the working directory: the rename made durable there
    (its directory is ".", not the empty name, which fsync cannot open)."""
    monkeypatch.chdir(tmp_path)
    f = OffsetCheckpointFile("replication-offset-checkpoint")
    f.write({TopicPartition("t", 0): 5})
    assert f.read() == {TopicPartition("t", 0): 5}
    assert sorted(os.listdir(tmp_path)) == ["replication-offset-checkpoint"]
