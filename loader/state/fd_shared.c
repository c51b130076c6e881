/* fd_shared.c — descriptors shared with other processes of a restarted tree: the restart
 * (crac_py/launch/share.py) makes each shared pipe, FIFO or socket once and passes it down. */
#include "fds.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SHARED_MAX 1024

/* Program fd number -> the inherited descriptor that is its object (`--shared-fd FD:HELD`). */
static struct {
    int fd, held;
} shared[SHARED_MAX];
static int n_shared;

int fd_shared_add(const char *spec)
{
    char *end;
    long fd = strtol(spec, &end, 10);
    if (end == spec || *end != ':' || fd < 0 || fd >= FDS_MAX * 256 || n_shared >= SHARED_MAX)
        return -1;
    const char *h = end + 1;
    long held = strtol(h, &end, 10);
    if (end == h || *end || held < 3 || held > 1 << 20)
        return -1;
    shared[n_shared].fd = (int)fd;
    shared[n_shared++].held = (int)held;
    return 0;
}

int fd_shared_held(int fd)
{
    for (int i = 0; i < n_shared; i++)
        if (shared[i].fd == fd)
            return shared[i].held;
    return -1;
}

/* The program's fd at v takes the inherited object: the same open file as the other processes'
 * (so its flags, O_NONBLOCK included, are the shared file's, as before the checkpoint). */
int fd_shared_install(const struct fd_view *v)
{
    int held = fd_shared_held(v->rec.fd);
    int fd = fcntl(held, F_DUPFD_CLOEXEC, 0);
    return fd < 0 ? -1 : fd_install(fd, &v->rec);
}

/* Every fd is back: the inherited copies go (a write end kept here would hold back the
 * reader's end-of-file). */
void fd_shared_release(void)
{
    for (int i = 0; i < n_shared; i++) {
        int h = shared[i].held;
        if (h < 0)
            continue; /* one inherited descriptor may serve several numbers */
        for (int j = i; j < n_shared; j++)
            if (shared[j].held == h)
                shared[j].held = -1;
        close(h);
    }
    n_shared = 0;
}
