/* tree_fork.c — a fork from the upper half: the child is a split process of the same job, with its
 * own manager, shadow pool and image directory (docs/DECISIONS.md "Process trees"). */
#include "tree.h"

#include "ckpt.h"
#include "coord_client.h"
#include "crac_hooks.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include "lh_api.h"
#include "lower_fds.h"
#include "lower_threads.h"
#include "manager.h"
#include "shadow_pool.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Shadow threads a child starts with: most children exec or exit soon, the pool grows on
 * demand. */
#define CHILD_SHADOWS 2
#define MAX_TREE_CHILDREN 4096

int tree_forked;

/* Children this process forked through here (each a split process), for children.c. */
static volatile int32_t tree_children[MAX_TREE_CHILDREN];

/* A restarted process's children, as `--child-pid VPID:PID` named them, and its parent. */
#define MAX_RESTART_CHILDREN 1024
static struct crac_vid restart_children[MAX_RESTART_CHILDREN];
static int n_restart_children;
static int32_t restart_parent;

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

/* In a forked child: its parent's children are its siblings. Kept, its exec passed them on as
 * its own (--child-pid), and a restart's table of children named them too. */
static void forget_parents_children(void)
{
    for (int i = 0; i < MAX_TREE_CHILDREN; i++)
        __atomic_store_n(&tree_children[i], 0, __ATOMIC_RELAXED);
    n_restart_children = 0;
}

/* The child's own checkpoint directory and, with a coordinator, its own connection to it: it
 * joins the job as one more worker (docs/PROTOCOL.md). */
static void child_join_job(void)
{
    char host[64];
    snprintf(host, sizeof(host), "%08lx", (unsigned long)gethostid() & 0xffffffffUL);
    const char *base = strrchr(ckpt_cfg.program, '/');
    image_lineage_leave();
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
        coord_tree_child = 1;
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
    forget_parents_children();
    tree_forked = 1;
    lower_fds_drop_strays();
    lower_threads_reset();
    lower_spawn_reset(); /* a parent's thread inside pthread_create, or its writer's fork */
    /* Threads the parent had inside a crossing (its hook thread, say) do not exist here: a
     * checkpoint would wait for them to leave forever. */
    __atomic_store_n(lh_gate_inside(), 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(lh_gate_pending(), 0, __ATOMIC_SEQ_CST);
    shadow_pool_reset(CHILD_SHADOWS);
    ckpt_trigger_after_fork();
    __atomic_store_n(&ckpt_publishing, 0, __ATOMIC_SEQ_CST);
    /* The parent's manager may hold its descriptors from the program's close_range now (or a
     * parent's thread be inside one): neither is this process's. */
    __atomic_store_n(&lower_fd_busy, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&lower_fd_closers, 0, __ATOMIC_SEQ_CST);
    struct crac_registry *r = ckpt_registry;
    if (r) {
        /* No hook thread here (the upper runtime's atfork handler says so too, but only once the
         * fork has returned to it; a checkpoint may come before). */
        struct crac_hook_ctl *hooks = (struct crac_hook_ctl *)r->hooks;
        if (hooks)
            hooks->events &= ~(1u << CRAC_EV_PRE_SUSPEND);
        r->generation = 0; /* a new computation: its images start at gen-000001 */
        r->parked = 0;
        /* The parent's checkpoint may hold its threads now (the fork was already in the handler
         * when it began): that is not this process's. Left set, the child's exec (and every
         * exec-section retry) saw "a checkpoint holds the threads" and was re-issued for ever,
         * a checkpoint of its own never coming to release it. */
        __atomic_store_n(&r->holding, 0, __ATOMIC_SEQ_CST);
        /* Upper threads re-borrow: the TCB they cached belongs to a thread that is gone. */
        __atomic_add_fetch(&r->lower_epoch, 1, __ATOMIC_SEQ_CST);
    }
    child_join_job();
    ckpt_config_done(); /* before the manager starts: it picks what to serve from it */
    int e = manager_start(ckpt_cfg.ckpt_signal);
    if (e != 0)
        fprintf(stderr, "crac: warning: forked process %d cannot be checkpointed: %s\n", getpid(),
                strerror(-e));
}

/* A pid the kernel gave that the program knows as another process's or thread's (a restarted
 * job's old pid, mapped to that process's new one): the program's kill, waitpid and the others
 * would reach that process instead. Parent and child decide it from the same map. */
static int pid_taken(pid_t pid) { return vid_to_real(crac_ctrl(), (int32_t)pid) != (int32_t)pid; }

/* A process the map names by pid PID (its new pid) is gone: the kernel gave PID to a new child.
 * Its entry goes, or the child would be reported as that process. The caller holds c->lock. */
void tree_forget_reused_pid(struct crac_ctrl *c, int32_t pid)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < c->n_vids; k++)
        if (c->vids[k].real != pid || c->vids[k].virt == pid)
            c->vids[kept++] = c->vids[k];
    c->n_vids = kept;
}

/* Tries before a child keeps a taken pid (the pid space nearly full of the job's old ids). */
#define FORK_TRIES 64
/* Pids held back at most before a fork (below). */
#define HOLD_MAX 16

/* The pid the kernel hands out next, as far as ns_last_pid tells: the one after the last given
 * out, past those HELD (0: unknown). A guess: another process may fork first. */
static pid_t next_pid(const pid_t *held, int n_held)
{
    char text[24];
    if (proc_read_text("/proc/sys/kernel/ns_last_pid", text, sizeof(text)) <= 0)
        return 0;
    pid_t next = (pid_t)atoi(text) + 1;
    for (int i = 0; i < n_held; i++)
        if (held[i] == next) {
            next++;
            i = -1; /* held ones in any order */
        }
    return next;
}

/* Before a fork whose child would get a pid the job knows as another process (the pids wrapped
 * round to it): that pid is taken by a child with no exit signal that ends at once, and held
 * as its zombie until the fork is done, so the kernel hands out the next one. A child that got
 * a known pid itself must end, and its end is a SIGCHLD the program would count (the job's
 * SIGCHLD handlers once counted one child too many); this one sends none and is no child any
 * wait of the program's sees (no __WALL). Into HELD, to be reaped after the fork. */
static int hold_known_pids(pid_t *held)
{
    int n = 0;
    pid_t next;
    while (n < HOLD_MAX && (next = next_pid(held, n)) > 0 && pid_taken(next)) {
        long r = raw_syscall6(SYS_clone, 0 /* exit signal: none */, 0, 0, 0, 0, 0);
        if (r == 0)
            raw_syscall1(SYS_exit, 0);
        if (r < 0)
            break;
        held[n++] = (pid_t)r;
    }
    return n;
}

long tree_fork_lower(void)
{
    tree_coord_ensure();
    /* The parent goes on once the child is a worker of the job: a job checkpoint that saves the
     * parent after the fork then saves the child too. */
    int joined[2];
    if (pipe2(joined, O_CLOEXEC) != 0)
        joined[0] = joined[1] = -1;
    pid_t held[HOLD_MAX];
    int n_held = hold_known_pids(held);
    pid_t pid;
    for (int tries = 1;; tries++) {
        pid = fork(); /* the lower libc's: its atfork handlers keep its locks sane */
        if (pid == 0 && tries < FORK_TRIES && pid_taken(getpid()))
            _exit(0); /* before anything of the program or the job runs here: forked again */
        if (pid <= 0 || tries >= FORK_TRIES || !pid_taken(pid))
            break;
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    if (pid != 0)
        for (int i = 0; i < n_held; i++)
            while (waitpid(held[i], NULL, __WALL) < 0 && errno == EINTR)
                ;
    if (pid < 0) {
        int e = errno;
        close(joined[0]);
        close(joined[1]);
        return -e;
    }
    if (pid > 0) {
        tree_forget_reused_pid(crac_ctrl(), pid);
        remember_child(pid);
        close(joined[1]);
        char b;
        while (joined[0] >= 0 && read(joined[0], &b, 1) < 0 && errno == EINTR)
            ;
        close(joined[0]);
        return pid;
    }
    close(joined[0]);
    child_restart_lower_half();
    close(joined[1]); /* EOF: joined (or given up) */
    return 0;
}

int tree_children_list(int32_t *out, int max)
{
    int n = 0;
    for (int i = 0; i < MAX_TREE_CHILDREN && n < max; i++) {
        int32_t pid = __atomic_load_n(&tree_children[i], __ATOMIC_RELAXED);
        if (pid > 0)
            out[n++] = pid;
    }
    return n;
}

int tree_restart_child(const char *spec)
{
    int v, r, n = 0;
    if (sscanf(spec, "%d:%d%n", &v, &r, &n) != 2 || spec[n] || v <= 0 || r <= 0 ||
        n_restart_children >= MAX_RESTART_CHILDREN)
        return -1;
    restart_children[n_restart_children++] = (struct crac_vid){v, r};
    return 0;
}

int32_t tree_restart_child_real(int32_t vpid)
{
    for (int i = 0; i < n_restart_children; i++)
        if (restart_children[i].virt == vpid)
            return restart_children[i].real;
    return 0;
}

int tree_restart_parent(const char *vpid)
{
    int v, n = 0;
    if (sscanf(vpid, "%d%n", &v, &n) != 1 || vpid[n] || v <= 0)
        return -1;
    restart_parent = v;
    coord_tree_child = 1;
    return 0;
}

void tree_restart_job_pids(const char *go_line)
{
    struct crac_ctrl *c = crac_ctrl();
    const char *p = strstr(go_line, "\"pids\"");
    p = p ? strchr(p, '[') : NULL;
    if (!p)
        return; /* a coordinator from before the map */
    int32_t virt, real;
    int n = 0;
    uint32_t count = c->n_vids;
    while (count < CRAC_MAX_VIDS && (p = strchr(p + 1, '[')) &&
           sscanf(p, "[%d , %d ]%n", &virt, &real, &n) == 2 && n > 0) {
        int own = virt == (c->vpid ? c->vpid : c->pid);
        if (virt > 0 && real > 0 && !own && vid_to_real(c, virt) == virt)
            c->vids[count++] = (struct crac_vid){virt, real};
        p += n - 1;
        n = 0;
    }
    __atomic_store_n(&c->n_vids, count, __ATOMIC_RELEASE);
}

void tree_restart_remap(void)
{
    struct crac_ctrl *c = crac_ctrl();
    for (int i = 0; i < n_restart_children && c->n_vids < CRAC_MAX_VIDS; i++) {
        remember_child(restart_children[i].real);
        if (restart_children[i].virt != restart_children[i].real)
            c->vids[c->n_vids++] = restart_children[i];
    }
    /* The process that restarted us is the parent the program knew; without one (the root of
     * a tree, a lone process) getppid is the kernel's. */
    c->vppid = restart_parent;
    c->real_ppid = restart_parent ? getppid() : 0;
    tree_restart_group_remap(c);
}

static struct tree_zombie zombies[MAX_TREE_CHILDREN];
static int n_zombies;

void tree_zombies_clear(void) { n_zombies = 0; }

void tree_zombie_add(int32_t pid, int wstatus)
{
    if (n_zombies < MAX_TREE_CHILDREN)
        zombies[n_zombies++] = (struct tree_zombie){vid_from_real(crac_ctrl(), pid), wstatus};
}

int tree_zombies(const struct tree_zombie **out)
{
    *out = zombies;
    return n_zombies;
}

int32_t tree_program_ppid(void)
{
    const struct crac_ctrl *c = crac_ctrl();
    int32_t real = getppid();
    return c->vppid && real == c->real_ppid ? c->vppid : real;
}
