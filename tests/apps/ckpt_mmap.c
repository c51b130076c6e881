/* ckpt_mmap DIR [STEPS=100] [FILE_PAGES=16]: per step 200 mmap/munmap/mremap/mprotect operations on
   64 slots, every region pattern-checked; a MAP_SHARED mapping of DIR/shared.bin (FILE_PAGES
   pages, the first 16 written, one per step) is checked before each write (it holds what the
   program last wrote there) and with read() at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_mmap"
#define USAGE "DIR [STEPS] [FILE_PAGES]"
#include "ckpt_common.h"
#define SLOTS 64
#define OPS 200
#define MAXPAGES 48
#define SHARED_PAGES 16

static size_t PG;

struct slot {
    uint64_t *p; /* NULL: empty */
    size_t pages;
    uint32_t id;  /* changes on every fresh mapping */
    uint32_t ver; /* changes on every rewrite */
    int readonly;
};
static struct slot slot[SLOTS];
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next_id = 1;

static uint64_t rnd(void) { return ckpt_xorshift(&rng); }

static uint64_t word(const struct slot *s, size_t pg, size_t w)
{
    return ckpt_page_word(s->id, s->ver, pg, w, 0x5a5a000000000000ULL);
}

static void fill(struct slot *s, size_t from_page)
{
    ckpt_fill_pages(s->p, from_page, s->pages, PG, s->id, s->ver, 0x5a5a000000000000ULL);
}

static void verify(const struct slot *s, int i, long k, const char *when)
{
    size_t wpp = PG / 8;
    for (size_t pg = 0; pg < s->pages; pg++)
        for (size_t w = 0; w < wpp; w++)
            if (s->p[pg * wpp + w] != word(s, pg, w))
                fail("step %ld (%s): slot %d (id %u, %zu pages at %p) page %zu word %zu is %#llx, "
                     "expected %#llx",
                     k, when, i, s->id, s->pages, (void *)s->p, pg, w,
                     (unsigned long long)s->p[pg * wpp + w], (unsigned long long)word(s, pg, w));
}

static void make_writable(struct slot *s)
{
    if (s->readonly) {
        if (mprotect(s->p, s->pages * PG, PROT_READ | PROT_WRITE) != 0)
            fail("mprotect(RW): %s", strerror(errno));
        s->readonly = 0;
    }
}

static void op(int i, long k)
{
    struct slot *s = &slot[i];
    unsigned kind = (unsigned)(rnd() % 7);
    if (!s->p) {
        size_t pages = 1 + rnd() % (MAXPAGES / 2);
        void *p =
            mmap(NULL, pages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            fail("step %ld: mmap %zu pages: %s", k, pages, strerror(errno));
        s->p = p;
        s->pages = pages;
        s->id = next_id++;
        s->ver = 0;
        fill(s, 0);
        return;
    }
    switch (kind) {
    case 0: /* unmap */
        if (munmap(s->p, s->pages * PG) != 0)
            fail("step %ld: munmap: %s", k, strerror(errno));
        s->p = NULL;
        break;
    case 1: { /* grow, maybe moving */
        size_t pages = s->pages + 1 + rnd() % 8;
        if (pages > MAXPAGES)
            break;
        make_writable(s);
        void *p = mremap(s->p, s->pages * PG, pages * PG, MREMAP_MAYMOVE);
        if (p == MAP_FAILED)
            fail("step %ld: mremap grow: %s", k, strerror(errno));
        size_t old = s->pages;
        s->p = p;
        s->pages = pages;
        fill(s, old); /* the old pages must have moved with their contents */
        break;
    }
    case 2: { /* shrink in place */
        if (s->pages < 2)
            break;
        size_t pages = 1 + rnd() % (s->pages - 1);
        void *p = mremap(s->p, s->pages * PG, pages * PG, 0);
        if (p != (void *)s->p)
            fail("step %ld: mremap shrink: %s", k, p == MAP_FAILED ? strerror(errno) : "moved");
        s->pages = pages;
        break;
    }
    case 3: { /* move to a fixed address taken from a fresh placeholder mapping */
        void *dst = mmap(NULL, s->pages * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (dst == MAP_FAILED)
            fail("step %ld: mmap placeholder: %s", k, strerror(errno));
        void *p = mremap(s->p, s->pages * PG, s->pages * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
        if (p != dst)
            fail("step %ld: mremap fixed: %s", k, p == MAP_FAILED ? strerror(errno) : "elsewhere");
        s->p = p;
        break;
    }
    case 4: /* drop the last page with munmap */
        if (s->pages < 2)
            break;
        if (munmap((char *)s->p + (s->pages - 1) * PG, PG) != 0)
            fail("step %ld: munmap tail: %s", k, strerror(errno));
        s->pages--;
        break;
    case 5: /* rewrite with a new version */
        make_writable(s);
        s->ver++;
        fill(s, 0);
        break;
    case 6: /* toggle read-only */
        if (mprotect(s->p, s->pages * PG, s->readonly ? PROT_READ | PROT_WRITE : PROT_READ) != 0)
            fail("step %ld: mprotect: %s", k, strerror(errno));
        s->readonly = !s->readonly;
        break;
    }
}

static uint64_t shared_word(long step, size_t w)
{
    return ((uint64_t)step << 32) ^ w ^ 0xc3c3c3c300000000ULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " DIR [STEPS] [FILE_PAGES]\n");
        return 2;
    }
    long steps = arg(argc, argv, 2, 100, SHARED_PAGES, 1000000);
    size_t file_pages = (size_t)arg(argc, argv, 3, SHARED_PAGES, SHARED_PAGES, 1L << 20);
    PG = (size_t)sysconf(_SC_PAGESIZE);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/shared.bin", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        fail("open %s: %s", path, strerror(errno));
    if (ftruncate(fd, (off_t)(file_pages * PG)) != 0)
        fail("ftruncate: %s", strerror(errno));
    uint64_t *shared = mmap(NULL, file_pages * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shared == MAP_FAILED)
        fail("mmap shared: %s", strerror(errno));
    close(fd); /* only the mapping keeps the file */
    size_t wpp = PG / 8;

    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        for (int n = 0; n < OPS; n++)
            op((int)(rnd() % SLOTS), k);
        for (int i = 0; i < SLOTS; i++)
            if (slot[i].p)
                verify(&slot[i], i, k, "after the operations");
        size_t pg = (size_t)(k % SHARED_PAGES);
        /* The file agrees with the program: the page holds what step k - 16 wrote (zeros at
         * first), not what a run killed after the checkpoint wrote there since. */
        for (size_t w = 0; w < wpp; w++)
            if (shared[pg * wpp + w] != (k > SHARED_PAGES ? shared_word(k - SHARED_PAGES, w) : 0))
                fail("step %ld: the shared file's page %zu is not what step %ld left there", k, pg,
                     k - SHARED_PAGES);
        for (size_t w = 0; w < wpp; w++)
            shared[pg * wpp + w] = shared_word(k, w);
        for (size_t w = 0; w < wpp; w++)
            if (shared[pg * wpp + w] != shared_word(k, w))
                fail("step %ld: the shared mapping does not read back", k);
        h ^= (uint64_t)next_id * 0x100000001b3ULL + rng;
        h *= 0x100000001b3ULL;
        step_line(k);
        struct timespec req = {0, 15 * 1000000L};
        nanosleep(&req, NULL);
        for (int i = 0; i < SLOTS; i++) /* again: a checkpoint may have fallen in the sleep */
            if (slot[i].p)
                verify(&slot[i], i, k, "after the sleep");
    }

    /* The shared mapping reached the file: page p holds the last step s <= STEPS with s % 16 == p. */
    if (msync(shared, file_pages * PG, MS_SYNC) != 0)
        fail("msync: %s", strerror(errno));
    if (munmap(shared, file_pages * PG) != 0)
        fail("munmap shared: %s", strerror(errno));
    fd = open(path, O_RDONLY);
    if (fd < 0)
        fail("reopen %s: %s", path, strerror(errno));
    uint64_t *page = malloc(PG);
    for (size_t pg = 0; pg < SHARED_PAGES; pg++) {
        long s = steps - (long)((size_t)(steps - (long)pg) % SHARED_PAGES);
        if (pread(fd, page, PG, (off_t)(pg * PG)) != (ssize_t)PG)
            fail("read %s: %s", path, strerror(errno));
        for (size_t w = 0; w < wpp; w++)
            if (page[w] != shared_word(s, w))
                fail("%s page %zu word %zu is %#llx, expected %#llx (written at step %ld)", path,
                     pg, w, (unsigned long long)page[w], (unsigned long long)shared_word(s, w), s);
    }
    close(fd);
    free(page);
    int live = 0;
    for (int i = 0; i < SLOTS; i++)
        live += slot[i].p != NULL;
    printf("DONE checksum=%016llx regions=%u live=%d\n", (unsigned long long)h, next_id - 1, live);
    return fflush(stdout) == 0 ? 0 : 1;
}
