/* path_calls.c [N=20000]: rounds of N open+close and N stat of the same file, N/20 listings of
   /etc (opendir, readdir to the end, closedir) and N/20 reads of /proc/self/stat (open, read,
   close), forever; after each round prints `round K open_ns X stat_ns Y list_ns Z procstat_ns W`
   (per call). bench/procpath.py runs it natively, under crac and restarted by crac, where these
   calls meet the translation of /proc ids. */
#define _GNU_SOURCE
#include <dirent.h>
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
        long few = n / 20 > 0 ? n / 20 : 1;
        for (long i = 0; i < few; i++) {
            DIR *d = opendir("/etc");
            if (!d) {
                perror("/etc");
                return 1;
            }
            while (readdir(d))
                ;
            closedir(d);
        }
        double t3 = now_ns();
        char text[1024];
        for (long i = 0; i < few; i++) {
            int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
            if (fd < 0 || read(fd, text, sizeof(text)) <= 0) {
                perror("/proc/self/stat");
                return 1;
            }
            close(fd);
        }
        double t4 = now_ns();
        printf("round %ld open_ns %.0f stat_ns %.0f list_ns %.0f procstat_ns %.0f\n", k,
               (t1 - t0) / (double)n, (t2 - t1) / (double)n, (t3 - t2) / (double)few,
               (t4 - t3) / (double)few);
        fflush(stdout);
    }
}
