/* ckpt_evloop [STEPS=60]: an epoll loop over an eventfd (holding a count across steps), a periodic
   timerfd, a signalfd for SIGUSR1, a pipe registered edge-triggered and one registered one-shot
   that already fired; plus a one-hour timerfd that must stay armed. Every step checks what epoll
   reports (the registrations' data words), the eventfd's count and the fds' flags. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#define PROG "ckpt_evloop"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

enum { D_EVENT = 101, D_TIMER = 202, D_SIGNAL = 303, D_PIPE_ET = 404, D_ONESHOT = 505 };

static void need_flags(int fd, int want, const char *what, long k)
{
    int fl = fcntl(fd, F_GETFL), fdf = fcntl(fd, F_GETFD);
    if (fl < 0 || fdf < 0 || (fl & O_NONBLOCK) != (want & O_NONBLOCK) ||
        !(fdf & FD_CLOEXEC) != !(want & O_CLOEXEC))
        fail("step %ld: %s flags %#x/%#x, expected nonblock=%d cloexec=%d", k, what, fl, fdf,
             !!(want & O_NONBLOCK), !!(want & O_CLOEXEC));
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 3, 999999);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &usr1, NULL) != 0)
        fail("sigprocmask: %s", strerror(errno));
    int ev = eventfd(0, EFD_NONBLOCK);
    int tm = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int hour = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC);
    int sig = signalfd(-1, &usr1, SFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int et[2], os[2];
    if (ev < 0 || tm < 0 || hour < 0 || sig < 0 || ep < 0 || pipe(et) != 0 || pipe(os) != 0)
        fail("making the fds: %s", strerror(errno));
    struct itimerspec per = {{0, 5 * 1000000L}, {0, 5 * 1000000L}};
    struct itimerspec hr = {{0, 0}, {3600, 0}};
    if (timerfd_settime(tm, 0, &per, NULL) != 0 || timerfd_settime(hour, 0, &hr, NULL) != 0)
        fail("timerfd_settime: %s", strerror(errno));
    struct {
        int fd;
        uint32_t events;
        uint64_t data;
    } regs[] = {{ev, EPOLLIN, D_EVENT},
                {tm, EPOLLIN, D_TIMER},
                {sig, EPOLLIN, D_SIGNAL},
                {et[0], EPOLLIN | EPOLLET, D_PIPE_ET},
                {os[0], EPOLLIN | EPOLLONESHOT, D_ONESHOT}};
    for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
        struct epoll_event e = {.events = regs[i].events, .data.u64 = regs[i].data};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, regs[i].fd, &e) != 0)
            fail("epoll_ctl ADD %zu: %s", i, strerror(errno));
    }
    /* The one-shot registration fires once, here, and never again (its byte stays unread). */
    if (write(os[1], "x", 1) != 1)
        fail("write: %s", strerror(errno));
    struct epoll_event got[8];
    int n = epoll_wait(ep, got, 8, 30000);
    if (n != 1 || got[0].data.u64 != D_ONESHOT)
        fail("the one-shot registration did not fire first (%d events)", n);

    uint64_t model = 0; /* the eventfd's count */
    unsigned long sum = 0;
    long timer_seen = 0;
    for (long k = 1; k <= steps; k++) {
        uint64_t add = (uint64_t)(k % 7 + 1);
        if (write(ev, &add, 8) != 8)
            fail("step %ld: eventfd write: %s", k, strerror(errno));
        model += add;
        if (kill(getpid(), SIGUSR1) != 0)
            fail("step %ld: kill: %s", k, strerror(errno));
        char c = (char)('a' + k % 26);
        if (write(et[1], &c, 1) != 1)
            fail("step %ld: pipe write: %s", k, strerror(errno));
        int seen_ev = 0, seen_sig = 0, seen_tm = 0, seen_et = 0;
        struct watchdog w;
        wd_start(&w);
        while (!(seen_ev && seen_sig && seen_tm && seen_et)) {
            if (wd_expired(&w, 60))
                fail("step %ld: epoll saw ev=%d sig=%d timer=%d pipe=%d only", k, seen_ev, seen_sig,
                     seen_tm, seen_et);
            n = epoll_wait(ep, got, 8, 1000);
            if (n < 0 && errno != EINTR)
                fail("step %ld: epoll_wait: %s", k, strerror(errno));
            for (int i = 0; i < n; i++) {
                switch (got[i].data.u64) {
                case D_EVENT: seen_ev = 1; break;
                case D_SIGNAL: {
                    struct signalfd_siginfo si;
                    if (read(sig, &si, sizeof si) != (ssize_t)sizeof si || si.ssi_signo != SIGUSR1)
                        fail("step %ld: signalfd read", k);
                    seen_sig = 1;
                    break;
                }
                case D_TIMER: {
                    uint64_t ticks;
                    if (read(tm, &ticks, 8) == 8) {
                        if (ticks == 0)
                            fail("step %ld: a timerfd read of 0 ticks", k);
                        seen_tm = 1;
                    } else if (errno != EAGAIN) {
                        fail("step %ld: timerfd read: %s", k, strerror(errno));
                    }
                    break;
                }
                case D_PIPE_ET: {
                    char b;
                    if (read(et[0], &b, 1) != 1 || b != c)
                        fail("step %ld: pipe byte", k);
                    seen_et = 1;
                    break;
                }
                default:
                    fail("step %ld: epoll reported data %llu (events %#x)", k,
                         (unsigned long long)got[i].data.u64, got[i].events);
                }
            }
        }
        timer_seen++;
        /* Every third step the count is taken; otherwise it stays in the eventfd. */
        if (k % 3 == 0) {
            uint64_t v;
            if (read(ev, &v, 8) != 8 || v != model)
                fail("step %ld: eventfd count %llu, expected %llu", k, (unsigned long long)v,
                     (unsigned long long)model);
            sum = sum * 31 + v;
            model = 0;
        }
        struct itimerspec cur;
        if (timerfd_gettime(hour, &cur) != 0 || cur.it_value.tv_sec > 3600 ||
            (cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0))
            fail("step %ld: the one-hour timer is not armed", k);
        if (timerfd_gettime(tm, &cur) != 0 || cur.it_interval.tv_sec != 0 ||
            cur.it_interval.tv_nsec != 5 * 1000000L)
            fail("step %ld: the periodic timer's interval changed", k);
        need_flags(ev, O_NONBLOCK, "eventfd", k);
        need_flags(tm, O_NONBLOCK | O_CLOEXEC, "timerfd", k);
        need_flags(sig, O_CLOEXEC, "signalfd", k);
        need_flags(ep, O_CLOEXEC, "epoll", k);
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    printf("DONE steps=%ld sum=%lu timer=%ld\n", steps, sum, timer_seen);
    return fflush(stdout) == 0 ? 0 : 1;
}
