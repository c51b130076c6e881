/* image_fds.c — the upper half's file descriptors at checkpoint: what each one is, its flags and
 * offset; contents of unlinked and small written files, and of pipes it holds both ends of. */
#include "ckpt.h"

#include "lower_fds.h"
#include "upper_alloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mqueue.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define SAVE_WRITTEN_FILES_MAX (64UL << 20) /* written files up to this size are copied */
#define MAX_FDS 4096
#define MQUEUE_MAGIC 0x19800202

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

/* Copy a file's current contents (through /proc/self/fd, so unlinked files work too). */
static int copy_contents(int fd, const char *dst)
{
    char src[64];
    snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[1 << 16];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    if (n < 0 || fsync(out) != 0)
        rc = -1;
    close(in);
    close(out);
    return rc;
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

/* A message queue's attributes and messages, into DST (crac_image.h): every message is received
 * and sent straight back, so the queue ends as it was (each priority's order kept). The program is
 * parked, so nothing else uses the queue meanwhile. */
static int save_mqueue(int prog_fd, const char *dst)
{
    /* Both receiving and sending back need a read-write descriptor: the program's may be
     * read-only or write-only, so the queue is opened again through /proc. */
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", prog_fd);
    int fd = open(self, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct mq_attr a;
    if (mq_getattr(fd, &a) != 0) {
        close(fd);
        return -1;
    }
    struct crac_mq_file head = {a.mq_maxmsg, a.mq_msgsize, a.mq_curmsgs};
    char *msgs = malloc((size_t)(a.mq_curmsgs ? a.mq_curmsgs : 1) * (size_t)(a.mq_msgsize + 8));
    struct crac_mq_msg *meta = calloc((size_t)(a.mq_curmsgs ? a.mq_curmsgs : 1), sizeof(*meta));
    int out = -1, rc = -1;
    long got = 0;
    if (!msgs || !meta)
        goto done;
    /* A time already past: never blocks on a blocking descriptor. */
    struct timespec past = {0, 0};
    for (; got < a.mq_curmsgs; got++) {
        unsigned prio;
        ssize_t n = mq_timedreceive(fd, msgs + got * (a.mq_msgsize + 8), (size_t)a.mq_msgsize,
                                    &prio, &past);
        if (n < 0)
            break;
        meta[got] = (struct crac_mq_msg){prio, (uint32_t)n};
    }
    int sent_back = 1;
    for (long i = 0; i < got; i++)
        if (mq_timedsend(fd, msgs + i * (a.mq_msgsize + 8), meta[i].len, meta[i].prio, &past) != 0)
            sent_back = 0;
    if (got != a.mq_curmsgs || !sent_back)
        goto done;
    out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0 || write(out, &head, sizeof(head)) != (ssize_t)sizeof(head))
        goto done;
    static const char zeros[8];
    for (long i = 0; i < got; i++) {
        size_t pad = (8 - meta[i].len % 8) % 8;
        if (write(out, &meta[i], sizeof(meta[i])) != (ssize_t)sizeof(meta[i]) ||
            write(out, msgs + i * (a.mq_msgsize + 8), meta[i].len) != (ssize_t)meta[i].len ||
            write(out, zeros, pad) != (ssize_t)pad)
            goto done;
    }
    rc = fsync(out);
done:
    if (out >= 0)
        close(out);
    close(fd);
    free(msgs);
    free(meta);
    return rc;
}

struct fd_entry {
    struct crac_fd_rec rec;
    char path[PATH_MAX];
    struct crac_pty_rec pty; /* PTY kinds only */
};

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
static void classify_ptys(struct fd_entry *es, int n)
{
    int masters[MAX_FDS], warned = 0;
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
            fprintf(stderr, "crac: warning: pseudo-terminal %s holds %d unread bytes; they are "
                            "not saved (the pair is recreated empty at restart)\n", e->path, unread);
    }
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

/* /proc/<our pid>/... names this process only until the restart gives it another pid: recorded as
 * /proc/self/..., which the restart reopens for the restarted process. The main thread's
 * /proc/self/task/<tid> is recorded with the tid the program knows; the restart maps it to the
 * main thread's new tid (restart_fds.c). */
static void proc_self_path(char *path, size_t size)
{
    char own[48];
    snprintf(own, sizeof(own), "/proc/%d", (int)getpid());
    size_t n = under(path, own);
    if (n)
        replace_head(path, size, n, "/proc/self");
    snprintf(own, sizeof(own), "/proc/self/task/%d", (int)getpid());
    n = under(path, own);
    if (n) {
        char virt[48];
        snprintf(virt, sizeof(virt), "/proc/self/task/%d", (int)vid_from_real(crac_ctrl(), getpid()));
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
    struct statfs fs;
    if (fd <= 2)
        e->rec.kind = CRAC_FD_STDIO; /* always the restart's own stdin/stdout/stderr */
    else if (fstatfs(fd, &fs) == 0 && fs.f_type == MQUEUE_MAGIC)
        e->rec.kind = CRAC_FD_MQUEUE; /* a regular file to fstat, but no file to reopen */
    else if (S_ISREG(st.st_mode))
        e->rec.kind = CRAC_FD_FILE;
    else if (S_ISDIR(st.st_mode))
        e->rec.kind = CRAC_FD_DIR;
    else if (S_ISCHR(st.st_mode))
        e->rec.kind = CRAC_FD_CHAR;
    else if (S_ISFIFO(st.st_mode) && strncmp(e->path, "pipe:", 5) == 0)
        e->rec.kind = CRAC_FD_PIPE;
    else if (strcmp(e->path, "anon_inode:[eventfd]") == 0)
        e->rec.kind = CRAC_FD_EVENTFD;
    else
        e->rec.kind = CRAC_FD_UNSUPPORTED;
}

int fds_capture(const char *files_dir, void **out, size_t *out_len)
{
    static struct fd_entry entries[MAX_FDS];
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) && n < MAX_FDS) {
        if (de->d_name[0] == '.')
            continue;
        int fd = atoi(de->d_name);
        if (fd == dirfd(d) || lower_fd_is_ours(fd))
            continue;
        classify(fd, &entries[n++]);
    }
    closedir(d);
    classify_ptys(entries, n);
    struct blob b = {0};
    int made_dir = 0;
    for (int i = 0; i < n; i++) {
        struct fd_entry *e = &entries[i];
        char dst[PATH_MAX];
        int acc = e->rec.open_flags & O_ACCMODE;
        int want_copy = e->rec.kind == CRAC_FD_FILE &&
                        (e->rec.unlinked ||
                         (acc != O_RDONLY && e->rec.size_at_ckpt <= SAVE_WRITTEN_FILES_MAX));
        if (e->rec.kind == CRAC_FD_PIPE && (acc == O_RDONLY)) {
            /* The write end must be ours too, else the data belongs to someone else. */
            for (int k = 0; k < n; k++) {
                if (k == i || entries[k].rec.kind != CRAC_FD_PIPE ||
                    entries[k].rec.ino != e->rec.ino ||
                    (entries[k].rec.open_flags & O_ACCMODE) == O_RDONLY)
                    continue;
                if (!made_dir++)
                    mkdir(files_dir, 0700);
                snprintf(dst, sizeof(dst), "%s/pipe-%lu", files_dir, (unsigned long)e->rec.ino);
                if (save_pipe_contents(e->rec.fd, entries[k].rec.fd, dst) > 0)
                    e->rec.saved = 1;
                break;
            }
        }
        if (e->rec.kind == CRAC_FD_MQUEUE) {
            if (!made_dir++)
                mkdir(files_dir, 0700);
            snprintf(dst, sizeof(dst), "%s/mq-%d", files_dir, e->rec.fd);
            if (save_mqueue(e->rec.fd, dst) != 0) {
                fprintf(stderr, "crac: error: cannot save the message queue %s (fd %d): %s\n",
                        e->path, e->rec.fd, strerror(errno));
                free(b.data);
                return -1;
            }
            e->rec.saved = 1;
        }
        if (want_copy) {
            if (!made_dir++)
                mkdir(files_dir, 0700);
            snprintf(dst, sizeof(dst), "%s/fd-%d", files_dir, e->rec.fd);
            if (copy_contents(e->rec.fd, dst) != 0) {
                fprintf(stderr, "crac: error: cannot save a copy of fd %d (%s): %s\n", e->rec.fd,
                        e->path, strerror(errno));
                free(b.data);
                return -1;
            }
            e->rec.saved = 1;
        }
        int pty = e->rec.kind == CRAC_FD_PTY_MASTER || e->rec.kind == CRAC_FD_PTY_SLAVE;
        e->rec.path_len = (uint32_t)((strlen(e->path) + 1 + 7) & ~7UL);
        e->rec.size = (uint32_t)(sizeof(e->rec) + e->rec.path_len + (pty ? sizeof(e->pty) : 0));
        if (blob_put(&b, &e->rec, sizeof(e->rec)) || blob_put(&b, e->path, strlen(e->path) + 1) ||
            (pty && blob_put(&b, &e->pty, sizeof(e->pty)))) {
            free(b.data);
            return -1;
        }
    }
    *out = b.data;
    *out_len = b.len;
    return n;
}
