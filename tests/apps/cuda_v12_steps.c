/* cuda_v12_steps — a CUDA 12 program (built against CUDA 12's headers, linked to libcudart.so.12)
 * whose device state evolves step by step: the calls whose ABI changed in CUDA 13 (cudaDeviceProp,
 * cudaPointerAttributes, cudaMemAdvise/cudaMemPrefetchAsync with a device number,
 * cudaGraphAddDependencies without edge data) checked, then STEPS kernel steps over device and
 * managed memory on a stream. Prints `step N`, then `DONE ...` with a checksum. */
#define PROG "cuda_v12_steps"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

#include <cuda_runtime_api.h>

#include "crac_sim.h"

#include <stdint.h>

#define N 4096

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            fail("%s: %s", #call, cudaGetErrorName(e_));                                           \
    } while (0)

CRAC_SIM_KERNEL(advance, (uint64_t *, x), (uint64_t *, m), (int, k), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n) {
        x[i] = x[i] * 6364136223846793005ull + (uint64_t)k + (uint64_t)i;
        m[i] ^= x[i] >> 17;
    }
}

static void check_abi(void)
{
    int v = 0;
    CHECK(cudaRuntimeGetVersion(&v));
    if (v != CUDART_VERSION)
        fail("cudaRuntimeGetVersion: %d, built with %d", v, CUDART_VERSION);

    /* CUDA 12's cudaDeviceProp, with the fields CUDA 13 removed, followed by a canary. */
    struct {
        struct cudaDeviceProp p;
        unsigned char canary[512];
    } prop;
    memset(&prop, 0xa5, sizeof(prop));
    CHECK(cudaGetDeviceProperties(&prop.p, 0));
    for (size_t i = 0; i < sizeof(prop.canary); i++)
        if (prop.canary[i] != 0xa5)
            fail("cudaGetDeviceProperties wrote past CUDA 12's cudaDeviceProp");
    int clock = 0, sms = 0, mode = -1;
    CHECK(cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, 0));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, 0));
    if (prop.p.clockRate != clock || prop.p.multiProcessorCount != sms ||
        prop.p.computeMode != mode || prop.p.warpSize != 32 || prop.p.name[0] == '\0')
        fail("cudaDeviceProp: clockRate %d (attribute %d), SMs %d (%d), computeMode %d (%d), "
             "warpSize %d",
             prop.p.clockRate, clock, prop.p.multiProcessorCount, sms, prop.p.computeMode, mode,
             prop.p.warpSize);
    printf("runtime %d device %s cc %d.%d sms %d clock %d\n", v, prop.p.name, prop.p.major,
           prop.p.minor, prop.p.multiProcessorCount, prop.p.clockRate);

    void *d = NULL;
    CHECK(cudaMalloc(&d, 256));
    struct {
        struct cudaPointerAttributes a;
        unsigned char canary[128];
    } attr;
    memset(&attr, 0xa5, sizeof(attr));
    CHECK(cudaPointerGetAttributes(&attr.a, d));
    for (size_t i = 0; i < sizeof(attr.canary); i++)
        if (attr.canary[i] != 0xa5)
            fail("cudaPointerGetAttributes wrote past CUDA 12's cudaPointerAttributes");
    if (attr.a.type != cudaMemoryTypeDevice || attr.a.devicePointer != d || attr.a.device != 0)
        fail("cudaPointerAttributes: type %d device %d", (int)attr.a.type, attr.a.device);
    CHECK(cudaFree(d));

    cudaGraph_t g;
    cudaGraphNode_t a, b;
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphAddEmptyNode(&a, g, NULL, 0));
    CHECK(cudaGraphAddEmptyNode(&b, g, NULL, 0));
    CHECK(cudaGraphAddDependencies(g, &a, &b, 1)); /* CUDA 12: no edge data */
    CHECK(cudaGraphDestroy(g));
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 200, 1, 1000000);
    long ms = arg(argc, argv, 2, 5, 0, 10000);
    check_abi();

    uint64_t *x, *m, host[N];
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc((void **)&x, N * sizeof(uint64_t)));
    CHECK(cudaMallocManaged((void **)&m, N * sizeof(uint64_t), cudaMemAttachGlobal));
    CHECK(cudaMemAdvise(m, N * sizeof(uint64_t), cudaMemAdviseSetPreferredLocation, 0));
    CHECK(cudaMemAdvise(m, N * sizeof(uint64_t), cudaMemAdviseSetAccessedBy, cudaCpuDeviceId));
    CHECK(cudaMemPrefetchAsync(m, N * sizeof(uint64_t), 0, s));
    for (int i = 0; i < N; i++)
        host[i] = (uint64_t)i * 2654435761u;
    CHECK(cudaMemcpyAsync(x, host, sizeof(host), cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(m, 0, N * sizeof(uint64_t), s));
    CHECK(cudaStreamSynchronize(s));

    int n = N;
    for (long k = 1; k <= steps; k++) {
        int kk = (int)k;
        void *args[] = {&x, &m, &kk, &n};
        dim3 grid = {N / 256, 1, 1}, block = {256, 1, 1};
        CHECK(cudaLaunchKernel((const void *)advance, grid, block, args, 0, s));
        CHECK(cudaStreamSynchronize(s));
        step_line(k);
        if (ms)
            usleep((useconds_t)ms * 1000);
    }
    CHECK(cudaMemPrefetchAsync(m, N * sizeof(uint64_t), cudaCpuDeviceId, s));
    CHECK(cudaMemcpyAsync(host, x, sizeof(host), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < N; i++)
        h = (h ^ host[i] ^ (m[i] << 1)) * 0x100000001b3ull;
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return 0;
}
