/* tree_coord.c — a coordinator started on demand: a process without one that forks its first
 * child starts `crac coordinator` and joins it, so one checkpoint covers the tree (docs/PROTOCOL.md,
 * docs/DECISIONS.md "Process trees"). Runs on a borrowed lower TCB in the forking thread. */
#include "tree.h"

#include "ckpt.h"
#include "coord_client.h"
#include "crac_rawsys.h"
#include "crac_registry.h"
#include "upper_alloc.h"

#include "lower_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WALL_ 0x40000000 /* __WALL: a child with no exit signal is a "clone" child */

extern char **environ;

static int tried;                  /* once per process: a failure is said once, not at each fork */
static volatile int32_t gate_held; /* this process's start of its coordinator holds the gate */

int tree_coord_gate(int failed)
{
    if (failed) { /* the fork failed before it came to tree_coord_ensure: the gate goes */
        if (__atomic_exchange_n(&gate_held, 0, __ATOMIC_SEQ_CST))
            ckpt_solo_gate_leave(CKPT_GATE_COORD_START);
        return 0;
    }
    if (ckpt_cfg.coord_fd >= 0 || tried || __atomic_load_n(&gate_held, __ATOMIC_SEQ_CST))
        return 0;
    if (ckpt_solo_gate_try(CKPT_GATE_COORD_START)) {
        __atomic_store_n(&gate_held, 1, __ATOMIC_SEQ_CST);
        return 0;
    }
    /* That checkpoint waits for the program's dmtcp_disable_ckpt() sections to end, and this
     * fork may be made inside one: it goes on (the checkpoint then takes the process after the
     * fork, without the child, as it always did). */
    struct crac_registry *r = ckpt_registry;
    if (r && __atomic_load_n(&r->sections, __ATOMIC_SEQ_CST) > 0)
        return 0;
    ckpt_solo_gate_wait_free_ms(1); /* not a busy loop of traps meanwhile */
    return 1;
}

/* The new process runs `crac coordinator --daemon`, which returns once it listens. It is a raw
 * clone with no exit signal that never execs, so the program gets no SIGCHLD for it; only async-signal-safe calls
 * before the exec. Its descriptors are not the program's: a pipe it kept open would never see
 * EOF. */
static int run_coordinator(const char *cmd, char **envp)
{
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    long pid = raw_syscall6(SYS_clone, 0 /* exit signal: none */, 0, 0, 0, 0, 0);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        uint64_t none = 0;
        raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &none, 0, 8);
        int null = (int)raw_syscall3(SYS_open, (long)"/dev/null", O_RDWR, 0);
        for (int fd = 0; fd < 3 && null >= 0; fd++)
            raw_syscall2(SYS_dup2, null, fd);
        raw_syscall3(SYS_close_range, 3, ~0U, 0);
        /* execve makes SIGCHLD a process's exit signal again (the kernel's de_thread), and the
         * program's SIGCHLD handler would count a child it never made: exec in a grandchild,
         * whose end only this child sees. */
        long g = raw_syscall6(SYS_clone, SIGCHLD, 0, 0, 0, 0, 0);
        if (g == 0) {
            raw_syscall3(SYS_execve, (long)"/bin/sh", (long)argv, (long)envp);
            raw_syscall1(SYS_exit_group, 127);
        }
        int gst = 127 << 8;
        while (g > 0 && raw_syscall4(SYS_wait4, g, (long)&gst, 0, 0) == -EINTR)
            ;
        raw_syscall1(SYS_exit_group, WIFEXITED(gst) ? WEXITSTATUS(gst) : 127);
    }
    int st;
    while (waitpid((pid_t)pid, &st, WALL_) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int start_and_join(char *err, size_t errlen)
{
    unsigned char raw[16];
    char token[40], port_file[PATH_MAX + 64], cmd[2 * PATH_MAX + 256], port[32] = "";
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        snprintf(err, errlen, "no random bytes for its token");
        return -1;
    }
    for (unsigned i = 0; i < sizeof(raw); i++)
        snprintf(token + 2 * i, 3, "%02x", raw[i]);
    snprintf(port_file, sizeof(port_file), "%s/.crac_coord_%d.port", ckpt_cfg.ckpt_dir, getpid());
    unlink(port_file);
    char interval[32] = "";
    if (ckpt_cfg.interval > 0)
        snprintf(interval, sizeof(interval), " -i %d", ckpt_cfg.interval);
    /* crac_cmd is shell words already (crac_py/launch/runner.py); the port file's directory is
     * the checkpoint directory, quoted. With --exit-after-checkpoint its interval checkpoints end
     * the job too, as they end a process launched alone. */
    int n = snprintf(cmd, sizeof(cmd),
                     "exec %s coordinator -p 0 --daemon --exit-on-last -q%s%s --port-file '%s'",
                     ckpt_cfg.crac_cmd, interval,
                     ckpt_cfg.exit_after ? " --exit-after-checkpoint" : "", port_file);
    if (n < 0 || (size_t)n >= sizeof(cmd) || strchr(port_file, '\'')) {
        snprintf(err, errlen, "the checkpoint directory's path cannot be passed to it");
        return -1;
    }
    size_t nenv = 0;
    while (environ && environ[nenv])
        nenv++;
    char **envp = calloc(nenv + 2, sizeof(char *));
    char tokvar[64];
    snprintf(tokvar, sizeof(tokvar), "CRAC_COORD_TOKEN=%s", token);
    if (!envp) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    envp[0] = tokvar; /* first: getenv finds it before one the program had */
    for (size_t i = 0; i < nenv; i++)
        envp[i + 1] = environ[i];
    int rc = run_coordinator(cmd, envp);
    free(envp);
    FILE *f = rc == 0 ? fopen(port_file, "re") : NULL;
    if (!f || !fgets(port, sizeof(port), f)) {
        if (f)
            fclose(f);
        snprintf(err, errlen, "`%.200s coordinator` did not start", ckpt_cfg.crac_cmd);
        return -1;
    }
    fclose(f);
    unlink(port_file);
    port[strcspn(port, "\r\n ")] = '\0';
    const struct crac_ctrl *c = crac_ctrl();
    int vpid = c->vpid ? c->vpid : getpid();
    snprintf(ckpt_cfg.coord_host, sizeof(ckpt_cfg.coord_host), "127.0.0.1");
    snprintf(ckpt_cfg.coord_port, sizeof(ckpt_cfg.coord_port), "%s", port);
    snprintf(ckpt_cfg.coord_token, sizeof(ckpt_cfg.coord_token), "%s", token);
    int fd = coord_connect(ckpt_cfg.coord_host, port, token, 0, vpid, err, errlen);
    if (fd < 0)
        return -1;
    ckpt_cfg.coord_fd = lower_fd_adopt(fd);
    return 0;
}

void tree_coord_ensure(void)
{
    if (ckpt_cfg.coord_fd >= 0 || tried)
        return;
    tried = 1;
    /* Held since tree_coord_gate: no checkpoint of this process alone starts while the
     * coordinator does (ckpt.h). */
    int gated = __atomic_exchange_n(&gate_held, 0, __ATOMIC_SEQ_CST);
    char err[512];
    if (start_and_join(err, sizeof(err)) != 0) {
        fprintf(stderr,
                "crac: warning: cannot start a coordinator for the process tree (%s): each "
                "forked process is checkpointed on its own\n",
                err);
        ckpt_cfg.coord_host[0] = '\0';
        if (gated)
            ckpt_solo_gate_leave(CKPT_GATE_COORD_START);
        return;
    }
    ckpt_config_done();  /* the wake-up descriptor a coordinated manager polls; a request */
    ckpt_manager_wake(); /* taken meanwhile goes to the coordinator, which it serves from now */
    if (gated)
        ckpt_solo_gate_leave(CKPT_GATE_COORD_START);
}
