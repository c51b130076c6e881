/* ckpt_uring FILE [STEPS=60]: reads FILE's first 8 bytes through io_uring (raw system calls, the
   rings mapped as the kernel places them) every step. Under crac the rings must map (io_uring
   refuses a given address). A checkpoint cannot save the ring: after a restart io_uring_enter
   fails on what is left of its descriptor, and the program says `ring lost` and ends cleanly. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define PROG "ckpt_uring"
#define USAGE "FILE [STEPS]"
#include "ckpt_common.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: " PROG " " USAGE);
    long steps = arg(argc, argv, 2, 60, 1, 100000);
    int file = open(argv[1], O_RDONLY);
    if (file < 0)
        fail("open %s: %s", argv[1], strerror(errno));
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    int ring = (int)syscall(SYS_io_uring_setup, 4, &p);
    if (ring < 0)
        fail("io_uring_setup: %s", strerror(errno));
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                    IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                    IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes =
        mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
        fail("mmap of the rings: %s", strerror(errno));
    uint32_t *sq_tail = (uint32_t *)(sq + p.sq_off.tail),
             *sq_mask = (uint32_t *)(sq + p.sq_off.ring_mask);
    uint32_t *sq_array = (uint32_t *)(sq + p.sq_off.array);
    uint32_t *cq_head = (uint32_t *)(cq + p.cq_off.head),
             *cq_tail = (uint32_t *)(cq + p.cq_off.tail);
    uint32_t *cq_mask = (uint32_t *)(cq + p.cq_off.ring_mask);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    char want[8];
    if (pread(file, want, sizeof(want), 0) != (ssize_t)sizeof(want))
        fail("pread: %s", strerror(errno));
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        char got[8] = {0};
        uint32_t tail = __atomic_load_n(sq_tail, __ATOMIC_ACQUIRE), at = tail & *sq_mask;
        memset(&sqes[at], 0, sizeof(sqes[at]));
        sqes[at].opcode = IORING_OP_READ;
        sqes[at].fd = file;
        sqes[at].addr = (uint64_t)(uintptr_t)got;
        sqes[at].len = sizeof(got);
        sqes[at].user_data = (uint64_t)k;
        sq_array[at] = at;
        __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
        long r = syscall(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        if (r < 0) {
            printf("ring lost at step %ld (%s)\n", k, strerror(errno));
            printf("DONE checksum=lost steps=%ld\n", steps);
            return 0;
        }
        uint32_t head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
        if (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE))
            fail("step %ld: no completion", k);
        struct io_uring_cqe *c = &cqes[head & *cq_mask];
        if (c->user_data != (uint64_t)k || c->res != (int)sizeof(got) || memcmp(got, want, 8))
            fail("step %ld: completion %llu res %d", k, (unsigned long long)c->user_data, c->res);
        __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
        ckpt_sleep_ms(30);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return 0;
}
