/* fd_eventfd.c — eventfds: a new one at restart, its counter at 0 (the counter is not saved). */
#include "fds.h"

#include <string.h>
#include <sys/eventfd.h>

static int eventfd_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)st;
    return strcmp(e->path, "anon_inode:[eventfd]") == 0;
}

static int eventfd_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    (void)r;
    int fd = eventfd(0, EFD_CLOEXEC);
    return fd < 0 ? -1 : fd_install(fd, &v->rec);
}

const struct fd_ops fd_eventfd_ops = {.kind = CRAC_FD_EVENTFD,
                                      .name = "eventfd",
                                      .recognise = eventfd_recognise,
                                      .reopen = eventfd_reopen};
