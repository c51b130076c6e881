/* ckpt_perfbuf [PAGES=16] [STEPS=60]: maps a perf event's ring buffer (1 + PAGES pages), which the
   kernel excludes from core dumps itself (VM_DONTDUMP) without the program asking, then counts
   steps. A checkpoint leaves the ring's bytes out and cannot keep the event: after a restart the
   ring is plain memory that must stay excluded, and the program's counting goes on. */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define PROG "ckpt_perfbuf"
#define USAGE "[PAGES] [STEPS]"
#include "ckpt_common.h"

int main(int argc, char **argv)
{
    long pages = arg(argc, argv, 1, 16, 1, 1024);
    long steps = arg(argc, argv, 2, 60, 1, 100000);
    if (pages & (pages - 1))
        fail("PAGES must be a power of two");
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0)
        fail("perf_event_open: %s", strerror(errno));
    size_t len = (size_t)(1 + pages) * 4096;
    void *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring == MAP_FAILED)
        fail("mmap of the perf ring: %s", strerror(errno));
    printf("ring %zu\n", len);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
        ckpt_sleep_ms(50);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return 0;
}
