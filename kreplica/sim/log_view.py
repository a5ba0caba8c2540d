"""Batch fingerprints read straight from a replica's log, for the checker.

A batch is identified by (base offset, last offset, leader epoch, CRC).  The
v2 CRC covers attributes..end, so the leader's restamping of offsets and epoch
(both outside it) keeps the producer's CRC: the same produced batch has the same
CRC on every replica, and two different batches at one offset (divergence) have
different ones.  Headers are walked in C (``batch_fingerprints``), which builds
the tuples directly: most reads here hold a few batches, where arrays and numpy
indexing would cost more than the walk.

The CRC in a header says what the batch held when it was made, not what a replica
holds now: a batch whose bytes were damaged after that (a torn write that
recovery kept) still carries the CRC of the intact one.  So the checker reads
batches ``verified``: one whose bytes do not match its stored CRC gets the CRC
:data:`DAMAGED`, which no batch has, and compares as a different batch.
"""
from __future__ import annotations

from typing import Any

from ..records import batch_fingerprints, crc32c, scan_batches

CRC_AT = 17  # baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1)

Fingerprint = tuple[int, int, int, int]  # base, last, epoch, crc
DAMAGED = -1  # the CRC of a batch whose bytes do not match the CRC it stores


def batch_crc(batch: bytes | memoryview) -> int:
    return int.from_bytes(bytes(batch[CRC_AT:CRC_AT + 4]), "big")


def fingerprints(buf: Any, verified: bool = False) -> list[Fingerprint]:
    """(base, last, epoch, crc) of every whole batch in ``buf``; ``verified``: with the
    CRC :data:`DAMAGED` for a batch whose bytes do not match its CRC."""
    got = batch_fingerprints(buf)
    return _verified(buf, got) if verified and got else got


def _verified(buf: Any, got: list[Fingerprint]) -> list[Fingerprint]:
    # One C scan checks them all (the usual case); from the first mismatch on, batch by batch.
    scan = scan_batches(buf, check_crc=True)
    if scan.count >= len(got):
        return got
    view = memoryview(buf).cast("B")
    out = got[:scan.count]
    pos = scan.end_position
    for fp in got[scan.count:]:
        size = 12 + int.from_bytes(view[pos + 8:pos + 12], "big")  # baseOffset, batchLength
        intact = crc32c(view[pos + CRC_AT + 4:pos + size]) == fp[3]
        out.append(fp if intact else (fp[0], fp[1], fp[2], DAMAGED))
        pos += size
    return out


def read_fingerprints(log: Any, start: int, end: int, chunk_bytes: int = 1 << 20,
                      verified: bool = False) -> list[Fingerprint]:
    """Fingerprints of the batches holding offsets in [start, end) of ``log`` (``verified``:
    see :func:`fingerprints`)."""
    out: list[Fingerprint] = []
    pos = max(start, log.log_start_offset)
    end = min(end, log.log_end_offset)
    while pos < end:
        view = log.read(pos, chunk_bytes).view  # a batch holding ``end`` is wanted too
        got = fingerprints(view, verified)
        if not got:
            break
        for fp in got:
            if fp[1] >= pos and fp[0] < end:
                out.append(fp)
        pos = got[-1][1] + 1
    return out
