/* mpi_gpu.c — a self-checking GPU + MPI rank: each rank keeps an array in device memory that a
   kernel updates every step (d[i] = (3 d[i] + k + rank + i) mod P, the CUDA runtime; the sim
   device under crac), copies it back, and the ranks MPI_Allreduce their device results; every
   rank recomputes all ranks' arrays on the host to check. A pause per step with a message in
   flight. Rank 0 prints `step N` and DONE (checksum). Build: mpicc with the CUDA headers and
   crac's sim libcudart.so.13 (tests/test_mpi.py). */
#define PROG "mpi_gpu"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "../ckpt_common.h"
#include "crac_sim.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdint.h>

#define N 256
#define P 1000003

CRAC_SIM_KERNEL(step_kernel, (int *, d), (int, k), (int, rank), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        d[i] = (int)(((long)d[i] * 3 + k + rank + i) % P);
}

static void check(int ok, const char *what, long step)
{
    if (!ok) {
        fprintf(stderr, PROG ": FAIL: %s at step %ld\n", what, step);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, PROG ": FAIL: %s: %s\n", what, cudaGetErrorString(e));
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 40, 1, 1000000);
    long ms = arg(argc, argv, 2, 50, 0, 10000);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *d = NULL;
    cuda_ok(cudaMalloc((void **)&d, N * sizeof(int)), "cudaMalloc");
    cuda_ok(cudaMemset(d, 0, N * sizeof(int)), "cudaMemset");
    static int host[N], sum[N], model[16][N];
    check(size <= 16, "too many ranks", 0);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        int n = N, kk = (int)k;
        void *args[] = {&d, &kk, &rank, &n};
        dim3 block = {64, 1, 1}, grid = {N / 64, 1, 1};
        cuda_ok(cudaLaunchKernel((const void *)step_kernel, grid, block, args, 0, NULL), "launch");
        cuda_ok(cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost), "cudaMemcpy");
        MPI_Allreduce(host, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int r = 0; r < size; r++)
            for (int i = 0; i < N; i++)
                model[r][i] = (int)(((long)model[r][i] * 3 + k + r + i) % P);
        for (int i = 0; i < N; i++) {
            long want = 0;
            for (int r = 0; r < size; r++)
                want += model[r][i];
            check(host[i] == model[rank][i], "device result", k);
            check(sum[i] == (int)want, "Allreduce of device results", k);
            h = (h ^ (uint64_t)sum[i]) * 0x100000001b3ULL;
        }
        if (rank == 0)
            step_line(k);
        long late = k + rank, got = -1;
        MPI_Send(&late, 1, MPI_LONG, right, 3, MPI_COMM_WORLD);
        if (ms) {
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
        MPI_Recv(&got, 1, MPI_LONG, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(got == k + left, "late message", k);
    }
    cuda_ok(cudaFree(d), "cudaFree");
    if (rank == 0) {
        printf("DONE checksum=%016llx steps=%ld ranks=%d\n", (unsigned long long)h, steps, size);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
