/* sim_backend.c — the sim as a lower-half device backend (libcrac-sim1.so / libcrac-sim2.so): its
 * one exported symbol, crac_backend_init, and the table of entries the upper shim looks up. */
#include "sim.h"

#include "crac_backend.h"
#include "cudart_lower_gen.h" /* generated: sim_lh_gen_entries */

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* crac_lh_dev_map(addr, size, kind): map device (1) or managed (2) memory at an address crac
 * chose inside D; the restart path recreates allocations with it. */
static uint64_t lh_dev_map(uint64_t addr, uint64_t size, uint64_t kind)
{
    if (kind != SIM_MEM_DEVICE && kind != SIM_MEM_MANAGED)
        return cudaErrorInvalidValue;
    return sim_mem_map(addr, size, (int)kind);
}

static uint64_t lh_dev_unmap(uint64_t addr, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    return sim_mem_unmap(addr, 0, NULL);
}

static uint64_t lh_debug_tls(uint64_t a0, uint64_t a1, uint64_t a2)
{
    (void)a0, (void)a1, (void)a2;
    return (uint64_t)(uintptr_t)sim_last_error_slot();
}

static uint64_t lh_debug_block_signal(uint64_t timeout_ms, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    return (uint64_t)sim_block_until_signal((long)timeout_ms);
}

/* Errors the upper shim detects itself (out of virtual handles, ...) still become the thread's
 * last error, which lives here. */
static uint64_t lh_record_error(uint64_t e, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    return sim_ret((cudaError_t)e);
}

static uint64_t lh_sim_version(uint64_t a0, uint64_t a1, uint64_t a2)
{
    (void)a0, (void)a1, (void)a2;
    return CRAC_SIM_VERSION;
}

static uint64_t lh_event_timestamp(uint64_t h, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    return (uint64_t)sim_event_timestamp((cudaEvent_t)(uintptr_t)h);
}

static uint64_t lh_event_restore(uint64_t h, uint64_t ts_ns, uint64_t a2)
{
    (void)a2;
    return (uint64_t)sim_event_restore((cudaEvent_t)(uintptr_t)h, (int64_t)ts_ns);
}

/* Device state for checkpoints (crac_backend_info): the sim's device memory is host memory
 * mapped at the device address, so copies are memcpy. */
static int bk_quiesce(void)
{
    pthread_mutex_lock(&sim_lock);
    sim_wait_all_idle();
    pthread_mutex_unlock(&sim_lock);
    return 0;
}

static int bk_map(uint64_t addr, uint64_t size, int kind)
{
    return (int)sim_mem_map(addr, size, kind);
}

static int bk_read(uint64_t addr, void *dst, uint64_t len)
{
    memcpy(dst, (const void *)(uintptr_t)addr, len);
    return 0;
}

static const void *bk_host_view(uint64_t addr, uint64_t len)
{
    (void)len;
    return (const void *)(uintptr_t)addr;
}

static int bk_write(uint64_t addr, const void *src, uint64_t len)
{
    /* Restore writes whole extents into fresh device mappings: fault them in with one call
     * rather than one fault per page during the copy. */
    madvise((void *)(uintptr_t)addr, len, MADV_POPULATE_WRITE);
    memcpy((void *)(uintptr_t)addr, src, len);
    return 0;
}

/* cudaapi: graphs as bytes for checkpoints, and back (sim_graph.c). */
static uint64_t lh_graph_export(uint64_t h, uint64_t buf, uint64_t cap)
{
    return sim_graph_export(h, (void *)(uintptr_t)buf, cap);
}

static uint64_t lh_graph_import(uint64_t buf, uint64_t len, uint64_t a2)
{
    (void)a2;
    return sim_graph_import((const void *)(uintptr_t)buf, len);
}

static const struct crac_lh_entry own_entries[] = {
    {"crac_lh_graph_export", (void *)lh_graph_export},
    {"crac_lh_graph_import", (void *)lh_graph_import},
    {"crac_lh_event_timestamp", (void *)lh_event_timestamp},
    {"crac_lh_event_restore", (void *)lh_event_restore},
    {"crac_lh_dev_map", (void *)lh_dev_map},
    {"crac_lh_dev_unmap", (void *)lh_dev_unmap},
    {"crac_sim_debug_tls", (void *)lh_debug_tls},
    {"crac_sim_debug_block_signal", (void *)lh_debug_block_signal},
    {"crac_sim_version", (void *)lh_sim_version},
    {"crac_sim_record_error", (void *)lh_record_error},
    {"crac_lh_kernels_path", (void *)sim_lh_kernels_path},
};

#define N_OWN (sizeof(own_entries) / sizeof(own_entries[0]))

static struct crac_lh_entry entries[SIM_LH_GEN_N_ENTRIES + N_OWN];
static struct crac_backend_info info;

__attribute__((visibility("default"))) const struct crac_backend_info *
crac_backend_init(const struct crac_backend_host *host)
{
    struct sim_host h = {host->device_window_start, host->device_window_end,
                         host->register_lower_thread, host->unregister_lower_thread};
    if (sim_init(&h) != 0) {
        fprintf(stderr, "crac: error: the sim backend could not initialise (out of memory)\n");
        return NULL;
    }
    memcpy(entries, sim_lh_gen_entries, sizeof(sim_lh_gen_entries));
    memcpy(entries + SIM_LH_GEN_N_ENTRIES, own_entries, sizeof(own_entries));
    info.abi = CRAC_BACKEND_ABI;
    info.name = "sim";
    info.version = "sim" STR(CRAC_SIM_VERSION);
    info.driver_version = SIM_DRIVER_VERSION;
    info.entries = entries;
    info.n_entries = SIM_LH_GEN_N_ENTRIES + N_OWN;
    info.quiesce = bk_quiesce;
    info.map = bk_map;
    info.read = bk_read;
    info.write = bk_write;
    info.host_view = bk_host_view;
    return &info;
}
