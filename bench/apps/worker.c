/* worker [SIZE_MIB=256] [THREADS=1] [WORK_US=20]: fills SIZE_MIB MiB with pseudo-random data
   (incompressible, never all-zero), prints `ready`, then THREADS threads work forever: each unit
   of work computes for about WORK_US us and then writes one word into the next page of the
   thread's share of the buffer (so a copy-on-write checkpoint writer costs the program page
   copies, as a real one would). Every 20 ms the main thread prints `tick N`, N the units done so
   far by all threads. For bench/pause.py: the tick rate while a checkpoint is written vs normal. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long arg(int argc, char **argv, int i, long def, long lo, long hi)
{
    if (argc <= i)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "usage: worker [SIZE_MIB] [THREADS 1..64] [WORK_US]\n");
        exit(2);
    }
    return v;
}

static uint64_t *buf;
static size_t pages_per_thread;
static long spin_iters;
static volatile uint64_t units; /* atomic */

static void *work(void *arg)
{
    uint64_t *mine = buf + (size_t)(uintptr_t)arg * pages_per_thread * 512;
    uint64_t x = 0x9e3779b97f4a7c15ULL + (uintptr_t)arg;
    for (size_t p = 0;; p = (p + 1) % pages_per_thread) {
        for (long i = 0; i < spin_iters; i++) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
        }
        mine[p * 512 + (x & 511)] = x | 1;
        __atomic_add_fetch(&units, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long mib = arg(argc, argv, 1, 256, 1, 1L << 20);
    long threads = arg(argc, argv, 2, 1, 1, 64);
    long work_us = arg(argc, argv, 3, 20, 0, 1000000);
    size_t words = (size_t)mib << 17;
    buf = malloc(words * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "worker: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)time(NULL);
    for (size_t i = 0; i < words; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        buf[i] = x * 0x2545f4914f6cdd1dULL;
    }
    pages_per_thread = words / 512 / (size_t)threads;
    spin_iters = work_us * 300; /* ~3 ns an iteration: roughly WORK_US us */
    printf("ready %ld\n", mib);
    fflush(stdout);
    for (long t = 0; t < threads; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, work, (void *)(uintptr_t)t) != 0) {
            fprintf(stderr, "worker: pthread_create failed\n");
            return 1;
        }
    }
    for (;;) {
        struct timespec ts = {0, 20 * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        printf("tick %llu\n", (unsigned long long)__atomic_load_n(&units, __ATOMIC_RELAXED));
        if (fflush(stdout) != 0)
            return 1;
    }
}
