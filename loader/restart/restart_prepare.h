/* restart_prepare.h — `crac restart` without Python (crac-loader --fast-restart, started by the
 * `crac` command, front/crac_front.c). */
#ifndef CRAC_RESTART_PREPARE_H
#define CRAC_RESTART_PREPARE_H

/* crac-loader --fast-restart SELF HELD restart [FLAGS] CHECKPOINT: checks what the Python CLI's
 * `crac restart` checks and execs the loader with the options it would give; anything else
 * (and any failed check) re-runs SELF, the `crac` command, on its Python path. Never returns. */
__attribute__((noreturn)) int restart_prepare_main(int argc, char **argv);

#endif
