"""MappedFile: a byte a live view shows never changes under it, and no file is left half replaced."""
from __future__ import annotations

import errno
import os

import pytest

from fd_count import fds_under
from kreplica.log.mapped_file import MappedFile, zero_tail


def written(tmp_path, data: bytes) -> str:
    name = str(tmp_path / "00000000000000000000.log")
    with open(name, "wb") as f:
        f.write(data)
    return name


def a_view_left_behind(name: str, size: int) -> memoryview:
    """A reader's view whose map its file could not close (a fetch answer on its way)."""
    f = MappedFile(name)
    view = memoryview(f.map(size))[:size]
    f.close()  # the view holds the map: it is left to the view
    return view


def test_zero_tail_zeroes_in_place_when_no_view_maps_the_file(tmp_path):
    name = written(tmp_path, b"a" * 100 + b"b" * 100)
    ino = os.stat(name).st_ino
    zero_tail(name, 100, 200)
    assert open(name, "rb").read() == b"a" * 100 + bytes(100)
    assert os.stat(name).st_ino == ino


def test_zero_tail_leaves_a_live_view_its_bytes(tmp_path):
    """A power loss takes the page cache, not what the node had already sent."""
    name = written(tmp_path, b"a" * 100 + b"b" * 100)
    view = a_view_left_behind(name, 200)
    zero_tail(name, 100, 200)
    assert bytes(view) == b"a" * 100 + b"b" * 100
    assert open(name, "rb").read() == b"a" * 100 + bytes(100)  # same length, tail zeroed
    assert not os.path.exists(name + ".tmp")
    assert not MappedFile(name).has_live_views()  # the view maps the old file, not this one
    del view


def test_cut_for_write_cuts_in_place_without_views_and_replaces_the_file_with_them(tmp_path):
    name = written(tmp_path, b"")
    f = MappedFile(name)
    f.open_for_write(0, 1 << 16)
    f.write_at(0, b"x" * 300)
    assert f.cut_for_write(200) is False  # no view: appends may rewrite in place
    view = memoryview(f.map(300))[100:300]
    assert f.cut_for_write(100) is True
    f.write_at(100, b"y" * 200)
    assert bytes(view) == b"x" * 200
    assert bytes(f.map(300)[:300]) == b"x" * 100 + b"y" * 200
    assert f.flushed == 100  # the copy was made durable
    del view
    f.close()
    assert fds_under(tmp_path) == 0  # the replaced file's descriptor went with it


@pytest.mark.parametrize("code", ["ENOSPC", "EFBIG"])
def test_a_reservation_refused_a_whole_chunk_still_takes_what_the_write_needs(tmp_path, monkeypatch, code):
    """ENOSPC (a full disk) or EFBIG (a file-size limit) for the chunk reserved ahead is
    not yet the end: the bytes this write needs may still fit, and only their refusal is
    the error."""
    from kreplica.errors import KafkaStorageError

    f = MappedFile(str(tmp_path / "00000000000000000000.log"))
    f.open_for_write(0, 1 << 20)
    real = os.posix_fallocate

    def room_for_1000_bytes(fd, offset, length):
        if offset + length > 1000:
            raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))
        return real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", room_for_1000_bytes)
    f.write_at(0, b"x" * 500)
    assert f.reserved == 500
    with pytest.raises(KafkaStorageError, match="reserving space in"):
        f.write_at(500, b"y" * 600)
    f.close()


@pytest.mark.parametrize("code", ["EOPNOTSUPP", "EINVAL"])
def test_a_file_system_without_fallocate_still_takes_every_write(tmp_path, monkeypatch, code):
    """Where the file system cannot reserve blocks ahead (posix_fallocate unsupported),
    the writes go in unreserved, as on any file system without it: no storage error."""
    def unsupported(fd, offset, length):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    f = MappedFile(str(tmp_path / "00000000000000000000.log"))
    f.open_for_write(0, 1 << 20)
    f.write_at(0, b"x" * 500)
    f.write_at(500, b"y" * 300_000)
    assert bytes(f.map(300_500)[:501]) == b"x" * 500 + b"y"
    f.flush(300_500)
    f.close()
    assert os.path.getsize(tmp_path / "00000000000000000000.log") == 1 << 20


def test_a_prefault_from_inside_a_page_maps_the_pages_and_keeps_prefaulting_on(tmp_path):
    """A fetch starts where its batch does, seldom on a page boundary: the madvise starts
    at that page, and the pages up to the end are mapped (a later call skips them)."""
    from kreplica.log import mapped_file

    size = 1 << 20
    name = written(tmp_path, b"z" * size)
    f = MappedFile(name)
    f.map(size)
    assert mapped_file._POPULATE_READ is not None  # Linux >= 5.14
    f.prefault(100, size - 100)
    assert mapped_file._POPULATE_READ is not None
    assert f._prefaulted == (size - 100) - (size - 100) % mapped_file.PAGE
    f.close()


def test_a_small_file_reserves_ahead_only_as_far_as_it_holds(tmp_path):
    """On tmpfs a reservation is real memory: a small log must not pay for a whole chunk."""
    from kreplica.log.mapped_file import MIN_RESERVE

    f = MappedFile(str(tmp_path / "00000000000000000000.log"), reserve_chunk=1 << 20)
    f.open_for_write(0, 4 << 20)
    f.write_at(0, b"x" * 100)
    assert f.reserved == MIN_RESERVE
    f.write_at(MIN_RESERVE, b"x" * 100)
    assert f.reserved == 2 * MIN_RESERVE
    f.close()


def test_opening_for_write_never_shortens_the_file(tmp_path):
    """A file longer than the length asked for (kept at its reserved length while a reader
    mapped it) keeps its length: an earlier reader's view may reach its end."""
    name = written(tmp_path, b"a" * 100 + bytes(8092))
    f = MappedFile(name)
    f.open_for_write(100, 4096)
    assert os.path.getsize(name) == 8192 and f.length == 8192
    f.close()


@pytest.mark.parametrize("code", ["EXDEV", "ENOSYS", "EINVAL", "EOPNOTSUPP"])
def test_a_replacement_on_a_file_system_without_copy_file_range_copies_only_the_prefix(tmp_path, monkeypatch, code):
    """copy_file_range refused (another device, an old kernel, a file system without it):
    the copy falls back to pread/pwrite and still keeps exactly the first bytes."""
    name = written(tmp_path, b"a" * 100 + b"b" * 100)
    view = a_view_left_behind(name, 200)

    def refused(*args):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    monkeypatch.setattr(os, "copy_file_range", refused)
    zero_tail(name, 100, 200)
    assert bytes(view) == b"a" * 100 + b"b" * 100
    assert open(name, "rb").read() == b"a" * 100 + bytes(100)
    assert not os.path.exists(name + ".tmp")
    del view


@pytest.mark.parametrize("state", ["writable", "read-only"])
def test_deleting_a_mapped_file_lets_go_of_its_map_and_descriptor_at_once(tmp_path, state):
    # A deleted segment's file must not stay open (its blocks held on disk) for as long
    # as something still refers to the object.
    from fd_count import fds_under

    f = MappedFile(tmp_path / "00000000000000000000.log")
    f.open_for_write(0, 4096)
    f.write_at(0, b"x" * 100)
    if state == "read-only":
        f.seal(100)
        assert f.map(100) is not None
    assert fds_under(tmp_path) > 0
    f.delete()
    assert fds_under(tmp_path) == 0 and not os.listdir(tmp_path)


def test_an_open_for_write_that_fails_keeps_no_descriptor(tmp_path, monkeypatch):
    # The file cannot get its preallocated length (ENOSPC): the open raises a storage
    # error and closes what it opened, so a retry (a truncation or a roll tried again)
    # does not leak one descriptor per attempt.
    from fd_count import fds_under

    from kreplica.errors import KafkaStorageError

    f = MappedFile(tmp_path / "00000000000000000000.log")

    def no_space(fd, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "ftruncate", no_space)
    for _ in range(2):
        with pytest.raises(KafkaStorageError, match="No space"):
            f.open_for_write(0, 4096)
    assert fds_under(tmp_path) == 0 and not f.writable
    monkeypatch.undo()
    f.open_for_write(0, 4096)
    f.close()
    assert fds_under(tmp_path) == 0


def test_a_view_once_released_no_longer_keeps_its_file_from_being_cut_in_place(tmp_path):
    """Only a live view costs a replacement: once the last one is released, the file the
    map was left to is cut in place (same inode, shortened), as if no reader had been."""
    name = written(tmp_path, b"a" * 100 + b"b" * 100)
    view = a_view_left_behind(name, 200)
    assert MappedFile(name).has_live_views()
    view.release()
    del view
    f = MappedFile(name)
    assert not f.has_live_views()
    ino = os.stat(name).st_ino
    zero_tail(name, 150, 200)
    f.truncate_file(120)
    assert os.stat(name).st_ino == ino and open(name, "rb").read() == b"a" * 100 + b"b" * 20


def test_a_map_made_again_after_its_release_is_prefaulted_from_its_start(tmp_path):
    """What prefault mapped belongs to one map: after the file's map is let go (a seal, a
    close, a truncation) the next read map's pages are populated again, not skipped as
    if the old map's were still there."""
    size = 1 << 20
    name = written(tmp_path, b"z" * size)

    class Spy:
        def __init__(self, mm):
            self.mm, self.calls = mm, []

        def madvise(self, *args):
            self.calls.append(args[1:])
            return self.mm.madvise(*args)

    f = MappedFile(name)
    for _ in range(2):
        real = f.map(size)
        f._mm = spy = Spy(real)
        f.prefault(0, size)
        assert spy.calls == [(0, size)]
        f._mm = real
        f.close()
    assert f._prefaulted == 0


def test_the_orphan_maps_remembered_for_a_file_are_only_those_a_view_still_holds(tmp_path):
    """A map closed under a reader's view is remembered until the view goes; once one
    view is released its map is forgotten at the next look even while another lives,
    so a file truncated again and again under live views keeps no growing list."""
    from kreplica.log import mapped_file

    size = 1 << 16
    name = written(tmp_path, b"z" * size)
    key = os.path.abspath(name)
    f = MappedFile(name)
    views = []
    for _ in range(3):
        views.append(memoryview(f.map(size)))
        f.close()  # the map is exported: kept as an orphan
    assert len(mapped_file._ORPHANS[key]) == 3
    views.pop(0).release()
    views.pop(0).release()
    assert f.has_live_views()
    assert len(mapped_file._ORPHANS[key]) == 1
    views.pop().release()
    assert not f.has_live_views()
    assert key not in mapped_file._ORPHANS
