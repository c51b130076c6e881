/* probe.c — `crac-loader --probe`: what `crac doctor` asks the loader about this machine,
 * printed as key=value lines. */
#include "probe.h"

#include "crac_layout.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *window_state(uint64_t start, uint64_t end)
{
    void *p = mmap((void *)start, end - start, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        return "taken";
    munmap(p, end - start);
    return p == (void *)start ? "free" : "unsupported";
}

/* Install an allow-all filter in a child, so this process stays unfiltered. */
static int seccomp_works(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        struct sock_fprog prog = {.len = 1, .filter = &allow};
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        _exit(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : 1);
    }
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

int probe_main(void)
{
    printf("fsgsbase=%d\n", (getauxval(AT_HWCAP2) & 2) ? 1 : 0);
    printf("seccomp=%d\n", seccomp_works());
    printf("window_w=%s\n", window_state(CRAC_W_START, CRAC_W_END));
    printf("window_d=%s\n", window_state(CRAC_D_START, CRAC_D_END));
    printf("window_w_range=0x%lx-0x%lx\n", CRAC_W_START, CRAC_W_END);
    printf("window_d_range=0x%lx-0x%lx\n", CRAC_D_START, CRAC_D_END);
    printf("backends=sim\n");
    return 0;
}
