/* state.h — the kinds of process state saved beside memory and threads: one file per kind, the
 * same verbs for each (X_capture, X_hold, X_restore), and the single table state_kinds[] (kinds.c). */
#ifndef CRAC_STATE_H
#define CRAC_STATE_H

#include "ckpt.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>

struct restart_image;

/* A kind's note: its bytes in upper.core (CRAC_NT_*, crac_image.h). data NULL: none. */
struct state_note {
    const void *data;
    size_t len;
};

/* What capture gets: the parked threads, and the directory for files of the image. */
struct state_capture {
    const struct parked_thread *threads;
    int n_threads;
    const char *files_dir; /* <generation>/files; made by the first kind that puts a file there */
};

/* When a kind is restored, in restart's order. */
enum state_phase {
    /* Memory and the working directory are back; crac's handlers and the seccomp filter are not
     * installed yet (restart.c, restart_run). */
    STATE_WITH_MEMORY,
    /* Every thread is cloned back and the tid map is known; none runs yet (restart_threads.c). */
    STATE_WITH_THREADS,
};

/* What restore gets. */
struct state_restore {
    struct restart_image *img;
    const char *gen_dir; /* the generation directory (its files/ holds what capture saved) */
    int no_truncate;     /* --no-truncate */
    tid_map_fn map_tid;  /* old tid -> new one; NULL in STATE_WITH_MEMORY and for hold */
    char *err;           /* restore fails with a one-line reason here */
    size_t errlen;
    int allow_changed; /* --allow-changed-files (file_ids.c) */
};

struct state_kind {
    const char *name;
    uint32_t note;  /* CRAC_NT_*; 0: the kind keeps its state in upper memory itself */
    size_t min_len; /* a shorter note is ignored (as if absent) */
    int required;   /* an image without the note is refused */
    enum state_phase phase;
    /* Checkpoint, every thread parked: the note's bytes into *blob (malloc'd), or none. 0 / -1. */
    int (*capture)(const struct state_capture *c, void **blob, size_t *len);
    /* Restart, right after the image is read and before the lower half starts. May be NULL. */
    int (*hold)(const struct state_restore *r, const void *note, size_t len);
    /* Restart, in its phase; a kind whose note is absent is skipped. 0, or -1 with r->err. */
    int (*restore)(const struct state_restore *r, const void *note, size_t len);
};

#define STATE_KINDS_MAX 16

/* COUNT numeric fields of /proc/PID/stat from FIRST (numbered as in proc(5), from 3) into
 * VALUES, PID 0 this process's (proc_stat.c). 0, or -1 when they cannot be read. */
int proc_stat_fields(int pid, int first, int count, long long *values);
/* The text of PATH (at most LEN-1 bytes, NUL-terminated) into BUF, through a descriptor the
 * program's close_range spares: the bytes read, or -1 (proc_stat.c). */
ssize_t proc_read_text(const char *path, char *buf, size_t len);

/* What a checkpoint cannot save (losses.c): said once per process on stderr, listed in the
 * manifest. state_losses_reset at each checkpoint's start; state_losses gives this one's. */
void state_losses_reset(void);
void state_loss(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int state_losses(const char *const **list);
extern const struct state_kind state_kinds[];
extern const int n_state_kinds;

/* The loops over the table (kinds.c). */
int state_capture_all(const struct state_capture *c, struct state_note notes[STATE_KINDS_MAX]);
void state_notes_free(struct state_note notes[STATE_KINDS_MAX]);
/* A crac note read from upper.core: kept in img->notes if it is a kind's. */
void state_note_take(struct restart_image *img, uint32_t type, const void *desc, size_t len);
/* The first required kind whose note the image lacks, or NULL. */
const char *state_note_missing(const struct restart_image *img);
int state_hold_all(const struct state_restore *r);
int state_restore_phase(enum state_phase phase, const struct state_restore *r);

/* The kinds, one file each. */
int cputime_capture(const struct state_capture *c, void **blob, size_t *len);  /* cputime.c */
int children_capture(const struct state_capture *c, void **blob, size_t *len); /* children.c */
int cputime_restore(const struct state_restore *r, const void *note, size_t len);
int start_time_capture(const struct state_capture *c, void **blob, size_t *len); /* start_time.c */
int mapped_losses_capture(const struct state_capture *c, void **blob,
                          size_t *len); /* mapped_losses.c */
/* The largest file on disk mapped shared whose pages a checkpoint keeps (CRAC_REGION_FILE_KEPT,
 * image_core.c): a JVM's hsperfdata is 32 KiB; a data file is the user's, not the image's, unless
 * --ckpt-open-files. */
#define KEPT_FILE_MAX (4UL << 20)
struct stat;
/* Whether a checkpoint keeps the pages of a shared mapping of the file ST (maps_ino: the inode
 * /proc/self/maps names; writable: mapped PROT_WRITE), on disk, not tmpfs (mapped_losses.c). */
int mapping_file_kept(const struct stat *st, unsigned long maps_ino, int writable);
int start_time_restore(const struct state_restore *r, const void *note, size_t len);
/* This host's boot id and boot time into *B (zeros where unreadable); launch, exec and restart. */
struct crac_boot;
void boot_read(struct crac_boot *b);
/* A file's last bytes hashed: they tell a file only appended to since the checkpoint from one
 * rewritten (file_ids.c for files read, fd_regular.c's tail records for large written ones). */
#define TAIL_HASHED 4096UL
/* SHA-256 (hex) of len bytes of fd from byte from, read with pread (no offset moves): 0, or -1
 * when they cannot all be read (file_ids.c). */
int hash_fd(int fd, uint64_t from, uint64_t len, char hex[65]);
int fds_capture(const struct state_capture *c, void **blob, size_t *len); /* fds.c */
/* Whether the last capture kept a copy of the file (inode, path) through a descriptor. */
int fds_copy_saved(uint64_t ino, const char *path);
/* Threads parked, before the job-wide `suspended` barrier: every TCP socket sends what Nagle's
 * algorithm held back, so a peer in another process of the tree has it queued when its image
 * is written (fd_socket.c). */
void fd_socket_push_all(void);
int fds_hold(const struct state_restore *r, const void *note, size_t len);
int fds_restore(const struct state_restore *r, const void *note, size_t len);
/* The fds fds_restore leaves for the threads' phase (threads' /proc files); the fds note is its own. */
int fds_thread_phase_restore(const struct state_restore *r, const void *unused, size_t unused_len);
int signals_capture(const struct state_capture *c, void **blob, size_t *len); /* signals.c */
int signals_restore(const struct state_restore *r, const void *note, size_t len);
int timers_capture(const struct state_capture *c, void **blob, size_t *len); /* timers.c */
int timers_restore(const struct state_restore *r, const void *note, size_t len);
int pending_capture(const struct state_capture *c, void **blob, size_t *len); /* pending.c */
int pending_restore(const struct state_restore *r, const void *note, size_t len);
/* Before the threads are told to suspend: lend them room to note their own queued signals in
 * (registry pending_buf, upperhalf/suspend_pending.c); pending_capture reads it. */
void pending_lend(struct crac_registry *r);
int rlimits_capture(const struct state_capture *c, void **blob, size_t *len); /* rlimits.c */
int rlimits_restore(const struct state_restore *r, const void *note, size_t len);
/* The program's next descriptor in D (an opendir of /proc/self/fd), MIN or above: not the
 * directory's own, not one of crac's (lower_fds.h); -1 at the end (fds.c). */
int state_next_program_fd(DIR *d, int min);
/* The checkpoint's look, with the program suspended, at its netlink sockets holding messages it
 * has not read (a request's answer, a dump's next part, a notification): settled when there are
 * none, or when OVERDUE and each of them was unread at every look before (one the program does
 * not read, not one in the middle of an answer). S starts zeroed (fd_netlink.c). */
#define NETLINK_SETTLE_MAX 64
struct netlink_unread {
    int fd;
    uint64_t ino;
};
struct netlink_settle {
    int looks, n_always;
    struct netlink_unread always[NETLINK_SETTLE_MAX];
};
int fd_netlink_settled(struct netlink_settle *s, int overdue);
int file_ids_capture(const struct state_capture *c, void **blob, size_t *len); /* file_ids.c */
int file_ids_hold(const struct state_restore *r, const void *note, size_t len);
int prctl_capture(const struct state_capture *c, void **blob, size_t *len); /* prctl_state.c */
int prctl_restore(const struct state_restore *r, const void *note, size_t len);
int file_locks_capture(const struct state_capture *c, void **blob, size_t *len); /* file_locks.c */
int file_locks_restore(const struct state_restore *r, const void *note, size_t len);
int thread_sched_capture(const struct state_capture *c, void **blob,
                         size_t *len); /* thread_sched.c */
int thread_sched_restore(const struct state_restore *r, const void *note, size_t len);
int seccomp_capture(const struct state_capture *c, void **blob, size_t *len); /* seccomp_state.c */
int seccomp_hold(const struct state_restore *r, const void *note, size_t len);
int seccomp_restore(const struct state_restore *r, const void *note, size_t len);
/* Why a SECCOMP note is malformed, or NULL (restart_check.c runs it before anything is done). */
const char *seccomp_note_check(const void *note, size_t len);

#endif
