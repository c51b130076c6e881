/* fds.c — the program's file descriptors (CRAC_NT_FDS): the table of sub-kinds (struct fd_ops, one
 * file each: fd_*.c) and the walk over /proc/self/fd at checkpoint and over the note at restart. */
#include "fds.h"

#include "restart.h"

#include "lower_fds.h"
#include "upper_alloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Checkpoint: recognised in this order (the first that says yes); a pty pair is regrouped from
 * character devices afterwards. Restart: looked up by the record's kind. */
static const struct fd_ops *const fd_kinds[] = {
    &fd_stdio_ops,   &fd_stdio_copy_ops, &fd_mqueue_ops,   &fd_regular_ops,    &fd_dir_ops,
    &fd_chardev_ops, &fd_pipe_ops,       &fd_eventfd_ops,  &fd_pty_master_ops, &fd_pty_slave_ops,
    &fd_socket_ops,  &fd_timerfd_ops,    &fd_signalfd_ops, &fd_epoll_ops,      &fd_inotify_ops,
    &fd_fifo_ops,    &fd_pidfd_ops,      &fd_netlink_ops,
};
#define N_FD_KINDS (sizeof(fd_kinds) / sizeof(fd_kinds[0]))

static const struct fd_ops *ops_of(uint32_t kind)
{
    for (size_t i = 0; i < N_FD_KINDS; i++)
        if (fd_kinds[i]->kind == kind)
            return fd_kinds[i];
    return &fd_unsupported_ops;
}

/* ---- checkpoint ---- */

struct blob {
    unsigned char *data;
    size_t len, cap;
};

static int blob_put(struct blob *b, const void *p, size_t n)
{
    size_t padded = (n + 7) & ~7UL;
    if (b->len + padded > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + padded)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    memset(b->data + b->len + n, 0, padded - n);
    b->len += padded;
    return 0;
}

static int read_fdinfo(int fd, uint64_t *pos, uint32_t *flags)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long v;
        unsigned int o;
        if (sscanf(line, "pos: %llu", &v) == 1)
            *pos = v;
        else if (sscanf(line, "flags: %o", &o) == 1)
            *flags = o;
    }
    fclose(f);
    return 0;
}

char *fd_fdinfo(int fd)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return NULL;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(in, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len - 1 == 0) {
            char *more = realloc(buf, cap * 2);
            if (!more)
                free(buf);
            buf = more;
            cap *= 2;
        }
    }
    close(in);
    if (buf)
        buf[len] = '\0';
    return buf;
}

const char *fd_info_field(const char *info, const char *key)
{
    size_t n = strlen(key);
    for (const char *line = info; line && *line;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL)
        if (strncmp(line, key, n) == 0)
            return line + n;
    return NULL;
}

int fd_save_text(struct fd_entry *e, const char *files_dir, const char *prefix, const char *text)
{
    if (fd_write_text(e, files_dir, prefix, text) != 0)
        return -1;
    e->rec.saved = 1;
    return 0;
}

int fd_write_text(const struct fd_entry *e, const char *files_dir, const char *prefix,
                  const char *text)
{
    char dst[PATH_MAX], name[64];
    snprintf(name, sizeof(name), "%s-%d", prefix, e->rec.fd);
    fd_files_path(dst, sizeof(dst), files_dir, name);
    size_t len = strlen(text);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = out >= 0 && write(out, text, len) == (ssize_t)len; /* synced at commit */
    if (out >= 0)
        close(out);
    if (!ok) {
        fprintf(stderr, "crac: error: cannot save the %s fd %d into %s: %s\n", prefix, e->rec.fd,
                dst, strerror(errno));
        return -1;
    }
    return 0;
}

char *fd_read_text(const struct fd_restore *r, const struct fd_view *v, const char *prefix)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/files/%s-%d", r->gen_dir, prefix, v->rec.fd);
    int in = v->rec.saved ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    char *buf = NULL;
    if (in >= 0 && fstat(in, &st) == 0 && st.st_size < (1 << 26) &&
        (buf = malloc((size_t)st.st_size + 1)) != NULL) {
        if (read(in, buf, (size_t)st.st_size) == st.st_size)
            buf[st.st_size] = '\0';
        else {
            free(buf);
            buf = NULL;
        }
    }
    if (in >= 0)
        close(in);
    if (!buf)
        snprintf(r->err, r->errlen, "fd %d (%s): its saved state %s cannot be read", v->rec.fd,
                 v->path, path);
    return buf;
}

void fd_files_path(char *dst, size_t size, const char *files_dir, const char *name)
{
    mkdir(files_dir, 0700); /* made on first use: an image without such files has no files/ */
    snprintf(dst, size, "%s/%s", files_dir, name);
}

/* PATH with its first OLD_LEN bytes replaced by HEAD, when that fits. */
static void replace_head(char *path, size_t size, size_t old_len, const char *head)
{
    size_t rest = strlen(path + old_len), n = strlen(head);
    if (n + rest + 1 > size)
        return;
    memmove(path + n, path + old_len, rest + 1);
    memcpy(path, head, n);
}

/* Whether PATH is PREFIX or PREFIX/...; then the prefix's length, else 0. */
static size_t under(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(path, prefix, n) == 0 && (path[n] == '/' || path[n] == '\0') ? n : 0;
}

/* Whether PATH is /proc/self/task/<tid> or below it; then *TID and the length of that head. */
static size_t task_path_tid(const char *path, int32_t *tid)
{
    static const char head[] = "/proc/self/task/";
    if (strncmp(path, head, sizeof(head) - 1) != 0)
        return 0;
    char *end;
    long id = strtol(path + sizeof(head) - 1, &end, 10);
    if (end == path + sizeof(head) - 1 || id <= 0 || id > INT32_MAX || (*end && *end != '/'))
        return 0;
    *tid = (int32_t)id;
    return (size_t)(end - path);
}

/* /proc/<our pid>/... names this process only until the restart gives it another pid: recorded as
 * /proc/self/..., which the restart reopens for the restarted process. A thread's
 * /proc/self/task/<tid> is recorded with the tid the program knows; the restart maps it to that
 * thread's new tid once the threads are back (fds_thread_phase_restore below). */
static void proc_self_path(char *path, size_t size)
{
    char own[48];
    snprintf(own, sizeof(own), "/proc/%d", (int)getpid());
    size_t n = under(path, own);
    if (n)
        replace_head(path, size, n, "/proc/self");
    int32_t tid;
    n = task_path_tid(path, &tid);
    if (n) {
        char virt[48];
        snprintf(virt, sizeof(virt), "/proc/self/task/%d", (int)vid_from_real(crac_ctrl(), tid));
        replace_head(path, size, n, virt);
    }
}

static void classify(int fd, struct fd_entry *e)
{
    struct stat st;
    memset(e, 0, sizeof(*e));
    e->rec.fd = fd;
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, e->path, sizeof(e->path) - 1);
    e->path[n > 0 ? n : 0] = '\0';
    read_fdinfo(fd, &e->rec.pos, &e->rec.open_flags);
    if (fstat(fd, &st) != 0) {
        e->rec.kind = CRAC_FD_UNSUPPORTED;
        return;
    }
    e->rec.mode = st.st_mode;
    e->rec.ino = st.st_ino;
    e->rec.size_at_ckpt = (uint64_t)st.st_size;
    size_t len = strlen(e->path);
    static const char deleted[] = " (deleted)";
    if (len > sizeof(deleted) - 1 && strcmp(e->path + len - (sizeof(deleted) - 1), deleted) == 0) {
        e->rec.unlinked = 1;
        e->path[len - (sizeof(deleted) - 1)] = '\0';
    }
    proc_self_path(e->path, sizeof(e->path));
    e->rec.kind = CRAC_FD_UNSUPPORTED;
    for (size_t i = 0; i < N_FD_KINDS; i++)
        if (fd_kinds[i]->recognise && fd_kinds[i]->recognise(fd, e, &st)) {
            e->rec.kind = fd_kinds[i]->kind;
            break;
        }
    if (e->rec.kind == CRAC_FD_UNSUPPORTED)
        state_loss("fd %d (%s) cannot be saved: after a restart it reads as /dev/null", fd,
                   e->path);
}

int state_next_program_fd(DIR *d, int min)
{
    struct dirent *de;
    while ((de = readdir(d))) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] != '.' && fd >= min && fd != dirfd(d) && !lower_fd_is_ours(fd))
            return fd;
    }
    return -1;
}

/* The last capture's entries: fds_copy_saved asks them. */
static struct fd_entry entries[FDS_MAX];
static int n_entries;

int fds_copy_saved(uint64_t ino, const char *path)
{
    for (int i = 0; i < n_entries; i++)
        if (entries[i].rec.kind == CRAC_FD_FILE && entries[i].rec.saved &&
            entries[i].rec.ino == ino && strcmp(entries[i].path, path) == 0)
            return 1;
    return 0;
}

int fds_capture(const struct state_capture *c, void **out, size_t *out_len)
{
    int n = 0;
    n_entries = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    for (int fd; n < FDS_MAX && (fd = state_next_program_fd(d, 0)) >= 0;)
        classify(fd, &entries[n++]);
    closedir(d);
    for (size_t i = 0; i < N_FD_KINDS; i++)
        if (fd_kinds[i]->regroup)
            fd_kinds[i]->regroup(entries, n);
    struct blob b = {0};
    for (int i = 0; i < n; i++) {
        struct fd_entry *e = &entries[i];
        const struct fd_ops *ops = ops_of(e->rec.kind);
        if (ops->save && ops->save(e, entries, n, c->files_dir) != 0) {
            free(b.data);
            return -1;
        }
        e->rec.path_len = (uint32_t)((strlen(e->path) + 1 + 7) & ~7UL);
        e->rec.size = (uint32_t)(sizeof(e->rec) + e->rec.path_len + ops->extra);
        if (blob_put(&b, &e->rec, sizeof(e->rec)) || blob_put(&b, e->path, strlen(e->path) + 1) ||
            (ops->extra && blob_put(&b, &e->pty, ops->extra))) {
            free(b.data);
            return -1;
        }
    }
    n_entries = n;
    *out = b.data;
    *out_len = b.len;
    return 0;
}

/* ---- restart ---- */

/* A thread's /proc/self/task/<tid> is reopened once the threads are back: it needs the thread's new
 * tid. Until then its number holds fds_hold's /dev/null. One another process of the tree shares
 * is put in with the others (fd_shared.c). The file is the kernel's again, read live, with the
 * kernel's ids: not the program's, which a copy made at the open would give (confine_procview.c)
 * but frozen, where a program reading the same descriptor again expects new figures. */
static int with_threads_fds[FDS_MAX], n_with_threads_fds;

static int reopened_with_threads(const struct fd_view *v)
{
    int32_t tid;
    return (v->rec.kind == CRAC_FD_FILE || v->rec.kind == CRAC_FD_DIR) &&
           task_path_tid(v->path, &tid) && fd_shared_held(v->rec.fd) < 0;
}

static int deferred_to_threads(int fd)
{
    for (int i = 0; i < n_with_threads_fds; i++)
        if (with_threads_fds[i] == fd)
            return 1;
    return 0;
}

/* A thread's /proc/self/task/<tid> is recorded with the tid the program knows (proc_self_path
 * above); here that thread's tid is the new one. A thread the image does not have (it had exited)
 * keeps the path, which cannot be opened (fd_proc_gone). Other paths are used as they are. */
static const char *live_path(const struct state_restore *r, const char *path, char *buf,
                             size_t size)
{
    int32_t old, now;
    size_t n = task_path_tid(path, &old);
    if (!n || !(now = r->map_tid(old)))
        return path;
    int w = snprintf(buf, size, "/proc/self/task/%d%s", (int)now, path + n);
    return w > 0 && (size_t)w < size ? buf : path;
}

int fd_next(const void *note, size_t len, size_t *off, struct fd_view *v)
{
    const unsigned char *fds = note;
    if (*off + sizeof(v->rec) > len)
        return 0;
    memcpy(&v->rec, fds + *off, sizeof(v->rec));
    if (v->rec.size < sizeof(v->rec) + v->rec.path_len || *off + v->rec.size > len ||
        v->rec.path_len == 0)
        return -1;
    v->path = (const char *)fds + *off + sizeof(v->rec);
    if (v->path[v->rec.path_len - 1] != '\0' || v->rec.fd < 0)
        return -1;
    size_t extra = ops_of(v->rec.kind)->extra;
    if (extra) {
        if (v->rec.size < sizeof(v->rec) + v->rec.path_len + extra || extra > sizeof(v->pty))
            return -1;
        memcpy(&v->pty, v->path + v->rec.path_len, extra);
    }
    *off += v->rec.size;
    return 1;
}

/* Before the lower half starts: every number the program used is held, so nothing of the
 * loader's takes it. */
int fds_hold(const struct state_restore *r, const void *note, size_t len)
{
    struct restart_image *img = r->img;
    struct fd_view v;
    size_t off = 0;
    int max_fd = 2, rc;
    while ((rc = fd_next(note, len, &off, &v)) > 0)
        if (v.rec.fd > max_fd)
            max_fd = v.rec.fd;
    if (rc < 0) {
        snprintf(r->err, r->errlen, "image corrupted: bad file descriptor record");
        return -1;
    }
    /* The program may have raised its soft RLIMIT_NOFILE above ours: room for its numbers (and
     * above them the core file's and the restart's own stdio kept for copies of it) until its
     * own limits come back (rlimits.c). */
    const rlim_t room = (rlim_t)max_fd + 1 + 4;
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < room &&
        nofile.rlim_max > (rlim_t)max_fd + 1) {
        nofile.rlim_cur = nofile.rlim_max < room ? nofile.rlim_max : room;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    /* Move the core file out of the way, then occupy every number the program used. */
    int moved = fcntl(img->core_fd, F_DUPFD_CLOEXEC, max_fd + 1), copies = 0;
    if (moved < 0) {
        snprintf(r->err, r->errlen, "cannot hold file descriptor numbers up to %d: %s", max_fd,
                 strerror(errno));
        return -1;
    }
    close(img->core_fd);
    img->core_fd = moved;
    off = 0;
    while (fd_next(note, len, &off, &v) > 0) {
        copies |= v.rec.kind == CRAC_FD_STDIO_COPY;
        fd_unlinked_note(r->gen_dir, &v);
    }
    if (copies && stdio_given_keep(max_fd + 1) != 0)
        fprintf(stderr,
                "crac: warning: cannot keep the restart's stdio for the program's copies of it "
                "(%s): they read as /dev/null\n",
                strerror(errno));
    off = 0;
    while (fd_next(note, len, &off, &v) > 0) {
        if (v.rec.fd <= 2)
            continue;
        int ph = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (ph < 0 || (ph != v.rec.fd && dup2(ph, v.rec.fd) < 0)) {
            snprintf(r->err, r->errlen, "cannot hold file descriptor %d: %s", v.rec.fd,
                     strerror(errno));
            return -1;
        }
        if (ph != v.rec.fd)
            close(ph);
    }
    return 0;
}

int fd_sock_int(int fd, int level, int name)
{
    int v = 0;
    socklen_t l = sizeof(v);
    return getsockopt(fd, level, name, &v, &l) == 0 ? v : 0;
}

void fd_sock_buffers(int fd, int rcvbuf, int sndbuf)
{
    int half = rcvbuf / 2;
    if (half > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &half, sizeof(half));
    half = sndbuf / 2;
    if (half > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half));
}

int fd_copy_file(const char *src, int dst_fd)
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

int fd_install(int fd, const struct crac_fd_rec *rec)
{
    if (fd != rec->fd) {
        if (dup2(fd, rec->fd) < 0)
            return -1;
        close(fd);
    }
    fcntl(rec->fd, F_SETFD, (rec->open_flags & O_CLOEXEC) ? FD_CLOEXEC : 0);
    fcntl(rec->fd, F_SETFL,
          rec->open_flags & (O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME));
    return 0;
}

/* Its old directory (same filesystem as before), the image's generation directory, then the
 * temporary directory. */
int fd_scratch_dirs(const char *path, const char *gen_dir, struct fd_dir_name out[3])
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", path);
    const char *tmp = getenv("TMPDIR");
    snprintf(out[0].p, PATH_MAX, "%s", dirname(copy));
    snprintf(out[1].p, PATH_MAX, "%s", gen_dir);
    snprintf(out[2].p, PATH_MAX, "%s", tmp && tmp[0] == '/' ? tmp : "/tmp");
    return 3;
}

int fd_temp_name(char *out, size_t size, const char *dir)
{
    static const char tail[] = "/.crac-restored-XXXXXX";
    size_t n = strlen(dir);
    if (n + sizeof(tail) > size)
        return -1;
    memcpy(out, dir, n);
    memcpy(out + n, tail, sizeof(tail));
    return 0;
}

/* Another process's or another thread's /proc file (the checkpoint records our own process's as
 * /proc/self): that state cannot come back, so the fd reads as /dev/null, with a warning, rather
 * than failing the restart. */
int fd_proc_gone(const struct fd_view *v)
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

/* fds 0-2 are the restart's own stdin/stdout/stderr, except an anonymous pipe: it may join two
 * processes of the tree (`a | b`), which the tree's restart then makes again (fd_pipe.c); and a
 * regular file, a named FIFO, /dev/null (a device that holds nothing) or a socket the program put
 * there itself (not the invocation's: stdio_given.c), which is the program's like any other it
 * opened (fd_regular.c, fd_pipe.c, fd_chardev.c, fd_socket.c): a shell's `cmd 2>/dev/null` stays
 * silent after a restart, a script's `while read ...; done < fifo` reads its FIFO again, and
 * rsync's forked child talks to its parent again through its stdin and stdout. */
static int stdio_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    int named_fifo = S_ISFIFO(st->st_mode) && strncmp(e->path, "pipe:", 5) != 0;
    int programs_own = (S_ISREG(st->st_mode) || S_ISSOCK(st->st_mode) || named_fifo ||
                        (S_ISCHR(st->st_mode) && fd_chardev_holds_nothing(e->path))) &&
                       !stdio_given_is(fd, st);
    return fd <= 2 && !(S_ISFIFO(st->st_mode) && !named_fifo) && !programs_own;
}

/* The restart's own stdin, when it is the very file the program was reading at the checkpoint
 * (`crac restart ... < input` as `crac launch ... < input`): the program reads on from where it
 * was, not from the start again. Any other stdio is left as the restart command has it. */
static int stdio_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    (void)r;
    struct stat st;
    char path[PATH_MAX];
    if (v->rec.fd != 0 || !S_ISREG(v->rec.mode) || fstat(0, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_ino != v->rec.ino)
        return 0;
    ssize_t n = readlink("/proc/self/fd/0", path, sizeof(path) - 1);
    int flags = fcntl(0, F_GETFL);
    if (n <= 0 || flags < 0 || (flags & O_ACCMODE) == O_WRONLY)
        return 0;
    path[n] = '\0';
    if (strcmp(path, v->path) == 0)
        lseek(0, (off_t)v->rec.pos, SEEK_SET);
    return 0;
}

const struct fd_ops fd_stdio_ops = {
    .kind = CRAC_FD_STDIO, .name = "stdio", .recognise = stdio_recognise, .reopen = stdio_reopen};

/* A descriptor above 2 on the invocation's own stdin, stdout or stderr: a shell script's
 * `exec 3>&1 1>log` keeps the terminal or the batch job's output on 3 while its commands write
 * to the log. At restart it is a copy of the restart's own one, not the launch's file reopened
 * by path (its output went to the first run's file, or to a terminal long gone). */
static int stdio_copy_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    /* /dev/null the program opened itself is /dev/null again, whatever the restart's stdin. */
    if (S_ISCHR(st->st_mode) && fd_chardev_holds_nothing(e->path))
        return 0;
    return fd > 2 && stdio_given_which(st) >= 0;
}

static int stdio_copy_save(struct fd_entry *e, const struct fd_entry *all, int n,
                           const char *files_dir)
{
    (void)all, (void)n, (void)files_dir;
    struct stat st;
    if (fstat(e->rec.fd, &st) != 0)
        return -1;
    e->rec.size_at_ckpt = (uint64_t)stdio_given_which(&st);
    return 0;
}

/* Only the close-on-exec flag is its own: the open file's flags are the restart's stdio's. */
static int stdio_copy_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    (void)r;
    int fd = stdio_given_dup((int)v->rec.size_at_ckpt);
    if (fd < 0 || (fd != v->rec.fd && dup2(fd, v->rec.fd) < 0))
        return -1;
    if (fd != v->rec.fd)
        close(fd);
    return fcntl(v->rec.fd, F_SETFD, (v->rec.open_flags & O_CLOEXEC) ? FD_CLOEXEC : 0) < 0 ? -1 : 0;
}

const struct fd_ops fd_stdio_copy_ops = {.kind = CRAC_FD_STDIO_COPY,
                                         .name = "stdio copy",
                                         .recognise = stdio_copy_recognise,
                                         .save = stdio_copy_save,
                                         .reopen = stdio_copy_reopen};

/* What none of the others is (sockets, epoll, signalfd, ...): /dev/null with a warning. */
static int unsupported_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    (void)r;
    fprintf(stderr,
            "crac: warning: fd %d (%s) cannot be restored; it now reads as "
            "/dev/null\n",
            v->rec.fd, v->path);
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    return fd < 0 ? -1 : fd_install(fd, &v->rec);
}

const struct fd_ops fd_unsupported_ops = {
    .kind = CRAC_FD_UNSUPPORTED, .name = "unsupported", .reopen = unsupported_reopen};

int fds_restore(const struct state_restore *r, const void *note, size_t len)
{
    const struct fd_restore fr = {note,   len,       r->gen_dir,      r->no_truncate,
                                  r->err, r->errlen, r->allow_changed};
    struct fd_view v;
    size_t off = 0;
    r->err[0] = '\0';
    while (fd_next(note, len, &off, &v) > 0) {
        if (reopened_with_threads(&v) && n_with_threads_fds < FDS_MAX) {
            with_threads_fds[n_with_threads_fds++] = v.rec.fd;
            continue;
        }
        /* Shared with another process of the tree: made once by the restart, inherited (a
         * regular file is reopened and checked as ever, then takes the shared one). */
        int inherited = fd_shared_held(v.rec.fd) >= 0 && v.rec.kind != CRAC_FD_FILE;
        if (inherited ? fd_shared_install(&v) != 0 : ops_of(v.rec.kind)->reopen(&fr, &v) != 0) {
            /* A sub-kind that said why keeps its line; the others get this one. */
            if (!r->err[0])
                snprintf(r->err, r->errlen, "fd %d (%s): cannot be restored: %s", v.rec.fd, v.path,
                         strerror(errno));
            return -1;
        }
    }
    /* Every fd is back: what refers to others is made now, sub-kind by sub-kind in the table's
     * order (socket connections before the epoll interest lists that name them). */
    for (size_t k = 0; k < N_FD_KINDS; k++) {
        if (!fd_kinds[k]->finish)
            continue;
        off = 0;
        while (fd_next(note, len, &off, &v) > 0) {
            if (v.rec.kind != fd_kinds[k]->kind)
                continue;
            if (fd_kinds[k]->finish(&fr, &v) != 0) {
                if (!r->err[0])
                    snprintf(r->err, r->errlen, "fd %d (%s): cannot be restored: %s", v.rec.fd,
                             v.path, strerror(errno));
                return -1;
            }
        }
    }
    fd_shared_release();
    stdio_given_release();
    fd_unlinked_release();
    return 0;
}

int fds_thread_phase_restore(const struct state_restore *r, const void *unused, size_t unused_len)
{
    (void)unused, (void)unused_len;
    const struct state_note *note = NULL;
    for (int k = 0; k < n_state_kinds; k++)
        if (state_kinds[k].note == CRAC_NT_FDS)
            note = &r->img->notes[k];
    if (!note || !note->data)
        return 0;
    const struct fd_restore fr = {note->data, note->len, r->gen_dir,      r->no_truncate,
                                  r->err,     r->errlen, r->allow_changed};
    struct fd_view v;
    size_t off = 0;
    while (fd_next(note->data, note->len, &off, &v) > 0) {
        if (!deferred_to_threads(v.rec.fd))
            continue;
        char live[PATH_MAX];
        v.path = live_path(r, v.path, live, sizeof(live));
        if (ops_of(v.rec.kind)->reopen(&fr, &v) != 0) {
            if (!r->err[0])
                snprintf(r->err, r->errlen, "fd %d (%s): cannot be restored: %s", v.rec.fd, v.path,
                         strerror(errno));
            return -1;
        }
    }
    return 0;
}
