/* CRC32C (Castagnoli), the checksum of Kafka's v2 record batch.
 *
 * One entry point, kr_crc32c(), picks the SSE4.2 crc32 instruction when the
 * CPU has it (checked once at run time) and a slicing-by-8 table otherwise.
 * Both paths are also exported so tests can check them against each other.
 * The crc argument is a previous result, so crc32c(b, crc32c(a)) == crc32c(a+b)
 * (the zlib.crc32 convention).
 */
#ifndef KREPLICA_CRC32C_H
#define KREPLICA_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Build the tables and probe the CPU; idempotent, cheap after the first call. */
void kr_crc32c_init(void);

uint32_t kr_crc32c(uint32_t crc, const void *data, size_t n);

/* The table path, always available. */
uint32_t kr_crc32c_sw(uint32_t crc, const void *data, size_t n);

/* The SSE4.2 path; only call it when kr_crc32c_hw_available() is 1. */
uint32_t kr_crc32c_hw(uint32_t crc, const void *data, size_t n);

/* The SSE4.2 path without the AVX-512 folding: the three crc32 lanes that CPUs without
 * VPCLMULQDQ run.  For tests, which cannot reach these lanes otherwise on a CPU that
 * folds; same precondition as kr_crc32c_hw. */
uint32_t kr_crc32c_hw_lanes(uint32_t crc, const void *data, size_t n);

int kr_crc32c_hw_available(void);

#endif
