/* native_dir.h — where crac's native files are: the directory of the running loader, beside
 * which sit its backends and shims (shim/). */
#ifndef CRAC_NATIVE_DIR_H
#define CRAC_NATIVE_DIR_H

#include <stddef.h>

/* The loader's directory into OUT (from /proc/self/exe), with at least 64 bytes of OUTLEN left
 * for a name under it: 0, or -1 when unknown. */
int native_dir(char *out, size_t outlen);

#endif
