/* ckpt_procpid [STEPS=100]: every step, its own /proc/<getpid()> files and its main thread's
   /proc/<getpid()>/task/<gettid()>, by the ids it knows: opened, stat'ed, read and followed through
   libc (open, fopen, stat, access, readlink) and by raw system calls (openat, newfstatat, statx,
   faccessat), which after a restart take different ways in crac (a patched libc entry, the seccomp
   trap). /proc/<pid>/cwd must lead to getcwd(); the pid in /proc/<pid>/stat and the Pid in
   /proc/thread-self/status are getpid() and gettid(); the listings of /proc (readdir) and of
   /proc/self/task (raw getdents64) hold them; "<pid>/stat" opened at a descriptor of /proc
   (openat, libc and raw) is its own. A second thread's /proc/self/task/<its tid>/comm, opened once
   and held across checkpoints (as psutil holds a thread's stat for a moment), reads that
   thread's name on each step. Prints `step N`, then `DONE checksum=...`. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define PROG "ckpt_procpid"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

/* The text of FD from its start (closed), or a failure naming HOW and PATH. */
static void read_text(int fd, const char *how, const char *path, char *buf, size_t size)
{
    if (fd < 0)
        fail("%s %s: %s", how, path, strerror(errno));
    ssize_t n = read(fd, buf, size - 1);
    if (n <= 0)
        fail("read %s (%s): %s", path, how, n < 0 ? strerror(errno) : "empty");
    buf[n] = '\0';
    close(fd);
}

/* /proc/<pid>/stat begins with the pid. */
static void check_stat(int fd, const char *how, const char *path)
{
    char text[1024];
    read_text(fd, how, path, text, sizeof(text));
    if (atol(text) != getpid())
        fail("%s (%s) names pid %ld, not %d", path, how, atol(text), (int)getpid());
}

static void check_status(void)
{
    const char *path = "/proc/thread-self/status";
    char text[4096];
    read_text((int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY), "openat", path, text,
              sizeof(text));
    const char *pid = strstr(text, "\nPid:\t"), *tgid = strstr(text, "\nTgid:\t");
    if (!pid || !tgid || atol(pid + 6) != gettid() || atol(tgid + 7) != getpid())
        fail("%s says Pid %ld Tgid %ld, not %d %d", path, pid ? atol(pid + 6) : 0,
             tgid ? atol(tgid + 7) : 0, (int)gettid(), (int)getpid());
}

/* ID among the names of the directory PATH: through readdir, or raw getdents64. */
static void check_listed(const char *path, long id, int raw)
{
    char name[16];
    snprintf(name, sizeof(name), "%ld", id);
    int found = 0;
    if (!raw) {
        DIR *d = opendir(path);
        if (!d)
            fail("opendir %s: %s", path, strerror(errno));
        for (struct dirent *e; (e = readdir(d));)
            found |= strcmp(e->d_name, name) == 0;
        closedir(d);
    } else {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char buf[512]; /* small: a listing of /proc takes several calls */
        long n;
        while (fd >= 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
            for (long at = 0; at < n; at += ((struct dirent64 *)(buf + at))->d_reclen)
                found |= strcmp(((struct dirent64 *)(buf + at))->d_name, name) == 0;
        if (fd >= 0)
            close(fd);
    }
    if (!found)
        fail("%s does not list %s (%s)", path, name, raw ? "getdents64" : "readdir");
}

static void check_once(void)
{
    char stat_path[64], task[64], cwd_link[64], cwd[PATH_MAX], target[PATH_MAX];
    snprintf(stat_path, sizeof(stat_path), "/proc/%d/stat", getpid());
    snprintf(task, sizeof(task), "/proc/%d/task/%d", getpid(), gettid());
    snprintf(cwd_link, sizeof(cwd_link), "/proc/%d/cwd", getpid());
    check_stat(open(stat_path, O_RDONLY | O_CLOEXEC), "open", stat_path);
    check_stat((int)syscall(SYS_openat, AT_FDCWD, stat_path, O_RDONLY | O_CLOEXEC), "openat",
               stat_path);
    check_status();
    check_listed("/proc", getpid(), 0);
    check_listed("/proc", getpid(), 1);
    check_listed("/proc/self/task", gettid(), 1);
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char relative[32];
    snprintf(relative, sizeof(relative), "%d/stat", getpid());
    check_stat(openat(procfd, relative, O_RDONLY | O_CLOEXEC), "openat at /proc", relative);
    check_stat((int)syscall(SYS_openat, procfd, relative, O_RDONLY | O_CLOEXEC),
               "raw openat at /proc", relative);
    close(procfd);
    FILE *f = fopen(stat_path, "re");
    if (!f)
        fail("fopen %s: %s", stat_path, strerror(errno));
    fclose(f);
    struct stat st;
    if (stat(task, &st) != 0 || !S_ISDIR(st.st_mode))
        fail("stat %s: %s", task, strerror(errno));
    if (syscall(SYS_newfstatat, AT_FDCWD, task, &st, 0) != 0)
        fail("newfstatat %s: %s", task, strerror(errno));
    struct statx stx;
    if (syscall(SYS_statx, AT_FDCWD, task, 0, STATX_TYPE, &stx) != 0)
        fail("statx %s: %s", task, strerror(errno));
    if (access(stat_path, R_OK) != 0 || syscall(SYS_faccessat, AT_FDCWD, stat_path, R_OK) != 0)
        fail("access %s: %s", stat_path, strerror(errno));
    if (!getcwd(cwd, sizeof(cwd)))
        fail("getcwd: %s", strerror(errno));
    ssize_t n = readlink(cwd_link, target, sizeof(target) - 1);
    if (n < 0)
        fail("readlink %s: %s", cwd_link, strerror(errno));
    target[n] = '\0';
    if (strcmp(target, cwd) != 0)
        fail("%s leads to %s, not to the working directory %s", cwd_link, target, cwd);
}

#define WORKER_NAME "procpid-worker"
static pthread_mutex_t worker_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t worker_ready = PTHREAD_COND_INITIALIZER;
static int worker_comm_fd = -1;

/* Names itself, opens its own comm file by its tid and leaves the descriptor to main. */
static void *worker(void *unused)
{
    (void)unused;
    if (pthread_setname_np(pthread_self(), WORKER_NAME) != 0)
        fail("pthread_setname_np");
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", gettid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail("open %s: %s", path, strerror(errno));
    pthread_mutex_lock(&worker_lock);
    worker_comm_fd = fd;
    pthread_cond_signal(&worker_ready);
    pthread_mutex_unlock(&worker_lock);
    for (;;)
        pause();
    return NULL;
}

/* The held descriptor still reads the worker's own comm (not another's, not /dev/null's nothing). */
static void check_worker_fd(void)
{
    char name[32];
    ssize_t n = pread(worker_comm_fd, name, sizeof(name) - 1, 0);
    if (n < 0)
        fail("pread of the worker's held comm: %s", strerror(errno));
    name[n] = '\0';
    if (strcmp(name, WORKER_NAME "\n") != 0)
        fail("the worker's held comm reads \"%s\", not " WORKER_NAME, name);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    uint64_t h = CKPT_FNV_BASIS;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        fail("pthread_create");
    pthread_mutex_lock(&worker_lock);
    while (worker_comm_fd < 0)
        pthread_cond_wait(&worker_ready, &worker_lock);
    pthread_mutex_unlock(&worker_lock);
    for (long k = 1; k <= steps; k++) {
        check_once();
        check_worker_fd();
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
        ckpt_sleep_ms(20);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
