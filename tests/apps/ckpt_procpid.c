/* ckpt_procpid [STEPS=100]: every step, its own /proc/<getpid()> files and its main thread's
   /proc/<getpid()>/task/<gettid()>, by the ids it knows: opened, stat'ed, read and followed through
   libc (open, fopen, stat, access, readlink) and by raw system calls (openat, newfstatat, statx,
   faccessat), which after a restart take different ways in crac (a patched libc entry, the seccomp
   trap). /proc/<pid>/cwd must lead to getcwd(). Prints `step N`, then `DONE checksum=...`. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define PROG "ckpt_procpid"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static void check_fd(int fd, const char *how, const char *path)
{
    if (fd < 0)
        fail("%s %s: %s", how, path, strerror(errno));
    char c;
    if (read(fd, &c, 1) != 1)
        fail("read %s (%s): %s", path, how, strerror(errno));
    close(fd);
}

static void check_once(void)
{
    char stat_path[64], task[64], cwd_link[64], cwd[PATH_MAX], target[PATH_MAX];
    snprintf(stat_path, sizeof(stat_path), "/proc/%d/stat", getpid());
    snprintf(task, sizeof(task), "/proc/%d/task/%d", getpid(), gettid());
    snprintf(cwd_link, sizeof(cwd_link), "/proc/%d/cwd", getpid());
    check_fd(open(stat_path, O_RDONLY | O_CLOEXEC), "open", stat_path);
    check_fd((int)syscall(SYS_openat, AT_FDCWD, stat_path, O_RDONLY | O_CLOEXEC), "openat",
             stat_path);
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

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        check_once();
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
        ckpt_sleep_ms(20);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
