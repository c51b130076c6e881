/* sim_api_graph [STEPS=40] [MS=40]: CUDA graphs. One graph is captured from two streams (a fork
   and a join through events, kernels, a host function, a copy), one is built explicitly (kernel,
   memset, 1D copy, host, empty and child-graph nodes); both are instantiated once and launched
   every step, and every step also captures (pausing inside the capture, so that checkpoints are
   requested there: they must wait for its end), instantiates, launches and destroys a small
   graph. Results are checked against a host model at every step (after a restart too). */
#define _GNU_SOURCE
#define PROG "sim_api_graph"
#define USAGE "[STEPS] [MS]"
#include "sim_api_common.h"

#define N 2048

CRAC_SIM_KERNEL(add_k, (unsigned *, v), (int, n), (unsigned, k))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        v[i] += k + (unsigned)i;
}

CRAC_SIM_KERNEL(mix, (unsigned *, dst), (const unsigned *, src), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        dst[i] = dst[i] * 5u + src[i];
}

static long host_a, host_b;
static void CUDART_CB count(void *p) { (*(long *)p)++; }

static void model_add(unsigned *v, unsigned k)
{
    for (int i = 0; i < N; i++)
        v[i] += k + (unsigned)i;
}

static void model_mix(unsigned *dst, const unsigned *src)
{
    for (int i = 0; i < N; i++)
        dst[i] = dst[i] * 5u + src[i];
}

static void expect(const char *what, long k, const unsigned *dev, const unsigned *model)
{
    static unsigned h[N];
    CK(cudaMemcpy(h, dev, sizeof(h), cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        if (h[i] != model[i])
            fail("step %ld: %s[%d] = %u, expected %u", k, what, i, h[i], model[i]);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 40, 1, 4000);
    long ms = arg(argc, argv, 2, 40, 0, 10000);
    int n = N;
    size_t bytes = N * sizeof(unsigned);
    unsigned *d_x, *d_y, *d_z, *d_w, *d_t;
    CK(cudaMalloc((void **)&d_x, bytes));
    CK(cudaMalloc((void **)&d_y, bytes));
    CK(cudaMalloc((void **)&d_z, bytes));
    CK(cudaMalloc((void **)&d_w, bytes));
    CK(cudaMalloc((void **)&d_t, bytes));
    CK(cudaMemset(d_x, 0, bytes));
    CK(cudaMemset(d_y, 0, bytes));
    CK(cudaMemset(d_w, 0, bytes));
    static unsigned mx[N], my[N], mz[N], mw[N], mt[N];

    cudaStream_t s, s2;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

    /* Captured: x += 1 + i (s); y = 5y + x (s2, after the fork); host_a++; z... */
    unsigned one = 1, seven = 7;
    cudaGraph_t g1;
    enum cudaStreamCaptureStatus st;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusActive)
        fail("stream not capturing");
    void *ax[] = {&d_x, &n, &one};
    CK(cudaLaunchKernel((const void *)add_k, d3(N / 256), d3(256), ax, 0, s));
    CK(cudaEventRecord(fork, s));
    CK(cudaStreamWaitEvent(s2, fork, 0));
    void *am[] = {&d_y, &d_x, &n};
    CK(cudaLaunchKernel((const void *)mix, d3(N / 256), d3(256), am, 0, s2));
    CK(cudaEventRecord(join, s2));
    CK(cudaStreamWaitEvent(s, join, 0));
    CK(cudaLaunchHostFunc(s, count, &host_a));
    CK(cudaStreamEndCapture(s, &g1));
    CK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusNone)
        fail("stream still capturing");
    if (host_a != 0)
        fail("captured work ran");
    cudaGraphExec_t e1;
    CK(cudaGraphInstantiate(&e1, g1, 0));

    /* Explicit: y += 7 + i; z = 0 (memset); z <- y (copy); host_b++; (empty); w += 1 + i (child). */
    cudaGraph_t g2, child;
    CK(cudaGraphCreate(&g2, 0));
    CK(cudaGraphCreate(&child, 0));
    cudaGraphNode_t nk, nm, nc, nh, ne, nchild, nw;
    struct cudaKernelNodeParams kp = {(void *)add_k, d3(N / 256), d3(256), 0, NULL, NULL};
    void *ay[] = {&d_y, &n, &seven};
    kp.kernelParams = ay;
    CK(cudaGraphAddKernelNode(&nk, g2, NULL, 0, &kp));
    struct cudaMemsetParams mp = {d_z, 0, 0, 1, bytes, 1};
    CK(cudaGraphAddMemsetNode(&nm, g2, &nk, 1, &mp));
    CK(cudaGraphAddMemcpyNode1D(&nc, g2, &nm, 1, d_z, d_y, bytes, cudaMemcpyDeviceToDevice));
    struct cudaHostNodeParams hp = {count, &host_b};
    CK(cudaGraphAddHostNode(&nh, g2, &nc, 1, &hp));
    CK(cudaGraphAddEmptyNode(&ne, g2, &nh, 1));
    void *aw[] = {&d_w, &n, &one};
    kp.kernelParams = aw;
    CK(cudaGraphAddKernelNode(&nw, child, NULL, 0, &kp));
    CK(cudaGraphAddChildGraphNode(&nchild, g2, &ne, 1, child));
    cudaGraphNode_t nx;
    CK(cudaGraphAddEmptyNode(&nx, g2, &nchild, 1));
    CK(cudaGraphDestroyNode(nx));
    CK(cudaGraphAddDependencies(g2, &nk, &nc, NULL, 1));
    CK_ERR(cudaGraphAddDependencies(g2, &nc, &nk, NULL, 1), cudaErrorNotSupported);
    size_t count_nodes = 0;
    CK(cudaGraphGetNodes(g2, NULL, &count_nodes));
    if (count_nodes != 6)
        fail("explicit graph has %zu nodes", count_nodes);
    size_t roots = 0;
    CK(cudaGraphGetRootNodes(g2, NULL, &roots));
    if (roots != 1)
        fail("explicit graph has %zu roots", roots);
    cudaGraphExec_t e2;
    CK(cudaGraphInstantiateWithFlags(&e2, g2, 0));
    /* A whole-graph update with the same nodes works; with other nodes it is refused. */
    kp.kernelParams = ay;
    CK(cudaGraphKernelNodeSetParams(nk, &kp));
    cudaGraphExecUpdateResultInfo info;
    CK(cudaGraphExecUpdate(e2, g2, &info));
    CK_ERR(cudaGraphExecUpdate(e1, g2, &info), cudaErrorGraphExecUpdateFailure);
    if (info.result != cudaGraphExecUpdateErrorTopologyChanged)
        fail("cudaGraphExecUpdate result %d", (int)info.result);

    /* u <- y as a 3D copy node (4 rows of N/4 elements), instantiated with parameters. */
    unsigned *d_u;
    CK(cudaMalloc((void **)&d_u, bytes));
    static unsigned mu[N];
    cudaGraph_t g4;
    cudaGraphNode_t n3d;
    CK(cudaGraphCreate(&g4, 0));
    struct cudaMemcpy3DParms c3;
    memset(&c3, 0, sizeof(c3));
    c3.srcPtr = (struct cudaPitchedPtr){d_y, bytes / 4, bytes / 4, 4};
    c3.dstPtr = (struct cudaPitchedPtr){d_u, bytes / 4, bytes / 4, 4};
    c3.extent = (struct cudaExtent){bytes / 4, 4, 1};
    c3.kind = cudaMemcpyDeviceToDevice;
    CK(cudaGraphAddMemcpyNode(&n3d, g4, NULL, 0, &c3));
    cudaGraphInstantiateParams ip = {0, 0, 0, cudaGraphInstantiateError};
    cudaGraphExec_t e4;
    CK(cudaGraphInstantiateWithParams(&e4, g4, &ip));
    if (ip.result_out != cudaGraphInstantiateSuccess)
        fail("cudaGraphInstantiateWithParams result %d", (int)ip.result_out);

    uint64_t hash = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        /* The node handles and graphs made before the loop are still good (after a restart). */
        enum cudaGraphNodeType type;
        CK(cudaGraphNodeGetType(nm, &type));
        if (type != cudaGraphNodeTypeMemset)
            fail("step %ld: node type %d", k, (int)type);
        CK(cudaGraphNodeGetType(nchild, &type));
        if (type != cudaGraphNodeTypeGraph)
            fail("step %ld: child node type %d", k, (int)type);
        struct cudaKernelNodeParams got;
        CK(cudaGraphKernelNodeGetParams(nk, &got));
        if (got.func != (void *)add_k || got.gridDim.x != N / 256 ||
            *(unsigned *)got.kernelParams[2] != 7)
            fail("step %ld: kernel node parameters", k);
        unsigned long long fl = 1;
        CK(cudaGraphExecGetFlags(e2, &fl));
        if (fl != 0)
            fail("step %ld: exec flags %llu", k, fl);

        /* The executable graph's kernel node adds k + 6 this step. */
        unsigned inc = (unsigned)k + 6;
        void *ainc[] = {&d_y, &n, &inc};
        struct cudaKernelNodeParams kinc = {(void *)add_k, d3(N / 256), d3(256), 0, ainc, NULL};
        CK(cudaGraphExecKernelNodeSetParams(e2, nk, &kinc));
        CK(cudaGraphLaunch(e1, s));
        CK(cudaGraphLaunch(e2, s));
        CK(cudaGraphLaunch(e4, s));
        model_add(mx, 1);
        model_mix(my, mx);
        model_add(my, inc);
        memcpy(mz, my, sizeof(mz));
        model_add(mw, 1);
        memcpy(mu, my, sizeof(mu));

        /* A graph captured, launched and destroyed within the step: t = 5t + x + ... */
        cudaGraph_t g3;
        cudaGraphExec_t e3;
        unsigned kk = (unsigned)k;
        void *at[] = {&d_t, &n, &kk};
        CK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
        CK(cudaMemsetAsync(d_t, 0, bytes, s2));
        CK(cudaLaunchKernel((const void *)add_k, d3(N / 256), d3(256), at, 0, s2));
        /* Most of the step is spent inside the capture: checkpoints are requested there. */
        pause_ms(ms);
        CK(cudaStreamEndCapture(s2, &g3));
        CK(cudaGraphInstantiate(&e3, g3, 0));
        CK(cudaStreamWaitEvent(s2, join, 0));
        CK(cudaGraphLaunch(e3, s2));
        CK(cudaStreamSynchronize(s2));
        CK(cudaGraphExecDestroy(e3));
        CK(cudaGraphDestroy(g3));
        memset(mt, 0, sizeof(mt));
        model_add(mt, kk);

        CK(cudaStreamSynchronize(s));
        expect("x", k, d_x, mx);
        expect("y", k, d_y, my);
        expect("z", k, d_z, mz);
        expect("w", k, d_w, mw);
        expect("t", k, d_t, mt);
        expect("u", k, d_u, mu);
        if (host_a != k || host_b != k)
            fail("step %ld: host nodes ran %ld and %ld times", k, host_a, host_b);
        hash = fnv64(hash, my, sizeof(my));
        step_line(k);
        pause_ms(ms / 4);
    }
    CK(cudaGraphExecDestroy(e1));
    CK(cudaGraphExecDestroy(e2));
    CK(cudaGraphExecDestroy(e4));
    CK(cudaGraphDestroy(g4));
    CK(cudaGraphDestroy(g1));
    CK(cudaGraphDestroy(g2));
    CK(cudaGraphDestroy(child));
    CK_ERR(cudaGraphLaunch(e1, s), cudaErrorInvalidValue);
    CK(cudaStreamDestroy(s));
    CK(cudaStreamDestroy(s2));
    CK(cudaGetLastError());
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)hash, steps);
    return 0;
}
