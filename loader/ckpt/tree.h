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

/* Restart of a tree (crac_py/launch/tree.py forks the processes): a child of this process, its
 * pid as the program knows it and the kernel's now (--child-pid V:R); this process's parent as
 * the program knows it (--parent-pid V). 0, or -1 for a malformed value. */
int tree_restart_child(const char *spec);
int tree_restart_parent(const char *vpid);
/* After the ids of the image are mapped (restart_threads.c): add the children's and the
 * parent's. */
void tree_restart_remap(void);
/* getppid() as the program sees it (for the manifest). */
int32_t tree_program_ppid(void);

/* Children that had ended but were not waited for at the checkpoint (children.c fills it while
 * the threads are parked; the manifest lists it): the pid the program knows, and the status its
 * wait will get. */
struct tree_zombie {
    int32_t vpid;
    int wstatus;
};
void tree_zombies_clear(void);
void tree_zombie_add(int32_t pid, int wstatus);
int tree_zombies(const struct tree_zombie **out);

#endif
