/* ckpt_timers [STEPS=50] [ALARM_S=2]: an alarm() pending for most of the run, and per step a one-shot
   POSIX timer (30 ms, SIGEV_SIGNAL) and ITIMER_VIRTUAL (15 ms CPU); each fires once, never early. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_timers"
#define USAGE "[STEPS] [ALARM_S]"
#include "ckpt_common.h"
#define POSIX_MS 30
#define VIRT_MS 15
#define SLEEP_MS 20
#define MAGIC 0x5eed
/* "On time" is checked loosely, and only when no restart happened in between (the time an image
   spends on disk is not the program's). Never early is checked always. */
#define LATE_S 10.0

static void sleep_ms(long ms)
{
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&req, NULL); /* a timer signal may cut it short: fine */
}

static volatile sig_atomic_t posix_fired, posix_bad, virt_fired, alarm_fired;
static volatile double posix_fire_t, alarm_fire_t;
static volatile pid_t posix_fire_pid, alarm_fire_pid;

static void on_posix(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    posix_fire_t = now_mono();
    posix_fire_pid = getpid();
    if (sig != SIGRTMIN + 1 || si->si_code != SI_TIMER || si->si_value.sival_int != MAGIC)
        posix_bad++;
    posix_fired++;
}

static void on_vtalrm(int sig)
{
    (void)sig;
    virt_fired++;
}

static void on_alrm(int sig)
{
    (void)sig;
    alarm_fire_t = now_mono();
    alarm_fire_pid = getpid();
    alarm_fired++;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 50, 1, 1000000);
    long alarm_s = arg(argc, argv, 2, 2, 1, 3600);

    struct sigaction a;
    memset(&a, 0, sizeof a);
    sigemptyset(&a.sa_mask);
    a.sa_sigaction = on_posix;
    a.sa_flags = SA_SIGINFO | SA_RESTART;
    if (sigaction(SIGRTMIN + 1, &a, NULL) != 0)
        fail("sigaction: %s", strerror(errno));
    a.sa_flags = SA_RESTART;
    a.sa_handler = on_vtalrm;
    if (sigaction(SIGVTALRM, &a, NULL) != 0)
        fail("sigaction: %s", strerror(errno));
    a.sa_handler = on_alrm;
    if (sigaction(SIGALRM, &a, NULL) != 0)
        fail("sigaction: %s", strerror(errno));

    timer_t timer;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGRTMIN + 1;
    sev.sigev_value.sival_int = MAGIC;
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0)
        fail("timer_create: %s", strerror(errno));

    double alarm_arm_t = now_mono();
    pid_t alarm_arm_pid = getpid();
    if (alarm((unsigned)alarm_s) != 0)
        fail("an alarm was already pending at start");

    for (long k = 1; k <= steps; k++) {
        double t_arm = now_mono();
        pid_t arm_pid = getpid();
        struct itimerspec its = {{0, 0}, {0, POSIX_MS * 1000000L}};
        if (timer_settime(timer, 0, &its, NULL) != 0)
            fail("step %ld: timer_settime: %s", k, strerror(errno));
        struct itimerval itv = {{0, 0}, {0, VIRT_MS * 1000}};
        if (setitimer(ITIMER_VIRTUAL, &itv, NULL) != 0)
            fail("step %ld: setitimer: %s", k, strerror(errno));

        /* ITIMER_VIRTUAL counts user CPU time: spin until it fires. */
        struct watchdog wd;
        wd_start(&wd);
        volatile uint64_t spin = 0;
        while (virt_fired < k) {
            spin = spin * 6364136223846793005ULL + 1;
            if ((spin & 0xfffff) == 0 && wd_expired(&wd, 30))
                fail("step %ld: ITIMER_VIRTUAL never fired", k);
        }
        wd_start(&wd);
        while (posix_fired < k) {
            sleep_ms(1);
            if (wd_expired(&wd, 30))
                fail("step %ld: the POSIX timer never fired", k);
        }
        if (posix_fired != k || virt_fired != k || posix_bad)
            fail("step %ld: POSIX timer fired %d times, ITIMER_VIRTUAL %d times (bad siginfo %d)",
                 k, (int)posix_fired, (int)virt_fired, (int)posix_bad);
        double dt = posix_fire_t - t_arm;
        if (dt < POSIX_MS / 1000.0 - 1e-4)
            fail("step %ld: the POSIX timer fired early, after %.6f s", k, dt);
        if (posix_fire_pid == arm_pid && getpid() == arm_pid && dt > LATE_S)
            fail("step %ld: the POSIX timer fired %.3f s late", k, dt - POSIX_MS / 1000.0);
        struct itimerspec left;
        if (timer_gettime(timer, &left) != 0)
            fail("timer_gettime: %s", strerror(errno));
        if (left.it_value.tv_sec || left.it_value.tv_nsec || left.it_interval.tv_sec ||
            left.it_interval.tv_nsec)
            fail("step %ld: the one-shot POSIX timer is still armed", k);
        int over = timer_getoverrun(timer);
        if (over != 0)
            fail("step %ld: timer_getoverrun = %d", k, over);
        struct itimerval vleft;
        getitimer(ITIMER_VIRTUAL, &vleft);
        if (vleft.it_value.tv_sec || vleft.it_value.tv_usec)
            fail("step %ld: the one-shot ITIMER_VIRTUAL is still armed", k);
        if (alarm_fired > 1)
            fail("step %ld: the alarm fired %d times", k, (int)alarm_fired);
        step_line(k);
        sleep_ms(SLEEP_MS);
    }

    struct watchdog wd;
    wd_start(&wd);
    while (alarm_fired == 0) {
        sleep_ms(5);
        if (wd_expired(&wd, (double)alarm_s + 30))
            fail("the alarm never fired");
    }
    double dt = alarm_fire_t - alarm_arm_t;
    if (dt < (double)alarm_s - 0.01)
        fail("alarm(%ld) fired early, after %.6f s", alarm_s, dt);
    if (alarm_fire_pid == alarm_arm_pid && dt > (double)alarm_s + LATE_S)
        fail("alarm(%ld) fired %.3f s late", alarm_s, dt - (double)alarm_s);
    if (alarm(0) != 0)
        fail("another alarm is pending");
    sleep_ms(3 * POSIX_MS);
    if (posix_fired != steps || virt_fired != steps || alarm_fired != 1)
        fail("at the end: POSIX timer fired %d times, ITIMER_VIRTUAL %d, alarm %d",
             (int)posix_fired, (int)virt_fired, (int)alarm_fired);
    if (timer_delete(timer) != 0)
        fail("timer_delete: %s", strerror(errno));
    printf("DONE posix=%d virtual=%d alarm=%d\n", (int)posix_fired, (int)virt_fired,
           (int)alarm_fired);
    return fflush(stdout) == 0 ? 0 : 1;
}
