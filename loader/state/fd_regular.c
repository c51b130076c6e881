/* restart_fds.c — the program's file descriptors at restart: placeholders hold their numbers
 * while the lower half starts, then each is reopened, repositioned and moved into place. */
#include "restart.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

struct fd_view {
    struct crac_fd_rec rec;
    const char *path;
    struct crac_pty_rec pty; /* PTY kinds only */
};

static int is_pty(uint32_t kind) { return kind == CRAC_FD_PTY_MASTER || kind == CRAC_FD_PTY_SLAVE; }

/* The main thread's /proc/self/task/<tid> is recorded with the tid the program knows (its pid,
 * image_fds.c); here that thread's tid is the new pid. Other paths are used as they are. */
static const char *live_path(const struct restart_image *img, const char *path, char *buf,
                             size_t size)
{
    char old[48];
    int n = snprintf(old, sizeof(old), "/proc/self/task/%u", img->proc.pid);
    if (strncmp(path, old, (size_t)n) != 0 || (path[n] != '/' && path[n] != '\0'))
        return path;
    int w = snprintf(buf, size, "/proc/self/task/%d%s", (int)getpid(), path + n);
    return w > 0 && (size_t)w < size ? buf : path;
}

static int next_fd(const struct restart_image *img, size_t *off, struct fd_view *v)
{
    if (*off + sizeof(v->rec) > img->fds_len)
        return 0;
    memcpy(&v->rec, img->fds + *off, sizeof(v->rec));
    if (v->rec.size < sizeof(v->rec) + v->rec.path_len || *off + v->rec.size > img->fds_len ||
        v->rec.path_len == 0)
        return -1;
    v->path = (const char *)img->fds + *off + sizeof(v->rec);
    if (v->path[v->rec.path_len - 1] != '\0' || v->rec.fd < 0)
        return -1;
    if (is_pty(v->rec.kind)) {
        if (v->rec.size < sizeof(v->rec) + v->rec.path_len + sizeof(v->pty))
            return -1;
        memcpy(&v->pty, v->path + v->rec.path_len, sizeof(v->pty));
    }
    *off += v->rec.size;
    return 1;
}

int restart_hold_fds(const struct restart_image *img, char *err, size_t errlen)
{
    struct fd_view v;
    size_t off = 0;
    int max_fd = 2, r;
    while ((r = next_fd(img, &off, &v)) > 0)
        if (v.rec.fd > max_fd)
            max_fd = v.rec.fd;
    if (r < 0) {
        snprintf(err, errlen, "image corrupted: bad file descriptor record");
        return -1;
    }
    /* The program may have raised its soft RLIMIT_NOFILE above ours: room for its numbers (and
     * the core file's) until its own limits come back (proc_restore_rlimits). */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur <= (rlim_t)max_fd + 1 &&
        nofile.rlim_max > (rlim_t)max_fd + 1) {
        nofile.rlim_cur = (rlim_t)max_fd + 2;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    /* Move the core file out of the way, then occupy every number the program used. */
    int moved = fcntl(img->core_fd, F_DUPFD_CLOEXEC, max_fd + 1);
    if (moved < 0) {
        snprintf(err, errlen, "cannot hold file descriptor numbers up to %d: %s", max_fd,
                 strerror(errno));
        return -1;
    }
    close(img->core_fd);
    ((struct restart_image *)img)->core_fd = moved;
    off = 0;
    while (next_fd(img, &off, &v) > 0) {
        if (v.rec.fd <= 2)
            continue;
        int ph = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (ph < 0 || (ph != v.rec.fd && dup2(ph, v.rec.fd) < 0)) {
            snprintf(err, errlen, "cannot hold file descriptor %d: %s", v.rec.fd, strerror(errno));
            return -1;
        }
        if (ph != v.rec.fd)
            close(ph);
    }
    return 0;
}

static int copy_file(const char *src, int dst_fd)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(dst_fd, buf, (size_t)n) != n) {
            close(in);
            return -1;
        }
    close(in);
    return n < 0 ? -1 : 0;
}

/* Put fd into place with its recorded flags and offset. */
static int install(int fd, const struct crac_fd_rec *rec)
{
    if (fd != rec->fd) {
        if (dup2(fd, rec->fd) < 0)
            return -1;
        close(fd);
    }
    fcntl(rec->fd, F_SETFD, (rec->open_flags & O_CLOEXEC) ? FD_CLOEXEC : 0);
    fcntl(rec->fd, F_SETFL, rec->open_flags & (O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME));
    return 0;
}

/* The directories a removed file or directory is recreated in, best first: its old directory
 * (same filesystem as before), the image's generation directory, then the temporary directory. */
struct dir_name {
    char p[PATH_MAX];
};

static int scratch_dirs(const char *path, const char *gen_dir, struct dir_name out[3])
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", path);
    const char *tmp = getenv("TMPDIR");
    snprintf(out[0].p, PATH_MAX, "%s", dirname(copy));
    snprintf(out[1].p, PATH_MAX, "%s", gen_dir);
    snprintf(out[2].p, PATH_MAX, "%s", tmp && tmp[0] == '/' ? tmp : "/tmp");
    return 3;
}

/* DIR/.crac-restored-XXXXXX (a mkstemp template) into OUT; -1 if it does not fit. */
static int temp_name(char *out, size_t size, const char *dir)
{
    static const char tail[] = "/.crac-restored-XXXXXX";
    size_t n = strlen(dir);
    if (n + sizeof(tail) > size)
        return -1;
    memcpy(out, dir, n);
    memcpy(out + n, tail, sizeof(tail));
    return 0;
}

/* A new, already removed file holding the saved copy: the program's fd pointed at a file with no
 * name left (unlinked, or its directory `rm -rf`'d), so no name is given back. Returns a
 * read-write fd, or -1. */
static int removed_copy(const char *path, const char *gen_dir, const char *saved, uint32_t mode)
{
    struct dir_name dirs[3];
    int n = scratch_dirs(path, gen_dir, dirs);
    for (int i = 0; i < n; i++) {
        int w = open(dirs[i].p, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (w < 0) { /* a filesystem without O_TMPFILE: a named temporary, removed at once */
            char tmpl[PATH_MAX + 32];
            w = temp_name(tmpl, sizeof(tmpl), dirs[i].p) == 0 ? mkostemp(tmpl, O_CLOEXEC) : -1;
            if (w >= 0)
                unlink(tmpl);
        }
        if (w < 0)
            continue;
        if (copy_file(saved, w) != 0) {
            close(w);
            return -1;
        }
        fchmod(w, mode & 07777);
        return w;
    }
    return -1;
}

/* Every missing directory above PATH, so a saved file whose directory went away since the
 * checkpoint comes back at its own path (the program still names it). */
static void make_parents(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s", path);
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
}

/* A directory the program holds open that was removed: an empty, removed directory, which is
 * what such an fd shows (empty listing, nothing can be created in it). */
static int removed_dir(const char *path, const char *gen_dir, int flags)
{
    struct dir_name dirs[3];
    int n = scratch_dirs(path, gen_dir, dirs);
    for (int i = 0; i < n; i++) {
        char tmpl[PATH_MAX + 32];
        if (temp_name(tmpl, sizeof(tmpl), dirs[i].p) != 0)
            continue;
        if (!mkdtemp(tmpl))
            continue;
        int fd = open(tmpl, flags);
        rmdir(tmpl);
        if (fd >= 0)
            return fd;
    }
    return -1;
}

/* A /proc file that is gone at restart (another process's or another thread's; the checkpoint
 * records our own process's as /proc/self): that state cannot come back, so the fd reads as
 * /dev/null, with a warning, rather than failing the restart. */
static int proc_gone(const struct fd_view *v)
{
    if (strncmp(v->path, "/proc/", 6) != 0)
        return -1;
    int saved = errno;
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        errno = saved;
        return -1;
    }
    fprintf(stderr, "crac: warning: fd %d (%s) cannot be reopened; it now reads as /dev/null\n",
            v->rec.fd, v->path);
    return fd;
}

static int reopen_file(const struct fd_view *v, const char *gen_dir, int no_truncate, char *err,
                       size_t errlen)
{
    const struct crac_fd_rec *rec = &v->rec;
    int flags = (int)(rec->open_flags & ~(unsigned)(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC)) | O_CLOEXEC;
    char saved[PATH_MAX + 64];
    snprintf(saved, sizeof(saved), "%s/files/fd-%d", gen_dir, rec->fd);
    int fd;
    struct stat st;
    if (rec->unlinked || (stat(v->path, &st) != 0 && rec->saved)) {
        if (!rec->saved) {
            snprintf(err, errlen, "fd %d: %s is gone and no copy was saved", rec->fd, v->path);
            return -1;
        }
        int w;
        if (rec->unlinked) {
            /* Recreated removed; reopened through /proc with the program's own flags. */
            w = removed_copy(v->path, gen_dir, saved, rec->mode);
            if (w >= 0) {
                char self[64];
                snprintf(self, sizeof(self), "/proc/self/fd/%d", w);
                fd = open(self, flags);
                close(w);
            } else {
                fd = -1;
            }
            if (fd < 0) {
                snprintf(err, errlen, "fd %d: cannot recreate the removed file %s: %s", rec->fd,
                         v->path, strerror(errno));
                return -1;
            }
        } else {
            /* A file moved away (or its directory removed) since the checkpoint: at its path. */
            make_parents(v->path);
            w = open(v->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, rec->mode & 07777);
            if (w < 0 || copy_file(saved, w) != 0) {
                snprintf(err, errlen, "fd %d: cannot recreate %s: %s", rec->fd, v->path,
                         strerror(errno));
                return -1;
            }
            fchmod(w, rec->mode & 07777);
            close(w);
            fd = open(v->path, flags);
        }
    } else {
        fd = open(v->path, flags);
    }
    if (fd < 0)
        fd = proc_gone(v);
    if (fd < 0) {
        snprintf(err, errlen, "fd %d: cannot reopen %s: %s", rec->fd, v->path, strerror(errno));
        return -1;
    }
    int acc = (int)(rec->open_flags & O_ACCMODE);
    if (acc != O_RDONLY && !no_truncate && fstat(fd, &st) == 0 &&
        (uint64_t)st.st_size > rec->size_at_ckpt && ftruncate(fd, (off_t)rec->size_at_ckpt) != 0) {
        snprintf(err, errlen, "fd %d: cannot truncate %s back to its checkpoint size: %s", rec->fd,
                 v->path, strerror(errno));
        close(fd);
        return -1;
    }
    if (lseek(fd, (off_t)rec->pos, SEEK_SET) < 0 && rec->pos)
        return close(fd), snprintf(err, errlen, "fd %d: cannot seek %s", rec->fd, v->path), -1;
    return install(fd, rec);
}

/* Both ends of a pipe were the program's: make a new pipe once, give each number its end. */
static int restore_pipe(const struct restart_image *img, const struct fd_view *v,
                        const char *gen_dir)
{
    struct fd_view o;
    size_t off = 0;
    while (next_fd(img, &off, &o) > 0) {
        if (o.rec.kind != CRAC_FD_PIPE || o.rec.ino != v->rec.ino)
            continue;
        if (o.rec.fd < v->rec.fd)
            return 0; /* the pipe is made once, at its lowest-numbered end */
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    char saved[PATH_MAX + 64];
    snprintf(saved, sizeof(saved), "%s/files/pipe-%lu", gen_dir, (unsigned long)v->rec.ino);
    if (access(saved, R_OK) == 0)
        copy_file(saved, p[1]);
    off = 0;
    while (next_fd(img, &off, &o) > 0) {
        if (o.rec.kind != CRAC_FD_PIPE || o.rec.ino != v->rec.ino)
            continue;
        int end = (o.rec.open_flags & O_ACCMODE) == O_RDONLY ? p[0] : p[1];
        int dup = fcntl(end, F_DUPFD_CLOEXEC, 0);
        if (dup < 0 || install(dup, &o.rec) != 0)
            return -1;
    }
    close(p[0]);
    close(p[1]);
    return 0;
}

/* A pseudo-terminal pair: made once, at the lowest-numbered fd of the old pair, with the slave's
 * termios and window size; each of the program's numbers gets the new master or a new open of
 * the new slave. */
static int restore_pty(const struct restart_image *img, const struct fd_view *v, char *err,
                       size_t errlen)
{
    struct fd_view o;
    size_t off = 0;
    const struct crac_pty_rec *settings = NULL;
    struct crac_pty_rec keep;
    while (next_fd(img, &off, &o) > 0) {
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
        fprintf(stderr, "crac: warning: cannot make a new pseudo-terminal for %s (%s); its fds "
                        "now read as /dev/null\n", v->path, strerror(errno));
        if (m >= 0)
            close(m);
        off = 0;
        while (next_fd(img, &off, &o) > 0) {
            if (!is_pty(o.rec.kind) || o.pty.index != v->pty.index)
                continue;
            int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (fd < 0 || install(fd, &o.rec) != 0) {
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
            fprintf(stderr, "crac: warning: the settings of pseudo-terminal %s cannot be "
                            "restored: %s\n", v->path, strerror(errno));
    }
    if (s >= 0)
        close(s);
    off = 0;
    while (next_fd(img, &off, &o) > 0) {
        if (!is_pty(o.rec.kind) || o.pty.index != v->pty.index)
            continue;
        int fd = o.rec.kind == CRAC_FD_PTY_MASTER
                     ? fcntl(m, F_DUPFD_CLOEXEC, 0)
                     : open(slave, (int)(o.rec.open_flags & (O_ACCMODE | O_NONBLOCK)) | O_NOCTTY |
                                       O_CLOEXEC);
        if (fd < 0 || install(fd, &o.rec) != 0) {
            snprintf(err, errlen, "fd %d: cannot reopen the new pseudo-terminal %s: %s", o.rec.fd,
                     slave, strerror(errno));
            close(m);
            return -1;
        }
    }
    close(m);
    return 0;
}

static int read_exact(int fd, void *buf, size_t n)
{
    return read(fd, buf, n) == (ssize_t)n ? 0 : -1;
}

/* A POSIX message queue: opened by its name (created if gone, with its attributes), emptied of
 * what was sent or left after the checkpoint, and refilled with the saved messages in their
 * order. A queue the program had unlinked is made under a temporary name, unlinked again. */
static int restore_mqueue(const struct fd_view *v, const char *gen_dir, char *err, size_t errlen)
{
    const struct crac_fd_rec *rec = &v->rec;
    char saved[PATH_MAX + 64], name[PATH_MAX];
    snprintf(saved, sizeof(saved), "%s/files/mq-%d", gen_dir, rec->fd);
    if (rec->unlinked)
        snprintf(name, sizeof(name), "/crac-restored-%d-%d", (int)getpid(), rec->fd);
    else
        snprintf(name, sizeof(name), "%s", v->path);
    struct crac_mq_file head;
    int in = open(saved, O_RDONLY | O_CLOEXEC);
    if (in < 0 || read_exact(in, &head, sizeof(head)) != 0 || head.msgsize <= 0 ||
        head.msgsize > (1 << 24) || head.maxmsg <= 0 || head.curmsgs < 0 ||
        head.curmsgs > head.maxmsg) {
        snprintf(err, errlen, "fd %d: the saved message queue %s cannot be read", rec->fd, v->path);
        if (in >= 0)
            close(in);
        return -1;
    }
    struct mq_attr want = {.mq_maxmsg = head.maxmsg, .mq_msgsize = head.msgsize};
    mode_t mode = rec->mode & 0777;
    mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_NONBLOCK, mode, &want);
    struct mq_attr have;
    if (q != (mqd_t)-1 && (mq_getattr(q, &have) != 0 || have.mq_maxmsg != head.maxmsg ||
                           have.mq_msgsize != head.msgsize)) {
        /* Someone made another queue of that name since: ours is the program's. */
        mq_close(q);
        mq_unlink(name);
        q = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK, mode, &want);
    }
    char *buf = q == (mqd_t)-1 ? NULL : malloc((size_t)head.msgsize);
    int ok = buf != NULL;
    while (ok && mq_receive(q, buf, (size_t)head.msgsize, NULL) >= 0)
        ;
    for (int64_t i = 0; ok && i < head.curmsgs; i++) {
        struct crac_mq_msg m;
        ok = read_exact(in, &m, sizeof(m)) == 0 && m.len <= head.msgsize &&
             read_exact(in, buf, m.len) == 0 && lseek(in, (8 - m.len % 8) % 8, SEEK_CUR) >= 0 &&
             mq_send(q, buf, m.len, m.prio) == 0;
    }
    int saved_errno = errno;
    free(buf);
    close(in);
    if (q != (mqd_t)-1)
        mq_close(q);
    int fd = ok ? mq_open(name, (int)(rec->open_flags & (O_ACCMODE | O_NONBLOCK))) : -1;
    if (!ok)
        errno = saved_errno;
    if (rec->unlinked)
        mq_unlink(name);
    if (fd < 0) {
        snprintf(err, errlen, "fd %d: cannot recreate the message queue %s: %s", rec->fd, v->path,
                 strerror(errno));
        return -1;
    }
    return install(fd, rec);
}

int restart_fds(const struct restart_image *img, const char *gen_dir, int no_truncate, char *err,
                size_t errlen)
{
    struct fd_view v;
    size_t off = 0;
    err[0] = '\0';
    while (next_fd(img, &off, &v) > 0) {
        const struct crac_fd_rec *rec = &v.rec;
        int fd = -1, rc = 0;
        char live[PATH_MAX];
        v.path = live_path(img, v.path, live, sizeof(live));
        switch (rec->kind) {
        case CRAC_FD_STDIO: continue; /* the restart's own stdin/stdout/stderr */
        case CRAC_FD_FILE: rc = reopen_file(&v, gen_dir, no_truncate, err, errlen); break;
        case CRAC_FD_DIR:
        case CRAC_FD_CHAR:
            fd = open(v.path, (int)(rec->open_flags & ~(unsigned)(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC);
            if (fd < 0 && rec->kind == CRAC_FD_DIR && rec->unlinked)
                fd = removed_dir(v.path, gen_dir,
                                 (int)(rec->open_flags & ~(unsigned)(O_CREAT | O_EXCL | O_TRUNC)) |
                                     O_CLOEXEC);
            if (fd < 0)
                fd = proc_gone(&v);
            if (fd < 0) {
                snprintf(err, errlen, "fd %d: cannot reopen %s: %s", rec->fd, v.path, strerror(errno));
                return -1;
            }
            if (rec->kind == CRAC_FD_DIR)
                lseek(fd, (off_t)rec->pos, SEEK_SET);
            rc = install(fd, rec);
            break;
        case CRAC_FD_PIPE: rc = restore_pipe(img, &v, gen_dir); break;
        case CRAC_FD_MQUEUE: rc = restore_mqueue(&v, gen_dir, err, errlen); break;
        case CRAC_FD_PTY_MASTER:
        case CRAC_FD_PTY_SLAVE: rc = restore_pty(img, &v, err, errlen); break;
        case CRAC_FD_EVENTFD:
            fd = eventfd(0, EFD_CLOEXEC);
            rc = fd < 0 ? -1 : install(fd, rec);
            break;
        default:
            fprintf(stderr, "crac: warning: fd %d (%s) cannot be restored; it now reads as "
                            "/dev/null\n", rec->fd, v.path);
            fd = open("/dev/null", O_RDWR | O_CLOEXEC);
            rc = fd < 0 ? -1 : install(fd, rec);
        }
        if (rc != 0) {
            if (!err[0] || (rec->kind != CRAC_FD_FILE && rec->kind != CRAC_FD_MQUEUE &&
                            !is_pty(rec->kind)))
                snprintf(err, errlen, "fd %d (%s): cannot be restored: %s", rec->fd, v.path,
                         strerror(errno));
            return -1;
        }
    }
    return 0;
}
