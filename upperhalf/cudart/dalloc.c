/* dalloc.c — first-fit assignment of device addresses inside a window, and the sorted range set it
 * keeps. The caller's device backend maps memory at the addresses handed out here. */
#include "dalloc.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096ULL
#define HUGE (2ULL << 20)

static uint32_t lower_bound(const struct crac_rangeset *rs, uint64_t p)
{
    uint32_t lo = 0, hi = rs->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (rs->v[mid].start + rs->v[mid].size <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int rangeset_insert(struct crac_rangeset *rs, uint64_t start, uint64_t size, int kind)
{
    uint32_t i = lower_bound(rs, start);
    if (i < rs->n && rs->v[i].start < start + size)
        return -1;
    if (rs->n == rs->cap) {
        uint32_t cap = rs->cap ? rs->cap * 2 : 64;
        struct crac_range_ent *v = realloc(rs->v, cap * sizeof(*v));
        if (!v)
            return -1;
        rs->v = v;
        rs->cap = cap;
    }
    memmove(&rs->v[i + 1], &rs->v[i], (rs->n - i) * sizeof(*rs->v));
    rs->v[i] = (struct crac_range_ent){start, size, kind};
    rs->n++;
    return 0;
}

int rangeset_remove(struct crac_rangeset *rs, uint64_t start, struct crac_range_ent *out)
{
    uint32_t i = lower_bound(rs, start);
    if (i >= rs->n || rs->v[i].start != start)
        return -1;
    if (out)
        *out = rs->v[i];
    memmove(&rs->v[i], &rs->v[i + 1], (rs->n - i - 1) * sizeof(*rs->v));
    rs->n--;
    return 0;
}

void rangeset_clear(struct crac_rangeset *rs) { rs->n = 0; }

void dalloc_init(struct crac_dalloc *d, uint64_t start, uint64_t end)
{
    memset(d, 0, sizeof(*d));
    d->start = start;
    d->end = end;
    pthread_mutex_init(&d->lock, NULL);
}

uint64_t dalloc_alloc(struct crac_dalloc *d, uint64_t size, int kind)
{
    uint64_t len = (size + PAGE - 1) & ~(PAGE - 1);
    uint64_t align = len >= HUGE ? HUGE : PAGE;
    if (len < size || len == 0)
        return 0;
    pthread_mutex_lock(&d->lock);
    uint64_t at = 0, cursor = d->start;
    for (uint32_t i = 0; i <= d->used.n; i++) {
        uint64_t gap_end = i < d->used.n ? d->used.v[i].start : d->end;
        uint64_t cand = (cursor + align - 1) & ~(align - 1);
        if (cand >= cursor && cand + len <= gap_end && cand + len > cand) {
            at = cand;
            break;
        }
        if (i < d->used.n)
            cursor = d->used.v[i].start + d->used.v[i].size;
    }
    if (at && rangeset_insert(&d->used, at, len, kind) != 0)
        at = 0;
    pthread_mutex_unlock(&d->lock);
    return at;
}

int dalloc_free(struct crac_dalloc *d, uint64_t addr)
{
    pthread_mutex_lock(&d->lock);
    int r = rangeset_remove(&d->used, addr, NULL);
    pthread_mutex_unlock(&d->lock);
    return r;
}

void dalloc_reset(struct crac_dalloc *d)
{
    pthread_mutex_lock(&d->lock);
    rangeset_clear(&d->used);
    pthread_mutex_unlock(&d->lock);
}
