/* tree.h — process trees: a fork from the upper half makes a child that is itself a split
 * process of the job (docs/DECISIONS.md "Process trees"). */
#ifndef CRAC_TREE_H
#define CRAC_TREE_H

#include <stdint.h>

/* Runs on a borrowed shadow TCB (lower libc live), called by the SIGSYS handler's fork emulation
 * through confine_lower_fork: forks with the lower libc; in the child, starts the lower half's
 * threads again and joins the job. The child pid, 0 in the child, or -errno. */
long tree_fork_lower(void);
/* Whether pid is a child this process forked as a split process. */
int tree_is_forked_child(int32_t pid);
/* Before the first fork of a process that has no coordinator: start one (`crac coordinator
 * --daemon --exit-on-last`, on a free loopback port, with a random token) and join it, so the
 * tree is one job. Says why once when it cannot. */
void tree_coord_ensure(void);

#endif
