/* ckpt_inotify DIR [STEPS=60]: inotify watches on DIR (wd 1), on a removed subdirectory's place
   (wd 2, removed: a hole) and on DIR/sub (wd 3). Each step creates and removes a file in each
   directory and reads the events back: their watch numbers, kinds and names must match. */
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#define PROG "ckpt_inotify"
#define USAGE "DIR [STEPS]"
#include "ckpt_common.h"

static int ino;

/* Events queued at a checkpoint are lost (the kernel has no way to read them without consuming
   them; docs/DECISIONS.md): while its events are in flight the program holds checkpoints off, as
   a program that needs every event must. Weak: natively there is no crac. */
int dmtcp_disable_ckpt(void) __attribute__((weak));
int dmtcp_enable_ckpt(void) __attribute__((weak));

/* The next event (blocking up to a minute of running time). */
static void next_event(long k, int want_wd, uint32_t want_mask, const char *want_name)
{
    static char buf[4096] __attribute__((aligned(8)));
    static size_t have, at;
    struct watchdog w;
    wd_start(&w);
    while (at >= have) {
        struct pollfd p = {ino, POLLIN, 0};
        int n = poll(&p, 1, 1000);
        if (n < 0 && errno != EINTR)
            fail("step %ld: poll: %s", k, strerror(errno));
        if (n > 0) {
            ssize_t r = read(ino, buf, sizeof buf);
            if (r <= 0)
                fail("step %ld: inotify read: %s", k, r < 0 ? strerror(errno) : "EOF");
            have = (size_t)r;
            at = 0;
        } else if (wd_expired(&w, 60)) {
            fail("step %ld: no event for wd %d %s", k, want_wd, want_name);
        }
    }
    struct inotify_event *e = (struct inotify_event *)(buf + at);
    at += sizeof(*e) + e->len;
    if (e->wd != want_wd || e->mask != want_mask || strcmp(e->len ? e->name : "", want_name) != 0)
        fail("step %ld: event wd %d mask %#x name \"%s\", expected wd %d mask %#x \"%s\"", k, e->wd,
             e->mask, e->len ? e->name : "", want_wd, want_mask, want_name);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *dir = argv[1];
    long steps = arg(argc, argv, 2, 60, 1, 999999);
    char sub[4096], gone[4096], path[8192];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(gone, sizeof gone, "%s/gone", dir);
    if (mkdir(sub, 0700) != 0 || mkdir(gone, 0700) != 0)
        fail("mkdir: %s", strerror(errno));
    ino = inotify_init1(IN_NONBLOCK);
    if (ino < 0)
        fail("inotify_init1: %s", strerror(errno));
    int w1 = inotify_add_watch(ino, dir, IN_CREATE | IN_DELETE);
    int w2 = inotify_add_watch(ino, gone, IN_CREATE);
    int w3 = inotify_add_watch(ino, sub, IN_CREATE | IN_DELETE | IN_ONLYDIR);
    if (w1 != 1 || w2 != 2 || w3 != 3)
        fail("watches %d %d %d", w1, w2, w3);
    if (inotify_rm_watch(ino, w2) != 0)
        fail("inotify_rm_watch: %s", strerror(errno));
    next_event(0, w2, IN_IGNORED, "");
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        char name[32];
        snprintf(name, sizeof name, "f%ld", k);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (dmtcp_disable_ckpt)
            dmtcp_disable_ckpt();
        int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0 || close(fd) != 0 || unlink(path) != 0)
            fail("step %ld: %s: %s", k, path, strerror(errno));
        snprintf(path, sizeof path, "%s/%s", sub, name);
        fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0 || close(fd) != 0 || unlink(path) != 0)
            fail("step %ld: %s: %s", k, path, strerror(errno));
        next_event(k, w1, IN_CREATE, name);
        next_event(k, w1, IN_DELETE, name);
        next_event(k, w3, IN_CREATE, name);
        next_event(k, w3, IN_DELETE, name);
        if (dmtcp_enable_ckpt)
            dmtcp_enable_ckpt();
        sum = sum * 31 + (unsigned long)k;
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    /* A new watch gets the next number. */
    snprintf(path, sizeof path, "%s/late", dir);
    if (mkdir(path, 0700) != 0)
        fail("mkdir %s: %s", path, strerror(errno));
    int w4 = inotify_add_watch(ino, path, IN_CREATE);
    printf("DONE steps=%ld sum=%lu next_wd=%d\n", steps, sum, w4);
    return fflush(stdout) == 0 ? 0 : 1;
}
