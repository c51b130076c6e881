// multistream.cu — several streams (non-blocking, with priorities) each advancing its own chunk,
// events with flags (timing off, blocking sync, a timed pair), cudaStreamWaitEvent joining the
// chunks into a combine kernel, and host work in stream order: cudaStreamAddCallback and
// cudaLaunchHostFunc. Every step is checked against the CPU, and so are the host callbacks'
// counts and the order they saw the device results in.
#include "common.cuh"

#define NS 3
#define CHUNK 1024
#define BLOCK 128

__global__ void lcg_chunk(unsigned *d, int n, unsigned a, unsigned c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        d[i] = d[i] * a + c;
}

// out[i] = xor of the NS chunks' element i.
__global__ void combine(const unsigned *d, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned x = 0;
        for (int s = 0; s < NS; s++)
            x ^= d[s * n + i];
        out[i] = x;
    }
}

static const unsigned MUL[NS] = {1103515245u, 69069u, 1664525u};
static const unsigned INC[NS] = {12345u, 1u, 1013904223u};

struct host_state {
    unsigned long long callbacks[NS]; // cudaStreamAddCallback, per stream
    unsigned long long host_fns;      // cudaLaunchHostFunc on the combining stream
    unsigned long long seen;          // the sum the host function read from pinned memory
    const unsigned *pinned;           // combine's result, copied D2H before the host function
    cudaError_t bad_status;
};
static host_state hs;

static void CUDART_CB on_stream_done(cudaStream_t, cudaError_t status, void *arg)
{
    if (status != cudaSuccess)
        hs.bad_status = status;
    hs.callbacks[(long)arg]++;
}

// Runs after the D2H copy in stream order: it must see this step's result already.
static void CUDART_CB read_result(void *)
{
    unsigned long long s = 0;
    for (int i = 0; i < CHUNK; i++)
        s += hs.pinned[i] & 0xffu;
    hs.seen = s;
    hs.host_fns++;
}

int main(int argc, char **argv)
{
    long steps, ms;
    parse_args(argc, argv, &steps, &ms);
    static unsigned h[NS * CHUNK], ref[CHUNK];
    for (int i = 0; i < NS * CHUNK; i++)
        h[i] = (unsigned)(i * 2654435761u);
    unsigned *d, *out, *pinned;
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaMalloc(&out, CHUNK * sizeof *out));
    CHECK(cudaMallocHost(&pinned, CHUNK * sizeof *pinned));
    hs.pinned = pinned;
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));

    int least, greatest;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t st[NS];
    cudaEvent_t done[NS];
    for (int s = 0; s < NS; s++) {
        int prio = s == 0 ? greatest : least;
        CHECK(cudaStreamCreateWithPriority(&st[s], cudaStreamNonBlocking, prio));
        CHECK(cudaEventCreateWithFlags(&done[s], s == 1 ? cudaEventBlockingSync
                                                        : cudaEventDisableTiming));
    }
    int prio0;
    CHECK(cudaStreamGetPriority(st[0], &prio0));
    if (prio0 != greatest) {
        fprintf(stderr, "multistream: FAIL: stream 0 priority %d, expected %d\n", prio0, greatest);
        return 1;
    }
    cudaEvent_t t0, t1; // a timed pair around each step's work
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));

    const int grid = (CHUNK + BLOCK - 1) / BLOCK;
    unsigned long long total = 0;
    for (long k = 1; k <= steps; k++) {
        CHECK(cudaEventRecord(t0, st[0]));
        for (int s = 0; s < NS; s++) {
            lcg_chunk<<<grid, BLOCK, 0, st[s]>>>(d + s * CHUNK, CHUNK, MUL[s], INC[s]);
            CHECK(cudaGetLastError());
            CHECK(cudaStreamAddCallback(st[s], on_stream_done, (void *)(long)s, 0));
            CHECK(cudaEventRecord(done[s], st[s]));
            if (s)
                CHECK(cudaStreamWaitEvent(st[0], done[s], 0));
        }
        combine<<<grid, BLOCK, 0, st[0]>>>(d, out, CHUNK);
        CHECK(cudaMemcpyAsync(pinned, out, CHUNK * sizeof *out, cudaMemcpyDeviceToHost, st[0]));
        CHECK(cudaLaunchHostFunc(st[0], read_result, nullptr));
        CHECK(cudaEventRecord(t1, st[0]));
        CHECK(cudaEventSynchronize(t1));
        CHECK(cudaEventSynchronize(done[1])); // the blocking-sync event
        for (int s = 0; s < NS; s++)
            CHECK(cudaStreamSynchronize(st[s]));
        float elapsed = -1.0f;
        CHECK(cudaEventElapsedTime(&elapsed, t0, t1));
        unsigned long long want = 0;
        for (int i = 0; i < CHUNK; i++) {
            unsigned x = 0;
            for (int s = 0; s < NS; s++) {
                h[s * CHUNK + i] = h[s * CHUNK + i] * MUL[s] + INC[s];
                x ^= h[s * CHUNK + i];
            }
            ref[i] = x;
            want += x & 0xffu;
        }
        int same = 1;
        for (int i = 0; i < CHUNK; i++)
            same &= pinned[i] == ref[i];
        int counts_ok = hs.host_fns == (unsigned long long)k && hs.bad_status == cudaSuccess;
        for (int s = 0; s < NS; s++)
            counts_ok &= hs.callbacks[s] == (unsigned long long)k;
        if (!same || hs.seen != want || !counts_ok || !(elapsed >= 0.0f)) {
            fprintf(stderr,
                    "multistream: FAIL at step %ld: same=%d seen=%llu want=%llu host_fns=%llu "
                    "callbacks=%llu,%llu,%llu elapsed=%f\n",
                    k, same, hs.seen, want, hs.host_fns, hs.callbacks[0], hs.callbacks[1],
                    hs.callbacks[2], (double)elapsed);
            return 1;
        }
        total += want;
        step_done(k, ms);
    }
    for (int s = 0; s < NS; s++) {
        CHECK(cudaEventDestroy(done[s]));
        CHECK(cudaStreamDestroy(st[s]));
    }
    printf("DONE multistream total=%llu callbacks=%llu host_fns=%llu\n", total,
           hs.callbacks[0] + hs.callbacks[1] + hs.callbacks[2], hs.host_fns);
    return 0;
}
