/* hooks.c — what libraries in the upper half (the libcudart shim) ask to run at a checkpoint, once
 * every thread is parked, and at a restart, before any thread resumes. The lower half calls these
 * on one of its threads with a parked thread's TCB, so errno is saved around the callbacks. */
#include "crac.h"

#include "upper_runtime.h"

#include <errno.h>

#define MAX_HOOKS 8

typedef int (*crac_hook)(void);

static crac_hook at_checkpoint[MAX_HOOKS], at_restart[MAX_HOOKS];
static int n_checkpoint, n_restart;

static int run_all(crac_hook *hooks, int n)
{
    int saved = errno, rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = hooks[i]();
    errno = saved;
    return rc;
}

static int checkpoint_hooks(void) { return run_all(at_checkpoint, n_checkpoint); }
static int restart_hooks(void) { return run_all(at_restart, n_restart); }

/* Exported for the shim: fn returns 0, or non-zero to abandon the checkpoint / the restart. */
int crac_upper_at_checkpoint(crac_hook fn)
{
    if (n_checkpoint >= MAX_HOOKS)
        return -1;
    at_checkpoint[n_checkpoint++] = fn;
    crac_registry.ckpt_hook = (uint64_t)checkpoint_hooks;
    return 0;
}

int crac_upper_at_restart(crac_hook fn)
{
    if (n_restart >= MAX_HOOKS)
        return -1;
    at_restart[n_restart++] = fn;
    crac_registry.restart_hook = (uint64_t)restart_hooks;
    return 0;
}

/* The shim's device registry (struct crac_dev_ranges), read by the lower half at checkpoints. */
void crac_upper_set_device_ranges(const void *ranges)
{
    crac_registry.device_ranges = (uint64_t)ranges;
}
