/* children.c — child processes are not part of this process's image: a checkpoint names each one
 * (losses.c) unless it is a split process of the same job, checkpointed with it (the manifest
 * lists those). No note. */
#include "state.h"

#include "ckpt.h"
#include "tree.h"
#include "upper_alloc.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MEMBERS 4096
static int32_t
    members[MAX_MEMBERS]; /* children in this job checkpoint, as the program knows them */
static int n_members;

int tree_members(const int32_t **out)
{
    *out = members;
    return n_members;
}

/* A child forked as a split process that still runs crac's loader (it has not exec'd another
 * program outside crac). */
static int crac_child(int pid)
{
    char path[64], mine[PATH_MAX], its[PATH_MAX];
    if (!tree_is_forked_child(pid))
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/exe", pid);
    ssize_t a = readlink("/proc/self/exe", mine, sizeof(mine) - 1);
    ssize_t b = readlink(path, its, sizeof(its) - 1);
    return a > 0 && a == b && memcmp(mine, its, (size_t)a) == 0;
}

/* A child that has ended and not been waited for: its status as wait() will give it, without
 * reaping it (the program still will). -1: it runs. */
static int zombie_status(int pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT | WNOHANG | __WALL) != 0 ||
        si.si_pid != pid)
        return -1;
    switch (si.si_code) {
    case CLD_EXITED: return (si.si_status & 0xff) << 8;
    case CLD_KILLED: return si.si_status & 0x7f;
    case CLD_DUMPED: return (si.si_status & 0x7f) | 0x80;
    }
    return -1;
}

/* A child forked as a split process that then exec'd a program crac cannot run (tree_exec.c):
 * its state would be missing from the job's image, so the checkpoint is refused. */
static int outside_child(int pid)
{
    char path[64], mine[PATH_MAX], its[PATH_MAX];
    if (!tree_is_forked_child(pid))
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/exe", pid);
    ssize_t a = readlink("/proc/self/exe", mine, sizeof(mine) - 1);
    ssize_t b = readlink(path, its, sizeof(its) - 1);
    if (a <= 0 || b <= 0)
        return 0;
    return a != b || memcmp(mine, its, (size_t)a) != 0;
}

static int refused;

static void name_children(const char *task)
{
    char path[PATH_MAX], comm[64];
    snprintf(path, sizeof(path), "/proc/self/task/%s/children", task);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
        FILE *c = fopen(path, "re");
        if (!c || !fgets(comm, sizeof(comm), c))
            snprintf(comm, sizeof(comm), "?");
        if (c)
            fclose(c);
        comm[strcspn(comm, "\n")] = '\0';
        int zombie = zombie_status(pid);
        if (zombie >= 0) {
            tree_zombie_add(pid, zombie); /* a restart recreates it, ended the same way */
            continue;
        }
        if (outside_child(pid)) {
            char exe[PATH_MAX] = "?";
            snprintf(path, sizeof(path), "/proc/%d/exe", pid);
            ssize_t n = readlink(path, exe, sizeof(exe) - 1);
            exe[n > 0 ? n : 1] = '\0';
            fprintf(stderr,
                    "crac: error: checkpoint refused: process %d (%s) of the job runs outside "
                    "crac (crac cannot run it), so the image would be incomplete\n",
                    vid_from_real(crac_ctrl(), pid), exe);
            refused = 1;
            continue;
        }
        int member = crac_child(pid);
        if (member && ckpt_cfg.coord_fd >= 0) {
            /* a worker of the coordinator's job: in the same job checkpoint; the manifest names
             * it, so `crac verify` can tell a tree image that lacks it */
            if (n_members < MAX_MEMBERS)
                members[n_members++] = vid_from_real(crac_ctrl(), pid);
            continue;
        }
        if (member) {
            state_loss("child process %d (%s) is checkpointed on its own (no coordinator): a "
                       "restart of this process does not bring it back",
                       pid, comm);
            continue;
        }
        state_loss("child process %d (%s) is not checkpointed: a restart does not bring it back",
                   pid, comm);
    }
    fclose(f);
}

int children_capture(const struct state_capture *c, void **blob, size_t *len)
{
    (void)c;
    *blob = NULL;
    *len = 0;
    tree_zombies_clear();
    n_members = 0;
    refused = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            name_children(e->d_name);
    closedir(d);
    return refused ? -1 : 0;
}
