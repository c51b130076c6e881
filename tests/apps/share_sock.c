/* share_sock TAG MODE [STEPS=300] [MS=20]: a connection between a parent and its forked child (no
   exec). MODE pair: a Unix stream socketpair; MODE tcp: the parent listens on 127.0.0.1 (a free
   port), the child connects and the parent accepts. The parent keeps WINDOW requests (512 bytes,
   from the step number) outstanding; the child answers each (its bytes from the step number
   squared) after reading WINDOW/2 of them, so bytes wait in both directions. The parent checks
   each answer, prints `TAG step N` per answer and, after the child's end-of-file and exit status
   0, `TAG DONE checksum=... steps=STEPS` (ckpt_counter's checksum). Non-zero on a mismatch. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "share_sock"
#define USAGE "TAG pair|tcp [STEPS] [MS]"
#include "ckpt_common.h"

#define MSG 512
#define WINDOW 8

static void fill(long k, long salt, unsigned char *b)
{
    for (int i = 0; i < MSG; i++)
        b[i] = (unsigned char)((k * 97 + salt + i * 13) & 0xff);
    memcpy(b, &k, sizeof(k));
}

static void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail("send: %s", strerror(errno));
        c += w, n -= (size_t)w;
    }
}

static int recv_msg(int fd, unsigned char *b)
{
    size_t got = 0;
    while (got < MSG) {
        ssize_t r = recv(fd, b + got, MSG - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            fail("recv: %s", strerror(errno));
        if (r == 0) {
            if (got)
                fail("end-of-file inside a message");
            return 0;
        }
        got += (size_t)r;
    }
    return 1;
}

/* The child: answers requests in batches of WINDOW/2 (the last batch may be shorter). */
static void answer(int fd, long steps)
{
    unsigned char b[MSG], want[MSG];
    long next = 1;
    while (next <= steps) {
        long batch = next + WINDOW / 2 - 1 <= steps ? WINDOW / 2 : steps - next + 1;
        for (long j = 0; j < batch; j++) {
            if (!recv_msg(fd, b))
                fail("child: end-of-file at request %ld", next + j);
            fill(next + j, 0, want);
            if (memcmp(b, want, MSG) != 0) {
                long got;
                memcpy(&got, b, sizeof(got));
                fail("child: request %ld differs (it says %ld)", next + j, got);
            }
        }
        for (long j = 0; j < batch; j++) {
            fill(next + j, (next + j) * (next + j), b);
            send_all(fd, b, MSG);
        }
        next += batch;
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[2], "pair") != 0 && strcmp(argv[2], "tcp") != 0)) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *tag = argv[1];
    long steps = arg(argc, argv, 3, 300, 1, 1000000), ms = arg(argc, argv, 4, 20, 0, 10000);
    fflush(stdout);
    int sv[2], lfd = -1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (strcmp(argv[2], "pair") == 0) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            fail("socketpair: %s", strerror(errno));
    } else {
        socklen_t len = sizeof(addr);
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
            listen(lfd, 4) != 0 || getsockname(lfd, (struct sockaddr *)&addr, &len) != 0)
            fail("listen: %s", strerror(errno));
    }
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0) {
        int fd;
        if (lfd >= 0) {
            close(lfd);
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
                fail("child: connect: %s", strerror(errno));
        } else {
            close(sv[0]);
            fd = sv[1];
        }
        answer(fd, steps);
    }
    int fd;
    if (lfd >= 0) {
        while ((fd = accept(lfd, NULL, NULL)) < 0 && errno == EINTR)
            ;
        if (fd < 0)
            fail("accept: %s", strerror(errno));
    } else {
        close(sv[1]);
        fd = sv[0];
    }
    unsigned char b[MSG], want[MSG];
    long sent = 0;
    while (sent < steps && sent < WINDOW) {
        fill(++sent, 0, b);
        send_all(fd, b, MSG);
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        if (!recv_msg(fd, b))
            fail("end-of-file before answer %ld", k);
        fill(k, k * k, want);
        if (memcmp(b, want, MSG) != 0) {
            long got;
            memcpy(&got, b, sizeof(got));
            fail("answer %ld differs (it says %ld)", k, got);
        }
        h = ckpt_fnv(h, (uint64_t)k);
        tag_step_line(tag, k);
        ckpt_sleep_ms(ms);
        if (sent < steps) {
            fill(++sent, 0, b);
            send_all(fd, b, MSG);
        }
    }
    if (recv_msg(fd, b))
        fail("an answer after the last one");
    reap_ok(kid, "child");
    return tag_done_line(tag, h, steps);
}
