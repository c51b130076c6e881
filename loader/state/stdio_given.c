/* stdio_given.c — which files the invocation (the shell that ran `crac launch` or `crac restart`)
 * gave the process as fds 0-2, so a checkpoint tells them from what the program put there itself
 * (`sort -o FILE`, freopen, a shell's `2>/dev/null` before it runs a command, a socketpair end),
 * which is the program's and comes back as such, and copies of them at higher numbers
 * (`exec 3>&1`) come back as the restart's own (docs/DECISIONS.md "A program's own stdio
 * redirection"). */
#include "fds.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the notes tell apart: files, devices, sockets (a socketpair end rsync's forked child puts
 * on its stdin and stdout, a service's journal socket as the invocation's stdout) and pipes (the
 * invocation's `| tee log`, kept on fd 3 by `exec 3>&1`). */
static int stdio_noted_kind(mode_t mode)
{
    return S_ISREG(mode) || S_ISCHR(mode) || S_ISSOCK(mode) || S_ISFIFO(mode);
}

static struct {
    uint64_t dev, ino; /* 0, 0: closed, or none of stdio_noted_kind's */
} given[3];

void stdio_given_note(void)
{
    for (int fd = 0; fd < 3; fd++) {
        struct stat st;
        int kept = fstat(fd, &st) == 0 && stdio_noted_kind(st.st_mode);
        given[fd].dev = kept ? (uint64_t)st.st_dev : 0;
        given[fd].ino = kept ? (uint64_t)st.st_ino : 0;
    }
}

int stdio_given_parse(const char *v)
{
    int n = 0;
    unsigned long long d[3], i[3];
    if (sscanf(v, "%llx:%llx,%llx:%llx,%llx:%llx%n", &d[0], &i[0], &d[1], &i[1], &d[2], &i[2],
               &n) != 6 ||
        v[n])
        return -1;
    for (int fd = 0; fd < 3; fd++)
        given[fd].dev = d[fd], given[fd].ino = i[fd];
    return 0;
}

int stdio_given_format(char *buf, size_t len)
{
    int n = snprintf(buf, len, "%llx:%llx,%llx:%llx,%llx:%llx", (unsigned long long)given[0].dev,
                     (unsigned long long)given[0].ino, (unsigned long long)given[1].dev,
                     (unsigned long long)given[1].ino, (unsigned long long)given[2].dev,
                     (unsigned long long)given[2].ino);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int stdio_given_is(int fd, const struct stat *st)
{
    return fd >= 0 && fd < 3 && stdio_noted_kind(st->st_mode) && given[fd].ino &&
           given[fd].dev == (uint64_t)st->st_dev && given[fd].ino == (uint64_t)st->st_ino;
}

int stdio_given_which(const struct stat *st)
{
    static const int order[] = {1, 2, 0};
    for (int i = 0; i < 3; i++)
        if (stdio_given_is(order[i], st))
            return order[i];
    return -1;
}

static int kept[3] = {-1, -1, -1};

int stdio_given_keep(int min)
{
    for (int fd = 0; fd < 3; fd++)
        if (kept[fd] < 0 && fcntl(fd, F_GETFD) >= 0 &&
            (kept[fd] = fcntl(fd, F_DUPFD_CLOEXEC, min)) < 0)
            return -1;
    return 0;
}

int stdio_given_dup(int n)
{
    if (n < 0 || n > 2 || kept[n] < 0)
        return open("/dev/null", O_RDWR | O_CLOEXEC);
    return fcntl(kept[n], F_DUPFD_CLOEXEC, 3);
}

void stdio_given_release(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (kept[fd] >= 0) {
            close(kept[fd]);
            kept[fd] = -1;
        }
}
