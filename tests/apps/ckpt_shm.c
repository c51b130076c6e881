/* ckpt_shm [STEPS=60]: shared memory mapped twice in one process, each pair of mappings checked to
   show one another's writes every step: a POSIX shm object (kept), another one unlinked at once,
   a MAP_SHARED|MAP_ANONYMOUS region duplicated with mremap, and a SysV segment attached twice
   (removed with IPC_RMID at once; detached with shmdt at the end). Earlier steps' bytes must
   stay, later steps' must not be there yet. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>

#define PROG "ckpt_shm"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

#define SIZE (64 * 4096)
#define N_PAIRS 4

static const char *names[N_PAIRS] = {"posix shm", "unlinked posix shm", "shared anonymous",
                                     "sysv shm"};

static unsigned char *posix_pair(const char *name, int unlink_now, unsigned char **second)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, SIZE) != 0)
        fail("shm_open %s: %s", name, strerror(errno));
    unsigned char *a = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unsigned char *b = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (a == MAP_FAILED || b == MAP_FAILED)
        fail("mmap %s: %s", name, strerror(errno));
    close(fd);
    if (unlink_now && shm_unlink(name) != 0)
        fail("shm_unlink %s: %s", name, strerror(errno));
    *second = b;
    return a;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 60);
    unsigned char *a[N_PAIRS], *b[N_PAIRS];
    char kept[64], gone[64];
    snprintf(kept, sizeof kept, "/ckpt_shm-kept-%d", (int)getpid());
    snprintf(gone, sizeof gone, "/ckpt_shm-gone-%d", (int)getpid());
    a[0] = posix_pair(kept, 0, &b[0]);
    a[1] = posix_pair(gone, 1, &b[1]);
    a[2] = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (a[2] == MAP_FAILED)
        fail("mmap shared anonymous: %s", strerror(errno));
    b[2] = mremap(a[2], 0, SIZE, MREMAP_MAYMOVE); /* a second mapping of the same pages */
    if (b[2] == MAP_FAILED)
        fail("mremap: %s", strerror(errno));
    int id = shmget(IPC_PRIVATE, SIZE, IPC_CREAT | 0600);
    if (id < 0)
        fail("shmget: %s", strerror(errno));
    a[3] = shmat(id, NULL, 0);
    b[3] = shmat(id, NULL, 0);
    if (a[3] == (void *)-1 || b[3] == (void *)-1 || shmctl(id, IPC_RMID, NULL) != 0)
        fail("shmat: %s", strerror(errno));
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        size_t at = (size_t)k * 4096 + (size_t)(k % 17) * 8;
        for (int p = 0; p < N_PAIRS; p++) {
            if (a[p] == b[p])
                fail("step %ld: %s: the two mappings are one", k, names[p]);
            a[p][at] = (unsigned char)(k * 3 + p);
            if (b[p][at] != (unsigned char)(k * 3 + p))
                fail("step %ld: %s: the second mapping does not see the first's write", k,
                     names[p]);
            b[p][at + 1] = (unsigned char)(k * 5 + p);
            if (a[p][at + 1] != (unsigned char)(k * 5 + p))
                fail("step %ld: %s: the first mapping does not see the second's write", k,
                     names[p]);
            for (long j = 1; j < k; j++) {
                size_t old = (size_t)j * 4096 + (size_t)(j % 17) * 8;
                if (a[p][old] != (unsigned char)(j * 3 + p) ||
                    b[p][old + 1] != (unsigned char)(j * 5 + p))
                    fail("step %ld: %s: step %ld's bytes are lost", k, names[p], j);
            }
            /* Nor are later steps' bytes there yet: a restart must not bring back what a killed
             * run wrote after the checkpoint (the kept shm object outlives it). */
            for (long j = k + 1; j <= steps; j++) {
                size_t later = (size_t)j * 4096 + (size_t)(j % 17) * 8;
                if (a[p][later] || a[p][later + 1])
                    fail("step %ld: %s: step %ld's bytes are there already", k, names[p], j);
            }
            sum = sum * 31 + a[p][at] + b[p][at + 1];
        }
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    /* The SysV attachments are still SysV attachments. */
    if (shmdt(a[3]) != 0 || shmdt(b[3]) != 0)
        fail("shmdt: %s", strerror(errno));
    shm_unlink(kept);
    printf("DONE steps=%ld sum=%lu\n", steps, sum);
    return fflush(stdout) == 0 ? 0 : 1;
}
