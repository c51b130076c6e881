/* compute (bench): a pure CPU loop of integer and floating-point work with no syscalls in the loop;
   argv[1] = iterations (default 200000000); prints a checksum so the work cannot be optimised away. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 200000000L;
    if (iters <= 0) {
        fprintf(stderr, "compute: bad iteration count\n");
        return 2;
    }
    unsigned long x = 88172645463325252UL;
    double f = 1.0;
    for (long i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f = f * 0.9999999 + (double)(x & 0xff) * 1e-9;
    }
    printf("compute iters=%ld checksum=%016lx f=%.6f\n", iters, x, f);
    return 0;
}
