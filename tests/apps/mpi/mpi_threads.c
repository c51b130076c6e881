/* mpi_threads.c — a self-checking MPI_THREAD_MULTIPLE program: a second thread runs a ring and
   allreduces on its own duplicate of the world while the main thread does the same on another,
   both at once. Rank 0's main thread prints `step N` and a DONE line (checksum). */
#define PROG "mpi_threads"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "../ckpt_common.h"

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

static long steps, ms;
static int rank, size;

static uint64_t mix(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void check(int ok, const char *what, long step)
{
    if (!ok) {
        fprintf(stderr, PROG ": FAIL: %s at step %ld\n", what, step);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

struct worker {
    MPI_Comm comm;
    int salt;
    uint64_t hash;
    int main_thread;
};

static void *run(void *p)
{
    struct worker *w = p;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    w->hash = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        long out = k * 100 + rank * 10 + w->salt, in = -1;
        MPI_Sendrecv(&out, 1, MPI_LONG, right, 1, &in, 1, MPI_LONG, left, 1, w->comm,
                     MPI_STATUS_IGNORE);
        check(in == k * 100 + left * 10 + w->salt, "ring", k);
        long sum = 0;
        MPI_Allreduce(&out, &sum, 1, MPI_LONG, MPI_SUM, w->comm);
        check(sum == k * 100 * size + 10L * size * (size - 1) / 2 + (long)w->salt * size,
              "allreduce", k);
        w->hash = mix(mix(w->hash, (uint64_t)in), (uint64_t)sum);
        if (w->main_thread && rank == 0)
            step_line(k);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L + w->salt * 3000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    steps = arg(argc, argv, 1, 40, 1, 1000000);
    ms = arg(argc, argv, 2, 20, 0, 900);
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE)
        fail("MPI_THREAD_MULTIPLE not provided (%d)", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
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
    uint64_t mine = mix(a.hash, b.hash), all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    MPI_Comm_free(&a.comm);
    MPI_Comm_free(&b.comm);
    if (rank == 0) {
        printf("DONE checksum=%016llx steps=%ld ranks=%d\n", (unsigned long long)all, steps, size);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
