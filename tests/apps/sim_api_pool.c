/* sim_api_pool [STEPS=40] [MS=40]: stream-ordered allocation. The default pool gets a release
   threshold, a created pool becomes the device's current pool; every step allocates from both
   (cudaMallocAsync, cudaMallocFromPoolAsync), fills, computes and frees on a stream, and checks the
   pools' attributes and statistics (after a restart too). Buffers that live across steps keep
   data allocated from a pool; pitched and 3D memory with 2D/3D copies and sets come along. */
#define _GNU_SOURCE
#define PROG "sim_api_pool"
#define USAGE "[STEPS] [MS]"
#include "sim_api_common.h"

/* driver_functions.h's extent/pitched are not for C programs to include. */
static struct cudaExtent extent(size_t w, size_t h, size_t d)
{
    struct cudaExtent e = {w, h, d};
    return e;
}

static struct cudaPitchedPtr pitched(void *p, size_t pitch, size_t xsize, size_t ysize)
{
    struct cudaPitchedPtr r = {p, pitch, xsize, ysize};
    return r;
}

#define N 1024
#define W 100 /* bytes per row of the pitched buffer */
#define H 16

CRAC_SIM_KERNEL(fill, (unsigned *, v), (int, n), (unsigned, seed))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        v[i] = seed * 2654435761u + (unsigned)i;
}

CRAC_SIM_KERNEL(fold, (unsigned *, acc), (const unsigned *, a), (const unsigned *, b), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        acc[i] = (acc[i] ^ a[i]) + b[i];
}

static uint64_t get_u64(cudaMemPool_t p, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    CK(cudaMemPoolGetAttribute(p, a, &v));
    return v;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 40, 1, 4000);
    long ms = arg(argc, argv, 2, 40, 0, 10000);
    int n = N;
    size_t bytes = N * sizeof(unsigned);

    int supported = 0;
    CK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
    if (!supported)
        fail("memory pools not supported");
    cudaMemPool_t defpool, mine, cur;
    CK(cudaDeviceGetDefaultMemPool(&defpool, 0));
    uint64_t threshold = 64ULL << 20;
    CK(cudaMemPoolSetAttribute(defpool, cudaMemPoolAttrReleaseThreshold, &threshold));
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CK(cudaMemPoolCreate(&mine, &props));
    int no_opportunistic = 0;
    CK(cudaMemPoolSetAttribute(mine, cudaMemPoolReuseAllowOpportunistic, &no_opportunistic));
    struct cudaMemAccessDesc acc = {{cudaMemLocationTypeDevice, 0},
                                    cudaMemAccessFlagsProtReadWrite};
    CK(cudaMemPoolSetAccess(mine, &acc, 1));
    CK(cudaDeviceSetMemPool(0, mine));
    CK(cudaDeviceGetMemPool(&cur, 0));
    if (cur != mine)
        fail("current pool");

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* Managed-memory hints are accepted (one copy of managed memory: they change nothing). */
    unsigned *managed;
    CK(cudaMallocManaged((void **)&managed, bytes, cudaMemAttachGlobal));
    struct cudaMemLocation dev0 = {cudaMemLocationTypeDevice, 0};
    CK(cudaMemAdvise(managed, bytes, cudaMemAdviseSetPreferredLocation, dev0));
    CK(cudaMemPrefetchAsync(managed, bytes, dev0, 0, s));
    CK(cudaStreamAttachMemAsync(s, managed, 0, cudaMemAttachSingle));
    int read_mostly = -1, last = -5;
    void *vals[] = {&read_mostly, &last};
    size_t sizes[] = {sizeof(read_mostly), sizeof(last)};
    enum cudaMemRangeAttribute which[] = {cudaMemRangeAttributeReadMostly,
                                          cudaMemRangeAttributeLastPrefetchLocation};
    CK(cudaMemRangeGetAttributes(vals, sizes, which, 2, managed, bytes));
    if (read_mostly != 0)
        fail("managed range attributes");
    CK_ERR(cudaMemAdvise(&n, 4, cudaMemAdviseSetReadMostly, dev0), cudaErrorInvalidValue);
    CK(cudaFree(managed));
    /* Lives across every step: allocated from the default pool explicitly. */
    unsigned *d_acc;
    CK(cudaMallocFromPoolAsync((void **)&d_acc, bytes, defpool, s));
    CK(cudaMemsetAsync(d_acc, 0, bytes, s));
    /* Pitched and 3D memory, set and copied in 2D/3D. */
    unsigned char *d_pitched;
    size_t pitch = 0;
    CK(cudaMallocPitch((void **)&d_pitched, &pitch, W, H));
    if (pitch < W || pitch % 256)
        fail("pitch %zu", pitch);
    struct cudaPitchedPtr p3;
    CK(cudaMalloc3D(&p3, extent(W, H, 2)));
    struct cudaPitchedPtr q3;
    CK(cudaMalloc3D(&q3, extent(W, H, 2)));
    static unsigned char host2d[H][W], back2d[H][W], back3d[2][H][W];

    uint64_t hash = 0xcbf29ce484222325ULL;
    static unsigned h[N];
    for (long k = 1; k <= steps; k++) {
        if (get_u64(defpool, cudaMemPoolAttrReleaseThreshold) != threshold)
            fail("step %ld: release threshold", k);
        int reuse = 1;
        CK(cudaMemPoolGetAttribute(mine, cudaMemPoolReuseAllowOpportunistic, &reuse));
        if (reuse != 0)
            fail("step %ld: pool attribute lost", k);
        CK(cudaDeviceGetMemPool(&cur, 0));
        if (cur != mine)
            fail("step %ld: the device's current pool changed", k);
        if (get_u64(defpool, cudaMemPoolAttrUsedMemCurrent) != bytes ||
            get_u64(mine, cudaMemPoolAttrUsedMemCurrent) != 0)
            fail("step %ld: pool usage before %llu %llu", k,
                 (unsigned long long)get_u64(defpool, cudaMemPoolAttrUsedMemCurrent),
                 (unsigned long long)get_u64(mine, cudaMemPoolAttrUsedMemCurrent));

        unsigned *a, *b;
        CK(cudaMallocAsync((void **)&a, bytes, s)); /* from the current pool: mine */
        CK(cudaMallocFromPoolAsync((void **)&b, 2 * bytes, defpool, s));
        if (get_u64(mine, cudaMemPoolAttrUsedMemCurrent) != bytes ||
            get_u64(defpool, cudaMemPoolAttrUsedMemCurrent) != 3 * bytes)
            fail("step %ld: pool usage during", k);
        unsigned s1 = (unsigned)k, s2 = (unsigned)(k * 7);
        void *af[] = {&a, &n, &s1};
        void *bf[] = {&b, &n, &s2};
        void *ff[] = {&d_acc, &a, &b, &n};
        CK(cudaLaunchKernel((const void *)fill, d3(N / 128), d3(128), af, 0, s));
        CK(cudaLaunchKernel((const void *)fill, d3(N / 128), d3(128), bf, 0, s));
        CK(cudaLaunchKernel((const void *)fold, d3(N / 128), d3(128), ff, 0, s));
        CK(cudaFreeAsync(a, s));
        CK(cudaFreeAsync(b, s));
        CK(cudaMemcpyAsync(h, d_acc, bytes, cudaMemcpyDeviceToHost, s));

        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++)
                host2d[r][c] = (unsigned char)(r * 31 + c + k);
        CK(cudaMemset2DAsync(d_pitched, pitch, 0xff, W, H, s));
        CK(cudaMemcpy2DAsync(d_pitched, pitch, host2d, W, W - 3, H, cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy2D(back2d, W, d_pitched, pitch, W, H, cudaMemcpyDeviceToHost));
        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++)
                if (back2d[r][c] != (c < W - 3 ? host2d[r][c] : 0xff))
                    fail("step %ld: 2D copy at %d,%d", k, r, c);
        CK(cudaMemset3D(p3, (int)(k & 0x7f), extent(W, H, 2)));
        struct cudaMemcpy3DParms cp;
        memset(&cp, 0, sizeof(cp));
        cp.srcPtr = p3;
        cp.dstPtr = pitched(back3d, W, W, H);
        cp.extent = extent(W, H, 2);
        cp.kind = cudaMemcpyDeviceToHost;
        if (k % 2 == 0) {
            /* Through a second 3D buffer with a peer copy (one device: device 0 to itself). */
            struct cudaMemcpy3DPeerParms pp;
            memset(&pp, 0, sizeof(pp));
            pp.srcPtr = p3;
            pp.dstPtr = q3;
            pp.extent = extent(W, H, 2);
            CK(cudaMemcpy3DPeerAsync(&pp, s));
            CK(cudaStreamSynchronize(s));
            cp.srcPtr = q3;
        }
        CK(cudaMemcpy3D(&cp));
        for (int z = 0; z < 2; z++)
            for (int r = 0; r < H; r++)
                if (back3d[z][r][W - 1] != (unsigned char)(k & 0x7f))
                    fail("step %ld: 3D set/copy", k);

        if (get_u64(mine, cudaMemPoolAttrUsedMemCurrent) != 0 ||
            get_u64(mine, cudaMemPoolAttrUsedMemHigh) != bytes ||
            get_u64(defpool, cudaMemPoolAttrUsedMemHigh) != 3 * bytes)
            fail("step %ld: pool usage after", k);
        CK(cudaMemPoolTrimTo(mine, 0));
        hash = fnv64(hash, h, bytes);
        hash = fnv64(hash, back2d, sizeof(back2d));
        step_line(k);
        pause_ms(ms);
    }
    CK(cudaFreeAsync(d_acc, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaDeviceSetMemPool(0, defpool));
    CK(cudaMemPoolDestroy(mine));
    CK_ERR(cudaMemPoolDestroy(defpool), cudaErrorInvalidValue);
    CK(cudaFree(d_pitched));
    CK(cudaFree(p3.ptr));
    CK(cudaFree(q3.ptr));
    CK(cudaStreamDestroy(s));
    CK(cudaGetLastError());
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)hash, steps);
    return 0;
}
