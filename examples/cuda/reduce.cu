// reduce.cu — a shared-memory tree reduction with __syncthreads() and atomicAdd: each step
// advances every element by an LCG and adds the blocks' sums into a device-side total.
#include "common.cuh"

#define BLOCK 128

__device__ unsigned lcg(unsigned v) { return v * 1103515245u + 12345u; }

__global__ void advance_and_sum(unsigned *data, int n, unsigned long long *total)
{
    __shared__ unsigned partial[BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = 0;
    if (i < n) {
        v = lcg(data[i]);
        data[i] = v;
    }
    partial[threadIdx.x] = v & 0xffffu;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(total, (unsigned long long)partial[0]);
}

int main(int argc, char **argv)
{
    long steps, ms;
    parse_args(argc, argv, &steps, &ms);
    const int n = 3000;
    static unsigned h[n];
    for (int i = 0; i < n; i++)
        h[i] = (unsigned)i;
    unsigned *d;
    unsigned long long *total;
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaMalloc(&total, sizeof *total));
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(total, 0, sizeof *total));
    unsigned long long ref = 0;
    for (long k = 1; k <= steps; k++) {
        advance_and_sum<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(d, n, total);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < n; i++) {
            h[i] = h[i] * 1103515245u + 12345u;
            ref += h[i] & 0xffffu;
        }
        step_done(k, ms);
    }
    unsigned long long got = 0;
    CHECK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
    if (got != ref) {
        fprintf(stderr, "reduce: FAIL: total %llu, expected %llu\n", got, ref);
        return 1;
    }
    printf("DONE reduce total=%llu\n", got);
    return 0;
}
