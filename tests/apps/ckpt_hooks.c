/* ckpt_hooks LIB LOG [STEPS=60] [MS=25]: dlopens LIB (hooks_lib.c), which registers upper hooks
 * logging to LOG, then counts like ckpt_counter; test_hooks.py checks LOG after the cycles. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "ckpt_hooks"
#define USAGE "LIB LOG [STEPS] [MS]"
#include "ckpt_common.h"

int main(int argc, char **argv)
{
    if (argc < 3)
        fail("usage: " USAGE);
    long steps = arg(argc, argv, 3, 60, 1, 10000000);
    long ms = arg(argc, argv, 4, 25, 0, 100000);
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib)
        fail("dlopen %s: %s", argv[1], dlerror());
    int (*init)(const char *) = (int (*)(const char *))dlsym(lib, "hooks_lib_init");
    if (!init)
        fail("dlsym hooks_lib_init: %s", dlerror());
    if (init(argv[2]) == -2) /* -1: not under crac, nothing to register */
        fail("hook registration failed");
    uint64_t sum = 0;
    for (long k = 1; k <= steps; k++) {
        sum += (uint64_t)k * k;
        step_line(k);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0) {
            if (errno != EINTR)
                fail("nanosleep: %s", strerror(errno));
            req = rem;
        }
    }
    printf("DONE sum=%llu steps=%ld\n", (unsigned long long)sum, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
