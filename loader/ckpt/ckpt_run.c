/* ckpt_run.c — one checkpoint, in the order of docs/ARCHITECTURE.md "Checkpoint": quiesce, suspend, write into a temporary
 * directory, resume, then publish (manifest, rename, latest; in a job only once every process's
 * image is durable). Also the lower-half entries the upper runtime calls to register itself and
 * to ask for a checkpoint. */
#include "ckpt.h"
#include "coord_client.h"
#include "tree.h"

#include "crac_layout.h"
#include "crac_rawsys.h"
#include "image_device.h"
#include "lower_fds.h"
#include "make_dirs.h"
#include "page_digest.h"
#include "restart_lazy.h"
#include "state.h"
#include "upper_hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct ckpt_config ckpt_cfg;
struct crac_registry *ckpt_registry;
/* 1 while a written generation is being published after the program resumed: a program that
 * exits then waits for it (confine_trap.c traps exit_group), so its last checkpoint is kept. */
volatile int32_t ckpt_publishing;

/* The suspend handler is upper code with an upper restorer: install it with a raw rt_sigaction
 * so the lower libc puts nothing of its own in the frame. */
int ckpt_install_suspend_handler(const struct crac_registry *r)
{
    uint64_t keep_open = (1UL << (SIGSYS - 1)) | (1UL << (SIGSEGV - 1)) | (1UL << (SIGBUS - 1)) |
                         (1UL << (SIGILL - 1)) | (1UL << (SIGFPE - 1)) | (1UL << (SIGTRAP - 1));
    struct {
        uint64_t handler, flags, restorer, mask;
    } sa = {r->suspend_handler, SA_SIGINFO | SA_RESTART | 0x04000000 /* SA_RESTORER */, r->restorer,
            ~keep_open};
    return (int)raw_syscall4(SYS_rt_sigaction, CRAC_SIG_SUSPEND, &sa, 0, 8);
}

/* Lower-half API entry: the upper runtime hands over its registry. */
long ckpt_register_upper(struct crac_registry *r)
{
    if (r->magic != CRAC_REGISTRY_MAGIC || r->version != CRAC_REGISTRY_VERSION)
        return -EINVAL;
    if (ckpt_install_suspend_handler(r) != 0)
        return -EINVAL;
    tree_exec_registered(r); /* an exec'd program's generations go on from its process's */
    ckpt_registry = r;
    ckpt_set_ready();
    return 0;
}

/* Lower-half API entry: crac_checkpoint() from the program. */
long ckpt_request_entry(void)
{
    ckpt_request(0);
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Bytes the files of a published generation hold on disk (upper.core is sparse). */
static uint64_t disk_bytes(const char *gen_dir)
{
    uint64_t total = 0;
    static const char *const names[] = {"upper.core", "device.img"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[PATH_MAX + 96];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", gen_dir, names[i]);
        if (stat(path, &st) == 0)
            total += (uint64_t)st.st_blocks * 512;
    }
    return total;
}

/* crac launch -v: one line per published checkpoint, for the user. */
static void report_verbose(int generation, const double *t, const char *final)
{
    if (ckpt_cfg.verbose)
        fprintf(stderr,
                "crac: checkpoint %d: %.1f MiB in %s, program paused %.0f ms, %.0f ms in all\n",
                generation, disk_bytes(final) / 1048576.0, final, t[3] - t[0], t[4] - t[0]);
}

/* CRAC_TIMING=1: one line per checkpoint with the time each phase took (docs/PERFORMANCE.md). */
static void report_timing(int generation, const double *t, int n_threads, uint64_t core_size,
                          double fork_ms, int forked)
{
    static int enabled = -1;
    if (enabled < 0)
        enabled = getenv("CRAC_TIMING") != NULL;
    if (enabled)
        fprintf(stderr,
                "crac: timing: generation %d: suspend %.2f ms, write %.2f ms, pause %.2f ms, "
                "publish %.2f ms, threads %d, core %llu bytes, writer cpu %.0f ms, io %s, "
                "fork %.2f ms, writer %s\n",
                generation, t[1] - t[0], t[2] - t[1], t[3] - t[0], t[4] - t[3], n_threads,
                (unsigned long long)core_size, forked ? ckpt_writer_cpu_ms() : 0.0,
                forked && ckpt_writer_direct() ? "direct" : "buffered", fork_ms,
                forked ? "forked" : "paused");
}

/* Test knob (tests/test_job.py; docs/CLI.md "Environment"): with CRAC_TEST_WRITER_HOLD=PATH the
 * forked writer starts writing only once PATH exists, as if it were that slow, so a test can
 * look at a job while its writers run without depending on how long writing takes. Runs in the
 * writer (a copy of the manager: ordinary libc). */
/* The test knobs' wait: until PATH exists (none without a PATH). */
static void test_wait_for(const char *path)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    while (path && path[0] && access(path, F_OK) != 0)
        nanosleep(&tick, NULL);
}

void ckpt_test_writer_hold(void) { test_wait_for(getenv("CRAC_TEST_WRITER_HOLD")); }

/* Test knob (tests/test_peer_signal.py; docs/CLI.md "Environment"): with CRAC_TEST_PARKED_HOLD=PATH
 * a checkpoint whose threads are parked creates PATH.parked and takes its state only once PATH
 * exists, so a test can send the program a signal exactly then. */
static void test_parked_hold(void)
{
    const char *path = getenv("CRAC_TEST_PARKED_HOLD");
    if (!path || !path[0])
        return;
    char parked[PATH_MAX];
    snprintf(parked, sizeof(parked), "%s.parked", path);
    int fd = open(parked, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    test_wait_for(path);
}

static void finish_attempt(struct crac_registry *r, int failed)
{
    if (failed)
        __atomic_add_fetch(&r->failures, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&r->attempts, 1, __ATOMIC_SEQ_CST);
    raw_futex_wake(&r->attempts, RAW_WAKE_ALL);
}

/* Upper hooks (include/crac_hooks.h): the TCB they run with once threads are parked, 0 before
 * PARKED began; a checkpoint abandoned from then on still runs PRE_RESUME before the release. */
static uint64_t hook_fs;

static uint64_t parked_fs(const struct parked_thread *threads, int n)
{
    uint64_t fs = threads[0].rec->fsbase;
    for (int i = 0; i < n; i++)
        if (threads[i].tid == getpid())
            fs = threads[i].rec->fsbase;
    return fs;
}

static void abandon(struct crac_registry *r, const char *tmp, int generation, int parked,
                    const char *why)
{
    r->generation = generation - 1;
    incr_abandoned();
    if (parked && hook_fs)
        upper_hook_run(r, CRAC_EV_PRE_RESUME, hook_fs);
    hook_fs = 0;
    if (parked)
        ckpt_release_all();
    lower_fds_hold(); /* the program runs: its close_range must not close the directory scan's */
    remove_tree(tmp);
    lower_fds_release();
    fprintf(stderr, "crac: error: checkpoint %d abandoned%s%s; the previous one stays valid\n",
            generation, why ? ": " : "", why ? why : "");
    finish_attempt(r, 1);
}

/* A writable MAP_SHARED mapping of the program's window (shared memory, a semaphore, a shared
 * file mapping): fork() does not copy it on write, so a forked writer would save it as the
 * program (and, in a job, the other processes) change it after the pause. Such a process writes
 * paused (docs/DECISIONS.md "Shared memory is written paused"). crac's control area is excluded:
 * it is not saved as program memory. */
static int window_has_shared_writable(void)
{
    FILE *f = lower_fopen_read("/proc/self/maps");
    if (!f)
        return 1;              /* cannot tell: the paused write is always correct */
    char line[PATH_MAX + 256]; /* a whole line, long paths included, as ckpt_incr.c reads it */
    int found = 0;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long start, end;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3)
            continue;
        /* Inside W, past crac's control area (which starts W). */
        if (start < CRAC_CTRL_START + CRAC_CTRL_SIZE || end > CRAC_W_END)
            continue;
        found = perms[1] == 'w' && perms[3] == 's';
    }
    fclose(f);
    return found;
}

int ckpt_run_coordinated;

/* Settling: past SETTLE_MS a socket unread at every look is left unread (its messages dropped,
 * fd_netlink.c says so); past SETTLE_MAX_MS the checkpoint goes on whatever it finds. */
#define SETTLE_MS 500
#define SETTLE_MAX_MS 1000

/* Every thread suspended, with no netlink answer waiting to be read: the kernel cannot give a
 * restarted socket the rest of a dump it was sending (iproute2's ss, glibc's getaddrinfo read
 * one in a few milliseconds), so the program runs on a little and is suspended again
 * (docs/DECISIONS.md "Netlink sockets"). */
static int suspend_settled(struct parked_thread *threads, int *n)
{
    struct netlink_settle settle = {0};
    for (int waited_ms = 0, step_ms = 1;;
         waited_ms += step_ms, step_ms += step_ms < 16 ? step_ms : 0) {
        if (ckpt_suspend_all(threads, CRAC_MAX_THREADS, n) != 0)
            return -1;
        if (fd_netlink_settled(&settle, waited_ms >= SETTLE_MS) || waited_ms >= SETTLE_MAX_MS)
            return 0;
        ckpt_release_all();
        nanosleep(&(struct timespec){0, step_ms * 1000000L}, NULL);
    }
}

int ckpt_run(int exit_after, const struct ckpt_barrier *b)
{
    ckpt_run_coordinated = b != NULL;
    static struct parked_thread threads[CRAC_MAX_THREADS];
    /* A lazy restart still filling W: its writer (a forked copy) would read missing pages as
     * zeros. The checkpoint waits for the prefetcher (docs/DECISIONS.md "Lazy restart"). */
    restart_lazy_wait();
    struct crac_registry *r = ckpt_registry;
    int generation = r->generation + 1, n = 0;
    char tmp[PATH_MAX + 64], files[PATH_MAX + 80], core[PATH_MAX + 80], final[PATH_MAX + 64];
    /* The program still runs: descriptors opened until the suspension are held from its
     * close_range (lower_fds.h). */
    lower_fds_hold();
    if (make_dirs(ckpt_cfg.proc_dir, 1) != 0 || image_lineage_claim(r->generation == 0) != 0) {
        lower_fds_release();
        fprintf(stderr, "crac: error: checkpoint abandoned: cannot create or lock %s: %s\n",
                ckpt_cfg.proc_dir, strerror(errno));
        if (b)
            b->failed(b->ctx, "cannot create the checkpoint directory");
        finish_attempt(r, 1);
        return -1;
    }
    coord_record_launcher_rank(ckpt_cfg.proc_dir);
    snprintf(tmp, sizeof(tmp), "%s/gen-%06d.tmp", ckpt_cfg.proc_dir, generation);
    snprintf(files, sizeof(files), "%s/files", tmp);
    snprintf(core, sizeof(core), "%s/upper.core", tmp);
    snprintf(final, sizeof(final), "%s/gen-%06d", ckpt_cfg.proc_dir, generation);
    remove_tree(tmp); /* left by a checkpoint that was killed while writing */
    int made = mkdir(tmp, 0700);
    lower_fds_release();
    if (made != 0) {
        fprintf(stderr, "crac: error: checkpoint abandoned: cannot create %s: %s\n", tmp,
                strerror(errno));
        if (b)
            b->failed(b->ctx, "cannot create the generation directory");
        finish_attempt(r, 1);
        return -1;
    }
    double t[5];
    t[0] = now_ms();
    hook_fs = 0;
    if (upper_hooks_pre_suspend(r) != 0) {
        if (b)
            b->failed(b->ctx, "a PRE_SUSPEND hook failed");
        abandon(r, tmp, generation, 0, "a PRE_SUSPEND hook failed");
        return -1;
    }
    if (suspend_settled(threads, &n) != 0) {
        if (b)
            b->failed(b->ctx, "threads did not suspend");
        abandon(r, tmp, generation, 0, NULL);
        return -1;
    }
    /* PARKED hooks: the upper runtime notes what the device state needs (e.g. event timestamps)
     * while every thread is parked; what it writes is part of the image. They run before the
     * `suspended` barrier, which so doubles as their job-wide barrier. */
    hook_fs = parked_fs(threads, n); /* from here on, PRE_RESUME runs even if we give up */
    if (upper_hook_run(r, CRAC_EV_PARKED, hook_fs) != 0) {
        const char *why = "a PARKED hook failed (the device state could not be recorded)";
        if (b)
            b->failed(b->ctx, why);
        abandon(r, tmp, generation, 1, why);
        return -1;
    }
    fd_socket_push_all();
    /* Barrier: every process of the job is suspended before any writes. */
    if (b && b->suspended(b->ctx) != 0) {
        abandon(r, tmp, generation, 1, "the coordinator called it off");
        return -1;
    }
    t[1] = now_ms();
    char derr[512] = "";
    struct state_note notes[STATE_KINDS_MAX];
    uint32_t header_crc = 0;
    uint64_t core_size = 0;
    struct image_digests digests = {NULL, NULL};
    r->generation = generation;
    /* Every kind of state beside memory (loader/state/kinds.c), then the device (its memory
     * copied to the host: device.img), then memory and threads into upper.core with their
     * notes: by a forked copy-on-write child while the program runs on, unless the program
     * exits after this checkpoint anyway or the fork is off or refused (ckpt_writer.c). */
    const struct state_capture cap = {threads, n, files};
    test_parked_hold();
    ckpt_signals_hold(); /* until memory is copied: a program's signal in the image or after it */
    int rc = state_capture_all(&cap, notes) != 0 ||
                     device_image_write(tmp, r, derr, sizeof(derr), &digests.device) != 0
                 ? -1
                 : 0;
    if (derr[0])
        fprintf(stderr, "crac: error: %s\n", derr);
    /* --incremental: the pages written since the last checkpoint, listed and protected again
     * now, with nothing of the program running and before the writer forks (ckpt_incr.c). */
    if (rc == 0)
        incr_prepare(generation);
    pid_t writer = -1;
    double tc = now_ms(); /* the fork: copying the page tables is most of the pause */
    /* Under a coordinator too: no process publishes before every one is durable (the
     * `durable` barrier below), so a process killed while the writers run leaves the whole job
     * at the previous generation (docs/DECISIONS.md "Coordinated checkpoints with forked
     * writers"). */
    if (rc == 0 && !exit_after && !ckpt_cfg.no_fork_writer && !window_has_shared_writable()) {
        const struct ckpt_write_job job = {core, threads, n, generation, notes};
        static int warned; /* one line per process: it would be refused each time */
        int err = ckpt_writer_start(&job, &writer);
        if (err != 0 && !warned++) {
            fprintf(stderr,
                    "crac: warning: cannot fork the checkpoint writer (%s): writing with the "
                    "program paused; --no-fork-writer says so once and for all\n",
                    strerror(-err));
        }
        if (err != 0)
            writer = -1;
    }
    double fork_ms = now_ms() - tc;
    if (rc == 0 && writer < 0)
        rc = core_write(core, threads, n, generation, notes, &header_crc, &core_size, NULL);
    ckpt_signals_release();
    state_notes_free(notes);
    if (rc != 0) {
        image_digests_cancel(&digests);
        if (b)
            b->failed(b->ctx, "cannot write the image");
        abandon(r, tmp, generation, 1, NULL);
        return -1;
    }
    /* PRE_RESUME hooks, before the `written` barrier (their job-wide one); not when exiting. */
    if (!exit_after)
        upper_hook_run(r, CRAC_EV_PRE_RESUME, hook_fs);
    hook_fs = 0;
    /* Barrier: every process has its image captured (written, or being written by its forked
     * writer) before any resumes. A job's checkpoint is done at `published`: on disk. */
    if (b && b->written(b->ctx, generation) != 0) {
        if (writer > 0)
            ckpt_writer_cancel(writer);
        image_digests_cancel(&digests);
        abandon(r, tmp, generation, 1, "the coordinator called it off");
        return -1;
    }
    t[2] = now_ms();
    if (exit_after) {
        /* Checkpoint-then-exit: publish while everything is still parked, then leave; in a job
         * once every process is durable. */
        rc = prepare_generation(tmp, generation, header_crc, core_size, n, digests);
        if (b && rc == 0 && b->durable(b->ctx, generation) != 0) {
            abandon(r, tmp, generation, 1, "the coordinator called it off");
            return -1;
        }
        if (rc == 0)
            rc = publish_generation(tmp, generation);
        t[3] = t[2];
        t[4] = now_ms();
        report_timing(generation, t, n, core_size, 0, 0);
        if (b)
            b->published(b->ctx, rc == 0 ? generation : -1, final);
        raw_syscall1(SYS_exit_group, rc == 0 ? 0 : 2);
    }
    /* Publishing (and the forked writer) goes on after the release: a program that exits now
     * waits for it (confine_trap.c). */
    __atomic_store_n(&ckpt_publishing, 1, __ATOMIC_SEQ_CST);
    lower_fds_hold(); /* publishing opens and writes files while the program runs again */
    ckpt_release_all();
    if (!b) /* a first fork may start the job's coordinator now (ckpt.h) */
        ckpt_solo_gate_leave(CKPT_GATE_SOLO);
    t[3] = now_ms();
    if (writer > 0 && ckpt_writer_wait(writer, &header_crc, &core_size) != 0) {
        image_digests_cancel(&digests);
        fprintf(stderr,
                "crac: error: checkpoint %d abandoned: cannot write %s; the previous one "
                "stays valid\n",
                generation, core);
        rc = -1;
    } else if (rc == 0) {
        rc = prepare_generation(tmp, generation, header_crc, core_size, n, digests);
    }
    /* A job publishes generation N only when every process has it on disk: a process killed
     * (or a writer failed) before then leaves every process at N-1. The wait is for other
     * processes' writers, not for a program thread here, so the program's close_range is not
     * held back meanwhile (lower_fds.h). */
    int answered = 0; /* `failed` sent, or the job called it off: no `published` */
    if (b && rc != 0) {
        b->failed(b->ctx, "cannot write the image");
        answered = 1;
    } else if (b) {
        lower_fds_release();
        if (b->durable(b->ctx, generation) != 0) {
            fprintf(stderr,
                    "crac: error: checkpoint %d abandoned: the coordinator called it off; "
                    "the previous one stays valid\n",
                    generation);
            rc = -1;
            answered = 1;
        }
        lower_fds_hold();
    }
    if (rc == 0)
        rc = publish_generation(tmp, generation);
    t[4] = now_ms();
    report_timing(generation, t, n, core_size, fork_ms, writer > 0);
    if (rc != 0) {
        r->generation = generation - 1;
        incr_abandoned();
        remove_tree(tmp);
    } else {
        incr_published(generation, header_crc, core_size);
        report_verbose(generation, t, final);
    }
    lower_fds_release();
    if (b && !answered)
        b->published(b->ctx, rc == 0 ? generation : -1, final);
    /* Only now may the program end (emu_exit_group waits): a process of a job that ended before
     * its `published` left the coordinator thinking it died mid-checkpoint. */
    __atomic_store_n(&ckpt_publishing, 0, __ATOMIC_SEQ_CST);
    raw_futex_wake(&ckpt_publishing, RAW_WAKE_ALL);
    finish_attempt(r, rc != 0);
    return rc;
}
