/* vmflags_walk owns the measurement behind docs/PERFORMANCE.md "VmFlags after the write": what
   reading /proc/self/smaps, /proc/self/maps, the page map and PAGEMAP_SCAN costs a forked copy of
   MIB MiB of touched pages, as crac's checkpoint writer is, before and after it drops its copy
   (MADV_DONTNEED) of the pages it wrote.

   vmflags_walk MIB [REPS]

   gcc -O2 -Iinclude -o /tmp/vmflags_walk bench/apps/vmflags_walk.c && /tmp/vmflags_walk 2048 3 */
#define _GNU_SOURCE
#include "crac_pagemap_scan.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static double read_all_ms(const char *path)
{
    static char buf[1 << 16];
    double t = cpu_s();
    int fd = open(path, O_RDONLY);
    while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
        ;
    if (fd >= 0)
        close(fd);
    return (cpu_s() - t) * 1e3;
}

static void walks(const char *when, unsigned char *p, size_t len)
{
    double smaps = read_all_ms("/proc/self/smaps"), maps = read_all_ms("/proc/self/maps");
    int pm = open("/proc/self/pagemap", O_RDONLY);
    uint64_t e[512];
    double t = cpu_s();
    for (size_t a = 0; a < len; a += sizeof(e) / 8 * 4096)
        if (pread(pm, e, sizeof(e), (off_t)(((uintptr_t)p + a) / 4096 * 8)) < 0)
            perror("pagemap");
    double pagemap = (cpu_s() - t) * 1e3;
    struct page_region_ r[64];
    struct pm_scan_arg_ arg = {.size = sizeof(arg),
                               .start = (uintptr_t)p,
                               .end = (uintptr_t)p + len,
                               .vec = (uintptr_t)r,
                               .vec_len = 64,
                               .category_mask = PAGE_IS_PRESENT_,
                               .return_mask = PAGE_IS_PRESENT_};
    t = cpu_s();
    long ranges = ioctl(pm, PAGEMAP_SCAN_, &arg);
    double scan = (cpu_s() - t) * 1e3;
    close(pm);
    printf("%-14s smaps %6.1f ms  maps %4.1f ms  pagemap %5.1f ms  PAGEMAP_SCAN %5.1f ms (%ld "
           "ranges)\n",
           when, smaps, maps, pagemap, scan, ranges);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 2048;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    size_t len = mib << 20;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return perror("mmap"), 1;
    for (size_t i = 0; i < len; i += 4096)
        p[i] = (unsigned char)(i >> 12 | 1);
    printf("%zu MiB touched, forked copy:\n", mib);
    fflush(stdout);
    for (int k = 0; k < reps; k++) {
        pid_t kid = fork();
        if (kid == 0) {
            walks("pages shared", p, len);
            madvise(p, len, MADV_DONTNEED);
            walks("pages dropped", p, len);
            fflush(stdout);
            _exit(0);
        }
        waitpid(kid, NULL, 0);
    }
    return 0;
}
