/* shadow_borrow.c — lending the shadow pool's TCBs (shadow_pool.c creates them): borrow, return
 * and owner run with the upper fs live, so this file is TLS-free (checked by build_native.py). */
#include "shadow_pool.h"
#include "shadow_pool_int.h"

#include "crac_rawsys.h"

#include <sys/syscall.h>

uint64_t shadow_pool_borrow(void)
{
    for (;;) {
        int32_t gen = __atomic_load_n(&shadow_generation, __ATOMIC_ACQUIRE);
        int32_t born = __atomic_load_n(&shadow_born, __ATOMIC_ACQUIRE);
        int32_t free_left = 0;
        uint64_t got = 0;
        for (int32_t i = 0; i < born; i++) {
            if (__atomic_load_n(&shadow_slots[i].state, __ATOMIC_RELAXED) != SLOT_FREE)
                continue;
            if (!got &&
                __sync_bool_compare_and_swap(&shadow_slots[i].state, SLOT_FREE, SLOT_BORROWED)) {
                got = shadow_slots[i].fs;
                /* fs:0 is the TCB's own address in glibc: the borrower's upper TCB. */
                uint64_t self;
                __asm__ volatile("mov %%fs:0, %0" : "=r"(self));
                __atomic_store_n(&shadow_slots[i].owner_tid, (int32_t)raw_syscall0(SYS_gettid),
                                 __ATOMIC_RELEASE);
                __atomic_store_n(&shadow_slots[i].owner_fs, self, __ATOMIC_RELEASE);
            } else
                free_left++;
        }
        if (free_left < 2 &&
            born < SHADOW_POOL_MAX) { /* ask the manager to grow before we run dry */
            __atomic_add_fetch(&shadow_growth_wanted, 1, __ATOMIC_RELEASE);
            raw_futex_wake(&shadow_growth_wanted, RAW_WAKE_ALL);
        }
        if (got)
            return got;
        if (born >= SHADOW_POOL_MAX)
            return 0;
        raw_futex_wait(&shadow_generation, gen, NULL);
    }
}

void shadow_pool_return(uint64_t fs)
{
    int32_t born = __atomic_load_n(&shadow_born, __ATOMIC_ACQUIRE);
    for (int32_t i = 0; i < born; i++) {
        if (shadow_slots[i].fs == fs) {
            __atomic_store_n(&shadow_slots[i].owner_fs, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&shadow_slots[i].state, SLOT_FREE, __ATOMIC_RELEASE);
            return;
        }
    }
}

uint64_t shadow_pool_owner(uint64_t lower_fs, int32_t tid)
{
    int32_t born = __atomic_load_n(&shadow_born, __ATOMIC_ACQUIRE);
    for (int32_t i = 0; i < born; i++)
        if (shadow_slots[i].fs == lower_fs &&
            __atomic_load_n(&shadow_slots[i].state, __ATOMIC_ACQUIRE) == SLOT_BORROWED &&
            __atomic_load_n(&shadow_slots[i].owner_tid, __ATOMIC_ACQUIRE) == tid)
            return __atomic_load_n(&shadow_slots[i].owner_fs, __ATOMIC_ACQUIRE);
    return 0; /* not lent, or this is the parked shadow thread itself */
}
