/* sim_unsupported: imports a CUDA function crac does not support (cudaIpcGetMemHandle); linked
   against NVIDIA's libcudart.so.13, so the import is in its dynamic symbol table. `crac launch`
   must refuse it (exit 2) and name the function. */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int n = 0;
    cudaGetDeviceCount(&n);
    if (argc > 1 && strcmp(argv[1], "graph") == 0) {
        cudaIpcMemHandle_t h;
        cudaIpcGetMemHandle(&h, NULL);
    }
    printf("devices: %d\n", n);
    return 0;
}
