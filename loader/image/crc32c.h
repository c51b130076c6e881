/* crc32c.h — CRC-32C (Castagnoli), hardware-accelerated where SSE4.2 (and PCLMULQDQ) is present. */
#ifndef CRAC_CRC32C_H
#define CRAC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC (start with 0). */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

/* The CRC of A followed by B from crc1 = CRC of A, crc2 = CRC of B (each from 0) and B's length:
 * pieces summed apart (by two threads) joined into the CRC of the whole. */
uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

#endif
