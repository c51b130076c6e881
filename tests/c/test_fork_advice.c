/* test_fork_advice.c — the table of fork-advice ranges (loader/confine/fork_advice.c) on a control
 * block in ordinary memory: setting and clearing over ranges, splitting, joining neighbours with
 * the same bits, a full table, and a check against a page-by-page model under random changes. */
#include "ctest.h"

#include "fork_advice.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#define K 0x1000UL
#define D CRAC_ADVICE_DONTFORK
#define W CRAC_ADVICE_WIPEONFORK

/* The entries are exactly the n triples given (start, end, bits ...). */
static int advice_is(const struct crac_ctrl *c, uint32_t n, const uint64_t *want)
{
    if (c->n_advice != n)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (c->advice[i].start != want[3 * i] || c->advice[i].end != want[3 * i + 1] ||
            c->advice[i].bits != want[3 * i + 2])
            return 0;
    return 1;
}
#define ADVICE_IS(c, ...)                                                                          \
    advice_is(c, sizeof((uint64_t[]){__VA_ARGS__}) / 24, (const uint64_t[]){__VA_ARGS__})

static void ranges(void)
{
    struct crac_ctrl *c = calloc(1, sizeof(*c));
    advice_record(c, 10 * K, 20 * K, MADV_DONTFORK);
    CHECK(ADVICE_IS(c, 10 * K, 20 * K, D));
    /* Overlapping wipe-on-fork: three pieces. */
    advice_record(c, 15 * K, 25 * K, MADV_WIPEONFORK);
    CHECK(ADVICE_IS(c, 10 * K, 15 * K, D, 15 * K, 20 * K, D | W, 20 * K, 25 * K, W));
    /* DOFORK in the middle of it all. */
    advice_record(c, 12 * K, 22 * K, MADV_DOFORK);
    CHECK(ADVICE_IS(c, 10 * K, 12 * K, D, 15 * K, 25 * K, W));
    CHECK(advice_bits_at(c, 11 * K) == D && advice_bits_at(c, 13 * K) == 0 &&
          advice_bits_at(c, 24 * K) == W && advice_bits_at(c, 25 * K) == 0);
    /* Neighbours with the same bits join. */
    advice_record(c, 12 * K, 15 * K, MADV_DONTFORK);
    CHECK(ADVICE_IS(c, 10 * K, 15 * K, D, 15 * K, 25 * K, W));
    advice_record(c, 15 * K, 25 * K, MADV_KEEPONFORK);
    advice_record(c, 15 * K, 25 * K, MADV_DONTFORK);
    CHECK(ADVICE_IS(c, 10 * K, 25 * K, D));
    /* Other advice changes nothing; a mapping made over a range ends its advice. */
    advice_record(c, 0, 100 * K, MADV_DONTNEED);
    CHECK(ADVICE_IS(c, 10 * K, 25 * K, D));
    advice_change(c, 0, 100 * K, 0, CRAC_ADVICE_ALL);
    CHECK(c->n_advice == 0 && !c->advice_lost);
    free(c);
}

static void full_table(void)
{
    struct crac_ctrl *c = calloc(1, sizeof(*c));
    for (uint64_t i = 0; i < CRAC_MAX_FORK_ADVICE; i++)
        advice_record(c, 2 * i * K, (2 * i + 1) * K, MADV_DONTFORK);
    CHECK(c->n_advice == CRAC_MAX_FORK_ADVICE && !c->advice_lost);
    /* One more range does not fit: the loss is remembered, the ranges kept. */
    advice_record(c, 2 * CRAC_MAX_FORK_ADVICE * K, (2 * CRAC_MAX_FORK_ADVICE + 1) * K,
                  MADV_DONTFORK);
    CHECK(c->advice_lost && c->n_advice == CRAC_MAX_FORK_ADVICE);
    CHECK(advice_lift(c) == -ENOSPC);
    free(c);
}

/* Random changes against a model of 64 pages. */
static void model(void)
{
    struct crac_ctrl *c = calloc(1, sizeof(*c));
    unsigned char want[64] = {0};
    static const long advice[4] = {MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK, MADV_KEEPONFORK};
    uint64_t rng = 88172645463325252ULL;
    int bad = 0;
    for (int round = 0; round < 20000 && !bad; round++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t a = rng % 64, b = a + 1 + (rng >> 8) % (64 - a);
        int which = (int)((rng >> 20) % 5);
        if (which == 4) {
            advice_change(c, a * K, b * K, 0, CRAC_ADVICE_ALL);
            for (uint64_t p = a; p < b; p++)
                want[p] = 0;
        } else {
            advice_record(c, a * K, b * K, advice[which]);
            for (uint64_t p = a; p < b; p++)
                want[p] = which == 0   ? want[p] | D
                          : which == 1 ? want[p] & ~D
                          : which == 2 ? want[p] | W
                                       : want[p] & ~W;
        }
        for (uint64_t p = 0; p < 64; p++)
            bad |= advice_bits_at(c, p * K) != want[p];
        for (uint32_t i = 0; i < c->n_advice; i++) {
            bad |= c->advice[i].bits == 0 || c->advice[i].start >= c->advice[i].end;
            if (i)
                bad |= c->advice[i - 1].end > c->advice[i].start ||
                       (c->advice[i - 1].end == c->advice[i].start &&
                        c->advice[i - 1].bits == c->advice[i].bits);
        }
    }
    CHECK(!bad);
    free(c);
}

int main(void)
{
    ranges();
    full_table();
    model();
    return ctest_done();
}
