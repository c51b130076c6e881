/* signal_wrap.h — wrapping the program's signal handlers so they run with the upper fs, also when
 * the signal interrupts a crossing (docs/ARCHITECTURE.md "Crossing"). */
#ifndef CRAC_SIGNAL_WRAP_H
#define CRAC_SIGNAL_WRAP_H

#include "upper_alloc.h"

/* rt_sigaction for a non-reserved signal on behalf of the program (act's mask already cleaned):
 * a handler function is installed behind the wrapper, and oact reports the program's own
 * action. TLS-free; returns 0 or -errno. */
long sigwrap_rt_sigaction(long sig, const struct crac_ksigaction *act,
                          struct crac_ksigaction *oact);
/* The checkpoint signal's number another crac process's program sent, brought to this thread by
 * the CRAC_SIG_SUSPEND carrier INFO (void *: the lower-half API's type): its program's handler
 * runs here. TLS-free. */
void sigwrap_deliver_peer_signal(void *info, void *uc);

#endif
