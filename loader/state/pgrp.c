/* pgrp.c — process groups and sessions of a restarted tree: the group and session ids the program
 * knows, mapped to the kernel's ones crac_py/launch/tree.py recreated (--group-id, --session-id). */
#include "tree.h"

#include "upper_alloc.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Read by the SIGSYS handler (loader/confine/confine_trap.c), written only before the upper half
 * runs. A forked child keeps them: it starts in its parent's group and session. */
struct tree_vgroup tree_vgroups[TREE_MAX_VGROUPS];
int tree_n_vgroups;

int tree_restart_group_id(const char *spec, int session)
{
    int v, r, n = 0;
    if (sscanf(spec, "%d:%d%n", &v, &r, &n) != 2 || spec[n] || v < 0 || r < 0 ||
        tree_n_vgroups >= TREE_MAX_VGROUPS)
        return -1;
    tree_vgroups[tree_n_vgroups++] = (struct tree_vgroup){v, r, session};
    return 0;
}

/* After the threads' and children's ids: the parent's pid too (getppid answers it), so
 * kill(getppid(), ...) reaches the restarted parent. */
void tree_restart_group_remap(struct crac_ctrl *c)
{
    if (c->vppid && c->vppid != c->real_ppid && c->n_vids < CRAC_MAX_VIDS &&
        vid_to_real(c, c->vppid) == c->vppid)
        c->vids[c->n_vids++] = (struct crac_vid){c->vppid, c->real_ppid};
}

static int32_t program_id(int32_t real, int session)
{
    for (int i = 0; i < tree_n_vgroups; i++)
        if (tree_vgroups[i].real == real && tree_vgroups[i].session == session)
            return tree_vgroups[i].virt;
    return vid_from_real(crac_ctrl(), real);
}

int32_t tree_program_pgid(void) { return program_id((int32_t)getpgid(0), 0); }

int32_t tree_program_group(int32_t real) { return program_id(real, 0); }

int32_t tree_program_sid(void) { return program_id((int32_t)getsid(0), 1); }
