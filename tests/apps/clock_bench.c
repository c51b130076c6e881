/* clock_bench (bench): clock_gettime(CLOCK_MONOTONIC) in a loop, the vDSO's most frequent call;
   argv[1] = iterations (default 15000000); prints the count (the same natively and under crac). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 15000000L;
    if (iters <= 0) {
        fprintf(stderr, "clock_bench: bad iteration count\n");
        return 2;
    }
    struct timespec t;
    long backwards = 0, last = 0;
    for (long i = 0; i < iters; i++) {
        if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) {
            perror("clock_bench: clock_gettime");
            return 1;
        }
        long ns = t.tv_sec * 1000000000L + t.tv_nsec;
        backwards += ns < last;
        last = ns;
    }
    printf("clock_bench: %ld reads, %ld went back\n", iters, backwards);
    return backwards != 0;
}
