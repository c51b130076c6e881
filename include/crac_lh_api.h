/* crac_lh_api.h — the versioned table of functions the lower half exports to the upper half.
 * Entries are found by name (crac_lh_lookup), never by index, so halves of different builds agree. */
#ifndef CRAC_LH_API_H
#define CRAC_LH_API_H

#include <stdint.h>

#define CRAC_LH_API_MAGIC 0x4352414341504931UL /* "CRACAPI1" */
#define CRAC_LH_API_VERSION 1

/* The sixth argument of the upper runtime's own openat (upperhalf/fastpath.c), which openat does
 * not read: after a restart the filter lets such a call through untrapped, so an open that blocks
 * does so in upper code, cancellable, and the loader checks its path only after it
 * (loader/confine/confine_filter.c). */
#define CRAC_OPEN_UNTRAPPED 0x4352414355504f4eUL /* "CRACUPON" */

/* The fifth argument of the upper runtime's own rt_sigtimedwait (upperhalf/suspend_pending.c),
 * which the kernel does not read: the trap handler then leaves si_pid as the kernel's, which the
 * checkpoint puts back and saves itself (loader/state/pending.c), rather than the program's. */
#define CRAC_SIGWAIT_KERNEL_IDS 0x4352414353494b49UL /* "CRACSIKI" */

struct crac_lh_entry {
    const char *name;
    void *fn;
};

struct crac_lh_api {
    uint64_t magic;
    uint32_t version;
    uint32_t n_entries;
    const struct crac_lh_entry *entries;
    /* Checkpoint gate: number of threads inside the lower half; checkpoint_pending makes new
     * crossings wait (docs/ARCHITECTURE.md "Crossing", "Checkpoint"). Both live in lower-half memory. */
    volatile int32_t *gate_inside;
    volatile int32_t *gate_pending;
    /* Borrow a shadow lower TCB (fs value) for the calling upper thread, and give it back.
     * Both are TLS-free and safe to call with the upper fs. */
    uint64_t (*borrow_tcb)(void);
    void (*return_tcb)(uint64_t fs);
    int hwcap_fsgsbase;
    const char *backend;
    /* The upper runtime's suspend handler hands it a CRAC_SIG_SUSPEND that carries another crac
     * process's checkpoint-numbered signal for the program (crac_layout.h). TLS-free. */
    void (*deliver_peer_signal)(void *info, void *uc);
};

/* What the entry "crac_lh_query" answers (loader/ckpt/ckpt_query.c): strings are copied into the
 * caller's buffer, numbers returned. */
enum crac_query {
    CRAC_QUERY_PROC_DIR = 1,    /* <ckptdir>/ckpt_<prog>_<id>: where the generations go */
    CRAC_QUERY_CKPT_DIR = 2,    /* <ckptdir> */
    CRAC_QUERY_PROGRAM = 3,     /* the program's real path (symlinks resolved) */
    CRAC_QUERY_SIGNAL = 4,      /* the checkpoint signal */
    CRAC_QUERY_COORDINATED = 5, /* 1 when a coordinator runs the checkpoints */
    CRAC_QUERY_INTERVAL = 6,    /* seconds between checkpoints, 0 none */
};

#endif
