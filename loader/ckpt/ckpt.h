/* ckpt.h — the lower half's checkpoint machinery: configuration, triggers, the checkpoint
 * sequence (docs/ARCHITECTURE.md "Checkpoint") and its pieces. */
#ifndef CRAC_CKPT_H
#define CRAC_CKPT_H

#include "crac_image.h"
#include "crac_registry.h"
#include "incr.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ckpt_config {
    char proc_dir[PATH_MAX]; /* <ckptdir>/ckpt_<prog>_<hostid>-<pid>: stays across restarts */
    char ckpt_dir[PATH_MAX]; /* <ckptdir> */
    char program[PATH_MAX];  /* the application binary */
    char crac_cmd[PATH_MAX]; /* how to run `crac` (for the restart script) */
    char backend_name[32];
    char backend_version[32];
    int backend_driver_version;
    int keep;            /* generations kept */
    int interval;        /* seconds, 0 = none */
    int exit_after;      /* exit after the next checkpoint is written */
    int verbose;         /* --verbose: one line per checkpoint on stderr */
    int no_fork_writer;  /* --no-fork-writer: write with the program paused (ckpt_writer.c) */
    int ckpt_open_files; /* --ckpt-open-files: written files copied whatever their size */
    int ckpt_signal;
    int compress, compress_level; /* --compress: CRAC_CHUNK_* method (RAW: none) and level */
    int argc;
    char **argv;  /* the program's argv, for the manifest */
    int coord_fd; /* connection to the job's coordinator, -1: none */
    char coord_host[256], coord_port[32], coord_token[256]; /* for status requests */
};

extern struct ckpt_config ckpt_cfg;
/* The format an image is written in: compressed regions, and an incremental generation's
 * regions taken from its parent (incr.h), need a reader that knows them. */
#define CKPT_IMAGE_FORMAT()                                                                        \
    (incr_parent()       ? CRAC_IMAGE_FORMAT_INCREMENTAL                                           \
     : ckpt_cfg.compress ? CRAC_IMAGE_FORMAT_COMPRESSED                                            \
                         : CRAC_IMAGE_FORMAT)
extern struct crac_registry *ckpt_registry; /* the upper runtime's, once it registered */
extern volatile int32_t ckpt_publishing;

/* Triggers (ckpt_trigger.c). */
int ckpt_install_trigger(int signo);
/* Block the checkpoint signal in the calling thread (threads created after inherit it). */
void ckpt_block_signal(int signo);
/* A lower thread's loop: take the (blocked) checkpoint signal and request a checkpoint. */
__attribute__((noreturn)) void ckpt_wait_signal(int signo);
/* The program's threads can be suspended from now on (launch: the upper runtime registered;
 * restart: every thread is back and released). */
void ckpt_set_ready(void);
/* Wait up to timeout_ms for ckpt_set_ready(); returns whether it happened. */
int ckpt_wait_ready(int timeout_ms);
/* ckpt_cfg is complete (coordinator connected or not): the manager may start serving. */
void ckpt_config_done(void);
void ckpt_request(int exit_after);
/* A checkpoint signal the waiter took: 1 when it is another crac process's program's signal to
 * this program, recorded and passed on to a program thread (ckpt_sig_pass.c); 0 when it asks for
 * a checkpoint. */
struct signalfd_siginfo;
int ckpt_sig_pass(const struct signalfd_siginfo *si);
/* Pass the recorded one (if any, and not blocked) on to a program thread: after the take, and
 * after a restart, whose threads lost the carrier the image's had waiting (ckpt_sig_pass.c). */
void ckpt_peer_sig_carry(void);
/* From the capture of a checkpoint's state until its memory is copied, the waiter takes no
 * signal; those that came since the suspension are taken first (ckpt_trigger.c). */
void ckpt_signals_hold(void);
void ckpt_signals_release(void);
/* In a forked child: drop the parent's pending requests and its wake-up descriptor. */
void ckpt_trigger_after_fork(void);
/* Wake the manager without a request (it has just been given a coordinator to serve). */
void ckpt_manager_wake(void);
/* No checkpoint of a process alone (ckpt_serve) starts while its first fork starts the job's
 * coordinator (tree_coord.c): a request that comes meanwhile goes to the coordinator
 * (docs/DECISIONS.md "A checkpoint asked for at the first fork"). try: 1 when taken. */
enum ckpt_solo_gate { CKPT_GATE_FREE, CKPT_GATE_COORD_START, CKPT_GATE_SOLO };
int ckpt_solo_gate_try(enum ckpt_solo_gate who);
void ckpt_solo_gate_wait_free(void);
void ckpt_solo_gate_wait_free_ms(int ms); /* at most MS ms; TLS-free */
void ckpt_solo_gate_leave(enum ckpt_solo_gate who);
/* 1 while the checkpoint being taken or published is a job's (under a coordinator's barriers),
 * whatever the process's coordinator is by then (ckpt_run.c). */
extern int ckpt_run_coordinated;
/* The manager's loop: wait for a request or the interval, then checkpoint. Never returns. */
void ckpt_serve(void);
/* An exec through crac's loader is about to replace the process: a checkpoint asked for and
 * not yet holding the threads would be lost with it, so the checkpoint signal is left pending
 * for the exec'd loader (ckpt_exec_end: the exec failed, the signal is taken here again).
 * Returns the mask bit of the checkpoint signal, which the exec must keep blocked. */
uint64_t ckpt_exec_begin(void);
void ckpt_exec_end(void);
/* The checkpoint under way holds the threads and no exec is in a section: it is no longer one
 * an exec could lose. */
void ckpt_request_committed(void);
/* A coordinated process's requests so far are with its coordinator (coord_serve). */
void ckpt_request_sent(void);
/* After a job checkpoint (coord_serve): every checkpoint signal that came while it ran, taken
 * (a request on WAKE_FD not sent) or still pending, was for it and is dropped. */
void ckpt_drop_requests_during(int wake_fd);

long ckpt_register_upper(struct crac_registry *r);
long ckpt_request_entry(void);
long ckpt_query_entry(long what, char *buf, unsigned long len); /* ckpt_query.c */
long ckpt_pid_entry(long dir, long pid);
long ckpt_coord_status_entry(int *peers, int *running);
int ckpt_install_suspend_handler(const struct crac_registry *r);
int remove_tree(const char *path);
/* Take the one-writer lock on ckpt_cfg.proc_dir, or move ckpt_cfg.proc_dir to a lineage of this
 * process's own when another holds it (image_lineage.c). FRESH: a launch, whose directory must not
 * hold generations yet. 0, or -1 with errno. */
int image_lineage_claim(int fresh);
/* In a forked child: the parent's lock is not its to hold (the descriptor is shared with the
 * parent's, and kept, it held the parent's directory after the parent died and left the child's
 * own unlocked). Its directory is claimed at its first checkpoint. */
void image_lineage_leave(void);

/* What a coordinated checkpoint waits for between its phases (coord_client.c). Each returns 0
 * to go on, non-zero to abandon the checkpoint. NULL: a checkpoint of this process alone. */
struct ckpt_barrier {
    void *ctx;
    int (*suspended)(void *ctx);
    int (*written)(void *ctx, int generation);
    /* The image is on disk (gen-N.tmp flushed): 0 when the job says publish, -1 when not. */
    int (*durable)(void *ctx, int generation);
    void (*published)(void *ctx, int generation, const char *dir); /* -1: publishing failed */
    void (*failed)(void *ctx, const char *why);
};

/* The sequence (ckpt_run.c). Returns 0, or -1 with the reason printed on stderr. */
int ckpt_run(int exit_after, const struct ckpt_barrier *barrier);

/* Quiesce and suspend (ckpt_suspend.c). */
struct parked_thread {
    struct crac_thread_rec *rec;
    int32_t tid;
    long blocked_nr; /* syscall the thread was blocked in when signalled, -1 if none */
    uint64_t blocked_pc;
};
int ckpt_suspend_all(struct parked_thread *out, int max, int *count);
void ckpt_release_all(void);

/* The image (image_core.c, image_commit.c; the kinds of state beside memory: loader/state/). */
struct state_note;
struct page_digest;
/* The page digests of upper.core and device.img being computed beside their writers
 * (page_digest.h); NULL where none is. */
struct image_digests {
    struct page_digest *core, *device;
};
void image_digests_cancel(struct image_digests *d);
/* Writes upper.core with the notes of state_kinds[] (state.h), in the table's order; *digest: its
 * page digest being computed beside, or NULL. */
int core_write(const char *path, const struct parked_thread *threads, int n_threads, int generation,
               const struct state_note *notes, uint32_t *header_crc, uint64_t *file_size,
               struct page_digest **digest);
/* Publishes tmp_dir; takes (finishes and frees) the digests. */
int commit_generation(const char *tmp_dir, int generation, uint32_t header_crc, uint64_t core_size,
                      int n_threads, struct image_digests digests);
/* commit_generation in two steps, for a job whose processes must all be durable before any
 * publishes (docs/PROTOCOL.md): prepare writes the manifest and flushes gen-N.tmp (takes the
 * digests); publish renames it to gen-N and moves `latest`. */
int prepare_generation(const char *tmp_dir, int generation, uint32_t header_crc, uint64_t core_size,
                       int n_threads, struct image_digests digests);
int publish_generation(const char *tmp_dir, int generation);
/* `crac compact`: the manifest text of the generation being compacted, whose lines about the
 * program the next manifest written carries instead of this process's (image_commit.c). */
void image_commit_carry(const char *manifest_text);
/* `crac-loader --compact GEN_DIR CORE_SIZE HEADER_CRC KEEP CRAC_CMD` (ckpt_compact.c): exit
 * status 0, or EXIT_REFUSED with one line on stderr. */
int compact_main(int argc, char **argv);
typedef int32_t (*tid_map_fn)(int32_t old_tid);

/* The forked writer (ckpt_writer.c): upper.core written and flushed by a copy-on-write child
 * while the program runs on. */
struct ckpt_write_job {
    const char *core; /* path of upper.core */
    const struct parked_thread *threads;
    int n_threads, generation;
    const struct state_note *notes;
};
/* CRAC_TEST_WRITER_HOLD (a test knob, ckpt_run.c): the writer waits for that file to exist. */
void ckpt_test_writer_hold(void);
/* The pid core_write records as the process's (0: getpid()); the forked writer sets it. */
extern pid_t core_owner_pid;
/* Set only in the forked writer's own copy (never in the program's process): core_write may then
 * drop its copy of each batch of pages once written (MADV_DONTNEED), which the program's memory
 * does not see (docs/DECISIONS.md "Checkpoint CPU and write path"). */
extern int core_in_forked_copy;
/* 0 and the child's pid, or -errno (the clone was refused: write in-process instead). */
int ckpt_writer_start(const struct ckpt_write_job *job, pid_t *pid);
/* Waits for the child; 0 with its results once upper.core is written and on disk, else -1. */
int ckpt_writer_wait(pid_t pid, uint32_t *header_crc, uint64_t *core_size);
/* The CPU time (ms) the last writer reported with its results (CRAC_TIMING). */
double ckpt_writer_cpu_ms(void);
/* Whether the last forked writer wrote its page runs O_DIRECT (CRAC_DIRECT_WRITE). */
int ckpt_writer_direct(void);
/* Kills and reaps it (the checkpoint was called off). */
void ckpt_writer_cancel(pid_t pid);

#endif
