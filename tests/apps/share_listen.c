/* share_listen TAG serve|prefork[-tcp][-held] [STEPS=300] [MS=20]: a server on a named Unix
   listening socket (-tcp: on 127.0.0.1, a port the kernel picks) and a client that connects afresh
   every step and waits to be spoken to, as a pool worker talks to Python's Manager (whose server
   speaks first). serve: the parent serves, its forked child is the client. prefork: the parent
   listens and forks the server, which accepts on the inherited listener, while the parent, still
   holding it (as a pre-forking server's master does), is the client. The server works MS ms
   before each accept(), so the client's connection waits in the listener's queue most of the time
   and a checkpoint catches it there; once accepted, it is sent the step number and answers its
   square. -held: the server accepts at once and the client works the MS ms between reading the
   step and answering, so a checkpoint mostly catches an accepted connection, both its ends held
   by the tree. The server prints `TAG step N` per answer and `TAG
   DONE checksum=... steps=STEPS` (ckpt_counter's checksum) once its child, if any, exited with
   status 0. The client fails with status 3 when the listener is not there (a restarted client
   that ran before the server was restored: docs/PROTOCOL.md "restored") and 4 when its
   connection is reset (one a checkpoint caught waiting came back dropped: docs/DECISIONS.md
   "Connections between processes"). */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "share_listen"
#define USAGE "TAG serve|prefork[-tcp][-held] [STEPS] [MS]"
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

/* One step's exchange, from the child's end. */
static void answer(const struct sockaddr_storage *addr, socklen_t alen, long k, long ms)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail("socket: %s", strerror(errno));
    while (connect(fd, (const struct sockaddr *)addr, alen) != 0) {
        if (errno == EINTR)
            continue;
        fprintf(stderr, PROG ": FAIL at step %ld: connect: %s (the listener is not there)\n", k,
                strerror(errno));
        exit(3);
    }
    int64_t v = 0;
    if (io_all(fd, &v, sizeof(v), 0) != 0) {
        fprintf(stderr, PROG ": FAIL at step %ld: the connection was dropped (%s)\n", k,
                strerror(errno));
        exit(4);
    }
    if (v != k)
        fail("step %ld: the parent sent %lld", k, (long long)v);
    ckpt_sleep_ms(ms);
    v *= v;
    if (io_all(fd, &v, sizeof(v), 1) != 0)
        fail("step %ld: cannot answer: %s", k, strerror(errno));
    close(fd);
}

/* The server's loop: STEPS connections accepted on LFD, each after MS ms of work; the running
   checksum of the steps served. */
static uint64_t serve(int lfd, const char *tag, long steps, long ms)
{
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        ckpt_sleep_ms(ms); /* the client's next connection waits meanwhile */
        int c;
        while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            if (errno != EINTR)
                fail("accept: %s", strerror(errno));
        int64_t v = k, sq = 0;
        if (io_all(c, &v, sizeof(v), 1) != 0 || io_all(c, &sq, sizeof(sq), 0) != 0)
            fail("step %ld: the client's connection broke: %s", k, strerror(errno));
        if (sq != k * k)
            fail("step %ld: the client answered %lld", k, (long long)sq);
        close(c);
        h = ckpt_fnv(h, (uint64_t)k);
        tag_step_line(tag, k);
    }
    return h;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[2] : "";
    int prefork = strncmp(mode, "prefork", 7) == 0, tcp = strstr(mode, "-tcp") != NULL,
        held = strstr(mode, "-held") != NULL;
    char expect[32];
    snprintf(expect, sizeof(expect), "%s%s%s", prefork ? "prefork" : "serve", tcp ? "-tcp" : "",
             held ? "-held" : "");
    if (argc < 3 || strcmp(mode, expect) != 0)
        fail("usage: " PROG " " USAGE);
    const char *tag = argv[1];
    long steps = arg(argc, argv, 3, 300, 1, 1000000), ms = arg(argc, argv, 4, 20, 0, 100000);
    /* Who works the MS ms: the server before accepting, or (-held) the client before answering. */
    long serve_ms = held ? 0 : ms, answer_ms = held ? ms : 0;
    struct sockaddr_storage addr = {0};
    socklen_t alen;
    char path[108] = "";
    if (tcp) {
        struct sockaddr_in *in = (struct sockaddr_in *)&addr;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        alen = sizeof(*in);
    } else {
        struct sockaddr_un *un = (struct sockaddr_un *)&addr;
        un->sun_family = AF_UNIX;
        snprintf(path, sizeof(path), "/tmp/share_listen-%d.sock", (int)getpid());
        memcpy(un->sun_path, path, sizeof(path));
        unlink(path);
        alen = sizeof(*un);
    }
    int lfd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, alen) != 0 || listen(lfd, 16) != 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0)
        fail("listen on %s: %s", tcp ? "127.0.0.1" : path, strerror(errno));
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0 && !prefork) {
        close(lfd);
        for (long k = 1; k <= steps; k++)
            answer(&addr, alen, k, answer_ms);
        return 0;
    }
    if (kid == 0) {
        uint64_t h = serve(lfd, tag, steps, serve_ms);
        end_gate();
        return tag_done_line(tag, h, steps);
    }
    if (prefork) {
        for (long k = 1; k <= steps; k++)
            answer(&addr, alen, k, answer_ms);
        reap_ok(kid, "the server");
        if (!tcp)
            unlink(path);
        return 0;
    }
    uint64_t h = serve(lfd, tag, steps, serve_ms);
    reap_ok(kid, "the client");
    if (!tcp)
        unlink(path);
    end_gate();
    return tag_done_line(tag, h, steps);
}
