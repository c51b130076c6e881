/* crossing: exercises the upper runtime's crossing self-tests (fs switch to a per-thread lower TCB);
   "negative" mode crosses WITHOUT the fs switch and reports how much of the upper TLS got corrupted. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "crossing.c checks x86-64 TLS variant II"
#endif

#define W_START 0x200000000000UL
#define W_END 0x300000000000UL
#define NTHREADS 8
#define NCALLS 10000
#define SNAP_MAX (64 * 1024)

typedef void *(*cross_fn)(int switch_fs, unsigned long value);
typedef int (*libc_fn)(void);

static cross_fn cross;
static libc_fn lower_libc;
static __thread unsigned long canary = 0xc0ffee0ddba11UL;

static int in_w(uintptr_t a) { return a >= W_START && a < W_END; }

static uintptr_t thread_pointer(void)
{
    uintptr_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    return tp;
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "crossing: " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

/* One checked crossing from the calling thread; returns the lower TLS address it reported. */
static uintptr_t checked_cross(unsigned long value, const char *who)
{
    uintptr_t tp = thread_pointer();
    unsigned long c = canary;
    errno = 4321;
    uintptr_t a = (uintptr_t)cross(1, value);
    if (thread_pointer() != tp)
        FAIL("%s: fs not restored after crossing (0x%lx -> 0x%lx)", who, (unsigned long)tp,
             (unsigned long)thread_pointer());
    if (errno != 4321)
        FAIL("%s: upper errno changed by crossing to %d", who, errno);
    if (canary != c)
        FAIL("%s: upper __thread canary changed by crossing", who);
    if (in_w(a))
        FAIL("%s: lower TLS variable at 0x%lx lies inside W", who, (unsigned long)a);
    if (a == 0)
        FAIL("%s: crossing returned NULL", who);
    if (*(volatile unsigned long *)a != value)
        FAIL("%s: lower TLS variable holds 0x%lx, expected 0x%lx", who,
             *(volatile unsigned long *)a, value);
    return a;
}

static void checked_lower_libc(const char *who)
{
    errno = 1234;
    unsigned long c = canary;
    int r = lower_libc();
    if (r != 0)
        FAIL("%s: crac_selftest_lower_libc() returned %d", who, r);
    if (errno != 1234)
        FAIL("%s: upper errno changed by the lower libc to %d", who, errno);
    if (canary != c)
        FAIL("%s: upper __thread canary changed by the lower libc", who);
}

static void *second_thread(void *arg)
{
    *(uintptr_t *)arg = checked_cross(0x2222222222UL, "second thread");
    return NULL;
}

static pthread_barrier_t bar;
static uintptr_t thread_addr[NTHREADS];

static void *stress_thread(void *arg)
{
    long id = (long)arg;
    canary = 0xabc000UL + (unsigned long)id;
    uintptr_t first = 0;
    for (unsigned long i = 0; i < NCALLS; i++) {
        unsigned long v = ((unsigned long)id << 40) | i;
        uintptr_t a = checked_cross(v, "stress thread");
        if (i == 0) {
            first = a;
            thread_addr[id] = a;
            pthread_barrier_wait(&bar); /* all threads alive with their lower TLS */
        } else if (a != first) {
            FAIL("stress thread %ld: lower TLS address changed 0x%lx -> 0x%lx", id,
                 (unsigned long)first, (unsigned long)a);
        }
        checked_lower_libc("stress thread");
        if (canary != 0xabc000UL + (unsigned long)id)
            FAIL("stress thread %ld: canary corrupted", id);
    }
    return NULL;
}

static int normal_mode(void)
{
    uintptr_t a1 = checked_cross(0x1111111111UL, "main thread");
    uintptr_t a2 = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, second_thread, &a2) != 0)
        FAIL("pthread_create failed");
    pthread_join(t, NULL);
    if (a2 == a1)
        FAIL("two threads share one lower TLS variable at 0x%lx", (unsigned long)a1);
    if (*(volatile unsigned long *)a1 != 0x1111111111UL)
        FAIL("main thread's lower TLS variable was overwritten by another thread");
    if (checked_cross(0x3333UL, "main thread again") != a1)
        FAIL("main thread's lower TLS variable moved");
    checked_lower_libc("main thread");

    pthread_t ts[NTHREADS];
    pthread_barrier_init(&bar, NULL, NTHREADS);
    for (long i = 0; i < NTHREADS; i++)
        if (pthread_create(&ts[i], NULL, stress_thread, (void *)i) != 0)
            FAIL("pthread_create failed");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(ts[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        for (int j = i + 1; j < NTHREADS; j++)
            if (thread_addr[i] == thread_addr[j])
                FAIL("threads %d and %d share a lower TLS address", i, j);
    printf("crossing ok threads=%d calls=%d\n", NTHREADS, NCALLS);
    return 0;
}

/* ---- negative control: no TLS, no stdio after the bad crossing ---- */

static unsigned char snap0[SNAP_MAX], snap1[SNAP_MAX], snap2[SNAP_MAX];

static void raw_write(const char *s, size_t n)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(1L), "D"(1L), "S"(s), "d"(n)
                     : "rcx", "r11", "memory");
    (void)ret;
}

static char out[1024];
static size_t outlen;

static void put_s(const char *s)
{
    while (*s && outlen < sizeof out)
        out[outlen++] = *s++;
}

static void put_u(unsigned long v, int base)
{
    char tmp[32];
    int n = 0;
    if (base == 16)
        put_s("0x");
    do {
        tmp[n++] = "0123456789abcdef"[v % (unsigned)base];
        v /= (unsigned)base;
    } while (v);
    while (n && outlen < sizeof out)
        out[outlen++] = tmp[--n];
}

/* Lowest address such that [lo, tp) is readable and contiguous, but at most SNAP_MAX below tp. */
static uintptr_t readable_below(uintptr_t tp)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        FAIL("cannot open /proc/self/maps");
    uintptr_t lo = tp;
    char line[4096];
    struct {
        uintptr_t a, b;
    } r[4096];
    int n = 0;
    while (n < 4096 && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char perm[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3 && perm[0] == 'r') {
            r[n].a = a;
            r[n].b = b;
            n++;
        }
    }
    fclose(f);
    int changed = 1;
    while (changed && tp - lo < SNAP_MAX) {
        changed = 0;
        for (int i = 0; i < n; i++)
            if (r[i].a < lo && r[i].b >= lo) {
                lo = r[i].a;
                changed = 1;
            }
    }
    if (tp - lo > SNAP_MAX)
        lo = tp - SNAP_MAX;
    return lo;
}

static int negative_mode(void)
{
    const unsigned long value = 0x5a5a5a5a5a5a5a5aUL;
    /* warm up the proper path so first-call initialisation is not counted */
    checked_cross(1, "warm-up");
    fflush(stdout);
    uintptr_t tp = thread_pointer();
    uintptr_t lo = readable_below(tp);
    size_t len = tp - lo;
    unsigned long canary_before = canary;

    /* control: a proper crossing must leave the upper TLS alone */
    memcpy(snap0, (void *)lo, len);
    (void)cross(1, value);
    memcpy(snap1, (void *)lo, len);

    /* the bad crossing: no fs switch */
    uintptr_t a = (uintptr_t)cross(0, value);
    memcpy(snap2, (void *)lo, len);

    size_t corrupted = 0, control = 0, control_at_addr = 0;
    for (size_t i = 0; i < len; i++) {
        corrupted += snap1[i] != snap2[i];
        control += snap0[i] != snap1[i];
        if (lo + i >= a && lo + i < a + 8)
            control_at_addr += snap0[i] != snap1[i];
    }
    int inside = in_w(a);
    int holds = inside && *(volatile unsigned long *)a == value;

    put_s("negative: thread pointer ");
    put_u(tp, 16);
    put_s(", snapshot ");
    put_u(len, 10);
    put_s(" bytes below it\nnegative: address ");
    put_u(a, 16);
    put_s(inside ? " inside W\n" : " outside W\n");
    put_s(holds ? "negative: value written there: yes\n" : "negative: value written there: no\n");
    put_s(canary == canary_before ? "negative: canary intact\n" : "negative: canary CHANGED\n");
    put_s("CONTROL ");
    put_u(control, 10);
    put_s(" bytes\nCONTROL_AT_ADDR ");
    put_u(control_at_addr, 10);
    put_s(" bytes\nCORRUPTED ");
    put_u(corrupted, 10);
    put_s(" bytes\n");
    raw_write(out, outlen);
    _exit(0);
}

int main(int argc, char **argv)
{
    cross = (cross_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "crac_selftest_cross");
    lower_libc = (libc_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "crac_selftest_lower_libc");
    if (!cross || !lower_libc) {
        printf("no crac runtime\n");
        return 77;
    }
    if (argc > 1 && strcmp(argv[1], "negative") == 0)
        return negative_mode();
    return normal_mode();
}
