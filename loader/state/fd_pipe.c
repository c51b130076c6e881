/* fd_pipe.c — pipes and FIFOs: a new pipe at restart for each old one, made once for all its ends
 * (a FIFO opened again by its path); the bytes in it are kept (copied with tee(2), not taken). */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- checkpoint ---- */

static int pipe_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd;
    return S_ISFIFO(st->st_mode) && strncmp(e->path, "pipe:", 5) == 0;
}

/* A named pipe: opened by a path (anything S_ISFIFO that is not an anonymous pipe). */
static int fifo_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd;
    return S_ISFIFO(st->st_mode) && e->path[0] == '/';
}

/* The bytes in the pipe RFD reads from, into DST, left where they are: tee(2) duplicates them into
 * a scratch pipe (made as large as needed), which is read instead. 1 if bytes were saved. */
static int save_pipe_contents(int rfd, const char *dst)
{
    int avail = 0;
    if (ioctl(rfd, FIONREAD, &avail) != 0 || avail <= 0)
        return 0;
    int scratch[2];
    if (pipe2(scratch, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    if (avail > 65536)
        fcntl(scratch[1], F_SETPIPE_SZ, avail);
    char *buf = malloc((size_t)avail);
    ssize_t got = buf ? tee(rfd, scratch[1], (size_t)avail, SPLICE_F_NONBLOCK) : -1;
    int rc = -1;
    if (got == avail && read(scratch[0], buf, (size_t)avail) == avail) {
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out >= 0) {
            rc = write(out, buf, (size_t)avail) == avail ? 1 : -1; /* synced at commit */
            close(out);
        }
    }
    free(buf);
    close(scratch[0]);
    close(scratch[1]);
    return rc;
}

/* At the lowest-numbered read end: its bytes are saved once for the pipe, whether or not a
 * write end is still open (a pipe whose writer closed still holds what was written). Not being
 * able to keep the bytes does not fail the checkpoint (the pipe comes back empty, said so). */
static int pipe_save(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir)
{
    /* At 0-2, whether it is the invocation's stdin, stdout or stderr (a shell's pipe into or
     * out of the job: `cat f | crac launch prog`): the restart's own then. Not one of the
     * tree's whose other end is closed (a pipeline's writer that ended, its bytes still in it). */
    struct stat st;
    e->rec.size_at_ckpt =
        e->rec.fd <= 2 && fstat(e->rec.fd, &st) == 0 && stdio_given_is(e->rec.fd, &st);
    if ((e->rec.open_flags & O_ACCMODE) == O_WRONLY)
        return 0;
    for (int k = 0; k < n; k++)
        if (all[k].rec.kind == e->rec.kind && all[k].rec.ino == e->rec.ino &&
            (all[k].rec.open_flags & O_ACCMODE) != O_WRONLY && all[k].rec.fd < e->rec.fd)
            return 0;
    char dst[PATH_MAX], name[48];
    snprintf(name, sizeof(name), "pipe-%lu", (unsigned long)e->rec.ino);
    fd_files_path(dst, sizeof(dst), files_dir, name);
    int rc = save_pipe_contents(e->rec.fd, dst);
    if (rc > 0)
        e->rec.saved = 1;
    else if (rc < 0)
        state_loss("fd %d (%s): the bytes in it cannot be saved", e->rec.fd, e->path);
    return 0;
}

/* ---- restart ---- */

/* The saved bytes of pipe INO written into WFD (made large enough first, so this never
 * blocks: nothing reads yet). */
static void refill(const struct fd_restore *r, uint64_t ino, int wfd)
{
    char saved[PATH_MAX + 64];
    snprintf(saved, sizeof(saved), "%s/files/pipe-%lu", r->gen_dir, (unsigned long)ino);
    struct stat st;
    if (stat(saved, &st) != 0)
        return;
    if (st.st_size > 65536)
        fcntl(wfd, F_SETPIPE_SZ, (int)st.st_size);
    int fl = fcntl(wfd, F_GETFL);
    fcntl(wfd, F_SETFL, fl | O_NONBLOCK);
    if (fd_copy_file(saved, wfd) != 0)
        fprintf(stderr, "crac: warning: the bytes saved from pipe %lu cannot all be put back\n",
                (unsigned long)ino);
    fcntl(wfd, F_SETFL, fl);
}

/* fd 0-2 as the invocation's pipe (pipe_save) not shared with another process of the tree: the
 * restart's own. */
static int kept_stdio(const struct fd_view *v)
{
    return v->rec.fd <= 2 && v->rec.size_at_ckpt == 1 && fd_shared_held(v->rec.fd) < 0;
}

/* Whether v is the lowest-numbered fd of its pipe (the pipe is made there, once). */
static int first_end(const struct fd_restore *r, const struct fd_view *v)
{
    struct fd_view o;
    size_t off = 0;
    while (fd_next(r->note, r->len, &off, &o) > 0)
        if (o.rec.kind == v->rec.kind && o.rec.ino == v->rec.ino && o.rec.fd < v->rec.fd &&
            !kept_stdio(&o))
            return 0;
    return 1;
}

/* Every end of an anonymous pipe: a new pipe, each number given its end, the bytes put back.
 * Ends at 0-2 on the invocation's pipe that no process of the tree shares (fds.c gave it the
 * inherited ones first) stay the restart's own stdin/stdout/stderr, as other stdio does: the
 * other end was outside. A pipe of the tree's own whose other end no process holds any more
 * comes back so: `echo N | sha256sum` with echo done reads N, then the end of the file. */
static int pipe_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    if (kept_stdio(v) || !first_end(r, v))
        return 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    refill(r, v->rec.ino, p[1]);
    struct fd_view o;
    size_t off = 0;
    while (fd_next(r->note, r->len, &off, &o) > 0) {
        if (o.rec.kind != CRAC_FD_PIPE || o.rec.ino != v->rec.ino || kept_stdio(&o))
            continue;
        int end = (o.rec.open_flags & O_ACCMODE) == O_RDONLY ? p[0] : p[1];
        int dup = fcntl(end, F_DUPFD_CLOEXEC, 0);
        if (dup < 0 || fd_install(dup, &o.rec) != 0)
            return -1;
    }
    close(p[0]);
    close(p[1]);
    return 0;
}

/* A FIFO: opened again by its path (made again if it is gone). A read-write opening of it is
 * held while the program's ends are opened, so neither blocks (non-blocking opens, the
 * program's flags set after), and the saved bytes are written through it first. */
static int fifo_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    if (mkfifo(v->path, v->rec.mode & 07777) != 0 && errno != EEXIST)
        return -1;
    int hold = open(v->path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (hold < 0)
        return -1;
    if (first_end(r, v))
        refill(r, v->rec.ino, hold);
    int fd = open(v->path, (int)(v->rec.open_flags & O_ACCMODE) | O_NONBLOCK | O_CLOEXEC);
    close(hold);
    return fd < 0 ? -1 : fd_install(fd, &v->rec);
}

const struct fd_ops fd_pipe_ops = {.kind = CRAC_FD_PIPE,
                                   .name = "pipe",
                                   .recognise = pipe_recognise,
                                   .save = pipe_save,
                                   .reopen = pipe_reopen};

const struct fd_ops fd_fifo_ops = {.kind = CRAC_FD_FIFO,
                                   .name = "fifo",
                                   .recognise = fifo_recognise,
                                   .save = pipe_save,
                                   .reopen = fifo_reopen};
