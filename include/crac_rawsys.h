/* crac_rawsys.h — raw x86-64 system calls and a futex lock, for code that must not touch TLS.
 * TLS-free: no errno, no libc; usable from the SIGSYS handler while the upper half's fs is live. */
#ifndef CRAC_RAWSYS_H
#define CRAC_RAWSYS_H

#include <stddef.h>
#include <stdint.h>

static inline long raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    long ret;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

#define raw_syscall0(nr) raw_syscall6((nr), 0, 0, 0, 0, 0, 0)
#define raw_syscall1(nr, a) raw_syscall6((nr), (long)(a), 0, 0, 0, 0, 0)
#define raw_syscall2(nr, a, b) raw_syscall6((nr), (long)(a), (long)(b), 0, 0, 0, 0)
#define raw_syscall3(nr, a, b, c) raw_syscall6((nr), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define raw_syscall4(nr, a, b, c, d)                                                               \
    raw_syscall6((nr), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

static inline int raw_is_err(long r) { return (unsigned long)r > (unsigned long)-4096L; }

/* Futex waits and wakes: private (the loader's threads share one address space) unless
 * `_shared`, for a word the kernel wakes without the private flag (CLONE_CHILD_CLEARTID) or that
 * code outside the loader waits on. A wait returns at once if *WORD is no longer SEEN, and may
 * return early (a signal): callers wait in a loop that looks at the word again. */
#define RAW_WAKE_ALL 0x7fffffff
struct timespec;

static inline long raw_futex(volatile int32_t *word, int op, int32_t val,
                             const struct timespec *timeout)
{
    return raw_syscall6(202 /* futex */, (long)word, op, val, (long)timeout, 0, 0);
}

static inline long raw_futex_wait(volatile int32_t *word, int32_t seen,
                                  const struct timespec *timeout)
{
    return raw_futex(word, 128 /* FUTEX_WAIT_PRIVATE */, seen, timeout);
}

static inline long raw_futex_wake(volatile int32_t *word, int32_t n)
{
    return raw_futex(word, 129 /* FUTEX_WAKE_PRIVATE */, n, NULL);
}

static inline long raw_futex_wait_shared(volatile int32_t *word, int32_t seen)
{
    return raw_futex(word, 0 /* FUTEX_WAIT */, seen, NULL);
}

static inline long raw_futex_wake_shared(volatile int32_t *word, int32_t n)
{
    return raw_futex(word, 1 /* FUTEX_WAKE */, n, NULL);
}

/* A futex mutex (0 free, 1 locked, 2 contended). Held only around bookkeeping, never across a
 * blocking syscall: a spinlock was measured 20x slower with 8 threads. */
static inline void raw_lock(volatile int32_t *word)
{
    int32_t c = __sync_val_compare_and_swap(word, 0, 1);
    if (c == 0)
        return;
    if (c != 2)
        c = __atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE);
    while (c != 0) {
        raw_futex_wait_shared(word, 2);
        c = __atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE);
    }
}

static inline void raw_unlock(volatile int32_t *word)
{
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) != 1)
        raw_futex_wake_shared(word, 1);
}

/* rep movsb rather than a loop: GCC would turn a loop into a call to libc's memcpy. */
static inline void raw_memcpy(void *dst, const void *src, unsigned long n)
{
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

/* The decimal digits of v >= 0 at buf, NUL-terminated; returns how many. */
static inline int raw_put_uint(char *buf, int32_t v)
{
    char digits[12];
    int n = 0, k = 0;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (n)
        buf[k++] = digits[--n];
    buf[k] = '\0';
    return k;
}

/* "/proc/<pid><tail>" into buf, which holds 24 bytes more than tail. */
static inline void raw_proc_path(char *buf, int32_t pid, const char *tail)
{
    int k = 0;
    for (const char *h = "/proc/"; *h; h++)
        buf[k++] = *h;
    k += raw_put_uint(buf + k, pid);
    while (*tail)
        buf[k++] = *tail++;
    buf[k] = '\0';
}

/* The same for ranges that may overlap: backwards (the direction flag set) when dst is above. */
static inline void raw_memmove(void *dst, const void *src, unsigned long n)
{
    if ((char *)dst <= (const char *)src || (char *)dst >= (const char *)src + n) {
        raw_memcpy(dst, src, n);
        return;
    }
    char *d = (char *)dst + n - 1;
    const char *s = (const char *)src + n - 1;
    __asm__ volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

#endif
