/* ckpt_busy_file FILE [STEPS=150] [WORK=16000000]: a busy CPU loop (no sleeps) writing records through
   one FILE* to FILE, flushed only every 7th step; checks ftell each step and re-reads the whole file. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "ckpt_busy_file"
#define USAGE "FILE [STEPS] [WORK]"
#include "ckpt_common.h"
#define RECS 8

/* The busy part: a dependent chain of multiply-adds the compiler cannot shorten. */
static uint64_t busy(uint64_t x, long work)
{
    for (long i = 0; i < work; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static int format_rec(char *buf, size_t n, long k, int j, uint64_t v)
{
    return snprintf(buf, n, "rec %ld.%d %016llx\n", k, j, (unsigned long long)(v ^ (uint64_t)j));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " FILE [STEPS] [WORK]\n");
        return 2;
    }
    const char *path = argv[1];
    long steps = arg(argc, argv, 2, 150, 1, 10000000);
    long work = arg(argc, argv, 3, 16000000, 0, 1000000000000L);
    uint64_t *vals = calloc((size_t)steps + 1, sizeof *vals);
    if (!vals)
        fail("calloc");

    FILE *f = fopen(path, "w");
    if (!f)
        fail("fopen %s: %s", path, strerror(errno));
    long written = 0;
    uint64_t x = 0x243f6a8885a308d3ULL;
    char buf[128];
    for (long k = 1; k <= steps; k++) {
        x = busy(x, work);
        vals[k] = x;
        for (int j = 0; j < RECS; j++) {
            int n = format_rec(buf, sizeof buf, k, j, x);
            if (fputs(buf, f) == EOF)
                fail("fputs: %s", strerror(errno));
            written += n;
        }
        if (k % 7 == 0 && fflush(f) != 0)
            fail("fflush: %s", strerror(errno));
        long pos = ftell(f); /* the fd offset plus what is still buffered */
        if (pos != written)
            fail("step %ld: ftell says %ld, %ld bytes were written", k, pos, written);
        step_line(k);
    }
    if (fclose(f) != 0)
        fail("fclose: %s", strerror(errno));

    f = fopen(path, "r");
    if (!f)
        fail("reopen %s: %s", path, strerror(errno));
    char line[256];
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        for (int j = 0; j < RECS; j++) {
            format_rec(buf, sizeof buf, k, j, vals[k]);
            if (!fgets(line, sizeof line, f))
                fail("file ends early: record %ld.%d missing", k, j);
            if (strcmp(line, buf) != 0)
                fail("record %ld.%d: expected \"%.*s\", found \"%.*s\"", k, j, (int)strlen(buf) - 1,
                     buf, (int)strcspn(line, "\n"), line);
            for (const char *c = buf; *c; c++) {
                h ^= (unsigned char)*c;
                h *= 0x100000001b3ULL;
            }
        }
    }
    if (fgets(line, sizeof line, f))
        fail("extra data after the last record: \"%.*s\"", (int)strcspn(line, "\n"), line);
    fclose(f);
    printf("DONE checksum=%016llx steps=%ld bytes=%ld\n", (unsigned long long)h, steps, written);
    free(vals);
    return fflush(stdout) == 0 ? 0 : 1;
}
