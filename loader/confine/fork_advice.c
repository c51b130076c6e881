/* fork_advice.c — the ranges the program gave MADV_DONTFORK or MADV_WIPEONFORK, kept exact in the
 * control block so the forked checkpoint writer can see them (docs/DECISIONS.md "Fork advice").
 * TLS-free (raw syscalls only): runs inside the SIGSYS handler on upper-half threads. */
#include "fork_advice.h"

#include "crac_layout.h"
#include "crac_rawsys.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>

/* Insert an entry at index i; 0 when the table is full (then advice_lost is set). */
static int insert_at(struct crac_ctrl *c, uint32_t i, uint64_t start, uint64_t end, uint32_t bits)
{
    if (c->n_advice == CRAC_MAX_FORK_ADVICE) {
        c->advice_lost = 1;
        return 0;
    }
    raw_memmove(&c->advice[i + 1], &c->advice[i], (c->n_advice - i) * sizeof(c->advice[0]));
    c->advice[i] = (struct crac_advice){start, end, bits, 0};
    c->n_advice++;
    return 1;
}

/* Make addr an entry boundary: an entry that strictly contains it is cut in two. */
static int split_at(struct crac_ctrl *c, uint64_t addr)
{
    for (uint32_t k = 0; k < c->n_advice; k++) {
        struct crac_advice *a = &c->advice[k];
        if (a->start < addr && addr < a->end) {
            uint64_t end = a->end;
            a->end = addr;
            return insert_at(c, k + 1, addr, end, a->bits);
        }
    }
    return 1;
}

void advice_change(struct crac_ctrl *c, uint64_t start, uint64_t end, uint32_t set, uint32_t clear)
{
    if (start >= end || (!set && !c->n_advice))
        return;
    if (!split_at(c, start) || !split_at(c, end))
        return;
    /* Entries inside [start,end) change; the gaps between them get an entry when bits are set. */
    uint64_t at = start;
    uint32_t k = 0;
    while (k < c->n_advice && c->advice[k].end <= start)
        k++;
    for (; at < end; k++) {
        uint64_t next = k < c->n_advice && c->advice[k].start < end ? c->advice[k].start : end;
        if (at < next && set) {
            if (!insert_at(c, k, at, next, set))
                break;
            k++;
        }
        if (next == end)
            break;
        c->advice[k].bits = (c->advice[k].bits & ~clear) | set;
        at = c->advice[k].end;
    }
    /* Drop entries left without advice and join neighbours with the same bits. */
    uint32_t out = 0;
    for (uint32_t i = 0; i < c->n_advice; i++) {
        struct crac_advice a = c->advice[i];
        if (!a.bits)
            continue;
        if (out && c->advice[out - 1].end == a.start && c->advice[out - 1].bits == a.bits) {
            c->advice[out - 1].end = a.end;
            continue;
        }
        __asm__ volatile("" ::: "memory");
        c->advice[out++] = a;
    }
    c->n_advice = out;
}

uint32_t advice_bits_at(const struct crac_ctrl *c, uint64_t addr)
{
    for (uint32_t k = 0; k < c->n_advice; k++)
        if (c->advice[k].start <= addr && addr < c->advice[k].end)
            return c->advice[k].bits;
    return 0;
}

void advice_record(struct crac_ctrl *c, uint64_t start, uint64_t end, long advice)
{
    switch (advice) {
    case MADV_DONTFORK: advice_change(c, start, end, CRAC_ADVICE_DONTFORK, 0); break;
    case MADV_DOFORK: advice_change(c, start, end, 0, CRAC_ADVICE_DONTFORK); break;
    case MADV_WIPEONFORK: advice_change(c, start, end, CRAC_ADVICE_WIPEONFORK, 0); break;
    case MADV_KEEPONFORK: advice_change(c, start, end, 0, CRAC_ADVICE_WIPEONFORK); break;
    default: break;
    }
}

/* Apply, for every entry with BIT, ADVICE to its range; the first error, or 0. */
static long advise_all(const struct crac_ctrl *c, uint32_t bit, long advice)
{
    long first = 0;
    for (uint32_t k = 0; k < c->n_advice; k++) {
        const struct crac_advice *a = &c->advice[k];
        if (!(a->bits & bit))
            continue;
        long r = raw_syscall3(SYS_madvise, a->start, a->end - a->start, advice);
        if (raw_is_err(r) && !first)
            first = r;
    }
    return first;
}

long advice_lift(const struct crac_ctrl *c)
{
    if (c->advice_lost)
        return -ENOSPC;
    long r = advise_all(c, CRAC_ADVICE_DONTFORK, MADV_DOFORK);
    long w = advise_all(c, CRAC_ADVICE_WIPEONFORK, MADV_KEEPONFORK);
    return r ? r : w;
}

long advice_apply(const struct crac_ctrl *c)
{
    long r = advise_all(c, CRAC_ADVICE_DONTFORK, MADV_DONTFORK);
    long w = advise_all(c, CRAC_ADVICE_WIPEONFORK, MADV_WIPEONFORK);
    return r ? r : w;
}
