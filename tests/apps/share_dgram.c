/* share_dgram TAG [STEPS=300] [MS=20]: a Unix datagram ping-pong between a parent and its forked
   child (no exec), each with its own socket bound to a path (/tmp/share_dgram_<pid>.p and .c).
   The parent keeps WINDOW requests (the step number and 200 bytes from it) outstanding, sent to
   the child's name; the child answers each to the address recvfrom gave it, so a datagram that
   comes back from an unnamed sender is an answer lost. The parent checks each answer, prints
   `TAG step N` and, after the child's exit status 0, `TAG DONE checksum=... steps=STEPS`
   (ckpt_counter's checksum). Exits non-zero on a mismatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "share_dgram"
#define USAGE "TAG [STEPS] [MS]"
#include "ckpt_common.h"

#define MSG 208
#define WINDOW 4

static void fill(long k, long salt, unsigned char *b)
{
    for (int i = 0; i < MSG; i++)
        b[i] = (unsigned char)((k * 31 + salt + i * 5) & 0xff);
    memcpy(b, &k, sizeof(k));
}

static int bound(struct sockaddr_un *a, int pid, char end)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path, sizeof(a->sun_path), "/tmp/share_dgram_%d.%c", pid, end);
    unlink(a->sun_path);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof(*a)) != 0)
        fail("bind %s: %s", a->sun_path, strerror(errno));
    return fd;
}

static void send_to(int fd, const unsigned char *b, const struct sockaddr_un *to)
{
    /* The child may not have bound its name yet: wait for it. */
    for (int tries = 0; sendto(fd, b, MSG, 0, (const struct sockaddr *)to, sizeof(*to)) != MSG;
         tries++) {
        if ((errno != ENOENT && errno != ECONNREFUSED && errno != EINTR) || tries > 100000)
            fail("sendto %s: %s", to->sun_path, strerror(errno));
        ckpt_sleep_ms(1);
    }
}

static ssize_t recv_msg(int fd, unsigned char *b, struct sockaddr_un *from, socklen_t *flen)
{
    ssize_t n;
    while ((n = recvfrom(fd, b, MSG, 0, (struct sockaddr *)from, flen)) < 0 && errno == EINTR)
        ;
    if (n != MSG)
        fail("recvfrom: %zd (%s)", n, n < 0 ? strerror(errno) : "short");
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *tag = argv[1];
    long steps = arg(argc, argv, 2, 300, 1, 1000000), ms = arg(argc, argv, 3, 20, 0, 10000);
    int me = (int)getpid();
    struct sockaddr_un pa, ca;
    int pfd = bound(&pa, me, 'p');
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0) {
        close(pfd);
        int cfd = bound(&ca, me, 'c');
        unsigned char b[MSG], want[MSG];
        for (long k = 1; k <= steps; k++) {
            struct sockaddr_un from;
            socklen_t flen = sizeof(from);
            recv_msg(cfd, b, &from, &flen);
            fill(k, 0, want);
            if (memcmp(b, want, MSG) != 0)
                fail("child: request %ld differs", k);
            if (flen <= offsetof(struct sockaddr_un, sun_path))
                fail("child: request %ld came from an unnamed socket", k);
            fill(k, k * k, b);
            if (sendto(cfd, b, MSG, 0, (struct sockaddr *)&from, flen) != MSG)
                fail("child: sendto: %s", strerror(errno));
        }
        unlink(ca.sun_path);
        _exit(0);
    }
    memset(&ca, 0, sizeof(ca));
    ca.sun_family = AF_UNIX;
    snprintf(ca.sun_path, sizeof(ca.sun_path), "/tmp/share_dgram_%d.c", me);
    unsigned char b[MSG], want[MSG];
    long sent = 0;
    while (sent < steps && sent < WINDOW) {
        fill(++sent, 0, b);
        send_to(pfd, b, &ca);
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        struct sockaddr_un from;
        socklen_t flen = sizeof(from);
        recv_msg(pfd, b, &from, &flen);
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
            send_to(pfd, b, &ca);
        }
    }
    reap_ok(kid, "child");
    unlink(pa.sun_path);
    return tag_done_line(tag, h, steps);
}
