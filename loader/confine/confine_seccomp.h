/* confine_seccomp.h — the program's own seccomp filters and per-thread prctl settings as crac
 * records them (confine_seccomp.c), saved and re-installed by loader/state/seccomp_state.c. */
#ifndef CRAC_CONFINE_SECCOMP_H
#define CRAC_CONFINE_SECCOMP_H

#include <stdint.h>

#define SECCOMP_MAX_FILTERS 64 /* a thread's set of filters is a 64-bit mask in the note */
#define SECCOMP_MAX_INSNS 4096 /* BPF_MAXINSNS */
#define SECCOMP_MAX_THREADS 4096

struct seccomp_filter_entry {
    uint32_t flags;    /* SECCOMP_FILTER_FLAG_* as the program gave them */
    uint32_t n_insns;  /* struct sock_filter at insns */
    int32_t tid;       /* the installing thread, as the program knows it */
    const void *insns; /* lower memory (a raw mmap in the handler, malloc after a restart) */
};

struct seccomp_thread_entry {
    int32_t tid;       /* as the program knows it */
    int32_t pdeathsig; /* PR_SET_PDEATHSIG */
};

/* What the program set, in order; guarded by seccomp_table.lock. */
struct seccomp_table {
    volatile int32_t lock;
    int n_filters;
    int lost; /* filters beyond SECCOMP_MAX_FILTERS: installed, not recorded */
    struct seccomp_filter_entry filters[SECCOMP_MAX_FILTERS];
    int n_threads;
    struct seccomp_thread_entry threads[SECCOMP_MAX_THREADS];
    int base; /* crac's own filters on a thread (Seccomp_filters in /proc) when the program starts */
};
extern struct seccomp_table seccomp_table;

/* Seccomp_filters of /proc/self/task/TID/status (TID 0: the calling thread), -1 if unknown.
 * Not TLS-free (seccomp_state.c). */
int seccomp_filters_of(int32_t real_tid);

/* The trapped calls from W (confine_trap.c dispatches them). TLS-free; -errno on failure. */
long emu_seccomp(long op, long flags, long uargs);
long emu_prctl(long option, long a2, long a3, long a4, long a5);

/* Restart: what each restored thread sets itself before it resumes (seccomp_state.c fills it).
 * seccomp_thread_resume is TLS-free: it runs with the thread's upper fs live. */
struct seccomp_resume_plan {
    int32_t tid;       /* as the program knows it */
    int32_t pdeathsig; /* re-armed: the parent is the restarter's process now */
    uint64_t filters;  /* bit i: seccomp_table.filters[i], installed by the thread itself */
    char name[16];     /* PR_SET_NAME: the thread's comm */
};
extern struct seccomp_resume_plan *seccomp_plans;
extern int seccomp_n_plans;
extern volatile int32_t seccomp_gate; /* 0: restored threads wait; 1: go (futex word) */
extern int seccomp_gate_used;         /* the image has a SECCOMP note: threads wait at the gate */
void seccomp_thread_resume(int32_t tid);

#endif
