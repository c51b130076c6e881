/* tree_exec.c — an execve from the upper half goes through crac's loader again, so the new program
 * is a split process of the same job; programs crac cannot run are exec'd outside it (docs/DECISIONS.md "Exec under crac"). */
#include "tree.h"

#include "ckpt.h"
#include "confine.h"
#include "coord_client.h"
#include "crac_launcher.h"
#include "crac_rawsys.h"
#include "image_compress.h"
#include "upper_alloc.h"

#include "fds.h"
#include "lower_fds.h"
#include "native_dir.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- What the exec'ing loader passes to the exec'd one (parsed by main's parse_args). ---- */

#define EXEC_MAX_KNOWN 2048

static struct {
    int given;              /* --exec-vpid or --exec-lineage seen: this loader was exec'd */
    int32_t vpid;           /* the pid the program knows (0: the kernel's) */
    uint64_t vmask, vign;   /* reserved signals blocked / ignored in the program's view */
    int filter_ids;         /* the inherited seccomp filter traps the id calls (1), not (0) */
    int old_coord_fd;       /* the exec'ing loader's coordinator connection, closed once joined */
    int generation;         /* the last generation of the lineage */
    char lineage[PATH_MAX]; /* the process's image directory */
    int warned;             /* the checkpoint-signal handler warning was given (--exec-warned) */
    /* The process's first start time (--exec-start TICKS:BTIME:BOOT_ID): exec keeps a pid's. */
    int64_t start_ticks;
    struct crac_boot start_boot;
    /* Other processes' ids the exec'ing program knew (--known-pid V:R: a restarted job's). */
    struct crac_vid known[EXEC_MAX_KNOWN];
    int n_known;
} exec_in = {.filter_ids = -1, .old_coord_fd = -1};

/* The device choice of this loader's command line, for the exec'd one. */
static const char *dev_name = "none", *dev_cuda_runtime;
static int dev_sim_version;

void tree_exec_device(const char *device, int sim_version, const char *cuda_runtime)
{
    dev_name = device;
    dev_sim_version = sim_version;
    dev_cuda_runtime = cuda_runtime;
}

int tree_exec_option(const char *name, const char *v)
{
    int n = 0;
    if (strcmp(name, "--exec-vpid") == 0) {
        exec_in.given = 1;
        return sscanf(v, "%d%n", &exec_in.vpid, &n) == 1 && !v[n] && exec_in.vpid >= 0 ? 1 : -1;
    }
    if (strcmp(name, "--exec-signals") == 0)
        return sscanf(v, "%lx:%lx%n", &exec_in.vmask, &exec_in.vign, &n) == 2 && !v[n] ? 1 : -1;
    if (strcmp(name, "--exec-stdio") == 0) /* the first invocation's, not the exec'ing program's */
        return stdio_given_parse(v) == 0 ? 1 : -1;
    if (strcmp(name, "--exec-filter") == 0)
        return sscanf(v, "%d%n", &exec_in.filter_ids, &n) == 1 && !v[n] ? 1 : -1;
    if (strcmp(name, "--coord-old-fd") == 0) {
        if (sscanf(v, "%d%n", &exec_in.old_coord_fd, &n) != 1 || v[n])
            return -1;
        struct stat st; /* still the connection: a socket (read before anything opens files) */
        if (fstat(exec_in.old_coord_fd, &st) != 0 || !S_ISSOCK(st.st_mode))
            exec_in.old_coord_fd = -1;
        return 1;
    }
    if (strcmp(name, "--forked") == 0) { /* an exec's or a restart's: see tree.h */
        tree_forked = 1;
        return strcmp(v, "1") == 0 ? 1 : -1;
    }
    if (strcmp(name, "--exec-warned") == 0) {
        exec_in.warned = 1;
        return strcmp(v, "1") == 0 ? 1 : -1;
    }
    if (strcmp(name, "--known-pid") == 0) {
        struct crac_vid k;
        if (sscanf(v, "%d:%d%n", &k.virt, &k.real, &n) != 2 || v[n] || k.virt <= 0 || k.real <= 0)
            return -1;
        if (exec_in.n_known < EXEC_MAX_KNOWN)
            exec_in.known[exec_in.n_known++] = k;
        return 1;
    }
    if (strcmp(name, "--exec-start") == 0) {
        long long ticks, btime;
        if (sscanf(v, "%lld:%lld:%n", &ticks, &btime, &n) != 2 || n == 0 || ticks <= 0 ||
            strlen(v + n) >= sizeof(exec_in.start_boot.id))
            return -1;
        exec_in.start_ticks = ticks;
        exec_in.start_boot.btime = btime;
        snprintf(exec_in.start_boot.id, sizeof(exec_in.start_boot.id), "%s", v + n);
        return 1;
    }
    if (strcmp(name, "--exec-lineage") == 0) {
        exec_in.given = 1;
        if (sscanf(v, "%d:%n", &exec_in.generation, &n) != 1 || n == 0 || v[n] != '/' ||
            exec_in.generation < 0)
            return -1;
        snprintf(exec_in.lineage, sizeof(exec_in.lineage), "%s", v + n);
        return 1;
    }
    return 0;
}

int tree_exec_vpid(void) { return exec_in.vpid ? exec_in.vpid : getpid(); }

void tree_exec_apply(void)
{
    if (!exec_in.given)
        return;
    struct crac_ctrl *c = crac_ctrl();
    c->vpid = exec_in.vpid;
    tree_restart_remap(); /* the children and the parent, as the exec'ing process knew them */
    for (int i = 0; i < exec_in.n_known && c->n_vids < CRAC_MAX_VIDS; i++)
        if (vid_to_real(c, exec_in.known[i].virt) == exec_in.known[i].virt)
            c->vids[c->n_vids++] = exec_in.known[i];
    c->ckpt_handler_warned = exec_in.warned;
    c->start_ticks = exec_in.start_ticks;
    c->start_boot = exec_in.start_boot;
    for (int s = 1; s <= 64; s++)
        if (c->reserved_sigs & exec_in.vign & (1UL << (s - 1)))
            c->virt_act[s].handler = (uint64_t)SIG_IGN;
    vmask_set(c, getpid(), exec_in.vmask & c->reserved_sigs);
    /* The same directory once it holds the process's generations: the lineage is the process's,
     * whatever program it runs now. Before its first checkpoint there is none yet, and it is
     * named after the program the process runs then (main.c), as DMTCP names an image: make's
     * forked children that exec gcc, cc1 and as are not all "make". */
    if (exec_in.lineage[0] && exec_in.generation > 0)
        snprintf(ckpt_cfg.proc_dir, sizeof(ckpt_cfg.proc_dir), "%s", exec_in.lineage);
}

int tree_exec_filter(void)
{
    if (!exec_in.given || exec_in.filter_ids < 0)
        return 0;
    if (exec_in.filter_ids > confine_filter_ids)
        confine_filter_ids = exec_in.filter_ids; /* what the next exec inherits, too */
    const struct crac_ctrl *c = crac_ctrl();
    int ids = c->vpid || c->vppid || c->n_vids;
    /* Filters stack across exec and each one stays: add one only when the inherited one does
     * not trap the id calls this process needs trapped. */
    return ids && exec_in.filter_ids < 1 ? 1 : -1;
}

void tree_exec_joined(void)
{
    /* The program may have closed it before its exec (Python's close_fds does): then the
     * number may be the new connection's now. */
    if (exec_in.old_coord_fd >= 0 && exec_in.old_coord_fd != ckpt_cfg.coord_fd)
        close(exec_in.old_coord_fd);
    exec_in.old_coord_fd = -1;
}

void tree_exec_registered(struct crac_registry *r)
{
    if (exec_in.given && r->generation < exec_in.generation)
        r->generation = exec_in.generation;
}

/* ---- The exec'ing side. ---- */

#define ERESTARTNOINTR_ 513 /* the kernel's "issue the call again": see confine_trap.c */

enum run_kind { RUN_CRAC, RUN_OUTSIDE, RUN_KERNEL };

struct target {
    enum run_kind kind;
    const char *why; /* RUN_OUTSIDE: what the program is */
    int script;      /* a #! script: interp (and arg) run it */
    char interp[PATH_MAX], arg[256];
};

/* Whether an ELF file has a PT_INTERP (is dynamically linked). */
static int has_interp(int fd, const Elf64_Ehdr *eh)
{
    if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum > 512)
        return 0;
    for (int i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof(ph), (off_t)(eh->e_phoff + (uint64_t)i * sizeof(ph))) !=
            (ssize_t)sizeof(ph))
            return 0;
        if (ph.p_type == PT_INTERP)
            return 1;
    }
    return 0;
}

/* What exec of PATH does: -errno where the kernel would refuse it (decided before anything is
 * replaced, so the caller gets the errno and goes on), else how to run it. */
static int probe(const char *path, int depth, struct target *t)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EACCES;
    if (access(path, X_OK) != 0)
        return -errno;
    t->kind = RUN_KERNEL;
    t->script = 0;
    if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
        ((st.st_mode & S_ISGID) && st.st_gid != getegid())) {
        t->kind = RUN_OUTSIDE;
        t->why = "a setuid or setgid program";
        return 0;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        t->kind = RUN_OUTSIDE; /* execute-only: the loader cannot map it */
        t->why = "not readable";
        return 0;
    }
    unsigned char head[256];
    ssize_t n = pread(fd, head, sizeof(head) - 1, 0);
    if (n >= (ssize_t)sizeof(Elf64_Ehdr) && memcmp(head, ELFMAG, SELFMAG) == 0) {
        Elf64_Ehdr eh;
        memcpy(&eh, head, sizeof(eh));
        if (head[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
            t->kind = RUN_OUTSIDE;
            t->why = "a 32-bit or non-x86-64 program";
        } else if (!has_interp(fd, &eh)) {
            t->kind = RUN_OUTSIDE;
            t->why = "a statically linked program";
        } else {
            t->kind = RUN_CRAC;
        }
        close(fd);
        return 0;
    }
    close(fd);
    if (n < 2 || head[0] != '#' || head[1] != '!')
        return 0; /* the kernel decides: ENOEXEC, or a binfmt_misc handler outside crac */
    if (depth >= 4)
        return -ELOOP;
    /* "#!interp [arg]" as the kernel reads it: one optional argument, the rest of the line. */
    head[n] = '\0';
    char *p = (char *)head + 2, *nl = strchr(p, '\n');
    if (nl)
        *nl = '\0';
    while (*p == ' ' || *p == '\t')
        p++;
    char *e = p;
    while (*e && *e != ' ' && *e != '\t')
        e++;
    if (e == p)
        return -ENOEXEC;
    char *a = e;
    while (*a == ' ' || *a == '\t')
        a++;
    *e = '\0';
    size_t al = strlen(a);
    while (al && (a[al - 1] == ' ' || a[al - 1] == '\t' || a[al - 1] == '\r'))
        a[--al] = '\0';
    struct target in;
    int r = probe(p, depth + 1, &in);
    if (r < 0)
        return r == -EACCES || r == -ENOENT ? r : -ENOEXEC;
    if (in.script || in.kind != RUN_CRAC) {
        *t = in;
        t->script = 0; /* the kernel runs the script; the interpreter decides where */
        return 0;
    }
    t->kind = RUN_CRAC;
    t->script = 1;
    snprintf(t->interp, sizeof(t->interp), "%s", p);
    snprintf(t->arg, sizeof(t->arg), "%s", a);
    return 0;
}

/* A growing list of strings, for the loader's options and the new argv and envp. */
struct strv {
    char **v;
    size_t n, cap;
};

static int push(struct strv *s, const char *x)
{
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->v, cap * sizeof(char *));
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (char *)x;
    s->v[s->n] = NULL;
    return 0;
}

/* Formatted strings live until the exec (or its failure: tree_exec_lower frees them). */
static char *pool[64];
static int n_pool;

__attribute__((format(printf, 2, 3))) static int pushf(struct strv *s, const char *fmt, ...)
{
    char buf[PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char *d = n_pool < 64 ? strdup(buf) : NULL;
    if (!d)
        return -1;
    pool[n_pool++] = d;
    return push(s, d);
}

/* The new loader's options: the job's (checkpoint directory, signal, device, coordinator), and
 * what the process must keep across the exec (its ids, children, signal view, lineage). */
/* An MPI launcher's process (its rank in ENVP, as crac_py/launch/mpi.py reads it) loads crac's
 * Open MPI-ABI shim whatever it execs: a job script's `exec python train.py` may load MPI later
 * (mpi4py), and must find the shim there (docs/MPI.md, "mpi4py"). The shim is there when crac
 * was built with Open MPI's headers. */
static int wants_mpi_shim(char *const *envp)
{
    int rank = 0;
    for (size_t i = 0; envp && envp[i] && !rank; i++)
        rank = crac_launcher_rank_entry(envp[i]);
    char shim[PATH_MAX];
    if (!rank || native_dir(shim, sizeof(shim)) != 0)
        return 0;
    strcat(shim, "/shim/libmpi.so.40");
    return access(shim, R_OK) == 0;
}

static int loader_options(struct strv *o, const char *argv0, const char *prog, int mpi_shim)
{
    const struct crac_ctrl *c = crac_ctrl();
    int fail;
    fail = push(o, "--ckpt-dir") | push(o, ckpt_cfg.ckpt_dir) | push(o, "--interval") |
           pushf(o, "%d", ckpt_cfg.interval) | push(o, "--ckpt-signal") |
           pushf(o, "%d", ckpt_cfg.ckpt_signal) | push(o, "--keep") |
           pushf(o, "%d", ckpt_cfg.keep) | push(o, "--crac-cmd") | push(o, ckpt_cfg.crac_cmd) |
           push(o, "--device") | push(o, dev_name) | push(o, "--argv0") | push(o, argv0);
    if (ckpt_cfg.exit_after)
        fail |= push(o, "--exit-after-checkpoint");
    if (ckpt_cfg.verbose)
        fail |= push(o, "--verbose");
    if (ckpt_cfg.no_fork_writer)
        fail |= push(o, "--no-fork-writer");
    if (ckpt_cfg.ckpt_open_files)
        fail |= push(o, "--ckpt-open-files");
    /* Each generation is whole in itself, so a compressed one goes on after the exec (a job
     * script's `exec python train.py` wrote its images uncompressed). --incremental does not:
     * its next generation would name one of the address space before the exec as its parent. */
    if (ckpt_cfg.compress == CRAC_CHUNK_ZSTD)
        fail |= push(o, "--compress") | pushf(o, "zstd:%d", ckpt_cfg.compress_level);
    else if (ckpt_cfg.compress != CRAC_CHUNK_RAW)
        fail |= push(o, "--compress") | push(o, compress_name(ckpt_cfg.compress));
    if (dev_sim_version)
        fail |= push(o, "--sim-version") | pushf(o, "%d", dev_sim_version);
    if (dev_cuda_runtime)
        fail |= push(o, "--cuda-runtime") | push(o, dev_cuda_runtime);
    if (ckpt_cfg.coord_fd >= 0 && ckpt_cfg.coord_host[0]) {
        /* The program may have closed it (Python's close_fds before its exec): this process
         * must stay known to the coordinator until the new loader has joined, or a job
         * checkpoint meanwhile would leave it out. */
        struct stat st;
        if (fstat(ckpt_cfg.coord_fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
            char err[256];
            int fd = coord_connect(ckpt_cfg.coord_host, ckpt_cfg.coord_port, ckpt_cfg.coord_token,
                                   0, vid_from_real(c, getpid()), err, sizeof(err));
            ckpt_cfg.coord_fd = fd >= 0 ? lower_fd_adopt(fd) : -1;
        }
    }
    if (ckpt_cfg.coord_fd >= 0 && ckpt_cfg.coord_host[0]) {
        /* The token goes in the options descriptor, never on a command line. The old
         * connection stays open until the new one is made: a coordinator that exits with its
         * last process must not see this one leave first. */
        fcntl(ckpt_cfg.coord_fd, F_SETFD, 0);
        fail |= push(o, "--coord-host") | push(o, ckpt_cfg.coord_host) | push(o, "--coord-port") |
                push(o, ckpt_cfg.coord_port) | push(o, "--coord-token") |
                push(o, ckpt_cfg.coord_token) | push(o, "--coord-old-fd") |
                pushf(o, "%d", ckpt_cfg.coord_fd);
    }
    fail |= push(o, "--exec-vpid") | pushf(o, "%d", c->vpid);
    if (c->vppid && getppid() == c->real_ppid)
        fail |= push(o, "--parent-pid") | pushf(o, "%d", c->vppid);
    int32_t kids[1024];
    int nk = tree_children_list(kids, 1024);
    for (int i = 0; i < nk; i++)
        if (kill(kids[i], 0) == 0 || errno == EPERM)
            fail |= push(o, "--child-pid") | pushf(o, "%d:%d", vid_from_real(c, kids[i]), kids[i]);
    /* The rest of its map but its own threads' (the exec ends them): siblings and cousins of a
     * restarted job (the coordinator's `go`), its parent's. */
    char task[64];
    for (uint32_t k = 0; k < c->n_vids; k++) {
        snprintf(task, sizeof(task), "/proc/self/task/%d", c->vids[k].real);
        if (!tree_is_forked_child(c->vids[k].real) && access(task, F_OK) != 0)
            fail |= push(o, "--known-pid") | pushf(o, "%d:%d", c->vids[k].virt, c->vids[k].real);
    }
    if (c->ckpt_handler_warned)
        fail |= push(o, "--exec-warned") | push(o, "1");
    if (c->start_ticks)
        fail |= push(o, "--exec-start") | pushf(o, "%lld:%lld:%s", (long long)c->start_ticks,
                                                (long long)c->start_boot.btime, c->start_boot.id);
    if (tree_forked)
        fail |= push(o, "--forked") | push(o, "1");
    uint64_t vign = 0;
    for (int s = 1; s <= 64; s++)
        if ((c->reserved_sigs & (1UL << (s - 1))) && c->virt_act[s].handler == (uint64_t)SIG_IGN)
            vign |= 1UL << (s - 1);
    uint64_t vmask = vmask_get((struct crac_ctrl *)c, (int32_t)raw_syscall0(SYS_gettid));
    fail |= push(o, "--exec-signals") | pushf(o, "%lx:%lx", vmask, vign);
    fail |= push(o, "--exec-filter") | pushf(o, "%d", confine_filter_ids);
    char stdio[160];
    fail |= stdio_given_format(stdio, sizeof(stdio)) != 0 || push(o, "--exec-stdio") ||
            pushf(o, "%s", stdio);
    struct crac_registry *r = ckpt_registry;
    fail |= push(o, "--exec-lineage") | pushf(o, "%d:%s", r ? r->generation : 0, ckpt_cfg.proc_dir);
    if (mpi_shim)
        fail |= push(o, "--mpi-shim") | push(o, "libmpi.so.40");
    fail |= push(o, "--") | push(o, prog);
    return fail ? -1 : 0;
}

/* A descriptor the new loader inherits and reads its options from (CRAC_LOADER_OPTIONS_FD,
 * loader/boot/main.c), as `crac launch` gives them: no option is on the command line. */
static int options_fd(const struct strv *o)
{
    int fd = (int)syscall(SYS_memfd_create, "crac-loader-options", 0);
    if (fd < 0)
        return -1;
    for (size_t i = 0; i < o->n; i++) {
        size_t len = strlen(o->v[i]) + 1;
        if (write(fd, o->v[i], len) != (ssize_t)len) {
            close(fd);
            return -1;
        }
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

/* The program's view of the reserved signals becomes the real state, as exec would have kept it:
 * ignored stays ignored, a handler becomes the default, blocked stays blocked; the signals in
 * KEEP_BLOCKED stay blocked whatever the view. The previous state in *saved, for a failed
 * exec. */
static void real_signal_state(const uint64_t *mask, uint64_t keep_blocked,
                              struct crac_ksigaction saved[65], uint64_t *saved_mask)
{
    struct crac_ctrl *c = crac_ctrl();
    for (int s = 1; s <= 64; s++) {
        if (!(c->reserved_sigs & (1UL << (s - 1))))
            continue;
        struct crac_ksigaction a = {0, 0, 0, 0};
        if (c->virt_act[s].handler == (uint64_t)SIG_IGN)
            a.handler = (uint64_t)SIG_IGN;
        raw_syscall4(SYS_rt_sigaction, s, &a, &saved[s], 8);
    }
    uint64_t m = (*mask & ~c->reserved_sigs) |
                 (vmask_get(c, (int32_t)raw_syscall0(SYS_gettid)) & c->reserved_sigs) |
                 keep_blocked;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &m, saved_mask, 8);
}

static void restore_signal_state(const struct crac_ksigaction saved[65], const uint64_t *mask)
{
    const struct crac_ctrl *c = crac_ctrl();
    for (int s = 1; s <= 64; s++)
        if (c->reserved_sigs & (1UL << (s - 1)))
            raw_syscall4(SYS_rt_sigaction, s, &saved[s], 0, 8);
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, mask, 0, 8);
}

/* The exec is a section no checkpoint may overlap (the program's dmtcp_disable_ckpt() sections
 * use the same counter): a checkpoint that starts now waits for it, and the exec ends it by
 * replacing the process. 0: in the section; -ERESTARTNOINTR: a checkpoint holds the threads, so
 * the handler makes the thread issue the call again once it has been parked and released (a
 * thread inside this handler cannot be parked, and the checkpoint waits for every thread). A
 * checkpoint being published finishes first: its writer and its `published` end with the
 * manager thread. */
static int enter_exec_section(void)
{
    struct crac_registry *r = ckpt_registry;
    if (!r)
        return 0;
    __atomic_add_fetch(&r->sections, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&r->holding, __ATOMIC_SEQ_CST)) {
        __atomic_sub_fetch(&r->sections, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &r->sections, 129 /* FUTEX_WAKE_PRIVATE */, 1, NULL, NULL, 0);
        return -ERESTARTNOINTR_;
    }
    int32_t busy;
    while ((busy = __atomic_load_n(&ckpt_publishing, __ATOMIC_ACQUIRE)) != 0)
        syscall(SYS_futex, &ckpt_publishing, 128 /* FUTEX_WAIT_PRIVATE */, busy, NULL, NULL, 0);
    return 0;
}

/* The exec failed: the program goes on, and so may checkpoints. */
static void leave_exec_section(void)
{
    struct crac_registry *r = ckpt_registry;
    if (r && __atomic_sub_fetch(&r->sections, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&r->holding, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &r->sections, 129 /* FUTEX_WAKE_PRIVATE */, 1, NULL, NULL, 0);
}

static long exec_outside(const struct tree_exec_call *x, const char *path, const char *why)
{
    const struct crac_ctrl *c = crac_ctrl();
    int e = enter_exec_section();
    if (e != 0)
        return e;
    if (why) {
        int32_t me = (int32_t)getpid();
        fprintf(stderr,
                "crac: warning: process %d: %s is %s: it runs outside crac, not checkpointed "
                "(a checkpoint of its job is refused while it runs)\n",
                vid_from_real(c, me), path, why);
    }
    /* A program the kernel is left to judge (an exec that fails with ENOEXEC, most likely)
     * keeps the checkpoint signal blocked, or one arriving now would meet its default action
     * and end the process; one exec'd outside crac gets the program's view of it. */
    uint64_t keep = why ? 0 : 1UL << (c->ckpt_sig - 1);
    struct crac_ksigaction saved[65];
    uint64_t saved_mask;
    real_signal_state(&x->mask, keep, saved, &saved_mask);
    long r = x->at ? raw_syscall6(SYS_execveat, x->dirfd, (long)path, (long)x->argv, (long)x->envp,
                                  x->flags, 0)
                   : raw_syscall3(SYS_execve, (long)path, (long)x->argv, (long)x->envp);
    restore_signal_state(saved, &saved_mask);
    leave_exec_section();
    return r;
}

long tree_exec_lower(const struct tree_exec_call *x)
{
    /* The file the kernel would open: execveat's directory descriptor through /proc. */
    char path[PATH_MAX + 64];
    if (x->at && x->path[0] == '\0' && (x->flags & AT_EMPTY_PATH))
        snprintf(path, sizeof(path), "/proc/self/fd/%ld", x->dirfd);
    else if (x->at && x->path[0] != '/' && (int)x->dirfd != AT_FDCWD)
        snprintf(path, sizeof(path), "/proc/self/fd/%ld/%s", x->dirfd, x->path);
    else
        snprintf(path, sizeof(path), "%s", x->path);
    struct target t;
    int r = probe(path, 0, &t);
    if (r < 0)
        return r;
    if (x->at && (x->flags & AT_SYMLINK_NOFOLLOW))
        t.kind = RUN_KERNEL; /* the kernel's checks (ELOOP on a link) */
    if (t.kind != RUN_CRAC)
        return exec_outside(x, x->path, t.kind == RUN_OUTSIDE ? t.why : NULL);

    char loader[PATH_MAX];
    ssize_t ln = readlink("/proc/self/exe", loader, sizeof(loader) - 1);
    if (ln <= 0)
        return exec_outside(x, x->path, "not runnable by crac (its loader's path is unknown)");
    loader[ln] = '\0';
    struct strv argv = {0}, opts = {0}, envp = {0};
    n_pool = 0;
    int fail = 0;
    const char *prog = path;
    if (t.script) {
        /* As the kernel: the interpreter, its one argument, the script's path, the rest. */
        fail |= push(&argv, t.interp);
        if (t.arg[0])
            fail |= push(&argv, t.arg);
        fail |= push(&argv, x->path);
        prog = t.interp;
    } else {
        fail |= push(&argv, x->argv && x->argv[0] ? x->argv[0] : path);
    }
    for (size_t i = 1; x->argv && x->argv[0] && x->argv[i]; i++)
        fail |= push(&argv, x->argv[i]);
    fail |= loader_options(&opts, argv.v ? argv.v[0] : path, prog, wants_mpi_shim(x->envp));
    int ofd = fail ? -1 : options_fd(&opts);
    long rc = -ENOMEM;
    if (ofd >= 0) {
        fail |= pushf(&envp, "CRAC_LOADER_OPTIONS_FD=%d", ofd);
        for (size_t i = 0; x->envp && x->envp[i]; i++)
            if (strncmp(x->envp[i], "CRAC_LOADER_OPTIONS_FD=", 23) != 0)
                fail |= push(&envp, x->envp[i]);
        int e = fail ? 0 : enter_exec_section();
        if (e != 0)
            rc = e;
        if (!fail && e == 0) {
            /* The program's mask goes with the exec as the kernel keeps it, the checkpoint
             * signal blocked in it: one pending now (a checkpoint asked for during the exec is
             * the exec'd loader's) must not meet the default action the exec gives it. */
            uint64_t saved, mask = x->mask | ckpt_exec_begin();
            raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &mask, &saved, 8);
            rc = raw_syscall3(SYS_execve, (long)loader, (long)argv.v, (long)envp.v);
            raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &saved, 0, 8);
            ckpt_exec_end();
            leave_exec_section();
        }
        close(ofd);
    }
    if (ckpt_cfg.coord_fd >= 0)
        fcntl(ckpt_cfg.coord_fd, F_SETFD, FD_CLOEXEC);
    for (int i = 0; i < n_pool; i++)
        free(pool[i]);
    n_pool = 0;
    free(argv.v);
    free(opts.v);
    free(envp.v);
    return rc;
}
