/* sim_api_streams [STEPS=40] [MS=40]: two streams with different priorities and flags, events
   created with flags (recorded with cudaEventRecordWithFlags), a cross-stream wait, stream
   callbacks and host functions. Every step checks that the priorities, flags and event flags are
   still what they were created with (after a restart too) and folds the results into a hash. */
#define _GNU_SOURCE
#define PROG "sim_api_streams"
#define USAGE "[STEPS] [MS]"
#include "sim_api_common.h"

#define N 4096

CRAC_SIM_KERNEL(scale_add, (unsigned *, v), (int, n), (unsigned, k))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        v[i] = v[i] * 3u + k + (unsigned)i;
}

CRAC_SIM_KERNEL(accumulate, (unsigned *, dst), (const unsigned *, src), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        dst[i] += src[i] ^ 0x5bd1e995u;
}

struct log {
    long entries[4096];
    long n;
    cudaStream_t expected_stream;
    int bad_stream;
    long host_calls;
};

static struct log cb_log;

static void CUDART_CB on_callback(cudaStream_t stream, cudaError_t status, void *data)
{
    struct log *l = &cb_log;
    if (stream != l->expected_stream || status != cudaSuccess)
        l->bad_stream = 1;
    if (l->n < 4096)
        l->entries[l->n] = (long)(intptr_t)data;
    l->n++;
}

static void CUDART_CB on_host(void *data) { (*(long *)data)++; }

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 40, 1, 4000);
    long ms = arg(argc, argv, 2, 40, 0, 10000);

    int least = 1, greatest = 1;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    if (least != 0 || greatest >= 0)
        fail("priority range %d..%d", least, greatest);
    int v = 0;
    CK(cudaDeviceGetAttribute(&v, cudaDevAttrStreamPrioritiesSupported, 0));
    if (v != 1)
        fail("stream priorities not supported");
    CK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0));
    if (v != 1024)
        fail("max threads per block %d", v);

    /* No driver API on the sim: refused clearly (cudaErrorNotSupported, a note on stderr). */
    void *entry = &v;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
    CK_ERR(cudaGetDriverEntryPointByVersion("cuInit", &entry, 12000, cudaEnableDefault, &q),
           cudaErrorNotSupported);
    if (entry || q != cudaDriverEntryPointSymbolNotFound)
        fail("cudaGetDriverEntryPointByVersion");

    cudaStream_t hi, lo;
    CK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
    cudaLaunchAttribute attrs[2];
    memset(attrs, 0, sizeof(attrs));
    attrs[0].id = cudaLaunchAttributePriority;
    attrs[0].val.priority = greatest;
    attrs[1].id = cudaLaunchAttributeClusterDimension;
    attrs[1].val.clusterDim.x = 2;
    attrs[1].val.clusterDim.y = attrs[1].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {d3(N / 256), d3(256), 0, hi, attrs, 2};
    int cluster = 0, clusters = 0;
    CK(cudaOccupancyMaxPotentialClusterSize(&cluster, (const void *)scale_add, &cfg));
    CK(cudaOccupancyMaxActiveClusters(&clusters, (const void *)scale_add, &cfg));
    if (cluster != 8 || clusters != 4)
        fail("cluster size %d, active clusters %d", cluster, clusters);
    CK(cudaStreamCreateWithPriority(&lo, cudaStreamDefault, least));
    cb_log.expected_stream = lo;
    cudaEvent_t ev_sync, ev_t0, ev_t1;
    CK(cudaEventCreateWithFlags(&ev_sync, cudaEventDisableTiming | cudaEventBlockingSync));
    CK(cudaEventCreateWithFlags(&ev_t0, cudaEventDefault));
    CK(cudaEventCreateWithFlags(&ev_t1, cudaEventBlockingSync));

    unsigned *d_a, *d_b, *h;
    CK(cudaMalloc((void **)&d_a, N * sizeof(unsigned)));
    CK(cudaMalloc((void **)&d_b, N * sizeof(unsigned)));
    CK(cudaHostAlloc((void **)&h, N * sizeof(unsigned), cudaHostAllocMapped));
    CK(cudaMemset(d_a, 0, N * sizeof(unsigned)));
    CK(cudaMemset(d_b, 0, N * sizeof(unsigned)));
    void *mapped = NULL;
    CK(cudaHostGetDevicePointer(&mapped, h, 0));
    if (mapped != (void *)h)
        fail("cudaHostGetDevicePointer");

    uint64_t hash = 0xcbf29ce484222325ULL;
    long host_calls = 0;
    int n = N;
    for (long k = 1; k <= steps; k++) {
        int p = 99;
        unsigned flags = 99;
        CK(cudaStreamGetPriority(hi, &p));
        if (p != greatest)
            fail("step %ld: priority of hi is %d, not %d", k, p, greatest);
        CK(cudaStreamGetPriority(lo, &p));
        if (p != least)
            fail("step %ld: priority of lo is %d, not %d", k, p, least);
        CK(cudaStreamGetFlags(hi, &flags));
        if (flags != cudaStreamNonBlocking)
            fail("step %ld: flags of hi are %u", k, flags);
        CK(cudaStreamGetFlags(lo, &flags));
        if (flags != cudaStreamDefault)
            fail("step %ld: flags of lo are %u", k, flags);

        unsigned kk = (unsigned)k;
        void *a1[] = {&d_a, &n, &kk};
        void *a2[] = {&d_b, &d_a, &n};
        CK(cudaEventRecordWithFlags(ev_t0, hi, 0));
        CK(cudaLaunchKernelExC(&cfg, (const void *)scale_add, a1));
        CK(cudaLaunchHostFunc(hi, on_host, &host_calls));
        CK(cudaEventRecordWithFlags(ev_sync, hi, 0));
        CK(cudaStreamWaitEvent(lo, ev_sync, 0));
        CK(cudaLaunchKernel((const void *)accumulate, d3(N / 256), d3(256), a2, 0, lo));
        CK(cudaStreamAddCallback(lo, on_callback, (void *)(intptr_t)k, 0));
        CK(cudaMemcpyAsync(h, d_b, N * sizeof(unsigned), cudaMemcpyDeviceToHost, lo));
        CK(cudaEventRecord(ev_t1, lo));
        CK(cudaEventSynchronize(ev_t1));
        CK(cudaStreamSynchronize(hi));

        float elapsed = -1;
        CK(cudaEventElapsedTime(&elapsed, ev_t0, ev_t1));
        if (elapsed < 0)
            fail("step %ld: negative elapsed time", k);
        /* Created with cudaEventDisableTiming: no timing, after a restart too. */
        CK_ERR(cudaEventElapsedTime(&elapsed, ev_t0, ev_sync), cudaErrorInvalidResourceHandle);
        if (cudaEventQuery(ev_sync) != cudaSuccess)
            fail("step %ld: ev_sync not complete", k);

        if (cb_log.n != k || cb_log.entries[k - 1] != k || cb_log.bad_stream)
            fail("step %ld: callbacks %ld, last %ld, stream ok %d", k, cb_log.n,
                 cb_log.n ? cb_log.entries[cb_log.n - 1] : -1, !cb_log.bad_stream);
        if (host_calls != k)
            fail("step %ld: host function ran %ld times", k, host_calls);
        hash = fnv64(hash, h, N * sizeof(unsigned));
        step_line(k);
        pause_ms(ms);
    }
    CK(cudaStreamDestroy(hi));
    CK(cudaStreamDestroy(lo));
    CK(cudaEventDestroy(ev_sync));
    CK(cudaEventDestroy(ev_t0));
    CK(cudaEventDestroy(ev_t1));
    CK(cudaFree(d_a));
    CK(cudaFree(d_b));
    CK(cudaFreeHost(h));
    CK(cudaGetLastError());
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)hash, steps);
    return 0;
}
