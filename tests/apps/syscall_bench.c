/* syscall_bench (bench) [ITERS=2000000] [allow-all]: a cheap system call no confinement traps
   (getppid through syscall(2)) in a loop: what the seccomp filter costs a call. With `allow-all`
   the program first installs a one-instruction filter that allows everything: the cost of any
   filter at all (the kernel's seccomp entry work), the floor under crac's. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 2000000L;
    if (iters <= 0 || (argc > 2 && strcmp(argv[2], "allow-all") != 0) || argc > 3) {
        fprintf(stderr, "usage: syscall_bench [ITERS] [allow-all]\n");
        return 2;
    }
    if (argc > 2) {
        struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        struct sock_fprog prog = {1, &allow};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
            perror("syscall_bench: seccomp");
            return 1;
        }
    }
    long first = syscall(SYS_getppid), differ = 0;
    for (long i = 0; i < iters; i++)
        differ += syscall(SYS_getppid) != first;
    printf("syscall_bench: %ld calls, %ld differed\n", iters, differ);
    return differ != 0;
}
