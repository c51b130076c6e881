/* crac_hooks.h — named, ordered hooks an upper-half library (the libcudart shim, MPI wrappers)
 * registers with the upper runtime to take part in a checkpoint and a restart (docs/DECISIONS.md,
 * "Hooks"). Also the control block the lower half reads to run them (crac_registry.h). */
#ifndef CRAC_HOOKS_H
#define CRAC_HOOKS_H

#include <stdint.h>

/* The moments of a checkpoint and a restart, in the order they happen.
 *
 * CRAC_EV_PRE_SUSPEND  every thread still runs, nothing is quiesced yet: a library finishes or
 *                      drains in-flight work. Runs on the upper runtime's hook thread (a real
 *                      upper thread, started by the first PRE_SUSPEND registration), so the hook
 *                      may block, take locks and call anything the program could.
 * CRAC_EV_PARKED       every upper thread is parked, the image is not written yet: a library notes
 *                      what its saved state needs (what it writes lands in the image). Runs on a
 *                      lower thread with a parked thread's TCB: no lock a program thread may hold.
 * CRAC_EV_PRE_RESUME   the image is written (or the checkpoint was abandoned once PARKED began),
 *                      threads have not run again. Same context as PARKED. Not run by
 *                      checkpoint-and-exit.
 * CRAC_EV_RESTART      a restart: the upper half is back, no thread has resumed yet (device objects
 *                      are recreated here). Same context as PARKED.
 *
 * A hook returns 0, or non-zero to abandon the checkpoint (PRE_SUSPEND, PARKED) or the restart
 * (RESTART); PRE_RESUME's result is logged and otherwise ignored (the threads resume anyway). */
enum crac_event {
    CRAC_EV_PRE_SUSPEND = 0,
    CRAC_EV_PARKED = 1,
    CRAC_EV_PRE_RESUME = 2,
    CRAC_EV_RESTART = 3,
    CRAC_EV_COUNT = 4
};

/* flags: ask that every process of a job (under a coordinator) has finished this event before any
 * goes on. PARKED and PRE_RESUME hooks run before the coordinator's `suspended` and `written`
 * barriers (docs/PROTOCOL.md), so they always have it; for PRE_SUSPEND and RESTART there is no
 * such phase yet and registration with the flag fails. */
#define CRAC_HOOK_BARRIER 1u

typedef int (*crac_hook_fn)(enum crac_event event, void *arg);

/* Exported by libcrac-upper.so (declare it weak to run without crac too). Hooks of one event run
 * by ascending ORDER, ties in registration order; NAME (copied, up to 47 bytes) is what
 * CRAC_DEBUG=1 prints ("crac: debug: hook ...") for each call. Registration is for the life of
 * the process (it is saved with the upper half). Returns 0, or -1 (table full: 32 hooks; bad
 * event, flags or fn). Call it from a constructor or the main thread before checkpoints start. */
int crac_upper_hook_register(const char *name, enum crac_event event, int order, unsigned flags,
                             crac_hook_fn fn, void *arg);

/* What the lower half reads (crac_registry.hooks points here, in upper memory). */
struct crac_hook_ctl {
    uint64_t dispatch;          /* int (*)(int event): runs one event's hooks, 0 or first error */
    uint32_t events;            /* bit (1 << event) per event with at least one hook */
    uint32_t barriers;          /* bit per event a hook asked CRAC_HOOK_BARRIER after */
    volatile int32_t req, done; /* futex: PRE_SUSPEND asked / finished by the hook thread */
    volatile int32_t rc;        /* the last PRE_SUSPEND result */
    int32_t pad;
};

#endif
