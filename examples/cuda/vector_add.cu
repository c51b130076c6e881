// vector_add.cu — the plain nvcc vector add, run for STEPS steps: x = x + y each step (integer
// arithmetic, so the result is exact), checked against the CPU at the end.
#include "common.cuh"

__global__ void vadd(const unsigned *x, const unsigned *y, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = x[i] + y[i];
}

int main(int argc, char **argv)
{
    long steps, ms;
    parse_args(argc, argv, &steps, &ms);
    const int n = 1000;
    unsigned hx[n], hy[n], ref[n];
    for (int i = 0; i < n; i++) {
        hx[i] = ref[i] = (unsigned)i * 7u;
        hy[i] = (unsigned)i * 3u + 1u;
    }
    unsigned *x, *y, *t;
    CHECK(cudaMalloc(&x, sizeof hx));
    CHECK(cudaMalloc(&y, sizeof hy));
    CHECK(cudaMalloc(&t, sizeof hx));
    CHECK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(y, hy, sizeof hy, cudaMemcpyHostToDevice));
    for (long k = 1; k <= steps; k++) {
        vadd<<<(n + 255) / 256, 256>>>(x, y, t, n);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(x, t, sizeof hx, cudaMemcpyDeviceToDevice));
        for (int i = 0; i < n; i++)
            ref[i] += hy[i];
        step_done(k, ms);
    }
    CHECK(cudaMemcpy(hx, x, sizeof hx, cudaMemcpyDeviceToHost));
    unsigned long long sum = 0;
    for (int i = 0; i < n; i++) {
        if (hx[i] != ref[i]) {
            fprintf(stderr, "vector_add: FAIL: x[%d] = %u, expected %u\n", i, hx[i], ref[i]);
            return 1;
        }
        sum += hx[i];
    }
    printf("DONE vector_add sum=%llu\n", sum);
    return 0;
}
