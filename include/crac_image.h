/* crac_image.h — the on-disk records of upper.core's "CRAC" notes (docs/IMAGE.md). All fields are
 * little-endian, records are 8-byte aligned, and each variable-length record starts with its size. */
#ifndef CRAC_IMAGE_H
#define CRAC_IMAGE_H

#include <stdint.h>

#define CRAC_IMAGE_FORMAT 1
#define CRAC_NOTE_NAME "CRAC"

enum crac_note_type {
    CRAC_NT_PROCESS = 0x43520001,
    CRAC_NT_REGIONS = 0x43520002,
    CRAC_NT_THREADS = 0x43520003,
    CRAC_NT_FDS = 0x43520004,
    CRAC_NT_SIGNALS = 0x43520005,
    CRAC_NT_TIMERS = 0x43520006,
    CRAC_NT_PENDING = 0x43520007,
    CRAC_NT_RLIMITS = 0x43520008,
};

struct crac_process_rec {
    uint32_t format;
    uint32_t pid; /* as the program knows it (the pid of the first launch) */
    uint64_t registry;
    uint64_t w_start, w_end, d_start, d_end;
    int32_t generation;
    int32_t ckpt_signal;
    uint32_t umask;
    uint32_t cwd_len; /* the cwd string (NUL-terminated, padded to 8) follows */
};

enum crac_region_kind {
    CRAC_REGION_ANON = 1,         /* private anonymous: saved non-zero pages, the rest zero */
    CRAC_REGION_ANON_SHARED = 2,  /* shared anonymous (or deleted file): saved like ANON */
    CRAC_REGION_FILE_PRIVATE = 3, /* private file mapping: pages in the bitmap are saved, the rest
                                     come from the file, whose identity must match */
    CRAC_REGION_FILE_SHARED = 4,  /* shared file mapping: nothing saved, the file is the data */
};

struct crac_region_rec {
    uint32_t size; /* of this record, path and bitmap included */
    uint32_t kind;
    uint64_t start, end;
    uint32_t prot;
    uint32_t flags;       /* bit 0: outside W (a recorded extra); bit 1: MAP_NORESERVE */
    uint64_t core_offset; /* where the region's pages start in upper.core (0: nothing saved) */
    uint64_t file_offset; /* for file kinds: offset of start in the file */
    uint64_t dev, ino, file_size;
    int64_t mtime_ns;
    uint32_t crc32c;       /* over every saved page: 8-byte page index, then 4096 bytes */
    uint32_t saved_pages;
    uint32_t path_len;     /* NUL-terminated path follows, padded to 8 */
    uint32_t bitmap_bytes; /* FILE_PRIVATE: one bit per page (1 = saved), after the path */
};

#define CRAC_REGION_OUTSIDE_W 1u
#define CRAC_REGION_NORESERVE 2u /* mapped without swap reservation ("nr" in smaps VmFlags) */

struct crac_thread_note {
    int32_t tid;      /* as the program knows it (the id of the first launch) */
    int32_t real_tid; /* the kernel's at checkpoint time */
    int32_t is_main;
    int32_t pad;
    uint64_t rec; /* address of its crac_thread_rec in the registry (upper memory) */
};

enum crac_fd_kind {
    CRAC_FD_FILE = 1,      /* regular file, reopened by path */
    CRAC_FD_DIR = 2,
    CRAC_FD_CHAR = 3,      /* character device, reopened by path */
    CRAC_FD_PIPE = 4,      /* both ends in this process: recreated, contents refilled */
    CRAC_FD_STDIO = 5,     /* 0, 1, 2 when not regular files: the restart's own */
    CRAC_FD_EVENTFD = 6,
    CRAC_FD_UNSUPPORTED = 7, /* socket, epoll, ...: replaced by /dev/null at restart, with a warning */
    CRAC_FD_MQUEUE = 8,      /* POSIX message queue: attributes and messages in files/mq-<fd> */
    CRAC_FD_PTY_MASTER = 9,  /* pseudo-terminal whose master and slave this process holds: */
    CRAC_FD_PTY_SLAVE = 10,  /* a new pair at restart; a crac_pty_rec follows the path */
};

/* After the path of a PTY record: the pair's number at checkpoint (pairs the fds) and the slave's
 * settings (glibc struct termios, struct winsize of x86-64, as raw bytes). */
struct crac_pty_rec {
    uint32_t index;
    uint32_t have_termios;
    uint8_t termios[60];
    uint8_t winsize[8];
    uint32_t pad;
};

/* files/mq-<fd>: this header, then per message (highest priority first, FIFO within one) a
 * crac_mq_msg and its bytes padded to 8. */
struct crac_mq_file {
    int64_t maxmsg, msgsize, curmsgs;
};

struct crac_mq_msg {
    uint32_t prio;
    uint32_t len;
};

struct crac_fd_rec {
    uint32_t size;
    uint32_t kind;
    int32_t fd;
    uint32_t open_flags; /* from fdinfo, O_CLOEXEC included */
    uint64_t pos;
    uint64_t size_at_ckpt;
    uint64_t ino;   /* pipes: the pipe inode pairs the two ends */
    uint32_t mode;  /* st_mode */
    uint32_t saved; /* 1: contents saved as files/fd-<fd> (unlinked or small written file) */
    uint32_t unlinked;
    uint32_t path_len; /* path follows, padded to 8 */
};

struct crac_signal_rec {
    uint64_t handler, flags, restorer, mask; /* kernel struct sigaction, per signal 1..64 */
};

struct crac_timers_rec {
    uint64_t itimer[3][4]; /* ITIMER_REAL/VIRTUAL/PROF: interval sec, usec, value sec, usec */
    uint32_t n_posix;
    uint32_t pad;
};

/* Signals pending at checkpoint time: process-wide, then per thread; raised again at restart. */
struct crac_pending_rec {
    uint64_t shared;
    uint32_t n_threads;
    uint32_t pad;
};

struct crac_pending_thread {
    int32_t tid; /* as the program knows it */
    int32_t pad;
    uint64_t mask;
};

/* Resource limits, RLIMIT_CPU (0) .. RLIMIT_RTTIME (15), as getrlimit gives them. */
#define CRAC_N_RLIMITS 16
struct crac_rlimit_rec {
    uint64_t cur, max;
};

struct crac_posix_timer_rec {
    int32_t id;
    int32_t clockid;
    int32_t signo;
    int32_t notify; /* SIGEV_SIGNAL / SIGEV_NONE / SIGEV_THREAD_ID */
    int32_t notify_tid;
    int32_t pad;
    uint64_t sigval;
    int64_t interval_ns, value_ns;
};

#endif
