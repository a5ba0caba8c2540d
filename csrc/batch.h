/* Kafka v2 record batch (magic 2): layout, varints, header parsing, scanning.
 *
 * Batch header, big-endian, 61 bytes:
 *   0 baseOffset i64 | 8 batchLength i32 (bytes after this field) | 12 partitionLeaderEpoch i32
 *   16 magic i8 | 17 crc u32 (CRC32C of byte 21..end) | 21 attributes i16
 *   23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64
 *   51 producerEpoch i16 | 53 baseSequence i32 | 57 recordCount i32 | 61 records...
 * Record: length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint (-1 = null) | key | valueLength varint | value |
 *   headerCount varint | { keyLength varint | key (UTF-8) | valueLength varint | value }.
 * Varints are zigzag LEB128, as in protobuf.  baseOffset and partitionLeaderEpoch lie
 * outside the CRC, which is why a leader can stamp them in place.
 */
#ifndef KREPLICA_BATCH_H
#define KREPLICA_BATCH_H

#include <stddef.h>
#include <stdint.h>

#define KR_HEADER_SIZE 61
#define KR_LOG_OVERHEAD 12 /* baseOffset + batchLength precede what batchLength counts */
#define KR_MAX_BATCH_LENGTH (INT32_MAX - KR_LOG_OVERHEAD) /* so a batch's whole size fits an int32 */
#define KR_CRC_START 21
#define KR_MIN_RECORD_SIZE 7 /* one byte each: length, attrs, ts, offset, key, value, headers */
#define KR_COMPRESSION_MASK 0x07
#define KR_LOG_APPEND_TIME 0x08
#define KR_TRANSACTIONAL 0x10
#define KR_CONTROL 0x20

#define KR_OFF_BASE_OFFSET 0
#define KR_OFF_LENGTH 8
#define KR_OFF_LEADER_EPOCH 12
#define KR_OFF_MAGIC 16
#define KR_OFF_CRC 17
#define KR_OFF_ATTRIBUTES 21
#define KR_OFF_LAST_OFFSET_DELTA 23
#define KR_OFF_BASE_TIMESTAMP 27
#define KR_OFF_MAX_TIMESTAMP 35
#define KR_OFF_PRODUCER_ID 43
#define KR_OFF_PRODUCER_EPOCH 51
#define KR_OFF_BASE_SEQUENCE 53
#define KR_OFF_RECORD_COUNT 57

typedef enum {
    KR_OK = 0,
    KR_END,          /* zero bytes where a header would start: a preallocated tail */
    KR_TORN,         /* the batch runs past the end of the data */
    KR_BAD_LENGTH,   /* batchLength below the header size or above KR_MAX_BATCH_LENGTH */
    KR_BAD_MAGIC,    /* not magic 2 */
    KR_BAD_HEADER,   /* negative record count or offset delta, count too large for the size */
    KR_CRC_MISMATCH,
    KR_BAD_RECORD,   /* record framing inside a CRC-valid batch is inconsistent */
    KR_NO_MEMORY,
    KR_CONTROL_BATCH,   /* a producer's batch with the control bit: only brokers write those */
    KR_BAD_HEADER_KEY,  /* a record header key that is not UTF-8 */
} kr_status;

typedef struct {
    int64_t base_offset;
    int32_t batch_length;
    int32_t leader_epoch;
    int8_t magic;
    uint32_t crc;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t record_count;
} kr_header;

/* One record's fields, pointing into the batch; headers are left encoded. */
typedef struct {
    int64_t timestamp_delta;
    int32_t offset_delta;
    int32_t key_len; /* -1 for null */
    int32_t value_len;
    int32_t header_count;
    const uint8_t *key;
    const uint8_t *value;
    const uint8_t *headers; /* header_count encoded headers, already validated */
    int8_t attributes;
} kr_record;

/* Growable columns filled by kr_scan, one row per valid batch. */
typedef struct {
    int64_t *positions, *base_offsets, *last_offsets, *max_timestamps;
    int32_t *sizes, *record_counts, *leader_epochs;
    size_t count, cap;
    size_t valid_end;       /* absolute position just after the last valid batch */
    kr_status status;       /* why scanning stopped: KR_OK (data ended cleanly), KR_END, or an error */
    size_t error_pos;       /* where the bad batch starts */
    int64_t detail_a, detail_b; /* status-specific: stored/computed CRC, needed/available bytes... */
} kr_scan_result;

/* ---- big-endian fields ---- */
static inline uint16_t kr_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t kr_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t kr_be64(const uint8_t *p) { return (uint64_t)kr_be32(p) << 32 | kr_be32(p + 4); }
static inline void kr_put_be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void kr_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void kr_put_be64(uint8_t *p, uint64_t v) { kr_put_be32(p, (uint32_t)(v >> 32)); kr_put_be32(p + 4, (uint32_t)v); }

/* ---- zigzag varints ---- */
static inline uint64_t kr_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline int kr_varint_size(int64_t v)
{
    uint64_t z = kr_zigzag(v);
    int n = 1;
    while (z >= 0x80) { z >>= 7; n++; }
    return n;
}

static inline uint8_t *kr_put_varint(uint8_t *p, int64_t v)
{
    uint64_t z = kr_zigzag(v);
    while (z >= 0x80) { *p++ = (uint8_t)(z | 0x80); z >>= 7; }
    *p++ = (uint8_t)z;
    return p;
}

/* Reads a zigzag varint of at most max_bytes (5 for int32, 10 for int64).
 * Returns the position after it, or NULL when truncated or overlong. */
static inline const uint8_t *kr_get_varint(const uint8_t *p, const uint8_t *end, int max_bytes, int64_t *out)
{
    uint64_t z = 0;
    for (int shift = 0, i = 0; i < max_bytes; i++, shift += 7) {
        if (p >= end)
            return NULL;
        uint8_t b = *p++;
        z |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
            return p;
        }
    }
    return NULL;
}

/* ---- batches ---- */
void kr_read_header(const uint8_t *p, kr_header *h);

/* Checks the batch at p with `avail` bytes after it: header sanity, bounds, and the CRC
 * when check_crc.  Fills h (as far as it could be read).  detail_a/b get numbers for the
 * error message (may be NULL). */
kr_status kr_check_batch(const uint8_t *p, size_t avail, int check_crc, kr_header *h,
                         int64_t *detail_a, int64_t *detail_b);

/* Walks batches from buf[pos] to buf[end], stopping at the first bad one or at zeros.
 * check_records adds the leader's checks of a producer batch: not a control batch, a
 * nonzero record count equal to lastOffsetDelta + 1, and well-framed records with deltas
 * 0..n-1 and UTF-8 header keys; the max_timestamps column then holds the records' own
 * max timestamp (for an uncompressed batch), whatever its header says.
 * Returns 0, or -1 when out of memory (out->status is then KR_NO_MEMORY). */
int kr_scan(const uint8_t *buf, size_t pos, size_t end, int check_crc, int check_records,
            kr_scan_result *out);
void kr_scan_free(kr_scan_result *r);

/* Parses one record at p (its length varint first); returns the position after it or
 * NULL when malformed. */
const uint8_t *kr_parse_record(const uint8_t *p, const uint8_t *end, kr_record *r);

/* Parses one encoded header at p; returns the position after it (NULL when malformed). */
const uint8_t *kr_parse_header(const uint8_t *p, const uint8_t *end, const uint8_t **key,
                               int32_t *key_len, const uint8_t **value, int32_t *value_len);

/* Checks the records of an uncompressed batch: count, framing, offset deltas that rise
 * strictly within [0, lastOffsetDelta], and header keys in UTF-8 (no reader could decode
 * others).  *max_timestamp gets the records' max timestamp (a compressed batch is not
 * looked into: its header's). */
kr_status kr_check_records(const uint8_t *batch, const kr_header *h, int64_t *bad_index,
                           int64_t *max_timestamp);

/* kr_check_records over a run of h->record_count records at p..end (an uncompressed
 * batch's, or a compressed one's once decompressed). */
kr_status kr_check_record_run(const uint8_t *p, const uint8_t *end, const kr_header *h,
                              int64_t *bad_index, int64_t *max_timestamp);

/* Sets baseOffset and partitionLeaderEpoch of consecutive batches in place, starting at
 * base_offset.  *next_offset receives the offset after the last batch.  On error,
 * *error_pos is the bad batch's position and nothing after it was touched. */
kr_status kr_restamp(uint8_t *buf, size_t len, int64_t base_offset, int32_t leader_epoch,
                     int64_t *next_offset, size_t *error_pos);

/* Fills in the 61-byte header at p for a batch whose records are already at p+61,
 * computing the CRC. */
void kr_write_header(uint8_t *p, size_t total_size, const kr_header *h);

const char *kr_status_name(kr_status s);

#endif
