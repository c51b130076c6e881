/* fsgsbase.c — reads HWCAP2_FSGSBASE once, before main, for the TLS-free code that switches fs
 * (loader/confine/signal_wrap.c), which may not call getauxval itself. */
#include "fsgsbase.h"

#include <sys/auxv.h>

int crac_fsgsbase;

__attribute__((constructor)) static void fsgsbase_init(void)
{
    crac_fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0; /* HWCAP2_FSGSBASE */
}
