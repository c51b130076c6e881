/* rlimits.c — resource limits (CRAC_NT_RLIMITS), soft and hard: restored last at restart; a hard
 * limit that cannot be raised back keeps today's value and is named on stderr in one line. */
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

int rlimits_capture(const struct state_capture *c, void **out, size_t *len)
{
    (void)c;
    struct crac_rlimit_rec *r = calloc(CRAC_N_RLIMITS, sizeof(*r));
    if (!r)
        return -1;
    for (int res = 0; res < CRAC_N_RLIMITS; res++) {
        struct rlimit l;
        if (getrlimit(res, &l) != 0) {
            free(r);
            return -1;
        }
        r[res] = (struct crac_rlimit_rec){l.rlim_cur, l.rlim_max};
    }
    *out = r;
    *len = CRAC_N_RLIMITS * sizeof(*r);
    return 0;
}

static const char *const rlimit_names[CRAC_N_RLIMITS] = {
    "CPU",     "FSIZE", "DATA",  "STACK",      "CORE",     "RSS",  "NPROC",  "NOFILE",
    "MEMLOCK", "AS",    "LOCKS", "SIGPENDING", "MSGQUEUE", "NICE", "RTPRIO", "RTTIME"};

static void limit_str(char *buf, size_t n, uint64_t v)
{
    if (v == (uint64_t)RLIM_INFINITY)
        snprintf(buf, n, "unlimited");
    else
        snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* Lowering always works; raising a hard limit needs CAP_SYS_RESOURCE, which the restarting user
 * may lack where the checkpointing one had it or ran under higher limits. Such a limit keeps the
 * hard value it has here, its soft value capped under it, and one line says which. */
int rlimits_restore(const struct state_restore *rs, const void *note, size_t len)
{
    (void)rs;
    const struct crac_rlimit_rec *r = note;
    if (!r || len < CRAC_N_RLIMITS * sizeof(*r))
        return 0;
    char refused[1024] = "";
    size_t used = 0;
    for (int res = 0; res < CRAC_N_RLIMITS; res++) {
        struct rlimit want = {r[res].cur, r[res].max}, now;
        if (getrlimit(res, &now) != 0 ||
            (now.rlim_cur == want.rlim_cur && now.rlim_max == want.rlim_max))
            continue;
        if (setrlimit(res, &want) == 0)
            continue;
        struct rlimit capped = {want.rlim_cur < now.rlim_max ? want.rlim_cur : now.rlim_max,
                                now.rlim_max};
        setrlimit(res, &capped);
        char a[24], b[24];
        limit_str(a, sizeof(a), want.rlim_max);
        limit_str(b, sizeof(b), now.rlim_max);
        int w = snprintf(refused + used, sizeof(refused) - used, "%s%s %s (stays %s)",
                         used ? ", " : "", rlimit_names[res], a, b);
        if (w > 0 && (size_t)w < sizeof(refused) - used)
            used += (size_t)w;
    }
    if (used)
        fprintf(stderr,
                "crac: warning: cannot raise hard resource limits back to the checkpointed "
                "values: %s\n",
                refused);
    return 0;
}
