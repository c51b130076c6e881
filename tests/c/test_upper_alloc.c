/* test_upper_alloc.c — the W allocator's bookkeeping (loader/confine/upper_alloc.c) on a control
 * block in ordinary memory: first-fit placement, alignment, freeing, coalescing, a full range
 * array, the extras outside W, the virtual signal masks and the pid/tid translation. */
#include "ctest.h"

#include "crac_layout.h"
#include "upper_alloc.h"

#include <stdlib.h>

#define S CRAC_ALLOC_START
#define K 0x1000UL

static struct crac_ctrl *new_ctrl(uint32_t cap)
{
    struct crac_ctrl *c = calloc(1, sizeof(*c) + cap * sizeof(struct crac_range));
    c->cap_used = cap;
    return c;
}

/* The used ranges are exactly the n pairs given (start, end, start, end ...). */
static int used_is(const struct crac_ctrl *c, uint32_t n, const uint64_t *want)
{
    if (c->n_used != n)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (c->used[i].start != want[2 * i] || c->used[i].end != want[2 * i + 1])
            return 0;
    return 1;
}
#define USED_IS(c, ...)                                                                            \
    used_is(c, sizeof((uint64_t[]){__VA_ARGS__}) / 16, (const uint64_t[]){__VA_ARGS__})

static void placement(void)
{
    struct crac_ctrl *c = new_ctrl(64);
    CHECK(ualloc_find_gap(c, K, K) == S);
    CHECK(ualloc_is_free(c, S, S + 100 * K));

    CHECK(ualloc_mark_used(c, S, S + K) == 0);
    CHECK(ualloc_mark_used(c, S + 3 * K, S + 4 * K) == 0);
    CHECK(USED_IS(c, S, S + K, S + 3 * K, S + 4 * K));
    CHECK(!ualloc_is_free(c, S, S + K));
    CHECK(!ualloc_is_free(c, S + 2 * K, S + 3 * K + 1));
    CHECK(ualloc_is_free(c, S + K, S + 3 * K));
    /* First fit: the 2-page hole between them, else after the last range. */
    CHECK(ualloc_find_gap(c, 2 * K, K) == S + K);
    CHECK(ualloc_find_gap(c, 3 * K, K) == S + 4 * K);
    /* Alignment: the first aligned address that fits. */
    CHECK(ualloc_find_gap(c, K, 0x10000) == S + 0x10000);
    CHECK(ualloc_find_gap(c, K, 2 * K) == S + 2 * K);
    /* Ranges below the allocation start (the brk area) do not count. */
    CHECK(ualloc_mark_used(c, CRAC_BRK_START, CRAC_BRK_START + K) == 0);
    CHECK(ualloc_find_gap(c, 2 * K, K) == S + K);
    /* Too big for W, and a length that wraps around: no place. */
    CHECK(ualloc_find_gap(c, CRAC_W_END - S, K) == 0);
    CHECK(ualloc_find_gap(c, ~0UL - K, K) == 0);
    /* W full from the start of allocations: nothing left. */
    ualloc_mark_used(c, S, CRAC_W_END);
    CHECK(ualloc_find_gap(c, K, K) == 0);
    free(c);
}

static void coalescing_and_freeing(void)
{
    struct crac_ctrl *c = new_ctrl(64);
    ualloc_mark_used(c, S, S + K);
    ualloc_mark_used(c, S + 2 * K, S + 3 * K);
    ualloc_mark_used(c, S + 4 * K, S + 5 * K);
    /* Touching ranges coalesce ... */
    ualloc_mark_used(c, S + K, S + 2 * K);
    CHECK(USED_IS(c, S, S + 3 * K, S + 4 * K, S + 5 * K));
    /* ... and one overlapping several merges them all. */
    ualloc_mark_used(c, S + 2 * K, S + 9 * K);
    CHECK(USED_IS(c, S, S + 9 * K));
    /* Freeing the middle splits. */
    ualloc_mark_free(c, S + 3 * K, S + 5 * K);
    CHECK(USED_IS(c, S, S + 3 * K, S + 5 * K, S + 9 * K));
    CHECK(ualloc_is_free(c, S + 3 * K, S + 5 * K));
    CHECK(ualloc_find_gap(c, 2 * K, K) == S + 3 * K);
    /* Freeing across a hole trims both neighbours. */
    ualloc_mark_free(c, S + 2 * K, S + 6 * K);
    CHECK(USED_IS(c, S, S + 2 * K, S + 6 * K, S + 9 * K));
    /* Freeing the ends and what is already free. */
    ualloc_mark_free(c, S, S + K);
    ualloc_mark_free(c, S + 8 * K, S + 20 * K);
    ualloc_mark_free(c, S + 30 * K, S + 40 * K);
    CHECK(USED_IS(c, S + K, S + 2 * K, S + 6 * K, S + 8 * K));
    /* Freeing everything, then the hole is the whole allocation area again. */
    ualloc_mark_free(c, S, CRAC_W_END);
    CHECK(c->n_used == 0);
    CHECK(ualloc_find_gap(c, 4 * K, K) == S);
    free(c);
}

static void full_range_array(void)
{
    struct crac_ctrl *c = new_ctrl(3);
    CHECK(ualloc_mark_used(c, S, S + K) == 0);
    CHECK(ualloc_mark_used(c, S + 2 * K, S + 3 * K) == 0);
    CHECK(ualloc_mark_used(c, S + 4 * K, S + 5 * K) == 0);
    /* A fourth disjoint range does not fit; one that merges does. */
    CHECK(ualloc_mark_used(c, S + 8 * K, S + 9 * K) == -1);
    CHECK(ualloc_mark_used(c, S + 5 * K, S + 6 * K) == 0);
    CHECK(USED_IS(c, S, S + K, S + 2 * K, S + 3 * K, S + 4 * K, S + 6 * K));
    /* A free that would split a range when full keeps it used (never an overlap later). */
    ualloc_mark_free(c, S + 4 * K + K / 2, S + 5 * K);
    CHECK(USED_IS(c, S, S + K, S + 2 * K, S + 3 * K, S + 4 * K, S + 6 * K));
    CHECK(!ualloc_is_free(c, S + 4 * K + K / 2, S + 5 * K));
    /* One that removes a whole range still works. */
    ualloc_mark_free(c, S + 2 * K, S + 3 * K);
    CHECK(USED_IS(c, S, S + K, S + 4 * K, S + 6 * K));
    free(c);
}

static void extras(void)
{
    struct crac_ctrl *c = new_ctrl(4);
    CHECK(extras_add(c, 0x1000, 0x5000) == 0);
    CHECK(extras_add(c, 0x5000, 0x8000) == 0);
    CHECK(c->n_extras == 1); /* ranges that touch are one */
    CHECK(extras_contains(c, 0x2000, 0x7000));
    CHECK(!extras_contains(c, 0x7000, 0x9000));
    extras_remove(c, 0x3000, 0x4000); /* a hole in the middle */
    CHECK(!extras_contains(c, 0x2000, 0x7000));
    CHECK(extras_contains(c, 0x1000, 0x3000));
    CHECK(extras_contains(c, 0x4000, 0x8000));
    CHECK(c->n_extras == 2);
    CHECK(extras_add(c, 0x3000, 0x4000) == 0); /* the hole filled: one range again */
    CHECK(c->n_extras == 1 && extras_contains(c, 0x1000, 0x8000));
    extras_remove(c, 0, 0x10000);
    CHECK(c->n_extras == 0);
    for (uint64_t k = 0; k < CRAC_MAX_EXTRAS; k++)
        CHECK(extras_add(c, 0x10000 * (k + 1), 0x10000 * (k + 1) + 0x1000) == 0);
    CHECK(c->n_extras == CRAC_MAX_EXTRAS);
    /* Full: a range apart is refused, not written past the end; one that touches is merged. */
    CHECK(extras_add(c, 0x10000 * (CRAC_MAX_EXTRAS + 2), 0x10000 * (CRAC_MAX_EXTRAS + 3)) == -1);
    CHECK(extras_add(c, 0x11000, 0x12000) == 0);
    CHECK(c->n_extras == CRAC_MAX_EXTRAS && extras_contains(c, 0x10000, 0x12000));
    /* Full: a cut out of the middle keeps the range whole rather than lose its right piece. */
    extras_remove(c, 0x10800, 0x11000);
    CHECK(c->n_extras == CRAC_MAX_EXTRAS && extras_contains(c, 0x11000, 0x12000));
    extras_remove(c, 0x11000, 0x12000); /* its end: no second slot needed */
    CHECK(extras_contains(c, 0x10000, 0x11000) && !extras_contains(c, 0x11000, 0x12000));
    free(c);
}

static void masks_and_ids(void)
{
    struct crac_ctrl *c = new_ctrl(4);
    CHECK(vmask_get(c, 100) == 0);
    vmask_set(c, 100, 0x3);
    vmask_set(c, 100 + CRAC_MAX_VMASK, 0x5); /* same hash slot: the next one */
    CHECK(vmask_get(c, 100) == 0x3);
    CHECK(vmask_get(c, 100 + CRAC_MAX_VMASK) == 0x5);
    vmask_set(c, 100, 0);
    CHECK(vmask_get(c, 100) == 0);
    vmask_set(c, 7, 0x9); /* takes over a cleared slot or an empty one, found again either way */
    CHECK(vmask_get(c, 7) == 0x9);
    CHECK(vmask_get(c, 100 + CRAC_MAX_VMASK) == 0x5);

    c->pid = 5000;
    CHECK(vid_to_real(c, 1234) == 1234 && vid_from_real(c, 1234) == 1234); /* no mapping yet */
    c->vpid = 42;
    c->vids[c->n_vids++] = (struct crac_vid){43, 5001};
    CHECK(vid_to_real(c, 42) == 5000);
    CHECK(vid_from_real(c, 5000) == 42);
    CHECK(vid_to_real(c, 43) == 5001);
    CHECK(vid_from_real(c, 5001) == 43);
    CHECK(vid_to_real(c, 77) == 77);
    free(c);
}

int main(void)
{
    placement();
    coalescing_and_freeing();
    full_range_array();
    extras();
    masks_and_ids();
    return ctest_done();
}
