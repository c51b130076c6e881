/* fork_touch MIB [REPS]: what the first read of each page costs in a forked child (crac's
 * checkpoint writer) against its parent, and why (docs/PERFORMANCE.md "The forked writer's first
 * touch"). Reads each 4 KiB page's first and last word (the writer's zero test) over MIB MiB:
 *
 *   parent           the process that wrote the pages (its page table entries marked accessed)
 *   parent, cleared  the same after /proc/self/clear_refs cleared every entry's accessed bit
 *   child, first     a forked child: fork copies the entries with the accessed bit cleared
 *   child, second    the same child again
 *
 * Prints the median CPU seconds a GiB of REPS (default 5) and ns a page. Never asserts.
 *
 *   gcc -O2 -o /tmp/fork_touch bench/apps/fork_touch.c && /tmp/fork_touch 1024 */
#define _GNU_SOURCE
#include "mib_reps.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static volatile uint64_t sink;

static double probe(const unsigned char *m, size_t len)
{
    double t = cpu_now();
    uint64_t acc = 0;
    for (size_t p = 0; p < len; p += PAGE)
        acc |= *(const volatile uint64_t *)(m + p) | *(const volatile uint64_t *)(m + p + PAGE - 8);
    sink = acc;
    return cpu_now() - t;
}

static int clear_accessed(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("1", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    size_t mib;
    int reps;
    if (mib_reps(argc, argv, "fork_touch", &mib, &reps) != 0)
        return 2;
    size_t len = mib << 20;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return perror("mmap"), 1;
    madvise(m, len, MADV_NOHUGEPAGE); /* 4 KiB pages, as a program's heap mostly is */
    for (size_t i = 0; i < len; i += 8)
        *(uint64_t *)(m + i) = i * 0x9E3779B97F4A7C15ull;
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return perror("pipe"), 1;
    double t[4][MIB_REPS_MAX];
    for (int r = 0; r < reps; r++) {
        t[0][r] = probe(m, len);
        t[1][r] = clear_accessed() == 0 ? probe(m, len) : -1;
        pid_t c = fork();
        if (c == 0) {
            double both[2] = {probe(m, len), probe(m, len)};
            _exit(write(pipefd[1], both, sizeof(both)) == sizeof(both) ? 0 : 1);
        }
        int st;
        double both[2];
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
            read(pipefd[0], both, sizeof(both)) != sizeof(both))
            return fprintf(stderr, "fork_touch: the child failed\n"), 1;
        t[2][r] = both[0];
        t[3][r] = both[1];
    }
    static const char *const names[] = {"parent", "parent, cleared", "child, first",
                                        "child, second"};
    printf("| reads of %zu MiB (medians of %d) | CPU s a GiB | ns a page |\n|---|---|---|\n", mib,
           reps);
    for (int v = 0; v < 4; v++) {
        double s = mib_reps_median(t[v], reps);
        if (s < 0) {
            printf("| %s | (clear_refs refused) | |\n", names[v]);
            continue;
        }
        printf("| %s | %.3f | %.0f |\n", names[v], s * 1024 / (double)mib,
               s * 1e9 / (double)(len / PAGE));
    }
    return 0;
}
