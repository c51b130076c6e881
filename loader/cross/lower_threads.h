/* lower_threads.h — the registry of lower-half threads (never suspended, never saved). */
#ifndef CRAC_LOWER_THREADS_H
#define CRAC_LOWER_THREADS_H

#include <sys/types.h>

void lower_threads_register(pid_t tid);
void lower_threads_unregister(pid_t tid);
int lower_threads_contains(pid_t tid);
/* In a forked child: none of the recorded threads exist there. */
void lower_threads_reset(void);
/* No lower thread is being created between these two (lower_spawn.c): around the writer's fork. */
void lower_spawn_hold(void);
void lower_spawn_release(void);
/* In a forked child: no creation of the parent's is in progress here. */
void lower_spawn_reset(void);

#endif
