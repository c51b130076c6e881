/* image_lineage.c — one writer per process directory: the running process holds an flock on its
 * ckpt_<prog>_<id>-<pid>/ for its life; one that finds it held writes a lineage of its own. */
#include "ckpt.h"

#include "lower_fds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The locked directory, a lower-half fd (close-on-exec, skipped by checkpoints): the flock lasts
 * as long as the process, and the kernel drops it when the process dies, SIGKILL included. */
static int lineage_fd = -1;

/* Whether the directory already holds generations (a finished run's that had the same name:
 * the same pid in another pid namespace sharing -c, or a pid reused since). */
static int has_generations(int dfd)
{
    int fd = lower_dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 1; /* cannot tell: do not write into it */
    }
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)))
        found = strncmp(de->d_name, "gen-", 4) == 0 || strcmp(de->d_name, "latest") == 0;
    closedir(d);
    return found;
}

void image_lineage_leave(void)
{
    if (lineage_fd < 0)
        return;
    lower_fd_forget(lineage_fd);
    close(lineage_fd);
    lineage_fd = -1;
}

/* 0: DIR is ours now; 1: another lineage's (locked, or holding generations while FRESH);
 * -1: an error (errno). */
static int try_claim(const char *dir, int fresh)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    int fd = lower_open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        close(fd);
        return 1;
    }
    /* Any other failure (ENOLCK, EOPNOTSUPP: a file system without locks) leaves the directory
     * unlocked: checkpoints go on as they did before the lock existed. */
    if (fresh && has_generations(fd)) {
        close(fd); /* releases the lock */
        return 1;
    }
    lineage_fd = lower_fd_adopt(fd);
    return 0;
}

int image_lineage_claim(int fresh)
{
    if (lineage_fd >= 0)
        return 0;
    int rc = try_claim(ckpt_cfg.proc_dir, fresh);
    if (rc <= 0)
        return rc;
    /* Taken (docs/DECISIONS.md, "One writer per process directory"): as DMTCP, this process
     * writes a new image set of its own, named by its own pid, beside the other. */
    char base[PATH_MAX], host[16], dir[PATH_MAX];
    const char *prog = strrchr(ckpt_cfg.program, '/');
    prog = prog ? prog + 1 : ckpt_cfg.program;
    snprintf(host, sizeof(host), "%08lx", (unsigned long)gethostid() & 0xffffffffUL);
    for (int n = 1; n < 100; n++) {
        int len = n == 1 ? snprintf(dir, sizeof(dir), "%s/ckpt_%.64s_%s-%d", ckpt_cfg.ckpt_dir,
                                    prog, host, getpid())
                         : snprintf(dir, sizeof(dir), "%s/ckpt_%.64s_%s.%d-%d", ckpt_cfg.ckpt_dir,
                                    prog, host, n, getpid());
        if (len < 0 || (size_t)len >= sizeof(dir)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (strcmp(dir, ckpt_cfg.proc_dir) == 0)
            continue;
        rc = try_claim(dir, 1);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            snprintf(base, sizeof(base), "%s", ckpt_cfg.proc_dir);
            snprintf(ckpt_cfg.proc_dir, sizeof(ckpt_cfg.proc_dir), "%s", dir);
            fprintf(stderr,
                    "crac: note: %s is another process's lineage (it is running, or its images "
                    "are there); this process's checkpoints go to %s\n",
                    base, dir);
            return 0;
        }
    }
    errno = EBUSY;
    return -1;
}
