/* fds.h — the program's file descriptors: one sub-kind per file (fd_*.c), each a struct fd_ops
 * (how to recognise it at checkpoint, how to save it, how to reopen it); fds.c walks the table. */
#ifndef CRAC_FDS_H
#define CRAC_FDS_H

#include "state.h"

#include "crac_image.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define FDS_MAX 4096 /* the program's fds a checkpoint records, at most */

/* stdio_given.c: the regular files, character devices and sockets the invocation gave as fds 0-2, noted
 * at loader start (launch, restart) or passed on by an exec'ing loader (--exec-stdio, "DEV:INO"
 * x3 in hex, 0:0 for none). */
void stdio_given_note(void);
int stdio_given_parse(const char *v);              /* 0, or -1 if malformed */
int stdio_given_format(char *buf, size_t len);     /* for --exec-stdio; 0, or -1 if too long */
int stdio_given_is(int fd, const struct stat *st); /* fd 0-2 holds the invocation's own file */
/* Which of the invocation's fds 0-2 (1, then 2, then 0) is the file ST is, or -1. */
int stdio_given_which(const struct stat *st);
/* Restart: the restart's own fds 0-2 kept above MIN before the program's replace them, a new
 * descriptor on one of them (/dev/null if it was closed), and the kept ones closed. */
int stdio_given_keep(int min);
int stdio_given_dup(int n);
void stdio_given_release(void);

/* One fd at checkpoint. */
struct fd_entry {
    struct crac_fd_rec rec;
    char path[PATH_MAX];
    struct crac_pty_rec pty; /* the sub-kinds with extra bytes only (PTY) */
    int parent_fd; /* a regular file's: the parent's fd that is the same open file, or -1 */
    int dup_of;    /* a regular file's: a lower fd of this process that is the same open file */
};

/* One fd's record read back at restart. */
struct fd_view {
    struct crac_fd_rec rec;
    const char *path;
    struct crac_pty_rec pty; /* the sub-kinds with extra bytes only (PTY) */
};

/* What reopening gets: the whole fds note (sub-kinds made once for several fds look at the
 * others: pipes, pty pairs) and the restart's options. */
struct fd_restore {
    const void *note;
    size_t len;
    const char *gen_dir;
    int no_truncate;
    char *err;
    size_t errlen;
    int allow_changed; /* --allow-changed-files: a written file changed in place is said, not refused */
};

struct fd_ops {
    uint32_t kind; /* CRAC_FD_* */
    const char *name;
    /* Checkpoint: whether fd (its fstat in st, its path in e) is of this sub-kind. Tried in the
     * table's order (fds.c); NULL: never by itself (regroup decides). */
    int (*recognise)(int fd, const struct fd_entry *e, const struct stat *st);
    /* Checkpoint, once every fd is recognised: sub-kinds decided by looking at several fds. */
    void (*regroup)(struct fd_entry *all, int n);
    /* Checkpoint: keep what reopening cannot give back (a file under files_dir, e->rec.saved).
     * -1 fails the checkpoint (with a line on stderr). NULL: nothing to keep. */
    int (*save)(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir);
    size_t extra; /* bytes of its own record after the path (crac_image.h) */
    /* Restart: put a new fd at v->rec.fd. 0, or -1 (with r->err, or errno for the generic line). */
    int (*reopen)(const struct fd_restore *r, const struct fd_view *v);
    /* Restart, once every fd is reopened: what refers to other fds (an epoll's interest list).
     * 0, or -1 (with r->err). NULL: nothing to do. */
    int (*finish)(const struct fd_restore *r, const struct fd_view *v);
};

extern const struct fd_ops fd_stdio_ops, fd_stdio_copy_ops, fd_unsupported_ops; /* fds.c */
extern const struct fd_ops fd_regular_ops;                                      /* fd_regular.c */
extern const struct fd_ops fd_dir_ops;                                          /* fd_dir.c */
extern const struct fd_ops fd_chardev_ops;                                      /* fd_chardev.c */
extern const struct fd_ops fd_pipe_ops;                                         /* fd_pipe.c */
extern const struct fd_ops fd_eventfd_ops;                                      /* fd_eventfd.c */
extern const struct fd_ops fd_pty_master_ops, fd_pty_slave_ops;                 /* fd_pty.c */
extern const struct fd_ops fd_mqueue_ops;                                       /* fd_mqueue.c */
extern const struct fd_ops fd_timerfd_ops;                                      /* fd_timerfd.c */
extern const struct fd_ops fd_signalfd_ops;                                     /* fd_signalfd.c */
extern const struct fd_ops fd_epoll_ops;                                        /* fd_epoll.c */
extern const struct fd_ops fd_inotify_ops;                                      /* fd_inotify.c */
extern const struct fd_ops fd_socket_ops;                                       /* fd_socket.c */
extern const struct fd_ops fd_fifo_ops;                                         /* fd_pipe.c */
extern const struct fd_ops fd_pidfd_ops;                                        /* fd_pidfd.c */
extern const struct fd_ops fd_netlink_ops;                                      /* fd_netlink.c */

/* Descriptors shared with other processes of a restarted tree (fd_shared.c): `--shared-fd
 * FD:HELD` (0, or -1 when malformed); the inherited descriptor for program fd FD, or -1; put it at
 * v's number; close every inherited one once all fds are back. */
int fd_shared_add(const char *spec);
/* fd_regular.c: a removed file the program had open, made again once for its fds and shared
 * mappings: noted at hold, its new file by the inode and path it had (a mapping's path with
 * " (deleted)"; -1: none such), closed once the fds are back. */
void fd_unlinked_note(const char *gen_dir, const struct fd_view *v);
int fd_unlinked_file(uint64_t ino, const char *path);
void fd_unlinked_release(void);

int fd_shared_held(int fd);
int fd_shared_install(const struct fd_view *v);
void fd_shared_release(void);

/* Shared by the sub-kinds (fds.c). */
/* DST = FILES_DIR/NAME, FILES_DIR made if missing. */
void fd_files_path(char *dst, size_t size, const char *files_dir, const char *name);
/* The next record of the note at *off into v: 1, 0 at the end, -1 for a bad record. */
int fd_next(const void *note, size_t len, size_t *off, struct fd_view *v);
/* /proc/self/fdinfo/FD whole, NUL-terminated (malloc'd; NULL if it cannot be read). */
char *fd_fdinfo(int fd);
/* The value after "KEY" on its line of an fdinfo text (NULL if none). */
const char *fd_info_field(const char *info, const char *key);
/* Save TEXT as files/PREFIX-<fd> (a sub-kind's own state, docs/IMAGE.md) and mark e saved; -1
 * with a line on stderr. */
int fd_save_text(struct fd_entry *e, const char *files_dir, const char *prefix, const char *text);
/* The same file, not counted as the fd's saved state (e->rec.saved stays as it is). */
int fd_write_text(const struct fd_entry *e, const char *files_dir, const char *prefix,
                  const char *text);
/* Restart: files/PREFIX-<fd> of v whole, NUL-terminated (malloc'd), or NULL with r->err set. */
char *fd_read_text(const struct fd_restore *r, const struct fd_view *v, const char *prefix);
/* An int socket option of FD (0 when it cannot be read). */
int fd_sock_int(int fd, int level, int name);
/* SO_RCVBUF and SO_SNDBUF as getsockopt reported them at checkpoint (twice what setsockopt is
 * given: the kernel's bookkeeping); 0 leaves one as it is. */
void fd_sock_buffers(int fd, int rcvbuf, int sndbuf);
/* Put fd into place at rec->fd with its recorded flags. */
int fd_install(int fd, const struct crac_fd_rec *rec);
int fd_copy_file(const char *src, int dst_fd);
/* A /proc file gone at restart: /dev/null in its place with a warning; -1 if not /proc. */
int fd_proc_gone(const struct fd_view *v);
/* PATH is a device that holds nothing (/dev/null, zero, full, random, urandom): fd_chardev.c. */
int fd_chardev_holds_nothing(const char *path);
/* A connection waiting in a TCP listener's accept queue (sock_tcp_queue.c): the address it
 * comes from and the bytes it brought, which nothing can read before it is accepted. */
struct sock_tcp_wait {
    struct sockaddr_storage peer;
    unsigned plen;
    uint32_t rqueue;
};
/* The connections waiting for the listener bound to LOCAL (at most MAX into OUT): their count,
 * or -1 if the kernel cannot say. BACKLOG gets the listener's (inode INO), if the kernel says. */
int sock_tcp_waiting(const struct sockaddr_storage *local, uint64_t ino, uint32_t *backlog,
                     struct sock_tcp_wait *out, int max);

/* A connection's `shut` bits, as the kernel's sk_shutdown: the peer finished sending (its FIN came,
 * or it closed), this end finished sending (shutdown(SHUT_WR)). */
enum { PEER_DONE = 1, SELF_DONE = 2 };
/* From TCP_INFO (sock_tcp_info.c): a connected TCP socket's `shut` bits, from its state; and
 * whether the closed TCP socket FD (no peer name) had a connection, which then finished both
 * ways or was reset: its bytes are still readable. */
int sock_tcp_shut(int fd);
int sock_tcp_was_connected(int fd);

/* For each regular file of ALL (N entries): a lower fd of this process that is the same open
 * file (dup'd: one offset) into dup_of, and the fd of this process's parent that is (inherited
 * across fork), if the parent is a split process of the tree, into parent_fd; -1 where none
 * (fd_parent_files.c). */
void fd_parent_files(struct fd_entry *all, int n);

/* The directories a removed file or directory is recreated in, best first. */
struct fd_dir_name {
    char p[PATH_MAX];
};
int fd_scratch_dirs(const char *path, const char *gen_dir, struct fd_dir_name out[3]);
/* DIR/.crac-restored-XXXXXX (a mkstemp template) into OUT; -1 if it does not fit. */
int fd_temp_name(char *out, size_t size, const char *dir);

#endif
