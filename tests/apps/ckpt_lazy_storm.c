/* ckpt_lazy_storm [STEPS=300] [MIB=128] [THREADS=8] [DROP=1]: MIB MiB of pattern pages; at each
   step THREADS threads check and rewrite random pages of their own (a fault storm while a lazy
   restart's prefetchers still fill memory) and, with DROP, drop some with MADV_DONTNEED: each
   must read as zeros at once (its REMOVE event races the prefetchers' copies), then is written
   again. The DONE checksum covers every page's version. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PROG "ckpt_lazy_storm"
#define USAGE "[STEPS] [MIB] [THREADS] [DROP]"
#include "ckpt_common.h"

#define PG 4096UL
#define WORDS 8      /* words set per page, PG / WORDS bytes apart */
#define TOUCHES 256  /* pages each thread touches per step */
#define DROP_EVERY 8 /* with DROP: one touch in this many drops the page first */
static uint64_t *mem;
static uint32_t *ver;
static size_t npages;
static long nthreads, drop, steps, cur_step;
static pthread_barrier_t go, done; /* each step: the threads start, then all are done */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t word(size_t p, size_t w)
{
    return mix(((uint64_t)p << 24) ^ ((uint64_t)ver[p] << 4) ^ w) | 1; /* never zero */
}

static void write_page(size_t p)
{
    for (size_t w = 0; w < WORDS; w++)
        mem[p * (PG / 8) + w * (PG / 8 / WORDS)] = word(p, w);
}

static void check_page(size_t p, long s, const char *when)
{
    for (size_t w = 0; w < WORDS; w++)
        if (mem[p * (PG / 8) + w * (PG / 8 / WORDS)] != word(p, w))
            fail("step %ld: page %zu word %zu is not as written (%s)", s, p, w, when);
}

/* Thread t owns the pages p with p % nthreads == t: no two threads touch one page, so the
   result does not depend on how they interleave. */
static void storm_step(long t, long s)
{
    size_t own = npages / (size_t)nthreads;
    for (long k = 0; k < TOUCHES; k++) {
        size_t p = (size_t)(mix(((uint64_t)s << 32) ^ ((uint64_t)t << 16) ^ (uint64_t)k) % own) *
                       (size_t)nthreads +
                   (size_t)t;
        check_page(p, s, "before");
        if (drop && k % DROP_EVERY == 0) {
            if (madvise(mem + p * (PG / 8), PG, MADV_DONTNEED) != 0)
                fail("madvise: %s", strerror(errno));
            for (size_t w = 0; w < WORDS; w++)
                if (mem[p * (PG / 8) + w * (PG / 8 / WORDS)] != 0)
                    fail("step %ld: page %zu is not zero after MADV_DONTNEED", s, p);
        }
        ver[p]++;
        write_page(p);
    }
}

/* The threads live through the run (a checkpoint finds them in the barrier or at work). */
static void *storm(void *arg)
{
    for (;;) {
        pthread_barrier_wait(&go);
        if (cur_step > steps)
            return NULL;
        storm_step((long)arg, cur_step);
        pthread_barrier_wait(&done);
    }
}

int main(int argc, char **argv)
{
    steps = arg(argc, argv, 1, 300, 1, 1000000);
    long mib = arg(argc, argv, 2, 128, 1, 4096);
    nthreads = arg(argc, argv, 3, 8, 1, 64);
    drop = arg(argc, argv, 4, 1, 0, 1);
    npages = (size_t)mib << 8;
    mem = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ver = mmap(NULL, npages * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED || ver == MAP_FAILED)
        fail("mmap: %s", strerror(errno));
    for (size_t p = 0; p < npages; p++)
        write_page(p);
    pthread_t th[64];
    if (pthread_barrier_init(&go, NULL, (unsigned)nthreads + 1) != 0 ||
        pthread_barrier_init(&done, NULL, (unsigned)nthreads + 1) != 0)
        fail("pthread_barrier_init");
    for (long t = 0; t < nthreads; t++)
        if ((errno = pthread_create(&th[t], NULL, storm, (void *)t)) != 0)
            fail("pthread_create: %s", strerror(errno));
    for (long s = 1; s <= steps; s++) {
        cur_step = s;
        pthread_barrier_wait(&go);
        pthread_barrier_wait(&done);
        step_line(s);
        ckpt_sleep_ms(15);
    }
    cur_step = steps + 1;
    pthread_barrier_wait(&go);
    for (long t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    uint64_t h = CKPT_FNV_BASIS;
    for (size_t p = 0; p < npages; p++) {
        check_page(p, steps, "at the end");
        h = ckpt_fnv(h, ver[p]);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
