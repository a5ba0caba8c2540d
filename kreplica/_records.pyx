# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kafka v2 record batch codec, compiled (the public face is ``kreplica.records``).

Theory of operation: encoding walks the Python item list twice in C, once to measure
and once to write, so a batch lands in its destination (a bytes object or a mapped
segment) with no intermediate copies; the CRC32C is computed over the finished bytes.
Scanning, CRC checks and restamping are plain C over a borrowed buffer (csrc/batch.c),
run without the GIL.  Decoding builds Record objects here, never in Python bytecode.
Layout and rules follow Kafka's DefaultRecordBatch / DefaultRecord (magic 2).
"""
cimport cython
from cpython.buffer cimport (PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_CheckBuffer, PyObject_GetBuffer)
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize,
                            PyBytes_GET_SIZE)
from cpython.ref cimport PyObject
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.sequence cimport PySequence_Fast_GET_ITEM, PySequence_Fast_GET_SIZE
from cpython.tuple cimport PyTuple_Check, PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_Check, PyUnicode_CheckExact, PyUnicode_DecodeUTF8
from libc.stdint cimport INT32_MAX, INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy, memset

import zlib

cimport numpy as cnp

from kreplica import errors

cnp.import_array()

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    object PyUnicode_FromObject(object s)  # a str subclass's text as an exact str

kr_crc32c_init()

#: True only in the compiled module (there is no pure-Python fallback).
COMPILED = cython.compiled
HEADER_SIZE = KR_HEADER_SIZE
LOG_OVERHEAD = KR_LOG_OVERHEAD
NO_TIMESTAMP = -1
#: Most bytes of records a compressed batch may hold once decompressed (decoding builds
#: them in memory; a leader refuses larger ones, often well below this: see LogConfig).
MAX_DECOMPRESSED_BYTES = 1 << 30

cdef tuple _NO_HEADERS = ()
cdef dict _CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


# ---------------------------------------------------------------- CRC32C

cdef uint32_t _crc_of(object data, uint32_t crc, int path) except? 0xFFFFFFFF:
    cdef Py_buffer b
    cdef uint32_t out
    PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
    try:
        with nogil:
            if path == 1:
                out = kr_crc32c_sw(crc, b.buf, <size_t>b.len)
            elif path == 2:
                out = kr_crc32c_hw(crc, b.buf, <size_t>b.len)
            elif path == 3:
                out = kr_crc32c_hw_lanes(crc, b.buf, <size_t>b.len)
            else:
                out = kr_crc32c(crc, b.buf, <size_t>b.len)
    finally:
        PyBuffer_Release(&b)
    return out


def crc32c(data, crc=0):
    """CRC32C of a bytes-like object, continuing from a previous ``crc`` (zlib style)."""
    return _crc_of(data, <uint32_t>crc, 0)


def crc32c_sw(data, crc=0):
    """CRC32C by the slicing-by-8 table path (always available)."""
    return _crc_of(data, <uint32_t>crc, 1)


def crc32c_hw(data, crc=0):
    """CRC32C by the SSE4.2 instruction; raises RuntimeError on a CPU without it."""
    if not kr_crc32c_hw_available():
        raise RuntimeError("this CPU has no SSE4.2 crc32 instruction")
    return _crc_of(data, <uint32_t>crc, 2)


def crc32c_hw_lanes(data, crc=0):
    """CRC32C by the SSE4.2 instruction's three interleaved lanes, never the AVX-512
    folding: the hardware path of CPUs without VPCLMULQDQ, for tests on CPUs with it.
    Raises RuntimeError on a CPU without SSE4.2."""
    if not kr_crc32c_hw_available():
        raise RuntimeError("this CPU has no SSE4.2 crc32 instruction")
    return _crc_of(data, <uint32_t>crc, 3)


def crc32c_backend():
    """``"sse4.2"`` when the hardware path is in use, else ``"table"``."""
    return "sse4.2" if kr_crc32c_hw_available() else "table"


# ---------------------------------------------------------------- records

cdef object _as_bytes(object o, str what):
    if o is None or PyBytes_CheckExact(o):
        return o
    if PyObject_CheckBuffer(o) and not PyUnicode_Check(o):
        return bytes(o)
    raise TypeError(f"{what} must be bytes-like or None, not {type(o).__name__}")


# no_gc: a Record holds only bytes, str and tuples of them (the constructor enforces it),
# which cannot form cycles; leaving it out of the cycle collector makes decoding a
# million records about twice as fast, since gen-0 collections never see them.
@cython.no_gc
@cython.freelist(512)
cdef class Record:
    """One decoded record: ``offset``, ``timestamp``, ``key``, ``value``, ``headers``.

    Immutable.  ``headers`` is a tuple of ``(str, bytes | None)`` pairs."""

    def __init__(self, int64_t offset, int64_t timestamp, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.key = _as_bytes(key, "key")
        self.value = _as_bytes(value, "value")
        pairs = []
        for h in headers:
            k, v = h
            if not PyUnicode_Check(k):
                raise TypeError(f"header key must be str, not {type(k).__name__}")
            # An exact str, as _as_bytes gives exact bytes: a subclass instance has a
            # __dict__ that could point back at this (uncollected, no_gc) record.
            pairs.append((PyUnicode_FromObject(k), _as_bytes(v, "header value")))
        self.headers = tuple(pairs)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        cdef Record o = <Record>other
        return (self.offset == o.offset and self.timestamp == o.timestamp and
                self.key == o.key and self.value == o.value and self.headers == o.headers)

    def __hash__(self):
        return hash((self.offset, self.timestamp, self.key, self.value, self.headers))

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp, self.key, self.value, self.headers))

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


# ---------------------------------------------------------------- encoding

cdef struct _Field:
    const char *ptr
    Py_ssize_t len          # -1 for null
    bint held
    Py_buffer buf

cdef struct _Item:
    PyObject *headers       # NULL when the record has none
    int64_t timestamp
    _Field key
    _Field value


cdef int _field_open(_Field *f, PyObject *o, Py_ssize_t index, str what) except -1:
    f.held = False
    if o == <PyObject *>None:
        f.ptr = NULL
        f.len = -1
    elif PyBytes_CheckExact(<object>o):
        f.ptr = PyBytes_AS_STRING(<object>o)
        f.len = PyBytes_GET_SIZE(<object>o)
    elif PyObject_CheckBuffer(<object>o) and not PyUnicode_Check(<object>o):
        PyObject_GetBuffer(<object>o, &f.buf, PyBUF_SIMPLE)
        f.held = True
        f.ptr = <const char *>f.buf.buf
        f.len = f.buf.len
    else:
        raise TypeError(f"record {index}: {what} must be bytes-like or None, "
                        f"not {type(<object>o).__name__}")
    return 0


cdef inline void _field_close(_Field *f) noexcept:
    if f.held:
        PyBuffer_Release(&f.buf)
        f.held = False


cdef inline void _item_close(_Item *it) noexcept:
    _field_close(&it.key)
    _field_close(&it.value)


cdef int _item_open(object item, Py_ssize_t index, int64_t default_ts, _Item *it) except -1:
    """Views one item: a value, (key, value), (key, value, headers),
    (key, value, headers, timestamp_ms) or a Record."""
    cdef Py_ssize_t n
    cdef PyObject *ts = NULL
    cdef PyObject *key = <PyObject *>None
    cdef PyObject *value = <PyObject *>item
    cdef Record rec
    it.headers = NULL
    it.timestamp = default_ts
    it.key.held = False
    it.value.held = False
    if PyTuple_Check(item):
        n = PyTuple_GET_SIZE(item)
        if n < 2 or n > 4:
            raise TypeError(f"record {index}: a tuple item is (key, value[, headers[, timestamp_ms]]),"
                            f" got {n} elements")
        key = PyTuple_GET_ITEM(item, 0)
        value = PyTuple_GET_ITEM(item, 1)
        if n >= 3 and PyTuple_GET_ITEM(item, 2) != <PyObject *>None:
            it.headers = PyTuple_GET_ITEM(item, 2)
        if n == 4 and PyTuple_GET_ITEM(item, 3) != <PyObject *>None:
            ts = PyTuple_GET_ITEM(item, 3)
            it.timestamp = <int64_t>(<object>ts)
    elif isinstance(item, Record):
        rec = <Record>item
        key = <PyObject *>rec.key
        value = <PyObject *>rec.value
        if rec.headers:
            it.headers = <PyObject *>rec.headers
        it.timestamp = rec.timestamp
    _field_open(&it.key, key, index, "key")
    try:
        _field_open(&it.value, value, index, "value")
    except BaseException:
        _field_close(&it.key)
        raise
    return 0


cdef inline Py_ssize_t _bytes_size(Py_ssize_t n) noexcept:
    return kr_varint_size(n) + (n if n > 0 else 0)


cdef inline bint _exact_pair(PyObject *h) noexcept:
    """An exact (exact str, exact bytes | None) tuple: reading it runs no Python code."""
    cdef PyObject *v
    if not PyTuple_CheckExact(<object>h) or PyTuple_GET_SIZE(<object>h) != 2:
        return False
    v = PyTuple_GET_ITEM(<object>h, 1)
    return (PyUnicode_CheckExact(<object>PyTuple_GET_ITEM(<object>h, 0))
            and (v == <PyObject *>None or PyBytes_CheckExact(<object>v)))


cdef object _normal_headers(object headers, Py_ssize_t index):
    """``headers`` read once, as an exact list or tuple of exact ``(str, bytes | None)``
    tuples: ``headers`` itself when it is one (the common case, no copy), else a tuple
    made from one iteration of it, from each pair's items.

    Each encoding pass both sizes and writes a record's headers from what this returns,
    with no Python code running in between: a list or pair subclass whose iteration or
    unpacking says something else the next time (or a value that is not bytes) made the
    write copy more than was measured."""
    cdef Py_ssize_t i, n
    cdef object h, k, v
    if PyList_CheckExact(headers) or PyTuple_CheckExact(headers):
        for i in range(PySequence_Fast_GET_SIZE(headers)):
            if not _exact_pair(PySequence_Fast_GET_ITEM(headers, i)):
                break
        else:
            return headers
    elif not isinstance(headers, (list, tuple)):
        raise TypeError(f"record {index}: headers must be a list or tuple of (str, bytes) "
                        f"pairs, not {type(headers).__name__}")
    cdef tuple snapshot = tuple(headers)  # one iteration, whatever the type's __iter__ does
    n = PyTuple_GET_SIZE(snapshot)
    pairs = []
    for i in range(n):
        h = <object>PyTuple_GET_ITEM(snapshot, i)
        if not PyTuple_Check(h) or PyTuple_GET_SIZE(h) != 2:
            raise TypeError(f"record {index}: a header is a (str, bytes) pair, got {h!r}")
        k = <object>PyTuple_GET_ITEM(h, 0)  # the pair's items, not what its __iter__ says
        v = <object>PyTuple_GET_ITEM(h, 1)
        if not PyUnicode_Check(k):
            raise TypeError(f"record {index}: header key must be str, not {type(k).__name__}")
        if v is not None and not PyBytes_CheckExact(v):
            raise TypeError(f"record {index}: header value must be bytes or None, "
                            f"not {type(v).__name__}")
        pairs.append((PyUnicode_FromObject(k), v))
    return tuple(pairs)


cdef Py_ssize_t _headers_size(object headers) except -1:
    """Encoded bytes of headers from _normal_headers (their count not included)."""
    cdef Py_ssize_t total = 0, klen, i
    cdef PyObject *h
    cdef PyObject *v
    for i in range(PySequence_Fast_GET_SIZE(headers)):
        h = PySequence_Fast_GET_ITEM(headers, i)
        PyUnicode_AsUTF8AndSize(<object>PyTuple_GET_ITEM(<object>h, 0), &klen)
        v = PyTuple_GET_ITEM(<object>h, 1)
        total += _bytes_size(klen) + (1 if v == <PyObject *>None else _bytes_size(PyBytes_GET_SIZE(<object>v)))
    return total


cdef uint8_t *_put_headers(uint8_t *p, const uint8_t *limit, object headers) except NULL:
    """Writes headers from _normal_headers at p, never past limit."""
    cdef Py_ssize_t klen, vlen, i
    cdef const char *kp
    cdef PyObject *h
    cdef PyObject *v
    for i in range(PySequence_Fast_GET_SIZE(headers)):
        h = PySequence_Fast_GET_ITEM(headers, i)
        kp = PyUnicode_AsUTF8AndSize(<object>PyTuple_GET_ITEM(<object>h, 0), &klen)
        v = PyTuple_GET_ITEM(<object>h, 1)
        vlen = -1 if v == <PyObject *>None else PyBytes_GET_SIZE(<object>v)
        if _bytes_size(klen) + _bytes_size(vlen) > limit - p:
            raise RuntimeError("the headers changed while they were being encoded")
        p = kr_put_varint(p, klen)
        memcpy(p, kp, klen)
        p = kr_put_varint(p + klen, vlen)
        if vlen > 0:
            memcpy(p, PyBytes_AS_STRING(<object>v), vlen)
            p += vlen
    return p


cdef inline Py_ssize_t _body_size(_Item *it, Py_ssize_t index, int64_t ts_delta,
                                  object headers) except -1:
    return (1 + kr_varint_size(ts_delta) + kr_varint_size(index) + _bytes_size(it.key.len)
            + _bytes_size(it.value.len) + kr_varint_size(PySequence_Fast_GET_SIZE(headers))
            + _headers_size(headers))


cdef inline bint _plain_field(PyObject *o, _Field *f) noexcept:
    if o == <PyObject *>None:
        f.ptr = NULL
        f.len = -1
        return True
    if PyBytes_CheckExact(<object>o):
        f.ptr = PyBytes_AS_STRING(<object>o)
        f.len = PyBytes_GET_SIZE(<object>o)
        return True
    return False


cdef inline bint _plain(PyObject *item, _Field *key, _Field *value) noexcept:
    """True for the common items, a bytes value or a (key, value) pair of bytes or None:
    they need no buffer to hold, no headers and no timestamp of their own, so both
    passes handle them inline (about twice as fast as the general _item_open path)."""
    if PyBytes_CheckExact(<object>item):
        key.ptr = NULL
        key.len = -1
        value.ptr = PyBytes_AS_STRING(<object>item)
        value.len = PyBytes_GET_SIZE(<object>item)
        return True
    if PyTuple_CheckExact(<object>item) and PyTuple_GET_SIZE(<object>item) == 2:
        return (_plain_field(PyTuple_GET_ITEM(<object>item, 0), key)
                and _plain_field(PyTuple_GET_ITEM(<object>item, 1), value))
    return False


cdef inline Py_ssize_t _plain_body_size(Py_ssize_t index, int64_t ts_delta, _Field *key,
                                        _Field *value) noexcept:
    return (1 + kr_varint_size(ts_delta) + kr_varint_size(index) + _bytes_size(key.len)
            + _bytes_size(value.len) + 1)


cdef inline uint8_t *_put_field(uint8_t *p, _Field *f) noexcept:
    p = kr_put_varint(p, f.len)
    if f.len > 0:
        memcpy(p, f.ptr, f.len)
        p += f.len
    return p


cdef Py_ssize_t _measure(list items, int64_t default_ts, int64_t *base_ts,
                         int64_t *max_ts) except -1:
    cdef Py_ssize_t n = len(items), i, body, total = KR_HEADER_SIZE
    cdef PyObject *item
    cdef object held, headers
    cdef _Field key, value
    cdef _Item it
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    base_ts[0] = default_ts
    max_ts[0] = default_ts
    for i in range(n):
        if i >= PyList_GET_SIZE(items):
            raise RuntimeError("the item list changed while it was being encoded")
        item = <PyObject *>PyList_GET_ITEM(items, i)
        if _plain(item, &key, &value):
            if default_ts > max_ts[0]:
                max_ts[0] = default_ts
            body = _plain_body_size(i, default_ts - base_ts[0], &key, &value)
            total += kr_varint_size(body) + body
            continue
        held = <object>item  # owned: header iteration may run code that drops it from the list
        _item_open(held, i, default_ts, &it)
        try:
            if i == 0:
                base_ts[0] = it.timestamp
                max_ts[0] = it.timestamp
            elif it.timestamp > max_ts[0]:
                max_ts[0] = it.timestamp
            headers = _NO_HEADERS if it.headers == NULL else _normal_headers(<object>it.headers, i)
            body = _body_size(&it, i, it.timestamp - base_ts[0], headers)
        finally:
            _item_close(&it)
        total += kr_varint_size(body) + body
    if total - KR_LOG_OVERHEAD > INT32_MAX:
        raise errors.RecordListTooLarge(f"a batch of {n} records would take {total} bytes")
    return total


cdef Py_ssize_t _write(uint8_t *dst, Py_ssize_t size, list items, int64_t default_ts,
                       kr_header *h) except -1:
    """Writes records then the header into dst[0:size] (size from _measure)."""
    cdef Py_ssize_t n = len(items), i, body
    cdef PyObject *item
    cdef object held, headers
    cdef _Field key, value
    cdef uint8_t *p = dst + KR_HEADER_SIZE
    cdef uint8_t *limit = dst + size
    cdef _Item it
    if n != h.record_count:
        raise RuntimeError("the item list changed while it was being encoded")
    for i in range(n):
        if i >= PyList_GET_SIZE(items):  # a timestamp's __index__ may have shrunk the list
            raise RuntimeError("the item list changed while it was being encoded")
        item = <PyObject *>PyList_GET_ITEM(items, i)
        if _plain(item, &key, &value):
            body = _plain_body_size(i, default_ts - h.base_timestamp, &key, &value)
            if kr_varint_size(body) + body > limit - p:
                raise RuntimeError("the item list changed while it was being encoded")
            p = kr_put_varint(p, body)
            p[0] = 0  # record attributes: unused in v2
            p = kr_put_varint(p + 1, default_ts - h.base_timestamp)
            p = kr_put_varint(p, i)
            p = _put_field(p, &key)
            p = _put_field(p, &value)
            p[0] = 0  # no headers
            p += 1
            continue
        held = <object>item
        _item_open(held, i, default_ts, &it)
        try:
            # One snapshot of the headers both sizes this record and is written.
            headers = _NO_HEADERS if it.headers == NULL else _normal_headers(<object>it.headers, i)
            body = _body_size(&it, i, it.timestamp - h.base_timestamp, headers)
            # Guards against items mutated between the two passes: never write past size.
            if kr_varint_size(body) + body > limit - p:
                raise RuntimeError("the item list changed while it was being encoded")
            p = kr_put_varint(p, body)
            p[0] = 0  # record attributes: unused in v2
            p = kr_put_varint(p + 1, it.timestamp - h.base_timestamp)
            p = kr_put_varint(p, i)
            p = kr_put_varint(p, it.key.len)
            if it.key.len > 0:
                memcpy(p, it.key.ptr, it.key.len)
                p += it.key.len
            p = kr_put_varint(p, it.value.len)
            if it.value.len > 0:
                memcpy(p, it.value.ptr, it.value.len)
                p += it.value.len
            p = _put_headers(kr_put_varint(p, PySequence_Fast_GET_SIZE(headers)), limit, headers)
        finally:
            _item_close(&it)
    if p != limit:
        raise RuntimeError("the item list changed while it was being encoded")
    kr_write_header(dst, <size_t>size, h)
    return size


cdef inline void _fill_header(kr_header *h, Py_ssize_t n, int64_t base_offset, int32_t leader_epoch,
                              int16_t attributes, int64_t base_ts, int64_t max_ts,
                              int64_t producer_id, int16_t producer_epoch,
                              int32_t base_sequence) noexcept:
    memset(h, 0, sizeof(kr_header))
    h.base_offset = base_offset
    h.leader_epoch = leader_epoch
    h.magic = 2
    h.attributes = attributes
    h.last_offset_delta = <int32_t>(n - 1)
    h.base_timestamp = base_ts
    h.max_timestamp = max_ts
    h.producer_id = producer_id
    h.producer_epoch = producer_epoch
    h.base_sequence = base_sequence
    h.record_count = <int32_t>n


cdef Py_ssize_t encoded_size(list items, int64_t timestamp_ms) except -1:
    cdef int64_t base_ts, max_ts
    return _measure(items, timestamp_ms, &base_ts, &max_ts)


cdef Py_ssize_t encode_into(unsigned char *dst, Py_ssize_t cap, list items, int64_t base_offset,
                            int32_t leader_epoch, int64_t timestamp_ms) except -1:
    cdef int64_t base_ts, max_ts
    cdef kr_header h
    cdef Py_ssize_t size = _measure(items, timestamp_ms, &base_ts, &max_ts)
    if size > cap:
        return -size
    _fill_header(&h, len(items), base_offset, leader_epoch, 0, base_ts, max_ts, -1, -1, -1)
    return _write(dst, size, items, timestamp_ms, &h)


cdef inline list _as_list(object items):
    return <list>items if type(items) is list else list(items)


cdef int16_t _check_attributes(int attributes) except -1:
    if attributes < 0 or attributes > 0x7fff:
        raise ValueError(f"attributes {attributes} do not fit in an int16")
    if attributes & KR_COMPRESSION_MASK:
        raise ValueError("encode_batch writes uncompressed batches; "
                         "attributes must not carry a compression codec")
    return <int16_t>attributes


def encode_batch(items, *, int64_t base_offset=0, int32_t leader_epoch=-1,
                 timestamp_ms=None, int attributes=0, int64_t producer_id=-1,
                 int16_t producer_epoch=-1, int32_t base_sequence=-1):
    """One v2 batch of ``items`` as bytes (see kreplica.records.encode_batch)."""
    cdef int64_t ts = -1 if timestamp_ms is None else <int64_t>timestamp_ms
    cdef int64_t base_ts, max_ts
    cdef kr_header h
    cdef int16_t attrs = _check_attributes(attributes)
    cdef list lst = _as_list(items)
    cdef Py_ssize_t size = _measure(lst, ts, &base_ts, &max_ts)
    _fill_header(&h, len(lst), base_offset, leader_epoch, attrs, base_ts, max_ts,
                 producer_id, producer_epoch, base_sequence)
    out = PyBytes_FromStringAndSize(NULL, size)
    _write(<uint8_t *>PyBytes_AS_STRING(out), size, lst, ts, &h)
    return out


def encode_batch_into(buffer, Py_ssize_t position, items, int64_t base_offset=0,
                      int32_t leader_epoch=-1, timestamp_ms=None):
    """Encodes one batch into a writable buffer at ``position``.

    Returns the bytes written, or ``-needed`` (nothing written) when the space left
    after ``position`` is too small."""
    cdef Py_buffer b
    cdef int64_t ts = -1 if timestamp_ms is None else <int64_t>timestamp_ms
    PyObject_GetBuffer(buffer, &b, PyBUF_WRITABLE)
    try:
        if position < 0 or position > b.len:
            raise ValueError(f"position {position} is outside the buffer of {b.len} bytes")
        return encode_into(<unsigned char *>b.buf + position, b.len - position, _as_list(items),
                           base_offset, leader_epoch, ts)
    finally:
        PyBuffer_Release(&b)


def batch_size(items, timestamp_ms=None):
    """Bytes that ``encode_batch(items, timestamp_ms=...)`` would produce."""
    return encoded_size(_as_list(items), -1 if timestamp_ms is None else <int64_t>timestamp_ms)


# ---------------------------------------------------------------- errors

cdef str _describe(kr_status s, Py_ssize_t pos, int64_t a, int64_t b):
    if s == KR_TORN:
        return f"torn batch at position {pos}: needs {a} bytes, {b} available"
    if s == KR_BAD_LENGTH:
        return f"bad batch length {a} at position {pos}"
    if s == KR_BAD_MAGIC:
        return f"bad magic {a} at position {pos} (only magic 2 batches are supported)"
    if s == KR_BAD_HEADER:
        return f"bad header at position {pos}: record count {a}, batch length or last offset delta {b}"
    if s == KR_CRC_MISMATCH:
        return f"crc mismatch at position {pos}: stored 0x{a:08x}, computed 0x{b:08x}"
    if s == KR_BAD_RECORD:
        return f"bad record {a} in the batch at position {pos}"
    if s == KR_NO_MEMORY:
        return f"out of memory scanning at position {pos}"
    if s == KR_CONTROL_BATCH:
        return f"control batch at position {pos}: clients may not write control records"
    if s == KR_BAD_HEADER_KEY:
        return f"header key of record {a} is not UTF-8 in the batch at position {pos}"
    return f"{kr_status_name(s).decode()} at position {pos}"


cdef int _raise_for(kr_status s, Py_ssize_t pos, int64_t a, int64_t b) except -1:
    if s == KR_BAD_RECORD or s == KR_CONTROL_BATCH or s == KR_BAD_HEADER_KEY:
        raise errors.InvalidRecord(_describe(s, pos, a, b))
    if s == KR_NO_MEMORY:
        raise MemoryError(_describe(s, pos, a, b))
    raise errors.CorruptMessage(_describe(s, pos, a, b))


# ---------------------------------------------------------------- decoding

cdef tuple _decode_headers(const uint8_t *p, const uint8_t *end, int32_t count,
                           Py_ssize_t pos):
    cdef const uint8_t *k
    cdef const uint8_t *v
    cdef int32_t klen, vlen, i
    out = []
    for i in range(count):
        p = kr_parse_header(p, end, &k, &klen, &v, &vlen)
        try:
            key = PyUnicode_DecodeUTF8(<const char *>k, klen, NULL)
        except UnicodeDecodeError:
            raise errors.InvalidRecord(
                f"header key is not UTF-8 in the batch at position {pos}") from None
        out.append((key, None if vlen < 0 else PyBytes_FromStringAndSize(<const char *>v, vlen)))
    return tuple(out)


cdef int _decode_run(list out, const uint8_t *p, const uint8_t *end, const kr_header *h,
                     Py_ssize_t pos, int64_t start, int64_t stop) except -1:
    """Appends the records in p..end (an uncompressed record run) of the batch h whose
    offsets lie in [start, stop); the others are parsed (framing checked) but not built."""
    cdef kr_record r
    cdef Record rec
    cdef int32_t i, prev = -1
    cdef int64_t offset
    cdef bint append_time = (h.attributes & KR_LOG_APPEND_TIME) != 0
    for i in range(h.record_count):
        p = kr_parse_record(p, end, &r)
        # Offsets inside a batch rise strictly and stay within lastOffsetDelta.
        if p == NULL or r.offset_delta <= prev or r.offset_delta > h.last_offset_delta:
            raise errors.InvalidRecord(_describe(KR_BAD_RECORD, pos, i, 0))
        prev = r.offset_delta
        offset = h.base_offset + r.offset_delta
        if offset < start or offset >= stop:
            continue
        rec = Record.__new__(Record)
        rec.offset = offset
        rec.timestamp = h.max_timestamp if append_time else h.base_timestamp + r.timestamp_delta
        rec.key = None if r.key_len < 0 else PyBytes_FromStringAndSize(<const char *>r.key, r.key_len)
        rec.value = (None if r.value_len < 0
                     else PyBytes_FromStringAndSize(<const char *>r.value, r.value_len))
        rec.headers = (_NO_HEADERS if r.header_count == 0
                       else _decode_headers(r.headers, end, r.header_count, pos))
        out.append(rec)
    if p != end:
        raise errors.InvalidRecord(f"{end - p} bytes after the last record of the batch "
                                   f"at position {pos}")
    return 0


cdef bytes _gunzip(const uint8_t *data, Py_ssize_t n, Py_ssize_t cap, Py_ssize_t pos):
    """The records of a gzip batch: every member decompressed (a writer may concatenate
    several, and Kafka's reader takes them all), streamed into at most ``cap`` bytes, so a
    small batch that claims gigabytes costs ``cap`` of memory, not the gigabytes.  Only
    gzip framing is read, as Kafka's GZIPInputStream and kafka-python read codec 1: the
    same deflate data zlib-framed was taken, and no Kafka reader could decompress it.
    Bytes after a member that do not open another (zero padding, say) end the data, as
    GZIPInputStream ends its stream there; the batch CRC already covers them."""
    src = PyBytes_FromStringAndSize(<const char *>data, n)
    cdef bytes plain = b""
    try:
        while True:
            d = zlib.decompressobj(31)  # gzip framing only (wbits 16 + 15)
            plain += d.decompress(src, cap + 1 - len(plain))  # max_length >= 1: never unlimited
            if len(plain) > cap:
                raise errors.RecordTooLarge(f"gzip data of the batch at position {pos} decompresses "
                                            f"to more than {cap} bytes")
            if not d.eof:
                raise errors.CorruptMessage(f"gzip data of the batch at position {pos} is truncated")
            src = d.unused_data
            if src[:2] != b"\x1f\x8b":
                return plain
    except zlib.error as e:
        raise errors.CorruptMessage(f"gzip data of the batch at position {pos} is corrupt: {e}")


cdef int _check_codec(int codec, Py_ssize_t pos) except -1:
    if codec > 1:
        raise errors.InvalidRecord(f"compression codec {_CODECS.get(codec, codec)} of the batch "
                                   f"at position {pos} is not supported (only gzip)")
    return 0


cdef int _decode_batch(list out, const uint8_t *batch, const kr_header *h,
                       Py_ssize_t pos, int64_t start=INT64_MIN, int64_t stop=INT64_MAX) except -1:
    cdef const uint8_t *run = batch + KR_HEADER_SIZE
    cdef Py_ssize_t run_len = <Py_ssize_t>h.batch_length + KR_LOG_OVERHEAD - KR_HEADER_SIZE
    cdef int codec = h.attributes & KR_COMPRESSION_MASK
    if codec == 0:
        return _decode_run(out, run, run + run_len, h, pos, start, stop)
    _check_codec(codec, pos)
    plain = _gunzip(run, run_len, MAX_DECOMPRESSED_BYTES, pos)
    run = <const uint8_t *>PyBytes_AS_STRING(plain)
    return _decode_run(out, run, run + PyBytes_GET_SIZE(plain), h, pos, start, stop)


cdef int check_compressed_records(const uint8_t *batch, Py_ssize_t size, Py_ssize_t pos,
                                  Py_ssize_t max_plain, int64_t *max_timestamp) except -1:
    cdef kr_header h
    cdef kr_status s
    cdef int64_t a = 0, b = 0
    cdef bytes plain
    cdef const uint8_t *run
    s = kr_check_batch(batch, <size_t>size, 1, &h, &a, &b)  # the CRC speaks first
    if s != KR_OK:
        _raise_for(s, pos, a, b)
    _check_codec(h.attributes & KR_COMPRESSION_MASK, pos)
    plain = _gunzip(batch + KR_HEADER_SIZE, size - KR_HEADER_SIZE, max_plain, pos)
    run = <const uint8_t *>PyBytes_AS_STRING(plain)
    s = kr_check_record_run(run, run + PyBytes_GET_SIZE(plain), &h, &a, max_timestamp)
    if s != KR_OK:
        _raise_for(s, pos, a, 0)
    return 0


cdef int decode_into(list out, const unsigned char *buf, Py_ssize_t n,
                     Py_ssize_t base_position, int64_t start_offset=INT64_MIN,
                     int64_t stop_offset=INT64_MAX) except -1:
    cdef Py_ssize_t pos = 0
    cdef kr_header h
    cdef kr_status s
    cdef int64_t a = 0, b = 0
    while pos < n:
        s = kr_check_batch(buf + pos, <size_t>(n - pos), 1, &h, &a, &b)
        if s == KR_END:
            break
        if s != KR_OK:
            _raise_for(s, base_position + pos, a, b)
        # Whole batches outside the range are skipped without parsing their records.
        if h.base_offset + h.last_offset_delta >= start_offset and h.base_offset < stop_offset:
            _decode_batch(out, buf + pos, &h, base_position + pos, start_offset, stop_offset)
        pos += <Py_ssize_t>h.batch_length + KR_LOG_OVERHEAD
    return 0


def decode_records(buf, *, start_offset=None, stop_offset=None):
    """Every record of every batch in ``buf``, CRCs checked; stops at zero fill.

    ``start_offset``/``stop_offset`` keep only records with offsets in
    [start_offset, stop_offset) (a fetch from mid-batch, a cap at the high watermark)
    without building the others."""
    cdef Py_buffer b
    cdef int64_t lo = INT64_MIN if start_offset is None else <int64_t>start_offset
    cdef int64_t hi = INT64_MAX if stop_offset is None else <int64_t>stop_offset
    out = []
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        decode_into(out, <const unsigned char *>b.buf, b.len, 0, lo, hi)
    finally:
        PyBuffer_Release(&b)
    return out


@cython.final
cdef class RecordBatch:
    """One v2 batch, a zero-copy view (``data``) into the buffer it was read from.

    Header fields are attributes; ``records()`` decodes, ``valid()`` checks the CRC and
    the record framing.  ``position`` is where the batch starts in that buffer."""

    def __init__(self, *args, **kwargs):
        raise TypeError("RecordBatch objects come from decode_batches() or batch_at()")

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self):
        return _CODECS.get(self.attributes & KR_COMPRESSION_MASK, "unknown")

    @property
    def timestamp_type(self):
        """0 for CreateTime, 1 for LogAppendTime (Kafka's TimestampType ids)."""
        return 1 if self.attributes & KR_LOG_APPEND_TIME else 0

    @property
    def is_transactional(self):
        return bool(self.attributes & KR_TRANSACTIONAL)

    @property
    def is_control(self):
        return bool(self.attributes & KR_CONTROL)

    def records(self):
        """The batch's records as a list of Record (CRC not checked: see valid())."""
        cdef Py_buffer b
        cdef kr_header h
        out = []
        _header_of(self, &h)
        PyObject_GetBuffer(self.data, &b, PyBUF_SIMPLE)
        try:
            _decode_batch(out, <const uint8_t *>b.buf, &h, self.position)
        finally:
            PyBuffer_Release(&b)
        return out

    def valid(self):
        """True when the stored CRC matches and the records are well framed (header keys
        in UTF-8 included: records() could not decode others)."""
        cdef Py_buffer b
        cdef kr_header h
        cdef int64_t bad, max_ts
        PyObject_GetBuffer(self.data, &b, PyBUF_SIMPLE)
        try:
            if kr_check_batch(<const uint8_t *>b.buf, <size_t>b.len, 1, &h, NULL, NULL) != KR_OK:
                return False
            return kr_check_records(<const uint8_t *>b.buf, &h, &bad, &max_ts) == KR_OK
        finally:
            PyBuffer_Release(&b)

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"leader_epoch={self.leader_epoch}, records={self.record_count}, "
                f"size={self.size}, position={self.position})")


cdef void _header_of(RecordBatch rb, kr_header *h) noexcept:
    memset(h, 0, sizeof(kr_header))
    h.base_offset = rb.base_offset
    h.batch_length = <int32_t>(rb.size - KR_LOG_OVERHEAD)
    h.leader_epoch = rb.leader_epoch
    h.attributes = rb.attributes
    h.last_offset_delta = rb.last_offset_delta
    h.base_timestamp = rb.first_timestamp
    h.max_timestamp = rb.max_timestamp
    h.record_count = rb.record_count


cdef RecordBatch _make_batch(object view, Py_ssize_t pos, const kr_header *h):
    cdef RecordBatch rb = RecordBatch.__new__(RecordBatch)
    rb.base_offset = h.base_offset
    rb.leader_epoch = h.leader_epoch
    rb.magic = h.magic
    rb.crc = h.crc
    rb.attributes = h.attributes
    rb.last_offset_delta = h.last_offset_delta
    rb.first_timestamp = h.base_timestamp
    rb.max_timestamp = h.max_timestamp
    rb.producer_id = h.producer_id
    rb.producer_epoch = h.producer_epoch
    rb.base_sequence = h.base_sequence
    rb.record_count = h.record_count
    rb.size = <int64_t>h.batch_length + KR_LOG_OVERHEAD
    rb.position = pos
    rb.data = view[pos:pos + rb.size]
    return rb


cdef object _byte_view(object buf):
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


@cython.final
cdef class _BatchIterator:
    cdef object view
    cdef Py_ssize_t pos, end

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_buffer b
        cdef kr_header h
        cdef kr_status s
        cdef int64_t a = 0, c = 0
        if self.pos >= self.end:
            raise StopIteration
        PyObject_GetBuffer(self.view, &b, PyBUF_SIMPLE)
        try:
            s = kr_check_batch(<const uint8_t *>b.buf + self.pos, <size_t>(self.end - self.pos),
                               0, &h, &a, &c)
        finally:
            PyBuffer_Release(&b)
        if s == KR_END:
            self.pos = self.end
            raise StopIteration
        if s != KR_OK:
            pos = self.pos
            self.pos = self.end
            _raise_for(s, pos, a, c)
        rb = _make_batch(self.view, self.pos, &h)
        self.pos += rb.size
        return rb


def decode_batches(buf, Py_ssize_t position=0, end=None):
    """Iterates the batches of ``buf`` (bytes, memoryview, mmap...) without copying.

    Framing is checked as it goes (CorruptMessage naming the position); CRCs are not,
    see RecordBatch.valid().  Zero fill ends the iteration."""
    cdef _BatchIterator it = _BatchIterator.__new__(_BatchIterator)
    it.view = _byte_view(buf)
    it.end = len(it.view) if end is None else min(<Py_ssize_t>end, len(it.view))
    if position < 0 or position > it.end:
        raise ValueError(f"position {position} is outside the buffer")
    it.pos = position
    return it


def batch_at(buf, Py_ssize_t position=0):
    """The batch that starts at ``position`` (framing checked, CRC not)."""
    for rb in decode_batches(buf, position):
        return rb
    raise errors.CorruptMessage(f"no batch at position {position} (end of data)")


# ---------------------------------------------------------------- scanning

@cython.final
cdef class ScanResult:
    """What scan_batches found: one entry per valid batch, in order.

    ``valid_bytes`` counts from the scan's start position; ``end_position`` is where
    valid data ends; ``error`` is None when the data ended cleanly (or in zero fill),
    else a reason naming the position ("torn ...", "crc mismatch ...")."""
    cdef readonly Py_ssize_t count
    cdef readonly Py_ssize_t valid_bytes
    cdef readonly Py_ssize_t end_position
    cdef readonly object error
    cdef readonly Py_ssize_t error_position
    cdef readonly object positions, base_offsets, last_offsets, max_timestamps
    cdef readonly object sizes, record_counts, leader_epochs

    def __init__(self, *args, **kwargs):
        raise TypeError("ScanResult objects come from scan_batches()")

    @property
    def next_offset(self):
        """Offset after the last valid batch, or None when there is none."""
        return int(self.last_offsets[self.count - 1]) + 1 if self.count else None

    def __repr__(self):
        return (f"ScanResult(count={self.count}, valid_bytes={self.valid_bytes}, "
                f"error={self.error!r})")


cdef object _column(const void *src, size_t n, int typenum):
    cdef cnp.npy_intp dims = <cnp.npy_intp>n
    arr = cnp.PyArray_SimpleNew(1, &dims, typenum)
    if n:
        memcpy(cnp.PyArray_DATA(<cnp.ndarray>arr), src, n * cnp.PyArray_ITEMSIZE(<cnp.ndarray>arr))
    return arr


def scan_batches(buf, Py_ssize_t position=0, end=None, *, bint check_crc=True,
                 bint check_records=False):
    """Validates consecutive batches from ``position`` (to ``end``) in C, without the GIL.

    Stops at the first torn, corrupt or zero-filled batch.  ``check_records`` adds what
    Kafka's leader checks in a producer's batch before assigning offsets in place: not a
    control batch, a nonzero record count equal to lastOffsetDelta + 1 and well-framed
    records whose offset deltas run 0..n-1 and whose header keys are UTF-8; the
    ``max_timestamps`` of uncompressed batches are then their records' own, whatever
    their headers say (the leader writes those into the headers).
    """
    cdef Py_buffer b
    cdef kr_scan_result r
    cdef Py_ssize_t stop
    cdef int rc
    cdef ScanResult res
    memset(&r, 0, sizeof(r))
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        stop = b.len if end is None else min(<Py_ssize_t>end, b.len)
        if position < 0 or position > stop:
            raise ValueError(f"position {position} is outside 0..{stop}")
        with nogil:
            rc = kr_scan(<const uint8_t *>b.buf, <size_t>position, <size_t>stop, check_crc,
                         check_records, &r)
    finally:
        PyBuffer_Release(&b)
    try:
        if rc < 0:
            raise MemoryError(f"out of memory scanning at position {r.error_pos}")
        res = ScanResult.__new__(ScanResult)
        res.count = r.count
        res.valid_bytes = r.valid_end - position
        res.end_position = r.valid_end
        if r.status == KR_OK or r.status == KR_END:
            res.error = None
            res.error_position = -1
        else:
            res.error = _describe(r.status, r.error_pos, r.detail_a, r.detail_b)
            res.error_position = r.error_pos
        res.positions = _column(r.positions, r.count, cnp.NPY_INT64)
        res.base_offsets = _column(r.base_offsets, r.count, cnp.NPY_INT64)
        res.last_offsets = _column(r.last_offsets, r.count, cnp.NPY_INT64)
        res.max_timestamps = _column(r.max_timestamps, r.count, cnp.NPY_INT64)
        res.sizes = _column(r.sizes, r.count, cnp.NPY_INT32)
        res.record_counts = _column(r.record_counts, r.count, cnp.NPY_INT32)
        res.leader_epochs = _column(r.leader_epochs, r.count, cnp.NPY_INT32)
        return res
    finally:
        kr_scan_free(&r)


def batch_fingerprints(buf):
    """``[(base offset, last offset, leader epoch, stored CRC), ...]`` of the whole batches
    at the start of ``buf``, walked as ``scan_batches(buf, check_crc=False)`` walks them.

    The simulator's checker compares replicas by these after almost every event, mostly
    over a few batches: built here directly, they skip the arrays and numpy indexing
    that cost more than the walk itself on small reads."""
    cdef Py_buffer b
    cdef kr_scan_result r
    cdef int rc
    cdef size_t i
    cdef const uint8_t *p
    memset(&r, 0, sizeof(r))
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        with nogil:
            rc = kr_scan(<const uint8_t *>b.buf, 0, <size_t>b.len, 0, 0, &r)
        if rc < 0:
            raise MemoryError(f"out of memory scanning at position {r.error_pos}")
        out = []
        for i in range(r.count):
            p = <const uint8_t *>b.buf + r.positions[i] + 17  # baseOffset, length, epoch, magic
            out.append((r.base_offsets[i], r.last_offsets[i], r.leader_epochs[i],
                        (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]))
        return out
    finally:
        PyBuffer_Release(&b)
        kr_scan_free(&r)


def restamp_batches(buf, int64_t base_offset, int32_t leader_epoch):
    """Assigns consecutive offsets from ``base_offset`` and sets the leader epoch of every
    batch in the writable ``buf``, in place; returns the last offset assigned.

    Both fields lie outside the CRC, so no re-CRC (Kafka's in-place offset assignment).
    Raises CorruptMessage, leaving ``buf`` untouched, when the framing is bad."""
    cdef Py_buffer b
    cdef kr_status s
    cdef kr_header h
    cdef int64_t next_offset = base_offset, a = 0, c = 0
    cdef size_t err = 0
    PyObject_GetBuffer(buf, &b, PyBUF_WRITABLE)
    try:
        if b.len == 0:
            raise errors.CorruptMessage("no batches to restamp")
        s = kr_restamp(<uint8_t *>b.buf, <size_t>b.len, base_offset, leader_epoch,
                       &next_offset, &err)
        if s != KR_OK:  # again, for the numbers the message quotes
            kr_check_batch(<uint8_t *>b.buf + err, <size_t>b.len - err, 0, &h, &a, &c)
    finally:
        PyBuffer_Release(&b)
    if s == KR_END:
        raise errors.CorruptMessage(f"zero bytes where a batch should start at position {err}")
    if s != KR_OK:
        _raise_for(s, err, a, c)
    return next_offset - 1
