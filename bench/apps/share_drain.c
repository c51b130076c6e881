/* share_drain BYTES: a parent and its forked child joined by a Unix stream socketpair; the child
   sends BYTES the parent never reads (the socket's buffers forced large enough when allowed), then
   both print `ready QUEUED` (the parent: the bytes queued at its end) and wait for signals. For
   bench/drain.py: the checkpoint of the two with BYTES in flight vs with none. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long bytes = argc > 1 ? atol(argv[1]) : 0;
    int sv[2], big = (int)(2 * bytes + (1 << 16));
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    for (int i = 0; i < 2;
         i++) /* the FORCE variants need CAP_NET_ADMIN; the plain ones are capped */
        if (setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) != 0)
            setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        return 1;
    if (kid == 0) {
        close(sv[0]);
        char *buf = malloc((size_t)bytes + 1);
        for (long i = 0; i < bytes; i++)
            buf[i] = (char)(i * 7);
        long sent = 0;
        while (sent < bytes) {
            ssize_t n = send(sv[1], buf + sent, (size_t)(bytes - sent), MSG_DONTWAIT);
            if (n <= 0)
                break; /* the buffer is full: what fits is in flight */
            sent += n;
        }
        printf("child ready %ld\n", sent);
        fflush(stdout);
        for (;;)
            pause();
    }
    close(sv[1]);
    int queued = 0;
    for (int tries = 0; tries < 1000; tries++) {
        usleep(2000);
        int now = 0;
        ioctl(sv[0], FIONREAD, &now);
        if (now == queued && now > 0)
            break;
        queued = now;
        if (bytes == 0 && tries > 10)
            break;
    }
    printf("parent ready %d\n", queued);
    fflush(stdout);
    for (;;)
        pause();
}
