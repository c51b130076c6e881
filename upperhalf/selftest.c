/* selftest.c — crac_selftest_* entry points (include/crac_selftest.h) that let a test program
 * cross into the lower half with and without the fs switch. */
#include "crac_selftest.h"

#include "upper_runtime.h"

#include <stddef.h>

typedef void *(*tls_write_fn)(unsigned long);

void *crac_selftest_cross(int switch_fs, unsigned long value)
{
    void *fn = upper_lookup("crac_lh_selftest_tls_write");
    if (!fn)
        return NULL;
    if (switch_fs)
        return (void *)cross_call(fn, value, 0, 0);
    /* The negative control: a plain call, lower code running on the upper thread's fs. */
    return ((tls_write_fn)fn)(value);
}

int crac_selftest_lower_libc(void)
{
    void *fn = upper_lookup("crac_lh_selftest_libc");
    return fn ? (int)cross_call(fn, 0, 0, 0) : -1;
}
