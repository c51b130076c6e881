/* crc32c.c — CRC-32C for image integrity checks: three interleaved SSE4.2 crc32 streams joined by
 * PCLMULQDQ where the CPU has both (memory speed), one crc32 stream, or a table otherwise. */
#include "crc32c.h"

#include <string.h>

#define POLY 0x82f63b78u

/* Bit-reflected polynomials: bit 31 is x^0, bit 0 is x^31 (the CRC's own order). */
#define X0 0x80000000u

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

/* a * b mod P, one bit of a at a time (x^0 first), b multiplied by x as it goes. Only for
 * the lane constants: a few hundred cycles. */
static uint32_t mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = X0; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^n mod P by square-and-multiply. */
static uint32_t xpow(uint64_t n)
{
    uint32_t r = X0, sq = X0 >> 1; /* x^0, x^1 */
    for (; n; n >>= 1) {
        if (n & 1)
            r = mulmod(r, sq);
        sq = mulmod(sq, sq);
    }
    return r;
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

/* Three streams: one crc32 takes 3 cycles but the CPU starts one per cycle, so a single stream
 * uses a third of it. A block of 3 lanes of n bytes each is summed as lane 0 (from the running
 * CRC), lane 1 and lane 2 (from 0), then joined: crc0 * x^(16n) + crc1 * x^(8n) + crc2 mod P.
 * The carry-less product of two reflected 32-bit values is x * a * b as a reflected 64-bit
 * value, and crc32 of a 64-bit word from 0 multiplies it by x^32 mod P, so a multiplier of
 * x^(8k - 33) gives a * x^(8k). One crc32 reduces both products (it is linear from 0). */
#define LANE_MAX 4096 /* bytes per lane: 12 KiB blocks keep the three streams in L1 */
#define LANE_MIN 64   /* under 3 x 64 bytes the join costs more than it saves */
static uint32_t k_lane[LANE_MAX / 8 + 1], k_two[LANE_MAX / 8 + 1]; /* by n / 8 */

static void build_lane_constants(void)
{
    /* Each from the one before: a lane one word longer shifts once more by x^64 (x^128). */
    uint32_t x64 = xpow(64), x128 = xpow(128);
    k_lane[LANE_MIN / 8] = xpow(LANE_MIN * 8 - 33);
    k_two[LANE_MIN / 8] = xpow(LANE_MIN * 16 - 33);
    for (uint32_t w = LANE_MIN / 8 + 1; w <= LANE_MAX / 8; w++) {
        k_lane[w] = mulmod(k_lane[w - 1], x64);
        k_two[w] = mulmod(k_two[w - 1], x128);
    }
}

typedef long long v2di __attribute__((vector_size(16)));

__attribute__((target("sse4.2,pclmul"))) static inline uint64_t clmul(uint32_t a, uint32_t b)
{
    v2di r = __builtin_ia32_pclmulqdq128((v2di){(long long)a, 0}, (v2di){(long long)b, 0}, 0);
    return (uint64_t)r[0];
}

__attribute__((target("sse4.2,pclmul"))) static uint32_t crc_hw3(uint32_t crc,
                                                                 const unsigned char *p, size_t len)
{
    while (len >= 3 * LANE_MIN) {
        size_t n = len / 24 * 8; /* a whole number of words per lane */
        if (n > LANE_MAX)
            n = LANE_MAX;
        const unsigned char *q = p + n, *r = p + 2 * n;
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t v0, v1, v2;
            memcpy(&v0, p + i, 8);
            memcpy(&v1, q + i, 8);
            memcpy(&v2, r + i, 8);
            c0 = __builtin_ia32_crc32di(c0, v0);
            c1 = __builtin_ia32_crc32di(c1, v1);
            c2 = __builtin_ia32_crc32di(c2, v2);
        }
        uint64_t prod = clmul((uint32_t)c0, k_two[n / 8]) ^ clmul((uint32_t)c1, k_lane[n / 8]);
        crc = (uint32_t)__builtin_ia32_crc32di(0, prod) ^ (uint32_t)c2;
        p += 3 * n;
        len -= 3 * n;
    }
    return crc_hw(crc, p, len);
}

/* 0: table, 1: one crc32 stream, 2: three streams. Decided once; the loader's threads may race
 * here, and each would store the same values. */
static int path = -1;

static void choose_path(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("sse4.2")) {
        __atomic_store_n(&path, 0, __ATOMIC_RELEASE);
        return;
    }
    if (!__builtin_cpu_supports("pclmul")) {
        __atomic_store_n(&path, 1, __ATOMIC_RELEASE);
        return;
    }
    build_lane_constants();
    __atomic_store_n(&path, 2, __ATOMIC_RELEASE);
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
    int how = __atomic_load_n(&path, __ATOMIC_ACQUIRE);
    if (how < 0) {
        choose_path();
        how = __atomic_load_n(&path, __ATOMIC_ACQUIRE);
    }
    crc = ~crc;
    crc = how == 2   ? crc_hw3(crc, data, len)
          : how == 1 ? crc_hw(crc, data, len)
                     : crc_table(crc, data, len);
    return ~crc;
}
