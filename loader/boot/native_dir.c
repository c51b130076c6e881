/* native_dir.c — where crac's native files are: the directory of the running loader
 * (/proc/self/exe), read at launch, at a checkpoint and at an exec under crac. */
#include "native_dir.h"

#include <string.h>
#include <unistd.h>

int native_dir(char *out, size_t outlen)
{
    ssize_t n = readlink("/proc/self/exe", out, outlen - 1);
    if (n <= 0 || (size_t)n > outlen - 64)
        return -1;
    out[n] = '\0';
    *strrchr(out, '/') = '\0';
    return 0;
}
