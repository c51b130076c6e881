/* dlopen_lib: a tiny shared library (built as libdlopen_lib.so) that dlopen_app and maps_check load
   at run time; it has a TLS variable and a constructor so ld.so's dlopen paths are exercised. */
#include <stdlib.h>
#include <string.h>

static __thread long lib_tls = 5;
static int ctor_ran;
int dlopen_lib_data = 1234;

__attribute__((constructor)) static void lib_ctor(void) { ctor_ran = 1; }

/* Address of this library's TLS variable in the calling thread (maps_check checks where it lies). */
void *dlopen_lib_tls_addr(void) { return &lib_tls; }

/* Returns a deterministic value that depends on x, the constructor, TLS and a heap allocation. */
long dlopen_lib_compute(long x)
{
    char *buf = malloc(4096);
    if (!buf)
        return -1;
    memset(buf, 3, 4096);
    long s = 0;
    for (int i = 0; i < 4096; i++)
        s += buf[i];
    free(buf);
    lib_tls += x;
    return s + lib_tls * 10 + ctor_ran;
}
