/* common.h — error checking shared by the examples: every CUDA call is checked, and a failure
 * prints the call, the error name and string, and exits 1. */
#ifndef EXAMPLES_COMMON_H
#define EXAMPLES_COMMON_H

#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t check_err_ = (call);                                                           \
        if (check_err_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorName(check_err_), cudaGetErrorString(check_err_));                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline dim3 dim3_of(unsigned x)
{
    dim3 d = {x, 1, 1};
    return d;
}

#endif
