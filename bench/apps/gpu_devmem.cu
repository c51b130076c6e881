// gpu_devmem GIB TICK_MS: fills GIB GiB of device memory with a kernel (a function of the index),
// times its own cudaMemcpy of all of it to pinned host memory and back (`memcpy d2h S h2d S`: the
// baseline for crac's device-state save and restore), prints `ready`, then `tick N` every TICK_MS
// ms; on SIGUSR1 it checks every word on the device and prints `check ok` or `check FAIL`.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>

__global__ void fill(uint64_t *p, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = i * 0x9e3779b97f4a7c15ULL + 1;
}

__global__ void verify(const uint64_t *p, uint64_t n, unsigned long long *bad)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        if (p[i] != i * 0x9e3779b97f4a7c15ULL + 1)
            atomicAdd(bad, 1ULL);
}

static double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile sig_atomic_t check_requested;
static void on_usr1(int) { check_requested = 1; }

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "gpu_devmem: %s: %s\n", #call, cudaGetErrorString(e_));               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    long gib = argc > 1 ? strtol(argv[1], nullptr, 10) : 8;
    long tick_ms = argc > 2 ? strtol(argv[2], nullptr, 10) : 100;
    uint64_t bytes = (uint64_t)gib << 30, n = bytes / 8;
    uint64_t *dev;
    CHECK(cudaMalloc(&dev, bytes));
    fill<<<1024, 256>>>(dev, n);
    CHECK(cudaDeviceSynchronize());
    // The baseline: the same bytes through cudaMemcpy, in 256 MiB pieces via one pinned buffer.
    const uint64_t piece = 256ULL << 20;
    void *host;
    CHECK(cudaMallocHost(&host, piece));
    double t0 = now();
    for (uint64_t off = 0; off < bytes; off += piece)
        CHECK(cudaMemcpy(host, (char *)dev + off, piece, cudaMemcpyDeviceToHost));
    double t1 = now();
    for (uint64_t off = 0; off < bytes; off += piece)
        CHECK(cudaMemcpy((char *)dev + off, host, piece, cudaMemcpyHostToDevice));
    double t2 = now();
    fill<<<1024, 256>>>(dev, n); // the copies back overwrote it: make it the pattern again
    CHECK(cudaDeviceSynchronize());
    printf("memcpy d2h %.3f h2d %.3f\nready\n", t1 - t0, t2 - t1);
    fflush(stdout);
    signal(SIGUSR1, on_usr1);
    unsigned long long *bad;
    CHECK(cudaHostAlloc(&bad, sizeof *bad, cudaHostAllocMapped)); // the device writes it in place
    for (long k = 1;; k++) {
        usleep((useconds_t)tick_ms * 1000);
        if (check_requested) {
            check_requested = 0;
            *bad = 0;
            verify<<<1024, 256>>>(dev, n, bad);
            CHECK(cudaDeviceSynchronize());
            printf("check %s\n", *bad ? "FAIL" : "ok");
        }
        printf("tick %ld\n", k);
        fflush(stdout);
    }
}
