"""MappedFile: a byte a live view shows never changes under it, and no file is left half replaced."""
from __future__ import annotations

import os

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
