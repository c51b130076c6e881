/* ckpt_vdso [STEPS=60] [signals]: two threads read the clocks without pause (clock_gettime,
   gettimeofday, time, clock_getres, sched_getcpu: the vDSO's functions) while main prints a step
   every 50 ms, so a checkpoint most likely stops a thread inside the vDSO. Each reading is checked
   (the monotonic clock never goes back in a thread, the three wall clocks agree, a thread's CPU
   clock moves), and each step checks that both threads went on reading. With `signals`, main
   also sends each reader a SIGUSR1 every step: where the program's vDSO is not the process's
   real one (/proc/self/auxv: under crac), the handler must never see its thread interrupted
   inside the real one, which a restart would not bring back. With `storm`, a third thread also
   sends the readers a SIGUSR1 every ~20 us, so one is often pending when a checkpoint stops its
   reader: the kernel then delivers both at once, the checkpoint's inside the SIGUSR1 wrapper. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define PROG "ckpt_vdso"
#define USAGE "[STEPS] [signals|storm]"
#include "ckpt_common.h"

#define WORKERS 2

static atomic_long reads[WORKERS];
static atomic_int stop;
static atomic_long handled;

/* The process's real vDSO, from the kernel's auxv (read in the handler: open and read are
   async-signal-safe); 0 if it cannot be read. */
static uint64_t real_vdso(void)
{
    int fd = open("/proc/self/auxv", O_RDONLY);
    if (fd < 0)
        return 0;
    Elf64_auxv_t a;
    uint64_t at = 0;
    while (read(fd, &a, sizeof(a)) == (ssize_t)sizeof(a) && a.a_type != AT_NULL)
        if (a.a_type == AT_SYSINFO_EHDR)
            at = a.a_un.a_val;
    close(fd);
    return at;
}

static void on_usr1(int sig, siginfo_t *info, void *ucv)
{
    (void)sig;
    (void)info;
    uint64_t ip = (uint64_t)((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP];
    uint64_t real = real_vdso();
    /* The real vDSO is two pages of code (8 KiB is generous). */
    if (real && real != getauxval(AT_SYSINFO_EHDR) && ip >= real && ip < real + 8192) {
        static const char msg[] = PROG ": FAIL: a handler sees its thread inside the real vDSO\n";
        if (write(2, msg, sizeof(msg) - 1) < 0)
            _exit(1);
        _exit(1);
    }
    atomic_fetch_add(&handled, 1);
}

static int64_t ns(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

static void *reader(void *arg)
{
    long me = (long)arg;
    int64_t last_mono = 0;
    for (long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        struct timespec mono, real;
        if (clock_gettime(CLOCK_MONOTONIC, &mono) != 0 || clock_gettime(CLOCK_REALTIME, &real))
            fail("thread %ld: clock_gettime: %s", me, strerror(errno));
        if (ns(&mono) < last_mono)
            fail("thread %ld: CLOCK_MONOTONIC went back by %lld ns", me,
                 (long long)(last_mono - ns(&mono)));
        last_mono = ns(&mono);
        if (i % 65536 == 0) { /* the system calls here are rare: a signal arrives in between */
            struct timeval tv;
            struct timespec res, cpu;
            time_t now = time(NULL);
            if (gettimeofday(&tv, NULL) != 0 || now == (time_t)-1)
                fail("thread %ld: gettimeofday/time failed", me);
            if (tv.tv_sec < real.tv_sec - 2 || tv.tv_sec > real.tv_sec + 2 ||
                now < real.tv_sec - 2 || now > real.tv_sec + 2)
                fail("thread %ld: wall clocks disagree: %lld, %lld, %lld", me,
                     (long long)real.tv_sec, (long long)tv.tv_sec, (long long)now);
            if (clock_getres(CLOCK_MONOTONIC, &res) != 0 || ns(&res) <= 0)
                fail("thread %ld: clock_getres(CLOCK_MONOTONIC)", me);
            if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) != 0 || ns(&cpu) <= 0)
                fail("thread %ld: clock_gettime(CLOCK_THREAD_CPUTIME_ID)", me);
            if (sched_getcpu() < 0)
                fail("thread %ld: sched_getcpu: %s", me, strerror(errno));
        }
        atomic_fetch_add_explicit(&reads[me], 1, memory_order_relaxed);
    }
    return NULL;
}

static pthread_t readers[WORKERS];

static void *storm(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < WORKERS; i++)
            if (pthread_kill(readers[i], SIGUSR1) != 0)
                fail("pthread_kill");
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    int storming = argc > 2 && strcmp(argv[2], "storm") == 0;
    int signals = storming || (argc > 2 && strcmp(argv[2], "signals") == 0);
    if (argc > 3 || (argc > 2 && !signals)) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    struct sigaction sa = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (signals && sigaction(SIGUSR1, &sa, NULL) != 0)
        fail("sigaction: %s", strerror(errno));
    pthread_t *t = readers, stormer;
    for (long i = 0; i < WORKERS; i++)
        if (pthread_create(&t[i], NULL, reader, (void *)i) != 0)
            fail("pthread_create");
    if (storming && pthread_create(&stormer, NULL, storm, NULL) != 0)
        fail("pthread_create");
    long seen[WORKERS] = {0};
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        ckpt_sleep_ms(50);
        for (int i = 0; i < WORKERS; i++) {
            /* A thread may not have run in 50 ms on a loaded machine: give it up to 10 s. */
            for (int waited = 0; atomic_load(&reads[i]) == seen[i]; waited++) {
                if (waited == 1000)
                    fail("step %ld: thread %d stopped reading the clocks", k, i);
                ckpt_sleep_ms(10);
            }
            seen[i] = atomic_load(&reads[i]);
            if (signals && pthread_kill(t[i], SIGUSR1) != 0)
                fail("pthread_kill");
        }
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
    }
    atomic_store(&stop, 1);
    if (storming)
        pthread_join(stormer, NULL);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
