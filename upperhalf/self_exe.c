/* self_exe.c — open()/fopen() of the program's own /proc/self/exe (it names crac's loader) open
 * the real program instead: interposed here, as trapping every openat from W would cost a SIGSYS
 * per file opened (readlink and exec of it are redirected by loader/confine/confine_exe.c). */
#include "upper_runtime.h"

#include "crac_lh_api.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char program[PATH_MAX]; /* the real program, as the lower half of this process knows it */
static int32_t program_at_restart = -1;

static const char *program_path(void)
{
    int32_t restarts = __atomic_load_n(&crac_registry.restarts, __ATOMIC_ACQUIRE);
    if (!program[0] || restarts != program_at_restart) {
        program_at_restart = restarts;
        void *q = upper_lookup("crac_lh_query");
        char tmp[PATH_MAX];
        if (!q || (long)cross_call(q, CRAC_QUERY_PROGRAM, (uint64_t)tmp, sizeof(tmp)) < 0)
            return NULL;
        memcpy(program, tmp, sizeof(program));
    }
    return program;
}

/* path, or the real program when path is /proc/self/exe, /proc/thread-self/exe or
 * /proc/<own pid>/exe (the pid the program knows, or the kernel's). */
static const char *redirect(const char *path)
{
    if (!crac_upper.api || !path || strncmp(path, "/proc/", 6) != 0)
        return path;
    const char *rest = path + 6;
    if (strcmp(rest, "self/exe") != 0 && strcmp(rest, "thread-self/exe") != 0) {
        char *end;
        long pid = strtol(rest, &end, 10);
        if (end == rest || strcmp(end, "/exe") != 0)
            return path;
        void *q = upper_lookup("crac_lh_pid");
        pid_t own = getpid();
        if (pid != own && (!q || pid != (long)cross_call(q, 1, (uint64_t)own, 0)))
            return path;
    }
    const char *real = program_path();
    return real ? real : path;
}

#define NEXT(type, name) ((type)dlsym(RTLD_NEXT, name))

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef FILE *(*fopen_fn)(const char *, const char *);

/* The mode argument exists only with O_CREAT or O_TMPFILE, as for the real calls. */
static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

int open(const char *path, int flags, ...)
{
    static open_fn next;
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    if (!next)
        next = NEXT(open_fn, "open");
    return next(redirect(path), flags, mode);
}

int open64(const char *path, int flags, ...)
{
    static open_fn next;
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    if (!next)
        next = NEXT(open_fn, "open64");
    return next(redirect(path), flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    static openat_fn next;
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    if (!next)
        next = NEXT(openat_fn, "openat");
    return next(dirfd, redirect(path), flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    static openat_fn next;
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    if (!next)
        next = NEXT(openat_fn, "openat64");
    return next(dirfd, redirect(path), flags, mode);
}

FILE *fopen(const char *path, const char *how)
{
    static fopen_fn next;
    if (!next)
        next = NEXT(fopen_fn, "fopen");
    return next(redirect(path), how);
}

FILE *fopen64(const char *path, const char *how)
{
    static fopen_fn next;
    if (!next)
        next = NEXT(fopen_fn, "fopen64");
    return next(redirect(path), how);
}
