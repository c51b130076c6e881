/* fastpath.c — the upper libc's mmap, munmap, mremap, brk and sbrk redirected to the lower half's
 * emulations by a jump patched at their entry: the same placement in W as the seccomp trap gives,
 * without the cost of a SIGSYS delivery (~3 us). The trap stays as the net for everything else
 * (ld.so, raw syscalls). The emulations are TLS-free, so no fs switch is needed; the checkpoint
 * gate is still taken so a checkpoint never starts while one holds the allocator's lock. */
#include "upper_runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef long (*emu_mmap_fn)(uint64_t, uint64_t, long, long, long, long);
typedef long (*emu_munmap_fn)(uint64_t, uint64_t);
typedef long (*emu_mremap_fn)(uint64_t, uint64_t, uint64_t, long, uint64_t);
typedef long (*emu_brk_fn)(uint64_t);

static emu_mmap_fn lower_mmap;
static emu_munmap_fn lower_munmap;
static emu_mremap_fn lower_mremap;
static emu_brk_fn lower_brk;

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

/* movabs $target, %rax; jmp *%rax — 12 bytes over the function's first instructions. */
static int patch(void *fn, void *target)
{
    unsigned char code[12] = {0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0};
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

void fastpath_install(void)
{
    lower_mmap = (emu_mmap_fn)upper_lookup("crac_lh_emu_mmap");
    lower_munmap = (emu_munmap_fn)upper_lookup("crac_lh_emu_munmap");
    lower_mremap = (emu_mremap_fn)upper_lookup("crac_lh_emu_mremap");
    lower_brk = (emu_brk_fn)upper_lookup("crac_lh_emu_brk");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc || !lower_mmap || !lower_munmap || !lower_mremap || !lower_brk)
        return; /* the trap alone still confines everything */
    static const struct {
        const char *name;
        void *target;
    } hooks[] = {{"mmap", (void *)fast_mmap},
                 {"munmap", (void *)fast_munmap},
                 {"mremap", (void *)fast_mremap},
                 {"brk", (void *)fast_brk},
                 {"sbrk", (void *)fast_sbrk}};
    for (unsigned i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
        void *fn = dlsym(libc, hooks[i].name);
        if (fn)
            patch(fn, hooks[i].target);
    }
    dlclose(libc);
}
