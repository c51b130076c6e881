/* fd_regular.c — fds of regular files: reopened by path at their offset, truncated back to their
 * checkpoint size; unlinked files and small written ones are copied at checkpoint, recreated, and
 * put back as they were when changed since. */
#include "fds.h"

#include "ckpt.h"
#include "make_dirs.h"
#include "tree.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Written files with up to this many bytes of data are copied (a sparse file's holes are not
 * data: LMDB's writemap file is its whole map size, mostly holes). */
#define SAVE_WRITTEN_FILES_MAX (64UL << 20)
#define COPY_PIECE (1UL << 16)

/* ---- data extents (both ways) ---- */

/* The first offset at or after off, below end, where fd has data; end when none. A file system
 * without SEEK_DATA reports the whole file as data; an error other than "none" counts as data,
 * so nothing is skipped that might hold bytes. */
static off_t data_from(int fd, off_t off, off_t end)
{
    off_t at = lseek(fd, off, SEEK_DATA);
    if (at < 0)
        return errno == ENXIO ? end : off;
    return at < end ? at : end;
}

/* Where the data at off ends (the next hole), at most end. */
static off_t data_end(int fd, off_t off, off_t end)
{
    off_t hole = lseek(fd, off, SEEK_HOLE);
    return hole < 0 || hole > end ? end : hole;
}

/* Copies in's data to out at the same offsets, holes left holes, and gives out in's size: a
 * sparse file's copy is as small as its data. 1 (nothing more copied) once the data passes
 * limit, 0 when done, -1 on an error. Offsets by pread/pwrite: neither fd's position moves. */
static int copy_extents(int in, int out, uint64_t limit)
{
    struct stat st;
    if (fstat(in, &st) != 0)
        return -1;
    char buf[COPY_PIECE];
    uint64_t copied = 0;
    int in_kernel = 1;
    for (off_t at = data_from(in, 0, st.st_size); at < st.st_size;) {
        off_t end = data_end(in, at, st.st_size);
        if ((copied += (uint64_t)(end - at)) > limit)
            return 1;
        /* In the kernel, page cache to page cache (80 MiB: 27 ms in the pause against 34 ms
         * through a buffer, docs/PERFORMANCE.md); through the buffer where it cannot. */
        while (in_kernel && at < end) {
            loff_t from = at, to = at;
            ssize_t n = copy_file_range(in, &from, out, &to, (size_t)(end - at), 0);
            if (n < 0 && errno != EINTR)
                in_kernel = 0;
            else if (n == 0) /* cut short since the fstat: the copy ends there */
                return ftruncate(out, at);
            at += n > 0 ? n : 0;
        }
        for (; at < end; at += COPY_PIECE) {
            size_t want = (size_t)(end - at) < COPY_PIECE ? (size_t)(end - at) : COPY_PIECE;
            ssize_t n = pread(in, buf, want, at);
            if (n < 0 || pwrite(out, buf, (size_t)n, at) != n)
                return -1;
            if ((size_t)n < want) /* cut short since the fstat: the copy ends there */
                return ftruncate(out, at + n);
        }
        at = data_from(in, end, st.st_size);
    }
    return ftruncate(out, st.st_size);
}

/* The saved copy (files/fd-N) into a new file, holes kept. */
static int copy_saved(const char *saved, int dst_fd)
{
    int in = open(saved, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int rc = copy_extents(in, dst_fd, UINT64_MAX);
    close(in);
    return rc;
}

/* ---- checkpoint ---- */

static int regular_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)e;
    return S_ISREG(st->st_mode);
}

/* "MTIME_NS SIZE SHA256" of in's last TAIL_HASHED bytes, as files/tail-N. */
static int write_tail(int in, const char *tail)
{
    struct stat st;
    char hex[65];
    if (fstat(in, &st) != 0)
        return -1;
    uint64_t n = (uint64_t)st.st_size < TAIL_HASHED ? (uint64_t)st.st_size : TAIL_HASHED;
    if (hash_fd(in, (uint64_t)st.st_size - n, n, hex) != 0)
        return -1;
    int out = open(tail, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
        return -1;
    int rc = dprintf(out, "%" PRId64 " %" PRIu64 " %s\n",
                     (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                     (uint64_t)st.st_size, hex) > 0
                 ? 0
                 : -1;
    close(out);
    return rc;
}

/* What the checkpoint keeps of a file (through /proc/self/fd, so unlinked files work too): a
 * copy of its contents at dst with at most limit bytes of data (copy set), else its tail record:
 * 0 copied, 1 tail recorded, -1 on an error. */
static int copy_contents(int fd, const char *dst, const char *tail, uint64_t limit, int copy)
{
    char src[64];
    snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) /* a tail record helps, a copy is needed (a file the user cannot read) */
        return copy ? -1 : 1;
    int rc = 1;
    if (copy) {
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        /* synced at commit (image_commit.c), after the pause */
        rc = out < 0 ? -1 : copy_extents(in, out, limit);
        if (out >= 0)
            close(out);
        if (rc == 1)
            unlink(dst);
    }
    if (rc == 1 && write_tail(in, tail) != 0)
        rc = -1;
    close(in);
    return rc;
}

/* Why a child: closing any descriptor of a file drops every POSIX (fcntl, lockf) lock the process
 * holds on it, and the copy opens the file again (the program's descriptor may be write-only).
 * The copy runs in a child that shares memory but has its own descriptor table (CLONE_VM |
 * CLONE_VFORK, no CLONE_FILES), so its close drops nothing of the program's; exit signal 0, so no
 * SIGCHLD reaches the program and its wait() never sees the child. */
#define COPY_STACK (256UL << 10)

struct copy_job {
    int fd;
    const char *dst, *tail;
    uint64_t limit;
    int copy;
    int rc, err;
};

static int copy_child(void *arg)
{
    struct copy_job *j = arg;
    j->rc = copy_contents(j->fd, j->dst, j->tail, j->limit, j->copy);
    j->err = errno;
    return 0;
}

static int copy_apart(int fd, const char *dst, const char *tail, uint64_t limit, int copy)
{
    /* Mapped once and kept: a checkpoint copies its files one after the other in the pause. */
    static char *stack;
    if (!stack) {
        void *m = mmap(NULL, COPY_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (m == MAP_FAILED)
            return -1;
        stack = m;
    }
    struct copy_job j = {fd, dst, tail, limit, copy, -1, EIO};
    pid_t pid = clone(copy_child, stack + COPY_STACK, CLONE_VM | CLONE_VFORK, &j);
    int err = errno;
    if (pid > 0)
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    errno = pid > 0 ? j.err : err;
    return pid > 0 ? j.rc : -1;
}

/* An unlinked file has no other copy; a written one with up to SAVE_WRITTEN_FILES_MAX bytes of
 * data (any, with --ckpt-open-files) is kept so the restart can recreate it if it is gone by
 * then, and put it back as it was if it was changed in place; of a larger one its tail record. */
static int regular_save(struct fd_entry *e, const struct fd_entry *all, int n,
                        const char *files_dir)
{
    (void)all, (void)n;
    /* The same open file as a lower fd here (dup'd) or as the parent's (inherited): the
     * restart opens it once for all of them (docs/IMAGE.md `files/openfile-N`). */
    if (e->dup_of >= 0 || e->parent_fd >= 0) {
        char text[96] = "";
        int at = 0;
        if (e->dup_of >= 0)
            at = snprintf(text, sizeof(text), "dup %d\n", e->dup_of);
        if (e->parent_fd >= 0)
            snprintf(text + at, sizeof(text) - (size_t)at, "parent %d %d\n",
                     (int)tree_program_ppid(), e->parent_fd);
        if (fd_write_text(e, files_dir, "openfile", text) != 0)
            return -1;
    }
    int acc = e->rec.open_flags & O_ACCMODE;
    if (!e->rec.unlinked && acc == O_RDONLY)
        return 0;
    uint64_t limit =
        e->rec.unlinked || ckpt_cfg.ckpt_open_files ? UINT64_MAX : SAVE_WRITTEN_FILES_MAX;
    struct stat st;
    /* A larger file's blocks tell, without reading it, that its data is over the limit too (a
     * compressing file system's fewer blocks: the copy stops at the limit). */
    int copy = e->rec.size_at_ckpt <= limit || fstat(e->rec.fd, &st) != 0 ||
               (uint64_t)st.st_blocks * 512 <= limit;
    char dst[PATH_MAX], tail[PATH_MAX], name[32];
    snprintf(name, sizeof(name), "fd-%d", e->rec.fd);
    fd_files_path(dst, sizeof(dst), files_dir, name);
    snprintf(name, sizeof(name), "tail-%d", e->rec.fd);
    fd_files_path(tail, sizeof(tail), files_dir, name);
    int copied = copy_apart(e->rec.fd, dst, tail, limit, copy);
    if (copied < 0) {
        fprintf(stderr, "crac: error: cannot save a copy of fd %d (%s): %s\n", e->rec.fd, e->path,
                strerror(errno));
        return -1;
    }
    e->rec.saved = copied == 0;
    return 0;
}

/* ---- restart ---- */

/* A new, already removed file holding the saved copy: the program's fd pointed at a file with no
 * name left (unlinked, or its directory `rm -rf`'d), so no name is given back. Returns a
 * read-write fd, or -1. */
static int removed_copy(const char *path, const char *gen_dir, const char *saved, uint32_t mode)
{
    struct fd_dir_name dirs[3];
    int n = fd_scratch_dirs(path, gen_dir, dirs);
    for (int i = 0; i < n; i++) {
        int w = open(dirs[i].p, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (w < 0) { /* a filesystem without O_TMPFILE: a named temporary, removed at once */
            char tmpl[PATH_MAX + 32];
            w = fd_temp_name(tmpl, sizeof(tmpl), dirs[i].p) == 0 ? mkostemp(tmpl, O_CLOEXEC) : -1;
            if (w >= 0)
                unlink(tmpl);
        }
        if (w < 0)
            continue;
        if (copy_saved(saved, w) != 0) {
            close(w);
            return -1;
        }
        fchmod(w, mode & 01777); /* never setuid/setgid (docs/TRUST.md) */
        return w;
    }
    return -1;
}

/* Removed files the program had open (fds_hold notes each fd's record): made again once per file,
 * at its first use, so the fds on one (dup'd, or opened again) and the program's shared mappings
 * of it (restart_memory.c) are one file again, not a copy each, which neither shared offsets nor
 * saw each other's writes. Closed once the fds are back. */
#define MAX_UNLINKED 64
static struct unlinked_file {
    uint64_t ino;
    uint32_t mode;
    int fd_num;       /* the program's fd whose saved copy (files/fd-N) makes it */
    const char *path; /* in the image's FDS note */
    int made;         /* its new file, or -1 */
} unlinked[MAX_UNLINKED];
static int n_unlinked;
static const char *unlinked_gen_dir;

void fd_unlinked_note(const char *gen_dir, const struct fd_view *v)
{
    if (v->rec.kind != CRAC_FD_FILE || !v->rec.unlinked || !v->rec.saved)
        return;
    for (int i = 0; i < n_unlinked; i++)
        if (unlinked[i].ino == v->rec.ino && strcmp(unlinked[i].path, v->path) == 0)
            return;
    if (n_unlinked == MAX_UNLINKED)
        return; /* beyond: a copy each, as before */
    unlinked_gen_dir = gen_dir;
    unlinked[n_unlinked++] =
        (struct unlinked_file){v->rec.ino, v->rec.mode, v->rec.fd, v->path, -1};
}

int fd_unlinked_file(uint64_t ino, const char *path)
{
    for (int i = 0; i < n_unlinked; i++) {
        struct unlinked_file *u = &unlinked[i];
        size_t n = strlen(u->path);
        /* A mapping's path is the fd's with " (deleted)" after it. */
        if (u->ino != ino || strncmp(path, u->path, n) != 0 ||
            (path[n] && strcmp(path + n, " (deleted)") != 0))
            continue;
        if (u->made < 0) {
            char saved[PATH_MAX + 64];
            snprintf(saved, sizeof(saved), "%s/files/fd-%d", unlinked_gen_dir, u->fd_num);
            u->made = removed_copy(u->path, unlinked_gen_dir, saved, u->mode);
        }
        return u->made;
    }
    return -1;
}

void fd_unlinked_release(void)
{
    for (int i = 0; i < n_unlinked; i++)
        if (unlinked[i].made >= 0)
            close(unlinked[i].made);
    n_unlinked = 0;
}

/* The program's file again, and nothing else (docs/TRUST.md): the recorded path is the kernel's
 * resolved name, never a link, so a link there now was put there since (O_NOFOLLOW); a FIFO or a
 * device node in its place is refused before it is opened (opening either can block or act). -1
 * with errno: cannot be opened (the caller says so); -2: refused, with err. /proc paths are the
 * kernel's own links, opened as they are. */
static int open_regular(const struct fd_view *v, int flags, char *err, size_t errlen)
{
    if (strncmp(v->path, "/proc/", 6) == 0)
        return open(v->path, flags);
    struct stat before, after;
    if (lstat(v->path, &before) != 0)
        return -1;
    if (!S_ISREG(before.st_mode)) {
        snprintf(err, errlen, "fd %d: %s is no longer a regular file (%s); not reopened", v->rec.fd,
                 v->path, S_ISLNK(before.st_mode) ? "a symbolic link" : "a special file");
        return -2;
    }
    int fd = open(v->path, flags | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (fstat(fd, &after) != 0 || !S_ISREG(after.st_mode) || after.st_ino != before.st_ino ||
        after.st_dev != before.st_dev) {
        close(fd);
        snprintf(err, errlen, "fd %d: %s was replaced while it was reopened; not reopened",
                 v->rec.fd, v->path);
        return -2;
    }
    return fd; /* O_NONBLOCK goes with the recorded flags (fd_install) */
}

/* A written file the checkpoint kept a copy of (saved), changed in place since (a database, its
 * write-ahead log and the index it maps shared, LMDB's file written through its map): its bytes
 * are put back as they were, so that they agree with the program's memory again. Piece by piece
 * over the data of either (a hole in both is zeros in both), writing only the pieces that differ:
 * an untouched file costs a read of its data. The file is reached through the program's own fd
 * (/proc/self/fd), never through its path again. Returns 1 when bytes before the checkpoint's
 * end had changed (more than an append), 0 when nothing had, -1 on an error (errno). */
static int put_back_contents(int fd, const char *saved)
{
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    int in = open(saved, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(self, O_RDWR | O_CLOEXEC);
    struct stat want_st, have_st;
    if (out < 0 || fstat(in, &want_st) != 0) {
        close(in);
        if (out >= 0)
            close(out);
        return -1;
    }
    static char want[COPY_PIECE], have[COPY_PIECE];
    const off_t size = want_st.st_size;
    int changed = 0, rc = 0;
    for (off_t off = 0; rc == 0 && off < size;) {
        off_t saved_at = data_from(in, off, size), live_at = data_from(out, off, size);
        off_t at = saved_at < live_at ? saved_at : live_at;
        if (at >= size)
            break;
        /* Saved data here, or a hole in the copy that the file has data in: zeros wanted. */
        off_t end = at == saved_at ? data_end(in, at, size) : saved_at;
        if (end - at > (off_t)COPY_PIECE || end <= at) /* end <= at: lseek errors, never a stall */
            end = at + (size - at < (off_t)COPY_PIECE ? size - at : (off_t)COPY_PIECE);
        size_t n = (size_t)(end - at);
        if (at == saved_at ? pread(in, want, n, at) != (ssize_t)n : (memset(want, 0, n), 0)) {
            rc = -1;
            break;
        }
        ssize_t h = pread(out, have, n, at);
        if (h < 0)
            rc = -1;
        else if ((size_t)h != n || memcmp(want, have, n) != 0) {
            changed = 1;
            if (pwrite(out, want, n, at) != (ssize_t)n)
                rc = -1;
        }
        off = end;
    }
    /* Longer: cut back (an append alone is no change); shorter: the copy's end was a hole. */
    if (rc == 0 && fstat(out, &have_st) == 0 && have_st.st_size != size) {
        changed |= have_st.st_size < size;
        if (ftruncate(out, size) != 0)
            rc = -1;
    }
    close(in);
    close(out);
    return rc < 0 ? -1 : changed;
}

/* A written file too large for a copy, changed since the checkpoint other than by appends (its
 * mtime moved, and it is not longer with the same last bytes before the checkpoint's end, which
 * its tail record files/tail-N holds): its bytes are the killed run's and cannot be put back, and
 * the program does not know what was written after its checkpoint (a database it goes on with is
 * found malformed). Refused, as a changed file the program reads is (file_ids.c), unless
 * --allow-changed-files: then said once per file. Returns the checkpoint's mtime of a file only
 * appended to since, which the cut-back makes the checkpoint's file again (so given its mtime
 * back: another fd or process on it must not take the cut for a change); -1 otherwise; -2
 * refused, with ERR. */
static int64_t say_changed_in_place(int fd, const struct crac_fd_rec *rec, const char *path,
                                    const struct fd_restore *r)
{
    const char *gen_dir = r->gen_dir;
    static struct {
        dev_t dev;
        ino_t ino;
    } said[64];
    static int n_said;
    char tail[PATH_MAX + 64], text[160], want[65], have[65];
    snprintf(tail, sizeof(tail), "%s/files/tail-%d", gen_dir, rec->fd);
    int in = open(tail, O_RDONLY | O_CLOEXEC);
    ssize_t n = in >= 0 ? read(in, text, sizeof(text) - 1) : -1;
    if (in >= 0)
        close(in);
    int64_t mtime;
    uint64_t size;
    struct stat st;
    if (n <= 0)
        return -1; /* an image from before tail records */
    text[n] = '\0';
    if (sscanf(text, "%" SCNd64 " %" SCNu64 " %64s", &mtime, &size, want) != 3 ||
        fstat(fd, &st) != 0 ||
        (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == mtime)
        return -1;
    for (int i = 0; i < n_said; i++)
        if (said[i].dev == st.st_dev && said[i].ino == st.st_ino)
            return -1;
    if ((uint64_t)st.st_size > size) { /* longer: only appended to, if its old end is the same */
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
        int r = open(self, O_RDONLY | O_CLOEXEC); /* the program's fd may be write-only */
        uint64_t k = size < TAIL_HASHED ? size : TAIL_HASHED;
        int same = r >= 0 && hash_fd(r, size - k, k, have) == 0 && strcmp(have, want) == 0;
        if (r >= 0)
            close(r);
        if (same)
            return mtime;
    }
    if (!r->allow_changed) {
        snprintf(r->err, r->errlen,
                 "fd %d: %s was changed in place since the checkpoint (its modification time "
                 "moved, and not by appends alone) and has more data than the %lu MiB of a "
                 "written file a checkpoint keeps a copy of: the restarted program would go on "
                 "with what the killed run wrote after the checkpoint (crac launch "
                 "--ckpt-open-files keeps a copy whatever its size; crac restart "
                 "--allow-changed-files goes on anyway)",
                 rec->fd, path, SAVE_WRITTEN_FILES_MAX >> 20);
        return -2;
    }
    if (n_said < (int)(sizeof(said) / sizeof(said[0])))
        said[n_said].dev = st.st_dev, said[n_said++].ino = st.st_ino;
    fprintf(stderr,
            "crac: warning: fd %d: %s was changed in place since the checkpoint (its modification "
            "time moved, and not by appends alone), and has more data than the %lu MiB of a "
            "written file a checkpoint keeps a copy of (crac launch --ckpt-open-files keeps one "
            "whatever its size): it holds what the killed run wrote after the checkpoint, which "
            "the restarted program does not know of\n",
            rec->fd, path, SAVE_WRITTEN_FILES_MAX >> 20);
    return -1;
}

/* The lower fd of this process that FD was a dup of (files/openfile-FD's `dup M`), or -1. */
static int dup_source(const char *gen_dir, int fd)
{
    char path[PATH_MAX + 64], text[128];
    snprintf(path, sizeof(path), "%s/files/openfile-%d", gen_dir, fd);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    ssize_t n = read(in, text, sizeof(text) - 1);
    close(in);
    int lower = -1;
    if (n > 0) {
        text[n] = '\0';
        if (sscanf(text, "dup %d", &lower) != 1 || lower < 0 || lower >= fd)
            lower = -1;
    }
    return lower;
}

static int regular_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    const char *gen_dir = r->gen_dir;
    char *err = r->err;
    size_t errlen = r->errlen;
    const struct crac_fd_rec *rec = &v->rec;
    /* O_TMPFILE (with its O_DIRECTORY bit) made the file; the file is reopened, not made. */
    int flags =
        (int)(rec->open_flags & ~(unsigned)(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC | O_TMPFILE)) |
        O_CLOEXEC;
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
            /* Recreated removed (once for all its fds and mappings, else a copy of its own);
             * reopened through /proc with the program's own flags. */
            int once = fd_unlinked_file(rec->ino, v->path);
            w = once >= 0 ? once : removed_copy(v->path, gen_dir, saved, rec->mode);
            if (w >= 0) {
                char self[64];
                snprintf(self, sizeof(self), "/proc/self/fd/%d", w);
                fd = open(self, flags & ~O_NOFOLLOW); /* the link is /proc's, not a path's */
                if (w != once)
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
            /* A file moved away (or its directory removed) since the checkpoint: at its path,
             * its directories made again (the program still names it). */
            make_dirs(v->path, 0);
            /* O_EXCL: never through a link put there since; never setuid/setgid. */
            w = open(v->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, rec->mode & 01777);
            if (w < 0 || copy_saved(saved, w) != 0) {
                snprintf(err, errlen, "fd %d: cannot recreate %s: %s", rec->fd, v->path,
                         strerror(errno));
                return -1;
            }
            fchmod(w, rec->mode & 01777);
            close(w);
            fd = open_regular(v, flags, err, errlen);
        }
    } else {
        fd = open_regular(v, flags, err, errlen);
    }
    if (fd == -2)
        return -1;
    if (fd < 0)
        fd = fd_proc_gone(v);
    if (fd < 0) {
        snprintf(err, errlen, "fd %d: cannot reopen %s: %s", rec->fd, v->path, strerror(errno));
        return -1;
    }
    int acc = (int)(rec->open_flags & O_ACCMODE);
    int64_t appended_since = -1;
    if (acc != O_RDONLY && !r->no_truncate && !rec->saved && !rec->unlinked &&
        (appended_since = say_changed_in_place(fd, rec, v->path, r)) == -2) {
        close(fd);
        return -1;
    }
    /* Put back in jobs and trees too: no process of one runs before every one is restored (the
     * restore barrier, docs/PROTOCOL.md "restored"), so none can have written in place what
     * another's restart puts back. */
    if (acc != O_RDONLY && !r->no_truncate && rec->saved && !rec->unlinked) {
        int put = put_back_contents(fd, saved);
        if (put < 0) {
            snprintf(err, errlen, "fd %d: cannot put %s back as it was at the checkpoint: %s",
                     rec->fd, v->path, strerror(errno));
            close(fd);
            return -1;
        }
        if (put > 0)
            fprintf(stderr,
                    "crac: note: fd %d: %s was changed since the checkpoint; put back as it was "
                    "(--no-truncate keeps it)\n",
                    rec->fd, v->path);
    }
    if (acc != O_RDONLY && !r->no_truncate && fstat(fd, &st) == 0 &&
        (uint64_t)st.st_size > rec->size_at_ckpt && ftruncate(fd, (off_t)rec->size_at_ckpt) != 0) {
        snprintf(err, errlen, "fd %d: cannot truncate %s back to its checkpoint size: %s", rec->fd,
                 v->path, strerror(errno));
        close(fd);
        return -1;
    }
    if (appended_since >= 0) {
        struct timespec times[2] = {{.tv_nsec = UTIME_OMIT},
                                    {appended_since / 1000000000, appended_since % 1000000000}};
        futimens(fd, times); /* best effort: another owner's file keeps its new mtime */
    }
    /* Other processes of the tree held this very open file (its offset moved by each): the
     * restart opened it once for all of them; or a lower fd here is it (dup'd), already back.
     * This process's own opening did the checks and the putting back above. */
    int held = fd_shared_held(rec->fd);
    if (held < 0)
        held = dup_source(gen_dir, rec->fd);
    struct stat mine, theirs;
    if (held >= 0 && fstat(fd, &mine) == 0 && fstat(held, &theirs) == 0 &&
        mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino) {
        int shared = fcntl(held, F_DUPFD_CLOEXEC, 0);
        if (shared >= 0) {
            close(fd);
            fd = shared;
        }
    } else if (held >= 0) {
        fprintf(stderr,
                "crac: warning: fd %d: %s is not the file opened for it again; its offset is no "
                "longer shared with the other fds that shared it\n",
                rec->fd, v->path);
    }
    if (lseek(fd, (off_t)rec->pos, SEEK_SET) < 0 && rec->pos)
        return close(fd), snprintf(err, errlen, "fd %d: cannot seek %s", rec->fd, v->path), -1;
    return fd_install(fd, rec);
}

const struct fd_ops fd_regular_ops = {.kind = CRAC_FD_FILE,
                                      .name = "regular",
                                      .recognise = regular_recognise,
                                      .regroup = fd_parent_files,
                                      .save = regular_save,
                                      .reopen = regular_reopen};
