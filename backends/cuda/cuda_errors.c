/* cuda_errors.c — the last error as a program sees it under the cuda backend: the runtime's own,
 * plus errors the upper shim detected itself (e.g. out of virtual handles), per thread. */
#include "cuda_bk.h"

/* Per thread of the program: the shadow lower TCB an upper thread borrows gives it its own copy. */
static __thread cudaError_t shim_error;

void cuda_bk_record_error(cudaError_t e)
{
    if (e != cudaSuccess)
        shim_error = e;
}

cudaError_t cudabk_cudaGetLastError(void)
{
    cudaError_t e = cuda_real.cudaGetLastError ? cuda_real.cudaGetLastError() : cudaSuccess;
    if (e == cudaSuccess)
        e = shim_error;
    shim_error = cudaSuccess;
    return e;
}

cudaError_t cudabk_cudaPeekAtLastError(void)
{
    cudaError_t e = cuda_real.cudaPeekAtLastError ? cuda_real.cudaPeekAtLastError() : cudaSuccess;
    return e != cudaSuccess ? e : shim_error;
}
