/* deny_odirect PROGRAM [ARGS...]: runs PROGRAM with every open of a file with O_DIRECT refused
   (EINVAL, as a filesystem without direct I/O answers), for the test of crac's fallback from
   CRAC_DIRECT_WRITE=1 to writing the image through the page cache. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RET_ERRNO(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))
/* The low 32 bits of argument N (x86-64 is little-endian): the open flags fit in them. */
#define LOAD_ARG(n) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[n]))

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: deny_odirect PROGRAM [ARGS...]\n");
        return 2;
    }
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 3),
        LOAD_ARG(2),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_DIRECT, 0, 1),
        RET_ERRNO(EINVAL),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 0, 3),
        LOAD_ARG(1),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_DIRECT, 0, 1),
        RET_ERRNO(EINVAL),
        /* openat2 carries its flags in a structure seccomp cannot read: refused as old kernels
           without it refuse it, so libc and crac fall back to openat. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
        RET_ERRNO(ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("deny_odirect: seccomp");
        return 2;
    }
    execvp(argv[1], argv + 1);
    perror("deny_odirect: exec");
    return 127;
}
