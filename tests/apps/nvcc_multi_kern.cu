// nvcc_multi_kern.cu — with nvcc_multi_main.cu: kernels in two sources, a template kernel in a
// namespace instantiated twice, a struct passed by value (tests/test_nvcc_programs.py).
namespace ops {
template <typename T> __global__ void scale(T *p, T f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] *= f;
}
struct Pair { int a; double b; };
__global__ void fill(Pair *out, Pair v, int n)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = v;
}
}
void run_scale(float *p, float f, int n) { ops::scale<float><<<(n + 63) / 64, 64>>>(p, f, n); }
void run_scale(int *p, int f, int n) { ops::scale<<<(n + 63) / 64, 64>>>(p, f, n); }
void run_fill(ops::Pair *o, ops::Pair v, int n) { ops::fill<<<1, 32>>>(o, v, n); }
