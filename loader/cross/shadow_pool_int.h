/* shadow_pool_int.h — the shadow pool's state, shared by shadow_pool.c (which creates the threads)
 * and shadow_borrow.c (TLS-free lending); nothing else includes it. */
#ifndef CRAC_SHADOW_POOL_INT_H
#define CRAC_SHADOW_POOL_INT_H

#include "crac_rawsys.h"

#include <stdint.h>

#define SHADOW_POOL_MAX 1024

enum { SLOT_UNBORN = 0, SLOT_FREE = 1, SLOT_BORROWED = 2 };

struct shadow_slot {
    uint64_t fs;
    volatile int32_t state;
    volatile uint64_t owner_fs; /* the borrowing upper thread's fs (its TCB address), or 0 */
    volatile int32_t owner_tid; /* and its kernel tid */
};

extern struct shadow_slot shadow_slots[SHADOW_POOL_MAX];
extern volatile int32_t shadow_born;          /* slots [0, shadow_born) hold a live thread */
extern volatile int32_t shadow_generation;    /* futex: bumped each time threads are added */
extern volatile int32_t shadow_growth_wanted; /* futex: the manager waits on it */

#endif
