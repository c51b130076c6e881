/* sim_kernel.c — modules (fat binaries), registered functions and kernel launches of the sim. A
 * sim kernel's fat binary carries a crac_sim_kernel_desc; launching copies the arguments and runs
 * the kernel's block function over the grid on the stream's worker. */
#include "sim.h"

#include "crac_kernels_abi.h"

#include <string.h>

struct sim_module {
#if CRAC_SIM_VERSION == 1
    uint32_t index, gen;
    int live;
    int is_sim;
    const struct crac_sim_kernel_desc *desc;
#else
    const struct crac_sim_kernel_desc *desc;
    int is_sim, live;
    uint32_t gen, index;
    uint64_t reserved;
#endif
};

struct sim_func {
    const void *host_fun; /* NULL: empty; TOMBSTONE: removed */
    uint32_t module_index;
    const struct crac_sim_kernel_desc *desc; /* NULL for a foreign (GPU) module */
    const struct crac_kernel_entry *kentry;  /* nvcc module: the kernels library's code */
    const char *device_name;                 /* nvcc's (mangled) name, program memory */
    int reported;                            /* the missing-code line was printed */
};

#define FUNC_SLOTS 8192 /* power of two */
#define TOMBSTONE ((const void *)1)

static struct sim_module *modules;
static struct sim_func *funcs;

int sim_modules_init(void)
{
    modules = bk_alloc(SIM_MAX_MODULES * sizeof(*modules));
    funcs = bk_alloc(FUNC_SLOTS * sizeof(*funcs));
    return modules && funcs ? 0 : -1;
}

static uint32_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x & (FUNC_SLOTS - 1);
}

/* Caller holds sim_lock. */
static struct sim_func *func_find(const void *host_fun)
{
    uint32_t h = hash_ptr(host_fun);
    for (uint32_t n = 0; n < FUNC_SLOTS; n++, h = (h + 1) & (FUNC_SLOTS - 1)) {
        if (funcs[h].host_fun == NULL)
            return NULL;
        if (funcs[h].host_fun == host_fun)
            return &funcs[h];
    }
    return NULL;
}

/* cudaapi: the kernel registered for host_fun (sim_attr.c's function queries). Caller holds
 * sim_lock. cudaErrorInvalidDeviceFunction when unknown; *desc NULL for a GPU-only module. */
cudaError_t sim_kernel_lookup(const void *host_fun, const struct crac_sim_kernel_desc **desc)
{
    struct sim_func *f = host_fun ? func_find(host_fun) : NULL;
    if (!f)
        return cudaErrorInvalidDeviceFunction;
    *desc = f->desc;
    return cudaSuccess;
}

static struct sim_module *module_get(void **handle)
{
    uint32_t gen;
    long i = sim_handle_decode(SIM_H_MODULE, (uint64_t)(uintptr_t)handle, modules, sizeof(*modules),
                               SIM_MAX_MODULES, &gen);
    if (i < 0 || !modules[i].live || !sim_handle_gen_matches(gen, modules[i].gen))
        return NULL;
    return &modules[i];
}

long sim_module_index(void **handle)
{
    struct sim_module *m = module_get(handle);
    return m ? (long)m->index : -1;
}

void **sim___cudaRegisterFatBinary(void *fatCubin)
{
    const struct crac_sim_fatbin_wrapper *w = fatCubin;
    if (!w || w->magic != CRAC_SIM_FATBIN_WRAPPER_MAGIC)
        return NULL;
    pthread_mutex_lock(&sim_lock);
    uint32_t i = 0;
    while (i < SIM_MAX_MODULES && modules[i].live)
        i++;
    void **handle = NULL;
    if (i < SIM_MAX_MODULES) {
        struct sim_module *m = &modules[i];
        uint32_t gen = m->gen + 1;
        memset(m, 0, sizeof(*m));
        m->index = i;
        m->gen = gen;
        m->live = 1;
        const struct crac_sim_kernel_desc *d = w->data;
        if (d && memcmp(d->magic, CRAC_SIM_DESC_MAGIC, 8) == 0 && d->abi == CRAC_SIM_ABI &&
            d->n_params <= CRAC_SIM_MAX_PARAMS) {
            m->is_sim = 1;
            m->desc = d;
        }
        handle =
            (void **)(uintptr_t)sim_handle_encode(SIM_H_MODULE, modules, sizeof(*modules), i, gen);
    }
    pthread_mutex_unlock(&sim_lock);
    return handle;
}

void sim___cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }

void sim___cudaUnregisterFatBinary(void **fatCubinHandle)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_module *m = module_get(fatCubinHandle);
    if (m) {
        /* Kernels of this module may still be queued: let them finish first. */
        sim_wait_all_idle();
        for (uint32_t i = 0; i < FUNC_SLOTS; i++)
            if (funcs[i].host_fun > TOMBSTONE && funcs[i].module_index == m->index)
                funcs[i].host_fun = TOMBSTONE;
        sim_vars_drop_module(m->index);
        m->live = 0;
    }
    pthread_mutex_unlock(&sim_lock);
}

void sim___cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                                dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)deviceFun, (void)thread_limit, (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
    if (!hostFun)
        return;
    pthread_mutex_lock(&sim_lock);
    struct sim_module *m = module_get(fatCubinHandle);
    if (m && !func_find(hostFun)) {
        uint32_t h = hash_ptr(hostFun);
        for (uint32_t n = 0; n < FUNC_SLOTS; n++, h = (h + 1) & (FUNC_SLOTS - 1)) {
            if (funcs[h].host_fun <= TOMBSTONE) {
                funcs[h].host_fun = hostFun;
                funcs[h].module_index = m->index;
                funcs[h].desc = m->is_sim ? m->desc : NULL;
                /* nvcc's own fat binary: the CPU code comes from the kernels library. */
                funcs[h].kentry = m->is_sim ? NULL : sim_kernels_find(deviceName);
                funcs[h].device_name = deviceName;
                funcs[h].reported = 0;
                break;
            }
        }
    }
    pthread_mutex_unlock(&sim_lock);
}

/* Per-thread launch configuration, as nvcc's <<<...>>> host stubs use it. */
#define CONFIG_DEPTH 8
struct call_config {
    dim3 grid, block;
    size_t shared;
    struct CUstream_st *stream;
};
static __thread struct call_config config_stack[CONFIG_DEPTH];
static __thread int config_depth;

unsigned sim___cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                         struct CUstream_st *stream)
{
    if (config_depth >= CONFIG_DEPTH)
        return 1;
    config_stack[config_depth++] = (struct call_config){gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t sim___cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                           void *stream)
{
    if (config_depth == 0)
        return sim_ret(cudaErrorMissingConfiguration);
    struct call_config c = config_stack[--config_depth];
    if (gridDim)
        *gridDim = c.grid;
    if (blockDim)
        *blockDim = c.block;
    if (sharedMem)
        *sharedMem = c.shared;
    if (stream)
        *(struct CUstream_st **)stream = c.stream;
    return cudaSuccess;
}

static int bad_dims(dim3 g, dim3 b)
{
    uint64_t threads = (uint64_t)b.x * b.y * b.z;
    return !g.x || !g.y || !g.z || !b.x || !b.y || !b.z || threads > 1024 || b.z > 64 ||
           g.y > 65535 || g.z > 65535 || g.x > 0x7fffffffU;
}

/* Copies the arguments the way a driver does at launch (args may be reused at once). */
int sim_kernel_copy_args(struct sim_kernel_launch *k, void **args)
{
    uint32_t n = k->kentry ? k->kentry->n_params : k->desc->n_params;
    const uint32_t *size = k->kentry ? k->kentry->param_size : k->desc->param_size;
    const uint32_t *alignof_ = k->kentry ? k->kentry->param_align : k->desc->param_align;
    size_t off[CRAC_KERNEL_MAX_PARAMS], total = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t align = alignof_[i] ? alignof_[i] : 1;
        total = (total + align - 1) / align * align;
        off[i] = total;
        total += size[i];
    }
    k->argbuf_size = total ? total : 1;
    k->argbuf = bk_alloc(k->argbuf_size);
    if (!k->argbuf)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(k->argbuf + off[i], args[i], size[i]);
        k->argv[i] = k->argbuf + off[i];
    }
    return 0;
}

/* The code a launch of host_fun runs (caller holds sim_lock): a CRAC_SIM_KERNEL descriptor, or
 * an nvcc kernel's entry in the kernels library (looked up again when it was not there at
 * registration: the library path may have come later). Launches and graph kernel nodes share it,
 * so a captured kernel fails exactly as a launched one would. */
cudaError_t sim_kernel_code(const void *host_fun, const struct crac_sim_kernel_desc **desc,
                            const struct crac_kernel_entry **kentry)
{
    struct sim_func *f = host_fun ? func_find(host_fun) : NULL;
    if (!f)
        return cudaErrorInvalidDeviceFunction;
    if (!f->desc && !f->kentry && f->device_name &&
        !(f->kentry = sim_kernels_find(f->device_name))) {
        /* nvcc's GPU code and no CPU code for it (no library, or the kernel is not in it). */
        if (!f->reported)
            sim_kernels_report_missing(f->device_name);
        f->reported = 1;
        return cudaErrorInvalidDeviceFunction;
    }
    if (!f->desc && !f->kentry)
        return cudaErrorNoKernelImageForDevice; /* a GPU fat binary: nothing the sim can run */
    *desc = f->desc;
    *kentry = f->desc ? NULL : f->kentry;
    return cudaSuccess;
}

uint32_t sim_kernel_n_params(const struct sim_kernel_launch *k)
{
    return k->kentry ? k->kentry->n_params : k->desc->n_params;
}

cudaError_t sim_cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                 size_t sharedMem, cudaStream_t stream)
{
    SIM_ENTER();
    if (bad_dims(gridDim, blockDim) || sharedMem > 228 * 1024)
        return sim_ret(cudaErrorInvalidConfiguration);
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    const struct crac_sim_kernel_desc *desc = NULL;
    const struct crac_kernel_entry *kentry = NULL;
    cudaError_t e = s ? sim_kernel_code(func, &desc, &kentry) : cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess && (desc ? desc->n_params : kentry->n_params) && !args)
        e = cudaErrorInvalidValue;
    struct sim_op *op = NULL;
    if (e == cudaSuccess && !(op = sim_op_new(OP_KERNEL)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        struct sim_kernel_launch *k = &op->u.kernel;
        k->desc = desc;
        k->kentry = kentry;
        k->func = func;
        k->grid = gridDim;
        k->block = blockDim;
        k->shared = sharedMem;
        if (sim_kernel_copy_args(k, args) != 0 || !sim_stream_enqueue(s, op, NULL))
            e = cudaErrorMemoryAllocation;
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

void sim_kernel_free(struct sim_kernel_launch *k)
{
    if (k->argbuf)
        bk_free(k->argbuf, k->argbuf_size);
    k->argbuf = NULL;
}

/* A kernel from a kernels library: the library runs each block's threads (as fibers). */
static void run_lib_kernel(struct sim_kernel_launch *k)
{
    struct crac_kernel_block b;
    memset(&b, 0, sizeof(b));
    b.grid = k->grid;
    b.block = k->block;
    /* One dynamic shared memory buffer serves the launch: its blocks run one after another. */
    b.shared_size = k->shared;
    b.shared = k->shared ? bk_alloc(k->shared) : NULL;
    if (k->shared && !b.shared) {
        sim_set_sticky(cudaErrorLaunchOutOfResources);
        return;
    }
    int r = CRAC_KERNEL_OK;
    for (unsigned z = 0; z < k->grid.z && r == CRAC_KERNEL_OK; z++)
        for (unsigned y = 0; y < k->grid.y && r == CRAC_KERNEL_OK; y++)
            for (unsigned x = 0; x < k->grid.x && r == CRAC_KERNEL_OK; x++) {
                b.block_idx.x = x;
                b.block_idx.y = y;
                b.block_idx.z = z;
                r = sim_kernels_run_block(k->kentry, k->argv, &b);
            }
    if (b.shared)
        bk_free(b.shared, k->shared);
    if (r == CRAC_KERNEL_NO_MEMORY)
        sim_set_sticky(cudaErrorLaunchOutOfResources);
    else if (r != CRAC_KERNEL_OK)
        sim_set_sticky(cudaErrorLaunchFailure);
}

void sim_kernel_run(struct sim_kernel_launch *k)
{
    if (k->kentry) {
        run_lib_kernel(k);
        return;
    }
    volatile int fault = CRAC_SIM_FAULT_NONE;
    void *shared = k->shared ? bk_alloc(k->shared) : NULL;
    if (k->shared && !shared) {
        sim_set_sticky(cudaErrorLaunchOutOfResources);
        return;
    }
    struct crac_sim_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.gridDim = k->grid;
    ctx.blockDim = k->block;
    ctx.shared = shared;
    ctx.fault = &fault;
    for (unsigned z = 0; z < k->grid.z && !fault; z++)
        for (unsigned y = 0; y < k->grid.y && !fault; y++)
            for (unsigned x = 0; x < k->grid.x && !fault; x++) {
                ctx.blockIdx.x = x;
                ctx.blockIdx.y = y;
                ctx.blockIdx.z = z;
                k->desc->block(&ctx, k->argv);
            }
    if (shared)
        bk_free(shared, k->shared);
    if (fault)
        sim_set_sticky(fault == CRAC_SIM_FAULT_ADDRESS ? cudaErrorIllegalAddress
                                                       : cudaErrorLaunchFailure);
}
