/* vector_add.c — c = a + b on the device, repeated: a <- a + b for REPS rounds, so that
 * a[i] = i + REPS at the end. Prints a checksum and verifies every element.
 * Usage: vector_add [N] [REPS] */
#include "common.h"
#include "crac_sim.h"

CRAC_SIM_KERNEL(vec_add, (const float *, a), (const float *, b), (float *, c), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        c[i] = a[i] + b[i];
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 1;
    if (n <= 0 || reps <= 0 || n > (1 << 24)) {
        fprintf(stderr, "usage: vector_add [N <= 2^24] [REPS]\n");
        return 2;
    }
    size_t bytes = (size_t)n * sizeof(float);
    float *h_a, *h_b, *h_c, *d_a, *d_b, *d_c;
    CHECK(cudaMallocHost((void **)&h_a, bytes));
    CHECK(cudaMallocHost((void **)&h_b, bytes));
    CHECK(cudaMallocHost((void **)&h_c, bytes));
    for (int i = 0; i < n; i++) {
        h_a[i] = (float)i;
        h_b[i] = 1.0f;
    }
    CHECK(cudaMalloc((void **)&d_a, bytes));
    CHECK(cudaMalloc((void **)&d_b, bytes));
    CHECK(cudaMalloc((void **)&d_c, bytes));
    CHECK(cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice));

    dim3 block = dim3_of(256), grid = dim3_of((unsigned)((n + 255) / 256));
    for (int r = 0; r < reps; r++) {
        void *args[] = {&d_a, &d_b, &d_c, &n};
        CHECK(cudaLaunchKernel((const void *)vec_add, grid, block, args, 0, NULL));
        CHECK(cudaMemcpyAsync(d_a, d_c, bytes, cudaMemcpyDeviceToDevice, NULL));
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h_c, d_c, bytes, cudaMemcpyDeviceToHost));

    double checksum = 0;
    for (int i = 0; i < n; i++) {
        if (h_c[i] != (float)i + (float)reps) {
            fprintf(stderr, "vector_add: c[%d] = %f, expected %f\n", i, h_c[i],
                    (float)i + (float)reps);
            return 1;
        }
        checksum += h_c[i];
    }
    CHECK(cudaFree(d_a));
    CHECK(cudaFree(d_b));
    CHECK(cudaFree(d_c));
    CHECK(cudaFreeHost(h_a));
    CHECK(cudaFreeHost(h_b));
    CHECK(cudaFreeHost(h_c));
    CHECK(cudaGetLastError());
    printf("vector_add: n=%d reps=%d checksum=%.1f OK\n", n, reps, checksum);
    return 0;
}
