/* share_listen TAG [STEPS=300] [MS=20]: a parent serves on a named Unix listening socket; its
   forked child connects afresh every step, sends the step number and reads its square back, as a
   pool worker talks to Python's Manager. The parent prints `TAG step N` per answer and, after the
   child's exit status 0, `TAG DONE checksum=... steps=STEPS` (ckpt_counter's checksum). The child
   fails (status 3) when the listener is not there: a restarted child that ran before its parent
   was restored (docs/PROTOCOL.md "restored"). A connection a checkpoint caught in the listener's
   queue, not yet accepted, comes back reset (a known limit, docs/DECISIONS.md): the child then
   connects again for the same step. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "share_listen"
#define USAGE "TAG [STEPS] [MS]"
#include "ckpt_common.h"

static int io_all(int fd, void *buf, size_t n, int writing)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = writing ? write(fd, (char *)buf + done, n - done)
                            : read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* One step's exchange; 0, or -1 when the connection was reset (dropped at a restart). */
static int ask(const struct sockaddr_un *addr, long k)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail("socket: %s", strerror(errno));
    while (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
        if (errno == EINTR)
            continue;
        fprintf(stderr, PROG ": FAIL at step %ld: connect: %s (the listener is not there)\n", k,
                strerror(errno));
        exit(3);
    }
    int64_t v = k, sq = 0;
    int rc = io_all(fd, &v, sizeof(v), 1) != 0 || io_all(fd, &sq, sizeof(sq), 0) != 0 ? -1 : 0;
    close(fd);
    if (rc == 0 && sq != k * k)
        fail("step %ld: the parent answered %lld", k, (long long)sq);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: " PROG " " USAGE);
    const char *tag = argv[1];
    long steps = arg(argc, argv, 2, 300, 1, 1000000), ms = arg(argc, argv, 3, 20, 0, 100000);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "/tmp/share_listen-%d.sock", (int)getpid());
    unlink(addr.sun_path);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(lfd, 16) != 0)
        fail("listen on %s: %s", addr.sun_path, strerror(errno));
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0) {
        close(lfd);
        for (long k = 1; k <= steps; k++) {
            while (ask(&addr, k) != 0)
                ; /* reset: caught unaccepted by a checkpoint; the same step again */
            ckpt_sleep_ms(ms);
        }
        return 0;
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            fail("accept: %s", strerror(errno));
        }
        int64_t v = 0;
        if (io_all(c, &v, sizeof(v), 0) == 0) {
            int64_t sq = v * v;
            if (v != k)
                fail("step %ld: the child asked for %lld", k, (long long)v);
            if (io_all(c, &sq, sizeof(sq), 1) == 0) {
                h = ckpt_fnv(h, (uint64_t)k);
                tag_step_line(tag, k);
                k++;
            }
        }
        close(c);
    }
    reap_ok(kid, "the child");
    unlink(addr.sun_path);
    end_gate();
    return tag_done_line(tag, h, steps);
}
