/* threads_mm: 8 threads churn malloc/free (16 B .. 1 MiB) and mmap/munmap/mremap (grow, shrink, move),
   writing and verifying byte patterns; exits non-zero on any mismatch, prints a deterministic summary. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NTHREADS 8
#define ITERS 400
#define SLOTS 32

struct targ {
    int id;
    unsigned long checksum;
    int failed;
};

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed + i * 31u);
}

static int check(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i * 31u))
            return 0;
    return 1;
}

#define FAIL(a, ...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "threads_mm: thread %d: ", (a)->id);                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        (a)->failed = 1;                                                                           \
        return NULL;                                                                               \
    } while (0)

static size_t pick_size(uint64_t *s)
{
    static const size_t sizes[] = {16,    24,    100,    512,    4000,   4096,
                                   10000, 65536, 131072, 200000, 1 << 20};
    size_t base = sizes[lcg(s) % (sizeof sizes / sizeof sizes[0])];
    return base - (base > 16 ? lcg(s) % 16 : 0);
}

static void *worker(void *argp)
{
    struct targ *a = argp;
    uint64_t s = 0x1234567ULL + (uint64_t)a->id * 7919;
    unsigned char *slot[SLOTS] = {0};
    size_t slen[SLOTS] = {0};
    unsigned sseed[SLOTS] = {0};
    long pg = sysconf(_SC_PAGESIZE);

    for (int it = 0; it < ITERS; it++) {
        /* malloc / free churn */
        for (int k = 0; k < 8; k++) {
            int i = (int)(lcg(&s) % SLOTS);
            if (slot[i]) {
                if (!check(slot[i], slen[i], sseed[i]))
                    FAIL(a, "malloc block %p (%zu bytes) corrupted", (void *)slot[i], slen[i]);
                a->checksum += slen[i] ^ sseed[i];
                free(slot[i]);
                slot[i] = NULL;
            } else {
                slen[i] = pick_size(&s);
                sseed[i] = (unsigned)lcg(&s);
                slot[i] = malloc(slen[i]);
                if (!slot[i])
                    FAIL(a, "malloc(%zu) failed", slen[i]);
                fill(slot[i], slen[i], sseed[i]);
            }
        }
        /* mmap / mremap / munmap */
        if (it % 4 == 0) {
            size_t n = (size_t)pg * (1 + lcg(&s) % 16);
            unsigned seed = (unsigned)lcg(&s);
            unsigned char *m =
                mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                FAIL(a, "mmap(%zu) failed", n);
            fill(m, n, seed);
            /* grow (may move) */
            size_t n2 = n * 2;
            unsigned char *g = mremap(m, n, n2, MREMAP_MAYMOVE);
            if (g == MAP_FAILED)
                FAIL(a, "mremap grow failed");
            if (!check(g, n, seed))
                FAIL(a, "mremap grow lost data");
            for (size_t i = n; i < n2; i++)
                if (g[i] != 0)
                    FAIL(a, "mremap grow: new tail not zero");
            fill(g, n2, seed + 1);
            /* shrink in place */
            unsigned char *sh = mremap(g, n2, n, 0);
            if (sh != g)
                FAIL(a, "mremap shrink moved or failed");
            if (!check(sh, n, seed + 1))
                FAIL(a, "mremap shrink lost data");
            /* forced move to a fresh reservation */
            unsigned char *dst = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (dst == MAP_FAILED)
                FAIL(a, "mmap(dst) failed");
            unsigned char *mv = mremap(sh, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
            if (mv != dst)
                FAIL(a, "mremap move failed");
            if (!check(mv, n, seed + 1))
                FAIL(a, "mremap move lost data");
            a->checksum += n;
            if (munmap(mv, n) != 0)
                FAIL(a, "munmap failed");
        }
    }
    for (int i = 0; i < SLOTS; i++) {
        if (slot[i]) {
            if (!check(slot[i], slen[i], sseed[i]))
                FAIL(a, "malloc block corrupted at end");
            a->checksum += slen[i] ^ sseed[i];
            free(slot[i]);
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t t[NTHREADS];
    struct targ a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (struct targ){.id = i};
        int rc = pthread_create(&t[i], NULL, worker, &a[i]);
        if (rc != 0) {
            fprintf(stderr, "threads_mm: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    unsigned long sum = 0;
    int failed = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        failed |= a[i].failed;
        sum = sum * 1000003UL + a[i].checksum;
    }
    if (failed) {
        fprintf(stderr, "threads_mm: FAILED\n");
        return 1;
    }
    printf("threads_mm ok threads=%d iters=%d checksum=%016lx\n", NTHREADS, ITERS, sum);
    return 0;
}
