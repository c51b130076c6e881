/* shim.h — internals of the upper shim libcudart.so.13: virtual handles, the device-address
 * allocator, the crossing helpers. All state lives in upper-half memory (saved with it). */
#ifndef CRAC_SHIM_H
#define CRAC_SHIM_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

/* From libcrac-upper.so (preloaded first under crac). Weak, so that the shim still loads (and
 * answers cudaErrorInsufficientDriver) when something loads it outside crac. */
extern uint64_t cross_call(void *fn, uint64_t a0, uint64_t a1, uint64_t a2) __attribute__((weak));
extern void *upper_lookup(const char *name) __attribute__((weak));
extern uint64_t cross_call_entered(void *fn, uint64_t a0, uint64_t a1, uint64_t a2)
    __attribute__((weak));
extern void cross_gate_enter(void) __attribute__((weak));
extern void cross_gate_leave(void) __attribute__((weak));

/* The checkpoint gate around a whole shim entry (re-entrant; nothing outside crac). */
static inline void shim_gate_enter(void)
{
    if (cross_gate_enter)
        cross_gate_enter();
}

static inline void shim_gate_leave(void)
{
    if (cross_gate_leave)
        cross_gate_leave();
}

/* The lower-half entry called name, or NULL (not under crac, or not exported). */
void *shim_resolve(const char *name);

/* ---- nvcc's variables and kernels library (shim_mem.c, shim_fatbin.c) ---- */
uint64_t shim_dev_alloc(size_t size, int managed); /* a D address, or 0 */
void shim_dev_free(uint64_t addr);
/* Tell the lower half where the kernels library is (before registering a fat binary). */
void shim_kernels_announce(void);
void shim_kernels_resend(void); /* from the restart hook: no waiting on other threads */
/* A restart: register the variables of module handle again (after its functions). */
void shim_vars_restore(uint64_t module, void **backend);

/* A cached lookup that a restart invalidates (a new lower half has new addresses). */
struct shim_entry_cache {
    void *fn;
    int32_t epoch;
};
void *shim_entry(struct shim_entry_cache *cache, const char *name);
/* Cross into the entry called name: the gate first, then the lookup (a thread that waited at the
 * gate may have been restarted on a new lower half), then the call. *found is 0 when the entry
 * does not exist (not under crac). */
uint64_t shim_cross(struct shim_entry_cache *cache, const char *name, uint64_t a0, uint64_t a1,
                    uint64_t a2, int *found);

/* Record e as the calling thread's last error in the lower half (for errors the shim itself
 * detects), and return it. */
cudaError_t shim_fail(cudaError_t e);

/* ---- virtual handles (vhandle.c) ---- */
enum {
    SHIM_VH_STREAM = 1,
    SHIM_VH_EVENT = 2,
    SHIM_VH_MODULE = 3,
    SHIM_VH_GRAPH = 4,
    SHIM_VH_GEXEC = 5
};
/* A value no backend accepts as a handle: what an unknown virtual handle translates to, so the
 * backend answers cudaErrorInvalidResourceHandle (and records it) itself. */
#define SHIM_BAD_HANDLE 0xbadbadbadbad0000ULL

/* The backend handle behind virtual handle v (streams 0, 1, 2 are the default streams and pass
 * through), or SHIM_BAD_HANDLE. Lock-free. */
uint64_t shim_vh_backend(int kind, uint64_t v);
/* Wrap a new backend handle; *out receives the virtual handle. cudaSuccess or out of memory. */
cudaError_t shim_vh_wrap(int kind, uint64_t backend, uint64_t *out);
/* The same, remembering what the object was created with (a restart creates it again). */
cudaError_t shim_vh_wrap_flags(int kind, uint64_t backend, uint32_t flags, uint64_t recipe,
                               uint64_t *out);

/* A live handle as the checkpoint and restart hooks see it: they may change backend and saved. */
struct shim_vh_view {
    uint64_t handle; /* the program's */
    uint64_t backend;
    uint32_t flags;
    int64_t saved;
    uint64_t recipe;
};
int shim_vh_foreach(int kind, int (*fn)(struct shim_vh_view *v, void *ctx), void *ctx);
void shim_vh_release(int kind, uint64_t v);
void shim_vh_reset(int kind); /* cudaDeviceReset: every handle of this kind is gone */

/* ---- cudaapi (shim_more.c, shim_hostfn.c) ---- */
/* Stream captures going on (host functions queued meanwhile may be replayed by a graph). */
extern int32_t shim_captures;
/* A host function a graph runs: the trampoline and its argument, never recycled. */
cudaError_t shim_hostfn_persistent(cudaHostFn_t fn, void *data, cudaHostFn_t *tramp, void **arg);
void shim_registered_reset(void); /* cudaDeviceReset: no host range is registered any more */

#endif
