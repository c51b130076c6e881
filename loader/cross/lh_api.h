/* lh_api.h — building the lower-half API table the upper runtime looks up by name. */
#ifndef CRAC_LH_API_BUILD_H
#define CRAC_LH_API_BUILD_H

#include "crac_backend.h"
#include "crac_lh_api.h"

/* backend may be NULL (no device backend loaded: --device none). */
const struct crac_lh_api *lh_api_table(const struct crac_backend_info *backend, int fsgsbase);

/* The checkpoint gate (docs/ARCHITECTURE.md "Crossing"): threads inside the lower half, and the pending flag. */
volatile int32_t *lh_gate_inside(void);
volatile int32_t *lh_gate_pending(void);

#endif
