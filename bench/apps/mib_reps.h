/* mib_reps.h — the `MIB [REPS]` arguments and the median of REPS timings, for the one-file page
 * loop benchmarks (writer_loop.c, fork_touch.c). */
#ifndef CRAC_BENCH_MIB_REPS_H
#define CRAC_BENCH_MIB_REPS_H

#include <stdio.h>
#include <stdlib.h>

#define MIB_REPS_MAX 99

/* *MIB (default 1024) and *REPS (default 5) from argv; 0, or 2 after a usage line naming NAME. */
static int mib_reps(int argc, char **argv, const char *name, size_t *mib, int *reps)
{
    *mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
    *reps = argc > 2 ? atoi(argv[2]) : 5;
    if (*mib == 0 || *reps < 1 || *reps > MIB_REPS_MAX) {
        fprintf(stderr, "usage: %s MIB [REPS]\n", name);
        return 2;
    }
    return 0;
}

static int mib_reps_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the N values at V (sorted in place). */
static double mib_reps_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), mib_reps_by_value);
    return v[n / 2];
}

#endif
