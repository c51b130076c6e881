// reduce.cu — a shared-memory tree reduction with __syncthreads() and atomicAdd: each step
// advances every element by an LCG and adds the blocks' sums into a device-side total. The
// partial sums are dynamic shared memory (extern __shared__, the launch's third argument); a
// static __shared__ counter of odd values is updated with shared-memory atomics.
#include "common.cuh"

#define BLOCK 128

__device__ unsigned lcg(unsigned v) { return v * 1103515245u + 12345u; }

__global__ void advance_and_sum(unsigned *data, int n, unsigned long long *total,
                                unsigned long long *odd)
{
    extern __shared__ unsigned partial[];
    __shared__ unsigned odd_here;
    if (threadIdx.x == 0)
        odd_here = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = 0;
    if (i < n) {
        v = lcg(data[i]);
        data[i] = v;
    }
    partial[threadIdx.x] = v & 0xffffu;
    if (i < n && (v & 1u))
        atomicAdd(&odd_here, 1u);
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(total, (unsigned long long)partial[0]);
        atomicAdd(odd, (unsigned long long)odd_here);
    }
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
    CHECK(cudaMalloc(&total, 2 * sizeof *total)); // [0]: sum, [1]: odd values
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(total, 0, 2 * sizeof *total));
    unsigned long long ref = 0, ref_odd = 0;
    for (long k = 1; k <= steps; k++) {
        advance_and_sum<<<(n + BLOCK - 1) / BLOCK, BLOCK, BLOCK * sizeof(unsigned)>>>(d, n, total,
                                                                                 total + 1);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < n; i++) {
            h[i] = h[i] * 1103515245u + 12345u;
            ref += h[i] & 0xffffu;
            ref_odd += h[i] & 1u;
        }
        step_done(k, ms);
    }
    unsigned long long got[2] = {0, 0};
    CHECK(cudaMemcpy(got, total, sizeof got, cudaMemcpyDeviceToHost));
    if (got[0] != ref || got[1] != ref_odd) {
        fprintf(stderr, "reduce: FAIL: total %llu odd %llu, expected %llu %llu\n", got[0], got[1],
                ref, ref_odd);
        return 1;
    }
    printf("DONE reduce total=%llu odd=%llu\n", got[0], got[1]);
    return 0;
}
