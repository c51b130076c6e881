/* vhandle.c — the stream, event and module handles the program sees are crac's virtual handles; the
 * backend's handles (which differ between sim versions or drivers) stay in these tables, which
 * live in upper memory so a restart can re-point them at a new backend's objects. */
#include "shim.h"

#include <pthread.h>
#include <stdlib.h>

/* Virtual handle: 0xc7a (non-canonical: dereferencing one faults) | kind (4 bits) |
 * generation (20 bits) | index + 1 (24 bits). Entries sit in chunks that are never freed, so a
 * lookup needs no lock. */
#define VH_TAG 0xc7aULL
#define CHUNK_SHIFT 12
#define CHUNK (1U << CHUNK_SHIFT)
#define MAX_CHUNKS 4096 /* 16 M handles of each kind */
#define GEN_MASK 0xfffffU
#define N_KINDS 6

struct vh_entry {
    uint64_t backend;
    volatile uint32_t gen;
    volatile uint32_t live;
    uint32_t next_free; /* index + 1 of the next free entry, 0 = none */
    uint32_t flags;     /* what it was created with, to create it again after a restart */
    int64_t saved;      /* kind-specific state saved at a checkpoint (event: timestamp) */
    uint64_t recipe;    /* kind-specific (module: the fat binary) */
};

struct vh_table {
    struct vh_entry *volatile chunks[MAX_CHUNKS];
    uint32_t n_used;    /* entries [0, n_used) have existed */
    uint32_t free_head; /* index + 1 */
    pthread_mutex_t lock;
};

static struct vh_table tables[N_KINDS] = {
    [SHIM_VH_STREAM] = {.lock = PTHREAD_MUTEX_INITIALIZER},
    [SHIM_VH_EVENT] = {.lock = PTHREAD_MUTEX_INITIALIZER},
    [SHIM_VH_MODULE] = {.lock = PTHREAD_MUTEX_INITIALIZER},
    [SHIM_VH_GRAPH] = {.lock = PTHREAD_MUTEX_INITIALIZER},
    [SHIM_VH_GEXEC] = {.lock = PTHREAD_MUTEX_INITIALIZER},
};

static uint64_t encode(int kind, uint32_t index, uint32_t gen)
{
    return (VH_TAG << 52) | ((uint64_t)kind << 48) | ((uint64_t)(gen & GEN_MASK) << 24) |
           (uint64_t)(index + 1);
}

static struct vh_entry *entry(struct vh_table *t, uint32_t index)
{
    struct vh_entry *c = __atomic_load_n(&t->chunks[index >> CHUNK_SHIFT], __ATOMIC_ACQUIRE);
    return c ? &c[index & (CHUNK - 1)] : NULL;
}

uint64_t shim_vh_backend(int kind, uint64_t v)
{
    if (kind == SHIM_VH_STREAM && v <= 2)
        return v; /* NULL, cudaStreamLegacy, cudaStreamPerThread */
    if ((v >> 52) != VH_TAG || ((v >> 48) & 0xf) != (uint64_t)kind)
        return SHIM_BAD_HANDLE;
    uint32_t idx1 = (uint32_t)(v & 0xffffff);
    if (idx1 == 0 || idx1 > (uint32_t)MAX_CHUNKS * CHUNK)
        return SHIM_BAD_HANDLE;
    struct vh_entry *e = entry(&tables[kind], idx1 - 1);
    if (!e || !__atomic_load_n(&e->live, __ATOMIC_ACQUIRE) ||
        (e->gen & GEN_MASK) != ((v >> 24) & GEN_MASK))
        return SHIM_BAD_HANDLE;
    return e->backend;
}

cudaError_t shim_vh_wrap(int kind, uint64_t backend, uint64_t *out)
{
    return shim_vh_wrap_flags(kind, backend, 0, 0, out);
}

cudaError_t shim_vh_wrap_flags(int kind, uint64_t backend, uint32_t flags, uint64_t recipe,
                               uint64_t *out)
{
    struct vh_table *t = &tables[kind];
    pthread_mutex_lock(&t->lock);
    uint32_t index;
    if (t->free_head) {
        index = t->free_head - 1;
        struct vh_entry *f = entry(t, index);
        t->free_head = f ? f->next_free : 0;
    } else {
        if (t->n_used == (uint32_t)MAX_CHUNKS * CHUNK) {
            pthread_mutex_unlock(&t->lock);
            return shim_fail(cudaErrorMemoryAllocation);
        }
        index = t->n_used;
        if (!t->chunks[index >> CHUNK_SHIFT]) {
            struct vh_entry *c = calloc(CHUNK, sizeof(*c));
            if (!c) {
                pthread_mutex_unlock(&t->lock);
                return shim_fail(cudaErrorMemoryAllocation);
            }
            __atomic_store_n(&t->chunks[index >> CHUNK_SHIFT], c, __ATOMIC_RELEASE);
        }
        t->n_used++;
    }
    struct vh_entry *e = entry(t, index);
    if (!e) {
        pthread_mutex_unlock(&t->lock);
        return shim_fail(cudaErrorMemoryAllocation);
    }
    e->backend = backend;
    e->flags = flags;
    e->recipe = recipe;
    e->saved = -1;
    e->gen = (e->gen + 1) & GEN_MASK;
    __atomic_store_n(&e->live, 1, __ATOMIC_RELEASE);
    *out = encode(kind, index, e->gen);
    pthread_mutex_unlock(&t->lock);
    return cudaSuccess;
}

static void release_locked(struct vh_table *t, uint32_t index)
{
    struct vh_entry *e = entry(t, index);
    if (!e)
        return;
    __atomic_store_n(&e->live, 0, __ATOMIC_RELEASE);
    e->next_free = t->free_head;
    t->free_head = index + 1;
}

void shim_vh_release(int kind, uint64_t v)
{
    if (shim_vh_backend(kind, v) == SHIM_BAD_HANDLE || (kind == SHIM_VH_STREAM && v <= 2))
        return;
    struct vh_table *t = &tables[kind];
    pthread_mutex_lock(&t->lock);
    uint32_t index = (uint32_t)(v & 0xffffff) - 1;
    struct vh_entry *e = entry(t, index);
    if (e && e->live)
        release_locked(t, index);
    pthread_mutex_unlock(&t->lock);
}

void shim_vh_reset(int kind)
{
    struct vh_table *t = &tables[kind];
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->n_used; i++) {
        struct vh_entry *e = entry(t, i);
        if (e && e->live)
            release_locked(t, i);
    }
    pthread_mutex_unlock(&t->lock);
}

/* Every live handle of a kind (checkpoint and restart hooks: every other thread is parked, so no
 * lock is taken; a parked thread may hold one). fn returns non-zero to stop. */
int shim_vh_foreach(int kind, int (*fn)(struct shim_vh_view *v, void *ctx), void *ctx)
{
    struct vh_table *t = &tables[kind];
    for (uint32_t i = 0; i < t->n_used; i++) {
        struct vh_entry *e = entry(t, i);
        if (!e || !e->live)
            continue;
        struct shim_vh_view v = {encode(kind, i, e->gen), e->backend, e->flags, e->saved,
                                 e->recipe};
        int rc = fn(&v, ctx);
        e->backend = v.backend;
        e->saved = v.saved;
        if (rc)
            return rc;
    }
    return 0;
}
