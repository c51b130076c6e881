/* fd_chardev.c — fds of character devices (/dev/null, a terminal not ours, ...): reopened by path
 * with their flags. A pty pair the program holds both ends of is fd_pty.c's. */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int chardev_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)e;
    return S_ISCHR(st->st_mode);
}

int fd_chardev_holds_nothing(const char *path)
{
    static const char *const none[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                       "/dev/urandom"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        if (strcmp(path, none[i]) == 0)
            return 1;
    return 0;
}

/* Which devices a restart opens again (docs/TRUST.md): those that hold nothing (null, zero, full,
 * the random sources, the controlling terminal) and terminals the restarting user owns. Opening
 * any other device node (a disk, a tape that rewinds on open) could do what the program never
 * did: it is refused with its path named. */
static int harmless_device(const char *path)
{
    if (fd_chardev_holds_nothing(path) || strcmp(path, "/dev/tty") == 0)
        return 1;
    struct stat st;
    int tty = strncmp(path, "/dev/pts/", 9) == 0 || strncmp(path, "/dev/tty", 8) == 0;
    return tty && lstat(path, &st) == 0 && S_ISCHR(st.st_mode) && st.st_uid == geteuid();
}

static int chardev_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    const struct crac_fd_rec *rec = &v->rec;
    if (strncmp(v->path, "/proc/", 6) != 0 && !harmless_device(v->path)) {
        snprintf(r->err, r->errlen,
                 "fd %d: %s is a device crac does not reopen (only /dev/null, zero, full, random, "
                 "urandom, tty and terminals you own)",
                 rec->fd, v->path);
        return -1;
    }
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
