/* upper_hooks.h — running the upper runtime's named hooks (include/crac_hooks.h) from the lower
 * half at each moment of a checkpoint and a restart. */
#ifndef CRAC_UPPER_HOOKS_H
#define CRAC_UPPER_HOOKS_H

#include "crac_hooks.h"
#include "crac_registry.h"

#include <stdint.h>

/* Run EVENT's hooks (PARKED, PRE_RESUME, RESTART: every upper thread parked) with upper_fs, a
 * parked thread's TCB, as the thread pointer. 0 when there are none; else what they returned. */
int upper_hook_run(struct crac_registry *r, enum crac_event event, uint64_t upper_fs);

/* PRE_SUSPEND: ask the upper runtime's hook thread to run those hooks and wait for it (threads
 * still run). 0 when there are none; -1 when it did not answer in time; else what they returned. */
int upper_hooks_pre_suspend(struct crac_registry *r);

#endif
