/* image_splicer.c — the direct writer's splicer thread: started with a raw clone in the forked
 * writer, where pthread_create can wait forever on a lock another thread of the parent held at
 * the fork. TLS-free: raw system calls only; it shares the writer thread's fs. */
#include "image_splicer.h"

#include "crac_rawsys.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>

void splicer_wake(volatile int32_t *word) { raw_futex_wake_shared(word, RAW_WAKE_ALL); }

void splicer_kick(struct splicer *s)
{
    __atomic_add_fetch(&s->kick, 1, __ATOMIC_RELEASE);
    splicer_wake(&s->kick);
}

void splicer_wait(volatile int32_t *word, int32_t seen)
{
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == seen)
        raw_futex_wait_shared(word, seen);
}

int splicer_move(int pipe_r, int fd, uint64_t off, uint64_t len, volatile int32_t *failed)
{
    static char sink[65536]; /* only ever read into after a failure, by one thread */
    while (len) {
        long n;
        if (!*failed) {
            int64_t at = (int64_t)off;
            n = raw_syscall6(SYS_splice, pipe_r, 0, fd, (long)&at, (long)len, SPLICE_F_MOVE);
            if (n == 0)
                n = -28; /* ENOSPC: an O_DIRECT write that wrote nothing */
        } else {
            n = raw_syscall3(SYS_read, pipe_r, sink, len < sizeof(sink) ? len : sizeof(sink));
        }
        if (n == -4) /* EINTR */
            continue;
        if (n <= 0) {
            if (*failed)
                return -1; /* the pipe itself broke: nothing more comes out of it */
            *failed = n < 0 ? (int32_t)-n : 5 /* EIO */;
            continue;
        }
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

static void splicer_main(struct splicer *s)
{
    for (;;) {
        int32_t kick = __atomic_load_n(&s->kick, __ATOMIC_ACQUIRE); /* before what it guards */
        int32_t head = __atomic_load_n(&s->head, __ATOMIC_ACQUIRE);
        int32_t tail = __atomic_load_n(&s->tail, __ATOMIC_RELAXED);
        if (tail == head) {
            if (__atomic_load_n(&s->ending, __ATOMIC_ACQUIRE))
                return;
            splicer_wait(&s->kick, kick);
            continue;
        }
        struct splicer_run r = s->queue[(uint32_t)tail % SPLICER_QUEUE];
        int32_t failed = __atomic_load_n(&s->failed, __ATOMIC_ACQUIRE);
        int broken = splicer_move(s->pipe_r[(uint32_t)tail % 2], s->fd, r.off, r.len, &failed);
        if (failed && !__atomic_load_n(&s->failed, __ATOMIC_ACQUIRE))
            __atomic_store_n(&s->failed, failed, __ATOMIC_RELEASE);
        __atomic_store_n(&s->tail, tail + 1, __ATOMIC_RELEASE);
        splicer_wake(&s->tail);
        if (broken)
            return;
    }
}

/* clone(2) with the new thread calling FN(ARG) on STACK_TOP, then exiting. */
static long clone_call(unsigned long flags, void **stack_top, volatile int32_t *tid,
                       void (*fn)(struct splicer *), struct splicer *arg)
{
    *--stack_top = arg;
    *--stack_top = (void *)fn;
    long ret;
    register long r10 __asm__("r10") = (long)tid; /* child_tid: cleared at its exit */
    register long r8 __asm__("r8") = 0;           /* tls: unchanged */
    __asm__ volatile("syscall\n\t"
                     "test %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "pop %%rax\n\t"
                     "pop %%rdi\n\t"
                     "and $-16, %%rsp\n\t"
                     "call *%%rax\n\t"
                     "mov $60, %%eax\n\t" /* exit: this thread only */
                     "xor %%edi, %%edi\n\t"
                     "syscall\n\t"
                     "hlt\n\t"
                     "1:"
                     : "=a"(ret)
                     : "0"(SYS_clone), "D"(flags), "S"(stack_top), "d"(tid), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
}

int splicer_start(struct splicer *s, void *stack, unsigned long size)
{
    unsigned long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                          CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
    void **top = (void **)(((unsigned long)stack + size) & ~15UL);
    long r = clone_call(flags, top, &s->tid, splicer_main, s);
    return r < 0 ? (int)r : 0;
}

void splicer_join(struct splicer *s)
{
    int32_t tid;
    while ((tid = __atomic_load_n(&s->tid, __ATOMIC_ACQUIRE)) != 0)
        raw_futex_wait_shared(&s->tid, tid); /* the kernel's wake at its exit is shared */
}
