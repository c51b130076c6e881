/* restart_threads.c — brings the upper threads back: each is cloned onto its own stack with its
 * own TLS and tid field, re-registers its per-thread kernel state and jumps to where it parked;
 * the loader's main thread becomes the program's main thread. A lower thread releases them all
 * once every one is back. The code after the fs switch is TLS-free. */
#include "restart.h"
#include "tree.h"

#include "ckpt.h"
#include "coord_client.h"
#include "confine_seccomp.h"
#include "crac_rawsys.h"
#include "upper_hooks.h"

#include "lower_threads.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/auxv.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_SET_FS 0x1002
#define RSEQ_FLAG_UNREGISTER 1

#include "upper_alloc.h"

static struct crac_registry *registry;
static int32_t tid_map_old[CRAC_MAX_THREADS], tid_map_new[CRAC_MAX_THREADS];
static int tid_map_n;
static int expected_threads;
static uint64_t hook_fs; /* a parked thread's TCB for the restart hook */

static int32_t map_tid(int32_t old)
{
    for (int i = 0; i < tid_map_n; i++)
        if (tid_map_old[i] == old)
            return tid_map_new[i];
    return 0;
}

/* Restore registers saved by crac_park_save and return 1 from it. */
__attribute__((noreturn)) void crac_jump_to_park(const struct crac_jmp *j);
__asm__(".text\n"
        ".globl crac_jump_to_park\n"
        ".type crac_jump_to_park, @function\n"
        "crac_jump_to_park:\n"
        "    mov 0(%rdi), %rbx\n"
        "    mov 8(%rdi), %rbp\n"
        "    mov 16(%rdi), %r12\n"
        "    mov 24(%rdi), %r13\n"
        "    mov 32(%rdi), %r14\n"
        "    mov 40(%rdi), %r15\n"
        "    mov 48(%rdi), %rsp\n"
        "    mov $1, %eax\n"
        "    jmp *56(%rdi)\n");

/* TLS-free: runs with the thread's upper fs already live. */
__attribute__((noreturn)) void restored_thread_resume(struct crac_thread_rec *rec)
{
    struct crac_registry *r = registry;
    if (r->rseq_size)
        raw_syscall4(SYS_rseq, rec->fsbase + (uint64_t)r->rseq_offset, r->rseq_size, 0,
                     r->rseq_sig);
    if (rec->robust_head)
        raw_syscall2(SYS_set_robust_list, rec->robust_head, rec->robust_len);
    if (!(rec->altstack_flags & SS_DISABLE)) {
        stack_t ss = {(void *)rec->altstack_sp, 0, rec->altstack_size};
        raw_syscall2(SYS_sigaltstack, &ss, 0);
    }
    seccomp_thread_resume(rec->tid); /* last: its filters may forbid what comes before */
    crac_jump_to_park(&rec->park);
}

/* clone(flags, stack, ptid, ctid, tls); the child calls restored_thread_resume(rec). */
long crac_clone_restored(unsigned long flags, void *stack, int *ptid, int *ctid, unsigned long tls,
                         struct crac_thread_rec *rec);
__asm__(".text\n"
        ".globl crac_clone_restored\n"
        ".type crac_clone_restored, @function\n"
        "crac_clone_restored:\n"
        "    and $-16, %rsi\n"
        "    sub $16, %rsi\n"
        "    mov %r9, 0(%rsi)\n"
        "    mov %rcx, %r10\n"
        "    mov $56, %eax\n"
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jnz 1f\n"
        "    mov 0(%rsp), %rdi\n"
        "    xor %ebp, %ebp\n"
        "    call restored_thread_resume\n"
        "    hlt\n"
        "1:  ret\n");

/* Once every restored thread stands at its park point: one more attempt finished (a
 * crac_checkpoint() caller returns CRAC_AFTER_RESTART), then release them. */
static void *releaser(void *arg)
{
    (void)arg;
    lower_threads_register(gettid());
    struct crac_registry *r = registry;
    for (int32_t parked;
         (parked = __atomic_load_n(&r->parked, __ATOMIC_ACQUIRE)) < expected_threads;) {
        struct timespec t = {0, 50 * 1000000L};
        raw_futex_wait(&r->parked, parked, &t);
    }
    /* The upper runtime brings the device objects back (streams, events, modules) on the new
     * backend before any thread runs, with the main thread's TCB (it is parked). */
    if (upper_hook_run(r, CRAC_EV_RESTART, hook_fs) != 0) {
        fprintf(stderr, "crac: error: the device state could not be restored\n");
        raw_syscall1(SYS_exit_group, 2);
    }
    __atomic_add_fetch(&r->attempts, 1, __ATOMIC_SEQ_CST);
    raw_futex_wake(&r->attempts, RAW_WAKE_ALL);
    /* In a job or tree, the others are back too before any thread runs: one that goes on at
     * once could connect to a listener another process has yet to make (Python's Manager). */
    coord_restored();
    ckpt_release_all();
    ckpt_set_ready(); /* a checkpoint asked for during the restart is taken now */
    lower_threads_unregister(gettid());
    return NULL;
}

/* The program keeps the ids of its first launch: record how they map to this process's, and
 * move the per-thread signal-mask records from the old kernel tids to the new ones. */
static void ids_remap(const struct restart_image *img)
{
    struct crac_ctrl *c = crac_ctrl();
    uint64_t bits[CRAC_MAX_THREADS];
    for (int i = 0; i < tid_map_n; i++)
        bits[i] = vmask_get(c, img->threads[i].real_tid);
    memset(c->vmask, 0, sizeof(c->vmask));
    c->pid = getpid();
    c->vpid = (int32_t)img->proc.pid;
    c->n_vids = 0;
    for (int i = 0; i < tid_map_n && c->n_vids < CRAC_MAX_VIDS; i++) {
        vmask_set(c, tid_map_new[i], bits[i]);
        if (tid_map_old[i] != tid_map_new[i])
            c->vids[c->n_vids++] = (struct crac_vid){tid_map_old[i], tid_map_new[i]};
    }
    tree_restart_remap(); /* the children and parent of a restarted tree */
}

/* Everything the main thread does after leaving lower TLS behind. */
__attribute__((noreturn)) static void become_main(struct crac_thread_rec *rec, int fsgsbase)
{
    struct crac_registry *r = registry;
    /* glibc's tid field keeps the id the program knows (mutex owners hold it); the kernel
     * clears it at exit all the same. */
    if (r->pthread_tid_offset >= 0)
        raw_syscall1(SYS_set_tid_address, rec->fsbase + (uint64_t)r->pthread_tid_offset);
    if (fsgsbase)
        __asm__ volatile("wrfsbase %0" : : "r"(rec->fsbase) : "memory");
    else
        raw_syscall2(SYS_arch_prctl, ARCH_SET_FS, rec->fsbase);
    restored_thread_resume(rec);
}

void restart_threads(struct crac_registry *r, struct restart_image *img,
                     const struct state_restore *st)
{
    registry = r;
    expected_threads = img->n_threads;
    struct crac_thread_rec *main_rec = NULL;
    unsigned long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                          CLONE_SYSVSEM | CLONE_SETTLS;
    pthread_t t;
    if (pthread_create(&t, NULL, releaser, NULL) != 0)
        die("cannot start the restart releaser thread");
    pthread_detach(t);
    for (int i = 0; i < img->n_threads; i++) {
        struct crac_thread_rec *rec = (struct crac_thread_rec *)img->threads[i].rec;
        char why[256];
        if (restart_check_thread_rec(img, rec, img->threads[i].tid, why, sizeof(why)) != 0)
            die("%s", why);
        tid_map_old[tid_map_n] = img->threads[i].tid;
        if (!hook_fs || img->threads[i].is_main)
            hook_fs = rec->fsbase;
        if (img->threads[i].is_main) {
            main_rec = rec;
            tid_map_new[tid_map_n++] = getpid();
            continue;
        }
        /* glibc's tid field keeps the id the program knows; the kernel clears it when the
         * thread exits, so pthread_join keeps working, and the trap handler translates the
         * ids pthread_kill and raise pass (ids_remap below). */
        int *tid_field = NULL;
        unsigned long tid_flags = 0;
        if (r->pthread_tid_offset >= 0) {
            tid_field = (int *)(rec->fsbase + (uint64_t)r->pthread_tid_offset);
            tid_flags = CLONE_CHILD_CLEARTID;
        }
        /* The child starts on its own stack, below the frame it parked in. */
        void *stack = (void *)(rec->park.rsp - 1024);
        long tid =
            crac_clone_restored(flags | tid_flags, stack, tid_field, tid_field, rec->fsbase, rec);
        if (tid < 0)
            die("cannot recreate thread %d: clone failed (%ld)", img->threads[i].tid, tid);
        tid_map_new[tid_map_n++] = (int32_t)tid;
    }
    ids_remap(img);
    /* The kinds that need the new tids: CPU clocks, timers, pending signals, limits
     * (loader/state/kinds.c). */
    struct state_restore with_tids = *st;
    with_tids.map_tid = map_tid;
    if (state_restore_phase(STATE_WITH_THREADS, &with_tids) != 0)
        die("%s", with_tids.err);
    /* Another crac process's signal the image had recorded but not yet given to the program's
     * handler: its carrier was in a thread's queue, which is not restored (ckpt_sig_pass.c). */
    ckpt_peer_sig_carry();
    if (!main_rec) {
        /* The program's main thread had exited: this one leaves too, the others go on. */
        raw_syscall1(SYS_exit, 0);
    }
    int fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0;
    release_lower_rseq();
    become_main(main_rec, fsgsbase);
}
