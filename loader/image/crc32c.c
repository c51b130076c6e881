/* crc32c.c — CRC-32C for image integrity checks: the SSE4.2 crc32 instruction when the CPU has
 * it (several GB/s, so verifying a restart costs little), a table otherwise. */
#include "crc32c.h"

#include <string.h>

#define POLY 0x82f63b78u

static uint32_t table[256];

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[i] = c;
    }
}

static uint32_t crc_table(uint32_t crc, const unsigned char *p, size_t len)
{
    if (!table[1])
        build_table();
    while (len--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p,
                                                         size_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
    static int has_hw = -1;
    if (has_hw < 0) {
        __builtin_cpu_init();
        has_hw = __builtin_cpu_supports("sse4.2");
    }
    crc = ~crc;
    crc = has_hw ? crc_hw(crc, data, len) : crc_table(crc, data, len);
    return ~crc;
}
