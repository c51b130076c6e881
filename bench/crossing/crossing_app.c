/* crossing_app.c — times trivial CUDA calls: cudaGetLastError, and cudaStreamQuery on an idle
 * stream, N each after a warm-up; prints nanoseconds per call. Usage: crossing_app [N] */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
        fprintf(stderr, "crossing_app: cannot create a stream\n");
        return 1;
    }
    long bad = 0;
    for (long i = 0; i < n / 10 + 1; i++) /* warm-up: lookups cached, TCB borrowed */
        bad += cudaGetLastError() != cudaSuccess || cudaStreamQuery(s) != cudaSuccess;
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        bad += cudaGetLastError() != cudaSuccess;
    double t1 = now_ns();
    for (long i = 0; i < n; i++)
        bad += cudaStreamQuery(s) != cudaSuccess;
    double t2 = now_ns();
    cudaStreamDestroy(s);
    if (bad) {
        fprintf(stderr, "crossing_app: %ld calls failed\n", bad);
        return 1;
    }
    printf("cudaGetLastError %.1f\ncudaStreamQuery %.1f\n", (t1 - t0) / n, (t2 - t1) / n);
    return 0;
}
