/* Copying validated-as-it-goes batches into a file: one trip of the source through memory.
 *
 * A follower must CRC-check every batch it receives, and a check of a fetch that came
 * from far away reads it from memory once; the copy into the page cache (pwrite) reads
 * it again.  Writing the fetch in pieces and checking each piece right after it was
 * written finds the source still in cache: the check then costs what a CRC of warm data
 * costs (about 15 us per MiB here) instead of a second trip (about 100 us per MiB).
 */
#ifndef KREPLICA_CHECKED_WRITE_H
#define KREPLICA_CHECKED_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"

/* Bytes written between two checks: large enough that a pwrite's fixed cost is small,
 * small enough that the piece is still in the core's L2 cache when it is checked. */
#ifndef KR_CHECKED_PIECE
#define KR_CHECKED_PIECE (256u << 10)
#endif

typedef enum {
    KR_WRITE_OK = 0,
    KR_WRITE_CRC_MISMATCH, /* bad_batch, stored_crc and computed_crc say which and how */
    KR_WRITE_IO_ERROR,     /* error holds the errno of the failed pwrite */
} kr_write_status;

typedef struct {
    size_t written;      /* bytes that reached the file from file_pos on */
    size_t bad_batch;    /* index of the batch whose CRC did not match */
    uint32_t stored_crc, computed_crc;
    int error;           /* errno of a failed pwrite, else 0 */
} kr_write_report;

/* Writes buf[0:len) at file_pos of fd, where the batches framed by positions[i] and
 * sizes[i] (i < count, consecutive from 0, ending at len) were framing-checked but not
 * CRC-checked, and checks every batch's CRC once the piece holding its end is written.
 * Returns KR_WRITE_OK when all is written and every CRC matched, else why it stopped.
 * On an early stop the bytes written so far are overwritten with zeros again
 * (best effort: the caller never counted them as appended, and recovery re-checks). */
kr_write_status kr_write_checked(int fd, const uint8_t *buf, size_t len, int64_t file_pos,
                           const int64_t *positions, const int32_t *sizes, size_t count,
                           kr_write_report *out);

#endif
