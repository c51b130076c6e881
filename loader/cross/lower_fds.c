/* lower_fds.c — the lower half's own descriptors, moved just under RLIMIT_NOFILE so the numbers a
 * program expects to get from open() stay free, and recorded so checkpoints skip them. */
#include "lower_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HIGH_MARGIN 64

/* Read by the SIGSYS handler too (close_range, loader/confine/confine_exe.c): plain data. */
volatile int32_t lower_fd_slots[MAX_LOWER_FDS];
volatile int32_t lower_fd_count;

int lower_fd_low;

int lower_fd_floor(void)
{
    struct rlimit rl;
    int floor = 512;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur > 2 * HIGH_MARGIN)
        floor = (int)rl.rlim_cur - HIGH_MARGIN;
    return floor > lower_fd_low ? floor : lower_fd_low;
}

void lower_fds_size_table(void)
{
    int any = open("/", O_PATH | O_CLOEXEC);
    if (any < 0)
        return;
    int high = fcntl(any, F_DUPFD_CLOEXEC, lower_fd_floor() + HIGH_MARGIN - 1);
    if (high >= 0)
        close(high);
    close(any);
}

void lower_fds_drop_strays(void)
{
    int floor = lower_fd_floor(), strays[64], n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *de;
    while (n < 64 && (de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] != '.' && fd != dirfd(d) && fd >= floor && !lower_fd_is_ours(fd))
            strays[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        close(strays[i]);
}

int lower_fd_adopt(int fd)
{
    int high = fcntl(fd, F_DUPFD_CLOEXEC, lower_fd_floor());
    if (high < 0) /* the program lowered its limit under the filter's threshold, say */
        high = fcntl(fd, F_DUPFD_CLOEXEC, 512);
    if (high < 0)
        high = fd; /* no room up there: keep the number it has */
    else
        close(fd);
    int slot = __atomic_fetch_add(&lower_fd_count, 1, __ATOMIC_SEQ_CST);
    if (slot < MAX_LOWER_FDS)
        lower_fd_slots[slot] = high;
    return high;
}

/* A descriptor a lower-half library holds by number (MPI's sockets and shared memory): recorded
 * where it is, since the library would not know about a move. */
void lower_fd_record(int fd)
{
    int slot = __atomic_fetch_add(&lower_fd_count, 1, __ATOMIC_SEQ_CST);
    if (slot < MAX_LOWER_FDS)
        lower_fd_slots[slot] = fd;
}

int lower_fd_is_ours(int fd)
{
    int n = __atomic_load_n(&lower_fd_count, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n && i < MAX_LOWER_FDS; i++)
        if (lower_fd_slots[i] == fd)
            return 1;
    return 0;
}

/* A descriptor the lower half closed (the lazy restart's, restart_lazy.c): its number is the
 * program's to have again. */
void lower_fd_forget(int fd)
{
    int n = __atomic_load_n(&lower_fd_count, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n && i < MAX_LOWER_FDS; i++)
        if (lower_fd_slots[i] == fd)
            lower_fd_slots[i] = -1;
}

volatile int32_t lower_fd_busy;
volatile int32_t lower_fd_closers;

void lower_fds_hold(void)
{
    __atomic_add_fetch(&lower_fd_busy, 1, __ATOMIC_SEQ_CST);
    /* A close_range that started before the hold finishes first (it counted itself in before it
     * looked at lower_fd_busy); new ones wait. The timeout only bounds a lost wake-up. */
    for (int32_t n; (n = __atomic_load_n(&lower_fd_closers, __ATOMIC_SEQ_CST)) > 0;) {
        struct timespec t = {0, 1000000L};
        syscall(SYS_futex, &lower_fd_closers, 128 /* FUTEX_WAIT_PRIVATE */, n, &t, NULL, 0);
    }
}

void lower_fds_release(void)
{
    if (__atomic_sub_fetch(&lower_fd_busy, 1, __ATOMIC_SEQ_CST) == 0)
        syscall(SYS_futex, &lower_fd_busy, 129 /* FUTEX_WAKE_PRIVATE */, 0x7fffffff, NULL, NULL, 0);
}

/* fd (just opened by the manager at the lowest free number) moved up to the floor, where the
 * program's close() is trapped and held back while the manager holds (lower_fds_hold). Between
 * the open and the move the program may still close the low number: the move then fails (EBADF)
 * or, had the program opened something there meanwhile, finds another file; either way -2 tells
 * the caller to open again. With no room up there fd keeps its number. */
static int raise_fd(int fd)
{
    struct stat before, after;
    if (fd < 0 || fd >= lower_fd_floor())
        return fd;
    if (fstat(fd, &before) != 0)
        return errno == EBADF ? -2 : fd;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, lower_fd_floor());
    if (high < 0)
        return errno == EBADF ? -2 : fd;
    if (fstat(high, &after) != 0 || after.st_dev != before.st_dev ||
        after.st_ino != before.st_ino) {
        close(high); /* the low number is the program's own now: left alone */
        return -2;
    }
    close(fd);
    return high;
}

#define REOPEN_TRIES 8

int lower_openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    for (int tries = 0; tries < REOPEN_TRIES; tries++) {
        /* Held while the low number is ours: the program's dup2 onto it waits (emu_dup3). */
        lower_fds_hold();
        int fd = raise_fd(openat(dirfd, path, flags | O_CLOEXEC, mode));
        lower_fds_release();
        if (fd != -2)
            return fd;
        if (flags & O_EXCL) /* created already: opening again would fail with EEXIST */
            break;
    }
    errno = EBADF;
    return -1;
}

int lower_dup(int fd)
{
    for (int tries = 0; tries < REOPEN_TRIES; tries++) {
        lower_fds_hold();
        int copy = raise_fd(dup(fd));
        lower_fds_release();
        if (copy != -2)
            return copy;
    }
    errno = EBADF;
    return -1;
}

DIR *lower_opendir(const char *path)
{
    int fd = lower_openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

FILE *lower_fopen_read(const char *path)
{
    int fd = lower_openat(AT_FDCWD, path, O_RDONLY);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}
