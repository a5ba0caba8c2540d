"""Batch fingerprints read straight from a replica's log, for the checker.

A batch is identified by (base offset, last offset, leader epoch, CRC).  The
v2 CRC covers attributes..end, so the leader's restamping of offsets and epoch
(both outside it) keeps the producer's CRC: the same produced batch has the same
CRC on every replica, and two different batches at one offset (divergence) have
different ones.  Headers are walked in C (``batch_fingerprints``), which builds
the tuples directly: most reads here hold a few batches, where arrays and numpy
indexing would cost more than the walk.
"""
from __future__ import annotations

from typing import Any

from ..records import batch_fingerprints

CRC_AT = 17  # baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1)

Fingerprint = tuple[int, int, int, int]  # base, last, epoch, crc


def batch_crc(batch: bytes | memoryview) -> int:
    return int.from_bytes(bytes(batch[CRC_AT:CRC_AT + 4]), "big")


def fingerprints(buf: Any) -> list[Fingerprint]:
    """(base, last, epoch, crc) of every whole, valid batch in ``buf``."""
    return batch_fingerprints(buf)


def read_fingerprints(log: Any, start: int, end: int, chunk_bytes: int = 1 << 20) -> list[Fingerprint]:
    """Fingerprints of the batches holding offsets in [start, end) of ``log``."""
    out: list[Fingerprint] = []
    pos = max(start, log.log_start_offset)
    end = min(end, log.log_end_offset)
    while pos < end:
        view = log.read(pos, chunk_bytes).view  # a batch holding ``end`` is wanted too
        got = fingerprints(view)
        if not got:
            break
        for fp in got:
            if fp[1] >= pos and fp[0] < end:
                out.append(fp)
        pos = got[-1][1] + 1
    return out
