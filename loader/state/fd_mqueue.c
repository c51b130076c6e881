/* fd_mqueue.c — POSIX message queues: attributes and messages saved at checkpoint (received and
 * sent straight back), the queue recreated by name and refilled in order at restart. */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define MQUEUE_MAGIC 0x19800202

/* ---- checkpoint ---- */

/* A regular file to fstat, but no file to reopen: recognised before regular files. */
static int mqueue_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)e, (void)st;
    struct statfs fs;
    return fstatfs(fd, &fs) == 0 && fs.f_type == MQUEUE_MAGIC;
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
    rc = 0; /* synced at commit (image_commit.c) */
done:
    if (out >= 0)
        close(out);
    close(fd);
    free(msgs);
    free(meta);
    return rc;
}

static int mqueue_save(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir)
{
    (void)all, (void)n;
    char dst[PATH_MAX], name[32];
    snprintf(name, sizeof(name), "mq-%d", e->rec.fd);
    fd_files_path(dst, sizeof(dst), files_dir, name);
    if (save_mqueue(e->rec.fd, dst) != 0) {
        fprintf(stderr, "crac: error: cannot save the message queue %s (fd %d): %s\n", e->path,
                e->rec.fd, strerror(errno));
        return -1;
    }
    e->rec.saved = 1;
    return 0;
}

/* ---- restart ---- */

static int read_exact(int fd, void *buf, size_t n)
{
    return read(fd, buf, n) == (ssize_t)n ? 0 : -1;
}

/* A POSIX message queue: opened by its name (created if gone, with its attributes), emptied of
 * what was sent or left after the checkpoint, and refilled with the saved messages in their
 * order. A queue the program had unlinked is made under a temporary name, unlinked again. */
static int mqueue_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    const char *gen_dir = r->gen_dir;
    char *err = r->err;
    size_t errlen = r->errlen;
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
    return fd_install(fd, rec);
}

const struct fd_ops fd_mqueue_ops = {.kind = CRAC_FD_MQUEUE,
                                     .name = "mqueue",
                                     .recognise = mqueue_recognise,
                                     .save = mqueue_save,
                                     .reopen = mqueue_reopen};
