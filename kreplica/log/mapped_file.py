"""MappedFile: one segment file (``.log``, ``.index``, ``.timeindex``) behind an mmap.

Theory of operation.  A writable file is extended (sparsely) to its preallocated
length and mapped whole for write.  Index entries are written through the map;
writing through a map into a sparse file would turn a full disk into SIGBUS, so
disk space is reserved with ``posix_fallocate`` in chunks just ahead of the write
position: ENOSPC or EFBIG (file-size limit) then surface as
:class:`~kreplica.errors.KafkaStorageError` before a byte is copied, and what was
written stays readable.  Whole batches go in with ``pwrite`` (``write_at``): on
this machine a copy through a fresh map costs 2-3x the kernel's copy, because
every new page takes a fault; the map still sees the bytes (one page cache).
The ``.log`` reserves its blocks in larger chunks ahead of the writes too: a
pwrite into reserved blocks skips ext4's per-page delayed-allocation bookkeeping
(about 10% of a 1 MiB write here).  A reservation grows with the file: ahead by
what the file already holds, from ``MIN_RESERVE`` up to the chunk.  On tmpfs
(``/dev/shm``, where simulations keep their logs) ``posix_fallocate`` zeroes real
memory, so a small log must not pay for a full chunk it will never fill.
``seal`` trims the file to its data and drops the write map (``flush`` is what
fsyncs); a sealed file is mapped read-only, lazily, only when read.
A map still exported to a reader (a zero-copy view) cannot be closed; it is then
left to the garbage collector, which unmaps it when the last view goes.  While such
a map lives the file is never shortened (a view past the end would SIGBUS): it is
replaced by a copy of what stays, sparse to its old length, whose zeros readers and
recovery take as the end.
A view's bytes never change under it: before the write position moves back over
bytes a live view may map (``cut_for_write``, a truncation), the file is replaced by
a copy of what stays, and the views keep the old file.  A socket copies what it
sends; an in-process answer carries a view, and without this a deposed leader's new
batches appeared under an answer still on its way (swarm control-plane-chaos seed
8071).  Only a truncation pays, and only while views live; every read stays zero-copy.
A simulated power loss (``zero_tail``) spares live views the same way: it takes the
page cache, not what the node had already sent.
"""
from __future__ import annotations

import contextlib
import errno
import mmap
import os
import sys
import weakref
from pathlib import Path
from typing import Iterator

from ..errors import KafkaStorageError
from .checkpoints import replace_atomically

RESERVE_CHUNK = 1 << 20
#: The first reservation of a file; each later one reaches as far ahead as the file holds.
MIN_RESERVE = 64 << 10
PAGE = mmap.PAGESIZE
# Linux >= 5.14; Python 3.11's mmap module does not name it yet.
_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform.startswith("linux") else None)
#: Below this a reader takes one or two page faults anyway (the kernel maps 64 KiB around each).
PREFAULT_MIN = 64 << 10


# Maps that readers still hold, by file, across MappedFile instances: a log reopened in
# the same process (a broker restarted in a simulation) must not shorten a file that
# an earlier instance's views still cover.
_ORPHANS: dict[str, list[weakref.ref[mmap.mmap]]] = {}


def _storage_error(what: str, path: str, e: OSError) -> KafkaStorageError:
    return KafkaStorageError(f"{what} {path}: {e.strerror or e}")


class MappedFile:
    def __init__(self, path: str | os.PathLike[str], reserve_chunk: int = RESERVE_CHUNK) -> None:
        # A str, not a Path: every open, map and fsync takes it, and a broker restart in a
        # simulation opens hundreds of these (pathlib's parsing was ~20% of a log's open).
        self.filename: str = os.fspath(path)
        self._reserve_chunk = reserve_chunk
        self._fd = -1  # kept open only by files written often (the .log); indexes reopen
        self._writable = False
        self._mm: mmap.mmap | None = None
        self.length = 0  # mapped length of a writable file
        self.reserved = 0  # bytes known to be backed by disk blocks
        self.flushed = 0  # bytes known to be durable
        self._prefaulted = 0  # the map's pages below this were mapped by prefault()

    @property
    def path(self) -> Path:
        return Path(self.filename)

    @property
    def writable(self) -> bool:
        return self._writable

    def open_for_write(self, data_size: int, length: int, keep_fd: bool = True) -> mmap.mmap:
        """Map the file for write at ``length`` bytes, ``data_size`` of them already data.
        Without ``keep_fd`` only the map's own descriptor stays open (CPython's mmap
        keeps a dup): an open log holds five, sealed segments none until read."""
        try:
            self._fd = os.open(self.filename, os.O_RDWR | os.O_CREAT, 0o644)
            # never shorter than it is: an earlier reader's view may reach its end
            size = os.fstat(self._fd).st_size
            length = max(length, data_size, size, 1)
            if size != length:
                os.ftruncate(self._fd, length)
            self._release()
            self._mm = mmap.mmap(self._fd, length, access=mmap.ACCESS_WRITE)
        except OSError as e:
            self._close_fd()
            raise _storage_error("opening", self.filename, e) from e
        self._writable = True
        if not keep_fd:
            self._close_fd()
        self.length = length
        self.reserved = data_size
        self.flushed = 0  # nothing is known durable: the first flush fsyncs
        return self._mm

    def reserve(self, end: int) -> None:
        """Make sure bytes ``[0, end)`` have disk blocks (KafkaStorageError when they can't)."""
        if end <= self.reserved:
            return
        if end > self.length:
            raise KafkaStorageError(f"{self.filename}: write past the preallocated {self.length} bytes")
        ahead = min(self._reserve_chunk, max(MIN_RESERVE, self.reserved))
        new = min(self.length, max(end, self.reserved + ahead))
        try:
            self._fallocate(new)
        except OSError as e:
            if new == end or e.errno not in (errno.ENOSPC, errno.EFBIG):
                raise _storage_error("reserving space in", self.filename, e) from e
            try:  # a whole chunk does not fit: what this write needs may still
                self._fallocate(new := end)
            except OSError as e2:
                raise _storage_error("reserving space in", self.filename, e2) from e2
        self.reserved = new

    def _fallocate(self, end: int) -> None:
        try:
            with self._descriptor() as fd:
                os.posix_fallocate(fd, self.reserved, end - self.reserved)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise

    def write_at(self, position: int, data) -> None:
        """Copy ready bytes in with ``pwrite``: the page cache the map reads is the same,
        and the kernel's copy skips the page faults a copy through the map would take
        (ENOSPC comes back as an error here too).  Used for whole batches from elsewhere."""
        end = position + len(data)
        self.reserve(end)
        with memoryview(data) as view:
            done = 0
            try:
                while done < len(view):
                    done += os.pwrite(self._fd, view[done:], position + done)
            except OSError as e:
                raise _storage_error("writing", self.filename, e) from e
        self.reserved = max(self.reserved, end)

    def write_run(self, position: int, data, run) -> None:
        """``write_at`` for framed batches whose CRCs are checked as they are copied
        (``BatchRun.write_to``): CorruptMessage, or KafkaStorageError on an I/O error,
        and then no written byte remains."""
        end = position + run.nbytes
        self.reserve(end)
        try:
            run.write_to(self._fd, data, position)
        except OSError as e:
            raise _storage_error("writing", self.filename, e) from e
        self.reserved = max(self.reserved, end)

    def map(self, size: int) -> mmap.mmap | None:
        """The write map, or a read-only map of the first ``size`` bytes (None when empty)."""
        if self._mm is None and size > 0:
            try:
                with open(self.filename, "rb") as f:
                    self._mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
            except OSError as e:
                raise _storage_error("mapping", self.filename, e) from e
        return self._mm

    def prefault(self, start: int, end: int) -> None:
        """Map bytes ``[start, end)`` of the map into this process in one call, for a reader
        that will touch all of them (a follower checksums and copies a whole fetch): one
        ``MADV_POPULATE_READ`` instead of a page fault per 64 KiB, which cost a follower
        about 100 us per MiB here.  Does nothing where the kernel lacks it."""
        global _POPULATE_READ
        # what an earlier call mapped is skipped (the second follower of a fetch): walking
        # mapped pages again still costs ~10 us per MiB
        start = max(start, self._prefaulted)
        if self._mm is None or _POPULATE_READ is None or end - start < PREFAULT_MIN:
            return
        first = start - start % PAGE
        try:
            self._mm.madvise(_POPULATE_READ, first, end - first)
        except OSError:
            _POPULATE_READ = None  # an older kernel: the faults will do
            return
        self._prefaulted = max(self._prefaulted, end - end % PAGE)

    def flush(self, end: int) -> None:
        """Make bytes ``[0, end)`` durable (msync of what changed, then fsync)."""
        if not self.writable or end <= self.flushed:
            return
        self.sync_range(self.flushed, end)
        self.flushed = end

    def sync_range(self, start: int, end: int) -> None:
        """Make bytes ``[start, end)`` durable as they are now, whatever ``flushed`` says
        (a truncation's zeroes over data already durable)."""
        if not self.writable or end <= start:
            return
        first = start - start % PAGE
        try:
            assert self._mm is not None
            self._mm.flush(first, min(end, self.length) - first)
            with self._descriptor() as fd:
                os.fsync(fd)
        except OSError as e:
            raise _storage_error("flushing", self.filename, e) from e

    def drop_cache(self, end: int) -> None:
        """Let the kernel reclaim the durable pages below ``end`` (keeps RSS bounded)."""
        if self._mm is not None and end > PAGE:
            self._mm.madvise(mmap.MADV_DONTNEED, 0, end - end % PAGE)

    def seal(self, size: int) -> None:
        """Trim to ``size`` bytes and drop the write map (dirty pages stay in the page
        cache; ``flush`` first for durability)."""
        if not self.writable:
            return
        try:
            self._release()
            if not self.has_live_views():
                with self._descriptor() as fd:
                    os.ftruncate(fd, size)
        except OSError as e:
            raise _storage_error("trimming", self.filename, e) from e
        finally:
            self._release()
            self._close_fd()
            self._writable = False

    def truncate_file(self, size: int) -> None:
        """Cut a file that is not open for write to ``size`` bytes.  While readers still
        map it, it keeps its length (a view past EOF would SIGBUS) and the views keep
        their bytes: the file is replaced by a copy of its first ``size`` bytes."""
        self._release()
        try:
            if not self.has_live_views():
                os.truncate(self.filename, size)
                return
            with open(self.filename, "rb") as f:
                _replace_with_prefix(self.filename, f.fileno(), size, os.fstat(f.fileno()).st_size)
        except OSError as e:
            raise _storage_error("truncating", self.filename, e) from e

    def cut_for_write(self, keep: int) -> bool:
        """Before appends rewrite a writable file from ``keep`` on (a truncation): if a
        reader's view still maps the file, replace it by a copy of its first ``keep``
        bytes, made durable, and leave the views the old one.  True if it was replaced
        (what follows ``keep`` is then a hole: no zeroing needed)."""
        assert self._writable and self._fd >= 0, "cut_for_write needs the file open for write"
        self._release()  # closes the map, unless a view holds it (it is then an orphan)
        if not self.has_live_views():
            try:
                self._mm = mmap.mmap(self._fd, self.length, access=mmap.ACCESS_WRITE)
            except OSError as e:
                raise _storage_error("mapping", self.filename, e) from e
            return False
        _replace_with_prefix(self.filename, self._fd, keep, self.length)
        self._close_fd()
        self.open_for_write(keep, self.length)
        self.flushed = keep  # the copy was fsynced
        return True

    def has_live_views(self) -> bool:
        return _has_live_views(self.filename)

    def fsync(self) -> None:
        try:
            fd = os.open(self.filename, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise _storage_error("flushing", self.filename, e) from e

    def _release(self) -> None:
        mm, self._mm = self._mm, None
        self._prefaulted = 0
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                # a reader holds a view: the map lives until the view is dropped
                _ORPHANS.setdefault(os.path.abspath(self.filename), []).append(weakref.ref(mm))

    @contextlib.contextmanager
    def _descriptor(self) -> Iterator[int]:
        if self._fd >= 0:
            yield self._fd
            return
        fd = os.open(self.filename, os.O_RDWR)
        try:
            yield fd
        finally:
            os.close(fd)

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        self._release()
        self._close_fd()
        self._writable = False

    def __del__(self) -> None:  # dropped without close(): do not leak the descriptor
        self._close_fd()

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.filename)


def _has_live_views(filename: str) -> bool:
    """Does a map of ``filename`` that could not be closed still back a reader's view?"""
    key = os.path.abspath(filename)
    live = [r for r in _ORPHANS.get(key, ()) if r() is not None]
    if live:
        _ORPHANS[key] = live
    else:
        _ORPHANS.pop(key, None)
    return bool(live)


def zero_tail(filename: str, start: int, end: int) -> None:
    """Zero bytes ``[start, end)`` of a file nothing has open for write, as a power loss
    leaves what the page cache held.  Bytes a reader's live view still maps stay as the
    view shows them: what a node had already sent does not vanish with its page cache.
    The file is then replaced by a copy of its first ``start`` bytes (holes after them
    read as zeros)."""
    try:
        with open(filename, "r+b") as f:
            fd = f.fileno()
            if not _has_live_views(filename):
                while start < end:
                    start += os.pwrite(fd, bytes(min(end - start, 1 << 20)), start)
                return
            _replace_with_prefix(filename, fd, start, os.fstat(fd).st_size)
    except OSError as e:
        raise _storage_error("zeroing the tail of", filename, e) from e


def _replace_with_prefix(filename: str, src: int, keep: int, length: int) -> None:
    """Atomically replace ``filename`` by a durable copy of its first ``keep`` bytes (from
    the open descriptor ``src``), sparse to ``length``; maps of the old file keep it."""
    def fill(dst: int) -> None:
        _copy_prefix(src, dst, keep)
        os.ftruncate(dst, length)

    try:
        replace_atomically(filename, fill)
    except OSError as e:
        raise _storage_error("replacing", filename, e) from e
    # Every orphan map of this name maps the old file now: none covers the new one.
    _ORPHANS.pop(os.path.abspath(filename), None)


def _copy_prefix(src: int, dst: int, size: int) -> None:
    """Copy bytes ``[0, size)`` of ``src`` to the start of ``dst`` (in the kernel where it can)."""
    done = 0
    try:
        while done < size:
            n = os.copy_file_range(src, dst, size - done, done, done)
            if n == 0:
                raise OSError(errno.EIO, f"{size - done} bytes short of the end")
            done += n
        return
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    while done < size:  # a file system without copy_file_range
        chunk = os.pread(src, min(1 << 20, size - done), done)
        if not chunk:
            raise OSError(errno.EIO, f"{size - done} bytes short of the end")
        done += os.pwrite(dst, chunk, done)
