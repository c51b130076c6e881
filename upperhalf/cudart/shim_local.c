/* shim_local.c — entry points the shim answers without crossing: error names and strings (pure;
 * they live in upper memory, so pointers the program keeps stay valid across a restart), the
 * runtime version (the runtime is this shim), nvcc's per-thread launch configuration (it holds
 * virtual stream handles), and the crac_sim_debug_* entries the tests use. */
#include "shim.h"

#include "cudart_sim_api.h"

#include <stddef.h>

const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
    return sim_cudaGetErrorString(error);
}

const char *CUDARTAPI cudaGetErrorName(cudaError_t error) { return sim_cudaGetErrorName(error); }

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return shim_fail(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

#define CONFIG_DEPTH 8
struct call_config {
    dim3 grid, block;
    size_t shared;
    struct CUstream_st *stream;
};
static __thread struct call_config config_stack[CONFIG_DEPTH];
static __thread int config_depth;

unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream)
{
    if (config_depth >= CONFIG_DEPTH)
        return 1;
    config_stack[config_depth++] = (struct call_config){gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                                 void *stream)
{
    if (config_depth == 0)
        return shim_fail(cudaErrorMissingConfiguration);
    struct call_config c = config_stack[--config_depth];
    if (gridDim)
        *gridDim = c.grid;
    if (blockDim)
        *blockDim = c.block;
    if (sharedMem)
        *sharedMem = c.shared;
    if (stream)
        *(struct CUstream_st **)stream = c.stream;
    return cudaSuccess;
}

/* ---- debug entries (exported under the CRAC_SIM_1 version node) ---- */

static uint64_t debug_cross(const char *name, uint64_t arg)
{
    void *fn = shim_resolve(name);
    return fn ? cross_call(fn, arg, 0, 0) : 0;
}

/* Address of the calling thread's last-error variable in the lower half. */
void *crac_sim_debug_tls(void);
void *crac_sim_debug_tls(void) { return (void *)(uintptr_t)debug_cross("crac_sim_debug_tls", 0); }

/* Blocks inside the lower half until a signal handler ran (-EINTR) or timeout_ms passed (0). */
long crac_sim_debug_block_signal(long timeout_ms);
long crac_sim_debug_block_signal(long timeout_ms)
{
    return (long)debug_cross("crac_sim_debug_block_signal", (uint64_t)timeout_ms);
}

/* The backend's sim version (1, 2), 0 when not under crac. */
int crac_sim_version(void);
int crac_sim_version(void) { return (int)debug_cross("crac_sim_version", 0); }
