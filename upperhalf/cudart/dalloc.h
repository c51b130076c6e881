/* dalloc.h — crac's assignment of device virtual addresses: a first-fit allocator over a window
 * (D under crac), plus a plain registry of ranges (pinned host memory). Used by the upper shim
 * and by the native sim libcudart; the state is ordinary memory of whoever owns it. */
#ifndef CRAC_DALLOC_H
#define CRAC_DALLOC_H

#include <pthread.h>
#include <stdint.h>

struct crac_range_ent {
    uint64_t start, size;
    int kind;
};

/* Sorted, disjoint ranges. */
struct crac_rangeset {
    struct crac_range_ent *v;
    uint32_t n, cap;
};

int rangeset_insert(struct crac_rangeset *rs, uint64_t start, uint64_t size, int kind);
/* Removes the range starting exactly at start; 0 and *out filled, or -1. */
int rangeset_remove(struct crac_rangeset *rs, uint64_t start, struct crac_range_ent *out);
void rangeset_clear(struct crac_rangeset *rs);

struct crac_dalloc {
    uint64_t start, end;
    struct crac_rangeset used;
    pthread_mutex_t lock;
};

void dalloc_init(struct crac_dalloc *d, uint64_t start, uint64_t end);
/* A free, page-aligned range of at least size bytes (2 MiB-aligned from 2 MiB), marked used
 * with kind; 0 when the window is full. */
uint64_t dalloc_alloc(struct crac_dalloc *d, uint64_t size, int kind);
/* Releases the range starting at addr; 0, or -1 if none starts there. */
int dalloc_free(struct crac_dalloc *d, uint64_t addr);
void dalloc_reset(struct crac_dalloc *d);

#endif
