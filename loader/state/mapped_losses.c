/* mapped_losses.c — what the upper half maps that a restart cannot give back, named at each
 * checkpoint (losses.c): an MPI library the program loaded itself (mpi4py, a dlopen) instead of
 * crac's MPI shim, and a large file on disk it writes through a shared mapping. No note. */
#include "state.h"

#include "ckpt.h"

#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "crac_layout.h"
#include "native_dir.h"

int mapping_file_kept(const struct stat *st, unsigned long maps_ino, int writable)
{
    return writable && S_ISREG(st->st_mode) && st->st_ino == maps_ino && st->st_size > 0 &&
           ((uint64_t)st->st_size <= KEPT_FILE_MAX || ckpt_cfg.ckpt_open_files);
}

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
static void mpi_library(const char *path, const char *shim_dir)
{
    if (is_mpi_library(path) && strncmp(path, shim_dir, strlen(shim_dir)) != 0)
        state_loss("the program loaded the MPI library %s itself (a dlopen by path, mpi4py's "
                   "MPICH build), not "
                   "through crac's MPI shim: its connections to the other ranks and to its "
                   "launcher are not made again, and a restart fails (docs/MPI.md \"mpi4py\")",
                   path);
}

/* Why: the file is the state (docs/DECISIONS.md "Files in memory are memory"); what the program
 * writes through the mapping after the checkpoint stays in it, and its mtime does not say so
 * (pages already dirty are written without a fault). */
static void shared_file(const char *path, unsigned long ino, const char *perms)
{
    struct stat st;
    struct statfs fs;
    /* Its copy through a written descriptor (fd_regular.c, up to 64 MiB of data: LMDB's sparse
     * map-sized file) puts it back too. */
    if (perms[1] != 'w' || perms[3] != 's' || stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_ino != ino || mapping_file_kept(&st, ino, 1) ||
        (statfs(path, &fs) == 0 && fs.f_type == TMPFS_MAGIC) || fds_copy_saved(ino, path))
        return;
    state_loss("%s (%llu MiB) is mapped shared and written: what the program writes through the "
               "mapping after this checkpoint stays in the file at a restart (a checkpoint keeps "
               "the pages of such a file up to %lu MiB, any size with --ckpt-open-files)",
               path, (unsigned long long)(st.st_size >> 20), KEPT_FILE_MAX >> 20);
}

int mapped_losses_capture(const struct state_capture *c, void **blob, size_t *len)
{
    (void)c;
    *blob = NULL;
    *len = 0;
    char shim_dir[PATH_MAX];
    if (native_dir(shim_dir, sizeof(shim_dir)) != 0)
        return 0;
    strcat(shim_dir, "/shim/"); /* crac's own shims */
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps)
        return 0;
    char line[PATH_MAX + 128], perms[8];
    unsigned long seen[64]; /* each file once, however many mappings it has */
    int n_seen = 0;
    while (fgets(line, sizeof(line), maps)) {
        unsigned long start, ino;
        int path_at = 0;
        if (sscanf(line, "%lx-%*x %7s %*x %*x:%*x %lu %n", &start, perms, &ino, &path_at) < 3 ||
            !path_at)
            continue;
        char *path = line + path_at;
        path[strcspn(path, "\n")] = '\0';
        if (start < CRAC_W_START || start >= CRAC_W_END || path[0] != '/')
            continue;
        int again = 0;
        for (int i = 0; i < n_seen && !again; i++)
            again = seen[i] == ino;
        if (again || !ino)
            continue;
        mpi_library(path, shim_dir);
        shared_file(path, ino, perms);
        /* A file mapped private first and shared and written after: looked at again. */
        if (n_seen < 64 && (is_mpi_library(path) || (perms[1] == 'w' && perms[3] == 's')))
            seen[n_seen++] = ino;
    }
    fclose(maps);
    return 0;
}
