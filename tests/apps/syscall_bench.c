/* syscall_bench (bench): a cheap system call no confinement traps (getppid through syscall(2)),
   in a loop: what the seccomp filter costs a call; argv[1] = iterations (default 2000000). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 2000000L;
    if (iters <= 0) {
        fprintf(stderr, "syscall_bench: bad iteration count\n");
        return 2;
    }
    long first = syscall(SYS_getppid), differ = 0;
    for (long i = 0; i < iters; i++)
        differ += syscall(SYS_getppid) != first;
    printf("syscall_bench: %ld calls, %ld differed\n", iters, differ);
    return differ != 0;
}
