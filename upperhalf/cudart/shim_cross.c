/* shim_cross.c — how the shim finds its lower-half entries, and records errors it detects itself
 * in the lower half (where CUDA's per-thread last error lives under crac). */
#include "shim.h"

#include "crac_registry.h"

#include <stddef.h>

void *shim_resolve(const char *name)
{
    if (!upper_lookup || !cross_call)
        return NULL; /* not under crac: libcrac-upper.so is not loaded */
    return upper_lookup(name);
}

/* libcrac-upper.so's registry: its lower_epoch moves at every restart. */
extern struct crac_registry crac_registry __attribute__((weak));

void *shim_entry(struct shim_entry_cache *cache, const char *name)
{
    int32_t epoch =
        &crac_registry ? __atomic_load_n(&crac_registry.lower_epoch, __ATOMIC_ACQUIRE) : 0;
    void *fn = __atomic_load_n(&cache->fn, __ATOMIC_ACQUIRE);
    if (__builtin_expect(fn && __atomic_load_n(&cache->epoch, __ATOMIC_RELAXED) == epoch, 1))
        return fn;
    fn = shim_resolve(name);
    __atomic_store_n(&cache->epoch, epoch, __ATOMIC_RELAXED);
    __atomic_store_n(&cache->fn, fn, __ATOMIC_RELEASE);
    return fn;
}

uint64_t shim_cross(struct shim_entry_cache *cache, const char *name, uint64_t a0, uint64_t a1,
                    uint64_t a2, int *found)
{
    if (!cross_call_entered || !cross_gate_enter || !cross_gate_leave) {
        *found = 0;
        return 0;
    }
    cross_gate_enter();
    void *fn = shim_entry(cache, name);
    uint64_t r = fn ? cross_call_entered(fn, a0, a1, a2) : 0;
    cross_gate_leave();
    *found = fn != NULL;
    return r;
}

cudaError_t shim_fail(cudaError_t e)
{
    static struct shim_entry_cache cache;
    int found;
    uint64_t r = shim_cross(&cache, "crac_sim_record_error", (uint64_t)e, 0, 0, &found);
    return found ? (cudaError_t)r : e;
}
