/* fd_pty.c — pseudo-terminal pairs the program holds (master, and the slave if ours): a new pair at
 * restart with the slave's termios and window size; unread bytes are not kept. */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

static int is_pty(uint32_t kind) { return kind == CRAC_FD_PTY_MASTER || kind == CRAC_FD_PTY_SLAVE; }

/* ---- checkpoint ---- */

/* The pty number of a master (/dev/ptmx) or slave (/dev/pts/N) fd; -1 if it is neither. */
static int pty_index(int fd, const struct stat *st, int *is_master)
{
    if (!S_ISCHR(st->st_mode))
        return -1;
    unsigned maj = major(st->st_rdev), min = minor(st->st_rdev);
    unsigned n;
    if (maj == 5 && min == 2) { /* /dev/ptmx (or /dev/pts/ptmx) */
        *is_master = 1;
        return ioctl(fd, TIOCGPTN, &n) == 0 ? (int)n : -1;
    }
    if (maj >= 136 && maj <= 143) { /* UNIX98 slaves */
        *is_master = 0;
        return (int)((maj - 136) * 256 + min);
    }
    return -1;
}

/* The slave's termios and window size (the master's own termios are not the ones programs set):
 * through the slave fd, else by opening the slave for a moment. */
static void pty_settings(struct fd_entry *e, int is_master)
{
    int fd = e->rec.fd, opened = -1;
    if (is_master) {
        char name[64];
        snprintf(name, sizeof(name), "/dev/pts/%u", e->pty.index);
        fd = opened = open(name, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    }
    struct termios t;
    struct winsize w;
    if (fd >= 0 && tcgetattr(fd, &t) == 0) {
        memcpy(e->pty.termios, &t, sizeof(e->pty.termios));
        e->pty.have_termios = 1;
    }
    if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &w) == 0)
        memcpy(e->pty.winsize, &w, sizeof(e->pty.winsize));
    if (opened >= 0)
        close(opened);
}

_Static_assert(sizeof(struct termios) == 60, "crac_pty_rec holds x86-64 glibc termios");
_Static_assert(sizeof(struct winsize) == 8, "crac_pty_rec holds struct winsize");

/* Pseudo-terminals whose master and slave are both ours become a new pair at restart (the old
 * one dies with the process). A slave alone (a terminal of someone else) stays a device reopened
 * by path; a master alone still gets a new pair, its slave unopened. Unread data is not kept. */
static void pty_regroup(struct fd_entry *es, int n)
{
    int masters[FDS_MAX], warned = 0;
    for (int i = 0; i < n; i++) {
        struct fd_entry *e = &es[i];
        struct stat st;
        masters[i] = -1;
        int is_master = 0;
        if (e->rec.kind != CRAC_FD_CHAR || fstat(e->rec.fd, &st) != 0)
            continue;
        int idx = pty_index(e->rec.fd, &st, &is_master);
        if (idx >= 0 && is_master)
            masters[i] = idx;
    }
    for (int i = 0; i < n; i++) {
        struct fd_entry *e = &es[i];
        struct stat st;
        int is_master = 0;
        if (e->rec.kind != CRAC_FD_CHAR || fstat(e->rec.fd, &st) != 0)
            continue;
        int idx = pty_index(e->rec.fd, &st, &is_master);
        if (idx < 0)
            continue;
        int paired = is_master;
        for (int k = 0; k < n && !paired; k++)
            paired = masters[k] == idx;
        if (!paired)
            continue;
        e->rec.kind = is_master ? CRAC_FD_PTY_MASTER : CRAC_FD_PTY_SLAVE;
        e->pty.index = (uint32_t)idx;
        pty_settings(e, is_master);
        int unread = 0;
        if (ioctl(e->rec.fd, FIONREAD, &unread) == 0 && unread > 0 && !warned++)
            fprintf(stderr,
                    "crac: warning: pseudo-terminal %s holds %d unread bytes; they are "
                    "not saved (the pair is recreated empty at restart)\n",
                    e->path, unread);
    }
}

/* ---- restart ---- */

/* A pseudo-terminal pair: made once, at the lowest-numbered fd of the old pair, with the slave's
 * termios and window size; each of the program's numbers gets the new master or a new open of
 * the new slave. */
static int pty_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    char *err = r->err;
    size_t errlen = r->errlen;
    struct fd_view o;
    size_t off = 0;
    const struct crac_pty_rec *settings = NULL;
    struct crac_pty_rec keep;
    while (fd_next(r->note, r->len, &off, &o) > 0) {
        if (!is_pty(o.rec.kind) || o.pty.index != v->pty.index)
            continue;
        if (o.rec.fd < v->rec.fd)
            return 0;
        if (o.pty.have_termios && !settings) {
            keep = o.pty;
            settings = &keep;
        }
    }
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char slave[64];
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, slave, sizeof(slave)) != 0) {
        /* No pseudo-terminals here (no /dev/pts): the program goes on, its pair reads as
         * /dev/null, rather than the restart failing. */
        fprintf(stderr,
                "crac: warning: cannot make a new pseudo-terminal for %s (%s); its fds "
                "now read as /dev/null\n",
                v->path, strerror(errno));
        if (m >= 0)
            close(m);
        off = 0;
        while (fd_next(r->note, r->len, &off, &o) > 0) {
            if (!is_pty(o.rec.kind) || o.pty.index != v->pty.index)
                continue;
            int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (fd < 0 || fd_install(fd, &o.rec) != 0) {
                snprintf(err, errlen, "fd %d: cannot hold its number: %s", o.rec.fd,
                         strerror(errno));
                return -1;
            }
        }
        return 0;
    }
    int s = open(slave, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s >= 0 && settings) {
        struct termios t;
        struct winsize w;
        memcpy(&t, settings->termios, sizeof(t));
        memcpy(&w, settings->winsize, sizeof(w));
        if (tcsetattr(s, TCSANOW, &t) != 0 || ioctl(s, TIOCSWINSZ, &w) != 0)
            fprintf(stderr,
                    "crac: warning: the settings of pseudo-terminal %s cannot be "
                    "restored: %s\n",
                    v->path, strerror(errno));
    }
    if (s >= 0)
        close(s);
    off = 0;
    while (fd_next(r->note, r->len, &off, &o) > 0) {
        if (!is_pty(o.rec.kind) || o.pty.index != v->pty.index)
            continue;
        int fd = o.rec.kind == CRAC_FD_PTY_MASTER
                     ? fcntl(m, F_DUPFD_CLOEXEC, 0)
                     : open(slave, (int)(o.rec.open_flags & (O_ACCMODE | O_NONBLOCK)) | O_NOCTTY |
                                       O_CLOEXEC);
        if (fd < 0 || fd_install(fd, &o.rec) != 0) {
            snprintf(err, errlen, "fd %d: cannot reopen the new pseudo-terminal %s: %s", o.rec.fd,
                     slave, strerror(errno));
            close(m);
            return -1;
        }
    }
    close(m);
    return 0;
}

/* Both are regrouped from character devices (fd_chardev.c) once every fd is known: whether a
 * slave is ours depends on whether its master is. */
const struct fd_ops fd_pty_master_ops = {.kind = CRAC_FD_PTY_MASTER,
                                         .name = "pty master",
                                         .regroup = pty_regroup,
                                         .extra = sizeof(struct crac_pty_rec),
                                         .reopen = pty_reopen};
const struct fd_ops fd_pty_slave_ops = {.kind = CRAC_FD_PTY_SLAVE,
                                        .name = "pty slave",
                                        .extra = sizeof(struct crac_pty_rec),
                                        .reopen = pty_reopen};
