/* confine_procpath.c — after a restart, a path that names a process or thread by the id the program
 * knows (/proc/<vpid>/..., /proc/<vpid>/task/<vtid>/...) is given to the kernel with the real ids
 * (docs/DECISIONS.md "/proc/<pid> after a restart"). TLS-free: runs in the SIGSYS handler and, for
 * the upper libc's patched entries, on a program thread, the upper fs live; raw syscalls only. */
#include "confine.h"

#include "crac_rawsys.h"
#include "proc_text.h"
#include "upper_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>

/* Up to LEN bytes of the program's string at USER, never past the end of its page unless the
 * page holds no NUL: 0 with the string in BUF (NUL-terminated), -1 when it is unreadable or
 * longer (the real call then answers as it would). */
static int peek_string(const char *user, char *buf, uint64_t len)
{
    uint64_t got = 0;
    while (got < len) {
        uint64_t at = (uint64_t)user + got, room = 4096 - (at & 4095);
        uint64_t want = len - got < room ? len - got : room;
        struct iovec l = {buf + got, want}, r = {(void *)at, want};
        long n = raw_syscall6(SYS_process_vm_readv, raw_syscall0(SYS_getpid), (long)&l, 1, (long)&r,
                              1, 0);
        if (n <= 0)
            return -1;
        for (uint64_t i = got; i < got + (uint64_t)n; i++)
            if (buf[i] == '\0')
                return 0;
        got += (uint64_t)n;
    }
    return -1;
}

/* Copies the id at *S (decimal, no sign) translated to the kernel's into *OUT; advances both.
 * 0 when there is no id there. */
static int copy_id(const char **s, char **out, const char *end)
{
    const char *p = *s;
    int64_t v = proc_read_id(&p);
    if (v <= 0 || (*p != '/' && *p != '\0'))
        return 0;
    char digits[12];
    int n = raw_put_uint(digits, vid_to_real(crac_ctrl(), (int32_t)v));
    if (*out + n >= end)
        return 0;
    raw_memcpy(*out, digits, (unsigned long)n);
    *out += n;
    *s = p;
    return 1;
}

/* PATH with the program's ids replaced by the kernel's, into OUT: 1, or 0 when nothing changes. */
static int translate(const char *path, char *out)
{
    static const char proc[] = "/proc/", task[] = "/task/";
    if (!proc_starts(path, proc))
        return 0;
    const char *s = path + sizeof(proc) - 1, *end = out + PROC_PATH_MAX;
    char *o = out;
    for (unsigned i = 0; i < sizeof(proc) - 1; i++)
        *o++ = proc[i];
    if (!copy_id(&s, &o, end))
        return 0;
    if (proc_starts(s, task)) {
        for (unsigned i = 0; i < sizeof(task) - 1; i++)
            *o++ = *s++;
        copy_id(&s, &o, end); /* /proc/PID/task/ alone (a listing) has none */
    }
    while (*s && o < end - 1)
        *o++ = *s++;
    if (*s)
        return 0;
    *o = '\0';
    for (const char *a = path, *b = out;; a++, b++)
        if (*a != *b)
            return 1;
        else if (!*a)
            return 0;
}

/* The path the call NR takes, among its arguments A1.. (the *at calls' second). */
static int path_is_second(long nr)
{
    return nr != SYS_open && nr != SYS_stat && nr != SYS_lstat && nr != SYS_access;
}

/* PATH given relative to DIRFD ("123/stat" at a descriptor of /proc, "45/stat" at one of a
 * /proc/<pid>/task): the absolute path into ABS (PROC_PATH_MAX bytes), 1; else 0. */
static int absolute_in_proc(long dirfd, const char *path, char *abs)
{
    if (path[0] < '1' || path[0] > '9' || !proc_dir_path(dirfd, abs))
        return 0;
    unsigned n = proc_length(abs);
    abs[n++] = '/';
    for (unsigned i = 0; path[i]; i++) {
        if (n >= PROC_PATH_MAX - 1)
            return 0;
        abs[n++] = path[i];
    }
    abs[n] = '\0';
    return 1;
}

/* After a restart, the program's path at USER_PATH (relative to DIRFD) read into SEEN, absolute
 * where it is relative to a descriptor of /proc: 1, or 0 (ids are the kernel's, unreadable). */
static int peeked_path(long dirfd, const char *user_path, char *seen)
{
    char path[PROC_PATH_MAX];
    if (!ids_differ(crac_ctrl()) || !user_path || peek_string(user_path, path, sizeof(path)) != 0)
        return 0;
    if (path[0] != '/' && absolute_in_proc(dirfd, path, seen))
        return 1;
    raw_memcpy(seen, path, proc_length(path) + 1);
    return 1;
}

const char *confine_proc_path(long dirfd, const char *user_path, char *buf)
{
    char seen[PROC_PATH_MAX];
    return peeked_path(dirfd, user_path, seen) && translate(seen, buf) ? buf : user_path;
}

/* NR with its path argument P (the others as given). */
static long path_syscall(long nr, long p, long a1, long a2, long a3, long a4, long a5)
{
    return path_is_second(nr) ? raw_syscall6(nr, a1, p, a3, a4, a5, 0)
                              : raw_syscall6(nr, p, a2, a3, a4, a5, 0);
}

long emu_path_after(long nr, long r, long a1, long a2, long a3, long a4, long a5)
{
    const struct crac_ctrl *c = crac_ctrl();
    const char *path = (const char *)(path_is_second(nr) ? a2 : a1);
    /* Before a restart no id differs. Otherwise the call goes first as given: the kernel reads
     * the path (a bad pointer is its EFAULT: programs probe memory with stat), and only when it
     * found it, or found nothing there, is it read here: a /proc path the program's ids make
     * different is given again with the kernel's (a descriptor of the wrong one closed). A path
     * outside /proc, nearly every one, costs a comparison of six bytes. */
    if (!ids_differ(c) || !path) /* fstat's may be NULL (AT_EMPTY_PATH, Linux 6.11) */
        return r;
    if (r < 0 && r != -ENOENT && r != -EACCES && r != -EPERM && r != -ENOTDIR)
        return r;
    char copy[PROC_PATH_MAX], buf[PROC_PATH_MAX];
    if (path[0] != '/') { /* relative to a descriptor of /proc only (a digit first: rare) */
        if (!path_is_second(nr) || !absolute_in_proc(a1, path, copy))
            return r;
    } else {
        if (!proc_starts(path, "/proc/"))
            return r;
        unsigned n = 0;
        while (n < sizeof(copy) - 1 && path[n])
            n++;
        if (path[n])
            return r;
        __builtin_memcpy(copy, path, n + 1);
    }
    int opens = nr == SYS_openat || nr == SYS_open;
    long flags = nr == SYS_open ? a2 : a3;
    if (!translate(copy, buf))
        return opens ? proc_view_opened(r, copy, flags) : r;
    if (r >= 0 && opens)
        raw_syscall1(SYS_close, r);
    r = path_syscall(nr, (long)buf, a1, a2, a3, a4, a5);
    return opens ? proc_view_opened(r, buf, flags) : r;
}

long emu_path_direct(long nr, long a1, long a2, long a3, long a4, long a5)
{
    long path = path_is_second(nr) ? a2 : a1;
    return emu_path_after(nr, path_syscall(nr, path, a1, a2, a3, a4, a5), a1, a2, a3, a4, a5);
}

long emu_path_call(ucontext_t *uc, long nr, long a1, long a2, long a3, long a4, long a5)
{
    char seen[PROC_PATH_MAX], buf[PROC_PATH_MAX];
    const char *user_path = (const char *)(path_is_second(nr) ? a2 : a1);
    int known = peeked_path(path_is_second(nr) ? a1 : AT_FDCWD, user_path, seen);
    int translated = known && translate(seen, buf);
    long p = translated ? (long)buf : (long)user_path;
    if (nr != SYS_open && nr != SYS_openat)
        return path_syscall(nr, p, a1, a2, a3, a4, a5);
    /* Opening a FIFO or a device may block: under the program's mask, as the real call, so its
     * signals and crac's suspension interrupt it; not this handler's. */
    uint64_t prog = *(uint64_t *)&uc->uc_sigmask, saved;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &prog, &saved, 8);
    long r = path_syscall(nr, p, a1, a2, a3, a4, a5);
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &saved, 0, 8);
    if (r < 0 || !known)
        return r;
    return proc_view_opened(r, translated ? buf : seen, nr == SYS_open ? a2 : a3);
}
