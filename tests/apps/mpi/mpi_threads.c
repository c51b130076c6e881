/* mpi_threads.c — a self-checking MPI_THREAD_MULTIPLE program: a second thread runs a ring and
   allreduces on its own duplicate of the world while the main thread does the same on another,
   both at once. Rank 0's main thread prints `step N` and a DONE line (checksum). */
#define PROG "mpi_threads"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

struct worker {
    MPI_Comm comm;
    int salt;
    uint64_t hash;
    int main_thread;
};

static void *run(void *p)
{
    struct worker *w = p;
    w->hash = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        long out = k * 100 + rank * 10 + w->salt, in = -1;
        MPI_Sendrecv(&out, 1, MPI_LONG, right, 1, &in, 1, MPI_LONG, left, 1, w->comm,
                     MPI_STATUS_IGNORE);
        check(in == k * 100 + left * 10 + w->salt, "ring", k);
        long sum = 0;
        MPI_Allreduce(&out, &sum, 1, MPI_LONG, MPI_SUM, w->comm);
        check(sum == k * 100 * size + 10L * size * (size - 1) / 2 + (long)w->salt * size,
              "allreduce", k);
        w->hash = ckpt_fnv(ckpt_fnv(w->hash, (uint64_t)in), (uint64_t)sum);
        if (w->main_thread && rank == 0)
            step_line(k);
        ckpt_sleep_ms(ms + w->salt * 3); /* MS_PER_STEP is at most 900: below a second */
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = mpi_start(&argc, &argv, 20, 900, MPI_THREAD_MULTIPLE);
    if (provided != MPI_THREAD_MULTIPLE)
        fail("MPI_THREAD_MULTIPLE not provided (%d)", provided);
    struct worker a = {0}, b = {0};
    MPI_Comm_dup(MPI_COMM_WORLD, &a.comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &b.comm);
    a.salt = 1;
    a.main_thread = 1;
    b.salt = 2;
    pthread_t t;
    if (pthread_create(&t, NULL, run, &b) != 0)
        fail("pthread_create");
    run(&a);
    pthread_join(t, NULL);
    uint64_t mine = ckpt_fnv(a.hash, b.hash), all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&a.comm);
    MPI_Comm_free(&b.comm);
    mpi_done(all);
    MPI_Finalize();
    return 0;
}
