"""Checkpoint files in Kafka's text format, replaced atomically.

Format (Kafka's ``CheckpointFile``): a version line ``0``, a count line, then one
entry per line.  Offset checkpoints (``replication-offset-checkpoint``,
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``) hold
``topic partition offset``; ``leader-epoch-checkpoint`` holds ``epoch start_offset``.

A write goes to ``<name>.tmp``, is fsynced, renamed over the old file and the
directory is fsynced, so a crash leaves either the old or the new file, never a
mix.  A malformed file raises :class:`~kreplica.errors.KafkaStorageError`.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Generic, Iterable, TypeVar

from ..errors import KafkaStorageError
from ..protocol.common import TopicPartition

VERSION = 0
T = TypeVar("T")


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` by ``text`` so that a crash leaves the old or the new content."""
    def write(fd: int) -> None:
        data = text.encode()
        while data:  # a regular file takes it whole; a short write is retried
            data = data[os.write(fd, data):]

    try:
        replace_atomically(path, write)
    except OSError as e:
        raise KafkaStorageError(f"writing {path}: {e}") from e


def replace_atomically(path: str | os.PathLike[str], fill: Callable[[int], None]) -> None:
    """Replace ``path`` by a file ``fill`` writes through the descriptor it is given:
    made durable, renamed over ``path`` and the rename made durable, so a crash leaves
    the old or the new file whole.  A crash before the rename leaves ``<path>.tmp``,
    which a log's open removes; an error removes it at once and raises OSError."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            fill(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")


class CheckpointFile(Generic[T]):
    """Lines ``version``, ``count``, then ``count`` entries formatted by the codec pair."""

    def __init__(self, path: str | os.PathLike[str], fmt: Callable[[T], str],
                 parse: Callable[[list[str]], T]) -> None:
        self._str_path = os.fspath(path)
        self._fmt = fmt
        self._parse = parse

    @property
    def path(self) -> Path:
        return Path(self._str_path)  # made when asked: every Log opens two of these

    def write_entries(self, entries: Iterable[T]) -> None:
        lines = [self._fmt(e) for e in entries]
        write_atomically(self._str_path, "".join(f"{line}\n" for line in [str(VERSION), str(len(lines)), *lines]))

    def read_entries(self) -> list[T]:
        """The entries, or ``[]`` when the file does not exist yet."""
        try:
            with open(self._str_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise KafkaStorageError(f"reading {self._str_path}: {e}") from e
        try:
            lines = raw.decode().splitlines()
            if int(lines[0]) != VERSION:
                raise ValueError(f"unrecognised version {lines[0]!r}")
            count = int(lines[1])
            body = lines[2:]
            if len(body) != count:
                raise ValueError(f"expected {count} entries, found {len(body)}")
            return [self._parse(line.split()) for line in body]
        except (IndexError, ValueError) as e:  # UnicodeDecodeError too
            raise KafkaStorageError(f"malformed checkpoint file {self._str_path}: {e}") from None


def _parse_offset_line(parts: list[str]) -> tuple[TopicPartition, int]:
    if len(parts) != 3:
        raise ValueError(f"malformed line {' '.join(parts)!r}")
    return TopicPartition(parts[0], int(parts[1])), int(parts[2])


class OffsetCheckpointFile:
    """``{TopicPartition: offset}`` in a data dir (HW, recovery point, log start offset)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, lambda e: f"{e[0].topic} {e[0].partition} {e[1]}", _parse_offset_line
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        for tp in offsets:
            if " " in tp.topic or not tp.topic:
                raise ValueError(f"topic name {tp.topic!r} cannot be checkpointed")
        self._file.write_entries(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read_entries())


def _parse_epoch_line(parts: list[str]) -> tuple[int, int]:
    if len(parts) != 2:
        raise ValueError(f"malformed line {' '.join(parts)!r}")
    return int(parts[0]), int(parts[1])


class LeaderEpochCheckpointFile:
    """``[(epoch, start_offset), ...]`` for one partition (``leader-epoch-checkpoint``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: CheckpointFile[tuple[int, int]] = CheckpointFile(
            path, lambda e: f"{e[0]} {e[1]}", _parse_epoch_line
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write_entries(entries)

    def read(self) -> list[tuple[int, int]]:
        return self._file.read_entries()
