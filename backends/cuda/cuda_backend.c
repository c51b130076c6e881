/* cuda_backend.c — the real CUDA runtime as a lower-half device backend (libcrac-cuda13.so): loads
 * NVIDIA's libcudart (and the driver's memory API), exports crac_backend_init and the entries. */
#include "cuda_bk.h"

#include "crac_backend.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t lh_dev_map(uint64_t addr, uint64_t size, uint64_t kind)
{
    if (kind == CUDA_BK_DEVICE)
        return cuda_vmm_map(addr, size);
    if (kind == CUDA_BK_MANAGED)
        return cuda_managed_map(addr, size);
    return cudaErrorInvalidValue;
}

static uint64_t lh_dev_unmap(uint64_t addr, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    return cuda_vmm_unmap(addr);
}

/* The hardware's event times cannot be carried across a restart: an event restored as recorded
 * is recorded again on the fresh device (its elapsed times restart from there; docs/CUDA.md). */
static uint64_t lh_event_timestamp(uint64_t h, uint64_t a1, uint64_t a2)
{
    (void)h, (void)a1, (void)a2;
    return 0;
}

static uint64_t lh_event_restore(uint64_t h, uint64_t ts_ns, uint64_t a2)
{
    (void)ts_ns, (void)a2;
    if (!cuda_real.cudaEventRecord)
        return cudaErrorNotSupported;
    return cuda_real.cudaEventRecord((cudaEvent_t)(uintptr_t)h, 0);
}

static uint64_t lh_record_error(uint64_t e, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    cuda_bk_record_error((cudaError_t)e);
    return e;
}

/* Device state for checkpoints (crac_backend_info). */
static int bk_quiesce(void)
{
    if (cuda_bk_context() != cudaSuccess)
        return 0; /* no usable device: nothing can be in flight */
    cudaError_t e = cuda_real.cudaDeviceSynchronize();
    cuda_io_reset(); /* nothing read ahead for an earlier checkpoint is served for this one */
    if (e == cudaSuccess && cuda_vars_to_shadows() != 0)
        e = cudaErrorUnknown;
    return (int)e;
}

static int bk_map(uint64_t addr, uint64_t size, int kind)
{
    cudaError_t e = cuda_bk_context();
    if (e != cudaSuccess)
        return (int)e;
    return (int)lh_dev_map(addr, size, (uint64_t)kind);
}

static const struct crac_lh_entry own_entries[] = {
    {"crac_lh_event_timestamp", (void *)lh_event_timestamp},
    {"crac_lh_event_restore", (void *)lh_event_restore},
    {"crac_lh_dev_map", (void *)lh_dev_map},
    {"crac_lh_dev_unmap", (void *)lh_dev_unmap},
    {"crac_sim_record_error", (void *)lh_record_error},
    {"crac_lh_init_module", (void *)cuda_vars_init_module},
};

#define N_OWN (sizeof(own_entries) / sizeof(own_entries[0]))

static struct crac_lh_entry entries[CUDA_LH_GEN_N_ENTRIES + N_OWN];
static struct crac_backend_info info;
static char version[64]; /* the manifest keeps 31 characters: this fits in them */

__attribute__((visibility("default"))) const struct crac_backend_info *
crac_backend_init(const struct crac_backend_host *host)
{
    const char *path = host->runtime_path;
    if (!path || !*path) {
        fprintf(stderr, "crac: error: the cuda backend needs the CUDA runtime's path "
                        "(crac launch --cuda-runtime PATH|12|13)\n");
        return NULL;
    }
    void *runtime = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!runtime) {
        fprintf(stderr, "crac: error: cannot load the CUDA runtime %s: %s\n", path, dlerror());
        return NULL;
    }
    char missing[512];
    int n_missing = cuda_real_resolve(runtime, missing, sizeof(missing));
    if (n_missing && getenv("CRAC_DEBUG"))
        fprintf(stderr, "crac: debug: %s lacks %d function(s): %s\n", path, n_missing, missing);
    cuda_mem_resolve(runtime);
    cuda_vars_resolve(runtime);
    char why[256];
    if (cuda_vmm_load(why, sizeof(why)) != 0 && getenv("CRAC_DEBUG"))
        fprintf(stderr, "crac: debug: no device memory under crac: %s\n", why);
    cuda_vmm_window(host->device_window_start, host->device_window_end);
    int rt = 0, drv = 0;
    void *get_rt = dlsym(runtime, "cudaRuntimeGetVersion");
    if (get_rt)
        ((cudaError_t (*)(int *))get_rt)(&rt);
    if (cuda_real.cudaDriverGetVersion)
        cuda_real.cudaDriverGetVersion(&drv);
    /* Recorded in each image's manifest (31 characters at most): what a restart ran on. */
    snprintf(version, sizeof(version), "runtime %d.%d driver %d.%d", (rt / 1000) % 100,
             rt % 1000 / 10, (drv / 1000) % 100, drv % 1000 / 10);
    memcpy(entries, cuda_lh_gen_entries, sizeof(cuda_lh_gen_entries));
    memcpy(entries + CUDA_LH_GEN_N_ENTRIES, own_entries, sizeof(own_entries));
    info.abi = CRAC_BACKEND_ABI;
    info.name = "cuda";
    info.version = version;
    info.driver_version = drv;
    info.entries = entries;
    info.n_entries = CUDA_LH_GEN_N_ENTRIES + N_OWN;
    info.quiesce = bk_quiesce;
    info.map = bk_map;
    info.read = cuda_io_read;
    info.write = cuda_io_write;
    info.host_view = cuda_io_host_view;
    info.flush = cuda_io_flush;
    return &info;
}
