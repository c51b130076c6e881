/* fd_chardev.c — fds of character devices (/dev/null, a terminal not ours, ...): reopened by path
 * with their flags. A pty pair the program holds both ends of is fd_pty.c's. */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int chardev_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)e;
    return S_ISCHR(st->st_mode);
}

static int chardev_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    const struct crac_fd_rec *rec = &v->rec;
    int fd =
        open(v->path, (int)(rec->open_flags & ~(unsigned)(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC);
    if (fd < 0)
        fd = fd_proc_gone(v);
    if (fd < 0) {
        snprintf(r->err, r->errlen, "fd %d: cannot reopen %s: %s", rec->fd, v->path,
                 strerror(errno));
        return -1;
    }
    return fd_install(fd, rec);
}

const struct fd_ops fd_chardev_ops = {.kind = CRAC_FD_CHAR,
                                      .name = "chardev",
                                      .recognise = chardev_recognise,
                                      .reopen = chardev_reopen};
