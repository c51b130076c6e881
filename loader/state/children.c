/* children.c — child processes are not checkpointed yet: a checkpoint names each one (losses.c)
 * instead of a restart losing it silently. No note, nothing to restore. */
#include "state.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            name_children(e->d_name);
    closedir(d);
    return 0;
}
