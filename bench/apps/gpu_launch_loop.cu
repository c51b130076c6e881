// gpu_launch_loop N: launches an empty kernel N times on the default stream, synchronises, and
// prints `launches N seconds S` (its own clock, so start-up is not counted). For bench/gpu_check.py:
// the cost of the crossing on a launch-heavy loop, natively and under crac.
#include <cstdio>
#include <cstdlib>
#include <ctime>

__global__ void nothing(int *p)
{
    if (p)
        *p = 1;
}

static double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], nullptr, 10) : 100000;
    nothing<<<1, 1>>>(nullptr); // context and module creation are not timed
    if (cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "gpu_launch_loop: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    double t0 = now();
    for (long i = 0; i < n; i++)
        nothing<<<1, 1>>>(nullptr);
    cudaError_t e = cudaDeviceSynchronize();
    double t1 = now();
    if (e != cudaSuccess) {
        fprintf(stderr, "gpu_launch_loop: %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("launches %ld seconds %.6f\n", n, t1 - t0);
    return 0;
}
