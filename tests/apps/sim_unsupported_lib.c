/* sim_unsupported_lib: a library that calls an unsupported CUDA function (cudaIpcGetMemHandle),
   linked against NVIDIA's libcudart.so.13; sim_dlopen loads it behind preflight's back. */
#include <cuda_runtime_api.h>

int try_graph(void);

int try_graph(void)
{
    cudaIpcMemHandle_t h;
    return (int)cudaIpcGetMemHandle(&h, NULL);
}
