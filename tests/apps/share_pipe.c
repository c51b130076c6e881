/* share_pipe TAG MODE [STEPS=300] [MS=20]: pipes between forked processes (no exec). MODE pair: the
   parent makes a pipe and forks a writer that writes STEPS 1000-byte records at once (the pipe
   fills; the writer blocks in write), the parent reads one record per MS ms. MODE pipeline: gen |
   filter | sum, three processes: gen writes the records, filter xors each byte with 0x5a, the
   parent reads and checks. MODE fifo: as pair, through a FIFO (mkfifo in a fresh directory under
   /tmp) that the writer and the parent each open by name. The parent checks every record's bytes and prints `TAG step N` per
   record, then (after end-of-file on the pipe and its children's exit status 0) `TAG DONE
   checksum=... steps=STEPS` (ckpt_counter's checksum). Exits non-zero on any mismatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "share_pipe"
#define USAGE "TAG pair|pipeline|fifo [STEPS] [MS]"
#include "ckpt_common.h"

#define REC 1000

static void record(long k, unsigned char *b)
{
    for (int i = 0; i < REC; i++)
        b[i] = (unsigned char)((k * 131 + i * 7 + (i >> 5)) & 0xff);
    memcpy(b, &k, sizeof(k));
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail("write: %s", strerror(errno));
        c += w, n -= (size_t)w;
    }
}

/* 1 with a whole record, 0 at end-of-file before any byte. */
static int read_rec(int fd, unsigned char *b)
{
    size_t got = 0;
    while (got < REC) {
        ssize_t r = read(fd, b + got, REC - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            fail("read: %s", strerror(errno));
        if (r == 0) {
            if (got)
                fail("end-of-file inside a record (%zu bytes)", got);
            return 0;
        }
        got += (size_t)r;
    }
    return 1;
}

static void gen(int out, long steps)
{
    unsigned char b[REC];
    for (long k = 1; k <= steps; k++) {
        record(k, b);
        write_all(out, b, REC);
    }
    _exit(0);
}

static void filter(int in, int out)
{
    unsigned char b[REC];
    while (read_rec(in, b)) {
        for (int i = 0; i < REC; i++)
            b[i] ^= 0x5a;
        write_all(out, b, REC);
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[2], "pair") != 0 && strcmp(argv[2], "pipeline") != 0 &&
                     strcmp(argv[2], "fifo") != 0)) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *tag = argv[1];
    int pipeline = strcmp(argv[2], "pipeline") == 0, fifo = strcmp(argv[2], "fifo") == 0;
    long steps = arg(argc, argv, 3, 300, 1, 1000000), ms = arg(argc, argv, 4, 20, 0, 10000);
    fflush(stdout);
    int p1[2], p2[2];
    char dir[] = "/tmp/share_fifo.XXXXXX", path[64] = "";
    if (fifo) { /* both ends opened by name: the parent's open waits for the writer's */
        if (!mkdtemp(dir))
            fail("mkdtemp: %s", strerror(errno));
        snprintf(path, sizeof(path), "%s/records", dir);
        if (mkfifo(path, 0600) != 0)
            fail("mkfifo: %s", strerror(errno));
    } else if (pipe(p1) != 0)
        fail("pipe: %s", strerror(errno));
    pid_t kids[2];
    int nkids = 0, in = fifo ? -1 : p1[0];
    if ((kids[nkids++] = fork()) == 0) {
        if (fifo) {
            int w = open(path, O_WRONLY | O_CLOEXEC);
            if (w < 0)
                fail("open %s for writing: %s", path, strerror(errno));
            gen(w, steps);
        }
        close(p1[0]);
        gen(p1[1], steps);
    }
    if (fifo && (in = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        fail("open %s for reading: %s", path, strerror(errno));
    if (!fifo)
        close(p1[1]);
    if (pipeline) {
        if (pipe(p2) != 0)
            fail("pipe: %s", strerror(errno));
        if ((kids[nkids++] = fork()) == 0) {
            close(p2[0]);
            filter(p1[0], p2[1]);
        }
        close(p1[0]);
        close(p2[1]);
        in = p2[0];
    }
    uint64_t h = CKPT_FNV_BASIS;
    unsigned char b[REC], want[REC];
    for (long k = 1; k <= steps; k++) {
        if (!read_rec(in, b))
            fail("end-of-file before record %ld", k);
        record(k, want);
        for (int i = 0; pipeline && i < REC; i++)
            want[i] ^= 0x5a;
        if (memcmp(b, want, REC) != 0) {
            long got;
            memcpy(&got, b, sizeof(got));
            fail("record %ld differs (it says %ld)", k, pipeline ? got ^ 0x5a5a5a5a5a5a5a5aL : got);
        }
        h = ckpt_fnv(h, (uint64_t)k);
        tag_step_line(tag, k);
        ckpt_sleep_ms(ms);
    }
    if (read_rec(in, b))
        fail("a record after the last one");
    if (fifo && (unlink(path) != 0 || rmdir(dir) != 0))
        fail("removing %s: %s", path, strerror(errno));
    for (int i = 0; i < nkids; i++) {
        char who[32];
        snprintf(who, sizeof(who), "child %d", (int)kids[i]);
        reap_ok(kids[i], who);
    }
    return tag_done_line(tag, h, steps);
}
