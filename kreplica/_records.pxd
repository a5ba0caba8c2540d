# cython: language_level=3
"""C-level surface of the v2 record-batch codec, for other .pyx modules to cimport.

    from kreplica._records cimport encode_into, encoded_size, Record, RecordBatch
    from kreplica._records cimport kr_check_batch, kr_header, kr_crc32c  # the C helpers

csrc/*.c is linked into every extension, so the C functions declared here resolve
inside the cimporting module too.
"""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef extern from "crc32c.h" nogil:
    void kr_crc32c_init()
    uint32_t kr_crc32c(uint32_t crc, const void *data, size_t n)
    uint32_t kr_crc32c_sw(uint32_t crc, const void *data, size_t n)
    uint32_t kr_crc32c_hw(uint32_t crc, const void *data, size_t n)
    uint32_t kr_crc32c_hw_lanes(uint32_t crc, const void *data, size_t n)
    int kr_crc32c_hw_available()


cdef extern from "batch.h" nogil:
    enum:
        KR_HEADER_SIZE
        KR_LOG_OVERHEAD
        KR_MAX_BATCH_LENGTH
        KR_CRC_START
        KR_MIN_RECORD_SIZE
        KR_OFF_BASE_OFFSET
        KR_OFF_LENGTH
        KR_OFF_LEADER_EPOCH
        KR_OFF_MAGIC
        KR_OFF_CRC
        KR_OFF_ATTRIBUTES
        KR_OFF_LAST_OFFSET_DELTA
        KR_OFF_BASE_TIMESTAMP
        KR_OFF_MAX_TIMESTAMP
        KR_OFF_PRODUCER_ID
        KR_OFF_PRODUCER_EPOCH
        KR_OFF_BASE_SEQUENCE
        KR_OFF_RECORD_COUNT
        KR_COMPRESSION_MASK
        KR_LOG_APPEND_TIME
        KR_TRANSACTIONAL
        KR_CONTROL

    ctypedef enum kr_status:
        KR_OK
        KR_END
        KR_TORN
        KR_BAD_LENGTH
        KR_BAD_MAGIC
        KR_BAD_HEADER
        KR_CRC_MISMATCH
        KR_BAD_RECORD
        KR_NO_MEMORY
        KR_CONTROL_BATCH
        KR_BAD_HEADER_KEY

    ctypedef struct kr_header:
        int64_t base_offset
        int32_t batch_length
        int32_t leader_epoch
        int8_t magic
        uint32_t crc
        int16_t attributes
        int32_t last_offset_delta
        int64_t base_timestamp
        int64_t max_timestamp
        int64_t producer_id
        int16_t producer_epoch
        int32_t base_sequence
        int32_t record_count

    ctypedef struct kr_record:
        int64_t timestamp_delta
        int32_t offset_delta
        int32_t key_len
        int32_t value_len
        int32_t header_count
        const uint8_t *key
        const uint8_t *value
        const uint8_t *headers
        int8_t attributes

    ctypedef struct kr_scan_result:
        int64_t *positions
        int64_t *base_offsets
        int64_t *last_offsets
        int64_t *max_timestamps
        int32_t *sizes
        int32_t *record_counts
        int32_t *leader_epochs
        size_t count
        size_t cap
        size_t valid_end
        kr_status status
        size_t error_pos
        int64_t detail_a
        int64_t detail_b

    uint32_t kr_be32(const uint8_t *p)
    uint64_t kr_be64(const uint8_t *p)
    void kr_put_be32(uint8_t *p, uint32_t v)
    void kr_put_be64(uint8_t *p, uint64_t v)
    int kr_varint_size(int64_t v)
    uint8_t *kr_put_varint(uint8_t *p, int64_t v)
    void kr_read_header(const uint8_t *p, kr_header *h)
    kr_status kr_check_batch(const uint8_t *p, size_t avail, int check_crc, kr_header *h,
                             int64_t *detail_a, int64_t *detail_b)
    int kr_scan(const uint8_t *buf, size_t pos, size_t end, int check_crc, int check_records,
                kr_scan_result *out)
    void kr_scan_free(kr_scan_result *r)
    const uint8_t *kr_parse_record(const uint8_t *p, const uint8_t *end, kr_record *r)
    const uint8_t *kr_parse_header(const uint8_t *p, const uint8_t *end, const uint8_t **key,
                                   int32_t *key_len, const uint8_t **value, int32_t *value_len)
    kr_status kr_check_records(const uint8_t *batch, const kr_header *h, int64_t *bad_index,
                               int64_t *max_timestamp)
    kr_status kr_check_record_run(const uint8_t *p, const uint8_t *end, const kr_header *h,
                                  int64_t *bad_index, int64_t *max_timestamp)
    kr_status kr_restamp(uint8_t *buf, size_t len, int64_t base_offset, int32_t leader_epoch,
                         int64_t *next_offset, size_t *error_pos)
    void kr_write_header(uint8_t *p, size_t total_size, const kr_header *h)
    const char *kr_status_name(kr_status s)


cdef class Record:
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers


cdef class RecordBatch:
    cdef readonly int64_t base_offset
    cdef readonly int32_t leader_epoch
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t first_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t record_count
    cdef readonly int64_t size
    cdef readonly int64_t position
    cdef readonly object data


# Bytes one batch of `items` takes (header included); items as encode_batch takes them.
cdef Py_ssize_t encoded_size(list items, int64_t timestamp_ms) except -1

# Encodes one batch into dst[0:cap]; returns the bytes written, or -needed when cap is too
# small (nothing is written then).  timestamp_ms -1 means "no timestamp" (Kafka's -1).
cdef Py_ssize_t encode_into(unsigned char *dst, Py_ssize_t cap, list items, int64_t base_offset,
                            int32_t leader_epoch, int64_t timestamp_ms) except -1

# Appends the Records of every batch in buf[0:n] to out, checking CRCs; raises
# CorruptMessage / InvalidRecord naming the position (base_position + offset in buf).
# Only records with offsets in [start_offset, stop_offset) are built.
cdef int decode_into(list out, const unsigned char *buf, Py_ssize_t n,
                     Py_ssize_t base_position, int64_t start_offset=*,
                     int64_t stop_offset=*) except -1


# The message a scan status gets in CorruptMessage / InvalidRecord ("crc mismatch at position ...").
cdef str _describe(kr_status s, Py_ssize_t pos, int64_t a, int64_t b)

# What a leader checks in a compressed producer batch of `size` bytes at `batch` (position
# `pos`): its CRC, then its records once decompressed (at most `max_plain` bytes of them, else
# RecordTooLarge), as kr_check_records does an uncompressed batch's.  *max_timestamp gets the
# records' max timestamp.
cdef int check_compressed_records(const uint8_t *batch, Py_ssize_t size, Py_ssize_t pos,
                                  Py_ssize_t max_plain, int64_t *max_timestamp) except -1
