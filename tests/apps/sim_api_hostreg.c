/* sim_api_hostreg [STEPS=40] [MS=40]: registered host memory. Buffers of the program's own (heap,
   .bss) are registered with cudaHostRegister before the loop; every step checks that the runtime
   still knows them (pointer attributes, flags, device pointers: after a restart too), copies
   through them asynchronously, lets a kernel read one through its device pointer, and registers
   and unregisters a temporary buffer. */
#define _GNU_SOURCE
#define PROG "sim_api_hostreg"
#define USAGE "[STEPS] [MS]"
#include "sim_api_common.h"

#include <sys/mman.h>

#define N 4096

CRAC_SIM_KERNEL(mul_add, (unsigned *, out), (const unsigned *, in), (int, n), (unsigned, k))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        out[i] = out[i] * 7u + in[i] + k;
}

static unsigned bss_buf[N] __attribute__((aligned(4096)));

static void expect_registered(long k, const char *what, void *p)
{
    struct cudaPointerAttributes pa;
    CK(cudaPointerGetAttributes(&pa, p));
    if (pa.type != cudaMemoryTypeHost || pa.hostPointer != p)
        fail("step %ld: %s is not registered host memory (type %d)", k, what, (int)pa.type);
    unsigned flags = 0;
    CK(cudaHostGetFlags(&flags, p));
    if (!(flags & cudaHostAllocMapped))
        fail("step %ld: %s flags %u", k, what, flags);
    void *dp = NULL;
    CK(cudaHostGetDevicePointer(&dp, p, 0));
    if (dp != p)
        fail("step %ld: %s device pointer %p", k, what, dp);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 40, 1, 4000);
    long ms = arg(argc, argv, 2, 40, 0, 10000);
    int n = N;
    size_t bytes = N * sizeof(unsigned);
    int v = 0;
    CK(cudaDeviceGetAttribute(&v, cudaDevAttrHostRegisterSupported, 0));
    if (v != 1)
        fail("host registration not supported");

    unsigned *heap_buf = aligned_alloc(4096, bytes);
    unsigned *tmp = aligned_alloc(4096, bytes);
    if (!heap_buf || !tmp)
        fail("aligned_alloc");
    for (int i = 0; i < N; i++)
        heap_buf[i] = (unsigned)i * 3u;
    CK(cudaHostRegister(heap_buf, bytes, cudaHostRegisterDefault));
    CK(cudaHostRegister(bss_buf, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
    CK_ERR(cudaHostRegister(heap_buf, bytes, 0), cudaErrorHostMemoryAlreadyRegistered);

    unsigned *d_out;
    CK(cudaMalloc((void **)&d_out, bytes));
    CK(cudaMemset(d_out, 0, bytes));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    unsigned *d_in = NULL;
    CK(cudaHostGetDevicePointer((void **)&d_in, heap_buf, 0));

    uint64_t hash = 0xcbf29ce484222325ULL;
    static unsigned model[N];
    for (long k = 1; k <= steps; k++) {
        expect_registered(k, "the heap buffer", heap_buf);
        expect_registered(k, "the .bss buffer", bss_buf);
        expect_registered(k, "the middle of the heap buffer", heap_buf + N / 2);

        /* The kernel reads the registered heap buffer through its device pointer. */
        unsigned kk = (unsigned)k;
        void *args[] = {&d_out, &d_in, &n, &kk};
        CK(cudaLaunchKernel((const void *)mul_add, d3(N / 256), d3(256), args, 0, s));
        CK(cudaMemcpyAsync(bss_buf, d_out, bytes, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < N; i++) {
            model[i] = model[i] * 7u + heap_buf[i] + kk;
            if (bss_buf[i] != model[i])
                fail("step %ld: out[%d] = %u, expected %u", k, i, bss_buf[i], model[i]);
        }
        for (int i = 0; i < N; i++)
            heap_buf[i] += (unsigned)k;

        /* A temporary registration, copied through and dropped again. */
        CK(cudaHostRegister(tmp, bytes, cudaHostRegisterReadOnly));
        CK(cudaMemcpyAsync(tmp, d_out, bytes, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaHostUnregister(tmp));
        CK_ERR(cudaHostUnregister(tmp), cudaErrorHostMemoryNotRegistered);
        struct cudaPointerAttributes pa;
        CK(cudaPointerGetAttributes(&pa, tmp));
        if (pa.type != cudaMemoryTypeUnregistered)
            fail("step %ld: unregistered memory still registered", k);
        if (memcmp(tmp, bss_buf, bytes) != 0)
            fail("step %ld: copy into the temporary registration", k);

        hash = fnv64(hash, bss_buf, bytes);
        step_line(k);
        pause_ms(ms);
    }
    CK(cudaHostUnregister(heap_buf));
    CK(cudaHostUnregister(bss_buf));
    CK(cudaFree(d_out));
    CK(cudaStreamDestroy(s));
    CK(cudaGetLastError());
    free(heap_buf);
    free(tmp);
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)hash, steps);
    return 0;
}
