/* fd_parent_files.c — which regular files of a process are one open file (one offset) with a lower
 * fd of its own (dup'd) or with its parent's (inherited across fork), found with kcmp; the restart
 * opens each once again for all of them (fd_regular.c, crac_py/launch/share.py). */
#include "fds.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KCMP_FILE_ 0          /* linux/kcmp.h's KCMP_FILE */
#define PARENT_FILES_MAX 4096 /* the parent's regular files looked at, at most */

struct parent_file {
    dev_t dev;
    ino_t ino;
    int fd;
};

/* Whether PID runs the same executable as this process: a split process (the loader), the only
 * kind of parent whose image the tree's restart has. */
static int same_exe(pid_t pid)
{
    char mine[PATH_MAX], theirs[PATH_MAX], link[64];
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
    ssize_t a = readlink("/proc/self/exe", mine, sizeof(mine) - 1);
    ssize_t b = readlink(link, theirs, sizeof(theirs) - 1);
    return a > 0 && a == b && memcmp(mine, theirs, (size_t)a) == 0;
}

/* The parent's regular files (at most MAX into OUT): their count. */
static int parent_files(pid_t ppid, struct parent_file *out, int max)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)ppid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while (n < max && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[64 + sizeof(de->d_name)];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            out[n++] = (struct parent_file){st.st_dev, st.st_ino, atoi(de->d_name)};
    }
    closedir(d);
    return n;
}

static int same_open_file(pid_t a, int fd_a, pid_t b, int fd_b)
{
    return syscall(SYS_kcmp, a, b, KCMP_FILE_, fd_a, fd_b) == 0;
}

void fd_parent_files(struct fd_entry *all, int n)
{
    int any = 0;
    pid_t self = getpid(), ppid = getppid();
    for (int i = 0; i < n; i++) {
        all[i].parent_fd = all[i].dup_of = -1;
        if (all[i].rec.kind != CRAC_FD_FILE)
            continue;
        any = 1;
        for (int j = 0; j < i && all[i].dup_of < 0; j++)
            if (all[j].rec.kind == CRAC_FD_FILE && all[j].rec.ino == all[i].rec.ino &&
                same_open_file(self, all[j].rec.fd, self, all[i].rec.fd))
                all[i].dup_of = all[j].rec.fd;
    }
    if (!any || ppid <= 1 || !same_exe(ppid))
        return;
    struct parent_file *pf = malloc(sizeof(*pf) * PARENT_FILES_MAX);
    int np = pf ? parent_files(ppid, pf, PARENT_FILES_MAX) : 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (all[i].rec.kind != CRAC_FD_FILE || fstat(all[i].rec.fd, &st) != 0)
            continue;
        for (int k = 0; k < np && all[i].parent_fd < 0; k++)
            if (pf[k].dev == st.st_dev && pf[k].ino == st.st_ino &&
                same_open_file(self, all[i].rec.fd, ppid, pf[k].fd))
                all[i].parent_fd = pf[k].fd;
    }
    free(pf);
}
