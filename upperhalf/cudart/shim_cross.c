/* shim_cross.c — how the shim finds its lower-half entries, and records errors it detects itself
 * in the lower half (where CUDA's per-thread last error lives under crac). */
#include "shim.h"

#include <stddef.h>

void *shim_resolve(const char *name)
{
    if (!upper_lookup || !cross_call)
        return NULL; /* not under crac: libcrac-upper.so is not loaded */
    return upper_lookup(name);
}

cudaError_t shim_fail(cudaError_t e)
{
    static void *fn;
    void *target = __atomic_load_n(&fn, __ATOMIC_RELAXED);
    if (!target) {
        target = shim_resolve("crac_sim_record_error");
        if (!target)
            return e;
        __atomic_store_n(&fn, target, __ATOMIC_RELAXED);
    }
    return (cudaError_t)cross_call(target, (uint64_t)e, 0, 0);
}
