/* brk_guard.c — a PROT_NONE page at the kernel's break from the loader's first constructor on, so
 * the break never grows and glibc's malloc takes the lower half's heap by mmap instead. */
#include "brk_guard.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel starts a non-PIE loader's break anywhere in the 1 GiB above its ~290 MiB of data,
 * which overlaps 0x40000000-0x80000000, where a program's MAP_32BIT mappings are: a restarted
 * loader whose heap had grown over one could not hold it for the program (restart_memory.c
 * restart_hold_outside). With the break held, the lower half's heap is where the kernel places
 * mmaps, below the stacks, where the hold's MAP_FIXED_NOREPLACE comes first. */
static uintptr_t guard_at;

__attribute__((constructor(101))) static void brk_guard_place(void)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t brk = (uintptr_t)syscall(SYS_brk, 0);
    uintptr_t at = (brk + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    void *m = mmap((void *)at, (size_t)page, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == (void *)at)
        guard_at = at;
    else if (m != MAP_FAILED) /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
        munmap(m, (size_t)page);
}

void brk_guard_yield(uint64_t start, uint64_t end)
{
    if (guard_at && guard_at >= start && guard_at < end) {
        munmap((void *)guard_at, (size_t)sysconf(_SC_PAGESIZE));
        guard_at = 0;
    }
}
