/* sim_dlopen: loads a library that imports an unsupported CUDA function. With RTLD_NOW ("now")
   dlopen fails and dlerror names the function; with RTLD_LAZY ("lazy") the call itself makes ld.so
   stop the program with "symbol lookup error: ... undefined symbol: cudaIpcGetMemHandle" (exit 127). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = 0;
    cudaGetDeviceCount(&n);
    int lazy = strcmp(argv[2], "lazy") == 0;
    void *lib = dlopen(argv[1], lazy ? RTLD_LAZY : RTLD_NOW);
    if (!lib) {
        printf("dlopen failed: %s\n", dlerror());
        return 0;
    }
    int (*try_graph)(void) = (int (*)(void))(uintptr_t)dlsym(lib, "try_graph");
    fflush(stdout);
    printf("try_graph returned %d\n", try_graph());
    return 0;
}
