/* ckpt_writer.c — the forked checkpoint writer: a copy-on-write child of the manager that writes
 * upper.core and flushes it to disk while the program runs on (docs/ARCHITECTURE.md "Checkpoint"). */

/* Why a raw clone and not fork(): fork() would run the program's atfork handlers (the upper
 * libc's are not ours to call, the lower libc's take locks the child never needs) and send
 * SIGCHLD. The child is made with exit signal 0, so a program's wait(-1)/waitpid(-1) (without
 * __WALL/__WCLONE) never sees it and no SIGCHLD reaches the program. A program that waits with
 * __WALL may reap it: the result travels in a shared page, not in the exit status. The child
 * holds the whole address space copy-on-write: what the program writes after the release is a
 * private copy of the page, the child still sees the checkpoint's bytes. */
#include "ckpt.h"

#include "crac_rawsys.h"
#include "fork_advice.h"
#include "image_direct.h"
#include "lower_threads.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the child hands back; a page shared with it (MAP_SHARED survives the clone). */
struct writer_shared {
    volatile int32_t done; /* 1: rc and the rest are set */
    int32_t rc;
    uint32_t header_crc;
    uint32_t direct; /* 1: its page runs went O_DIRECT (CRAC_DIRECT_WRITE, image_direct.c) */
    uint64_t core_size;
    uint64_t cpu_us; /* the writer's CPU time, user and system (CRAC_TIMING) */
};

static struct writer_shared *shared;

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

__attribute__((noreturn)) static void child_main(const struct ckpt_write_job *job, pid_t parent)
{
    /* No signal of the program's (a Ctrl-C to the process group, a timer) may run an upper
     * handler in this copy; SIGKILL still ends it. The parent's death ends it too: a generation
     * nobody will publish is not worth finishing. */
    uint64_t all = ~0UL;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &all, 0, 8);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        raw_syscall1(SYS_exit_group, 3);
    core_owner_pid = parent;
    core_in_forked_copy = 1;
    /* A session of its own, so a group of its own under the scheduler's autogroups: the
     * writer gets a share like the whole program's, not one thread's among the program's
     * busy threads (1/9 beside 8), so the image is durable sooner; the program runs slower
     * for that shorter time (docs/DECISIONS.md "Checkpoint CPU and write path"). */
    setsid();
    ckpt_test_writer_hold();
    uint32_t crc = 0;
    uint64_t size = 0;
    int rc = core_write(job->core, job->threads, job->n_threads, job->generation, job->notes, &crc,
                        &size, NULL);
    /* Durable before the manager publishes: the fsync of publish then finds nothing to do. */
    if (rc == 0 && fsync_path(job->core) != 0) {
        fprintf(stderr, "crac: error: cannot flush %s: %s\n", job->core, strerror(errno));
        rc = -1;
    }
    shared->rc = rc;
    shared->header_crc = crc;
    shared->core_size = size;
    shared->direct = (uint32_t)direct_write_used;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        shared->cpu_us = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    __atomic_store_n(&shared->done, 1, __ATOMIC_RELEASE);
    raw_syscall1(SYS_exit_group, rc == 0 ? 0 : 2);
    __builtin_unreachable();
}

int ckpt_writer_start(const struct ckpt_write_job *job, pid_t *pid)
{
    if (!shared) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -errno;
        shared = p;
    }
    memset(shared, 0, sizeof(*shared));
    pid_t parent = getpid();
    /* The copy would lack the program's MADV_DONTFORK ranges and hold zeros for its
     * MADV_WIPEONFORK ones: that advice is lifted for the fork and given back right after
     * (docs/DECISIONS.md "Fork advice"). Refused: the image is written with the program paused. */
    struct crac_ctrl *c = crac_ctrl();
    long lifted = advice_lift(c);
    if (lifted != 0) {
        if (lifted == -ENOSPC)
            fprintf(stderr,
                    "crac: warning: the program gave MADV_DONTFORK or MADV_WIPEONFORK to "
                    "more ranges than crac records (%d)\n",
                    CRAC_MAX_FORK_ADVICE);
        advice_apply(c);
        return (int)lifted;
    }
    fflush(NULL); /* nothing buffered is written twice */
    /* Flags 0: a new process (no CLONE_VM: copy-on-write), exit signal 0, same stack (a copy).
     * Not while a lower thread is in pthread_create: the copy would keep the lock it held. */
    lower_spawn_hold();
    long r = raw_syscall6(SYS_clone, 0, 0, 0, 0, 0, 0);
    lower_spawn_release(); /* in the child too: its own threads may be created */
    if (r == 0)
        child_main(job, parent);
    long given_back = advice_apply(c);
    if (raw_is_err(r))
        return (int)r;
    if (given_back != 0) /* the copy is right; the program's next fork would not be */
        fprintf(stderr, "crac: warning: cannot give the program's fork advice back: %s\n",
                strerror((int)-given_back));
    *pid = (pid_t)r;
    return 0;
}

int ckpt_writer_wait(pid_t pid, uint32_t *header_crc, uint64_t *core_size)
{
    int status = 0;
    long r;
    do
        r = waitpid(pid, &status, __WALL);
    while (r < 0 && errno == EINTR);
    /* ECHILD: the program reaped it (a wait with __WALL); its result is in the shared page. */
    if (!__atomic_load_n(&shared->done, __ATOMIC_ACQUIRE)) {
        if (r == pid && WIFSIGNALED(status))
            fprintf(stderr, "crac: error: the checkpoint writer was killed by signal %d\n",
                    WTERMSIG(status));
        else
            fprintf(stderr, "crac: error: the checkpoint writer ended without writing the image\n");
        return -1;
    }
    *header_crc = shared->header_crc;
    *core_size = shared->core_size;
    return shared->rc;
}

double ckpt_writer_cpu_ms(void) { return shared ? (double)shared->cpu_us / 1e3 : 0; }

int ckpt_writer_direct(void) { return shared && shared->direct; }

void ckpt_writer_cancel(pid_t pid)
{
    kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, __WALL) < 0 && errno == EINTR)
        ;
}
