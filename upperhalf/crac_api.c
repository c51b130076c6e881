/* crac_api.c — the C API of include/crac.h, exported by the upper runtime so programs find it at
 * run time without linking against crac (DMTCP's names are in dmtcp_api.c). */
#include "crac.h"

#include "upper_runtime.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

int crac_is_enabled(void) { return crac_upper.api != NULL; }

int crac_generation(void) { return crac_upper.api ? crac_registry.generation : 0; }

int crac_checkpoint(void)
{
    if (!crac_upper.api)
        return CRAC_NOT_PRESENT;
    void *request = upper_lookup("crac_lh_request_checkpoint");
    if (!request)
        return -1;
    if (upper_sections_held()) {
        /* Inside this thread's own dmtcp_disable_ckpt() section the checkpoint cannot start
         * before the section ends: ask for it, and say it is not taken yet. */
        cross_call(request, 0, 0, 0);
        return 0;
    }
    struct crac_registry *r = &crac_registry;
    int32_t restarts = r->restarts, failures = r->failures;
    int32_t before = __atomic_load_n(&r->attempts, __ATOMIC_ACQUIRE);
    cross_call(request, 0, 0, 0);
    /* This thread is suspended and released by that checkpoint like every other; then the
     * attempt count has moved (in this process, or in the restarted one). */
    int32_t now;
    while ((now = __atomic_load_n(&r->attempts, __ATOMIC_ACQUIRE)) == before)
        syscall(SYS_futex, &r->attempts, FUTEX_WAIT_PRIVATE, now, NULL, NULL, 0);
    if (r->restarts != restarts)
        return CRAC_AFTER_RESTART;
    return r->failures != failures ? -1 : CRAC_AFTER_CHECKPOINT;
}

int crac_restart_count(void) { return crac_upper.api ? crac_registry.restarts : 0; }

int crac_wait_for_restart(int seen)
{
    if (!crac_upper.api)
        return -1;
    struct crac_registry *r = &crac_registry;
    /* Every checkpoint attempt, and the restart that follows one, moves `attempts` and wakes
     * its waiters (crac_checkpoint relies on the same); a wait interrupted by the checkpoint is
     * resumed after the restart and sees the new count. */
    for (;;) {
        int32_t attempts = __atomic_load_n(&r->attempts, __ATOMIC_ACQUIRE);
        int32_t restarts = __atomic_load_n(&r->restarts, __ATOMIC_ACQUIRE);
        if (restarts != seen)
            return restarts;
        syscall(SYS_futex, &r->attempts, FUTEX_WAIT_PRIVATE, attempts, NULL, NULL, 0);
    }
}
