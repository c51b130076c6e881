/* file_locks.c — the file locks the program holds (fcntl/lockf record locks, OFD locks, flock), as
 * /proc/self/fdinfo shows them on the descriptor each was taken through (CRAC_NT_FILE_LOCKS), and
 * taken again on the same descriptor at restart, failing the restart if another process holds
 * one now (docs/DECISIONS.md "File locks come back"). */
#include "state.h"

#include "crac_image.h"
#include "restart.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LOCKS_MAX 4096

enum { LOCK_KIND_POSIX = 1, LOCK_KIND_OFD = 2, LOCK_KIND_FLOCK = 3 };

/* One "lock:" line of fdinfo: "lock:\t1: POSIX  ADVISORY  WRITE 1234 fe:00:5678 0 EOF". A lease
 * or delegation is not a lock a restart can take again: skipped. 1 parsed, 0 not a lock. */
static int parse_lock(const char *line, int fd, struct crac_file_lock_rec *r)
{
    char kind[16], mode[16], rw[16], end[24];
    long long pid;
    unsigned long long start;
    if (sscanf(line, "lock:\t%*d: %15s %15s %15s %lld %*s %llu %23s", kind, mode, rw, &pid, &start,
               end) != 6)
        return 0;
    memset(r, 0, sizeof(*r));
    r->fd = fd;
    if (strcmp(kind, "POSIX") == 0)
        r->kind = LOCK_KIND_POSIX;
    else if (strcmp(kind, "OFDLCK") == 0)
        r->kind = LOCK_KIND_OFD;
    else if (strcmp(kind, "FLOCK") == 0)
        r->kind = LOCK_KIND_FLOCK;
    else
        return 0;
    if (strcmp(rw, "WRITE") == 0)
        r->write = 1;
    else if (strcmp(rw, "READ") != 0)
        return 0;
    r->start = start;
    if (strcmp(end, "EOF") != 0) {
        unsigned long long last = strtoull(end, NULL, 10);
        if (last < start)
            return 0;
        r->len = last - start + 1;
    }
    return 1;
}

#define KCMP_FILE 0

/* A flock or an OFD lock belongs to the open file, which a fork shares: every process of a tree
 * that holds the open file lists its lock. The restart of a tree reopens a regular file in each
 * process, so only one may take the lock again: the topmost, each other one sees the same open
 * file in its parent (kcmp) and leaves the lock to it. */
static int shared_with_parent(int fd, const struct stat *st)
{
    pid_t self = getpid(), parent = getppid();
    if (parent <= 1)
        return 0;
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)parent);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int shared = 0;
    struct dirent *de;
    while (!shared && (de = readdir(d))) {
        struct stat pst; /* the file the parent's fd names (the link followed) */
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &pst, 0) != 0 ||
            pst.st_dev != st->st_dev || pst.st_ino != st->st_ino)
            continue;
        shared = syscall(SYS_kcmp, self, parent, KCMP_FILE, fd, atoi(de->d_name)) == 0;
    }
    closedir(d);
    return shared;
}

int file_locks_capture(const struct state_capture *c, void **out, size_t *out_len)
{
    (void)c;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    struct crac_file_lock_rec *recs = NULL;
    size_t n = 0, cap = 0;
    for (int fd; (fd = state_next_program_fd(d, 3)) >= 0;) {
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        while (fgets(line, sizeof(line), f) && n < LOCKS_MAX) {
            struct crac_file_lock_rec r;
            if (strncmp(line, "lock:", 5) != 0 || !parse_lock(line, fd, &r) ||
                (r.kind != LOCK_KIND_POSIX && shared_with_parent(fd, &st)))
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                struct crac_file_lock_rec *g = realloc(recs, cap * sizeof(*recs));
                if (!g) {
                    free(recs);
                    fclose(f);
                    closedir(d);
                    return -1;
                }
                recs = g;
            }
            recs[n++] = r;
        }
        fclose(f);
    }
    closedir(d);
    *out = recs;
    *out_len = n * sizeof(*recs);
    return 0;
}

static const char *kind_name(uint32_t kind)
{
    return kind == LOCK_KIND_POSIX ? "fcntl" : kind == LOCK_KIND_OFD ? "OFD" : "flock";
}

/* Who holds what conflicts with r now, for the message ("" if the kernel does not say). */
static void holder(const struct crac_file_lock_rec *r, char *out, size_t outlen)
{
    out[0] = '\0';
    if (r->kind == LOCK_KIND_FLOCK)
        return;
    struct flock fl = {.l_type = r->write ? F_WRLCK : F_RDLCK,
                       .l_whence = SEEK_SET,
                       .l_start = (off_t)r->start,
                       .l_len = (off_t)r->len};
    if (fcntl(r->fd, r->kind == LOCK_KIND_OFD ? F_OFD_GETLK : F_GETLK, &fl) == 0 &&
        fl.l_type != F_UNLCK && fl.l_pid > 0)
        snprintf(out, outlen, " (pid %d)", (int)fl.l_pid);
}

/* Restart, memory back and every descriptor reopened (fds come earlier in the table): nothing
 * closes a descriptor of these files afterwards, which would drop the fcntl locks again. */
int file_locks_restore(const struct state_restore *rs, const void *note, size_t len)
{
    const struct crac_file_lock_rec *recs = note;
    for (size_t i = 0; i < len / sizeof(*recs); i++) {
        struct crac_file_lock_rec r;
        memcpy(&r, &recs[i], sizeof(r));
        if (r.fd < 0 || r.kind < LOCK_KIND_POSIX || r.kind > LOCK_KIND_FLOCK || r.write > 1 ||
            r.start > (uint64_t)INT64_MAX || r.len > (uint64_t)INT64_MAX) {
            snprintf(rs->err, rs->errlen, "image corrupted: bad file lock record");
            return -1;
        }
        int rc;
        if (r.kind == LOCK_KIND_FLOCK) {
            rc = flock(r.fd, (r.write ? LOCK_EX : LOCK_SH) | LOCK_NB);
        } else {
            struct flock fl = {.l_type = r.write ? F_WRLCK : F_RDLCK,
                               .l_whence = SEEK_SET,
                               .l_start = (off_t)r.start,
                               .l_len = (off_t)r.len};
            rc = fcntl(r.fd, r.kind == LOCK_KIND_OFD ? F_OFD_SETLK : F_SETLK, &fl);
        }
        if (rc == 0)
            continue;
        int err = errno;
        char link[64], path[PATH_MAX] = "?", who[32], range[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", r.fd);
        ssize_t pl = readlink(link, path, sizeof(path) - 1);
        if (pl > 0)
            path[pl] = '\0';
        if (r.kind == LOCK_KIND_FLOCK)
            snprintf(range, sizeof(range), "the file");
        else if (r.len)
            snprintf(range, sizeof(range), "bytes %llu-%llu", (unsigned long long)r.start,
                     (unsigned long long)(r.start + r.len - 1));
        else
            snprintf(range, sizeof(range), "bytes %llu to the end", (unsigned long long)r.start);
        if (err == EAGAIN || err == EACCES || err == EWOULDBLOCK) {
            holder(&r, who, sizeof(who));
            snprintf(rs->err, rs->errlen,
                     "fd %d (%s): the program's %s %s lock on %s is held by another process "
                     "now%s; it cannot be taken again",
                     r.fd, path, kind_name(r.kind), r.write ? "write" : "read", range, who);
        } else {
            snprintf(rs->err, rs->errlen, "fd %d (%s): cannot take the program's %s lock again: %s",
                     r.fd, path, kind_name(r.kind), strerror(err));
        }
        return -1;
    }
    return 0;
}
