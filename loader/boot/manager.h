/* manager.h — the lower-half manager thread (docs/ARCHITECTURE.md "The split process", "Checkpoint"). */
#ifndef CRAC_MANAGER_H
#define CRAC_MANAGER_H

/* The manager, the shadow-pool grower and the thread that takes the checkpoint signal. */
int manager_start(int ckpt_signal);

#endif
