/* restart_lazy.h — lazy restart (restart_lazy.c) as the rest of the loader sees it: the hook
 * restart_memory.c calls per region, the start of its threads, and the wait for their end. */
#ifndef CRAC_RESTART_LAZY_H
#define CRAC_RESTART_LAZY_H

#include "crac_image.h"
#include "crac_rawsys.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>

/* --lazy was given (main.c). */
extern int restart_lazy_wanted;
/* 1 from the first region registered with the userfaultfd until every page is back. */
extern volatile int32_t restart_lazy_pending;

/* Region r is mapped (read-write): register it for lazy filling from core instead of reading
 * it. 1 taken; 0 not one lazy restart takes (the caller fills it); -1 error (err). */
int restart_lazy_take(const struct crac_region_rec *r, int core, char *err, size_t errlen);
/* Start the lower-half threads that serve faults and prefetch (no-op when nothing was taken);
 * before anything touches W. gen_dir names the image in error messages. 0, or -1 (err). */
int restart_lazy_start(const char *gen_dir, char *err, size_t errlen);

/* Wait until the lazy restart has every page back: a fork (the child of a MISSING userfaultfd
 * would see unfilled pages as zeros), mremap (a moved range leaves the userfaultfd) and a
 * checkpoint (its writer reads W from a forked copy) wait. TLS-free (raw futex, one load when
 * nothing is pending): the SIGSYS handler calls it. */
static inline void restart_lazy_wait(void)
{
    int32_t v;
    while ((v = __atomic_load_n(&restart_lazy_pending, __ATOMIC_ACQUIRE)) != 0)
        raw_futex_wait(&restart_lazy_pending, v, NULL);
}

#endif
