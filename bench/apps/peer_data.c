/* peer_data SIZE_MIB KIND THREADS TICK_MS TICKFILE: the program bench/peers.py checkpoints with crac,
   CRIU and DMTCP alike. THREADS threads fill SIZE_MIB MiB between them with KIND data (`random`:
   incompressible, never a zero page; `text`: English-like words, compressible ~20-50x), then the
   main thread appends `tick N NS` (N = 1, 2, ...; NS = CLOCK_REALTIME nanoseconds) to TICKFILE every
   TICK_MS ms while the other threads sleep. A file, not stdout: every tool reopens a regular file at
   restore, none restores a pipe to the benchmark. The gaps between tick times give each tool's
   pause; the first tick after a restore gives its restart time. TICK_MS 0: write the filled data
   to TICKFILE and exit (the benchmark's floors write and compress the very same bytes). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const words[] = {
    "the",  "of",   "checkpoint", "and",    "restart",  "memory", "process", "a",     "to",
    "in",   "page", "device",     "is",     "that",     "for",    "image",   "with",  "thread",
    "on",   "as",   "split",      "kernel", "by",       "file",   "this",    "write", "cluster",
    "node", "job",  "signal",     "data",   "compress", "disk",   "lower",   "upper"};

struct share {
    char *base;
    size_t len;
    uint64_t seed;
    int text;
};

static void fill_random(uint64_t *p, size_t n, uint64_t x)
{
    for (size_t i = 0; i < n; i++) { /* xorshift64*: never 0, so no page is all zero */
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        p[i] = x * 0x2545f4914f6cdd1dULL;
    }
}

static void fill_text(char *p, size_t len, uint64_t x)
{
    size_t n = sizeof(words) / sizeof(words[0]);
    size_t at = 0;
    while (at < len) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        const char *w = words[(x * 0x2545f4914f6cdd1dULL >> 33) % n];
        for (; *w && at < len; w++)
            p[at++] = *w;
        if (at < len)
            p[at++] = (x & 15) == 0 ? '\n' : ' ';
    }
}

static void *filler(void *arg)
{
    struct share *s = arg;
    if (s->text)
        fill_text(s->base, s->len, s->seed);
    else
        fill_random((uint64_t *)s->base, s->len / 8, s->seed);
    return NULL;
}

static void *sleeper(void *arg)
{
    volatile char *keep = arg; /* the data stays reachable from this thread's stack */
    for (;;) {
        struct timespec ts = {3600, 0};
        nanosleep(&ts, NULL);
        (void)keep[0];
    }
    return NULL;
}

static void die(const char *what)
{
    fprintf(stderr, "peer_data: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: peer_data SIZE_MIB random|text THREADS TICK_MS TICKFILE\n");
        return 2;
    }
    long mib = strtol(argv[1], NULL, 10);
    int text = strcmp(argv[2], "text") == 0;
    long threads = strtol(argv[3], NULL, 10);
    long tick_ms = strtol(argv[4], NULL, 10);
    if (mib < 1 || threads < 1 || threads > 64 || tick_ms < 0 ||
        (!text && strcmp(argv[2], "random"))) {
        fprintf(stderr, "peer_data: bad arguments\n");
        return 2;
    }
    int fd = open(argv[5], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        die(argv[5]);
    size_t total = (size_t)mib << 20, part = total / (size_t)threads & ~(size_t)4095;
    char *buf = malloc(total);
    if (!buf)
        die("malloc");
    pthread_t tids[64];
    struct share shares[64];
    uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)time(NULL);
    for (long i = 0; i < threads; i++) {
        size_t off = (size_t)i * part;
        shares[i] = (struct share){buf + off, i == threads - 1 ? total - off : part,
                                   seed + (uint64_t)i * 0x51ed27, text};
        if (pthread_create(&tids[i], NULL, filler, &shares[i]) != 0)
            die("pthread_create");
    }
    for (long i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    if (tick_ms == 0) {
        for (size_t done = 0; done < total;) {
            ssize_t n = write(fd, buf + done, total - done);
            if (n <= 0)
                die("write");
            done += (size_t)n;
        }
        return 0;
    }
    for (long i = 1; i < threads; i++)
        if (pthread_create(&tids[i], NULL, sleeper, shares[i].base) != 0)
            die("pthread_create");
    char line[64];
    for (long n = 0;; n++) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int len = snprintf(line, sizeof line, n ? "tick %ld %lld\n" : "ready %ld %lld\n", n,
                           (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        if (write(fd, line, (size_t)len) != len)
            die("write");
        struct timespec ts = {tick_ms / 1000, (tick_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}
