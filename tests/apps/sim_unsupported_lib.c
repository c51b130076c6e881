/* sim_unsupported_lib: a library that calls an unsupported CUDA function (cudaGraphCreate),
   linked against NVIDIA's libcudart.so.13; sim_dlopen loads it behind preflight's back. */
#include <cuda_runtime_api.h>

int try_graph(void);

int try_graph(void)
{
    cudaGraph_t g;
    return (int)cudaGraphCreate(&g, 0);
}
