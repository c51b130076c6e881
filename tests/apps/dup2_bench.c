/* dup2_bench (bench) [ITERS=500000]: dup2(1, 5) in a loop, as a shell does around every
   redirection: under crac each one is trapped (it waits while the manager holds a short-lived
   descriptor at a low number, docs/DECISIONS.md "A shell's redirections under checkpoints"). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 500000L;
    if (iters <= 0 || argc > 2) {
        fprintf(stderr, "usage: dup2_bench [ITERS]\n");
        return 2;
    }
    long failed = 0;
    for (long i = 0; i < iters; i++)
        failed += dup2(1, 5) != 5;
    printf("dup2_bench: %ld calls, %ld failed\n", iters, failed);
    return failed != 0;
}
