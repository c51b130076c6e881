// symbols.cu — __constant__ and __device__ variables: coefficients set with cudaMemcpyToSymbol each
// step, a device table with an initial value, and a device counter, read back with
// cudaMemcpyFromSymbol. Their values live in device memory (saved at a checkpoint).
#include "common.cuh"

#define N 256

__constant__ unsigned coef[2];
__device__ unsigned table[N] = {1, 2, 3, 4, 5, 6, 7, 8};
__device__ unsigned long long counter = 1000;

__global__ void update(int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        table[i] = table[i] * coef[0] + coef[1];
        atomicAdd(&counter, (unsigned long long)(table[i] & 0xffu));
    }
}

int main(int argc, char **argv)
{
    long steps, ms;
    parse_args(argc, argv, &steps, &ms);
    unsigned ref[N] = {1, 2, 3, 4, 5, 6, 7, 8};
    unsigned long long ref_counter = 1000;
    for (long k = 1; k <= steps; k++) {
        unsigned c[2] = {(unsigned)(3 + k % 5), (unsigned)k};
        CHECK(cudaMemcpyToSymbol(coef, c, sizeof c));
        update<<<N / 64, 64>>>(N);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < N; i++) {
            ref[i] = ref[i] * c[0] + c[1];
            ref_counter += ref[i] & 0xffu;
        }
        step_done(k, ms);
    }
    unsigned got[N];
    unsigned long long got_counter = 0;
    CHECK(cudaMemcpyFromSymbol(got, table, sizeof got));
    CHECK(cudaMemcpyFromSymbol(&got_counter, counter, sizeof got_counter));
    size_t size = 0;
    void *addr = nullptr;
    CHECK(cudaGetSymbolSize(&size, table));
    CHECK(cudaGetSymbolAddress(&addr, table));
    if (size != sizeof got || !addr) {
        fprintf(stderr, "symbols: FAIL: table size %zu address %p\n", size, addr);
        return 1;
    }
    for (int i = 0; i < N; i++)
        if (got[i] != ref[i]) {
            fprintf(stderr, "symbols: FAIL: table[%d] = %u, expected %u\n", i, got[i], ref[i]);
            return 1;
        }
    if (got_counter != ref_counter) {
        fprintf(stderr, "symbols: FAIL: counter %llu, expected %llu\n", got_counter, ref_counter);
        return 1;
    }
    printf("DONE symbols counter=%llu table[7]=%u\n", got_counter, got[7]);
    return 0;
}
