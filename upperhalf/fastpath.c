/* fastpath.c — the upper libc's mmap, munmap, mremap, brk and sbrk, getpid, gettid and getppid,
 * and its open, stat, access and getdents64 entries, redirected to the lower half's emulations by
 * a jump patched at their entry: the same placement in W (the same ids after a restart, in /proc
 * too) as the seccomp trap gives, without the cost of a SIGSYS delivery (~2-3 us). The trap
 * stays as the net for everything else (ld.so, raw syscalls). The emulations are TLS-free, so no
 * fs switch is needed; the checkpoint gate is still taken so a checkpoint never starts while one
 * holds the allocator's lock, or between an id read from the kernel and its translation. */
#include "upper_runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef long (*emu_mmap_fn)(uint64_t, uint64_t, long, long, long, long);
typedef long (*emu_munmap_fn)(uint64_t, uint64_t);
typedef long (*emu_mremap_fn)(uint64_t, uint64_t, uint64_t, long, uint64_t);
typedef long (*emu_brk_fn)(uint64_t);
typedef long (*emu_self_id_fn)(long);
typedef long (*emu_path_fn)(long, long, long, long, long, long);

static emu_mmap_fn lower_mmap;
static emu_munmap_fn lower_munmap;
static emu_mremap_fn lower_mremap;
static emu_brk_fn lower_brk;
static emu_self_id_fn lower_self_id;
static emu_path_fn lower_path;
typedef long (*emu_getdents_fn)(long, long, long);
static emu_getdents_fn lower_getdents;
typedef long (*emu_path_after_fn)(long, long, long, long, long, long, long);
static emu_path_after_fn lower_path_after;

static inline long result(long r)
{
    if ((unsigned long)r > (unsigned long)-4096L) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static void *fast_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    cross_gate_enter();
    long r = lower_mmap((uint64_t)addr, len, prot, flags, fd, off);
    cross_gate_leave();
    return (void *)result(r);
}

static int fast_munmap(void *addr, size_t len)
{
    cross_gate_enter();
    long r = lower_munmap((uint64_t)addr, len);
    cross_gate_leave();
    return (int)result(r);
}

static void *fast_mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
    uint64_t dest = 0;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        dest = (uint64_t)va_arg(ap, void *);
        va_end(ap);
    }
    cross_gate_enter();
    long r = lower_mremap((uint64_t)old, oldlen, newlen, flags, dest);
    cross_gate_leave();
    return (void *)result(r);
}

static uint64_t current_break(void)
{
    cross_gate_enter();
    uint64_t cur = (uint64_t)lower_brk(0);
    cross_gate_leave();
    return cur;
}

static int fast_brk(void *want)
{
    cross_gate_enter();
    long r = lower_brk((uint64_t)want);
    cross_gate_leave();
    if (r != (long)want) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

static void *fast_sbrk(intptr_t increment)
{
    uint64_t cur = current_break();
    if (increment == 0)
        return (void *)cur;
    if (fast_brk((void *)(cur + (uint64_t)increment)) != 0)
        return (void *)-1;
    return (void *)cur;
}

static long self_id(long nr)
{
    cross_gate_enter();
    long r = lower_self_id(nr);
    cross_gate_leave();
    return r;
}

static pid_t fast_getpid(void) { return (pid_t)self_id(SYS_getpid); }
static pid_t fast_gettid(void) { return (pid_t)self_id(SYS_gettid); }
static pid_t fast_getppid(void) { return (pid_t)self_id(SYS_getppid); }

/* open, stat and access: after a restart a /proc/<pid> path they are given names the pid the
 * program knows, which the loader translates (loader/confine/confine_procpath.c) and issues the
 * call from its own text, outside W: the seccomp trap that catches the same calls from anywhere
 * else in W costs a SIGSYS round trip (~5 us) each. No crossing gate: these calls must not hold
 * a checkpoint off. An open, which may block (a FIFO), is made here instead, and the loader
 * looks at its path after it. */
static mode_t open_mode(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

/* open and openat are cancellation points: as glibc's own, the call runs with asynchronous
 * cancellation on, so a pthread_cancel of a thread blocked in it (a FIFO's open) ends the thread.
 * The call is made here, in upper code whose frames the unwinder knows, as given; after a restart
 * the filter lets it through by its sixth argument, and the loader checks its path after it
 * (docs/DECISIONS.md "Unwinding through a signal handler; open() as a cancellation point"). */
static int open_cancellable(int dirfd, const char *path, int flags, mode_t mode)
{
    int old;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    long r = syscall(SYS_openat, dirfd, path, flags, mode, 0, CRAC_OPEN_UNTRAPPED);
    pthread_setcanceltype(old, &old);
    if (r < 0)
        r = -errno;
    return (int)result(lower_path_after(SYS_openat, r, dirfd, (long)path, flags, mode, 0));
}

static int fast_open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    return open_cancellable(AT_FDCWD, path, flags, mode);
}

/* glibc's internal open that is not a cancellation point (fopen, opendir). */
static int fast_open_nocancel(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    return (int)result(lower_path(SYS_openat, AT_FDCWD, (long)path, flags, mode, 0));
}

static int fast_openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = open_mode(flags, ap);
    va_end(ap);
    return open_cancellable(dirfd, path, flags, mode);
}

static int fast_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    return (int)result(lower_path(SYS_newfstatat, dirfd, (long)path, (long)st, flags, 0));
}

static int fast_statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
    return (int)result(lower_path(SYS_statx, dirfd, (long)path, flags, mask, (long)st));
}

static int fast_access(const char *path, int mode)
{
    return (int)result(lower_path(SYS_access, (long)path, mode, 0, 0, 0));
}

static int fast_faccessat(int dirfd, const char *path, int mode, int flags)
{
    /* Only faccessat2 takes flags (Linux 5.8); without them, faccessat is every kernel's. */
    long nr = flags ? SYS_faccessat2 : SYS_faccessat;
    return (int)result(lower_path(nr, dirfd, (long)path, mode, flags, 0));
}

/* getdents64 (readdir's): a listing of /proc names processes by the ids the program knows. */
static ssize_t fast_getdents64(int fd, void *buf, size_t count)
{
    return (ssize_t)result(lower_getdents(fd, (long)buf, (long)count));
}

/* The bytes compilers pad functions with: multi-byte NOPs (their prefixes, opcode, ModRM and
 * zero displacements) and int3. */
static int padding_byte(unsigned char b)
{
    return b == 0x90 || b == 0xcc || b == 0x66 || b == 0x2e || b == 0x0f || b == 0x1f ||
           b == 0x00 || b == 0x40 || b == 0x44 || b == 0x80 || b == 0x84;
}

/* The jump below is 12 bytes; getpid and its kind are 8 (mov, syscall, ret). Such a function is
 * patched only if what follows it up to 12 bytes is padding, no other symbol starts there, and
 * the padding begins with a NOP or int3 (not with code of a local function). */
static int room_for_patch(void *fn, size_t need)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || info.dli_saddr != fn)
        return 0;
    if (sym->st_size >= need)
        return 1;
    const unsigned char *end = (const unsigned char *)fn + sym->st_size;
    if (!sym->st_size || (end[0] != 0x90 && end[0] != 0xcc && end[0] != 0x66 && end[0] != 0x0f))
        return 0;
    for (size_t i = sym->st_size; i < need; i++)
        if (!padding_byte(((const unsigned char *)fn)[i]))
            return 0;
    Dl_info last;
    /* dladdr names the symbol whose extent holds the address: none inside padding. */
    return dladdr((const char *)fn + need - 1, &last) && (!last.dli_saddr || last.dli_saddr == fn);
}

/* movabs $target, %rax; jmp *%rax — 12 bytes over the function's first instructions. */
static int patch(void *fn, void *target)
{
    unsigned char code[12] = {0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0};
    if (!room_for_patch(fn, sizeof(code)))
        return -1;
    memcpy(code + 2, &target, 8);
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)fn & ~(uintptr_t)(page - 1);
    size_t span = ((uintptr_t)fn + sizeof(code) - start + (size_t)page - 1) & ~(size_t)(page - 1);
    if (mprotect((void *)start, span, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
        return -1;
    memcpy(fn, code, sizeof(code));
    __builtin___clear_cache((char *)fn, (char *)fn + sizeof(code));
    return mprotect((void *)start, span, PROT_READ | PROT_EXEC);
}

struct hook {
    const char *name;
    void *target;
};

static void patch_all(void *libc, const struct hook *hooks, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        void *fn = dlsym(libc, hooks[i].name);
        if (fn)
            patch(fn, hooks[i].target);
    }
}

void fastpath_install(void)
{
    lower_mmap = (emu_mmap_fn)upper_lookup("crac_lh_emu_mmap");
    lower_munmap = (emu_munmap_fn)upper_lookup("crac_lh_emu_munmap");
    lower_mremap = (emu_mremap_fn)upper_lookup("crac_lh_emu_mremap");
    lower_brk = (emu_brk_fn)upper_lookup("crac_lh_emu_brk");
    lower_self_id = (emu_self_id_fn)upper_lookup("crac_lh_emu_self_id");
    lower_path = (emu_path_fn)upper_lookup("crac_lh_emu_path");
    lower_getdents = (emu_getdents_fn)upper_lookup("crac_lh_emu_getdents");
    lower_path_after = (emu_path_after_fn)upper_lookup("crac_lh_emu_path_after");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc || !lower_mmap || !lower_munmap || !lower_mremap || !lower_brk || !lower_self_id)
        return; /* the trap alone still confines everything */
    static const struct hook memory_and_ids[] = {
        {"mmap", (void *)fast_mmap},     {"munmap", (void *)fast_munmap},
        {"mremap", (void *)fast_mremap}, {"brk", (void *)fast_brk},
        {"sbrk", (void *)fast_sbrk},     {"getpid", (void *)fast_getpid},
        {"gettid", (void *)fast_gettid}, {"getppid", (void *)fast_getppid}};
    patch_all(libc, memory_and_ids, sizeof(memory_and_ids) / sizeof(memory_and_ids[0]));
    /* stat, lstat and fstat jump to fstatat; fopen and opendir call __open64_nocancel. */
    static const struct hook paths[] = {
        {"open64", (void *)fast_open},        {"__open64_nocancel", (void *)fast_open_nocancel},
        {"openat64", (void *)fast_openat},    {"fstatat64", (void *)fast_fstatat},
        {"statx", (void *)fast_statx},        {"access", (void *)fast_access},
        {"faccessat", (void *)fast_faccessat}};
    if (lower_path && lower_path_after)
        patch_all(libc, paths, sizeof(paths) / sizeof(paths[0]));
    static const struct hook listings[] = {{"getdents64", (void *)fast_getdents64}};
    if (lower_getdents)
        patch_all(libc, listings, 1);
    dlclose(libc);
}
