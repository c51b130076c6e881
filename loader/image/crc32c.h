/* crc32c.h — CRC-32C (Castagnoli), hardware-accelerated where SSE4.2 (and PCLMULQDQ) is present. */
#ifndef CRAC_CRC32C_H
#define CRAC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC (start with 0). */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

#endif
