/* manager.h — the lower-half manager thread (DESIGN §2, §7). */
#ifndef CRAC_MANAGER_H
#define CRAC_MANAGER_H

int manager_start(void);

#endif
