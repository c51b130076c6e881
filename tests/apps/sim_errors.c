/* sim_errors: CUDA error semantics on the sim — non-sticky errors returned and recorded for
   cudaGetLastError (which resets) / cudaPeekAtLastError (which does not), invalid pointers and
   handles, memory limits, pointer attributes, and sticky errors after faulting kernels until
   cudaDeviceReset. Prints one line per check group; exits 1 on the first failure. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include "crac_sim.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks;

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        cudaError_t got_ = (call);                                                                 \
        checks++;                                                                                  \
        if (got_ != (want)) {                                                                      \
            fprintf(stderr, "sim_errors:%d: %s returned %s, expected %s\n", __LINE__, #call,       \
                    cudaGetErrorName(got_), cudaGetErrorName(want));                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define TRUE(cond)                                                                                 \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "sim_errors:%d: %s is false\n", __LINE__, #cond);                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

CRAC_SIM_KERNEL(trap_kernel, (int *, x))
{
    if (ctx->blockIdx.x == 1 && ctx->threadIdx.x == 3)
        CRAC_SIM_TRAP(ctx);
    x[ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x] = 1;
}

CRAC_SIM_KERNEL(bounds_kernel, (int *, x), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    CRAC_SIM_CHECK(ctx, i < n);
    x[i] = i;
}

CRAC_SIM_KERNEL(nop_kernel, (int, unused)) { (void)unused; }

static dim3 d1(unsigned x)
{
    dim3 d = {x, 1, 1};
    return d;
}

static void last_error_semantics(void)
{
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
    EXPECT(cudaPeekAtLastError(), cudaErrorInvalidValue);
    EXPECT(cudaPeekAtLastError(), cudaErrorInvalidValue); /* peek does not reset */
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT(cudaGetLastError(), cudaSuccess); /* get does */
    EXPECT(cudaSetDevice(7), cudaErrorInvalidDevice);
    EXPECT(cudaSetDevice(0), cudaSuccess); /* success does not clear the last error */
    EXPECT(cudaGetLastError(), cudaErrorInvalidDevice);
    TRUE(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
    TRUE(strcmp(cudaGetErrorName(cudaErrorInvalidResourceHandle),
                "cudaErrorInvalidResourceHandle") == 0);
    TRUE(strcmp(cudaGetErrorString((cudaError_t)12345), "unrecognized error code") == 0);
    int n = -1, dev = -1, rt = 0;
    EXPECT(cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT(cudaGetDevice(&dev), cudaSuccess);
    EXPECT(cudaRuntimeGetVersion(&rt), cudaSuccess);
    TRUE(n == 1 && dev == 0 && rt == CUDART_VERSION);
    struct cudaDeviceProp prop;
    EXPECT(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    TRUE(prop.maxThreadsPerBlock == 1024 && prop.managedMemory == 1 && prop.warpSize == 32);
    EXPECT(cudaGetDeviceProperties(&prop, 1), cudaErrorInvalidDevice);
    EXPECT(cudaGetLastError(), cudaErrorInvalidDevice);
    printf("last error: ok\n");
}

static void pointers(void)
{
    int *d = NULL, *m = NULL, *h = NULL, local = 0;
    EXPECT(cudaMalloc((void **)&d, 4096), cudaSuccess);
    EXPECT(cudaMallocManaged((void **)&m, 4096, cudaMemAttachGlobal), cudaSuccess);
    EXPECT(cudaMallocHost((void **)&h, 4096), cudaSuccess);
    EXPECT(cudaFree((void *)0x1234000), cudaErrorInvalidDevicePointer);
    EXPECT(cudaFree(d + 1), cudaErrorInvalidDevicePointer); /* not the start of an allocation */
    EXPECT(cudaFree(h), cudaErrorInvalidDevicePointer);     /* pinned memory is cudaFreeHost's */
    EXPECT(cudaFreeHost(d), cudaErrorInvalidValue);
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(&local, h, sizeof(int), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT(cudaMemcpy(d, &local, 8192, cudaMemcpyHostToDevice), cudaErrorInvalidValue); /* past */
    EXPECT(cudaMemcpy(d, &local, sizeof(int), (enum cudaMemcpyKind)9),
           cudaErrorInvalidMemcpyDirection);
    EXPECT(cudaMemset(&local, 0, sizeof(int)), cudaErrorInvalidValue);
    EXPECT(cudaMallocManaged((void **)&m, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    EXPECT(cudaMallocManaged((void **)&m, 64, 0x10), cudaErrorInvalidValue);
    EXPECT(cudaHostAlloc((void **)&h, 64, 0x80), cudaErrorInvalidValue);
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);

    struct cudaPointerAttributes a;
    EXPECT(cudaPointerGetAttributes(&a, d + 10), cudaSuccess);
    TRUE(a.type == cudaMemoryTypeDevice && a.device == 0 && a.devicePointer == d + 10);
    EXPECT(cudaPointerGetAttributes(&a, m), cudaSuccess);
    TRUE(a.type == cudaMemoryTypeManaged && a.hostPointer == m);
    EXPECT(cudaPointerGetAttributes(&a, h), cudaSuccess);
    TRUE(a.type == cudaMemoryTypeHost && a.hostPointer == h);
    EXPECT(cudaPointerGetAttributes(&a, &local), cudaSuccess);
    TRUE(a.type == cudaMemoryTypeUnregistered);

    /* CRAC_SIM_MEMORY=64M (set by the test): the limit and the accounting. */
    size_t free0, total, free1;
    EXPECT(cudaMemGetInfo(&free0, &total), cudaSuccess);
    TRUE(total == 64UL << 20);
    void *big = NULL, *big2 = NULL;
    EXPECT(cudaMalloc(&big, 40UL << 20), cudaSuccess);
    EXPECT(cudaMemGetInfo(&free1, &total), cudaSuccess);
    TRUE(free1 == free0 - (40UL << 20));
    EXPECT(cudaMalloc(&big2, 40UL << 20), cudaErrorMemoryAllocation);
    EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);
    EXPECT(cudaFree(big), cudaSuccess);
    EXPECT(cudaMalloc(&big2, 40UL << 20), cudaSuccess);
    EXPECT(cudaFree(big2), cudaSuccess);
    EXPECT(cudaFree(NULL), cudaSuccess);
    EXPECT(cudaFree(d), cudaSuccess);
    EXPECT(cudaFree(d), cudaErrorInvalidDevicePointer); /* double free */
    EXPECT(cudaFree(m), cudaSuccess);
    EXPECT(cudaFreeHost(h), cudaSuccess);
    EXPECT(cudaGetLastError(), cudaErrorInvalidDevicePointer);
    printf("pointers: ok\n");
}

static void handles(void)
{
    cudaStream_t s;
    cudaEvent_t e, e2;
    float ms;
    EXPECT(cudaStreamQuery((cudaStream_t)(uintptr_t)0x1234), cudaErrorInvalidResourceHandle);
    EXPECT(cudaStreamCreate(&s), cudaSuccess);
    EXPECT(cudaStreamQuery(s), cudaSuccess);
    EXPECT(cudaStreamCreateWithFlags(&s, 0x40), cudaErrorInvalidValue);
    EXPECT(cudaStreamDestroy(s), cudaSuccess);
    EXPECT(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
    EXPECT(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
    EXPECT(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
    EXPECT(cudaStreamDestroy(NULL), cudaErrorInvalidResourceHandle);
    EXPECT(cudaEventCreate(&e), cudaSuccess);
    EXPECT(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming), cudaSuccess);
    EXPECT(cudaEventQuery(e), cudaSuccess);                                  /* never recorded */
    EXPECT(cudaEventElapsedTime(&ms, e, e), cudaErrorInvalidResourceHandle); /* not recorded */
    EXPECT(cudaEventRecord(e, NULL), cudaSuccess);
    EXPECT(cudaEventRecord(e2, NULL), cudaSuccess);
    EXPECT(cudaEventSynchronize(e), cudaSuccess);
    EXPECT(cudaEventSynchronize(e2), cudaSuccess);
    EXPECT(cudaEventElapsedTime(&ms, e, e), cudaSuccess);
    TRUE(ms == 0.0f);
    EXPECT(cudaEventElapsedTime(&ms, e, e2), cudaErrorInvalidResourceHandle); /* no timing */
    EXPECT(cudaEventElapsedTime(NULL, e, e), cudaErrorInvalidValue);
    EXPECT(cudaEventDestroy(e), cudaSuccess);
    EXPECT(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
    EXPECT(cudaEventRecord(e, NULL), cudaErrorInvalidResourceHandle);
    EXPECT(cudaStreamWaitEvent(NULL, e, 0), cudaErrorInvalidResourceHandle);
    EXPECT(cudaEventDestroy(e2), cudaSuccess);
    EXPECT(cudaEventCreate(NULL), cudaErrorInvalidValue);
    EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT(cudaGetLastError(), cudaSuccess);
    printf("handles: ok\n");
}

/* A fat binary as nvcc emits it (magic 0xBA55ED50 header): registration works, but there is no
 * code the sim can run. */
static const unsigned long long gpu_fatbin[4] = {0x00100001ba55ed50ULL, 0, 0, 0};
static const struct crac_sim_fatbin_wrapper gpu_wrapper = {CRAC_SIM_FATBIN_WRAPPER_MAGIC, 1,
                                                           gpu_fatbin, 0};
static void gpu_stub(void) {}

static void launches(void)
{
    int *x;
    EXPECT(cudaMalloc((void **)&x, 4096), cudaSuccess);
    void *args[] = {&x};
    EXPECT(cudaLaunchKernel((const void *)last_error_semantics, d1(1), d1(1), args, 0, NULL),
           cudaErrorInvalidDeviceFunction);
    EXPECT(cudaLaunchKernel((const void *)trap_kernel, d1(0), d1(1), args, 0, NULL),
           cudaErrorInvalidConfiguration);
    EXPECT(cudaLaunchKernel((const void *)trap_kernel, d1(1), d1(2048), args, 0, NULL),
           cudaErrorInvalidConfiguration);
    EXPECT(cudaLaunchKernel((const void *)trap_kernel, d1(1), d1(1), args, 0,
                            (cudaStream_t)(uintptr_t)0x777),
           cudaErrorInvalidResourceHandle);
    void **h = __cudaRegisterFatBinary((void *)&gpu_wrapper);
    TRUE(h != NULL);
    __cudaRegisterFunction(h, (const char *)(uintptr_t)gpu_stub, (char *)"gpu_stub", "gpu_stub", -1,
                           0, 0, 0, 0, 0);
    __cudaRegisterFatBinaryEnd(h);
    /* nvcc's GPU code without CPU code for the sim (no kernels library): docs/SIM.md. */
    EXPECT(cudaLaunchKernel((const void *)gpu_stub, d1(1), d1(1), NULL, 0, NULL),
           cudaErrorInvalidDeviceFunction);
    __cudaUnregisterFatBinary(h);
    EXPECT(cudaLaunchKernel((const void *)gpu_stub, d1(1), d1(1), NULL, 0, NULL),
           cudaErrorInvalidDeviceFunction);
    int unused = 0;
    void *nargs[] = {&unused};
    EXPECT(cudaLaunchKernel((const void *)nop_kernel, d1(2), d1(2), nargs, 0, NULL), cudaSuccess);
    EXPECT(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
    EXPECT(cudaFree(x), cudaSuccess);
    printf("launches: ok\n");
}

/* A faulting kernel: the error is sticky (returned by every call, never reset by
 * cudaGetLastError) until cudaDeviceReset, which also destroys every stream and allocation. */
static void sticky(int use_bounds)
{
    int *x, n = 8;
    cudaStream_t s;
    cudaError_t want = use_bounds ? cudaErrorIllegalAddress : cudaErrorLaunchFailure;
    EXPECT(cudaMalloc((void **)&x, 4096), cudaSuccess);
    EXPECT(cudaStreamCreate(&s), cudaSuccess);
    void *targs[] = {&x};
    void *bargs[] = {&x, &n};
    if (use_bounds)
        EXPECT(cudaLaunchKernel((const void *)bounds_kernel, d1(4), d1(4), bargs, 0, s),
               cudaSuccess); /* 16 threads, 8 elements */
    else
        EXPECT(cudaLaunchKernel((const void *)trap_kernel, d1(4), d1(8), targs, 0, s), cudaSuccess);
    EXPECT(cudaStreamSynchronize(s), want);
    EXPECT(cudaDeviceSynchronize(), want);
    void *p;
    EXPECT(cudaMalloc(&p, 16), want);
    EXPECT(cudaStreamQuery(s), want);
    EXPECT(cudaMemset(x, 0, 16), want);
    EXPECT(cudaGetLastError(), want);
    EXPECT(cudaGetLastError(), want); /* sticky: not reset */
    EXPECT(cudaPeekAtLastError(), want);
    int drv = 0;
    EXPECT(cudaDriverGetVersion(&drv), cudaSuccess); /* version queries still answer */
    TRUE(strcmp(cudaGetErrorString(want), want == cudaErrorIllegalAddress
                                              ? "an illegal memory access was encountered"
                                              : "unspecified launch failure") == 0);
    EXPECT(cudaDeviceReset(), cudaSuccess);
    EXPECT(cudaGetLastError(), cudaSuccess);
    EXPECT(cudaStreamQuery(s), cudaErrorInvalidResourceHandle); /* reset destroyed it */
    struct cudaPointerAttributes a;
    EXPECT(cudaPointerGetAttributes(&a, x), cudaSuccess);
    TRUE(a.type == cudaMemoryTypeUnregistered); /* and every allocation */
    EXPECT(cudaMalloc(&p, 16), cudaSuccess);
    EXPECT(cudaFree(p), cudaSuccess);
    EXPECT(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    EXPECT(cudaGetLastError(), cudaSuccess);
    printf("sticky %s: ok\n", use_bounds ? "cudaErrorIllegalAddress" : "cudaErrorLaunchFailure");
}

int main(void)
{
    int drv = 0;
    cudaDriverGetVersion(&drv);
    fprintf(stderr, "sim_errors: driver version %d\n", drv);
    last_error_semantics();
    pointers();
    handles();
    launches();
    sticky(0);
    sticky(1);
    printf("sim_errors: %d checks OK\n", checks);
    return 0;
}
