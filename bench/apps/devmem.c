/* devmem: SIZE MiB of incompressible device memory on the sim, then ticks until killed; with a
 * LAUNCHES argument it first launches that many trivial kernels (the registry must not grow). */
#define _DEFAULT_SOURCE
#include "../../examples/common.h"
#include "crac_sim.h"

#include <stdint.h>
#include <unistd.h>

CRAC_SIM_KERNEL(nothing, (int, unused))
{
    (void)ctx;
    (void)unused;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;
    long launches = argc > 2 ? atol(argv[2]) : 0;
    size_t bytes = mib << 20;
    uint64_t *host = malloc(bytes), x = 88172645463325252ULL;
    void *dev;
    if (!host)
        return 1;
    for (size_t i = 0; i < bytes / 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        host[i] = x;
    }
    CHECK(cudaMalloc(&dev, bytes));
    CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    free(host);
    int zero = 0;
    void *args[] = {&zero};
    for (long i = 0; i < launches; i++)
        CHECK(cudaLaunchKernel((const void *)nothing, dim3_of(1), dim3_of(1), args, 0, NULL));
    CHECK(cudaDeviceSynchronize());
    printf("ready\n");
    fflush(stdout);
    for (long t = 0;; t++) {
        usleep(100000);
        printf("tick %ld\n", t);
        fflush(stdout);
    }
}
