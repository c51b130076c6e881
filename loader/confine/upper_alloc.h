/* upper_alloc.h — the control block inside W and the first-fit allocator of upper-half addresses.
 * TLS-free: called from the SIGSYS handler with the upper fs live. State lives in W (saved). */
#ifndef CRAC_UPPER_ALLOC_H
#define CRAC_UPPER_ALLOC_H

#include <signal.h>
#include <stdint.h>

struct crac_range {
    uint64_t start, end;
};

/* struct sigaction as the kernel sees it (rt_sigaction with sigsetsize 8). */
struct crac_ksigaction {
    uint64_t handler;
    uint64_t flags;
    uint64_t restorer;
    uint64_t mask;
};

#define CRAC_CTRL_MAGIC 0x4352414343544c31UL /* "CRACCTL1" */
#define CRAC_MAX_EXTRAS 1024
#define CRAC_MAX_SHM 64
#define CRAC_MAX_VMASK 4096

/* After a restart, the ids the program knows (virtual: those of the first launch) and the
 * kernel's (real) differ; the trap handler translates between them (docs/DECISIONS.md). */
#define CRAC_MAX_VIDS 4096
struct crac_vid {
    int32_t virt, real;
};

/* A thread's CPU time at the last checkpoint and what its clock reads get added since the
 * restart, by the tid the program knows. */
#define CRAC_MAX_TCPU 4096
struct crac_tcpu {
    int32_t tid;
    int32_t pad;
    int64_t ckpt_ns, offset_ns;
};

/* A range of the program's memory with fork advice (loader/confine/fork_advice.c): the forked
 * checkpoint writer would not see a MADV_DONTFORK range and would see a MADV_WIPEONFORK one as
 * zeros, and a restart's fresh mappings would have neither. Sorted, disjoint, bits never 0. */
#define CRAC_MAX_FORK_ADVICE 1024
#define CRAC_ADVICE_DONTFORK 1u
#define CRAC_ADVICE_WIPEONFORK 2u
#define CRAC_ADVICE_ALL (CRAC_ADVICE_DONTFORK | CRAC_ADVICE_WIPEONFORK)
struct crac_advice {
    uint64_t start, end;
    uint32_t bits;
    uint32_t pad;
};

/* The checkpoint signal's number another crac process's program sent this one, not yet given to
 * its handler (docs/DECISIONS.md "A program's checkpoint-numbered signal to another process"). One,
 * as the kernel keeps one instance of a classic signal pending. In W so that an image taken before
 * the handler ran has it, and the restart passes it on again. */
enum { CRAC_PEER_FREE, CRAC_PEER_FILLING, CRAC_PEER_READY, CRAC_PEER_TAKING };
struct crac_peer_sig {
    volatile int32_t state;
    int32_t code; /* SI_USER, SI_TKILL or SI_QUEUE, as the sender's call would have given */
    int32_t pid;  /* the sender, as the program knows it */
    uint32_t uid;
    int32_t tid; /* SI_TKILL: the thread it was sent to, as the program knows it */
    int32_t pad;
    uint64_t value; /* SI_QUEUE: sigqueue()'s value */
};

/* Per thread: which reserved signals the program believes it has blocked (never really blocked). */
struct crac_vmask {
    int32_t tid;
    int32_t pad;
    uint64_t bits;
};

/* A boot of a host: its id (/proc/sys/kernel/random/boot_id) and the time it booted (btime in
 * /proc/stat, seconds since the epoch), to carry a process's start time to another boot. */
struct crac_boot {
    int64_t btime;
    char id[40];
};

struct crac_ctrl {
    uint64_t magic;
    volatile int32_t lock;
    int32_t pid;            /* pid of the process that owns this copy (fork children update it) */
    uint64_t brk_cur;       /* the upper half's emulated program break */
    uint64_t brk_mapped;    /* end of the read-write part of the brk range */
    uint64_t reserved_sigs; /* bit (sig-1) set: signals the program cannot take or block */
    int32_t ckpt_sig;
    /* 1 once the program was told its handler for ckpt_sig gets only some of them (kept across
     * forks and restarts: said once per job lineage, not by each restarted process's children). */
    int32_t ckpt_handler_warned;
    /* 1 once the program gave MADV_DONTDUMP (or a restart gave a region back its exclusion): a
     * checkpoint reads every mapping's VmFlags before it writes (image_core.c collect_regions). */
    int32_t dump_advised;
    uint32_t n_extras;
    struct crac_range extras[CRAC_MAX_EXTRAS]; /* MAP_FIXED mappings the program made outside W */
    uint32_t n_shm;
    struct crac_range shm[CRAC_MAX_SHM]; /* shmat attachments, for shmdt's size */
    struct crac_ksigaction virt_act[65]; /* the program's view of the reserved signals */
    /* The checkpoint signal the program sent itself while its handler was blocked (in its view):
     * delivered when it unblocks it (confine_trap.c). Bit (sig-1). */
    uint64_t virt_pending;
    struct crac_peer_sig peer_sig;
    struct crac_vmask vmask[CRAC_MAX_VMASK]; /* open addressing by real tid */
    int32_t vpid; /* the pid the program knows; 0 until a restart makes it differ */
    uint32_t n_vids;
    struct crac_vid vids[CRAC_MAX_VIDS]; /* thread and process ids that differ from the kernel's */
    int64_t cpu_offset_ns; /* added to the process CPU time the program reads: it goes on where */
    int64_t cpu_ckpt_ns;   /* it stood at the last checkpoint (the program's value then) */
    uint32_t n_tcpu;
    struct crac_tcpu tcpu[CRAC_MAX_TCPU]; /* the same for each thread's CPU clock */
    /* The parent's pid as the program knows it, while the kernel's parent is real_ppid (a
     * restarted tree: loader/ckpt/tree_fork.c); 0: getppid is the kernel's. */
    int32_t vppid, real_ppid;
    /* The process's start (/proc/PID/stat field 22, clock ticks after START_BOOT booted) as the
     * kernel gave it before any restart, recorded at its first checkpoint (0 before; exec keeps
     * it): a restarted process's stat shows it (confine_procview.c), so psutil does not take it
     * for another process with the same pid. HOST_BOOT: the boot this process runs on now. */
    int64_t start_ticks;
    struct crac_boot start_boot, host_boot;
    uint32_t n_advice;
    uint32_t advice_lost; /* 1: the table was full once; checkpoints refuse (fork_advice.h) */
    struct crac_advice advice[CRAC_MAX_FORK_ADVICE];
    uint32_t n_used;
    uint32_t cap_used;
    struct crac_range used[]; /* sorted, disjoint, coalesced ranges of W in use */
};

static inline struct crac_ctrl *crac_ctrl(void) { return (struct crac_ctrl *)0x200000000000UL; }

/* All of these expect the caller to hold ctrl->lock. */
int ualloc_mark_used(struct crac_ctrl *c, uint64_t start, uint64_t end);
void ualloc_mark_free(struct crac_ctrl *c, uint64_t start, uint64_t end);
int ualloc_is_free(const struct crac_ctrl *c, uint64_t start, uint64_t end);
/* First fit of len bytes at `align` alignment above CRAC_ALLOC_START; 0 when W is full. */
uint64_t ualloc_find_gap(const struct crac_ctrl *c, uint64_t len, uint64_t align);

int extras_contains(const struct crac_ctrl *c, uint64_t start, uint64_t end);
/* Record [start,end) as the program's (merged with the ranges it touches); -1 when the table is
 * full (the caller unmaps the mapping and fails it: an unrecorded one would not be saved). */
int extras_add(struct crac_ctrl *c, uint64_t start, uint64_t end);
void extras_remove(struct crac_ctrl *c, uint64_t start, uint64_t end);

/* The calling thread's virtual blocked bits of reserved signals (0 when never set). */
uint64_t vmask_get(struct crac_ctrl *c, int32_t tid);
void vmask_set(struct crac_ctrl *c, int32_t tid, uint64_t bits);

/* Thread and process ids as the program knows them, and back (identity when not mapped). */
int32_t vid_to_real(const struct crac_ctrl *c, int32_t virt);
int32_t vid_from_real(const struct crac_ctrl *c, int32_t real);
/* 1 once the program's ids are not all the kernel's (a restarted process or its descendants). */
static inline int ids_differ(const struct crac_ctrl *c) { return c->vpid || c->n_vids; }
/* SI's si_pid where it names a process (the sender of a kill, sigqueue, tkill or message-queue
 * signal, the child a SIGCHLD tells of; a timer's or SIGIO's fields lie there instead): turned
 * into the id the program knows, or back into this run's kernel pid. */
void siginfo_pid_to_program(const struct crac_ctrl *c, siginfo_t *si);
void siginfo_pid_to_kernel(const struct crac_ctrl *c, siginfo_t *si);

/* Create the control block (launch only; a restart maps it back with the rest of W). */
int ctrl_init(int ckpt_sig);

#endif
