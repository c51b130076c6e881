// graph.cu — CUDA graphs of nvcc-built kernels: a graph captured from a stream (a memset, two
// kernels on a forked second stream joined back by events, device and host copies) and a graph
// built node by node (kernel, memset, 1D copy, host node), each instantiated once and launched
// every step; one kernel node's arguments are changed in the executable graph halfway. The
// results are checked against the CPU each step, so a graph rebuilt wrongly at a restart fails.
#include "common.cuh"

#include <cstring>

#define N 2048
#define BLOCK 128

__global__ void lcg_step(unsigned *d, int n, unsigned a, unsigned c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        d[i] = d[i] * a + c;
}

__global__ void mix(unsigned *dst, const unsigned *src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] ^= src[i] >> 3;
}

__global__ void sum_low(const unsigned *d, int n, unsigned long long *total)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(total, (unsigned long long)(d[i] & 0xffffu));
}

static unsigned long long host_calls; // bumped by the explicit graph's host node

static void CUDART_CB count_call(void *arg) { *(unsigned long long *)arg += 1; }

int main(int argc, char **argv)
{
    long steps, ms;
    parse_args(argc, argv, &steps, &ms);
    static unsigned ha[N], hb[N], hc[N], out_b[N];
    for (int i = 0; i < N; i++) {
        ha[i] = (unsigned)i;
        hb[i] = (unsigned)(3 * i + 1);
        hc[i] = (unsigned)(7 * i);
    }
    unsigned *a, *b, *c, *c_copy;
    unsigned long long *totals, *h_totals; // [0]: captured graph, [1]: explicit graph
    CHECK(cudaMalloc(&a, sizeof ha));
    CHECK(cudaMalloc(&b, sizeof hb));
    CHECK(cudaMalloc(&c, sizeof hc));
    CHECK(cudaMalloc(&c_copy, sizeof hc));
    CHECK(cudaMalloc(&totals, 2 * sizeof *totals));
    CHECK(cudaMallocHost(&h_totals, 2 * sizeof *h_totals));
    CHECK(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, hb, sizeof hb, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(c, hc, sizeof hc, cudaMemcpyHostToDevice));

    // The captured graph: s forks to s2 (event), both run kernels, s2 joins back (event).
    cudaStream_t s, s2;
    cudaEvent_t fork, join;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    const int grid = (N + BLOCK - 1) / BLOCK;
    cudaGraph_t captured;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus st;
    CHECK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusActive) {
        fprintf(stderr, "graph: FAIL: stream not capturing\n");
        return 1;
    }
    CHECK(cudaMemsetAsync(totals, 0, sizeof *totals, s));
    lcg_step<<<grid, BLOCK, 0, s>>>(a, N, 1103515245u, 12345u);
    CHECK(cudaEventRecord(fork, s));
    CHECK(cudaStreamWaitEvent(s2, fork, 0));
    lcg_step<<<grid, BLOCK, 0, s2>>>(b, N, 69069u, 1u);
    CHECK(cudaEventRecord(join, s2));
    CHECK(cudaStreamWaitEvent(s, join, 0));
    mix<<<grid, BLOCK, 0, s>>>(a, b, N);
    sum_low<<<grid, BLOCK, 0, s>>>(a, N, totals);
    CHECK(cudaMemcpyAsync(&h_totals[0], totals, sizeof *totals, cudaMemcpyDeviceToHost, s));
    CHECK(cudaMemcpyAsync(out_b, b, sizeof hb, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamEndCapture(s, &captured));
    size_t n_nodes = 0;
    CHECK(cudaGraphGetNodes(captured, nullptr, &n_nodes));
    if (n_nodes < 6) {
        fprintf(stderr, "graph: FAIL: %zu captured nodes\n", n_nodes);
        return 1;
    }
    cudaGraphExec_t captured_exec;
    CHECK(cudaGraphInstantiate(&captured_exec, captured, 0));

    // The explicit graph: lcg_step(c) -> memset(total) -> sum_low(c) -> copy c -> host node.
    cudaGraph_t built;
    CHECK(cudaGraphCreate(&built, 0));
    int n = N;
    unsigned mul = 1664525u, inc = 1013904223u;
    void *step_args[] = {&c, &n, &mul, &inc};
    // Positional: `crac kernels` makes gridDim/blockDim macros, so host code cannot name the
    // fields (docs/SIM.md "Programs built by nvcc").
    cudaKernelNodeParams kp = {(void *)lcg_step, dim3(grid), dim3(BLOCK), 0, step_args, nullptr};
    cudaGraphNode_t k1, ms1, k2, cp1, h1;
    CHECK(cudaGraphAddKernelNode(&k1, built, nullptr, 0, &kp));
    cudaMemsetParams mp = {};
    mp.dst = totals + 1;
    mp.value = 0;
    mp.elementSize = 1;
    mp.width = sizeof *totals;
    mp.height = 1;
    CHECK(cudaGraphAddMemsetNode(&ms1, built, &k1, 1, &mp));
    unsigned long long *total1 = totals + 1;
    void *sum_args[] = {&c, &n, &total1};
    kp.func = (void *)sum_low;
    kp.kernelParams = sum_args;
    CHECK(cudaGraphAddKernelNode(&k2, built, &ms1, 1, &kp));
    CHECK(cudaGraphAddMemcpyNode1D(&cp1, built, &k2, 1, c_copy, c, sizeof hc,
                                   cudaMemcpyDeviceToDevice));
    cudaHostNodeParams hp = {count_call, &host_calls};
    CHECK(cudaGraphAddHostNode(&h1, built, &cp1, 1, &hp));
    cudaGraphExec_t built_exec;
    CHECK(cudaGraphInstantiate(&built_exec, built, 0));

    unsigned long long ref[2] = {0, 0};
    const long switch_at = steps / 2 + 1;
    for (long k = 1; k <= steps; k++) {
        if (k == switch_at) {
            // From here the explicit graph's first kernel uses other constants (set in the
            // executable graph only: the graph keeps the old ones).
            mul = 22695477u;
            inc = 1u;
            kp.func = (void *)lcg_step;
            kp.kernelParams = step_args;
            CHECK(cudaGraphExecKernelNodeSetParams(built_exec, k1, &kp));
        }
        CHECK(cudaGraphLaunch(captured_exec, s));
        CHECK(cudaGraphLaunch(built_exec, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(&h_totals[1], totals + 1, sizeof *totals, cudaMemcpyDeviceToHost));
        unsigned long long t0 = 0, t1 = 0;
        for (int i = 0; i < N; i++) {
            ha[i] = ha[i] * 1103515245u + 12345u;
            hb[i] = hb[i] * 69069u + 1u;
            ha[i] ^= hb[i] >> 3;
            t0 += ha[i] & 0xffffu;
            hc[i] = k < switch_at ? hc[i] * 1664525u + 1013904223u : hc[i] * 22695477u + 1u;
            t1 += hc[i] & 0xffffu;
        }
        if (h_totals[0] != t0 || h_totals[1] != t1 || memcmp(out_b, hb, sizeof hb) != 0 ||
            host_calls != (unsigned long long)k) {
            fprintf(stderr,
                    "graph: FAIL at step %ld: totals %llu %llu (expected %llu %llu), host "
                    "node ran %llu times\n",
                    k, h_totals[0], h_totals[1], t0, t1, host_calls);
            return 1;
        }
        ref[0] += t0;
        ref[1] += t1;
        step_done(k, ms);
    }
    static unsigned check_c[N];
    CHECK(cudaMemcpy(check_c, c_copy, sizeof hc, cudaMemcpyDeviceToHost));
    if (memcmp(check_c, hc, sizeof hc) != 0) {
        fprintf(stderr, "graph: FAIL: the copy node's result differs\n");
        return 1;
    }
    CHECK(cudaGraphExecDestroy(captured_exec));
    CHECK(cudaGraphExecDestroy(built_exec));
    CHECK(cudaGraphDestroy(captured));
    CHECK(cudaGraphDestroy(built));
    printf("DONE graph sums=%llu,%llu host_calls=%llu nodes=%zu\n", ref[0], ref[1], host_calls,
           n_nodes);
    return 0;
}
