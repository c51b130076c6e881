/* crc32c.c — CRC-32C for image integrity checks: carry-less folding (VPCLMULQDQ, 512 or 256 bits),
 * three SSE4.2 crc32 streams joined by PCLMULQDQ, one stream, or a table: the best the CPU has. */
#include "crc32c.h"

#include <immintrin.h>
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

/* Folding, where the CPU has VPCLMULQDQ: 256 bytes a round in 128-bit lanes (four 512-bit or eight
 * 256-bit registers); each lane is carried 256 bytes forward and the next bytes xored in, so the
 * lanes stay congruent mod P to everything summed (the running CRC xored into the first 4 bytes);
 * folded into the last register, crc32 of its bytes from 0 is the CRC. A lane V (bytes in memory
 * order) is L * x^64 + H with L its first and H its second reflected 64-bit word; carrying it D
 * bits forward is L * x^(D+64) + H * x^D, and a carry-less product with a 32-bit constant in a
 * word's low half is x^33 * a * b, so the lane constants are x^(D+64-33) (low word) and x^(D-33)
 * (high word). A page in L1 sums 3x as fast as by three streams (docs/PERFORMANCE.md "CRC-32C by
 * folding"). */
#define FOLD_MIN 512           /* the last register's crc32 and the set-up are worth it from here */
static uint64_t k_carry[4][2]; /* [i]: carries a lane 32 << i bytes forward */

static void build_fold_constants(void)
{
    for (int i = 0; i < 4; i++) {
        uint64_t d = 256u << i;
        k_carry[i][0] = xpow(d + 64 - 33);
        k_carry[i][1] = xpow(d - 33);
    }
}

#define FOLD512_TARGET "sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq"
#define FOLD256_TARGET "sse4.2,pclmul,avx2,vpclmulqdq"

__attribute__((target(FOLD512_TARGET))) static inline __m512i fold512(__m512i acc, int carry,
                                                                      __m512i next)
{
    __m512i k = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)k_carry[carry]));
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),
                                     _mm512_clmulepi64_epi128(acc, k, 0x11), next, 0x96);
}

__attribute__((target(FOLD512_TARGET))) static uint32_t
crc_fold512(uint32_t crc, const unsigned char *p, size_t len)
{
    if (len < FOLD_MIN)
        return crc_hw3(crc, p, len);
    __m512i x0 = _mm512_loadu_si512(p), x1 = _mm512_loadu_si512(p + 64);
    __m512i x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
        x0 = fold512(x0, 3, _mm512_loadu_si512(p));
        x1 = fold512(x1, 3, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, 3, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, 3, _mm512_loadu_si512(p + 192));
    }
    x3 = fold512(fold512(x0, 1, x1), 2, fold512(x2, 1, x3));
    unsigned char last[64];
    _mm512_storeu_si512(last, x3);
    _mm256_zeroupper(); /* crc_hw3's pclmul is SSE-encoded: no dirty upper halves beside it */
    return crc_hw3(crc_hw(0, last, sizeof(last)), p, len);
}

__attribute__((target(FOLD256_TARGET))) static inline __m256i fold256(__m256i acc, int carry,
                                                                      __m256i next)
{
    __m256i k = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)k_carry[carry]));
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(acc, k, 0x00),
                                             _mm256_clmulepi64_epi128(acc, k, 0x11)),
                            next);
}

#define LOAD256(q) _mm256_loadu_si256((const __m256i *)(q))

__attribute__((target(FOLD256_TARGET))) static uint32_t
crc_fold256(uint32_t crc, const unsigned char *p, size_t len)
{
    if (len < FOLD_MIN)
        return crc_hw3(crc, p, len);
    __m256i x0 = LOAD256(p), x1 = LOAD256(p + 32), x2 = LOAD256(p + 64), x3 = LOAD256(p + 96);
    __m256i x4 = LOAD256(p + 128), x5 = LOAD256(p + 160), x6 = LOAD256(p + 192);
    __m256i x7 = LOAD256(p + 224);
    x0 = _mm256_xor_si256(x0, _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)crc)));
    for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
        x0 = fold256(x0, 3, LOAD256(p));
        x1 = fold256(x1, 3, LOAD256(p + 32));
        x2 = fold256(x2, 3, LOAD256(p + 64));
        x3 = fold256(x3, 3, LOAD256(p + 96));
        x4 = fold256(x4, 3, LOAD256(p + 128));
        x5 = fold256(x5, 3, LOAD256(p + 160));
        x6 = fold256(x6, 3, LOAD256(p + 192));
        x7 = fold256(x7, 3, LOAD256(p + 224));
    }
    x3 = fold256(fold256(x0, 0, x1), 1, fold256(x2, 0, x3));
    x7 = fold256(fold256(x4, 0, x5), 1, fold256(x6, 0, x7));
    x7 = fold256(x3, 2, x7);
    unsigned char last[32];
    _mm256_storeu_si256((__m256i *)last, x7);
    _mm256_zeroupper();
    return crc_hw3(crc_hw(0, last, sizeof(last)), p, len);
}

/* The best the CPU has. Decided once; the loader's threads may race here, and each would store
 * the same values. */
enum { PATH_TABLE, PATH_HW, PATH_HW3, PATH_FOLD256, PATH_FOLD512 };
static int path = -1;

static void choose_path(void)
{
    __builtin_cpu_init();
    int how = !__builtin_cpu_supports("sse4.2")       ? PATH_TABLE
              : !__builtin_cpu_supports("pclmul")     ? PATH_HW
              : !__builtin_cpu_supports("vpclmulqdq") ? PATH_HW3
              : __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
                  ? PATH_FOLD512
              : __builtin_cpu_supports("avx2") ? PATH_FOLD256
                                               : PATH_HW3;
    if (how >= PATH_HW3)
        build_lane_constants();
    if (how >= PATH_FOLD256)
        build_fold_constants();
    __atomic_store_n(&path, how, __ATOMIC_RELEASE);
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
    int how = __atomic_load_n(&path, __ATOMIC_ACQUIRE);
    if (how < 0) {
        choose_path();
        how = __atomic_load_n(&path, __ATOMIC_ACQUIRE);
    }
    crc = ~crc;
    switch (how) {
    case PATH_FOLD512: crc = crc_fold512(crc, data, len); break;
    case PATH_FOLD256: crc = crc_fold256(crc, data, len); break;
    case PATH_HW3: crc = crc_hw3(crc, data, len); break;
    case PATH_HW: crc = crc_hw(crc, data, len); break;
    default: crc = crc_table(crc, data, len);
    }
    return ~crc;
}
