/* fork_advice.h — the table of the program's MADV_DONTFORK / MADV_WIPEONFORK ranges in the control
 * block (upper_alloc.h) and what the checkpoint and restart do with it. TLS-free. */
#ifndef CRAC_FORK_ADVICE_H
#define CRAC_FORK_ADVICE_H

#include "upper_alloc.h"

/* Set BITS on [start,end) and CLEAR others (advice bits); the caller holds c->lock. A table
 * that cannot grow sets c->advice_lost: the next checkpoint refuses rather than lose memory. */
void advice_change(struct crac_ctrl *c, uint64_t start, uint64_t end, uint32_t set, uint32_t clear);

/* The effect of a successful madvise(start, end - start, ADVICE) on the table. */
void advice_record(struct crac_ctrl *c, uint64_t start, uint64_t end, long advice);

uint32_t advice_bits_at(const struct crac_ctrl *c, uint64_t addr);

/* Before the writer's fork: MADV_DOFORK / MADV_KEEPONFORK over the recorded ranges, so the copy
 * holds their bytes; -ENOSPC when the table lost ranges, else the first madvise error. */
long advice_lift(const struct crac_ctrl *c);

/* The program's advice again: after the writer's fork, and after a restart's memory is back. */
long advice_apply(const struct crac_ctrl *c);

#endif
