/* deny_cow_fork PROGRAM [ARGS...]: runs PROGRAM with every copy-on-write process creation refused
   (fork, and clone without CLONE_VM: EAGAIN; clone3: ENOSYS, so libc falls back to clone), as
   strict memory overcommit refuses a big process's fork; threads and vfork still work. For the
   test of crac's fallback to writing the image with the program paused. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RET_ERRNO(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: deny_cow_fork PROGRAM [ARGS...]\n");
        return 2;
    }
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fork, 0, 1),
        RET_ERRNO(EAGAIN),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        RET_ERRNO(ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_VM, 1, 0),
        RET_ERRNO(EAGAIN),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("deny_cow_fork: seccomp");
        return 2;
    }
    execvp(argv[1], argv + 1);
    perror("deny_cow_fork: exec");
    return 127;
}
