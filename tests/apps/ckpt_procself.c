/* ckpt_procself [STEPS=60]: holds /proc/<own pid>/status and /proc/<own pid>/stat (opened through
   its numeric pid) and /proc/self/fd as a directory fd, and
   /proc/<pid>/task/<pid>/stat; per step reads each through its fd and
   checks that it still describes this very process (same as a fresh /proc/self open): its name,
   parent and umask. Not its pid: after a restart a held file is the kernel's, live, while one
   opened then names the program's ids (docs/DECISIONS.md "/proc/<pid> after a restart"). Nor its
   start time: a fresh stat keeps the first run's (checked: the same at every step), a held one
   is the kernel's (checked: the same in the held stat and the held task stat, not before the
   first run's). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>

#define PROG "ckpt_procself"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static size_t read_at0(int fd, char *buf, size_t size, const char *what, long k)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    if (n <= 0)
        fail("step %ld: reading %s: %s", k, what, n < 0 ? strerror(errno) : "empty");
    buf[n] = '\0';
    return (size_t)n;
}

/* Field 22 of a stat text (the start time, in clock ticks after boot): after the last ')'. */
static long long start_time(const char *stat, const char *what, long k)
{
    const char *p = strrchr(stat, ')');
    for (int i = 2; p && i < 22; i++)
        p = strchr(p + 1, ' ');
    if (!p)
        fail("step %ld: %s has no start time", k, what);
    return strtoll(p + 1, NULL, 10);
}

static void field(const char *text, const char *key, char *out, size_t size)
{
    const char *p = strstr(text, key);
    if (!p)
        fail("no %s in /proc status", key);
    size_t n = strcspn(p, "\n");
    snprintf(out, size, "%.*s", (int)n, p);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 999999);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)getpid());
    int status_fd = open(path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/stat", (int)getpid());
    int stat_fd = open(path, O_RDONLY);
    int fd_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
    /* The main thread's own entry, through its tid (= the pid). */
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)getpid(), (int)getpid());
    int task_fd = open(path, O_RDONLY);
    if (status_fd < 0 || stat_fd < 0 || fd_dir < 0 || task_fd < 0)
        fail("opening /proc files: %s", strerror(errno));
    long long first_start = 0;
    for (long k = 1; k <= steps; k++) {
        char held[8192], fresh[8192], a[256], b[256];
        read_at0(status_fd, held, sizeof held, "the held status", k);
        int f = open("/proc/self/status", O_RDONLY);
        if (f < 0)
            fail("step %ld: open /proc/self/status: %s", k, strerror(errno));
        read_at0(f, fresh, sizeof fresh, "/proc/self/status", k);
        close(f);
        static const char *keys[] = {"Name:", "PPid:", "Umask:"};
        for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            field(held, keys[i], a, sizeof a);
            field(fresh, keys[i], b, sizeof b);
            if (strcmp(a, b) != 0)
                fail("step %ld: the held status says \"%s\", this process \"%s\"", k, a, b);
        }
        read_at0(stat_fd, held, sizeof held, "the held stat", k);
        f = open("/proc/self/stat", O_RDONLY);
        if (f < 0)
            fail("step %ld: open /proc/self/stat: %s", k, strerror(errno));
        read_at0(f, fresh, sizeof fresh, "/proc/self/stat", k);
        close(f);
        long long started = start_time(fresh, "/proc/self/stat", k);
        if (!first_start)
            first_start = started;
        if (started != first_start) /* psutil's test of a pid reused */
            fail("step %ld: /proc/self/stat says this process started at %lld, at step 1 %lld", k,
                 started, first_start);
        long long held_start = start_time(held, "the held stat", k);
        if (held_start < first_start)
            fail("step %ld: the held stat is of a process started at %lld, before this one (%lld)",
                 k, held_start, first_start);
        read_at0(task_fd, held, sizeof held, "the held task stat", k);
        if (start_time(held, "the held task stat", k) != held_start)
            fail("step %ld: the held task stat is of a thread started at %lld, the held stat's "
                 "process at %lld",
                 k, start_time(held, "the held task stat", k), held_start);
        /* The directory fd lists this process's own descriptors. */
        struct stat via_dir, direct;
        char name[16];
        snprintf(name, sizeof name, "%d", status_fd);
        if (fstatat(fd_dir, name, &via_dir, 0) != 0 || fstat(status_fd, &direct) != 0)
            fail("step %ld: fstatat(/proc/self/fd, %s): %s", k, name, strerror(errno));
        if (via_dir.st_ino != direct.st_ino || via_dir.st_dev != direct.st_dev)
            fail("step %ld: the held /proc/self/fd is not this process's", k);
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    printf("DONE steps=%ld\n", steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
