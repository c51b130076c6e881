/* sim_bk.c — where the sim keeps its own bookkeeping (queues, objects, argument copies). sim1 uses
 * the lower half's heap; sim2 a private mmap'ed arena, as driver releases differ in this. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if CRAC_SIM_VERSION == 1

void *bk_alloc(size_t n) { return calloc(1, n ? n : 1); }

void bk_free(void *p, size_t n)
{
    (void)n;
    free(p);
}

#else

/* Size classes of 2^5 .. 2^16 bytes carved from 1 MiB chunks of a private mapping; larger blocks
 * get a mapping of their own. Freed blocks go to their class's free list. */
#define MIN_SHIFT 5
#define MAX_SHIFT 16
#define CHUNK (1UL << 20)

struct free_block {
    struct free_block *next;
};

static struct free_block *free_lists[MAX_SHIFT + 1];
static unsigned char *chunk_cur, *chunk_end;
static pthread_mutex_t bk_lock = PTHREAD_MUTEX_INITIALIZER;

static int class_of(size_t n)
{
    int c = MIN_SHIFT;
    while (((size_t)1 << c) < n)
        c++;
    return c;
}

static void *map_anon(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *bk_alloc(size_t n)
{
    if (n > ((size_t)1 << MAX_SHIFT))
        return map_anon(n); /* fresh anonymous pages are zero */
    int c = class_of(n ? n : 1);
    size_t sz = (size_t)1 << c;
    pthread_mutex_lock(&bk_lock);
    void *p = free_lists[c];
    if (p) {
        free_lists[c] = free_lists[c]->next;
    } else {
        if (!chunk_cur || chunk_cur + sz > chunk_end) {
            chunk_cur = map_anon(CHUNK);
            chunk_end = chunk_cur ? chunk_cur + CHUNK : NULL;
        }
        if (chunk_cur) {
            p = chunk_cur;
            chunk_cur += sz;
        }
    }
    pthread_mutex_unlock(&bk_lock);
    if (p)
        memset(p, 0, sz);
    return p;
}

void bk_free(void *p, size_t n)
{
    if (!p)
        return;
    if (n > ((size_t)1 << MAX_SHIFT)) {
        munmap(p, n);
        return;
    }
    int c = class_of(n ? n : 1);
    pthread_mutex_lock(&bk_lock);
    ((struct free_block *)p)->next = free_lists[c];
    free_lists[c] = p;
    pthread_mutex_unlock(&bk_lock);
}

#endif
