/* confine_procview.c — after a restart, what the program reads in /proc names processes by the ids
 * it knows: the listings of /proc and /proc/<pid>/task, and the ids inside stat, status and
 * children (docs/DECISIONS.md "/proc/<pid> after a restart"). TLS-free: runs in the SIGSYS
 * handler and, for the upper libc's patched entries, on a program thread; raw syscalls only. */
#include "confine.h"

#include "crac_rawsys.h"
#include "proc_text.h"
#include "upper_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#define PROC_SUPER_MAGIC 0x9fa0
/* Buffers are on the caller's stack: a thread a checkpoint suspends in here comes back with them
 * (a mapping or static data of the loader's would not be in the image). */
#define VIEW_MAX 3072         /* a longer stat/status/children text is left as the kernel's */
#define LISTING_MAX 2048      /* bytes of directory entries read at once */
#define DIRENT_HEAD 19        /* d_ino, d_off, d_reclen, d_type */
#define MFD_CLOEXEC_FLAG 1U   /* MFD_CLOEXEC */
#define CLOCK_TICKS_PER_S 100 /* USER_HZ, the unit of stat's times (x86-64's AT_CLKTCK) */

enum id_kind { ID_PROCESS, ID_GROUP, ID_SESSION, ID_NONE };

static int32_t program_id(const struct crac_ctrl *c, int32_t real, enum id_kind kind)
{
    if (real <= 0 || kind == ID_NONE)
        return real;
    return kind == ID_PROCESS ? vid_from_real(c, real)
                              : vgroup_from_real(c, real, kind == ID_SESSION);
}

/* ---- listings ---- */

int proc_dir_path(long fd, char *target)
{
    uint64_t sf[15]; /* struct statfs: f_type first */
    if (fd < 0 || raw_syscall2(SYS_fstatfs, fd, sf) != 0 || sf[0] != PROC_SUPER_MAGIC)
        return 0;
    char link[40];
    int k = 0;
    for (const char *h = "/proc/self/fd/"; *h; h++)
        link[k++] = *h;
    raw_put_uint(link + k, (int32_t)fd);
    long n = raw_syscall3(SYS_readlink, link, target, PROC_PATH_MAX - 1);
    if (n <= 0)
        return 0;
    target[n] = '\0';
    if (n == 5 && proc_starts(target, "/proc"))
        return 1;
    const char *s = target + 6;
    return proc_starts(target, "/proc/") && proc_read_id(&s) > 0 && s[0] == '/' &&
           proc_starts(s, "/task") && !s[5];
}

/* 1: FD is the /proc directory or a /proc/<pid>/task directory (names are ids). */
static int lists_ids(long fd)
{
    char target[PROC_PATH_MAX];
    return proc_dir_path(fd, target);
}

/* The name the program knows the entry NAME by, into OUT: 1 (OUT set), 0 when the entry goes
 * (its number is one the program knows as another process or thread), -1 when it stays. */
static int listed_name(const struct crac_ctrl *c, const char *name, char *out)
{
    const char *s = name;
    int64_t real = proc_read_id(&s);
    if (real <= 0 || *s)
        return -1;
    int32_t virt = vid_from_real(c, (int32_t)real);
    if (virt != real) {
        raw_put_uint(out, virt);
        return 1;
    }
    return vid_to_real(c, (int32_t)real) != real ? 0 : -1;
}

struct dirent_head {
    uint64_t ino;
    int64_t off;
    uint16_t reclen;
    uint8_t type;
} __attribute__((packed));

/* Entries of IN (N bytes) renamed into OUT (ROOM bytes): the bytes written. *CUT is set to 1
 * when an entry did not fit, *RESUME then the offset of the last one taken (where the next read
 * starts), 0 when none was. */
static long rename_entries(const struct crac_ctrl *c, const char *in, long n, char *out, long room,
                           int *cut, int64_t *resume)
{
    long used = 0;
    *cut = 0;
    *resume = 0;
    for (long at = 0; at + DIRENT_HEAD < n;) {
        const struct dirent_head *h = (const struct dirent_head *)(in + at);
        if (h->reclen <= DIRENT_HEAD || at + h->reclen > n)
            break; /* not the kernel's layout: what was renamed so far */
        char renamed[16];
        int how = listed_name(c, in + at + DIRENT_HEAD, renamed);
        if (how == 1) {
            unsigned len = proc_length(renamed);
            uint16_t reclen = (uint16_t)((DIRENT_HEAD + len + 1 + 7) & ~7u);
            if (used + reclen > room) {
                *cut = 1;
                return used;
            }
            struct dirent_head copy = *h;
            copy.reclen = reclen;
            raw_memcpy(out + used, &copy, DIRENT_HEAD);
            for (unsigned k = DIRENT_HEAD; k < reclen; k++)
                out[used + k] = k - DIRENT_HEAD <= len ? renamed[k - DIRENT_HEAD] : '\0';
            used += reclen;
        } else if (how == -1) {
            if (used + h->reclen > room) {
                *cut = 1;
                return used;
            }
            raw_memcpy(out + used, h, h->reclen);
            used += h->reclen;
        }
        *resume = h->off;
        at += h->reclen;
    }
    return used;
}

long emu_getdents(long fd, long user_buf, long count)
{
    const struct crac_ctrl *c = crac_ctrl();
    if (!ids_differ(c) || count <= 0 || !lists_ids(fd))
        return raw_syscall3(SYS_getdents64, fd, user_buf, count);
    long room = count < LISTING_MAX ? count : LISTING_MAX;
    char in[LISTING_MAX], out[LISTING_MAX];
    long r;
    for (;;) {
        /* A renamed entry may be longer than the kernel's: read what fits, put the position back
         * after the last entry that did. */
        long before = raw_syscall3(SYS_lseek, fd, 0, SEEK_CUR);
        r = raw_syscall3(SYS_getdents64, fd, in, room);
        if (r <= 0)
            break;
        int cut;
        int64_t resume;
        long used = rename_entries(c, in, r, out, room, &cut, &resume);
        if (cut && (resume || before >= 0))
            raw_syscall3(SYS_lseek, fd, resume ? resume : before, SEEK_SET);
        if (cut && !used) {
            r = -EINVAL; /* the kernel's answer to a buffer too small for one entry */
            break;
        }
        if (used) {
            r = confine_to_user((void *)user_buf, out, (unsigned long)used) == 0 ? used : -EFAULT;
            break;
        }
        /* every entry read was one the program cannot see: read on, or an empty answer would
         * end the listing */
    }
    return r;
}

/* ---- contents ---- */

/* Appends the text [FROM, TO) to OUT at *N (bounded by VIEW_MAX); 0 when it does not fit. */
static int put(char *out, unsigned *n, const char *from, const char *to)
{
    if (*n + (unsigned)(to - from) >= VIEW_MAX)
        return 0;
    while (from < to)
        out[(*n)++] = *from++;
    return 1;
}

static int put_id(char *out, unsigned *n, int32_t v)
{
    char digits[16];
    int k = 0;
    if (v < 0) {
        digits[k++] = '-';
        v = -v;
    }
    k += raw_put_uint(digits + k, v);
    return put(out, n, digits, digits + k);
}

/* Copies *S to OUT up to the next id (after spaces or tabs) and translates it as KIND;
 * advances *S. 0 when the text does not have one there or does not fit. */
static int copy_next_id(const struct crac_ctrl *c, const char **s, char *out, unsigned *n,
                        enum id_kind kind)
{
    const char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    int negative = *p == '-';
    const char *digits = p + negative;
    int64_t v = proc_read_id(&digits);
    if (v < 0 || !put(out, n, *s, p))
        return 0;
    *s = digits;
    return put_id(out, n, negative ? -(int32_t)v : program_id(c, (int32_t)v, kind));
}

/* The start time (clock ticks after this boot) process REAL had before any restart, as the
 * control block of its split process holds it (its own, or read from its memory: a process of
 * the same job); -1 when unknown (not a split process, a thread's stat, none recorded). */
static int64_t first_start(const struct crac_ctrl *c, int32_t real)
{
    uint64_t magic = 0;
    int32_t pid = 0;
    int64_t ticks = 0;
    struct crac_boot boot;
    if (real == c->pid) {
        magic = c->magic, pid = c->pid, ticks = c->start_ticks, boot = c->start_boot;
    } else {
        struct crac_ctrl *far = crac_ctrl(); /* at the same address in every one */
        struct iovec mine[] = {{&magic, sizeof(magic)},
                               {&pid, sizeof(pid)},
                               {&ticks, sizeof(ticks)},
                               {&boot, sizeof(boot)}};
        struct iovec theirs[] = {{&far->magic, sizeof(magic)},
                                 {&far->pid, sizeof(pid)},
                                 {&far->start_ticks, sizeof(ticks)},
                                 {&far->start_boot, sizeof(boot)}};
        long want = sizeof(magic) + sizeof(pid) + sizeof(ticks) + sizeof(boot);
        if (raw_syscall6(SYS_process_vm_readv, real, (long)mine, 4, (long)theirs, 4, 0) != want)
            return -1;
    }
    if (magic != CRAC_CTRL_MAGIC || pid != real || ticks <= 0)
        return -1;
    if (!__builtin_memcmp(boot.id, c->host_boot.id, sizeof(boot.id)))
        return ticks;
    if (!boot.btime || !c->host_boot.btime)
        return -1;
    /* Another boot: the same time of day, counted from this boot (none before it). */
    int64_t moved = ticks + (boot.btime - c->host_boot.btime) * CLOCK_TICKS_PER_S;
    return moved > 0 ? moved : 0;
}

/* stat: "pid (comm) state ppid pgrp session tty_nr tpgid ... starttime(22) ..."; comm may hold
 * ") ". */
static int view_stat(const struct crac_ctrl *c, const char *in, char *out, unsigned *n)
{
    const char *s = in, *close = 0;
    for (const char *p = in; *p; p++)
        if (*p == ')')
            close = p;
    const char *first = in;
    int64_t real = proc_read_id(&first);
    if (!close || close[1] != ' ' || !close[2] || !copy_next_id(c, &s, out, n, ID_PROCESS) ||
        s > close || !put(out, n, s, close + 3))
        return 0;
    s = close + 3; /* past ") S" */
    static const enum id_kind fields[] = {ID_PROCESS, ID_GROUP, ID_SESSION, ID_NONE, ID_GROUP};
    for (unsigned i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (!copy_next_id(c, &s, out, n, fields[i]))
            return 0;
    int64_t start = real > 0 ? first_start(c, (int32_t)real) : -1;
    if (start >= 0) { /* s is past field 8: field 22 follows the 14th space */
        const char *p = s;
        for (int spaces = 0; *p && spaces < 14; p++)
            spaces += *p == ' ';
        const char *end = p;
        while (*end >= '0' && *end <= '9')
            end++;
        if (end > p && *end == ' ') {
            char digits[24];
            int k = (int)sizeof(digits);
            do
                digits[--k] = (char)('0' + start % 10);
            while ((start /= 10) > 0);
            if (!put(out, n, s, p) || !put(out, n, digits + k, digits + sizeof(digits)))
                return 0;
            s = end;
        }
    }
    return put(out, n, s, s + proc_length(s));
}

/* status: "Name:\tvalue" lines; those naming processes get the program's ids. */
static int view_status(const struct crac_ctrl *c, const char *in, char *out, unsigned *n)
{
    static const struct {
        const char *key;
        enum id_kind kind;
    } keys[] = {{"Tgid:", ID_PROCESS},      {"Pid:", ID_PROCESS},    {"PPid:", ID_PROCESS},
                {"TracerPid:", ID_PROCESS}, {"NStgid:", ID_PROCESS}, {"NSpid:", ID_PROCESS},
                {"NSpgid:", ID_GROUP},      {"NSsid:", ID_SESSION}};
    const char *s = in;
    while (*s) {
        const char *eol = s;
        while (*eol && *eol != '\n')
            eol++;
        int key = -1;
        for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]) && key < 0; i++)
            if (proc_starts(s, keys[i].key))
                key = (int)i;
        if (key >= 0) {
            const char *p = s + proc_length(keys[key].key);
            if (!put(out, n, s, p))
                return 0;
            while (p < eol && copy_next_id(c, &p, out, n, keys[key].kind))
                ;
            s = p;
        }
        if (!put(out, n, s, *eol ? eol + 1 : eol))
            return 0;
        s = *eol ? eol + 1 : eol;
    }
    return 1;
}

/* children: "pid pid ... " */
static int view_children(const struct crac_ctrl *c, const char *in, char *out, unsigned *n)
{
    const char *s = in;
    while (copy_next_id(c, &s, out, n, ID_PROCESS))
        ;
    return put(out, n, s, s + proc_length(s));
}

enum view { VIEW_NONE, VIEW_STAT, VIEW_STATUS, VIEW_CHILDREN };

/* Which file PATH (as the kernel got it) is: /proc/<id|self|thread-self>/[task/<id>/]<file>. */
static enum view view_of(const char *path)
{
    if (!proc_starts(path, "/proc/"))
        return VIEW_NONE;
    const char *s = path + 6;
    if (proc_starts(s, "self/"))
        s += 4;
    else if (proc_starts(s, "thread-self/"))
        s += 11;
    else if (proc_read_id(&s) <= 0)
        return VIEW_NONE;
    if (proc_starts(s, "/task/")) {
        s += 6;
        if (proc_read_id(&s) <= 0)
            return VIEW_NONE;
    }
    if (proc_starts(s, "/stat") && !s[5])
        return VIEW_STAT;
    if (proc_starts(s, "/status") && !s[7])
        return VIEW_STATUS;
    if (proc_starts(s, "/children") && !s[9])
        return VIEW_CHILDREN;
    return VIEW_NONE;
}

long proc_view_opened(long fd, const char *path, long flags)
{
    const struct crac_ctrl *c = crac_ctrl();
    enum view v = view_of(path);
    if (fd < 0 || v == VIEW_NONE || !ids_differ(c) || (flags & O_ACCMODE) != O_RDONLY ||
        (flags & (O_PATH | O_DIRECTORY)))
        return fd;
    char in[VIEW_MAX], out[VIEW_MAX];
    long got = 0, r;
    while (got < VIEW_MAX - 1 && (r = raw_syscall3(SYS_read, fd, in + got, VIEW_MAX - 1 - got)) > 0)
        got += r;
    in[got] = '\0';
    unsigned n = 0;
    int whole = got < VIEW_MAX - 1 && proc_length(in) == (unsigned)got;
    int ok = whole && (v == VIEW_STAT     ? view_stat(c, in, out, &n)
                       : v == VIEW_STATUS ? view_status(c, in, out, &n)
                                          : view_children(c, in, out, &n));
    int same = !ok || (n == (unsigned)got && !__builtin_memcmp(in, out, n));
    long copy = same ? -1
                     : raw_syscall2(SYS_memfd_create, "crac-proc-view",
                                    (flags & O_CLOEXEC) ? MFD_CLOEXEC_FLAG : 0);
    if (copy >= 0 && raw_syscall3(SYS_write, copy, out, n) == (long)n &&
        raw_syscall3(SYS_lseek, copy, 0, SEEK_SET) == 0 &&
        raw_syscall3(SYS_dup3, copy, fd, flags & O_CLOEXEC) == fd) {
        raw_syscall1(SYS_close, copy);
    } else {
        if (copy >= 0)
            raw_syscall1(SYS_close, copy);
        raw_syscall3(SYS_lseek, fd, 0, SEEK_SET); /* the kernel's text, read from its start */
    }
    return fd;
}
