/* cuda_real_errors N [STEP_MS]: for the cuda backend without a GPU. Each step calls the runtime
   (device count, driver version, an allocation, the last error twice, a synchronisation, a free)
   and writes what every call answered, by number, name and text, into a report; the first report
   is printed before `step 1`, every later one must equal it (else FAIL, exit 1), the last is
   printed before `DONE`. Natively and under crac --device cuda on a machine without a driver both
   print NVIDIA's own errors: the outputs must be identical, across restarts too. */
#define PROG "cuda_real_errors"
#define USAGE "N [STEP_MS]"
#include "ckpt_common.h"

#include <cuda_runtime_api.h>

static char first[4096];

static size_t show(char *buf, size_t at, const char *what, cudaError_t e)
{
    int n = snprintf(buf + at, sizeof(first) - at, "%s -> %d %s: %s\n", what, (int)e,
                     cudaGetErrorName(e), cudaGetErrorString(e));
    return n > 0 && at + (size_t)n < sizeof(first) ? at + (size_t)n : at;
}

static void report(char *buf, long k)
{
    int count = -1, version = -1;
    void *p = NULL;
    size_t at = show(buf, 0, "cudaGetDeviceCount", cudaGetDeviceCount(&count));
    at = show(buf, at, "cudaDriverGetVersion", cudaDriverGetVersion(&version));
    at += (size_t)snprintf(buf + at, sizeof(first) - at, "count %d, driver %d\n", count, version);
    at = show(buf, at, "cudaMalloc", cudaMalloc(&p, (size_t)k << 20));
    at = show(buf, at, "cudaGetLastError", cudaGetLastError());
    at = show(buf, at, "cudaGetLastError", cudaGetLastError());
    at = show(buf, at, "cudaDeviceSynchronize", cudaDeviceSynchronize());
    show(buf, at, "cudaFree", cudaFree(p));
}

int main(int argc, char **argv)
{
    long n = arg(argc, argv, 1, 10, 1, 1000000);
    long ms = arg(argc, argv, 2, 50, 0, 100000);
    char now[sizeof(first)];
    report(first, 1);
    fputs(first, stdout);
    for (long k = 1; k <= n; k++) {
        report(now, k);
        if (strcmp(now, first) != 0)
            fail("step %ld answered differently:\n%s--- first step:\n%s", k, now, first);
        step_line(k);
        if (ms)
            usleep((useconds_t)ms * 1000);
    }
    fputs(now, stdout);
    printf("DONE %ld\n", n);
    return 0;
}
