/* mpi_pingpong MODE BYTES ITERS [REPORTS]: for bench/mpi.py. MODE pingpong: ranks 0 and 1 pass a
   message of BYTES bytes back and forth ITERS times (MPI_Send/MPI_Recv); rank 0 prints the one-way
   latency in microseconds and the bandwidth in MiB/s. MODE allreduce: every rank runs ITERS
   MPI_Allreduce (MPI_SUM) of BYTES/8 doubles; rank 0 prints microseconds per call. Timed inside
   the program (MPI_Wtime, after a warm-up of ITERS/10), so launch costs are left out. REPORTS
   (default 1) timed rounds, one line each; every value is checked. MODE self: rank 0 sends BYTES
   to itself and receives them (MPI_Send then MPI_Recv), ITERS times; microseconds per call: the
   per-call cost of the library (and of crac's shim) without waiting for another process. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what)
{
    fprintf(stderr, "mpi_pingpong: FAIL: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static double pingpong(char *buf, int bytes, long iters, int rank)
{
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            buf[0] = (char)i;
            MPI_Send(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (buf[0] != (char)(i + 1))
                fail("pong value");
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            buf[0]++;
            MPI_Send(buf, bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

static double allreduce(double *in, double *out, int n, long iters, int size)
{
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        in[0] = (double)i;
        MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (out[0] != (double)i * size || out[n - 1] != (double)size)
            fail("allreduce value");
    }
    return MPI_Wtime() - t0;
}

static double self_pair(char *buf, int bytes, long iters, int rank)
{
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters && rank == 0; i++) {
        buf[0] = (char)i;
        MPI_Send(buf, bytes, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        buf[0] = 0;
        MPI_Recv(buf, bytes, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (buf[0] != (char)i)
            fail("self value");
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 4) {
        fprintf(stderr, "usage: mpi_pingpong pingpong|allreduce|self BYTES ITERS [REPORTS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bytes = atoi(argv[2]);
    long iters = atol(argv[3]);
    int reports = argc > 4 ? atoi(argv[4]) : 1;
    if (bytes < 8 || iters < 10 || reports < 1)
        fail("bad arguments");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int is_pp = strcmp(argv[1], "pingpong") == 0, is_self = strcmp(argv[1], "self") == 0;
    if (is_pp && size < 2)
        fail("pingpong needs 2 ranks");
    char *buf = calloc((size_t)bytes, 1);
    int n = bytes / 8;
    double *in = calloc((size_t)n, sizeof(double)), *out = calloc((size_t)n, sizeof(double));
    if (!buf || !in || !out)
        fail("out of memory");
    for (int i = 0; i < n; i++)
        in[i] = 1.0;
    if (is_self)
        self_pair(buf, bytes, iters / 10, rank);
    else if (is_pp)
        pingpong(buf, bytes, iters / 10, rank);
    else
        allreduce(in, out, n, iters / 10, size);
    for (int r = 0; r < reports; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = is_self ? self_pair(buf, bytes, iters, rank)
                   : is_pp ? pingpong(buf, bytes, iters, rank)
                           : allreduce(in, out, n, iters, size);
        if (rank == 0 && is_self)
            printf("self %d B: %.3f us per call\n", bytes, t / iters / 2 * 1e6);
        else if (rank == 0 && is_pp)
            printf("pingpong %d B: %.3f us one-way, %.1f MiB/s\n", bytes, t / iters / 2 * 1e6,
                   (double)bytes * iters * 2 / t / (1 << 20));
        else if (rank == 0)
            printf("allreduce %d B: %.3f us per call\n", bytes, t / iters * 1e6);
        fflush(stdout);
    }
    free(buf);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
