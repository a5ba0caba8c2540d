"""The partition directory: which files a log may hold, and the lock that makes it ours.

A directory holding anything else is not a log: opening it raises
:class:`~kreplica.errors.KafkaStorageError` naming the stranger before a single
file is created, so a mistyped path never gets overwritten.
"""
from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from ..errors import KafkaStorageError

SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LOCK = ".lock"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-checkpoint"
KNOWN = {CLEAN_SHUTDOWN, LOCK, LEADER_EPOCH_CHECKPOINT, RECOVERY_POINT_CHECKPOINT}


def check_log_dir(path: Path) -> list[str]:
    """The names in ``path`` (none if it does not exist), after checking that it is a log
    directory: only segment, index, checkpoint and marker files, or their temp files.
    Nothing is changed, so this may run before the directory is locked."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise KafkaStorageError(f"{path} is not a log directory: it is a file") from None
    for name in names:
        base = name[:-4] if name.endswith(".tmp") else name
        if SEGMENT_FILE.match(base) is None and base not in KNOWN:
            raise KafkaStorageError(f"{path} is not a log directory: it holds {name!r}")
    return names


def segment_bases(path: Path) -> list[int]:
    """Base offsets of the segments in ``path`` (sorted), after checking it is a log dir.

    Index files whose ``.log`` is missing are leftovers of an interrupted segment
    creation and are removed; temp files of an interrupted checkpoint write or
    segment replacement (``MappedFile.cut_for_write``) too.  Only the directory's
    lock holder may call this: the temp files of a log open elsewhere are its own.
    """
    names = check_log_dir(path)
    logs = {int(m.group(1)) for n in names if (m := SEGMENT_FILE.match(n)) and m.group(2) == "log"}
    for name in names:
        m = SEGMENT_FILE.match(name)
        if (m and int(m.group(1)) not in logs) or name.endswith(".tmp"):
            os.unlink(os.path.join(path, name))
    return sorted(logs)


class DirLock:
    """An exclusive ``flock`` on ``<dir>/.lock``: one open Log per directory."""

    def __init__(self, path: Path) -> None:
        self._fd = -1  # before the open: __del__ runs for a lock whose open failed too
        try:
            self._fd = os.open(os.path.join(path, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise KafkaStorageError(f"locking {path}: {e}") from e
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            # forget the descriptor too: __del__ closing it again could close a reused one
            os.close(self._fd)
            self._fd = -1
            raise KafkaStorageError(f"{path} is already open in another Log") from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # a Log dropped without close() must not keep its dir locked
        self.release()
