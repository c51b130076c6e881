/* tree_fork.c — a fork from the upper half: the child is a split process of the same job, with its
 * own manager, shadow pool and image directory (docs/DECISIONS.md "Process trees"). */
#include "tree.h"

#include "ckpt.h"
#include "coord_client.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include "lower_fds.h"
#include "lower_threads.h"
#include "manager.h"
#include "shadow_pool.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Shadow threads a child starts with: most children exec or exit soon, the pool grows on
 * demand. */
#define CHILD_SHADOWS 2
#define MAX_TREE_CHILDREN 4096

/* Children this process forked through here (each a split process), for children.c. */
static volatile int32_t tree_children[MAX_TREE_CHILDREN];

int tree_is_forked_child(int32_t pid)
{
    for (int i = 0; i < MAX_TREE_CHILDREN; i++)
        if (__atomic_load_n(&tree_children[i], __ATOMIC_RELAXED) == pid)
            return 1;
    return 0;
}

static void remember_child(int32_t pid)
{
    for (int i = 0; i < MAX_TREE_CHILDREN; i++) {
        int32_t old = __atomic_load_n(&tree_children[i], __ATOMIC_RELAXED);
        /* A slot whose child is gone (reaped: no /proc entry with us as parent) may be reused;
         * kill(pid, 0) is enough here: a recycled pid only keeps a slot busy. */
        if (old == 0 || (raw_syscall2(SYS_kill, old, 0) == -ESRCH)) {
            if (__sync_bool_compare_and_swap(&tree_children[i], old, pid))
                return;
        }
    }
}

/* The child's own checkpoint directory and, with a coordinator, its own connection to it: it
 * joins the job as one more worker (docs/PROTOCOL.md). */
static void child_join_job(void)
{
    char host[64];
    snprintf(host, sizeof(host), "%08lx", (unsigned long)gethostid() & 0xffffffffUL);
    const char *base = strrchr(ckpt_cfg.program, '/');
    int n = snprintf(ckpt_cfg.proc_dir, sizeof(ckpt_cfg.proc_dir), "%s/ckpt_%.64s_%s-%d",
                     ckpt_cfg.ckpt_dir, base ? base + 1 : ckpt_cfg.program, host, getpid());
    if (n < 0 || (size_t)n >= sizeof(ckpt_cfg.proc_dir))
        fprintf(stderr, "crac: warning: process %d: checkpoint directory path too long\n",
                getpid());
    if (ckpt_cfg.coord_fd >= 0) {
        /* The parent's connection: ours is a copy of it, and must never be spoken on. */
        close(ckpt_cfg.coord_fd);
        ckpt_cfg.coord_fd = -1;
        char err[512];
        int fd = coord_connect(ckpt_cfg.coord_host, ckpt_cfg.coord_port, ckpt_cfg.coord_token, 0,
                               getpid(), err, sizeof(err));
        if (fd < 0)
            fprintf(stderr, "crac: warning: forked process %d is not part of the job: %s\n",
                    getpid(), err);
        else
            ckpt_cfg.coord_fd = lower_fd_adopt(fd);
    }
}

/* In the child, on the TCB the parent borrowed (lower glibc made it this process's only thread):
 * the lower threads are gone; start them again and make this a process of its own. */
static void child_restart_lower_half(void)
{
    lower_threads_reset();
    shadow_pool_reset(CHILD_SHADOWS);
    ckpt_trigger_after_fork();
    __atomic_store_n(&ckpt_publishing, 0, __ATOMIC_SEQ_CST);
    struct crac_registry *r = ckpt_registry;
    if (r) {
        r->generation = 0; /* a new computation: its images start at gen-000001 */
        r->parked = 0;
        /* Upper threads re-borrow: the TCB they cached belongs to a thread that is gone. */
        __atomic_add_fetch(&r->lower_epoch, 1, __ATOMIC_SEQ_CST);
    }
    child_join_job();
    int e = manager_start(ckpt_cfg.ckpt_signal);
    if (e != 0)
        fprintf(stderr, "crac: warning: forked process %d cannot be checkpointed: %s\n", getpid(),
                strerror(-e));
    ckpt_config_done();
}

long tree_fork_lower(void)
{
    tree_coord_ensure();
    pid_t pid = fork(); /* the lower libc's: its atfork handlers keep its locks sane */
    if (pid < 0)
        return -errno;
    if (pid > 0) {
        remember_child(pid);
        return pid;
    }
    child_restart_lower_half();
    return 0;
}
