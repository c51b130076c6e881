/* thp_fork owns the measurement behind docs/PERFORMANCE.md "Huge pages and the fork's pause": what
   a forked writer's fork costs over 4 KiB pages and over transparent huge pages, and what the
   huge pages cost the program when it first touches its memory. */

/* thp_fork MIB REPS: for 4 KiB pages and then for MADV_HUGEPAGE memory, MIB MiB of anonymous
   memory (2 MiB aligned) touched page by page (timed: the program's own first touch), then REPS
   times: fork() of the process (timed until fork returns in the parent: the pause a forked
   writer adds) and 1000 writes to random pages while the child holds the copy (timed: the
   program's copy-on-write faults). Prints one key=value line per case and repetition. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long anon_huge_kib(void)
{
    char line[256];
    long kib = 0;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void one_case(size_t mib, int huge, int reps)
{
    size_t n = mib << 20, align = 2UL << 20;
    char *raw = mmap(NULL, n + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    char *p = (char *)(((unsigned long)raw + align - 1) & ~(align - 1));
    if (huge && madvise(p, n, MADV_HUGEPAGE) != 0) {
        perror("madvise");
        exit(1);
    }
    double t0 = now();
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (char)(i | 1);
    double touch = now() - t0;
    long huge_kib = anon_huge_kib();
    unsigned seed = 12345;
    for (int r = 0; r < reps; r++) {
        double a = now();
        pid_t kid = fork();
        if (kid == 0) {
            sleep(1);
            _exit(0);
        }
        double b = now();
        for (int i = 0; i < 1000; i++)
            p[((size_t)rand_r(&seed) % (n / 4096)) * 4096]++;
        double c = now();
        waitpid(kid, NULL, 0);
        printf("case=%s mib=%zu rep=%d touch_ms=%.1f anon_huge_mib=%ld fork_ms=%.3f "
               "cow1000_ms=%.3f\n",
               huge ? "huge" : "small", mib, r, touch * 1e3, huge_kib / 1024, (b - a) * 1e3,
               (c - b) * 1e3);
        fflush(stdout);
    }
    munmap(raw, n + align);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: thp_fork MIB REPS\n");
        return 2;
    }
    size_t mib = (size_t)atol(argv[1]);
    int reps = atoi(argv[2]);
    one_case(mib, 0, reps);
    one_case(mib, 1, reps);
    return 0;
}
