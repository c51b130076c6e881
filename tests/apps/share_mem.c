/* share_mem TAG [STEPS=300] [MS=20]: memory shared between a parent and its forked child (no
   exec): a MAP_SHARED|MAP_ANONYMOUS page holding two process-shared semaphores and the request,
   and a POSIX shared memory object unlinked once mapped (as sem_open's are) holding the answers.
   Each step the parent writes k, posts `req`, waits on `rep` and checks that the child wrote k*k
   into slot k of the shm object (and every earlier slot still holds its square); it prints `TAG
   step N`, then after the child's exit status 0 `TAG DONE checksum=... steps=STEPS`
   (ckpt_counter's checksum). The child also writes k into a SysV segment with a key, as
   PostgreSQL's, which both detach (shmdt) at the end, and the parent removes. A checkpoint
   usually finds the child blocked on `req` and the parent asleep. Exits non-zero on a mismatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "share_mem"
#define USAGE "TAG [STEPS] [MS]"
#include "ckpt_common.h"

struct ctl {
    sem_t req, rep;
    long value;
};

static void sem_wait_all(sem_t *s)
{
    while (sem_wait(s) != 0)
        if (errno != EINTR)
            fail("sem_wait: %s", strerror(errno));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *tag = argv[1];
    long steps = arg(argc, argv, 2, 300, 1, 100000), ms = arg(argc, argv, 3, 20, 0, 10000);
    struct ctl *c = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char name[64];
    snprintf(name, sizeof(name), "/share_mem_%d", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    size_t size = (size_t)(steps + 1) * sizeof(long);
    long *sq = fd < 0 || ftruncate(fd, (off_t)size) != 0
                   ? MAP_FAILED
                   : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c == MAP_FAILED || sq == MAP_FAILED)
        fail("shared memory: %s", strerror(errno));
    close(fd);
    shm_unlink(name);
    if (sem_init(&c->req, 1, 0) != 0 || sem_init(&c->rep, 1, 0) != 0)
        fail("sem_init: %s", strerror(errno));
    int seg = -1;
    for (key_t key = 0x53480000 | (key_t)(getpid() & 0xffff); seg < 0; key += 0x10000)
        if ((seg = shmget(key, 64, IPC_CREAT | IPC_EXCL | 0600)) < 0 && errno != EEXIST)
            fail("shmget: %s", strerror(errno));
    volatile long *last = shmat(seg, NULL, 0);
    if (last == (void *)-1)
        fail("shmat: %s", strerror(errno));
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0) {
        for (;;) {
            sem_wait_all(&c->req);
            long k = c->value;
            if (k < 0)
                _exit(shmdt((void *)last) == 0 ? 0 : 3);
            sq[k] = k * k;
            *last = k;
            sem_post(&c->rep);
        }
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        c->value = k;
        sem_post(&c->req);
        sem_wait_all(&c->rep);
        for (long j = 1; j <= k; j++)
            if (sq[j] != j * j)
                fail("slot %ld holds %ld at step %ld", j, sq[j], k);
        if (*last != k)
            fail("the SysV segment holds %ld at step %ld", *last, k);
        h = ckpt_fnv(h, (uint64_t)k);
        tag_step_line(tag, k);
        ckpt_sleep_ms(ms);
    }
    c->value = -1;
    sem_post(&c->req);
    reap_ok(kid, "child");
    if (shmdt((void *)last) != 0 || shmctl(seg, IPC_RMID, NULL) != 0)
        fail("shmdt/IPC_RMID of the SysV segment: %s", strerror(errno));
    return tag_done_line(tag, h, steps);
}
