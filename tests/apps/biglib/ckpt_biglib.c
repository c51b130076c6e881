/* ckpt_biglib.c — checkpoints a program that links a library with 2 MiB-aligned segments (as
   PyPI's manylinux wheels are built), and one page of that library's PROT_NONE alignment gap that
   the program wrote (made anonymous) and protected again: both must survive a restart. */
#define PROG "ckpt_biglib"
#define USAGE "[STEPS] [MS]"
#include "../ckpt_common.h"

#include <stdint.h>
#include <sys/mman.h>

uint64_t biglib_step(uint64_t k);

/* The first page of the gap after the library's text: PROT_NONE, mapped from the file. */
static unsigned char *gap_page(void)
{
    uintptr_t text = (uintptr_t)biglib_step;
    return (unsigned char *)((text + 0x1000) & ~(uintptr_t)0xfff);
}

static void check_gap(unsigned char *page, const char *when)
{
    if (mprotect(page, 4096, PROT_READ) != 0)
        fail("mprotect(PROT_READ) %s: %s", when, strerror(errno));
    for (int i = 0; i < 4096; i++)
        if (page[i] != (unsigned char)(i * 7 + 1))
            fail("gap page byte %d is %u %s", i, page[i], when);
    if (mprotect(page, 4096, PROT_NONE) != 0)
        fail("mprotect(PROT_NONE) %s: %s", when, strerror(errno));
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 300, 1, 1000000);
    long ms = arg(argc, argv, 2, 10, 0, 10000);
    unsigned char *page = gap_page();
    if (mprotect(page, 4096, PROT_READ | PROT_WRITE) != 0)
        fail("mprotect(RW): %s", strerror(errno));
    for (int i = 0; i < 4096; i++)
        page[i] = (unsigned char)(i * 7 + 1);
    if (mprotect(page, 4096, PROT_NONE) != 0)
        fail("mprotect(PROT_NONE): %s", strerror(errno));
    uint64_t sum = 0;
    for (long k = 1; k <= steps; k++) {
        sum += biglib_step((uint64_t)k);
        if (k % 16 == 0)
            check_gap(page, "during the run");
        step_line(k);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    check_gap(page, "at the end");
    printf("DONE sum=%016llx steps=%ld\n", (unsigned long long)sum, steps);
    return 0;
}
