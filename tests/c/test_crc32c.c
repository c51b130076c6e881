/* test_crc32c.c — CRC-32C (loader/image/crc32c.c): known vectors on both the SSE4.2 and the table
 * path, and that a CRC continued over pieces equals the CRC of the whole. */
#include "ctest.h"

/* The source itself, so the static table and hardware paths can be called one by one. */
#include "crc32c.c"

#include <stdint.h>
#include <string.h>

/* The same finalisation crc32c_update applies around either path. */
static uint32_t via_table(uint32_t crc, const void *p, size_t n) { return ~crc_table(~crc, p, n); }
static uint32_t via_hw(uint32_t crc, const void *p, size_t n) { return ~crc_hw(~crc, p, n); }

int main(void)
{
    /* RFC 3720 (iSCSI) B.4 vectors and the common check value. */
    static unsigned char zeros[32], ones[32], incr[32], decr[32];
    for (int i = 0; i < 32; i++) {
        ones[i] = 0xff;
        incr[i] = (unsigned char)i;
        decr[i] = (unsigned char)(31 - i);
    }
    struct {
        const void *p;
        size_t n;
        uint32_t crc;
    } v[] = {
        {"123456789", 9, 0xE3069283u}, {"", 0, 0},
        {"a", 1, 0xC1D04330u},         {zeros, 32, 0x8A9136AAu},
        {ones, 32, 0x62A8AB43u},       {incr, 32, 0x46DD794Eu},
        {decr, 32, 0x113FDB5Cu},
    };
    __builtin_cpu_init();
    int hw = __builtin_cpu_supports("sse4.2");
    printf("# sse4.2: %s\n", hw ? "yes (both paths tested)" : "no (table path only)");
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        CHECK(crc32c_update(0, v[i].p, v[i].n) == v[i].crc);
        CHECK(via_table(0, v[i].p, v[i].n) == v[i].crc);
        if (hw)
            CHECK(via_hw(0, v[i].p, v[i].n) == v[i].crc);
    }

    /* Continuing a CRC over pieces of every length (hardware: 8-byte words then a tail). */
    unsigned char buf[1000];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 7 + 3);
    uint32_t whole = via_table(0, buf, sizeof(buf));
    for (size_t cut = 0; cut <= 17; cut++) {
        CHECK(via_table(via_table(0, buf, cut), buf + cut, sizeof(buf) - cut) == whole);
        CHECK(crc32c_update(crc32c_update(0, buf, cut), buf + cut, sizeof(buf) - cut) == whole);
        if (hw)
            CHECK(via_hw(via_hw(0, buf + 1, cut), buf + 1 + cut, 500 - cut) ==
                  via_table(0, buf + 1, 500));
    }
    /* A flipped bit changes it. */
    buf[500] ^= 1;
    CHECK(crc32c_update(0, buf, sizeof(buf)) != whole);
    return ctest_done();
}
