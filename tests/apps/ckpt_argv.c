/* ckpt_argv.c — prints `step N` lines and ends with a hash of its own path and arguments, bytes
   as they are: a restart must give the program exactly what it was started with.
   Usage: ckpt_argv STEPS MS [ANY...] */
#define PROG "ckpt_argv"
#define USAGE "STEPS MS [ANY...]"
#include "ckpt_common.h"

#include <stdint.h>

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 300, 1, 1000000);
    long ms = arg(argc, argv, 2, 10, 0, 10000);
    uint64_t h = 0xCBF29CE484222325ULL;
    for (int i = 0; i < argc; i++)
        for (const unsigned char *c = (const unsigned char *)argv[i];; c++) {
            h = (h ^ *c) * 0x100000001B3ULL;
            if (!*c)
                break;
        }
    for (long k = 1; k <= steps; k++) {
        step_line(k);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    printf("DONE argc=%d argv_hash=%016llx steps=%ld\n", argc, (unsigned long long)h, steps);
    return 0;
}
