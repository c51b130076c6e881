/* share_file TAG [STEPS=300] [MS=20]: a parent and its forked child share a file of fixed size
   (64 KiB of zeros, opened before the fork); each step the child writes the step number in place
   at offset 8*step and checks that every earlier step's number is there and no later one yet, as
   processes of a job write their blocks of one output file. It prints `TAG step N`; the parent,
   after the child's exit status 0, checks the whole file and prints `TAG DONE checksum=...
   steps=STEPS` (ckpt_counter's checksum). A restart must put the file back as the checkpoint saw
   it: the killed run wrote later steps' numbers in place after it (docs/DECISIONS.md "Written
   files are put back as they were"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "share_file"
#define USAGE "TAG [STEPS] [MS]"
#include "ckpt_common.h"

#define SIZE (64 * 1024)

static int64_t read_at(int fd, long k)
{
    int64_t v = 0;
    if (pread(fd, &v, sizeof(v), (off_t)k * 8) != (ssize_t)sizeof(v))
        fail("pread at step %ld: %s", k, strerror(errno));
    return v;
}

static void check(int fd, long upto, long steps)
{
    for (long j = 1; j <= steps; j++) {
        int64_t v = read_at(fd, j), want = j <= upto ? j : 0;
        if (v != want)
            fail("after step %ld: step %ld's place holds %lld, not %lld", upto, j, (long long)v,
                 (long long)want);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: " PROG " " USAGE);
    const char *tag = argv[1];
    long steps = arg(argc, argv, 2, 300, 1, SIZE / 8 - 1), ms = arg(argc, argv, 3, 20, 0, 100000);
    char path[64];
    snprintf(path, sizeof(path), "/tmp/share_file-%d.dat", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, SIZE) != 0)
        fail("%s: %s", path, strerror(errno));
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0) {
        for (long k = 1; k <= steps; k++) {
            int64_t v = k;
            if (pwrite(fd, &v, sizeof(v), (off_t)k * 8) != (ssize_t)sizeof(v))
                fail("pwrite at step %ld: %s", k, strerror(errno));
            check(fd, k, steps);
            tag_step_line(tag, k);
            ckpt_sleep_ms(ms);
        }
        return 0;
    }
    reap_ok(kid, "the child");
    check(fd, steps, steps);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++)
        h = ckpt_fnv(h, (uint64_t)read_at(fd, k));
    unlink(path);
    end_gate();
    return tag_done_line(tag, h, steps);
}
