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
/* Before a fork's lock is taken (TLS-free, in the SIGSYS handler; FAILED 0): 0 to go on, 1 when
 * this fork would start the coordinator while the process is being checkpointed alone, which
 * must take the process before the fork: the handler makes the program issue the call again
 * (once that checkpoint has parked the thread at it, or is over). FAILED 1: the fork failed
 * before tree_coord_ensure, which would have let the gate go. */
int tree_coord_gate(int failed);

/* Restart of a tree (crac_py/launch/tree.py forks the processes): a child of this process, its
 * pid as the program knows it and the kernel's now (--child-pid V:R); this process's parent as
 * the program knows it (--parent-pid V). 0, or -1 for a malformed value. */
int tree_restart_child(const char *spec);
/* The kernel's pid now of the restarted child the program knows as VPID (0: not one). */
int32_t tree_restart_child_real(int32_t vpid);
int tree_restart_parent(const char *vpid);
/* 1 in a process a fork in the job made (or its exec, or its restart: --forked 1); 0 in a
 * process crac launched. The manifest says it: a restart script does not wait for a process
 * that was forked and outlived its parent in the job (a daemon), as its launch did not. */
extern int tree_forked;
/* After the ids of the image are mapped (restart_threads.c): add the children's and the
 * parent's. */
void tree_restart_remap(void);
/* The coordinator's `go` after a restart: "pids":[[vpid,pid],...] of the job's processes on this
 * host whose pid changed, added to the id map (a sibling or cousin signalled by the pid the
 * program knew). Ids already mapped and this process's own are left as they are. */
void tree_restart_job_pids(const char *go_line);
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
/* Running children checkpointed with this process in the job (children.c fills it with the
 * zombies): their pids as the program knows them. */
int tree_members(const int32_t **out);

/* Process groups and sessions (loader/state/pgrp.c): a restarted process's group (session: 1,
 * its session) id as the program knows it and the kernel's now (--group-id / --session-id V:R;
 * 0, or -1 for a malformed value). Apart from the pid map: after a restart one kernel id can be
 * both the group and the session id the program knew as two. The SIGSYS handler reads them. */
#define TREE_MAX_VGROUPS 8
struct tree_vgroup {
    int32_t virt, real, session;
};
extern struct tree_vgroup tree_vgroups[TREE_MAX_VGROUPS];
extern int tree_n_vgroups;
struct crac_ctrl;
int tree_restart_group_id(const char *spec, int session);
/* After the children's ids are mapped: the parent's pid as the program knows it. */
void tree_restart_group_remap(struct crac_ctrl *c);
/* The id map's entries that name a process by PID, a pid the kernel just gave a new child (that
 * process is gone): dropped. The caller holds the control block's lock. */
void tree_forget_reused_pid(struct crac_ctrl *c, int32_t pid);
/* This process's group and session ids as the program knows them (for the manifest). */
int32_t tree_program_pgid(void);
/* The kernel's process group REAL as the program knows it. */
int32_t tree_program_group(int32_t real);
int32_t tree_program_sid(void);

/* Live children forked as split processes (kernel pids), up to max; how many. */
int tree_children_list(int32_t *out, int max);

/* Exec under crac (tree_exec.c, docs/DECISIONS.md "Exec under crac"). Runs on a borrowed lower
 * TCB for the SIGSYS handler's execve: -errno when the exec fails (decided before the image is
 * replaced where the kernel would refuse it), else it does not return. */
struct tree_exec_call {
    int at;     /* execveat */
    long dirfd; /* execveat's */
    long flags; /* execveat's */
    const char *path;
    char *const *argv, *const *envp;
    uint64_t mask; /* the calling thread's mask as the program has it (the handler's undone) */
};
long tree_exec_lower(const struct tree_exec_call *x);
/* The exec'd loader's side. Its --exec-* options (1: taken, -1: malformed, 0: not one). */
int tree_exec_option(const char *name, const char *value);
/* This loader's device options, which an exec'd one gets again. */
void tree_exec_device(const char *device, int sim_version, const char *cuda_runtime);
/* After the control block exists: the ids, children, signal view and image lineage the
 * exec'ing process had. */
void tree_exec_apply(void);
/* The pid the program knows (for the coordinator's hello). */
int tree_exec_vpid(void);
/* The seccomp filter to add: -1 none (the inherited one does), else confine_install_filter's
 * argument. */
int tree_exec_filter(void);
/* Joined the coordinator: the exec'ing loader's connection may close now. */
void tree_exec_joined(void);
struct crac_registry;
/* The upper runtime registered: its generations go on from the lineage's. */
void tree_exec_registered(struct crac_registry *r);

#endif
