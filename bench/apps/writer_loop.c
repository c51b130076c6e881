/* writer_loop MIB [REPS]: the CPU of a forked checkpoint writer's page loop over MIB MiB of random
 * 4 KiB pages, and of its parts, side by side in one run (docs/PERFORMANCE.md "The checkpoint
 * writer's CPU"). Each variant forks a child (as crac's writer is forked) that walks the parent's
 * pages: `pwrite` writes runs of pages into a file already in the page cache (no fresh page-cache
 * memory: this VM's host makes that cost vary, "What fresh memory costs on this VM"), as DMTCP's
 * writer would; `probe` reads each page's first and last word (crac's zero test); `crc` takes
 * CRC-32C of each page. `crc then write` is crac's writer before session 32 (each page summed as
 * it was probed, runs of up to 2 MiB written after), `write then crc` after it (runs of 256 KiB
 * written, then summed while in the cache); the direct writer, whose disk reads the pages
 * (nothing is written by the CPU), probes a run of 1 MiB and then sums it; `one pass` sums each
 * page while ORing its words for the zero test; `sum first` takes each page's own CRC-32C (the next
 * page asked for), a zero page told by its sum, the region's extended from it (page_crcs.c); `pipe`
 * reads each 1 MiB back through a pipe it was vmspliced into, and probes and sums the copy. Prints
 * medians of REPS (default 5) CPU seconds, and the ratio to `pwrite` alone. After build_native.py:
 *
 *   gcc -O2 -Iloader/image -Iinclude -Ibuild/crac_gen -o /tmp/writer_loop bench/apps/writer_loop.c \
 *       loader/image/page_crcs.c && /tmp/writer_loop 1024 */
#define _GNU_SOURCE
#include "crc32c.c"
#include "mib_reps.h"
#include "page_crcs.h"
#include "page_zero.h" /* crac's zero test, as the writer runs it */
#include "random_pages.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL

enum {
    PROBE = 1,
    CRC_FIRST = 2,
    WRITE = 4,
    CRC_AFTER = 8,
    ONE_PASS = 16,
    NTA_NEXT = 32,
    AHEAD = 64,
    SUM_FIRST = 128,
    VIA_PIPE = 256
};

static const struct {
    const char *name;
    int parts;
    size_t run_pages;
} variants[] = {
    {"pwrite", WRITE, 512},
    {"probe", PROBE, 512},
    {"probe + crc", PROBE | CRC_FIRST, 512},
    {"probe + pwrite", PROBE | WRITE, 512},
    {"crc then write (before)", PROBE | CRC_FIRST | WRITE, 512},
    {"write then crc (after)", PROBE | WRITE | CRC_AFTER, 64},
    {"probe, then crc of each 1 MiB run (the direct writer)", PROBE | CRC_AFTER, 256},
    {"the same, 8 lines of the next page asked for (NTA) by the probe (to session 36)",
     PROBE | CRC_AFTER | NTA_NEXT, 256},
    {"the same, lines asked for ahead: the probe's 4 pages, the sum's 1 page (session 37)",
     PROBE | CRC_AFTER | AHEAD, 256},
    {"crc alone", CRC_FIRST, 256},
    {"crc and zero test in one pass", ONE_PASS, 256},
    {"sum first: each page's own crc (the next page asked for), zero if a zero page's", SUM_FIRST,
     256},
    {"pipe: each 1 MiB vmspliced into a pipe, read back, probed and summed there", VIA_PIPE, 256},
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

static double child_cpu(void)
{
    struct rusage u;
    getrusage(RUSAGE_CHILDREN, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* One page's CRC-32C (crc32c.c's three streams) while ORing every word it sums: the zero test
 * and the sum in one pass. *NONZERO: whether any word was not zero. */
__attribute__((target("sse4.2,pclmul"))) static uint32_t
crc_page_or(uint32_t crc, const unsigned char *p, int *nonzero)
{
    const size_t n = PAGE / 24 * 8; /* 1360 bytes a lane, 16 left over */
    uint64_t c0 = ~crc, c1 = 0, c2 = 0, any = 0;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v0, v1, v2;
        memcpy(&v0, p + i, 8);
        memcpy(&v1, p + n + i, 8);
        memcpy(&v2, p + 2 * n + i, 8);
        c0 = __builtin_ia32_crc32di(c0, v0);
        c1 = __builtin_ia32_crc32di(c1, v1);
        c2 = __builtin_ia32_crc32di(c2, v2);
        any |= v0 | v1 | v2;
    }
    uint64_t prod = clmul((uint32_t)c0, k_two[n / 8]) ^ clmul((uint32_t)c1, k_lane[n / 8]);
    uint64_t c = (uint32_t)__builtin_ia32_crc32di(0, prod) ^ (uint32_t)c2;
    for (size_t i = 3 * n; i < PAGE; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        c = __builtin_ia32_crc32di(c, v);
        any |= v;
    }
    *nonzero = any != 0;
    return ~(uint32_t)c;
}

static uint32_t crc_pages(uint32_t crc, const unsigned char *p, uint64_t first, uint64_t n,
                          int ahead)
{
    for (uint64_t k = first; k < first + n; k++) {
        if (ahead && k + 1 < first + n)
            crc32c_prefetch(p + (k + 1) * PAGE, PAGE);
        crc = crc32c_update(crc, &k, 8);
        crc = crc32c_update(crc, p + k * PAGE, PAGE);
    }
    return crc;
}

/* VIA_PIPE: the child's pages reach its CPU only as a copy the kernel makes through a pipe (no
 * read of them through the child's own page table entries: "The forked writer's first touch"). */
static uint32_t crc_via_pipe(const unsigned char *mem, size_t pages)
{
    static unsigned char buf[256 * PAGE];
    int pp[2];
    if (pipe(pp) != 0 || fcntl(pp[1], F_SETPIPE_SZ, (int)sizeof(buf)) < (int)sizeof(buf))
        _exit(255);
    uint32_t crc = 0;
    for (uint64_t i = 0; i < pages; i += 256) {
        size_t len = (pages - i < 256 ? pages - i : 256) * PAGE;
        struct iovec at = {(void *)(mem + i * PAGE), len};
        if (vmsplice(pp[1], &at, 1, 0) != (ssize_t)len)
            _exit(255);
        for (size_t got = 0; got < len;) {
            ssize_t k = read(pp[0], buf + got, len - got);
            if (k <= 0)
                _exit(255);
            got += (size_t)k;
        }
        for (uint64_t k = 0; k < len / PAGE; k++) {
            if (page_is_zero(buf + k * PAGE))
                continue;
            uint64_t index = i + k;
            crc = crc32c_update(crc32c_update(crc, &index, 8), buf + k * PAGE, PAGE);
        }
    }
    return crc;
}

/* In the forked child: one pass of variant V over the pages; exits with the CRC's low byte. */
static void walk(const unsigned char *mem, size_t pages, int fd, int v)
{
    int parts = variants[v].parts;
    if (parts & VIA_PIPE)
        _exit((int)(crc_via_pipe(mem, pages) & 0x7f));
    uint32_t crc = 0;
    uint64_t run_start = 0, run_len = 0;
    for (uint64_t i = 0; i <= pages; i++) {
        int save = 0;
        if (i < pages) {
            if ((parts & NTA_NEXT) && i + 1 < pages)
                for (size_t o = 0; o < PAGE; o += 512)
                    __builtin_prefetch(mem + (i + 1) * PAGE + o, 0, 0);
            if ((parts & AHEAD) && i + 4 < pages) { /* image_core.c's prefetch_probe */
                __builtin_prefetch(mem + (i + 4) * PAGE, 0, 3);
                __builtin_prefetch(mem + (i + 5) * PAGE - 64, 0, 3);
            }
            save = !(parts & PROBE) || !page_is_zero(mem + i * PAGE);
            if (parts & SUM_FIRST) { /* a run is then written, its pages summed already */
                if (i + 1 < pages)
                    crc32c_prefetch(mem + (i + 1) * PAGE, PAGE);
                uint32_t own = crc32c_update(0, mem + i * PAGE, PAGE);
                save = own != page_crc_zero() || !page_is_zero(mem + i * PAGE);
                if (save)
                    crc = page_crc_extend(crc32c_update(crc, &i, 8), own);
            }
            if (parts & ONE_PASS) {
                uint32_t summed = crc32c_update(crc, &i, 8);
                summed = crc_page_or(summed, mem + i * PAGE, &save);
                crc = save ? summed : crc;
            }
            if (save && (parts & CRC_FIRST))
                crc = crc_pages(crc, mem, i, 1, 0);
        }
        if (save && run_len < variants[v].run_pages) {
            run_start = run_len ? run_start : i;
            run_len++;
            continue;
        }
        if (run_len && (parts & WRITE) &&
            pwrite(fd, mem + run_start * PAGE, run_len * PAGE, (off_t)(run_start * PAGE)) < 0)
            _exit(255);
        if (run_len && (parts & CRC_AFTER))
            crc = crc_pages(crc, mem, run_start, run_len, parts & AHEAD);
        run_start = i;
        run_len = save;
    }
    _exit((int)(crc & 0x7f));
}

int main(int argc, char **argv)
{
    size_t mib;
    int reps;
    if (mib_reps(argc, argv, "writer_loop", &mib, &reps) != 0)
        return 2;
    size_t len = mib << 20, pages = len / PAGE;
    crc32c_update(0, "", 0); /* chooses the path and builds crc_page_or's lane constants */
    unsigned char *mem = random_pages(len, 1); /* never a zero page */
    if (!mem)
        return perror("mmap"), 1;
    char path[] = "/var/tmp/writer_loop.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return perror("mkstemp"), 1;
    unlink(path);
    if (pwrite(fd, mem, len, 0) != (ssize_t)len || fsync(fd) != 0) /* in the page cache now */
        return perror("pwrite"), 1;
    double cpu[N_VARIANTS][MIB_REPS_MAX];
    for (int r = 0; r < reps; r++)
        for (size_t v = 0; v < N_VARIANTS; v++) {
            double before = child_cpu();
            pid_t p = fork();
            if (p == 0)
                walk(mem, pages, fd, (int)v);
            int st;
            if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) == 255)
                return fprintf(stderr, "writer_loop: a child failed\n"), 1;
            cpu[v][r] = child_cpu() - before;
        }
    printf("| variant (%zu MiB, medians of %d) | CPU s | / pwrite |\n|---|---|---|\n", mib, reps);
    double base = 0;
    for (size_t v = 0; v < N_VARIANTS; v++) {
        double m = mib_reps_median(cpu[v], reps);
        base = v == 0 ? m : base;
        printf("| %s | %.3f | %.2f |\n", variants[v].name, m, m / base);
    }
    return 0;
}
