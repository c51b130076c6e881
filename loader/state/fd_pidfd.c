/* fd_pidfd.c — pidfds (pidfd_open; Python's asyncio watches its children through them): opened
 * again at restart on the process the program knew by that pid, as the restart placed it. */
#include "fds.h"

#include "tree.h"
#include "upper_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PIDFD_NONBLOCK
#define PIDFD_NONBLOCK O_NONBLOCK
#endif

static int pidfd_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)st;
    return strcmp(e->path, "anon_inode:[pidfd]") == 0;
}

/* Field 22 of /proc/PID/stat, the process's start time in ticks since boot (0 if unreadable):
 * with the pid, who a process outside the restart is. */
static unsigned long long start_time(int pid)
{
    long long ticks;
    return proc_stat_fields(pid, 22, 1, &ticks) == 0 ? (unsigned long long)ticks : 0;
}

/* fdinfo's "Pid:" is the kernel's pid (-1 once the process was waited for): saved as the pid
 * the program knows, with the start time. */
static int pidfd_save(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir)
{
    (void)all, (void)n;
    char *info = fd_fdinfo(e->rec.fd);
    const char *pid = info ? fd_info_field(info, "Pid:") : NULL;
    int real = pid ? atoi(pid) : -1;
    free(info);
    char text[96];
    snprintf(text, sizeof(text), "pid %d start %llu\n",
             real > 0 ? vid_from_real(crac_ctrl(), real) : -1, real > 0 ? start_time(real) : 0);
    return fd_save_text(e, files_dir, "pidfd", text);
}

/* The kernel's pid now of the process the program knew as VPID: itself; a child restarted with
 * it (an ended one is recreated ended, docs/DECISIONS.md); a process outside the restart with
 * the same pid and start time as then. 0: none. */
static int target(int vpid, unsigned long long start)
{
    const struct crac_ctrl *c = crac_ctrl(); /* the image's: its ids as they were */
    if (vpid == (c->vpid ? c->vpid : c->pid))
        return getpid();
    int real = tree_restart_child_real(vpid);
    if (real > 0)
        return real;
    return start && start_time(vpid) == start ? vpid : 0;
}

static int pidfd_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    char *text = fd_read_text(r, v, "pidfd");
    if (!text)
        return -1;
    int vpid;
    unsigned long long start;
    int ok = sscanf(text, "pid %d start %llu", &vpid, &start) == 2;
    free(text);
    if (!ok) {
        snprintf(r->err, r->errlen, "fd %d (pidfd): image corrupted: bad saved pid", v->rec.fd);
        return -1;
    }
    int real = vpid > 0 ? target(vpid, start) : 0;
    int fd = real > 0 ? (int)syscall(SYS_pidfd_open, real,
                                     (v->rec.open_flags & O_NONBLOCK) ? PIDFD_NONBLOCK : 0)
                      : -1;
    if (fd < 0) {
        if (vpid > 0)
            fprintf(stderr,
                    "crac: warning: fd %d (pidfd of process %d): that process is not part of "
                    "the restart; it reads as /dev/null\n",
                    v->rec.fd, vpid);
        else
            fprintf(stderr,
                    "crac: warning: fd %d (pidfd): its process had ended and been waited for; "
                    "it reads as /dev/null\n",
                    v->rec.fd);
        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return -1;
    }
    return fd_install(fd, &v->rec);
}

const struct fd_ops fd_pidfd_ops = {.kind = CRAC_FD_PIDFD,
                                    .name = "pidfd",
                                    .recognise = pidfd_recognise,
                                    .save = pidfd_save,
                                    .reopen = pidfd_reopen};
