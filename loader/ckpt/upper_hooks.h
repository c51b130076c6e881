/* upper_hooks.h — calling the upper runtime's checkpoint and restart hooks. */
#ifndef CRAC_UPPER_HOOKS_H
#define CRAC_UPPER_HOOKS_H

#include "crac_registry.h"

#include <stdint.h>

/* Run fn (an upper function returning 0 or an error) with upper_fs as the thread pointer. */
int upper_hook_run(struct crac_registry *r, uint64_t fn, uint64_t upper_fs);

#endif
