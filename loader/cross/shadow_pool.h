/* shadow_pool.h — lower-half threads whose TCBs upper threads borrow for crossings (docs/ARCHITECTURE.md "Crossing"). */
#ifndef CRAC_SHADOW_POOL_H
#define CRAC_SHADOW_POOL_H

#include <stdint.h>

/* Start the pool with `initial` parked threads and the grower (manager side). 0 or -errno. */
int shadow_pool_start(int initial);
/* TLS-free: callable with the upper fs live. */
uint64_t shadow_pool_borrow(void);
void shadow_pool_return(uint64_t fs);
/* The upper fs of thread tid when it runs inside a crossing on the shadow TCB lower_fs, else 0
 * (TLS-free: the signal wrapper runs a program's handler with it, loader/confine/signal_wrap.c). */
uint64_t shadow_pool_owner(uint64_t lower_fs, int32_t tid);
/* Manager side: create threads while the pool is asked to grow. Blocks; never returns. */
void shadow_pool_serve_growth(void);
int shadow_pool_size(void);
/* In a forked child: forget the parent's slots and start `initial` threads. 0 or -errno. */
int shadow_pool_reset(int initial);

#endif
