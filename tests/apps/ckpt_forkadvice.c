/* ckpt_forkadvice [STEPS=100]: per step 40 operations on 32 slots of anonymous memory (map, unmap,
   grow, move, shrink, map over, rewrite, read-only) including MADV_DONTFORK / MADV_DOFORK /
   MADV_WIPEONFORK / MADV_KEEPONFORK on random page ranges. Every page is checked in the process,
   then a forked child checks what fork made of each: absent (DONTFORK), zeros (WIPEONFORK) or
   the parent's bytes. A checkpoint must keep every page and every page's advice. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_forkadvice"
#define USAGE "[STEPS]"
#include "ckpt_common.h"
#define SLOTS 32
#define OPS 40
#define MAXPAGES 24

#define ADV_DONTFORK 1
#define ADV_WIPEONFORK 2

static size_t PG;

struct slot {
    uint64_t *p; /* NULL: empty */
    size_t pages;
    uint32_t id, ver;
    int readonly;
    unsigned char advice[MAXPAGES]; /* ADV_* per page */
};
static struct slot slot[SLOTS];
static uint64_t rng = 0x2545f4914f6cdd1dULL;
static uint32_t next_id = 1;

static uint64_t rnd(void) { return ckpt_xorshift(&rng); }

static uint64_t word(const struct slot *s, size_t pg, size_t w)
{
    return ckpt_page_word(s->id, s->ver, pg, w, 0x3c3c000000000000ULL);
}

static void fill(struct slot *s, size_t from_page)
{
    ckpt_fill_pages(s->p, from_page, s->pages, PG, s->id, s->ver, 0x3c3c000000000000ULL);
}

static const char *page_problem(const struct slot *s, size_t pg)
{
    size_t wpp = PG / 8;
    for (size_t w = 0; w < wpp; w++)
        if (s->p[pg * wpp + w] != word(s, pg, w))
            return "holds other bytes";
    return NULL;
}

/* Whether the page can be read, without touching it: stat() reads its bytes as a path. */
static int readable(const void *page)
{
    struct stat st;
    return !(stat(page, &st) != 0 && errno == EFAULT);
}

static int uniform(const struct slot *s)
{
    for (size_t pg = 1; pg < s->pages; pg++)
        if (s->advice[pg] != s->advice[0])
            return 0;
    return 1;
}

static void make_writable(struct slot *s)
{
    if (s->readonly) {
        if (mprotect(s->p, s->pages * PG, PROT_READ | PROT_WRITE) != 0)
            fail("mprotect(RW): %s", strerror(errno));
        s->readonly = 0;
    }
}

static void fresh(struct slot *s, void *at, size_t pages, long k)
{
    void *p = mmap(at, pages * PG, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
    if (p == MAP_FAILED || (at && p != at))
        fail("step %ld: mmap %zu pages: %s", k, pages, strerror(errno));
    s->p = p;
    s->pages = pages;
    s->id = next_id++;
    s->ver = 0;
    s->readonly = 0;
    memset(s->advice, 0, sizeof s->advice);
    fill(s, 0);
}

static void advise(struct slot *s, long k)
{
    size_t a = rnd() % s->pages, b = a + 1 + rnd() % (s->pages - a);
    static const int advice[4] = {MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK, MADV_KEEPONFORK};
    int which = (int)(rnd() % 4);
    if (madvise((char *)s->p + a * PG, (b - a) * PG, advice[which]) != 0)
        fail("step %ld: madvise(%d): %s", k, advice[which], strerror(errno));
    for (size_t pg = a; pg < b; pg++) {
        if (which == 0)
            s->advice[pg] |= ADV_DONTFORK;
        else if (which == 1)
            s->advice[pg] &= (unsigned char)~ADV_DONTFORK;
        else if (which == 2)
            s->advice[pg] |= ADV_WIPEONFORK;
        else
            s->advice[pg] &= (unsigned char)~ADV_WIPEONFORK;
    }
}

static void op(int i, long k)
{
    struct slot *s = &slot[i];
    if (!s->p) {
        fresh(s, NULL, 1 + rnd() % (MAXPAGES / 2), k);
        return;
    }
    switch (rnd() % 9) {
    case 0: /* unmap */
        if (munmap(s->p, s->pages * PG) != 0)
            fail("step %ld: munmap: %s", k, strerror(errno));
        s->p = NULL;
        break;
    case 1: { /* grow, maybe moving: one mapping only, whose advice the new pages get */
        size_t pages = s->pages + 1 + rnd() % 6;
        if (pages > MAXPAGES || !uniform(s) || s->readonly)
            break;
        void *p = mremap(s->p, s->pages * PG, pages * PG, MREMAP_MAYMOVE);
        if (p == MAP_FAILED)
            fail("step %ld: mremap grow: %s", k, strerror(errno));
        size_t old = s->pages;
        for (size_t pg = old; pg < pages; pg++)
            s->advice[pg] = s->advice[0];
        s->p = p;
        s->pages = pages;
        fill(s, old);
        break;
    }
    case 2: { /* move to a fixed address */
        if (!uniform(s))
            break;
        void *dst = mmap(NULL, s->pages * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (dst == MAP_FAILED)
            fail("step %ld: mmap placeholder: %s", k, strerror(errno));
        void *p = mremap(s->p, s->pages * PG, s->pages * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
        if (p != dst)
            fail("step %ld: mremap fixed: %s", k, p == MAP_FAILED ? strerror(errno) : "elsewhere");
        s->p = p;
        break;
    }
    case 3: /* drop the last page */
        if (s->pages < 2)
            break;
        if (munmap((char *)s->p + (s->pages - 1) * PG, PG) != 0)
            fail("step %ld: munmap tail: %s", k, strerror(errno));
        s->advice[--s->pages] = 0;
        break;
    case 4: /* a fresh mapping over the same pages: no advice there any more */
        fresh(s, s->p, s->pages, k);
        break;
    case 5: /* rewrite */
        make_writable(s);
        s->ver++;
        fill(s, 0);
        break;
    case 6: /* toggle read-only: advice stays */
        if (mprotect(s->p, s->pages * PG, s->readonly ? PROT_READ | PROT_WRITE : PROT_READ) != 0)
            fail("step %ld: mprotect: %s", k, strerror(errno));
        s->readonly = !s->readonly;
        break;
    default: /* fork advice on some of its pages */ advise(s, k); break;
    }
}

/* In a forked child: what fork made of every page. */
static int child_check(long k)
{
    for (int i = 0; i < SLOTS; i++) {
        const struct slot *s = &slot[i];
        for (size_t pg = 0; s->p && pg < s->pages; pg++) {
            const char *page = (const char *)s->p + pg * PG;
            const char *bad = NULL;
            if (s->advice[pg] & ADV_DONTFORK)
                bad = readable(page) ? "is in the child despite MADV_DONTFORK" : NULL;
            else if (!readable(page))
                bad = "is missing in the child";
            else if (s->advice[pg] & ADV_WIPEONFORK) {
                for (size_t b = 0; b < PG && !bad; b++)
                    if (page[b])
                        bad = "is not zero in the child despite MADV_WIPEONFORK";
            } else
                bad = page_problem(s, pg);
            if (bad) {
                fprintf(stderr, PROG ": FAIL: step %ld: slot %d page %zu (advice %d) %s\n", k, i,
                        pg, s->advice[pg], bad);
                return 1;
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    PG = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        for (int n = 0; n < OPS; n++)
            op((int)(rnd() % SLOTS), k);
        for (int i = 0; i < SLOTS; i++)
            for (size_t pg = 0; slot[i].p && pg < slot[i].pages; pg++) {
                const char *bad = page_problem(&slot[i], pg);
                if (bad)
                    fail("step %ld: slot %d page %zu (advice %d) %s", k, i, pg, slot[i].advice[pg],
                         bad);
            }
        fflush(NULL);
        pid_t child = fork();
        if (child < 0)
            fail("fork: %s", strerror(errno));
        if (child == 0)
            _exit(child_check(k));
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
            fail("step %ld: the forked child found the memory wrong (status %#x)", k, status);
        h = ckpt_fnv(h, (uint64_t)k ^ ((uint64_t)next_id << 32) ^ rng);
        step_line(k);
        ckpt_sleep_ms(20);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return 0;
}
