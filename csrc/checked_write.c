/* Writing a follower's fetch into its segment with the CRC check folded into the copy
 * (see checked_write.h for why the order is write-then-check, piece by piece). */
#define _GNU_SOURCE
#include "checked_write.h"

#include <errno.h>
#include <unistd.h>

#include "crc32c.h"

static int write_all(int fd, const uint8_t *p, size_t n, int64_t at, size_t *done)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)at);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return ENOSPC;
        p += w;
        n -= (size_t)w;
        at += w;
        *done += (size_t)w;
    }
    return 0;
}

/* Puts zeros back over what an abandoned append wrote, so bytes past the segment's data
 * stay zero (readers and recovery take zeros as the end). */
static void unwrite(int fd, int64_t at, size_t n)
{
    static const uint8_t zeros[64 << 10];
    size_t ignored = 0;
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (write_all(fd, zeros, k, at, &ignored))
            return;
        at += (int64_t)k;
        n -= k;
    }
}

kr_write_status kr_write_checked(int fd, const uint8_t *buf, size_t len, int64_t file_pos,
                           const int64_t *positions, const int32_t *sizes, size_t count,
                           kr_write_report *out)
{
    size_t done = 0, b = 0, checked = count ? (size_t)positions[0] + KR_CRC_START : len;
    uint32_t crc = 0;
    out->written = 0;
    out->error = 0;
    while (done < len) {
        /* pieces end at file offsets that are multiples of the piece size: only the first
         * and last page of the whole write are partial pages, as with one big write */
        size_t n = KR_CHECKED_PIECE - (size_t)((file_pos + (int64_t)done) % KR_CHECKED_PIECE);
        if (n > len - done)
            n = len - done;
        int err = write_all(fd, buf + done, n, file_pos + (int64_t)done, &out->written);
        if (err) {
            out->error = err;
            unwrite(fd, file_pos, out->written);
            return KR_WRITE_IO_ERROR;
        }
        done += n;
        /* checksum every batch byte that has just been written */
        while (b < count) {
            size_t end = (size_t)positions[b] + (size_t)sizes[b];
            size_t upto = end < done ? end : done;
            if (upto > checked) {
                crc = kr_crc32c(crc, buf + checked, upto - checked);
                checked = upto;
            }
            if (end > done)
                break;
            uint32_t stored = kr_be32(buf + positions[b] + KR_OFF_CRC);
            if (crc != stored) {
                out->bad_batch = b;
                out->stored_crc = stored;
                out->computed_crc = crc;
                unwrite(fd, file_pos, out->written);
                return KR_WRITE_CRC_MISMATCH;
            }
            crc = 0;
            if (++b < count)
                checked = (size_t)positions[b] + KR_CRC_START;
        }
    }
    return KR_WRITE_OK;
}
