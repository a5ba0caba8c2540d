# cython: language_level=3
"""BatchRun: the batches of one append (or of a segment under recovery) as C columns.

Theory of operation.  Appending ready batches (a follower's fetch, a producer's
request) is one header walk (``frame_batches``: framing, offsets, sizes, epochs,
timestamps; no CRC yet), then checks and bookkeeping over the columns it filled
(offset contiguity, the leader's new offsets, epoch changes, which batches get
index entries) without numpy temporaries or Python loops, then
``write_to``: the copy into the segment file with every CRC checked piece by piece
right after the piece was written (csrc/checked_write.c), which reads the source
from memory once.  A batch whose CRC fails stops the append; what was written of
it is zeroed again and nothing was counted as appended, so the log is unchanged.
Kafka does the same checks (LogValidator on the follower's records: CRC, offsets).
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memset

import os

import numpy as np

from kreplica._records cimport (KR_CRC_MISMATCH, KR_END, KR_LOG_APPEND_TIME, KR_OFF_ATTRIBUTES, KR_OFF_CRC,
                                KR_CRC_START, KR_OFF_MAX_TIMESTAMP, KR_OK, check_compressed_records,
                                kr_be64, kr_crc32c, kr_put_be32, kr_put_be64, kr_scan, kr_scan_free,
                                kr_scan_result, _describe)
from kreplica import errors
from kreplica._records import MAX_DECOMPRESSED_BYTES

cdef extern from "checked_write.h" nogil:
    ctypedef enum kr_write_status:
        KR_WRITE_OK
        KR_WRITE_CRC_MISMATCH
        KR_WRITE_IO_ERROR
    ctypedef struct kr_write_report:
        size_t written
        size_t bad_batch
        uint32_t stored_crc, computed_crc
        int error
    kr_write_status kr_write_checked(int fd, const uint8_t *buf, size_t len, int64_t file_pos,
                                     const int64_t *positions, const int32_t *sizes, size_t count,
                                     kr_write_report *out)

cdef int64_t U32_MAX = 0xFFFFFFFF


cdef inline int32_t _max32(const int32_t *column, Py_ssize_t n, int32_t floor) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if column[i] > floor:
            floor = column[i]
    return floor


cdef class BatchRun:
    """Consecutive batches found from position 0 of a buffer, framing checked.

    ``count`` batches spanning ``nbytes``; ``error`` says why the walk stopped early
    (None: the data ended, or zero fill began)."""
    cdef kr_scan_result r
    cdef readonly Py_ssize_t count
    cdef readonly Py_ssize_t nbytes
    cdef readonly Py_ssize_t given  # bytes of the buffer walked
    cdef readonly object error

    def __init__(self, *args, **kwargs):
        raise TypeError("BatchRun objects come from frame_batches()")

    def __dealloc__(self):
        kr_scan_free(&self.r)

    @property
    def base_offset(self):
        return self.r.base_offsets[0] if self.count else -1

    @property
    def last_offset(self):
        return self.r.last_offsets[self.count - 1] if self.count else -1

    @property
    def max_timestamp(self):
        cdef int64_t m = -1
        cdef Py_ssize_t i
        for i in range(self.count):
            if self.r.max_timestamps[i] > m:
                m = self.r.max_timestamps[i]
        return m

    @property
    def max_batch_bytes(self):
        return _max32(self.r.sizes, self.count, 0)

    @property
    def max_leader_epoch(self):
        return _max32(self.r.leader_epochs, self.count, -1)

    def first_gap(self):
        """Index of the first batch that does not start right after the one before, or -1."""
        cdef Py_ssize_t i
        for i in range(1, self.count):
            if self.r.base_offsets[i] != self.r.last_offsets[i - 1] + 1:
                return i
        return -1

    def segment_starts(self, int64_t max_relative):
        """Positions of the batches (after the first) that must start a new segment for no
        batch to end more than ``max_relative`` offsets past its segment's base, when each
        segment starts at a batch's base offset.  Empty for any run with no wide gaps."""
        out = []
        cdef Py_ssize_t i
        cdef int64_t base = self.r.base_offsets[0] if self.count else 0
        for i in range(1, self.count):
            if self.r.last_offsets[i] - base > max_relative:
                out.append(self.r.positions[i])
                base = self.r.base_offsets[i]
        return out

    def batch_offsets(self, Py_ssize_t i):
        """``(base offset, last offset)`` of batch ``i``."""
        if not 0 <= i < self.count:
            raise IndexError(i)
        return self.r.base_offsets[i], self.r.last_offsets[i]

    def keep_in_order(self, int64_t segment_base):
        """Recovery's rule: keep the leading batches whose offsets rise inside a segment
        based at ``segment_base``; returns why it cut (None: all kept)."""
        cdef Py_ssize_t i
        cdef int64_t base, last
        for i in range(self.count):
            base, last = self.r.base_offsets[i], self.r.last_offsets[i]
            if (base < segment_base or last < base or last - segment_base > U32_MAX
                    or (i and base <= self.r.last_offsets[i - 1])):
                self._cut(i)
                return f"offsets out of order at batch {i}"
        return None

    cdef void _cut(self, Py_ssize_t count):
        self.count = count
        self.nbytes = self.r.positions[count - 1] + self.r.sizes[count - 1] if count else 0

    def rebase(self, int64_t first_offset):
        """Give the batches consecutive offsets from ``first_offset`` (a leader assigning
        them); returns the last offset."""
        cdef Py_ssize_t i
        cdef int64_t nxt = first_offset
        for i in range(self.count):
            self.r.last_offsets[i] = nxt + self.r.last_offsets[i] - self.r.base_offsets[i]
            self.r.base_offsets[i] = nxt
            nxt = self.r.last_offsets[i] + 1
        return nxt - 1

    def set_max_timestamps(self, int64_t timestamp):
        """Every batch's max timestamp becomes ``timestamp`` (LogAppendTime)."""
        cdef Py_ssize_t i
        for i in range(self.count):
            self.r.max_timestamps[i] = timestamp

    def stamp_create_time(self, buf):
        """Give every batch in ``buf`` (their copies, laid out as framed) whose header
        says other than this run's max timestamp (the records' own, as a producer run
        is framed) that max timestamp, the CreateTime type and a new CRC; returns how
        many changed.  Kafka's leader does the same: a producer's stale or false
        maxTimestamp would otherwise steer the time index, ListOffsets and retention."""
        cdef Py_buffer b
        cdef Py_ssize_t i, changed = 0
        cdef uint8_t *p
        PyObject_GetBuffer(buf, &b, PyBUF_WRITABLE)
        try:
            if b.len < self.nbytes:
                raise ValueError(f"{b.len} bytes given, {self.nbytes} were framed")
            with nogil:
                for i in range(self.count):
                    p = <uint8_t *>b.buf + self.r.positions[i]
                    if (<int64_t>kr_be64(p + KR_OFF_MAX_TIMESTAMP) == self.r.max_timestamps[i]
                            and not p[KR_OFF_ATTRIBUTES + 1] & KR_LOG_APPEND_TIME):
                        continue
                    p[KR_OFF_ATTRIBUTES + 1] &= ~KR_LOG_APPEND_TIME
                    kr_put_be64(p + KR_OFF_MAX_TIMESTAMP, <uint64_t>self.r.max_timestamps[i])
                    kr_put_be32(p + KR_OFF_CRC, kr_crc32c(0, p + KR_CRC_START,
                                                          <size_t>self.r.sizes[i] - KR_CRC_START))
                    changed += 1
        finally:
            PyBuffer_Release(&b)
        return changed

    def positions(self):
        """Where each batch starts (numpy), for the rare paths that need them all."""
        out = np.empty(self.count, dtype=np.int64)
        cdef int64_t[::1] v = out
        cdef Py_ssize_t i
        for i in range(self.count):
            v[i] = self.r.positions[i]
        return out

    def epoch_starts(self, int32_t latest):
        """``[(epoch, base offset)]`` where the batches' leader epoch first rises above
        ``latest`` and every epoch before it (what the leader-epoch cache records)."""
        out = []
        cdef Py_ssize_t i
        for i in range(self.count):
            if self.r.leader_epochs[i] > latest:
                latest = self.r.leader_epochs[i]
                out.append((latest, self.r.base_offsets[i]))
        return out

    def index_entries(self, int64_t file_pos, int64_t segment_base, int64_t interval, int64_t bytes_since,
                      int64_t max_ts, int64_t offset_of_max_ts, int64_t last_indexed_offset,
                      int64_t last_time_ts, int64_t last_time_offset):
        """Kafka's LogSegment.append rule, over the batches written at ``file_pos``.

        A batch gets an offset-index entry when more than ``interval`` bytes went in
        since the last entry, and then a time-index entry with the running max timestamp
        if that grew past the last one.  Returns ``(offset entries, time entries,
        bytes_since, max_ts, offset_of_max_ts)``: the entries encoded as the ``.index``
        and ``.timeindex`` files hold them, and the running values after the batches.
        Raises KafkaStorageError when an entry would not follow the last one (the
        files never hold a decreasing key)."""
        cdef Py_ssize_t n = self.count, i, k = 0, m = 0
        cdef int64_t rel, pos, last_rel = last_indexed_offset - segment_base if last_indexed_offset >= 0 else -1
        offsets = bytearray(n * 8)
        times = bytearray(n * 12)
        cdef uint8_t[::1] o = offsets
        cdef uint8_t[::1] t = times
        for i in range(n):
            if self.r.max_timestamps[i] > max_ts:
                max_ts = self.r.max_timestamps[i]
                offset_of_max_ts = self.r.last_offsets[i]
            if bytes_since > interval:
                rel = self.r.base_offsets[i] - segment_base
                pos = file_pos + self.r.positions[i]
                if rel <= last_rel or rel > U32_MAX or pos > U32_MAX:
                    raise errors.KafkaStorageError(
                        f"offset index entry ({rel}, {pos}) does not follow relative offset {last_rel}")
                kr_put_be32(&o[8 * k], <uint32_t>rel)
                kr_put_be32(&o[8 * k + 4], <uint32_t>pos)
                k += 1
                last_rel = rel
                if max_ts > last_time_ts and offset_of_max_ts >= last_time_offset:
                    rel = offset_of_max_ts - segment_base
                    if rel < 0 or rel > U32_MAX:
                        raise errors.KafkaStorageError(f"time index entry for offset {offset_of_max_ts} "
                                                       f"is outside the segment at {segment_base}")
                    kr_put_be64(&t[12 * m], <uint64_t>max_ts)
                    kr_put_be32(&t[12 * m + 8], <uint32_t>rel)
                    m += 1
                    last_time_ts, last_time_offset = max_ts, offset_of_max_ts
                bytes_since = 0
            bytes_since += self.r.sizes[i]
        return offsets[:8 * k], times[:12 * m], bytes_since, max_ts, offset_of_max_ts

    def write_to(self, int fd, data, int64_t file_pos):
        """pwrite ``data`` (the framed bytes) at ``file_pos`` of ``fd``, checking every
        batch's CRC as it goes.  Raises CorruptMessage on a CRC mismatch and OSError on an
        I/O error; then nothing written remains (it is zeroed again)."""
        cdef Py_buffer b
        cdef kr_write_report rep
        cdef kr_write_status s
        PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
        try:
            if b.len != self.nbytes:
                raise ValueError(f"{b.len} bytes given, {self.nbytes} were framed")
            with nogil:
                s = kr_write_checked(fd, <const uint8_t *>b.buf, <size_t>b.len, file_pos,
                                     self.r.positions, self.r.sizes, <size_t>self.count, &rep)
        finally:
            PyBuffer_Release(&b)
        if s == KR_WRITE_CRC_MISMATCH:
            raise errors.CorruptMessage(_describe(KR_CRC_MISMATCH, self.r.positions[rep.bad_batch],
                                                        rep.stored_crc, rep.computed_crc))
        if s == KR_WRITE_IO_ERROR:
            raise OSError(rep.error, os.strerror(rep.error))


def frame_batches(buf, bint check_crc=False, bint check_records=False):
    """Walk the batch headers of ``buf`` from position 0 (``check_crc``: CRCs too, as
    recovery does; ``check_records``: each batch's records, as a leader checks a
    producer's) into a BatchRun; it stops at the first bad batch or at zero fill."""
    cdef Py_buffer b
    cdef BatchRun run = BatchRun.__new__(BatchRun)
    cdef int rc
    memset(&run.r, 0, sizeof(run.r))
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        with nogil:
            rc = kr_scan(<const uint8_t *>b.buf, 0, <size_t>b.len, check_crc, check_records, &run.r)
    finally:
        PyBuffer_Release(&b)
    if rc < 0:
        raise MemoryError(f"out of memory framing batches at position {run.r.error_pos}")
    run.count = run.r.count
    run.nbytes = run.r.valid_end
    run.given = b.len
    if run.r.status == KR_OK or run.r.status == KR_END:
        run.error = None
    else:
        run.error = _describe(run.r.status, run.r.error_pos, run.r.detail_a, run.r.detail_b)
    return run


def frame_append(buf):
    """``frame_batches`` for an append: the whole of ``buf`` must be batches, or
    CorruptMessage names what is wrong."""
    run = frame_batches(buf)
    if run.error is not None:
        raise errors.CorruptMessage(run.error)
    if run.nbytes != run.given or not run.count:
        raise errors.CorruptMessage(f"{run.given - run.nbytes} trailing bytes are not a batch")
    return run


# Record batch attributes: the low three bits name the codec.
cdef int COMPRESSION_MASK = 0x07
cdef int GZIP = 1
_CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def frame_producer_append(buf, Py_ssize_t max_decompressed=MAX_DECOMPRESSED_BYTES):
    """``frame_append`` for a leader's append of producer batches, which also checks
    what Kafka's leader checks before it assigns offsets in place: no control batch
    (INVALID_RECORD: only brokers write those), each batch's record count is
    lastOffsetDelta + 1 and its records are well framed with offset deltas 0..n-1 and
    UTF-8 header keys.  Otherwise a batch whose records no reader could decode would be
    acknowledged.  A compressed batch must use a codec kreplica reads (gzip; else
    UNSUPPORTED_COMPRESSION_TYPE), and its records are checked decompressed, at most
    ``max_decompressed`` bytes of them (else RECORD_TOO_LARGE).  A batch whose CRC is
    also wrong is reported as CORRUPT_MESSAGE, as the CRC is checked first.  The run's
    max timestamps are the records' own (see ``BatchRun.stamp_create_time``)."""
    cdef BatchRun run = frame_batches(buf, check_records=True)
    cdef Py_ssize_t i
    cdef Py_buffer b
    cdef const uint8_t *p
    cdef int codec
    if run.error is not None or run.nbytes != run.given or not run.count:
        framed = frame_batches(buf, check_crc=True)  # the error path only: CRCs first
        if framed.error is not None and framed.nbytes <= run.nbytes:
            raise errors.CorruptMessage(framed.error)
        if run.error is None:
            raise errors.CorruptMessage(f"{run.given - run.nbytes} trailing bytes are not a batch")
        raise errors.InvalidRecord(run.error)
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        for i in range(run.count):
            p = <const uint8_t *>b.buf + run.r.positions[i]
            codec = ((p[21] << 8) | p[22]) & COMPRESSION_MASK  # attributes follow the CRC
            if codec and codec != GZIP:
                raise errors.UnsupportedCompressionType(
                    f"batch at position {run.r.positions[i]} is compressed with "
                    f"{_CODECS.get(codec, f'codec {codec}')}; kreplica reads uncompressed and gzip batches")
        for i in range(run.count):
            p = <const uint8_t *>b.buf + run.r.positions[i]
            if p[22] & COMPRESSION_MASK:
                check_compressed_records(p, run.r.sizes[i], run.r.positions[i], max_decompressed,
                                         &run.r.max_timestamps[i])
    finally:
        PyBuffer_Release(&b)
    return run
