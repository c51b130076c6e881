/* ckpt_pipes DIR [STEPS=60]: a pipe whose writer closed at the start, read one message per step
   (end of file after the last); a pipe larger than the default (256 KiB) full of a pattern that
   is only checked at the end; a FIFO DIR/fifo opened by path, read and write ends both held, with
   a message in flight between steps; a second FIFO whose writer closed, read at the end. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>

#define PROG "ckpt_pipes"
#define USAGE "DIR [STEPS]"
#include "ckpt_common.h"

static size_t msg(char *buf, long k, int tag)
{
    size_t n = 20 + (size_t)(k % 30);
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + (k * 5 + (long)i + tag) % 26);
    return n;
}

static void read_exact(int fd, char *b, size_t n, const char *what, long k)
{
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            fail("step %ld: %s: read: %s", k, what, r < 0 ? strerror(errno) : "end of file");
        b += r;
        n -= (size_t)r;
    }
}

static void check(int fd, long k, int tag, const char *what)
{
    char want[64], got[64];
    size_t n = msg(want, k, tag);
    read_exact(fd, got, n, what, k);
    if (memcmp(want, got, n) != 0)
        fail("step %ld: %s: message differs", k, what);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    long steps = arg(argc, argv, 2, 60, 2, 999999);
    char b[64], path[4096], path2[4096];
    int closed[2], big[2];
    if (pipe(closed) != 0 || pipe2(big, O_NONBLOCK) != 0)
        fail("pipe: %s", strerror(errno));
    for (long k = 1; k <= steps; k++) {
        size_t n = msg(b, k, 0);
        if (write(closed[1], b, n) != (ssize_t)n)
            fail("write: %s", strerror(errno));
    }
    close(closed[1]);
    size_t big_n = 256 * 1024;
    if (fcntl(big[1], F_SETPIPE_SZ, (int)big_n) < (int)big_n)
        fail("F_SETPIPE_SZ: %s", strerror(errno));
    for (size_t i = 0; i < big_n; i++) {
        char c = (char)(i * 131 % 251);
        if (write(big[1], &c, 1) != 1)
            fail("filling the big pipe at %zu: %s", i, strerror(errno));
    }
    snprintf(path, sizeof path, "%s/fifo", argv[1]);
    snprintf(path2, sizeof path2, "%s/fifo2", argv[1]);
    if (mkfifo(path, 0600) != 0 || mkfifo(path2, 0600) != 0)
        fail("mkfifo: %s", strerror(errno));
    int fr = open(path, O_RDONLY | O_NONBLOCK);
    int fw = open(path, O_WRONLY);
    int f2r = open(path2, O_RDONLY | O_NONBLOCK);
    int f2w = open(path2, O_WRONLY);
    if (fr < 0 || fw < 0 || f2r < 0 || f2w < 0 || fcntl(fr, F_SETFL, 0) != 0 ||
        fcntl(f2r, F_SETFL, 0) != 0)
        fail("opening the FIFOs: %s", strerror(errno));
    if (write(f2w, "tail", 4) != 4)
        fail("write: %s", strerror(errno));
    close(f2w);
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        check(closed[0], k, 0, "closed pipe");
        size_t n = msg(b, k, 1);
        if (write(fw, b, n) != (ssize_t)n)
            fail("step %ld: fifo write: %s", k, strerror(errno));
        if (k > 1)
            check(fr, k - 1, 1, "fifo");
        sum = sum * 31 + (unsigned long)k;
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    if (read(closed[0], b, 1) != 0)
        fail("the closed pipe does not end");
    check(fr, steps, 1, "fifo");
    read_exact(f2r, b, 4, "second fifo", steps);
    if (memcmp(b, "tail", 4) != 0 || read(f2r, b, 1) != 0)
        fail("the second FIFO's bytes differ or it does not end");
    for (size_t i = 0; i < big_n; i++) {
        char c;
        if (read(big[0], &c, 1) != 1 || c != (char)(i * 131 % 251))
            fail("the big pipe differs at %zu", i);
    }
    unlink(path);
    unlink(path2);
    printf("DONE steps=%ld sum=%lu\n", steps, sum);
    return fflush(stdout) == 0 ? 0 : 1;
}
