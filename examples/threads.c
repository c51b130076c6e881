/* threads.c — 4 host threads, each driving its own stream: device memory, a memset, a kernel and
 * copies back, ROUNDS rounds each (argv[2], default 20); every thread verifies its own results and its last error.
 * Usage: threads [N] */
#define _POSIX_C_SOURCE 200809L
#include "common.h"
#include "crac_sim.h"

#include <pthread.h>

#define NTHREADS 4
static int rounds = 20; /* argv[2] */

CRAC_SIM_KERNEL(fill, (int *, x), (int, n), (int, seed))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        x[i] += i * seed + 1;
}

struct job {
    int id, n;
    long long sum;
    int ok;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    cudaStream_t s;
    int *d, *h;
    size_t bytes = (size_t)j->n * sizeof(int);
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc((void **)&d, bytes));
    CHECK(cudaMallocHost((void **)&h, bytes));
    dim3 block = dim3_of(64), grid = dim3_of((unsigned)((j->n + 63) / 64));
    j->ok = 1;
    for (int r = 0; r < rounds && j->ok; r++) {
        int seed = j->id * 100 + r;
        CHECK(cudaMemsetAsync(d, 0, bytes, s));
        void *args[] = {&d, &j->n, &seed};
        CHECK(cudaLaunchKernel((const void *)fill, grid, block, args, 0, s));
        CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        for (int i = 0; i < j->n; i++) {
            if (h[i] != i * seed + 1) {
                fprintf(stderr, "threads: thread %d round %d: x[%d] = %d, expected %d\n", j->id, r,
                        i, h[i], i * seed + 1);
                j->ok = 0;
                break;
            }
            j->sum += h[i];
        }
    }
    if (cudaGetLastError() != cudaSuccess)
        j->ok = 0;
    CHECK(cudaFreeHost(h));
    CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(s));
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    if (argc > 2)
        rounds = atoi(argv[2]);
    if (n <= 0 || n > (1 << 20) || rounds <= 0) {
        fprintf(stderr, "usage: threads [N <= 2^20] [ROUNDS]\n");
        return 2;
    }
    pthread_t t[NTHREADS];
    struct job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (struct job){i, n, 0, 0};
        if (pthread_create(&t[i], NULL, worker, &jobs[i]) != 0)
            return 1;
    }
    long long total = 0;
    int ok = 1;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        ok &= jobs[i].ok;
        total += jobs[i].sum;
    }
    if (!ok)
        return 1;
    printf("threads: threads=%d rounds=%d n=%d checksum=%lld OK\n", NTHREADS, rounds, n, total);
    return 0;
}
