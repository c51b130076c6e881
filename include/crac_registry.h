/* crac_registry.h — the upper runtime's registry, shared by layout with the lower half: where
 * threads park during a checkpoint and what a restart needs to bring them back (docs/ARCHITECTURE.md "Checkpoint", "Restart").
 * It lives in upper-half memory, so it is saved and restored with the upper half. */
#ifndef CRAC_REGISTRY_H
#define CRAC_REGISTRY_H

#include <stdint.h>

#define CRAC_REGISTRY_MAGIC 0x4352414352454731UL /* "CRACREG1" */
#define CRAC_REGISTRY_VERSION 1
/* Its suspend handler passes a marked CRAC_SIG_SUSPEND to the lower half's deliver_peer_signal. */
#define CRAC_UPPER_PEER_SIGNAL 1
#define CRAC_MAX_THREADS 4096

/* Callee-saved registers and the resume point of a parked thread. */
struct crac_jmp {
    uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip;
};

enum crac_thread_state { CRAC_SLOT_FREE = 0, CRAC_SLOT_PARKED = 1 };

struct crac_thread_rec {
    volatile int32_t state;
    int32_t tid;
    uint64_t fsbase;
    uint64_t ucontext; /* the interrupted context, in the signal frame on the thread's stack */
    struct crac_jmp park;
    uint64_t altstack_sp, altstack_size; /* sigaltstack, per-thread kernel state */
    int32_t altstack_flags;
    int32_t pad;
    uint64_t robust_head, robust_len; /* set_robust_list, filled by the manager */
};

/* The device registry the libcudart shim keeps (upperhalf/cudart/dalloc.h has the same layout):
 * sorted ranges of D with their kind (1 device, 2 managed). */
struct crac_dev_range {
    uint64_t start, size;
    int kind;
};

struct crac_dev_ranges {
    struct crac_dev_range *v;
    uint32_t n, cap;
};

/* One queued thread-directed signal a parked thread found pending on itself (and put back). */
struct crac_pending_slot {
    int32_t tid; /* as the program knows it (gettid in the upper half) */
    int32_t pad;
    uint8_t info[128]; /* the kernel siginfo_t, in the thread's dequeue order */
};

/* Where the threads note them: lower-half memory; each thread takes slots with an atomic add on
 * `used`, so one thread's slots are in its order. `lost`: a slot was wanted past `cap` (or a
 * signal could not be put back): the manager then trusts none and keeps only the masks. */
struct crac_pending_buf {
    volatile int32_t used;
    int32_t cap;
    volatile int32_t lost;
    int32_t pad;
    uint64_t
        skip; /* signals never to take: crac's own, the synchronous ones the handler leaves open */
    struct crac_pending_slot slot[];
};

struct crac_registry {
    uint64_t magic;
    uint32_t version;
    volatile int32_t parked;      /* futex: threads parked (or restored and waiting) this round */
    volatile int32_t release_gen; /* futex: bumped to release the parked threads */
    volatile int32_t generation;  /* number of checkpoints taken of this computation */
    volatile int32_t restarts;    /* number of restarts */
    volatile int32_t attempts;    /* futex: checkpoint attempts finished (written or failed) */
    volatile int32_t failures;    /* checkpoint attempts that failed */
    /* CRAC_UPPER_* bits: what this upper runtime understands. Was padding, so an older one (an
     * old image's) has none. */
    int32_t features;
    int64_t pthread_tid_offset; /* -1 unknown */
    int64_t rseq_offset;        /* upper glibc's __rseq_offset; rseq_size 0: not used */
    uint32_t rseq_size;
    uint32_t rseq_sig;
    uint64_t suspend_handler; /* upper code the lower installs for the suspend signal */
    uint64_t restorer; /* upper sa_restorer, so no signal frame returns into the lower half */
    uint64_t auxv;     /* the upper half's auxv, for NT_AUXV */
    uint64_t api_slot; /* address of the upper runtime's pointer to the lower-half API */
    uint64_t hooks;    /* struct crac_hook_ctl * (crac_hooks.h) in upper memory, or 0 */
    /* struct crac_pending_buf * the manager lends for a checkpoint's suspension, or 0: each
     * thread notes its own queued thread-directed signals there (upperhalf/suspend_pending.c).
     * Was padding, so an older upper runtime (an old image's) leaves it alone. */
    uint64_t pending_buf;
    uint64_t device_ranges;   /* struct crac_dev_ranges *: live device and managed allocations */
    volatile int32_t in_hook; /* a hook runs on a lower thread: its crossings skip the gate */
    int32_t pad3;
    /* Live device objects, counted by the shim's checkpoint hook (for the manifest). */
    int32_t dev_streams, dev_events, dev_modules, dev_pinned;
    volatile int32_t lower_epoch; /* bumped at each restart: cached lower TCBs are stale */
    /* dmtcp_disable_ckpt() sections (docs/DMTCP_API.md): a checkpoint sets `holding`, so no new
     * section opens, and waits until `sections` (futex) is 0 before it suspends anything. */
    volatile int32_t sections;
    volatile int32_t holding; /* futex: 1 from then until the threads are released */
    int32_t pad2;
    struct crac_thread_rec threads[CRAC_MAX_THREADS];
};

#endif
