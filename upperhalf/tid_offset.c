/* tid_offset.c — finds where glibc's struct pthread keeps the kernel tid, without glibc's private
 * headers: scan the TCB for gettid(), then confirm on a second thread (docs/ARCHITECTURE.md "Launch" step 5). */
#include "upper_runtime.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* Stays inside struct pthread (about 2.3 KiB in glibc 2.36, tid at 0x2d0): a thread's TCB sits
 * at the very top of its stack mapping, so reading further can fault. */
#define SCAN_BYTES 1024
#define MAX_CANDIDATES 16

struct scan {
    long offsets[MAX_CANDIDATES];
    int n;
};

static void scan_self(struct scan *s)
{
    const unsigned char *pd = (const unsigned char *)pthread_self();
    pid_t tid = gettid();
    s->n = 0;
    for (long off = 0; off + (long)sizeof(pid_t) <= SCAN_BYTES && s->n < MAX_CANDIDATES;
         off += (long)sizeof(pid_t)) {
        pid_t v;
        memcpy(&v, pd + off, sizeof(v));
        if (v == tid)
            s->offsets[s->n++] = off;
    }
}

static void *scan_thread(void *arg)
{
    scan_self(arg);
    return NULL;
}

long discover_tid_offset(void)
{
    struct scan main_scan, other;
    scan_self(&main_scan);
    pthread_t t;
    if (main_scan.n == 0 || pthread_create(&t, NULL, scan_thread, &other) != 0)
        return -1;
    pthread_join(t, NULL);
    for (int i = 0; i < main_scan.n; i++)
        for (int j = 0; j < other.n; j++)
            if (main_scan.offsets[i] == other.offsets[j])
                return main_scan.offsets[i];
    return -1;
}
