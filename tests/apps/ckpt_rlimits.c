/* ckpt_rlimits [STEPS=100] [HIGHFD=0]: resource limits the program sets (soft and hard, every
   RLIMIT_* but RLIMIT_AS) stay what it set across restarts; at step 30 it changes two of them
   again. HIGHFD=1: RLIMIT_NOFILE's soft limit is raised to its hard one instead, and a
   descriptor numbered just under it stays open throughout. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_rlimits"
#define USAGE "[STEPS] [HIGHFD]"
#include "ckpt_common.h"

#define INF RLIM_INFINITY
#define CHANGE_AT 30

struct lim {
    int res;
    const char *name;
    rlim_t soft, hard;
};

/* Values unlike the usual defaults, and no higher than a process without CAP_SYS_RESOURCE may
   set (NICE and RTPRIO: 0, as such a process has them). */
static struct lim lims[] = {
    {RLIMIT_CPU, "CPU", 100000, 200000},
    {RLIMIT_FSIZE, "FSIZE", 1ULL << 40, INF},
    {RLIMIT_DATA, "DATA", 1ULL << 44, INF},
    {RLIMIT_STACK, "STACK", 16 << 20, INF},
    {RLIMIT_CORE, "CORE", 0, 1 << 30},
    {RLIMIT_RSS, "RSS", 1ULL << 40, INF},
    {RLIMIT_NPROC, "NPROC", 50000, 60000},
    {RLIMIT_NOFILE, "NOFILE", 300, 5000},
    {RLIMIT_MEMLOCK, "MEMLOCK", 1 << 20, 1 << 21},
    {RLIMIT_LOCKS, "LOCKS", 1000, 2000},
    {RLIMIT_SIGPENDING, "SIGPENDING", 500, 1000},
    {RLIMIT_MSGQUEUE, "MSGQUEUE", 100000, 200000},
    {RLIMIT_NICE, "NICE", 0, 0},
    {RLIMIT_RTPRIO, "RTPRIO", 0, 0},
    {RLIMIT_RTTIME, "RTTIME", 1000000, 2000000},
};
#define N_LIMS (sizeof lims / sizeof lims[0])

static void set(struct lim *l, rlim_t soft, rlim_t hard)
{
    struct rlimit r = {soft, hard};
    if (setrlimit(l->res, &r) != 0)
        fail("setrlimit(RLIMIT_%s, %llu, %llu): %s", l->name, (unsigned long long)soft,
             (unsigned long long)hard, strerror(errno));
    l->soft = soft;
    l->hard = hard;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    int highfd = (int)arg(argc, argv, 2, 0, 0, 1);
    int high = -1;
    for (unsigned i = 0; i < N_LIMS; i++) {
        struct rlimit now; /* never above the hard limit we were given */
        if (getrlimit(lims[i].res, &now) != 0)
            fail("getrlimit(RLIMIT_%s): %s", lims[i].name, strerror(errno));
        rlim_t hard = lims[i].hard < now.rlim_max ? lims[i].hard : now.rlim_max;
        if (highfd && lims[i].res == RLIMIT_NOFILE)
            lims[i].soft = RLIM_INFINITY; /* the hard limit, below */
        set(&lims[i], lims[i].soft < hard ? lims[i].soft : hard, hard);
        if (highfd && lims[i].res == RLIMIT_NOFILE) {
            high = (int)lims[i].soft - 2;
            if (dup2(1, high) != high)
                fail("dup2(1, %d): %s", high, strerror(errno));
        }
    }
    for (long k = 1; k <= steps; k++) {
        if (high >= 0 && fcntl(high, F_GETFD) < 0)
            fail("step %ld: descriptor %d: %s", k, high, strerror(errno));
        if (k == CHANGE_AT && !highfd) {
            for (unsigned i = 0; i < N_LIMS; i++) {
                if (lims[i].res == RLIMIT_NOFILE || lims[i].res == RLIMIT_CORE)
                    set(&lims[i], lims[i].hard / 2, lims[i].hard - 1);
            }
        }
        for (unsigned i = 0; i < N_LIMS; i++) {
            struct rlimit r;
            if (getrlimit(lims[i].res, &r) != 0)
                fail("step %ld: getrlimit(RLIMIT_%s): %s", k, lims[i].name, strerror(errno));
            if (r.rlim_cur != lims[i].soft || r.rlim_max != lims[i].hard)
                fail("step %ld: RLIMIT_%s is %llu/%llu, the program set %llu/%llu", k, lims[i].name,
                     (unsigned long long)r.rlim_cur, (unsigned long long)r.rlim_max,
                     (unsigned long long)lims[i].soft, (unsigned long long)lims[i].hard);
        }
        step_line(k);
        struct timespec req = {0, 20 * 1000000L};
        nanosleep(&req, NULL);
    }
    printf("DONE limits=%zu\n", N_LIMS);
    return fflush(stdout) == 0 ? 0 : 1;
}
