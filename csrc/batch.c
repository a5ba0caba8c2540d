/* Kafka v2 record batches: header checks, scanning, in-place restamping, record framing.
 *
 * Everything here works on raw bytes without the GIL, so the Cython layer can call it
 * inside `with nogil` on a mapped segment.  Follows Kafka's DefaultRecordBatch layout
 * and its recovery rule: the first batch that is torn or fails its CRC ends the log.
 */
#include "batch.h"

#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

void kr_read_header(const uint8_t *p, kr_header *h)
{
    h->base_offset = (int64_t)kr_be64(p + KR_OFF_BASE_OFFSET);
    h->batch_length = (int32_t)kr_be32(p + KR_OFF_LENGTH);
    h->leader_epoch = (int32_t)kr_be32(p + KR_OFF_LEADER_EPOCH);
    h->magic = (int8_t)p[KR_OFF_MAGIC];
    h->crc = kr_be32(p + KR_OFF_CRC);
    h->attributes = (int16_t)kr_be16(p + KR_OFF_ATTRIBUTES);
    h->last_offset_delta = (int32_t)kr_be32(p + KR_OFF_LAST_OFFSET_DELTA);
    h->base_timestamp = (int64_t)kr_be64(p + KR_OFF_BASE_TIMESTAMP);
    h->max_timestamp = (int64_t)kr_be64(p + KR_OFF_MAX_TIMESTAMP);
    h->producer_id = (int64_t)kr_be64(p + KR_OFF_PRODUCER_ID);
    h->producer_epoch = (int16_t)kr_be16(p + KR_OFF_PRODUCER_EPOCH);
    h->base_sequence = (int32_t)kr_be32(p + KR_OFF_BASE_SEQUENCE);
    h->record_count = (int32_t)kr_be32(p + KR_OFF_RECORD_COUNT);
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

kr_status kr_check_batch(const uint8_t *p, size_t avail, int check_crc, kr_header *h,
                         int64_t *detail_a, int64_t *detail_b)
{
    int64_t scratch_a, scratch_b;
    if (!detail_a)
        detail_a = &scratch_a;
    if (!detail_b)
        detail_b = &scratch_b;
    memset(h, 0, sizeof *h);
    /* A valid header always has a nonzero length and magic, so zeros here can only be
     * space that was preallocated and never written. */
    if (all_zero(p, avail < KR_HEADER_SIZE ? avail : KR_HEADER_SIZE))
        return KR_END;
    if (avail < KR_LOG_OVERHEAD) {
        *detail_a = KR_LOG_OVERHEAD;
        *detail_b = (int64_t)avail;
        return KR_TORN;
    }
    h->base_offset = (int64_t)kr_be64(p);
    h->batch_length = (int32_t)kr_be32(p + KR_OFF_LENGTH);
    if (avail > KR_OFF_MAGIC && p[KR_OFF_MAGIC] != 2) {
        *detail_a = (int8_t)p[KR_OFF_MAGIC];
        return KR_BAD_MAGIC;
    }
    /* A batch's whole size (the length plus the 12 bytes before it) must fit an int32, as
     * Kafka's sizeInBytes does; a larger length wrapped negative in sizes and positions. */
    if (h->batch_length < KR_HEADER_SIZE - KR_LOG_OVERHEAD || h->batch_length > KR_MAX_BATCH_LENGTH) {
        *detail_a = h->batch_length;
        return KR_BAD_LENGTH;
    }
    size_t size = (size_t)h->batch_length + KR_LOG_OVERHEAD;
    if (size > avail) {
        *detail_a = (int64_t)size;
        *detail_b = (int64_t)avail;
        return KR_TORN;
    }
    kr_read_header(p, h);
    if (h->record_count < 0 || h->last_offset_delta < 0) {
        *detail_a = h->record_count;
        *detail_b = h->last_offset_delta;
        return KR_BAD_HEADER;
    }
    if (!(h->attributes & KR_COMPRESSION_MASK) &&
        (int64_t)h->record_count * KR_MIN_RECORD_SIZE > (int64_t)(size - KR_HEADER_SIZE)) {
        *detail_a = h->record_count;
        *detail_b = h->batch_length;
        return KR_BAD_HEADER;
    }
    if (check_crc) {
        uint32_t computed = kr_crc32c(0, p + KR_CRC_START, size - KR_CRC_START);
        if (computed != h->crc) {
            *detail_a = h->crc;
            *detail_b = computed;
            return KR_CRC_MISMATCH;
        }
    }
    return KR_OK;
}

static int grow(kr_scan_result *r)
{
    size_t cap = r->cap ? r->cap * 2 : 64;
#define GROW(field, type)                                        \
    do {                                                         \
        type *n = realloc(r->field, cap * sizeof(type));         \
        if (!n)                                                  \
            return -1;                                           \
        r->field = n;                                            \
    } while (0)
    GROW(positions, int64_t);
    GROW(base_offsets, int64_t);
    GROW(last_offsets, int64_t);
    GROW(max_timestamps, int64_t);
    GROW(sizes, int32_t);
    GROW(record_counts, int32_t);
    GROW(leader_epochs, int32_t);
#undef GROW
    r->cap = cap;
    return 0;
}

int kr_scan(const uint8_t *buf, size_t pos, size_t end, int check_crc, int check_records,
            kr_scan_result *out)
{
    out->count = 0;
    out->valid_end = pos;
    out->status = KR_OK;
    out->error_pos = 0;
    out->detail_a = out->detail_b = 0;
    while (pos < end) {
        kr_header h;
        kr_status s = kr_check_batch(buf + pos, end - pos, check_crc, &h, &out->detail_a,
                                     &out->detail_b);
        int64_t max_ts = h.max_timestamp;
        if (s == KR_OK && check_records) {
            /* What Kafka's leader demands of a producer's batch before it assigns
             * offsets in place: no control batch (only brokers write those: transaction
             * markers), a record count that matches the offset range, decodable records. */
            if (h.attributes & KR_CONTROL) {
                s = KR_CONTROL_BATCH;
            } else if (h.record_count == 0 || h.record_count != (int64_t)h.last_offset_delta + 1) {
                s = KR_BAD_HEADER;
                out->detail_a = h.record_count;
                out->detail_b = h.last_offset_delta;
            } else {
                s = kr_check_records(buf + pos, &h, &out->detail_a, &max_ts);
            }
        }
        if (s != KR_OK) {
            out->status = s;
            out->error_pos = pos;
            return 0;
        }
        if (out->count == out->cap && grow(out) < 0) {
            out->status = KR_NO_MEMORY;
            out->error_pos = pos;
            return -1;
        }
        size_t i = out->count++;
        out->positions[i] = (int64_t)pos;
        out->base_offsets[i] = h.base_offset;
        out->last_offsets[i] = h.base_offset + h.last_offset_delta;
        out->max_timestamps[i] = max_ts;
        out->sizes[i] = h.batch_length + KR_LOG_OVERHEAD;
        out->record_counts[i] = h.record_count;
        out->leader_epochs[i] = h.leader_epoch;
        pos += (size_t)h.batch_length + KR_LOG_OVERHEAD;
        out->valid_end = pos;
    }
    return 0;
}

void kr_scan_free(kr_scan_result *r)
{
    free(r->positions);
    free(r->base_offsets);
    free(r->last_offsets);
    free(r->max_timestamps);
    free(r->sizes);
    free(r->record_counts);
    free(r->leader_epochs);
    memset(r, 0, sizeof *r);
}

/* A length-prefixed byte string (-1 = null) of at most `end - p` bytes. */
static const uint8_t *get_bytes(const uint8_t *p, const uint8_t *end, int allow_null,
                                const uint8_t **data, int32_t *len)
{
    int64_t n;
    p = kr_get_varint(p, end, 5, &n);
    if (!p || n < (allow_null ? -1 : 0) || n > end - p)
        return NULL;
    *len = (int32_t)n;
    *data = n < 0 ? NULL : p;
    return n < 0 ? p : p + n;
}

const uint8_t *kr_parse_header(const uint8_t *p, const uint8_t *end, const uint8_t **key,
                               int32_t *key_len, const uint8_t **value, int32_t *value_len)
{
    p = get_bytes(p, end, 0, key, key_len);
    return p ? get_bytes(p, end, 1, value, value_len) : NULL;
}

const uint8_t *kr_parse_record(const uint8_t *p, const uint8_t *end, kr_record *r)
{
    int64_t len, v;
    p = kr_get_varint(p, end, 5, &len);
    if (!p || len < KR_MIN_RECORD_SIZE - 1 || len > end - p)
        return NULL;
    const uint8_t *rend = p + len;
    r->attributes = (int8_t)*p++;
    p = kr_get_varint(p, rend, 10, &r->timestamp_delta);
    if (!p)
        return NULL;
    p = kr_get_varint(p, rend, 5, &v);
    if (!p || v < INT32_MIN || v > INT32_MAX)
        return NULL;
    r->offset_delta = (int32_t)v;
    if (!(p = get_bytes(p, rend, 1, &r->key, &r->key_len)))
        return NULL;
    if (!(p = get_bytes(p, rend, 1, &r->value, &r->value_len)))
        return NULL;
    p = kr_get_varint(p, rend, 5, &v);
    /* every header takes at least two bytes, which bounds a hostile count */
    if (!p || v < 0 || v > (rend - p) / 2)
        return NULL;
    r->header_count = (int32_t)v;
    r->headers = p;
    for (int32_t i = 0; i < r->header_count; i++) {
        const uint8_t *k, *val;
        int32_t kl, vl;
        if (!(p = kr_parse_header(p, rend, &k, &kl, &val, &vl)))
            return NULL;
    }
    return p == rend ? p : NULL;
}

/* Strict UTF-8, as Python's decoder takes it: no overlong forms, no surrogates, nothing
 * past U+10FFFF. */
static int valid_utf8(const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        uint8_t c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        int len;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (end - p < len)
            return 0;
        for (int i = 1; i < len; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        p += len;
    }
    return 1;
}

/* The header keys of a record parsed by kr_parse_record (headers..end) are UTF-8. */
static int header_keys_utf8(const uint8_t *p, const uint8_t *end, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        const uint8_t *k, *v;
        int32_t kl, vl;
        p = kr_parse_header(p, end, &k, &kl, &v, &vl);
        if (!p || !valid_utf8(k, k + kl))
            return 0;
    }
    return 1;
}

kr_status kr_check_record_run(const uint8_t *p, const uint8_t *end, const kr_header *h,
                              int64_t *bad_index, int64_t *max_timestamp)
{
    int32_t prev = -1;
    int64_t max_delta = INT64_MIN;
    for (int32_t i = 0; i < h->record_count; i++) {
        kr_record r;
        const uint8_t *next = kr_parse_record(p, end, &r);
        /* offsets rise strictly inside a batch and end at lastOffsetDelta at the latest */
        if (!next || r.offset_delta <= prev || r.offset_delta > h->last_offset_delta) {
            *bad_index = i;
            return KR_BAD_RECORD;
        }
        if (r.header_count && !header_keys_utf8(r.headers, next, r.header_count)) {
            *bad_index = i;
            return KR_BAD_HEADER_KEY;
        }
        prev = r.offset_delta;
        if (r.timestamp_delta > max_delta)
            max_delta = r.timestamp_delta;
        p = next;
    }
    if (p != end) {
        *bad_index = h->record_count;
        return KR_BAD_RECORD;
    }
    /* a record's timestamp is the base plus its delta, wrapping as the decoder's does */
    *max_timestamp = h->record_count
        ? (int64_t)((uint64_t)h->base_timestamp + (uint64_t)max_delta) : h->max_timestamp;
    return KR_OK;
}

kr_status kr_check_records(const uint8_t *batch, const kr_header *h, int64_t *bad_index,
                           int64_t *max_timestamp)
{
    *max_timestamp = h->max_timestamp;
    if (h->attributes & KR_COMPRESSION_MASK)
        return KR_OK; /* framing of compressed records is checked when decompressed */
    return kr_check_record_run(batch + KR_HEADER_SIZE, batch + KR_LOG_OVERHEAD + h->batch_length, h,
                               bad_index, max_timestamp);
}

kr_status kr_restamp(uint8_t *buf, size_t len, int64_t base_offset, int32_t leader_epoch,
                     int64_t *next_offset, size_t *error_pos)
{
    kr_header h;
    /* Check the framing of every batch before touching any, so a bad input is left as is. */
    for (size_t pos = 0; pos < len; pos += (size_t)h.batch_length + KR_LOG_OVERHEAD) {
        kr_status s = kr_check_batch(buf + pos, len - pos, 0, &h, NULL, NULL);
        if (s != KR_OK) {
            *error_pos = pos;
            return s;
        }
    }
    int64_t next = base_offset;
    for (size_t pos = 0; pos < len; pos += (size_t)h.batch_length + KR_LOG_OVERHEAD) {
        kr_read_header(buf + pos, &h);
        kr_put_be64(buf + pos + KR_OFF_BASE_OFFSET, (uint64_t)next);
        kr_put_be32(buf + pos + KR_OFF_LEADER_EPOCH, (uint32_t)leader_epoch);
        next += (int64_t)h.last_offset_delta + 1;
    }
    *next_offset = next;
    return KR_OK;
}

void kr_write_header(uint8_t *p, size_t total_size, const kr_header *h)
{
    kr_put_be64(p + KR_OFF_BASE_OFFSET, (uint64_t)h->base_offset);
    kr_put_be32(p + KR_OFF_LENGTH, (uint32_t)(total_size - KR_LOG_OVERHEAD));
    kr_put_be32(p + KR_OFF_LEADER_EPOCH, (uint32_t)h->leader_epoch);
    p[KR_OFF_MAGIC] = 2;
    kr_put_be16(p + KR_OFF_ATTRIBUTES, (uint16_t)h->attributes);
    kr_put_be32(p + KR_OFF_LAST_OFFSET_DELTA, (uint32_t)h->last_offset_delta);
    kr_put_be64(p + KR_OFF_BASE_TIMESTAMP, (uint64_t)h->base_timestamp);
    kr_put_be64(p + KR_OFF_MAX_TIMESTAMP, (uint64_t)h->max_timestamp);
    kr_put_be64(p + KR_OFF_PRODUCER_ID, (uint64_t)h->producer_id);
    kr_put_be16(p + KR_OFF_PRODUCER_EPOCH, (uint16_t)h->producer_epoch);
    kr_put_be32(p + KR_OFF_BASE_SEQUENCE, (uint32_t)h->base_sequence);
    kr_put_be32(p + KR_OFF_RECORD_COUNT, (uint32_t)h->record_count);
    kr_put_be32(p + KR_OFF_CRC, kr_crc32c(0, p + KR_CRC_START, total_size - KR_CRC_START));
}

const char *kr_status_name(kr_status s)
{
    switch (s) {
    case KR_OK: return "ok";
    case KR_END: return "end";
    case KR_TORN: return "torn";
    case KR_BAD_LENGTH: return "bad length";
    case KR_BAD_MAGIC: return "bad magic";
    case KR_BAD_HEADER: return "bad header";
    case KR_CRC_MISMATCH: return "crc mismatch";
    case KR_BAD_RECORD: return "bad record";
    case KR_NO_MEMORY: return "out of memory";
    case KR_CONTROL_BATCH: return "control batch";
    case KR_BAD_HEADER_KEY: return "header key not UTF-8";
    }
    return "unknown";
}
