/* test_crc32c.c — CRC-32C (loader/image/crc32c.c): known vectors on the table, SSE4.2, three-stream
 * and folding paths, each path against the table at every length and alignment, pieces, combine. */
#include "ctest.h"

/* The source itself, so the static table and hardware paths can be called one by one. */
#include "crc32c.c"
#include "crc32c_combine.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The same finalisation crc32c_update applies around either path. */
static uint32_t via_table(uint32_t crc, const void *p, size_t n) { return ~crc_table(~crc, p, n); }
static uint32_t via_hw(uint32_t crc, const void *p, size_t n) { return ~crc_hw(~crc, p, n); }
static uint32_t via_hw3(uint32_t crc, const void *p, size_t n) { return ~crc_hw3(~crc, p, n); }
static uint32_t via_fold256(uint32_t crc, const void *p, size_t n)
{
    return ~crc_fold256(~crc, p, n);
}
static uint32_t via_fold512(uint32_t crc, const void *p, size_t n)
{
    return ~crc_fold512(~crc, p, n);
}

/* A fixed pseudo-random sequence (xorshift64), so a failure repeats. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

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
    int hw3 = hw && __builtin_cpu_supports("pclmul");
    int f256 = hw3 && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2");
    int f512 = hw3 && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512vl");
    printf("# sse4.2: %s, pclmul: %s, 256-bit folding: %s, 512-bit folding: %s\n",
           hw ? "yes" : "no (table path only)", hw3 ? "yes (three-stream path tested)" : "no",
           f256 ? "tested" : "not here", f512 ? "tested" : "not here");
    crc32c_update(0, "", 0); /* chooses the path and builds the constants */
    build_fold_constants();  /* both folding paths are tested where the CPU has them */
    if (hw3)
        CHECK(path == (f512 ? PATH_FOLD512 : f256 ? PATH_FOLD256 : PATH_HW3));
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        CHECK(crc32c_update(0, v[i].p, v[i].n) == v[i].crc);
        CHECK(via_table(0, v[i].p, v[i].n) == v[i].crc);
        if (hw)
            CHECK(via_hw(0, v[i].p, v[i].n) == v[i].crc);
        if (hw3)
            CHECK(via_hw3(0, v[i].p, v[i].n) == v[i].crc);
        if (f256)
            CHECK(via_fold256(0, v[i].p, v[i].n) == v[i].crc);
        if (f512)
            CHECK(via_fold512(0, v[i].p, v[i].n) == v[i].crc);
    }

    /* Every length 0..4096 at a random alignment and from a random CRC: the fast paths (and
     * crc32c_update, whichever it chose) give the table's result. Each failure is counted once. */
    size_t big_len = 5u << 20;
    unsigned char *big = malloc(big_len + 64);
    CHECK(big != NULL);
    for (size_t i = 0; i < big_len + 64; i += 8) {
        uint64_t r = next();
        memcpy(big + i, &r, 8);
    }
    int bad_update = 0, bad_hw = 0, bad_hw3 = 0, bad_fold256 = 0, bad_fold512 = 0;
    for (size_t n = 0; n <= 4096; n++) {
        const unsigned char *p = big + next() % 64;
        uint32_t from = (uint32_t)next(), want = via_table(from, p, n);
        bad_update += crc32c_update(from, p, n) != want;
        bad_hw += hw && via_hw(from, p, n) != want;
        bad_hw3 += hw3 && via_hw3(from, p, n) != want;
        bad_fold256 += f256 && via_fold256(from, p, n) != want;
        bad_fold512 += f512 && via_fold512(from, p, n) != want;
    }
    CHECK(bad_update == 0);
    CHECK(bad_hw == 0);
    CHECK(bad_hw3 == 0);
    CHECK(bad_fold256 == 0);
    CHECK(bad_fold512 == 0);

    /* A few MiB whole, and the same in random pieces (lanes cut anywhere). */
    uint32_t big_want = via_table(0, big + 3, big_len);
    CHECK(crc32c_update(0, big + 3, big_len) == big_want);
    if (hw3)
        CHECK(via_hw3(0, big + 3, big_len) == big_want);
    if (f256)
        CHECK(via_fold256(0, big + 3, big_len) == big_want);
    if (f512)
        CHECK(via_fold512(0, big + 3, big_len) == big_want);
    uint32_t pieces = 0;
    for (size_t off = 0; off < big_len;) {
        size_t n = next() % 70000;
        if (n > big_len - off)
            n = big_len - off;
        pieces = crc32c_update(pieces, big + 3 + off, n);
        off += n;
    }
    CHECK(pieces == big_want);

    /* crc32c_combine joins pieces summed apart, at any cut, an empty second piece too. */
    int bad_combine = 0;
    for (int i = 0; i < 200; i++) {
        size_t n = next() % (1u << 20), cut = i == 0 ? n : next() % (n + 1);
        uint32_t whole = crc32c_update(0, big, n);
        uint32_t a = crc32c_update(0, big, cut), b = crc32c_update(0, big + cut, n - cut);
        bad_combine += crc32c_combine(a, b, n - cut) != whole;
    }
    CHECK(bad_combine == 0);
    CHECK(crc32c_combine(crc32c_update(0, "12345", 5), crc32c_update(0, "6789", 4), 4) ==
          0xE3069283u);
    free(big);

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
