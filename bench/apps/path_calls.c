/* path_calls.c [N=20000]: rounds of N open+close and N stat of the same file, forever; after each
   round prints `round K open_ns X stat_ns Y` (per call). bench/procpath.py runs it natively, under
   crac and restarted by crac, where open and stat are trapped (/proc/<pid> translation). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    const char *path = "/etc/hostname";
    for (long k = 1;; k++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                perror(path);
                return 1;
            }
            close(fd);
        }
        double t1 = now_ns();
        struct stat st;
        for (long i = 0; i < n; i++)
            if (stat(path, &st) != 0) {
                perror(path);
                return 1;
            }
        double t2 = now_ns();
        printf("round %ld open_ns %.0f stat_ns %.0f\n", k, (t1 - t0) / (double)n,
               (t2 - t1) / (double)n);
        fflush(stdout);
    }
}
