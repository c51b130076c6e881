/* ckpt_common.h — helpers the ckpt_*.c test programs share: failing with a message, arguments,
   the `step N` lines, a monotonic clock and a watchdog. Define PROG and USAGE before including. */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG ": FAIL: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static inline long arg(int argc, char **argv, int i, long def, long lo, long hi)
{
    if (argc <= i)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        exit(2);
    }
    return v;
}

static inline void step_line(long k)
{
    printf("step %ld\n", k);
    if (fflush(stdout) != 0)
        fail("fflush(stdout): %s", strerror(errno));
}

static inline double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Counts running time only: a new pid (a restart outside crac's id keeping) starts it afresh, so
   time an image spent on disk never counts as a hang. */
struct watchdog {
    pid_t pid;
    double t0;
};
static inline void wd_start(struct watchdog *w)
{
    w->pid = getpid();
    w->t0 = now_mono();
}
static inline int wd_expired(struct watchdog *w, double limit)
{
    if (getpid() != w->pid)
        wd_start(w); /* restarted: only running time counts */
    return now_mono() - w->t0 > limit;
}

#endif
