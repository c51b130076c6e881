/* mpi_common.h — what the self-checking MPI test programs share, on top of ../ckpt_common.h: the
   [STEPS [MS_PER_STEP]] arguments, MPI start-up (rank, size, ring neighbours), a check that
   aborts the whole job, a message left in flight over a pause, and the DONE line (after the test's end gate). Define PROG
   and USAGE before including. */
#ifndef MPI_COMMON_H
#define MPI_COMMON_H

#include "../ckpt_common.h"

#include <mpi.h>
#include <stdint.h>

/* Set by mpi_start (a program is one rank of one job). */
static long steps, ms;  /* [STEPS [MS_PER_STEP]] */
static int rank, size;  /* in MPI_COMM_WORLD */
static int left, right; /* ring neighbours in MPI_COMM_WORLD */

#define MPI_INIT_PLAIN (-1) /* mpi_start's LEVEL: MPI_Init, not MPI_Init_thread */

/* Reads [STEPS=40 [MS_PER_STEP=MS_DEF]] (MS_PER_STEP at most MS_MAX) before MPI starts (a bad one
   exits 2 with the usage line), then MPI_Init, or MPI_Init_thread asking for LEVEL; returns the
   thread level MPI_Init_thread provided (LEVEL itself after MPI_Init). */
static inline int mpi_start(int *argc, char ***argv, long ms_def, long ms_max, int level)
{
    steps = arg(*argc, *argv, 1, 40, 1, 1000000);
    ms = arg(*argc, *argv, 2, ms_def, 0, ms_max);
    int provided = level;
    if (level == MPI_INIT_PLAIN)
        MPI_Init(argc, argv);
    else
        MPI_Init_thread(argc, argv, level, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    return provided;
}

/* A failed check ends the whole job, not just this rank (the others would wait for it). */
static inline void check(int ok, const char *what, long step)
{
    if (!ok) {
        fprintf(stderr, PROG ": FAIL: %s at step %ld\n", what, step);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* Step K's `k * MUL + rank` sent to the right on TAG, received from the left only after a pause
   of MS: a checkpoint in the pause finds it in flight. */
static inline void late_message(long k, long mul, int tag)
{
    long late = k * mul + rank, got = -1;
    MPI_Send(&late, 1, MPI_LONG, right, tag, MPI_COMM_WORLD);
    if (ms)
        ckpt_sleep_ms(ms);
    MPI_Recv(&got, 1, MPI_LONG, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    check(got == k * mul + left, "late message", k);
}

/* Every rank's H xor-ed together, at rank 0. */
static inline uint64_t xor_at_root(uint64_t h)
{
    uint64_t all = 0;
    MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    return all;
}

/* Rank 0's last line: `DONE checksum=SUM steps=STEPS ranks=SIZE`, once the test's end gate is
   open (every rank waits: the job's end cannot race a checkpoint). */
static inline void mpi_done(uint64_t sum)
{
    end_gate();
    if (rank == 0) {
        printf("DONE checksum=%016llx steps=%ld ranks=%d\n", (unsigned long long)sum, steps, size);
        fflush(stdout);
    }
}

#endif
