/* fd_pipe.c — pipes: a new pipe at restart for each old one, made once for all its ends; its bytes
 * are kept (drained and put straight back at checkpoint) when both ends were the program's. */
#include "fds.h"

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

/* Drain a pipe we hold both ends of and put the bytes straight back; keep a copy. */
static int save_pipe_contents(int rfd, int wfd, const char *dst)
{
    int avail = 0;
    if (ioctl(rfd, FIONREAD, &avail) != 0 || avail <= 0)
        return 0;
    char *buf = malloc((size_t)avail);
    if (!buf)
        return -1;
    ssize_t n = read(rfd, buf, (size_t)avail);
    int rc = -1;
    if (n == avail && write(wfd, buf, (size_t)n) == n) {
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out >= 0) {
            rc = write(out, buf, (size_t)n) == n && fsync(out) == 0 ? 1 : -1;
            close(out);
        }
    }
    free(buf);
    return rc;
}

/* At the read end: the write end must be ours too, else the data belongs to someone else. Not
 * being able to keep the bytes does not fail the checkpoint (the pipe comes back empty). */
static int pipe_save(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir)
{
    if ((e->rec.open_flags & O_ACCMODE) != O_RDONLY)
        return 0;
    for (int k = 0; k < n; k++) {
        if (&all[k] == e || all[k].rec.kind != CRAC_FD_PIPE || all[k].rec.ino != e->rec.ino ||
            (all[k].rec.open_flags & O_ACCMODE) == O_RDONLY)
            continue;
        char dst[PATH_MAX], name[48];
        snprintf(name, sizeof(name), "pipe-%lu", (unsigned long)e->rec.ino);
        fd_files_path(dst, sizeof(dst), files_dir, name);
        if (save_pipe_contents(e->rec.fd, all[k].rec.fd, dst) > 0)
            e->rec.saved = 1;
        break;
    }
    return 0;
}

/* ---- restart ---- */

/* Both ends of a pipe were the program's: make a new pipe once, give each number its end. */
static int pipe_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    const char *gen_dir = r->gen_dir;
    struct fd_view o;
    size_t off = 0;
    while (fd_next(r->note, r->len, &off, &o) > 0) {
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
        fd_copy_file(saved, p[1]);
    off = 0;
    while (fd_next(r->note, r->len, &off, &o) > 0) {
        if (o.rec.kind != CRAC_FD_PIPE || o.rec.ino != v->rec.ino)
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

const struct fd_ops fd_pipe_ops = {.kind = CRAC_FD_PIPE,
                                   .name = "pipe",
                                   .recognise = pipe_recognise,
                                   .save = pipe_save,
                                   .reopen = pipe_reopen};
