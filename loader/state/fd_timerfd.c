/* fd_timerfd.c — timerfds: clock, time left, interval and unread expirations saved at checkpoint
 * (files/timerfd-<fd>), a new timer armed with them at restart. */
#include "fds.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif

static int timerfd_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)st;
    return strcmp(e->path, "anon_inode:[timerfd]") == 0;
}

/* How many times, a millisecond apart, a periodic timer that reads as expired is read again. */
#define EXPIRED_RETRIES 20

/* timerfd_gettime, for a periodic timer that reads 0 time left: the timer's expiry has passed
 * and its callback has not run yet (a loaded machine: seen 9 % of the reads of a 20 us timer),
 * so the kernel clamps the time left to 0, as it reads for a timer disarmed with an interval
 * left in place. Read again until the callback has moved it on; still 0, it is an armed timer
 * that has just expired: 1 ns left (timerfd_settime with 0 would disarm it at the restart,
 * and a program waiting for its next tick would wait for ever). docs/DECISIONS.md. */
static int timer_now(int fd, struct itimerspec *cur)
{
    for (int i = 0;; i++) {
        if (timerfd_gettime(fd, cur) != 0)
            return -1;
        int expired = !cur->it_value.tv_sec && !cur->it_value.tv_nsec &&
                      (cur->it_interval.tv_sec || cur->it_interval.tv_nsec);
        if (!expired)
            return 0;
        if (i == EXPIRED_RETRIES) {
            cur->it_value.tv_nsec = 1;
            return 0;
        }
        usleep(1000);
    }
}

/* timerfd_gettime first: an expired periodic timer is only moved on (and its ticks counted) when
 * someone looks, and fdinfo's it_value does not do that (it shows 0 for such a timer). The
 * expirations the program has not read yet ("ticks") come from fdinfo; reading the fd would
 * take them from the program. The time left is kept as a relative time (docs/DECISIONS.md). */
static int timerfd_save(struct fd_entry *e, const struct fd_entry *all, int n,
                        const char *files_dir)
{
    (void)all, (void)n;
    struct itimerspec cur;
    char *info = NULL;
    const char *clock, *ticks;
    if (timer_now(e->rec.fd, &cur) != 0 || !(info = fd_fdinfo(e->rec.fd)) ||
        !(clock = fd_info_field(info, "clockid:")) || !(ticks = fd_info_field(info, "ticks:"))) {
        free(info);
        fprintf(stderr, "crac: error: cannot read the timerfd fd %d\n", e->rec.fd);
        return -1;
    }
    char text[256];
    snprintf(text, sizeof(text), "clock %d ticks %" PRIu64 " value %lld %ld interval %lld %ld\n",
             atoi(clock), (uint64_t)strtoull(ticks, NULL, 10), (long long)cur.it_value.tv_sec,
             cur.it_value.tv_nsec, (long long)cur.it_interval.tv_sec, cur.it_interval.tv_nsec);
    free(info);
    return fd_save_text(e, files_dir, "timerfd", text);
}

static int timerfd_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    char *text = fd_read_text(r, v, "timerfd");
    if (!text)
        return -1;
    int clock;
    uint64_t ticks;
    long long vs, is;
    long vns, ins;
    int ok = sscanf(text, "clock %d ticks %" SCNu64 " value %lld %ld interval %lld %ld", &clock,
                    &ticks, &vs, &vns, &is, &ins) == 6 &&
             vs >= 0 && is >= 0 && vns >= 0 && vns < 1000000000L && ins >= 0 && ins < 1000000000L;
    free(text);
    if (!ok) {
        snprintf(r->err, r->errlen, "fd %d (timerfd): image corrupted: bad saved timer", v->rec.fd);
        return -1;
    }
    int fd = timerfd_create(clock, TFD_CLOEXEC);
    if (fd < 0)
        return -1;
    struct itimerspec its = {{(time_t)is, ins}, {(time_t)vs, vns}};
    if (timerfd_settime(fd, 0, &its, NULL) != 0) {
        close(fd);
        return -1;
    }
    /* Unread expirations: TFD_IOC_SET_TICKS exists for checkpoint/restart (kernels with
     * CONFIG_CHECKPOINT_RESTORE); without it they are lost, with a warning. */
    if (ticks && ioctl(fd, TFD_IOC_SET_TICKS, &ticks) != 0)
        fprintf(stderr,
                "crac: warning: fd %d (timerfd): %" PRIu64
                " expirations not yet read are lost (this kernel cannot set them)\n",
                v->rec.fd, ticks);
    return fd_install(fd, &v->rec);
}

const struct fd_ops fd_timerfd_ops = {.kind = CRAC_FD_TIMERFD,
                                      .name = "timerfd",
                                      .recognise = timerfd_recognise,
                                      .save = timerfd_save,
                                      .reopen = timerfd_reopen};
