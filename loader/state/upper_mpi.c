/* upper_mpi.c — an MPI library the program loaded itself (mpi4py, a dlopen) runs in the upper half,
 * not behind crac's MPI shim: a checkpoint names it (losses.c). No note. */
#include "state.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crac_layout.h"

/* Open MPI's libmpi.so.40, MPICH's libmpich.so.12 / libmpi.so.12 (any version): the names the
 * shim stands in for, and their kin. */
static int is_mpi_library(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libmpi.so", 9) == 0 || strncmp(base, "libmpich.so", 11) == 0;
}

/* Why: a library in the upper half is saved as memory; its connections to the other ranks and
 * to its launcher or orted (sockets, PMIx shared memory under /tmp) are not there at a restart,
 * which then fails on a missing PMIx segment; a singleton's too, once its orted is gone. */
int upper_mpi_capture(const struct state_capture *c, void **blob, size_t *len)
{
    (void)c;
    *blob = NULL;
    *len = 0;
    char shim_dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", shim_dir, sizeof(shim_dir) - 16);
    if (n <= 0)
        return 0;
    shim_dir[n] = '\0';
    strcpy(strrchr(shim_dir, '/'), "/shim/"); /* crac's own shims sit beside the loader */
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps)
        return 0;
    char line[PATH_MAX + 128];
    while (fgets(line, sizeof(line), maps)) {
        unsigned long start;
        int path_at = 0;
        if (sscanf(line, "%lx-%*x %*s %*x %*x:%*x %*u %n", &start, &path_at) < 1 || !path_at)
            continue;
        char *path = line + path_at;
        path[strcspn(path, "\n")] = '\0';
        if (start < CRAC_W_START || start >= CRAC_W_END || path[0] != '/' ||
            !is_mpi_library(path) || strncmp(path, shim_dir, strlen(shim_dir)) == 0)
            continue;
        state_loss("the program loaded the MPI library %s itself (mpi4py, or a dlopen), not "
                   "through crac's MPI shim: its connections to the other ranks and to its "
                   "launcher are not made again, and a restart fails (docs/MPI.md \"mpi4py\")",
                   path);
        break;
    }
    fclose(maps);
    return 0;
}
