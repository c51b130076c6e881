/* crc32c_combine.h — the CRC-32C of a concatenation from the CRCs of its two parts, so that
 * blocks checked out of order (the lazy restart's prefetch threads) give the region's CRC. */
#ifndef CRAC_CRC32C_COMBINE_H
#define CRAC_CRC32C_COMBINE_H

#include <stdint.h>

/* crc32c_update(0, A || B) from crc_a = crc32c_update(0, A), crc_b = crc32c_update(0, B) and
 * len_b = the length of B in bytes. No state: any thread may call it. */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif
