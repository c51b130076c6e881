/* pending.c — signals pending at checkpoint (CRAC_NT_PENDING), process-wide and per thread, read
 * from /proc; raised again at restart once every thread is back under its new tid. */
#include "state.h"

#include "confine.h"
#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* "Name:\t<hex mask>" from a /proc status file. */
static uint64_t status_mask(const char *path, const char *name)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[256];
    uint64_t mask = 0;
    size_t n = strlen(name);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, name, n) == 0 && line[n] == ':')
            mask = strtoull(line + n + 1, NULL, 16);
    fclose(f);
    return mask;
}

int pending_capture(const struct state_capture *c, void **out, size_t *len)
{
    const struct parked_thread *ts = c->threads;
    int n = c->n_threads;
    size_t size = sizeof(struct crac_pending_rec) + (size_t)n * sizeof(struct crac_pending_thread);
    struct crac_pending_rec *p = calloc(1, size);
    if (!p)
        return -1;
    uint64_t reserved = crac_ctrl()->reserved_sigs;
    p->shared = status_mask("/proc/self/status", "ShdPnd") & ~reserved;
    struct crac_pending_thread *t = (struct crac_pending_thread *)(p + 1);
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/task/%d/status", ts[i].tid);
        t[i].tid = ts[i].rec->tid;
        t[i].mask = status_mask(path, "SigPnd") & ~reserved;
    }
    p->n_threads = (uint32_t)n;
    *out = p;
    *len = size;
    return 0;
}

int pending_restore(const struct state_restore *r, const void *note, size_t len)
{
    const struct crac_pending_rec *p = note;
    if (!p || len < sizeof(*p))
        return 0;
    pid_t pid = getpid();
    for (int sig = 1; sig <= 64; sig++)
        if (p->shared >> (sig - 1) & 1)
            raw_syscall2(SYS_kill, pid, sig);
    const struct crac_pending_thread *t = (const void *)(p + 1);
    for (uint32_t i = 0; i < p->n_threads && sizeof(*p) + (i + 1) * sizeof(*t) <= len; i++)
        for (int sig = 1; sig <= 64; sig++)
            if (t[i].mask >> (sig - 1) & 1)
                raw_syscall3(SYS_tgkill, pid, r->map_tid(t[i].tid), sig);
    return 0;
}
