/* test_dalloc.c — device address assignment (upperhalf/cudart/dalloc.c): first fit inside the
 * window, page rounding, 2 MiB alignment from 2 MiB, freeing and reuse, a full window, and the
 * sorted range set under it (overlaps refused, removal by exact start, growth past 64). */
#include "ctest.h"

#include "dalloc.h"

#include <stdlib.h>

#define P 4096UL
#define MB2 (2UL << 20)
#define BASE 0x300000000000UL

static int sorted_disjoint(const struct crac_rangeset *rs)
{
    for (uint32_t i = 1; i < rs->n; i++)
        if (rs->v[i - 1].start + rs->v[i - 1].size > rs->v[i].start)
            return 0;
    return 1;
}

static void allocator(void)
{
    struct crac_dalloc d;
    dalloc_init(&d, BASE, BASE + 64 * MB2);
    CHECK(dalloc_alloc(&d, 1, 1) == BASE);         /* rounded up to a page */
    CHECK(dalloc_alloc(&d, P + 1, 1) == BASE + P); /* two pages */
    CHECK(dalloc_alloc(&d, MB2, 2) == BASE + MB2); /* 2 MiB-aligned */
    CHECK(dalloc_alloc(&d, P, 1) == BASE + 3 * P); /* first fit: back below the big one */
    CHECK(d.used.n == 4 && sorted_disjoint(&d.used));
    CHECK(d.used.v[3].start == BASE + MB2 && d.used.v[3].size == MB2 && d.used.v[3].kind == 2);
    CHECK(dalloc_alloc(&d, 0, 1) == 0);         /* nothing to give */
    CHECK(dalloc_alloc(&d, ~0UL - 10, 1) == 0); /* rounding would wrap */
    CHECK(dalloc_alloc(&d, 65 * MB2, 1) == 0);  /* larger than the window */

    /* Freeing: only at a range's exact start; the hole is reused first. */
    CHECK(dalloc_free(&d, BASE + P + 1) == -1);
    CHECK(dalloc_free(&d, BASE + P) == 0);
    CHECK(dalloc_free(&d, BASE + P) == -1);
    CHECK(dalloc_alloc(&d, 2 * P, 1) == BASE + P);
    CHECK(dalloc_alloc(&d, 3 * P, 1) == BASE + 4 * P); /* does not fit the 2-page hole's place */

    /* Fill the window with 2 MiB pieces until it is full, then free one and get it back. */
    uint64_t last = 0, got;
    int n = 0;
    while ((got = dalloc_alloc(&d, MB2, 1)) != 0) {
        last = got;
        n++;
    }
    CHECK(n == 62); /* 64 minus the first (small ones) and the second (the first big one) */
    CHECK(last == BASE + 63 * MB2);
    CHECK(sorted_disjoint(&d.used));
    CHECK(dalloc_free(&d, BASE + 10 * MB2) == 0);
    CHECK(dalloc_alloc(&d, MB2, 1) == BASE + 10 * MB2);
    CHECK(dalloc_alloc(&d, P, 1) == BASE + 7 * P); /* the small pages below the first 2 MiB */

    dalloc_reset(&d);
    CHECK(d.used.n == 0);
    CHECK(dalloc_alloc(&d, MB2, 1) == BASE);
    free(d.used.v);
}

static void rangeset(void)
{
    struct crac_rangeset rs = {0};
    CHECK(rangeset_insert(&rs, 100, 10, 1) == 0);
    CHECK(rangeset_insert(&rs, 120, 10, 2) == 0);
    CHECK(rangeset_insert(&rs, 110, 10, 3) == 0); /* touching both neighbours is fine */
    CHECK(rangeset_insert(&rs, 95, 6, 4) == -1);  /* overlaps the first */
    CHECK(rangeset_insert(&rs, 129, 1, 4) == -1); /* overlaps the last */
    CHECK(rangeset_insert(&rs, 105, 1, 4) == -1); /* inside one */
    CHECK(rs.n == 3 && rs.v[1].start == 110 && rs.v[1].kind == 3);
    struct crac_range_ent out;
    CHECK(rangeset_remove(&rs, 115, &out) == -1); /* not a start */
    CHECK(rangeset_remove(&rs, 110, &out) == 0 && out.size == 10 && out.kind == 3);
    CHECK(rs.n == 2 && rs.v[1].start == 120);
    CHECK(rangeset_remove(&rs, 120, NULL) == 0);
    /* Grows past its first 64 entries, inserted in reverse order, stays sorted. */
    for (uint64_t k = 200; k-- > 1;)
        CHECK(rangeset_insert(&rs, 1000 + 10 * k, 5, 0) == 0);
    CHECK(rs.n == 200 && rs.cap >= 200 && sorted_disjoint(&rs));
    CHECK(rs.v[0].start == 100 && rs.v[1].start == 1010 && rs.v[199].start == 2990);
    rangeset_clear(&rs);
    CHECK(rs.n == 0);
    free(rs.v);
}

int main(void)
{
    allocator();
    rangeset();
    return ctest_done();
}
