// managed.cu — managed memory: a cudaMallocManaged array the host writes and reads directly, and a
// __managed__ variable a kernel accumulates into and the host reads after cudaDeviceSynchronize.
#include "common.cuh"

__managed__ unsigned long long msum;

__global__ void square_add(unsigned *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        a[i] = (a[i] * a[i] + 1u) % 65521u;
        atomicAdd(&msum, (unsigned long long)a[i]);
    }
}

int main(int argc, char **argv)
{
    long steps, ms;
    parse_args(argc, argv, &steps, &ms);
    const int n = 500;
    unsigned *a;
    CHECK(cudaMallocManaged(&a, n * sizeof *a));
    static unsigned ref[n];
    for (int i = 0; i < n; i++)
        a[i] = ref[i] = (unsigned)i;
    msum = 0;
    unsigned long long ref_sum = 0;
    for (long k = 1; k <= steps; k++) {
        a[k % n] += 1; // host writes managed memory between kernels
        ref[k % n] += 1;
        square_add<<<(n + 127) / 128, 128>>>(a, n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < n; i++) {
            ref[i] = (ref[i] * ref[i] + 1u) % 65521u;
            ref_sum += ref[i];
        }
        if (msum != ref_sum) {
            fprintf(stderr, "managed: FAIL: step %ld: msum %llu, expected %llu\n", k, msum,
                    ref_sum);
            return 1;
        }
        step_done(k, ms);
    }
    for (int i = 0; i < n; i++)
        if (a[i] != ref[i]) {
            fprintf(stderr, "managed: FAIL: a[%d] = %u, expected %u\n", i, a[i], ref[i]);
            return 1;
        }
    printf("DONE managed msum=%llu\n", msum);
    CHECK(cudaFree(a));
    return 0;
}
