/* seccomp_state.c — the program's own seccomp filters and per-thread prctl state (CRAC_NT_SECCOMP):
 * saved from what confine_seccomp.c recorded, checked, and installed again last at restart. */
#include "state.h"

#include "confine_seccomp.h"
#include "crac_image.h"
#include "restart.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_GET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif

int seccomp_filters_of(int32_t real_tid)
{
    char path[64], line[128];
    if (real_tid)
        snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)real_tid);
    else
        snprintf(path, sizeof(path), "/proc/thread-self/status");
    FILE *f = fopen(path, "re");
    int n = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "Seccomp_filters:", 16) == 0) {
            n = atoi(line + 16);
            break;
        }
    if (f)
        fclose(f);
    return n;
}

/* A thread's comm (PR_SET_NAME, pthread_setname_np): per thread, readable from /proc only. */
static void thread_name(int32_t real_tid, char name[16])
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)real_tid);
    FILE *f = fopen(path, "re");
    if (f && fgets(name, 16, f))
        name[strcspn(name, "\n")] = '\0';
    if (f)
        fclose(f);
}

static int popcount64(uint64_t m) { return __builtin_popcountll(m); }

/* Which of the recorded filters thread TID has, given that /proc counts K of the program's on it.
 * The kernel shows no more than the count: the filters installed for every thread (TSYNC) or by
 * the thread itself when they add up to K, else the first K (it inherited them at its creation).
 * docs/DECISIONS.md, "Seccomp filters and prctl state across a restart". */
static uint64_t thread_filters(const struct seccomp_table *t, int32_t tid, int k)
{
    if (k <= 0)
        return 0;
    if (k >= t->n_filters)
        return t->n_filters >= 64 ? ~0ULL : (1ULL << t->n_filters) - 1;
    uint64_t own = 0;
    for (int i = 0; i < t->n_filters; i++)
        if ((t->filters[i].flags & SECCOMP_FILTER_FLAG_TSYNC) || t->filters[i].tid == tid)
            own |= 1ULL << i;
    return popcount64(own) == k ? own : (1ULL << k) - 1;
}

int seccomp_capture(const struct state_capture *c, void **out, size_t *len)
{
    const struct seccomp_table *t = &seccomp_table; /* the program's threads are parked */
    if (t->lost)
        state_loss("%d seccomp filters beyond the first %d are not saved: they are lost at restart",
                   t->lost, SECCOMP_MAX_FILTERS);
    size_t size = sizeof(struct crac_seccomp_rec) +
                  (size_t)c->n_threads * sizeof(struct crac_seccomp_thread_rec);
    for (int i = 0; i < t->n_filters; i++) {
        size += sizeof(struct crac_seccomp_filter_rec) + t->filters[i].n_insns * 8UL;
        if (t->filters[i].flags & SECCOMP_FILTER_FLAG_NEW_LISTENER)
            state_loss("a seccomp filter's notification fd (SECCOMP_FILTER_FLAG_NEW_LISTENER) "
                       "cannot be restored: the filter comes back without it");
    }
    unsigned char *b = calloc(1, size);
    if (!b)
        return -1;
    struct crac_seccomp_rec *h = (struct crac_seccomp_rec *)b;
    h->n_filters = (uint32_t)t->n_filters;
    h->n_threads = (uint32_t)c->n_threads;
    h->thp_disable = (int32_t)prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1;
    int mdwe = (int)prctl(PR_GET_MDWE, 0, 0, 0, 0);
    h->mdwe = mdwe > 0 ? mdwe : 0;
    size_t off = sizeof(*h);
    for (int i = 0; i < t->n_filters; i++) {
        const struct seccomp_filter_entry *f = &t->filters[i];
        struct crac_seccomp_filter_rec r = {f->flags, f->n_insns, f->tid, 0};
        memcpy(b + off, &r, sizeof(r));
        memcpy(b + off + sizeof(r), f->insns, f->n_insns * 8UL);
        off += sizeof(r) + f->n_insns * 8UL;
    }
    for (int i = 0; i < c->n_threads; i++) {
        int32_t tid = c->threads[i].rec->tid;
        int count = seccomp_filters_of(c->threads[i].tid);
        struct crac_seccomp_thread_rec r = {tid, 0, 0, {0}};
        thread_name(c->threads[i].tid, r.name);
        if (count >= 0)
            r.filters = thread_filters(t, tid, count - t->base);
        if (count - t->base > t->n_filters + t->lost)
            state_loss("thread %d has seccomp filters crac did not see installed (from before an "
                       "exec?): they are lost at restart",
                       (int)tid);
        for (int k = 0; k < t->n_threads; k++)
            if (t->threads[k].tid == tid)
                r.pdeathsig = t->threads[k].pdeathsig;
        memcpy(b + off, &r, sizeof(r));
        off += sizeof(r);
    }
    *out = b;
    *len = size;
    return 0;
}

const char *seccomp_note_check(const void *note, size_t len)
{
    const unsigned char *b = note;
    struct crac_seccomp_rec h;
    if (len < sizeof(h))
        return "the seccomp note is too short";
    memcpy(&h, b, sizeof(h));
    if (h.n_filters > SECCOMP_MAX_FILTERS || h.n_threads > SECCOMP_MAX_THREADS)
        return "the seccomp note counts more filters or threads than crac records";
    if ((h.thp_disable != 0 && h.thp_disable != 1) || h.mdwe < 0 || h.mdwe > 3)
        return "bad process state in the seccomp note";
    size_t off = sizeof(h);
    for (uint32_t i = 0; i < h.n_filters; i++) {
        struct crac_seccomp_filter_rec r;
        if (len - off < sizeof(r))
            return "the seccomp note is shorter than its filters";
        memcpy(&r, b + off, sizeof(r));
        if (r.n_insns < 1 || r.n_insns > SECCOMP_MAX_INSNS)
            return "a seccomp filter of no or too many instructions";
        off += sizeof(r);
        if (len - off < r.n_insns * 8UL)
            return "the seccomp note is shorter than its filters";
        off += r.n_insns * 8UL;
    }
    if (len - off != (size_t)h.n_threads * sizeof(struct crac_seccomp_thread_rec))
        return "the seccomp note's thread records do not fill it";
    for (uint32_t i = 0; i < h.n_threads; i++) {
        struct crac_seccomp_thread_rec r;
        memcpy(&r, b + off + i * sizeof(r), sizeof(r));
        if (r.pdeathsig < 0 || r.pdeathsig > 64 || memchr(r.name, 0, sizeof(r.name)) == NULL ||
            (h.n_filters < 64 && (r.filters >> h.n_filters) != 0))
            return "a bad thread record in the seccomp note";
    }
    return NULL;
}

int seccomp_hold(const struct state_restore *r, const void *note, size_t len)
{
    (void)r, (void)note, (void)len;
    seccomp_gate_used = 1; /* restored threads wait for seccomp_restore */
    return 0;
}

static void open_gate(void)
{
    __atomic_store_n(&seccomp_gate, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &seccomp_gate, 129 /* WAKE_PRIVATE */, 0x7fffffff, NULL, NULL, 0);
}

/* Last of the restore (STATE_WITH_THREADS, after the other kinds): crac's own work might be
 * forbidden by the program's filters, which natively never applied to it. */
int seccomp_restore(const struct state_restore *rs, const void *note, size_t len)
{
    const unsigned char *b = note;
    const char *why = seccomp_note_check(note, len);
    if (why) {
        snprintf(rs->err, rs->errlen, "image corrupted: %s", why);
        return -1;
    }
    struct crac_seccomp_rec h;
    memcpy(&h, b, sizeof(h));
    struct seccomp_table *t = &seccomp_table;
    size_t off = sizeof(h);
    /* Kept as the record for the next checkpoint, exactly as confine_seccomp.c makes it. */
    t->n_filters = 0;
    for (uint32_t i = 0; i < h.n_filters; i++) {
        struct crac_seccomp_filter_rec r;
        memcpy(&r, b + off, sizeof(r));
        void *insns = malloc(r.n_insns * 8UL);
        if (!insns) {
            snprintf(rs->err, rs->errlen, "out of memory for the seccomp filters");
            return -1;
        }
        memcpy(insns, b + off + sizeof(r), r.n_insns * 8UL);
        t->filters[t->n_filters++] =
            (struct seccomp_filter_entry){r.flags, r.n_insns, r.tid, insns};
        off += sizeof(r) + r.n_insns * 8UL;
    }
    seccomp_plans = calloc(h.n_threads + 1, sizeof(*seccomp_plans));
    if (!seccomp_plans) {
        snprintf(rs->err, rs->errlen, "out of memory for the seccomp filters");
        return -1;
    }
    /* The filters every thread has that the program installed with TSYNC, in order from the
     * first: installed again once for all with TSYNC, so they stay one filter the threads share
     * (crac's own threads got them natively too). The others each thread installs itself:
     * crac's threads never had them (docs/DECISIONS.md). */
    uint64_t common = h.n_filters >= 64 ? ~0ULL : (1ULL << h.n_filters) - 1;
    t->n_threads = 0;
    for (uint32_t i = 0; i < h.n_threads; i++) {
        struct crac_seccomp_thread_rec r;
        memcpy(&r, b + off + i * sizeof(r), sizeof(r));
        common &= r.filters;
        seccomp_plans[i] = (struct seccomp_resume_plan){r.tid, r.pdeathsig, r.filters, {0}};
        memcpy(seccomp_plans[i].name, r.name, sizeof(r.name));
        if (r.pdeathsig)
            t->threads[t->n_threads++] = (struct seccomp_thread_entry){r.tid, r.pdeathsig};
    }
    int prefix = 0;
    while (prefix < (int)h.n_filters && (common >> prefix & 1) &&
           (t->filters[prefix].flags & SECCOMP_FILTER_FLAG_TSYNC))
        prefix++;
    for (uint32_t i = 0; i < h.n_threads; i++)
        seccomp_plans[i].filters &= ~((prefix >= 64 ? ~0ULL : (1ULL << prefix) - 1));
    seccomp_n_plans = (int)h.n_threads;
    if (h.thp_disable)
        prctl(PR_SET_THP_DISABLE, 1UL, 0, 0, 0);
    for (int i = 0; i < prefix; i++) {
        const struct seccomp_filter_entry *f = &t->filters[i];
        struct sock_fprog fp = {(unsigned short)f->n_insns, (struct sock_filter *)f->insns};
        unsigned long flags =
            (f->flags & ~SECCOMP_FILTER_FLAG_NEW_LISTENER) | SECCOMP_FILTER_FLAG_TSYNC;
        long got = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fp);
        if (got != 0) {
            if (got > 0)
                snprintf(rs->err, rs->errlen,
                         "cannot install the program's seccomp filter %d again: thread %ld "
                         "cannot be synchronized",
                         i + 1, got);
            else
                snprintf(rs->err, rs->errlen,
                         "cannot install the program's seccomp filter %d again: %s", i + 1,
                         strerror(errno));
            return -1;
        }
    }
    /* Last: it forbids nothing crac's restore still does, but once set it stays. */
    if (h.mdwe && prctl(PR_SET_MDWE, (unsigned long)h.mdwe, 0, 0, 0) != 0) {
        snprintf(rs->err, rs->errlen, "cannot set memory-deny-write-execute again: %s",
                 strerror(errno));
        return -1;
    }
    open_gate();
    return 0;
}
