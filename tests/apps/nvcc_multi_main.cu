// nvcc_multi_main.cu — the host side and one kernel of a two-source nvcc program; prints OK when
// every kernel (from both sources) computed the expected values.
#include <cstdio>
namespace ops { struct Pair { int a; double b; }; }
void run_scale(float *p, float f, int n);
void run_scale(int *p, int f, int n);
void run_fill(ops::Pair *o, ops::Pair v, int n);
__global__ void iota(int *p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = i; }
int main()
{
    const int n = 300;
    int *pi; float *pf; ops::Pair *pp;
    cudaMalloc(&pi, n * sizeof(int)); cudaMalloc(&pf, n * sizeof(float)); cudaMalloc(&pp, n * sizeof(ops::Pair));
    iota<<<(n + 127) / 128, 128>>>(pi, n);
    run_scale(pi, 3, n);
    float hf[n]; for (int i = 0; i < n; i++) hf[i] = i * 0.5f;
    cudaMemcpy(pf, hf, sizeof hf, cudaMemcpyHostToDevice);
    run_scale(pf, 2.0f, n);
    run_fill(pp, ops::Pair{7, 2.5}, n);
    int hi[n]; ops::Pair hp[n];
    cudaMemcpy(hi, pi, sizeof hi, cudaMemcpyDeviceToHost);
    cudaMemcpy(hf, pf, sizeof hf, cudaMemcpyDeviceToHost);
    cudaMemcpy(hp, pp, sizeof hp, cudaMemcpyDeviceToHost);
    int ok = cudaGetLastError() == cudaSuccess;
    for (int i = 0; i < n; i++) ok &= hi[i] == 3 * i && hf[i] == i * 1.0f && hp[i].a == 7 && hp[i].b == 2.5;
    printf("%s\n", ok ? "OK" : "FAIL");
    return !ok;
}
