/* mpi_gpu.c — a self-checking GPU + MPI rank: each rank keeps an array in device memory that a
   kernel updates every step (d[i] = (3 d[i] + k + rank + i) mod P, the CUDA runtime; the sim
   device under crac), copies it back, and the ranks MPI_Allreduce their device results; every
   rank recomputes all ranks' arrays on the host to check. A pause per step with a message in
   flight. Rank 0 prints `step N` and DONE (checksum). Build: mpicc with the CUDA headers and
   crac's sim libcudart.so.13 (tests/test_mpi.py). */
#define PROG "mpi_gpu"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"
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

static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, PROG ": FAIL: %s: %s\n", what, cudaGetErrorString(e));
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
}

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 50, 10000, MPI_INIT_PLAIN);
    int *d = NULL;
    cuda_ok(cudaMalloc((void **)&d, N * sizeof(int)), "cudaMalloc");
    cuda_ok(cudaMemset(d, 0, N * sizeof(int)), "cudaMemset");
    static int host[N], sum[N], model[16][N];
    check(size <= 16, "too many ranks", 0);
    uint64_t h = CKPT_FNV_BASIS;
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
        late_message(k, 1, 3);
    }
    cuda_ok(cudaFree(d), "cudaFree");
    mpi_done(h);
    MPI_Finalize();
    return 0;
}
