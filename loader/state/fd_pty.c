/* fd_pty.c — pseudo-terminal pairs the program holds (master, and the slave if ours): a new pair at
 * restart with the slave's termios and window size and the bytes in flight both ways. */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
 * by path; a master alone still gets a new pair, its slave unopened. Bytes in flight are kept
 * (pty_save). */
static void pty_regroup(struct fd_entry *es, int n)
{
    int masters[FDS_MAX];
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
    }
}

/* The slave's output processing off (what is written to it reaches the master as it is), its
 * settings before in WAS. 0, or -1. */
static int output_raw(int slave, struct termios *was)
{
    struct termios raw;
    if (tcgetattr(slave, was) != 0)
        return -1;
    raw = *was;
    raw.c_oflag &= ~(tcflag_t)OPOST;
    return tcsetattr(slave, TCSANOW, &raw);
}

/* The slave's settings for bytes written into the master as they are (its input put back): no
 * echo, no signals, no translation, no erase or kill; canonical mode as the program has it, so
 * lines are lines again. Its settings before in WAS. 0, or -1. */
static int input_raw(int slave, struct termios *was)
{
    struct termios raw;
    if (tcgetattr(slave, was) != 0)
        return -1;
    raw = *was;
    raw.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(ICRNL | INLCR | IGNCR | ISTRIP | IUCLC | IXON | IXOFF | PARMRK);
    raw.c_cc[VERASE] = raw.c_cc[VKILL] = _POSIX_VDISABLE;
    return tcsetattr(slave, TCSANOW, &raw);
}

/* Bytes written into a master reach the slave's line discipline later, from a kernel worker: its
 * settings must stay those of input_raw until they have. A poll of the slave that finds no line
 * to read runs that work at once (n_tty_poll); one that finds a line found the write's bytes
 * taken in (the slave's queue was empty before it, and one write is taken in at once). */
static void input_taken(int slave)
{
    struct pollfd p = {slave, POLLIN, 0};
    poll(&p, 1, 0);
}

/* Up to avail bytes that poll says fd has, read into buf; how many. */
static int read_ready(int fd, char *buf, int avail)
{
    int got = 0;
    while (got < avail) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r = poll(&p, 1, 0) == 1 ? read(fd, buf + got, (size_t)(avail - got)) : -1;
        if (r <= 0)
            break;
        got += (int)r;
    }
    return got;
}

/* BUF (GOT bytes) as files/<prefix>-<index>; whether it is there. */
static int save_bytes(const char *files_dir, const char *prefix, uint32_t index, const char *buf,
                      int got)
{
    char dst[PATH_MAX], name[48];
    snprintf(name, sizeof(name), "%s-%u", prefix, index);
    fd_files_path(dst, sizeof(dst), files_dir, name);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = out >= 0 && write(out, buf, (size_t)got) == got;
    if (out >= 0)
        close(out);
    return ok;
}

/* What the slave wrote that the master has not read (a program's output on its way to `script`
 * or pexpect): read from the master, saved as files/pty-<index>, and written back through the
 * slave, so the run goes on with the same bytes waiting. */
static void save_output(struct fd_entry *e, int slave, const char *files_dir, const char *path)
{
    int avail = 0;
    if (ioctl(e->rec.fd, FIONREAD, &avail) != 0 || avail <= 0)
        return;
    char *buf = malloc((size_t)avail);
    int got = buf ? read_ready(e->rec.fd, buf, avail) : 0;
    if (got > 0 && save_bytes(files_dir, "pty", e->pty.index, buf, got))
        e->rec.saved = 1;
    struct termios was;
    int raw = got > 0 ? output_raw(slave, &was) : -1;
    int back = raw == 0 && write(slave, buf, (size_t)got) == got;
    if (raw == 0)
        tcsetattr(slave, TCSANOW, &was);
    if (got > 0 && !back)
        state_loss("pseudo-terminal %s: %d bytes its master had not read are lost to the run "
                   "going on",
                   path, got);
    if (got < avail || !e->rec.saved)
        state_loss("pseudo-terminal %s: the bytes its master had not read cannot be saved", path);
    free(buf);
}

/* What was written into the master that the slave's reader has not read (typed input, a line
 * pexpect sent): read from the slave with canonical mode off for a moment (a line not yet ended
 * is read too), saved as files/ptyin-<index>, and written back into the master as it was, echo
 * and signals off, so the run goes on with the same input waiting. */
static void save_input(struct fd_entry *e, int slave, const char *files_dir, const char *path)
{
    struct termios was, all;
    int avail = 0;
    if (tcgetattr(slave, &was) != 0)
        return;
    all = was;
    all.c_lflag &= ~(tcflag_t)ICANON;
    all.c_cc[VMIN] = 0;
    all.c_cc[VTIME] = 0;
    if (tcsetattr(slave, TCSANOW, &all) != 0 || ioctl(slave, FIONREAD, &avail) != 0 || avail <= 0) {
        tcsetattr(slave, TCSANOW, &was);
        return;
    }
    char *buf = malloc((size_t)avail);
    int got = buf ? read_ready(slave, buf, avail) : 0;
    tcsetattr(slave, TCSANOW, &was);
    int saved = got > 0 && save_bytes(files_dir, "ptyin", e->pty.index, buf, got);
    struct termios plain;
    int raw = got > 0 ? input_raw(slave, &plain) : -1;
    int back = raw == 0 && write(e->rec.fd, buf, (size_t)got) == got;
    if (raw == 0) {
        input_taken(slave);
        tcsetattr(slave, TCSANOW, &plain);
    }
    if (got > 0 && !back)
        state_loss("pseudo-terminal %s: %d bytes its reader had not read are lost to the run "
                   "going on",
                   path, got);
    if (got < avail || (got > 0 && !saved))
        state_loss("pseudo-terminal %s: the bytes its reader had not read cannot be saved", path);
    free(buf);
}

/* A pair's bytes in flight, both ways, at its lowest-numbered master fd here, through the slave
 * (this process's, else opened by its path: every process of the job is parked). */
static int pty_save(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir)
{
    if (e->rec.kind != CRAC_FD_PTY_MASTER)
        return 0;
    int slave = -1;
    for (int k = 0; k < n; k++) {
        if (!is_pty(all[k].rec.kind) || all[k].pty.index != e->pty.index)
            continue;
        if (all[k].rec.kind == CRAC_FD_PTY_MASTER && all[k].rec.fd < e->rec.fd)
            return 0;
        if (all[k].rec.kind == CRAC_FD_PTY_SLAVE && slave < 0)
            slave = all[k].rec.fd;
    }
    char path[64];
    snprintf(path, sizeof(path), "/dev/pts/%u", e->pty.index);
    int opened = slave < 0 ? open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) : -1;
    int avail = 0;
    if (slave < 0 && opened < 0) {
        if (ioctl(e->rec.fd, FIONREAD, &avail) == 0 && avail > 0)
            state_loss("pseudo-terminal %s: the bytes its master had not read cannot be saved",
                       path);
        return 0;
    }
    save_output(e, slave >= 0 ? slave : opened, files_dir, path);
    save_input(e, slave >= 0 ? slave : opened, files_dir, path);
    if (opened >= 0)
        close(opened);
    return 0;
}

/* ---- restart ---- */

/* The bytes saved from pair INDEX as files/PREFIX-INDEX, written into DST with the new slave S
 * set by MAKE_RAW for the while: pty (save_output), the slave's output waiting for the master,
 * written to the slave with output_raw before its settings are the program's; ptyin
 * (save_input), input waiting for the program, written into the master with input_raw once they
 * are. */
static void refill(const struct fd_restore *r, uint32_t index, const char *prefix, int s, int dst,
                   int (*make_raw)(int, struct termios *))
{
    char saved[PATH_MAX + 64];
    snprintf(saved, sizeof(saved), "%s/files/%s-%u", r->gen_dir, prefix, index);
    struct termios was;
    if (access(saved, F_OK) != 0)
        return;
    int raw = make_raw(s, &was);
    if (raw != 0 || fd_copy_file(saved, dst) != 0)
        fprintf(stderr,
                "crac: warning: the bytes saved from pseudo-terminal %u (%s) cannot all be put "
                "back\n",
                index, prefix);
    if (raw == 0) {
        input_taken(s);
        tcsetattr(s, TCSANOW, &was);
    }
}

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
    if (s >= 0)
        refill(r, v->pty.index, "pty", s, s, output_raw);
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
        refill(r, v->pty.index, "ptyin", s, m, input_raw);
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
                                         .save = pty_save,
                                         .extra = sizeof(struct crac_pty_rec),
                                         .reopen = pty_reopen};
const struct fd_ops fd_pty_slave_ops = {.kind = CRAC_FD_PTY_SLAVE,
                                        .name = "pty slave",
                                        .extra = sizeof(struct crac_pty_rec),
                                        .reopen = pty_reopen};
