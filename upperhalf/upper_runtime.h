/* upper_runtime.h — state of the upper runtime, the library injected into the upper half.
 * It lives in upper-half memory, so it is saved with the upper half. */
#ifndef CRAC_UPPER_RUNTIME_H
#define CRAC_UPPER_RUNTIME_H

#include "crac_lh_api.h"
#include "crac_registry.h"

#include <stdint.h>
#include <sys/types.h>

struct upper_runtime {
    const struct crac_lh_api *api; /* NULL when not running under the crac loader */
    pid_t main_tid;
    long pthread_tid_offset; /* offset of the tid field in glibc's struct pthread, -1 unknown */
};

extern struct upper_runtime crac_upper;
extern struct crac_registry crac_registry;

/* Fill the registry's suspend handler and restorer (suspend.c). */
void suspend_register(void);
/* In the suspend handler: note this thread's queued signals in the manager's pending_buf and put
 * them back as they were (suspend_pending.c). TLS-free. */
void suspend_note_pending(void);

/* Look up a lower-half entry by name; NULL when the lower half does not export it. */
void *upper_lookup(const char *name);

/* Crossing: call a lower-half function with this thread's lower TCB in fs. */
uint64_t cross_call(void *fn, uint64_t a0, uint64_t a1, uint64_t a2);
/* The same between cross_gate_enter() and cross_gate_leave(). */
uint64_t cross_call_entered(void *fn, uint64_t a0, uint64_t a1, uint64_t a2);

long discover_tid_offset(void);

/* The checkpoint gate around any call into lower-half code (crossing.c). */
void cross_gate_enter(void);
void cross_gate_leave(void);

/* Redirect the upper libc's mmap family to the lower half's emulations (fastpath.c). */
void fastpath_install(void);

/* 1 when this thread is inside a dmtcp_disable_ckpt() section (dmtcp_api.c). */
int upper_sections_held(void);

#endif
