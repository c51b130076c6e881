/* sim_errstr.c — cudaGetErrorName / cudaGetErrorString for the errors the sim can return. Pure
 * data and code: also compiled into the upper shim, where the strings live in upper memory. */
#include <cuda_runtime_api.h>

#include <stddef.h>

#include "cudart_sim_api.h"

#define ERRORS(X)                                                                                  \
    X(cudaSuccess, "no error")                                                                     \
    X(cudaErrorInvalidValue, "invalid argument")                                                   \
    X(cudaErrorMemoryAllocation, "out of memory")                                                  \
    X(cudaErrorInitializationError, "initialization error")                                        \
    X(cudaErrorMissingConfiguration, "__global__ function call is not configured")                 \
    X(cudaErrorInvalidConfiguration, "invalid configuration argument")                             \
    X(cudaErrorInvalidSymbol, "invalid device symbol")                                             \
    X(cudaErrorInvalidDevicePointer, "invalid device pointer")                                     \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                        \
    X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version") \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                     \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                            \
    X(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device") \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                   \
    X(cudaErrorNotReady, "device not ready")                                                       \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                         \
    X(cudaErrorLaunchOutOfResources, "too many resources requested for launch")                    \
    X(cudaErrorLaunchFailure, "unspecified launch failure")                                        \
    X(cudaErrorInvalidDeviceFunction, "invalid device function")                                   \
    X(cudaErrorHostMemoryAlreadyRegistered,                                                        \
      "part or all of the requested memory range is already mapped")                               \
    X(cudaErrorHostMemoryNotRegistered,                                                            \
      "pointer does not correspond to a registered memory region")                                 \
    X(cudaErrorNotSupported, "operation not supported")                                            \
    X(cudaErrorUnknown, "unknown error")

#define UNRECOGNIZED "unrecognized error code"

const char *sim_cudaGetErrorName(cudaError_t error)
{
#define NAME_CASE(e, s)                                                                            \
    case e: return #e;
    switch (error) {
        ERRORS(NAME_CASE)
    default: return UNRECOGNIZED;
    }
#undef NAME_CASE
}

const char *sim_cudaGetErrorString(cudaError_t error)
{
#define STRING_CASE(e, s)                                                                          \
    case e: return s;
    switch (error) {
        ERRORS(STRING_CASE)
    default: return UNRECOGNIZED;
    }
#undef STRING_CASE
}
