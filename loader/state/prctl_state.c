/* prctl_state.c — the process attributes the program set with prctl (CRAC_NT_PRCTL): dumpable,
 * no_new_privs, child subreaper, timer slack. A restart is a fresh process with the defaults, so
 * a program that made itself undumpable or gave up privileges would silently lose that
 * protection (docs/TRUST.md). Restored before the threads are cloned, so they inherit it. */
#include "state.h"

#include "crac_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* A number from PATH (its "Key:" line when key is not NULL); -1 if none. */
static long long proc_number(const char *path, const char *key)
{
    char line[256];
    FILE *f = fopen(path, "re");
    long long v = -1;
    size_t n = key ? strlen(key) : 0;
    while (f && fgets(line, sizeof(line), f))
        if (!key || strncmp(line, key, n) == 0) {
            v = strtoll(line + n, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

int prctl_capture(const struct state_capture *c, void **out, size_t *len)
{
    struct crac_prctl_rec *r = calloc(1, sizeof(*r));
    if (!r)
        return -1;
    /* Per-thread attributes as the main thread (or the first one left) has them. */
    char status[96];
    snprintf(status, sizeof(status), "/proc/self/task/%d/status", (int)getpid());
    if (proc_number(status, "NoNewPrivs:") < 0 && c->n_threads > 0)
        snprintf(status, sizeof(status), "/proc/self/task/%d/status", (int)c->threads[0].tid);
    r->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    int reaper = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &reaper, 0, 0, 0);
    r->child_subreaper = reaper;
    r->no_new_privs = (int32_t)proc_number(status, "NoNewPrivs:");
    long long slack = proc_number("/proc/self/timerslack_ns", NULL);
    r->timerslack_ns = slack > 0 ? (uint64_t)slack : 0;
    *out = r;
    *len = sizeof(*r);
    return 0;
}

int prctl_restore(const struct state_restore *rs, const void *note, size_t len)
{
    (void)len; /* the table's min_len */
    const struct crac_prctl_rec *r = note;
    if (r->dumpable == 0 || r->dumpable == 1)
        prctl(PR_SET_DUMPABLE, (unsigned long)r->dumpable, 0, 0, 0);
    if (r->child_subreaper == 1)
        prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0, 0, 0);
    if (r->timerslack_ns)
        prctl(PR_SET_TIMERSLACK, (unsigned long)r->timerslack_ns, 0, 0, 0);
    /* Once set it cannot be cleared: a program that gave up gaining privileges stays so. */
    if (r->no_new_privs == 1 && prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0, 0, 0) != 0) {
        snprintf(rs->err, rs->errlen, "cannot set no_new_privs again");
        return -1;
    }
    return 0;
}
