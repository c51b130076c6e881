/* signals.c — signal dispositions (CRAC_NT_SIGNALS): every signal's sigaction at checkpoint, put
 * back at restart before crac's own handlers; crac's reserved signals stay virtual. */
#include "state.h"

#include "confine.h"
#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

static int reserved(int sig) { return (crac_ctrl()->reserved_sigs >> (sig - 1)) & 1; }

/* A handler a lower-half library installed (MPI's SIGSEGV backtrace handler, ...): neither the
 * program's (in W) nor the loader's wrapper of one (in the loader's text, at a fixed address).
 * Its code is gone after a restart, where the library installs it again (docs/MPI.md). */
extern const char __executable_start[], etext[];
static int lower_library_handler(uint64_t h)
{
    if (h <= 1) /* SIG_DFL, SIG_IGN */
        return 0;
    if (h >= CRAC_W_START && h < CRAC_W_END)
        return 0;
    return !(h >= (uint64_t)__executable_start && h < (uint64_t)etext);
}

int signals_capture(const struct state_capture *c, void **out, size_t *len)
{
    (void)c;
    struct crac_signal_rec *recs = calloc(65, sizeof(*recs));
    if (!recs)
        return -1;
    /* Reserved signals are kept virtually in the control block (upper memory) already. */
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && !reserved(sig)) {
            raw_syscall4(SYS_rt_sigaction, sig, 0, &recs[sig], 8);
            if (lower_library_handler(recs[sig].handler))
                memset(&recs[sig], 0, sizeof(recs[sig])); /* SIG_DFL */
        }
    *out = recs;
    *len = 65 * sizeof(*recs);
    return 0;
}

/* glibc keeps signals 32 (SIGCANCEL: pthread_cancel) and 33 (SIGSETXID: setuid and friends in
 * a multi-threaded program) for itself and installs their handlers once, lazily. The program's
 * glibc never installs them again after a restart, so what it had installed is put back; where it
 * had installed nothing, the restart's own disposition stays (the loader's glibc may use them). */
static int glibc_internal(int sig) { return sig == 32 || sig == 33; }

int signals_restore(const struct state_restore *r, const void *note, size_t len)
{
    (void)len; /* the table's min_len: 65 records */
    const struct crac_signal_rec *recs = note;
    for (int sig = 1; sig <= 64; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || reserved(sig))
            continue;
        if (glibc_internal(sig) && recs[sig].handler == (uint64_t)SIG_DFL)
            continue;
        long e = raw_syscall4(SYS_rt_sigaction, sig, &recs[sig], 0, 8);
        if (e < 0) {
            snprintf(r->err, r->errlen, "cannot restore signal dispositions: %s",
                     strerror((int)-e));
            return -1;
        }
    }
    return 0;
}
