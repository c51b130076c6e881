/* ckpt_seccomp.c — installs two stacked seccomp filters of its own (uname: EPERM, then EACCES;
   sysinfo: EPERM), a thread with a third of its own (getrusage: ENOTTY), and per-thread
   PR_SET_PDEATHSIG and name, no_new_privs, undumpable and THP off; checks all of it at every step.
   TSYNC=1: the first filter is installed with SECCOMP_FILTER_FLAG_TSYNC once the worker runs,
   the second on the main thread only (the worker's uname fails with the first's EPERM). */
#define PROG "ckpt_seccomp"
#define USAGE "[STEPS] [MS] [TSYNC]"
#include "ckpt_common.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>

/* nr -> ERRNO(err), everything else allowed (x86-64 only, as crac). */
static struct sock_fprog deny(struct sock_filter *f, int nr1, int nr2, int err)
{
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr1, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    memcpy(f, prog, sizeof(prog));
    return (struct sock_fprog){5, f};
}

static int fails_with(long r, int err) { return r == -1 && errno == err; }

static volatile long thread_rounds;
static int tsync;
static volatile int first_installed;

static void check_common(const char *who, long k, int uname_err)
{
    struct utsname u;
    struct sysinfo si;
    if (!fails_with(uname(&u), uname_err)) /* the later filter's errno wins */
        fail("%s, step %ld: uname is not refused with %s (%s)", who, k, strerror(uname_err),
             strerror(errno));
    if (!fails_with(sysinfo(&si), EPERM))
        fail("%s, step %ld: sysinfo is not refused with EPERM", who, k);
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        fail("%s, step %ld: no_new_privs was lost", who, k);
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        fail("%s, step %ld: dumpable again", who, k);
    if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) != 1)
        fail("%s, step %ld: transparent huge pages enabled again", who, k);
}

static int pdeathsig(void)
{
    int sig = -1;
    prctl(PR_GET_PDEATHSIG, &sig, 0, 0, 0);
    return sig;
}

static void *worker(void *arg)
{
    (void)arg;
    struct sock_filter f[5];
    struct sock_fprog own = deny(f, SYS_getrusage, SYS_getrusage, ENOTTY);
    while (!__atomic_load_n(&first_installed, __ATOMIC_SEQ_CST)) /* its own goes on top */
        usleep(1000);
    if (prctl(PR_SET_NAME, "sc-worker", 0, 0, 0) != 0 ||
        prctl(PR_SET_PDEATHSIG, SIGHUP, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &own) != 0)
        fail("worker: %s", strerror(errno));
    for (long k = 1;; k++) {
        struct rusage ru;
        check_common("worker", k, tsync ? EPERM : EACCES);
        if (!fails_with(getrusage(RUSAGE_SELF, &ru), ENOTTY))
            fail("worker, round %ld: its own filter is gone (getrusage works)", k);
        if (pdeathsig() != SIGHUP)
            fail("worker, round %ld: parent-death signal is %d", k, pdeathsig());
        char name[17] = "";
        prctl(PR_GET_NAME, name, 0, 0, 0);
        if (strcmp(name, "sc-worker") != 0)
            fail("worker, round %ld: its name is %s", k, name);
        __atomic_add_fetch(&thread_rounds, 1, __ATOMIC_SEQ_CST);
        usleep(2000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    tsync = (int)arg(argc, argv, 3, 0, 0, 1);
    struct sock_filter f1[5], f2[5];
    struct sock_fprog first = deny(f1, SYS_uname, SYS_sysinfo, EPERM);
    struct sock_fprog second = deny(f2, SYS_uname, SYS_uname, EACCES);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 ||
        prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0)
        fail("prctl: %s", strerror(errno));
    pthread_t t;
    if (tsync && pthread_create(&t, NULL, worker, NULL) != 0)
        fail("pthread_create");
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, tsync ? SECCOMP_FILTER_FLAG_TSYNC : 0,
                &first) != 0)
        fail("seccomp: %s", strerror(errno));
    __atomic_store_n(&first_installed, 1, __ATOMIC_SEQ_CST);
    if (!tsync && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &second, 0, 0) != 0)
        fail("prctl(PR_SET_SECCOMP): %s", strerror(errno));
    if (!tsync && pthread_create(&t, NULL, worker, NULL) != 0)
        fail("pthread_create");
    /* With TSYNC the worker is running: the second filter is the main thread's alone. */
    if (tsync && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &second, 0, 0) != 0)
        fail("prctl(PR_SET_SECCOMP): %s", strerror(errno));
    struct watchdog wd;
    wd_start(&wd);
    for (long k = 1; k <= steps; k++) {
        struct rusage ru;
        check_common("main", k, EACCES);
        if (getrusage(RUSAGE_SELF, &ru) != 0)
            fail("main, step %ld: the worker's own filter reached the main thread", k);
        if (pdeathsig() != SIGTERM)
            fail("main, step %ld: parent-death signal is %d", k, pdeathsig());
        /* The worker goes on too (it fails the program itself when its checks do). */
        long seen = __atomic_load_n(&thread_rounds, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&thread_rounds, __ATOMIC_SEQ_CST) == seen) {
            if (wd_expired(&wd, 600))
                fail("the worker stopped");
            usleep(1000);
        }
        step_line(k);
        usleep((useconds_t)(ms * 1000));
    }
    printf("DONE steps=%ld\n", steps);
    return 0;
}
