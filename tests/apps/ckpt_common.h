/* ckpt_common.h — helpers the ckpt_*.c and share_*.c test programs share: failing with a message,
   arguments, the `step N` lines (tagged too), the checksum, sleeps, reaping a child, a monotonic
   clock and a watchdog. Define PROG and USAGE before including. */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG ": FAIL: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static inline long arg(int argc, char **argv, int i, long def, long lo, long hi)
{
    if (argc <= i)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        exit(2);
    }
    return v;
}

static inline void step_line(long k)
{
    printf("step %ld\n", k);
    if (fflush(stdout) != 0)
        fail("fflush(stdout): %s", strerror(errno));
}

/* `TAG step K`, flushed: the processes of a tree tell their lines apart by TAG. */
static inline void tag_step_line(const char *tag, long k)
{
    printf("%s step %ld\n", tag, k);
    if (fflush(stdout) != 0)
        fail("fflush(stdout)");
}

/* `TAG DONE checksum=H steps=STEPS`; returns main's exit status (1 where stdout cannot be
   flushed). */
static inline int tag_done_line(const char *tag, uint64_t h, long steps)
{
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* ckpt_counter's checksum: FNV-1a over V's 8 bytes, low byte first, from CKPT_FNV_BASIS. The
   DONE lines print it, so a restart that repeats or skips a step shows there too. */
#define CKPT_FNV_BASIS 0xcbf29ce484222325ULL
static inline uint64_t ckpt_fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* MS milliseconds, the rest slept again after a signal handler interrupts it. */
static inline void ckpt_sleep_ms(long ms)
{
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}

/* The test's end gate (tests/job_harness.py gated_env): with TEST_END_GATE set, waits until that
   file exists before the program ends, so that no checkpoint the test asks for can race the end
   of the program. A program run natively (no variable) does not wait. */
static inline void end_gate(void)
{
    const char *gate = getenv("TEST_END_GATE");
    if (!gate || !*gate)
        return;
    for (long waited = 0; access(gate, F_OK) != 0; waited += 10) {
        if (waited > 30L * 60 * 1000) /* a test that died without opening it */
            fail("the end gate %s was never opened", gate);
        ckpt_sleep_ms(10);
    }
}

/* Waits for child KID (through EINTR) and fails, naming it WHO, unless it exited with status
   WANT. */
static inline void reap_status(pid_t kid, const char *who, int want)
{
    int st;
    pid_t got;
    while ((got = waitpid(kid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (got != kid || !WIFEXITED(st) || WEXITSTATUS(st) != want)
        fail("%s: waitpid %d, status %#x", who, (int)got, got > 0 ? st : 0);
}

static inline void reap_ok(pid_t kid, const char *who) { reap_status(kid, who, 0); }

static inline double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64: the test programs' reproducible random numbers (STATE must not be 0). */
static inline uint64_t ckpt_xorshift(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* The 64-bit word W of page PG of a test region whose contents are named by ID and VER (a new
   mapping, a rewrite), and the pages FROM..PAGES of P filled with them: any page that moved,
   was lost or came from elsewhere reads other words. SALT tells the programs apart. */
static inline uint64_t ckpt_page_word(uint32_t id, uint32_t ver, size_t pg, size_t w, uint64_t salt)
{
    return ((uint64_t)id << 40) ^ ((uint64_t)ver << 24) ^ (pg << 10) ^ w ^ salt;
}

static inline void ckpt_fill_pages(uint64_t *p, size_t from, size_t pages, size_t page_size,
                                   uint32_t id, uint32_t ver, uint64_t salt)
{
    size_t wpp = page_size / 8;
    for (size_t pg = from; pg < pages; pg++)
        for (size_t w = 0; w < wpp; w++)
            p[pg * wpp + w] = ckpt_page_word(id, ver, pg, w, salt);
}

/* Counts running time only: a new pid (a restart outside crac's id keeping) starts it afresh, so
   time an image spent on disk never counts as a hang. */
struct watchdog {
    pid_t pid;
    double t0;
};
static inline void wd_start(struct watchdog *w)
{
    w->pid = getpid();
    w->t0 = now_mono();
}
static inline int wd_expired(struct watchdog *w, double limit)
{
    if (getpid() != w->pid)
        wd_start(w); /* restarted: only running time counts */
    return now_mono() - w->t0 > limit;
}

#endif
