/* crac_kernels_abi.h — the interface between crac's sim and a kernels library built by
 * `crac kernels app.cu -o app.kernels.so` (docs/SIM.md "Programs built by nvcc"). C, shared by both. */
#ifndef CRAC_KERNELS_ABI_H
#define CRAC_KERNELS_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <vector_types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRAC_KERNELS_ABI 1
#define CRAC_KERNEL_MAX_PARAMS 32
/* The symbol the sim looks up in the library. */
#define CRAC_KERNELS_TABLE_SYMBOL "crac_kernels_table"

/* One __global__ function: nvcc's device name for it (the Itanium-mangled name, as
 * __cudaRegisterFunction passes it), its parameters' sizes and alignments (the sim copies the
 * arguments at launch, as a driver does), and a thunk calling it with args[i] -> parameter i. */
struct crac_kernel_entry {
    const char *name;
    const char *pretty; /* demangled, for messages */
    void (*call)(void **args);
    uint32_t n_params;
    uint32_t param_size[CRAC_KERNEL_MAX_PARAMS];
    uint32_t param_align[CRAC_KERNEL_MAX_PARAMS];
};

struct crac_kernel_block {
    dim3 grid, block;
    uint3 block_idx;
    void *shared;       /* the launch's dynamic shared memory (extern __shared__), or NULL */
    size_t shared_size; /* its size: the launch's sharedMem */
};

enum { CRAC_KERNEL_OK = 0, CRAC_KERNEL_TRAP = 1, CRAC_KERNEL_NO_MEMORY = 2 };

struct crac_kernels_table {
    uint32_t abi; /* CRAC_KERNELS_ABI */
    uint32_t n;
    const struct crac_kernel_entry *const *entries;
    /* Runs every thread of one block (cooperatively: __syncthreads switches threads) on the
     * calling thread; returns CRAC_KERNEL_*. */
    int (*run_block)(const struct crac_kernel_entry *k, void **args,
                     const struct crac_kernel_block *b);
};

#ifdef __cplusplus
}
#endif

#endif
