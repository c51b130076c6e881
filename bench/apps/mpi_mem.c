/* mpi_mem SIZE_MIB [mpi]: for bench/mpi.py's checkpoint timing. Fills SIZE_MIB MiB with
   pseudo-random (incompressible) data, prints `ready`, then loops forever: with `mpi`, an
   MPI_Allreduce of one int every 10 ms (a job whose ranks talk); without, a 10 ms sleep (an
   independent process of the same size; built without MPI). */
#ifdef WITH_MPI
#include <mpi.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    long mib = argc > 1 ? atol(argv[1]) : 64;
    if (mib < 1)
        return 2;
    size_t n = (size_t)mib << 17; /* 8-byte words */
    uint64_t *buf = malloc(n * sizeof(*buf)), x = 0x9e3779b97f4a7c15ULL;
    if (!buf)
        return 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = x | 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (long k = 0;; k++) {
#ifdef WITH_MPI
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
#endif
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        buf[(size_t)k % n] += 1;
    }
}
