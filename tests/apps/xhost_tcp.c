/* xhost_tcp TAG server PORT STEPS MS | TAG client ADDR PORT STEPS MS: two processes of one job
   (on one host or two) joined by one TCP connection with bytes always in flight both ways: at
   step k each sends block k (1 KiB, its contents a function of k and the direction) and reads
   and checks block k-8, so about 8 KiB wait unread at each end. The client sends its last block
   at step 20 and shuts its writing down (the connection is half-closed from then on); at its
   end the server must read end of file after that block, then sends one byte more, which the
   client waits for (so it cannot close first and give the end itself). Prints coord_counter's lines
   (`TAG step N`, then `TAG DONE checksum=... steps=N`, the same checksum), so the job tests
   compare it with an uninterrupted run the same way; any wrong byte: FAIL, exit 1. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 1024
#define LAG 8
#define CLIENT_SENDS 20 /* blocks, then shutdown(SHUT_WR) */

static const char *tag = "?";

static void fail(const char *what)
{
    fprintf(stderr, "xhost_tcp %s: FAIL: %s (%s)\n", tag, what, strerror(errno));
    exit(1);
}

static void block(unsigned char *b, long k, int from_server)
{
    uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ULL ^ (from_server ? 0xabcdefULL : 0x123457ULL);
    for (int i = 0; i < BLOCK; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
    }
}

static void put(int fd, const unsigned char *b)
{
    for (size_t done = 0; done < BLOCK;) {
        ssize_t n = write(fd, b + done, BLOCK - done);
        if (n < 0 && errno != EINTR)
            fail("write");
        done += n > 0 ? (size_t)n : 0;
    }
}

static void get(int fd, unsigned char *b)
{
    for (size_t done = 0; done < BLOCK;) {
        ssize_t n = read(fd, b + done, BLOCK - done);
        if (n == 0) {
            errno = 0;
            fail("end of file from the peer");
        }
        if (n < 0 && errno != EINTR)
            fail("read");
        done += n > 0 ? (size_t)n : 0;
    }
}

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr,
                "usage: xhost_tcp TAG server PORT STEPS MS | TAG client ADDR PORT STEPS MS\n");
        return 2;
    }
    tag = argv[1];
    int server = strcmp(argv[2], "server") == 0;
    if (!server && argc < 7)
        return 2;
    int port = atoi(argv[server ? 3 : 4]);
    long steps = atol(argv[server ? 4 : 5]), ms = atol(argv[server ? 5 : 6]);
    int fd;
    if (server) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0)
            fail("listen");
        fd = accept(l, NULL, NULL);
        if (fd < 0)
            fail("accept");
        close(l); /* one connection: nothing to listen for afterwards */
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, argv[3], &a.sin_addr) != 1)
            return 2;
        fd = socket(AF_INET, SOCK_STREAM, 0);
        for (int tries = 0;; tries++) { /* the server may not listen yet */
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
                break;
            if (tries > 600)
                fail("connect");
            close(fd);
            fd = socket(AF_INET, SOCK_STREAM, 0);
            usleep(100000);
        }
    }
    unsigned char out[BLOCK], in[BLOCK], want[BLOCK];
    uint64_t h = 0xcbf29ce484222325ULL;
    long sent_by_client = steps < CLIENT_SENDS ? steps : CLIENT_SENDS;
    for (long k = 1; k <= steps + LAG; k++) {
        if (k <= (server ? steps : sent_by_client)) {
            block(out, k, server);
            put(fd, out);
            if (!server && k == sent_by_client && shutdown(fd, SHUT_WR) != 0)
                fail("shutdown");
        }
        if (k > LAG && (!server || k - LAG <= sent_by_client)) {
            get(fd, in);
            block(want, k - LAG, !server);
            if (memcmp(in, want, BLOCK) != 0) {
                errno = 0;
                fail("a block from the peer is not what it sent");
            }
        }
        if (k <= steps) {
            h = fnv(h, (uint64_t)k);
            printf("%s step %ld\n", tag, k);
            fflush(stdout);
            struct timespec req = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&req, &req) != 0 && errno == EINTR)
                ;
        }
    }
    if (server && (read(fd, in, 1) != 0 || write(fd, "!", 1) != 1)) {
        errno = 0;
        fail("no end of file after the client's last block");
    }
    if (!server && (read(fd, in, 1) != 1 || in[0] != '!')) {
        errno = 0;
        fail("no last byte from the server");
    }
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
