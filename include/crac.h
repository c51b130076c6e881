/* crac.h — the C API for programs that want to know about or ask for checkpoints. The symbols are
 * weak: a program built with this header runs unchanged without crac (they are then NULL). */
#ifndef CRAC_H
#define CRAC_H

#ifdef __cplusplus
extern "C" {
#endif

/* Return values of crac_checkpoint(), as DMTCP's dmtcp_checkpoint(). */
#define CRAC_NOT_PRESENT 0
#define CRAC_AFTER_CHECKPOINT 1
#define CRAC_AFTER_RESTART 2

/* Takes a checkpoint of the whole process (the caller included) and returns once it is written
 * (CRAC_AFTER_CHECKPOINT) or, in a restarted process, once it runs again (CRAC_AFTER_RESTART).
 * -1 if the checkpoint failed. */
int crac_checkpoint(void) __attribute__((weak));
/* 1 when running under crac. */
int crac_is_enabled(void) __attribute__((weak));
/* Number of checkpoints written so far in this computation (restarts included). */
int crac_generation(void) __attribute__((weak));

/* Number of restarts this computation has been through (0 in the original run). */
int crac_restart_count(void) __attribute__((weak));
/* Blocks until the restart count differs from SEEN, and returns it (-1 without crac): a thread
 * that runs code after each restart (crac_py/api.py's after_restart hooks). */
int crac_wait_for_restart(int seen) __attribute__((weak));

/* The same, under the names programs written for DMTCP use. */
int dmtcp_checkpoint(void) __attribute__((weak));
int dmtcp_is_enabled(void) __attribute__((weak));

/* Portable use: `if (crac_is_enabled && crac_is_enabled()) crac_checkpoint();` */

#ifdef __cplusplus
}
#endif

#endif
