/* multistream.c — a pipeline over 4 streams: each copies its chunk in (pinned memory), runs a
 * kernel, copies it out, timed with events; a fifth stream waits for all of them
 * (cudaStreamWaitEvent) and reduces every chunk on the device. Verifies the output and the sum;
 * per-stream times (cudaEventElapsedTime) go to stderr. Usage: multistream [CHUNK] */
#include "common.h"
#include "crac_sim.h"

#define NSTREAMS 4

CRAC_SIM_KERNEL(scale_add, (const double *, x), (double *, y), (double, a), (double, b), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        y[i] = a * x[i] + b;
}

/* One thread sums everything, in order, so the result is deterministic. */
CRAC_SIM_KERNEL(reduce, (const double *, y), (int, n), (double *, out))
{
    if (ctx->blockIdx.x == 0 && ctx->threadIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += y[i];
        *out = s;
    }
}

int main(int argc, char **argv)
{
    int chunk = argc > 1 ? atoi(argv[1]) : 1 << 18;
    if (chunk <= 0 || chunk > (1 << 22)) {
        fprintf(stderr, "usage: multistream [CHUNK <= 2^22]\n");
        return 2;
    }
    int n = chunk * NSTREAMS;
    size_t bytes = (size_t)n * sizeof(double);
    double *h_x, *h_y, *d_x, *d_y, *d_sum, h_sum = 0;
    CHECK(cudaHostAlloc((void **)&h_x, bytes, cudaHostAllocDefault));
    CHECK(cudaHostAlloc((void **)&h_y, bytes, cudaHostAllocDefault));
    CHECK(cudaMalloc((void **)&d_x, bytes));
    CHECK(cudaMalloc((void **)&d_y, bytes));
    CHECK(cudaMalloc((void **)&d_sum, sizeof(double)));
    for (int i = 0; i < n; i++)
        h_x[i] = (double)(i % 1000) * 0.5;

    cudaStream_t streams[NSTREAMS], merge;
    cudaEvent_t start[NSTREAMS], stop[NSTREAMS];
    for (int s = 0; s < NSTREAMS; s++) {
        CHECK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
        CHECK(cudaEventCreate(&start[s]));
        CHECK(cudaEventCreate(&stop[s]));
    }
    CHECK(cudaStreamCreate(&merge));

    dim3 block = dim3_of(128), grid = dim3_of((unsigned)((chunk + 127) / 128));
    for (int s = 0; s < NSTREAMS; s++) {
        size_t off = (size_t)s * chunk;
        double a = 2.0, b = (double)s;
        double *x = d_x + off, *y = d_y + off;
        CHECK(cudaEventRecord(start[s], streams[s]));
        CHECK(cudaMemcpyAsync(x, h_x + off, chunk * sizeof(double), cudaMemcpyHostToDevice,
                              streams[s]));
        void *args[] = {&x, &y, &a, &b, &chunk};
        CHECK(cudaLaunchKernel((const void *)scale_add, grid, block, args, 0, streams[s]));
        CHECK(cudaMemcpyAsync(h_y + off, y, chunk * sizeof(double), cudaMemcpyDeviceToHost,
                              streams[s]));
        CHECK(cudaEventRecord(stop[s], streams[s]));
        CHECK(cudaStreamWaitEvent(merge, stop[s], 0));
    }
    void *rargs[] = {&d_y, &n, &d_sum};
    CHECK(cudaLaunchKernel((const void *)reduce, dim3_of(1), dim3_of(1), rargs, 0, merge));
    CHECK(cudaMemcpyAsync(&h_sum, d_sum, sizeof(double), cudaMemcpyDeviceToHost, merge));
    CHECK(cudaStreamSynchronize(merge));

    double expect_sum = 0;
    for (int s = 0; s < NSTREAMS; s++) {
        float ms = 0;
        CHECK(cudaEventSynchronize(stop[s]));
        CHECK(cudaEventElapsedTime(&ms, start[s], stop[s]));
        fprintf(stderr, "multistream: stream %d took %.3f ms\n", s, ms);
        for (int i = 0; i < chunk; i++) {
            size_t k = (size_t)s * chunk + i;
            double want = 2.0 * h_x[k] + (double)s;
            if (h_y[k] != want) {
                fprintf(stderr, "multistream: y[%zu] = %f, expected %f\n", k, h_y[k], want);
                return 1;
            }
            expect_sum += want;
        }
    }
    if (h_sum != expect_sum) {
        fprintf(stderr, "multistream: device sum %.6f, expected %.6f\n", h_sum, expect_sum);
        return 1;
    }
    for (int s = 0; s < NSTREAMS; s++) {
        CHECK(cudaStreamDestroy(streams[s]));
        CHECK(cudaEventDestroy(start[s]));
        CHECK(cudaEventDestroy(stop[s]));
    }
    CHECK(cudaStreamDestroy(merge));
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_y));
    CHECK(cudaFree(d_sum));
    CHECK(cudaFreeHost(h_x));
    CHECK(cudaFreeHost(h_y));
    printf("multistream: streams=%d n=%d checksum=%.6f OK\n", NSTREAMS, n, h_sum);
    return 0;
}
