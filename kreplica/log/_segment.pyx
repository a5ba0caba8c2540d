# cython: language_level=3
"""Hot paths of the segment: walk batch headers, search and write indexes.

Everything here reads only the fixed 61-byte v2 batch header (big-endian):
baseOffset @0 i64, batchLength @8 i32, lastOffsetDelta @23 i32, maxTimestamp @35 i64.
The batches were validated (CRC, framing) when they entered the log, so a walk
trusts their contents; it ends where the data ends or at zeros, which is how a
preallocated tail (or a sealed segment still mapped by a reader) ends.  Anything
else where a header should start (an impossible length, a batch running past the
end, another magic) is damage: the walk raises KafkaStorageError, which a load
answers by recovering the segment, rather than take it for the end and serve the
next segment's batches as this one's.  Python calls these once per read or
append, never once per record.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, uint8_t
from libc.string cimport memset

import numpy as np

from kreplica import errors

cdef enum:
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    MAGIC_AT = 16
    MAX_BATCH_LENGTH = 0x7FFFFFFF - LOG_OVERHEAD  # a batch's whole size fits an int32


cdef inline int64_t _be64(const uint8_t* p) noexcept nogil:
    return <int64_t>(
        (<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40)
        | (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
        | (<uint64_t>p[6] << 8) | <uint64_t>p[7]
    )


cdef inline int64_t _be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _beu32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]




cdef inline bint _zeros(const uint8_t* p, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        if p[i]:
            return False
    return True


cdef inline int64_t _batch_size(const uint8_t* p, int64_t pos, int64_t end) noexcept nogil:
    """Total bytes of the batch at ``pos``; 0 where the data ends (``end``, or zeros
    where the header would be); -1 when anything else is there."""
    cdef int64_t length
    if end - pos >= HEADER_SIZE:
        length = _be32(p + pos + 8)
        if (HEADER_SIZE - LOG_OVERHEAD <= length <= MAX_BATCH_LENGTH and pos + LOG_OVERHEAD + length <= end
                and p[pos + MAGIC_AT] == 2):
            return LOG_OVERHEAD + length
    return 0 if _zeros(p + pos, min(end - pos, <int64_t>HEADER_SIZE)) else -1


cdef int _damaged(int64_t pos) except -1:
    raise errors.KafkaStorageError(f"damaged batch header at position {pos}: neither a batch nor zeros")


def index_slot(const uint8_t[::1] buf, Py_ssize_t entries, int entry_bytes, int key_bytes,
               int64_t target, Py_ssize_t warm_entries):
    """The largest slot whose key (first field, big-endian) is <= ``target``; -1 if none.

    Kafka's lookup: the newest ``warm_entries`` are searched first, because
    followers and consumers near the tail ask about them, so their pages stay hot.
    """
    cdef const uint8_t* p = &buf[0] if buf.shape[0] else NULL
    cdef Py_ssize_t lo, hi, mid, first_hot
    cdef int64_t key
    if entries <= 0 or p == NULL:
        return -1
    with nogil:
        first_hot = entries - warm_entries if entries > warm_entries else 0
        key = _be64(p + first_hot * entry_bytes) if key_bytes == 8 else _beu32(p + first_hot * entry_bytes)
        if key <= target:
            lo = first_hot
            hi = entries - 1
        else:
            lo = 0
            hi = first_hot - 1
        key = _be64(p) if key_bytes == 8 else _beu32(p)
        if key > target:
            lo = -1
            hi = -1
        while lo < hi:
            mid = hi - (hi - lo) // 2
            key = _be64(p + mid * entry_bytes) if key_bytes == 8 else _beu32(p + mid * entry_bytes)
            if key <= target:
                lo = mid
            else:
                hi = mid - 1
    return lo


def find_batch(const uint8_t[::1] buf, int64_t pos, int64_t end, int64_t target_offset):
    """``(position, base_offset)`` of the first batch from ``pos`` whose last offset is
    >= ``target_offset``; ``(end_of_batches, -1)`` when there is none."""
    cdef const uint8_t* p = &buf[0]
    cdef int64_t size = 0, base = -1
    with nogil:
        while True:
            size = _batch_size(p, pos, end)
            if size <= 0:
                base = -1
                break
            base = _be64(p + pos)
            if base + _be32(p + pos + 23) >= target_offset:
                break
            pos += size
    if size < 0:
        _damaged(pos)
    return pos, base


def span_batches(const uint8_t[::1] buf, int64_t pos, int64_t end, int64_t max_bytes,
                 int64_t max_offset):
    """End position of the whole batches from ``pos`` that fit ``max_bytes`` and end
    below ``max_offset`` (a batch holding ``max_offset``, the HW, say, is left out
    whole, as Kafka's read stops at its position).  The first batch below it is always
    included, however large (KIP-74), so a consumer can never be stuck behind one batch
    bigger than its limit."""
    cdef const uint8_t* p = &buf[0]
    cdef int64_t start = pos, size = 0
    with nogil:
        while True:
            # Stop before touching the next header when not even an empty batch would fit:
            # a small read (a lookup, a consumer's tight max_bytes) then reads one batch's
            # pages, not the next one's too.
            if pos > start and pos - start + HEADER_SIZE > max_bytes:
                break
            size = _batch_size(p, pos, end)
            if size <= 0 or _be64(p + pos) + _be32(p + pos + 23) >= max_offset:
                break
            if pos > start and pos + size - start > max_bytes:
                break
            pos += size
    if size < 0:
        _damaged(pos)
    return pos


def find_timestamp(const uint8_t[::1] buf, int64_t pos, int64_t end, int64_t timestamp):
    """``(position, base_offset, last_offset)`` of the first batch from ``pos`` whose max
    timestamp is >= ``timestamp``; base_offset -1 when there is none."""
    cdef const uint8_t* p = &buf[0]
    cdef int64_t size = 0, base = -1, last = -1
    with nogil:
        while True:
            size = _batch_size(p, pos, end)
            if size <= 0:
                break
            if _be64(p + pos + 35) >= timestamp:
                base = _be64(p + pos)
                last = base + _be32(p + pos + 23)
                break
            pos += size
    if size < 0:
        _damaged(pos)
    return pos, base, last


def walk_to_end(const uint8_t[::1] buf, int64_t pos, int64_t end):
    """From a batch boundary, walk every header: ``(end_position, last_offset, max_timestamp,
    offset_of_max_timestamp)``; last_offset -1 and timestamps -1 when no batch follows."""
    cdef const uint8_t* p = &buf[0]
    cdef int64_t size = 0, last = -1, ts, max_ts = -1, off_max = -1
    with nogil:
        while True:
            size = _batch_size(p, pos, end)
            if size <= 0:
                break
            last = _be64(p + pos) + _be32(p + pos + 23)
            ts = _be64(p + pos + 35)
            if ts > max_ts:
                max_ts = ts
                off_max = last
            pos += size
    if size < 0:
        _damaged(pos)
    return pos, last, max_ts, off_max


def zero_range(uint8_t[::1] buf, int64_t start, int64_t stop):
    """Zero ``buf[start:stop]`` so a crash can never resurrect truncated batches."""
    if stop > start:
        with nogil:
            memset(&buf[start], 0, stop - start)


cdef extern from "crc32c.h" nogil:
    void kr_crc32c_init()
    uint32_t kr_crc32c(uint32_t crc, const void *data, size_t n)

kr_crc32c_init()


def stamp_log_append_time(uint8_t[::1] buf, const int64_t[::1] positions, int64_t timestamp):
    """Kafka's ``message.timestamp.type=LogAppendTime``: mark each batch's attributes
    (bit 3) and set its max timestamp to the broker's append time, then redo its CRC
    (both fields lie inside the CRC, unlike offsets and the leader epoch)."""
    cdef Py_ssize_t i
    cdef int64_t pos, length
    cdef uint8_t* p
    cdef uint32_t crc
    cdef int k
    with nogil:
        for i in range(positions.shape[0]):
            p = &buf[positions[i]]
            length = _be32(p + 8)
            p[22] |= 0x08
            for k in range(8):
                p[35 + k] = <uint8_t>(timestamp >> (56 - 8 * k))
            crc = kr_crc32c(0, p + 21, LOG_OVERHEAD + length - 21)
            for k in range(4):
                p[17 + k] = <uint8_t>(crc >> (24 - 8 * k))


def put_entries(uint8_t[::1] buf, int64_t start, const int64_t[::1] keys, const int64_t[::1] values,
                int key_bytes, int64_t floor):
    """Write index entries at ``buf[start:]``: a big-endian key of ``key_bytes`` (4 or 8)
    then a 4-byte big-endian value, one per ``keys[i], values[i]``.

    Keys must rise strictly from above ``floor`` and fit their width, values fit 4
    bytes.  Returns the count written, or ``-(i + 1)`` for the first bad entry ``i``, in
    which case nothing is written.  One call per append replaces building a structured
    numpy array per call, which cost tens of microseconds on a follower's every fetch."""
    cdef Py_ssize_t n = keys.shape[0], i
    cdef int64_t prev = floor, key_max = 0xFFFFFFFF if key_bytes == 4 else 0x7FFFFFFFFFFFFFFF
    cdef int64_t k, v
    cdef Py_ssize_t bad = -1
    cdef int64_t u32_max = 0xFFFFFFFF
    cdef uint8_t* p
    if values.shape[0] != n or (key_bytes != 4 and key_bytes != 8):
        raise ValueError("keys and values differ in length, or the key width is not 4 or 8")
    if n == 0:
        return 0
    if start < 0 or start + n * (key_bytes + 4) > buf.shape[0]:
        raise ValueError(f"{n} entries at {start} do not fit a buffer of {buf.shape[0]} bytes")
    with nogil:
        for i in range(n):
            k = keys[i]
            v = values[i]
            if k <= prev or k > key_max or v < 0 or v > u32_max:
                bad = i
                break
            prev = k
    if bad >= 0:
        return -(bad + 1)
    with nogil:
        p = &buf[start]
        for i in range(n):
            k = keys[i]
            v = values[i]
            if key_bytes == 8:
                p[0] = <uint8_t>(k >> 56); p[1] = <uint8_t>(k >> 48); p[2] = <uint8_t>(k >> 40)
                p[3] = <uint8_t>(k >> 32)
                p += 4
            p[0] = <uint8_t>(k >> 24); p[1] = <uint8_t>(k >> 16); p[2] = <uint8_t>(k >> 8); p[3] = <uint8_t>k
            p[4] = <uint8_t>(v >> 24); p[5] = <uint8_t>(v >> 16); p[6] = <uint8_t>(v >> 8); p[7] = <uint8_t>v
            p += 8
    return n
