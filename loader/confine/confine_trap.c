/* confine_trap.c — the SIGSYS handler that emulates the calls the filter traps from inside W:
 * mappings are placed in W, brk is emulated in W, reserved signals are virtualised (docs/ARCHITECTURE.md "Confinement").
 * TLS-free: runs on upper-half threads with the upper fs live; raw syscalls only, no errno. */
#include "confine.h"
#include "confine_seccomp.h"

#include "crac_layout.h"
#include "crac_lh_api.h"
#include "ckpt.h"
#include "crac_rawsys.h"
#include "fork_advice.h"
#include "restart_lazy.h"
#include "upper_alloc.h"
#include "signal_wrap.h"
#include "tree.h"

#include "fsgsbase.h"
#include "shadow_pool.h"
#include "tree.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mman.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>

#define SECCOMP_SI_CODE 1 /* SYS_SECCOMP */
#define HUGE_2M (2UL << 20)

static inline uint64_t page_up(uint64_t x) { return (x + CRAC_PAGE - 1) & ~(CRAC_PAGE - 1); }

static inline int inside_w(uint64_t start, uint64_t len)
{
    return start >= CRAC_W_START && start + len <= CRAC_W_END && start + len >= start;
}

static inline int touches_w(uint64_t start, uint64_t len)
{
    return start < CRAC_W_END && start + len > CRAC_W_START;
}

static long sys_mmap(uint64_t addr, uint64_t len, long prot, long flags, long fd, long off)
{
    return raw_syscall6(SYS_mmap, (long)addr, (long)len, prot, flags, fd, off);
}

/* Put the PROT_NONE reservation back over [start,end): W never has holes. */
static void rereserve(uint64_t start, uint64_t end)
{
    sys_mmap(start, end - start, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
             -1, 0);
}

static uint64_t mmap_alignment(uint64_t size, long flags)
{
    if (flags & MAP_HUGETLB) {
        long shift = (flags >> MAP_HUGE_SHIFT) & MAP_HUGE_MASK;
        return shift ? 1UL << shift : HUGE_2M;
    }
    /* Large regions 2 MiB-aligned, as the kernel does, so transparent huge pages still work. */
    return size >= HUGE_2M ? HUGE_2M : CRAC_PAGE;
}

/* Reserve a fresh range of W; 0 when none is left. */
static uint64_t claim_gap(struct crac_ctrl *c, uint64_t size, uint64_t align, uint64_t hint)
{
    raw_lock(&c->lock);
    uint64_t at = 0;
    if (hint && !(hint & (CRAC_PAGE - 1)) && inside_w(hint, size) && hint >= CRAC_ALLOC_START &&
        ualloc_is_free(c, hint, hint + size))
        at = hint;
    else
        at = ualloc_find_gap(c, size, align);
    if (at && ualloc_mark_used(c, at, at + size) != 0)
        at = 0;
    if (at) /* a mapping made over a range ends the advice given there */
        advice_change(c, at, at + size, 0, CRAC_ADVICE_ALL);
    raw_unlock(&c->lock);
    return at;
}

static void release_range(struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    raw_lock(&c->lock);
    ualloc_mark_free(c, start, end);
    advice_change(c, start, end, 0, CRAC_ADVICE_ALL);
    raw_unlock(&c->lock);
}

static void note_used(struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    raw_lock(&c->lock);
    ualloc_mark_used(c, start, end);
    advice_change(c, start, end, 0, CRAC_ADVICE_ALL);
    raw_unlock(&c->lock);
}

/* R, a mapping the kernel just made outside W for the program: recorded as an extra (like any
 * new mapping, without fork advice), or (the table full) unmapped again and ENOMEM. What it
 * returns is what the program's call returns. */
static long note_extra(struct crac_ctrl *c, long r, uint64_t size)
{
    if (raw_is_err(r))
        return r;
    raw_lock(&c->lock);
    int full = extras_add(c, (uint64_t)r, (uint64_t)r + size) != 0;
    if (!full)
        advice_change(c, (uint64_t)r, (uint64_t)r + size, 0, CRAC_ADVICE_ALL);
    raw_unlock(&c->lock);
    if (!full)
        return r;
    raw_syscall2(SYS_munmap, r, size);
    return -ENOMEM;
}

/* A MAP_FIXED mapping outside W: allowed over free space or over the program's own earlier
 * extras (e.g. a non-PIE executable's segments), never over the lower half. */
static long mmap_fixed_outside(struct crac_ctrl *c, uint64_t addr, uint64_t size, long prot,
                               long flags, long fd, long off)
{
    long r = sys_mmap(addr, size, prot, (flags & ~MAP_FIXED) | MAP_FIXED_NOREPLACE, fd, off);
    if (r == -EEXIST) {
        raw_lock(&c->lock);
        int own = extras_contains(c, addr, addr + size);
        raw_unlock(&c->lock);
        if (!own)
            return -ENOMEM;
        r = sys_mmap(addr, size, prot, (flags & ~MAP_FIXED_NOREPLACE) | MAP_FIXED, fd, off);
    }
    return note_extra(c, r, size);
}

long emu_mmap(uint64_t addr, uint64_t len, long prot, long flags, long fd, long off)
{
    struct crac_ctrl *c = crac_ctrl();
    if (len == 0)
        return -EINVAL;
    uint64_t size = page_up(len);
    if (size < len)
        return -ENOMEM;
    if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
        if (addr & (CRAC_PAGE - 1))
            return -EINVAL;
        if (!touches_w(addr, size)) {
            if (flags & MAP_FIXED)
                return mmap_fixed_outside(c, addr, size, prot, flags, fd, off);
            /* Recorded as MAP_FIXED's are: a checkpoint saves only the extras outside W. */
            return note_extra(c, sys_mmap(addr, size, prot, flags, fd, off), size);
        }
        if (!inside_w(addr, size))
            return (flags & MAP_FIXED) ? -ENOMEM : -EEXIST;
        if (flags & MAP_FIXED_NOREPLACE) {
            /* The kernel sees our reservation there, so decide "free" from the bookkeeping. */
            raw_lock(&c->lock);
            int free = ualloc_is_free(c, addr, addr + size) && addr >= CRAC_ALLOC_START &&
                       ualloc_mark_used(c, addr, addr + size) == 0;
            if (free)
                advice_change(c, addr, addr + size, 0, CRAC_ADVICE_ALL);
            raw_unlock(&c->lock);
            if (!free)
                return -EEXIST;
            flags = (flags & ~MAP_FIXED_NOREPLACE) | MAP_FIXED;
            long r = sys_mmap(addr, size, prot, flags, fd, off);
            if (raw_is_err(r)) {
                rereserve(addr, addr + size);
                release_range(c, addr, addr + size);
            }
            return r;
        }
        long r = sys_mmap(addr, size, prot, flags, fd, off);
        if (raw_is_err(r))
            rereserve(addr, addr + size); /* a failed MAP_FIXED may have unmapped the range */
        else
            note_used(c, addr, addr + size);
        return r;
    }
    if (flags & MAP_32BIT) /* cannot be inside W: the kernel places it, we record it */
        return note_extra(c, sys_mmap(addr, size, prot, flags, fd, off), size);
    uint64_t at = claim_gap(c, size, mmap_alignment(size, flags), addr);
    if (!at)
        return -ENOMEM;
    long r = sys_mmap(at, size, prot, flags | MAP_FIXED, fd, off);
    if (raw_is_err(r)) {
        rereserve(at, at + size);
        release_range(c, at, at + size);
        /* Some files refuse any address but the kernel's own: io_uring's rings (EINVAL for a
         * given address, so that no one guesses where its kernel memory aliases). Such a
         * mapping is placed by the kernel outside W and recorded as an extra, as MAP_32BIT's
         * are; without it the program cannot run under crac at all (docs/DECISIONS.md). */
        if (r == -EINVAL && fd >= 0 && (flags & MAP_SHARED)) {
            r = note_extra(c, sys_mmap(0, size, prot, flags, fd, off), size);
        }
    }
    return r;
}

long emu_munmap(uint64_t addr, uint64_t len)
{
    struct crac_ctrl *c = crac_ctrl();
    if ((addr & (CRAC_PAGE - 1)) || len == 0)
        return -EINVAL;
    uint64_t size = page_up(len);
    if (inside_w(addr, size)) {
        rereserve(addr, addr + size);
        release_range(c, addr, addr + size);
        return 0;
    }
    if (touches_w(addr, size))
        return -EINVAL;
    raw_lock(&c->lock);
    long r = 0;
    /* Outside W only the program's own extras are unmapped; the lower half is never touched. */
    if (extras_contains(c, addr, addr + size)) {
        r = raw_syscall2(SYS_munmap, addr, size);
        if (r == 0) {
            extras_remove(c, addr, addr + size);
            advice_change(c, addr, addr + size, 0, CRAC_ADVICE_ALL);
        }
    }
    raw_unlock(&c->lock);
    return r;
}

static long sys_mremap(uint64_t old, uint64_t oldlen, uint64_t newlen, long flags, uint64_t dest)
{
    return raw_syscall6(SYS_mremap, (long)old, (long)oldlen, (long)newlen, flags, (long)dest, 0);
}

/* mremap of a mapping outside W: only of the program's own extras (the lower half's are not its
 * to move), and with MREMAP_FIXED only to free space or its own extras outside W (the kernel
 * unmaps what is at the destination). */
static long mremap_outside(struct crac_ctrl *c, uint64_t old, uint64_t oldlen, uint64_t newlen,
                           long flags, uint64_t dest)
{
    uint64_t oldsize = page_up(oldlen), newsize = page_up(newlen);
    raw_lock(&c->lock);
    int own = extras_contains(c, old, old + (oldsize ? oldsize : CRAC_PAGE));
    /* Recording the move may take two slots (the old range cut out of the middle of one, and
     * the new one): refused before it is made when they are not there. */
    int room = c->n_extras + 2 <= CRAC_MAX_EXTRAS;
    raw_unlock(&c->lock);
    if (!own)
        return -EFAULT;
    if (!room)
        return -ENOMEM;
    long held = -1;
    if (flags & MREMAP_FIXED) {
        if (touches_w(dest, newsize))
            return -EINVAL;
        held = sys_mmap(dest, newsize, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (held == -EEXIST) {
            raw_lock(&c->lock);
            own = extras_contains(c, dest, dest + newsize);
            raw_unlock(&c->lock);
            if (!own)
                return -ENOMEM;
        } else if (raw_is_err(held)) {
            return held;
        }
    }
    long r = sys_mremap(old, oldlen, newlen, flags, dest);
    if (raw_is_err(r) && held == (long)dest)
        raw_syscall2(SYS_munmap, dest, newsize);
    return r;
}

/* After a mapping moved away from [start,end): fill the hole and free the range. */
static void vacate(struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    rereserve(start, end);
    release_range(c, start, end);
}

/* A mapping mremap moved or grew to [start,end) keeps the old one's fork advice. */
static void keep_advice(struct crac_ctrl *c, uint64_t start, uint64_t end, uint32_t advice)
{
    if (!advice)
        return;
    raw_lock(&c->lock);
    advice_change(c, start, end, advice, CRAC_ADVICE_ALL);
    raw_unlock(&c->lock);
}

long emu_mremap(uint64_t old, uint64_t oldlen, uint64_t newlen, long flags, uint64_t dest)
{
    struct crac_ctrl *c = crac_ctrl();
    if (old & (CRAC_PAGE - 1))
        return -EINVAL;
    restart_lazy_wait(); /* a range moved away from a lazy restart's userfaultfd loses it */
    uint64_t oldsize = page_up(oldlen), newsize = page_up(newlen);
    int keeps_old = oldlen == 0 || (flags & MREMAP_DONTUNMAP);
    /* The old range lies in one mapping, whose fork advice the moved or grown one keeps (no lock
     * taken for a program that gave none: mremap is frequent, fork advice rare). */
    uint32_t advice = 0;
    if (__atomic_load_n(&c->n_advice, __ATOMIC_RELAXED)) {
        raw_lock(&c->lock);
        advice = advice_bits_at(c, old);
        raw_unlock(&c->lock);
    }
    if (!inside_w(old, oldsize ? oldsize : CRAC_PAGE)) {
        if (touches_w(old, oldsize))
            return -EINVAL;
        long r = mremap_outside(c, old, oldlen, newlen, flags, dest);
        if (!raw_is_err(r)) {
            raw_lock(&c->lock);
            if (!keeps_old) {
                extras_remove(c, old, old + oldsize);
                advice_change(c, old, old + oldsize, 0, CRAC_ADVICE_ALL);
            }
            extras_add(c, (uint64_t)r, (uint64_t)r + newsize);
            advice_change(c, (uint64_t)r, (uint64_t)r + newsize, advice, CRAC_ADVICE_ALL);
            raw_unlock(&c->lock);
        }
        return r;
    }
    if (newsize == 0)
        return -EINVAL;
    if (flags & MREMAP_FIXED) {
        if (!inside_w(dest, newsize))
            return -ENOMEM;
        long r = sys_mremap(old, oldlen, newlen, flags, dest);
        if (raw_is_err(r))
            return r;
        note_used(c, dest, dest + newsize);
        if (!keeps_old)
            vacate(c, old, old + oldsize);
        keep_advice(c, dest, dest + newsize, advice);
        return r;
    }
    if (!keeps_old && newsize <= oldsize) {
        if (newsize < oldsize)
            vacate(c, old + newsize, old + oldsize);
        return (long)old;
    }
    if (!keeps_old) {
        /* Grow in place: give the tail of the reservation back to the kernel, then mremap.
         * The hole lasts one syscall; the kernel's own placement works top-down from far above
         * W, so no lower-half mapping lands in it. */
        raw_lock(&c->lock);
        int room = inside_w(old, newsize) && ualloc_is_free(c, old + oldsize, old + newsize) &&
                   ualloc_mark_used(c, old + oldsize, old + newsize) == 0;
        raw_unlock(&c->lock);
        if (room) {
            raw_syscall2(SYS_munmap, old + oldsize, newsize - oldsize);
            long r = sys_mremap(old, oldlen, newlen, 0, 0);
            if (!raw_is_err(r)) {
                keep_advice(c, old, old + newsize, advice);
                return r;
            }
            vacate(c, old + oldsize, old + newsize);
        }
    }
    if (!(flags & MREMAP_MAYMOVE))
        return -ENOMEM;
    uint64_t at = claim_gap(c, newsize, mmap_alignment(newsize, 0), 0);
    if (!at)
        return -ENOMEM;
    long r = sys_mremap(old, oldlen, newlen, flags | MREMAP_MAYMOVE | MREMAP_FIXED, at);
    if (raw_is_err(r)) {
        release_range(c, at, at + newsize);
        return r;
    }
    if (!keeps_old)
        vacate(c, old, old + oldsize);
    keep_advice(c, at, at + newsize, advice);
    return r;
}

/* The kernel break belongs to the lower half (docs/ARCHITECTURE.md "Windows" invariant 4); the upper half's break is
 * emulated on a range inside W. The lock is held across the mmap: brk is rare and never blocks. */
long emu_brk(uint64_t want)
{
    struct crac_ctrl *c = crac_ctrl();
    raw_lock(&c->lock);
    uint64_t cur = c->brk_cur;
    if (want < CRAC_BRK_START || want > CRAC_BRK_START + CRAC_BRK_MAX) {
        raw_unlock(&c->lock);
        return (long)cur;
    }
    uint64_t end = page_up(want);
    if (end > c->brk_mapped) {
        long r = sys_mmap(c->brk_mapped, end - c->brk_mapped, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (raw_is_err(r)) {
            raw_unlock(&c->lock);
            return (long)cur;
        }
        advice_change(c, c->brk_mapped, end, 0, CRAC_ADVICE_ALL);
    } else if (end < c->brk_mapped) {
        rereserve(end, c->brk_mapped);
        advice_change(c, end, c->brk_mapped, 0, CRAC_ADVICE_ALL);
    }
    c->brk_mapped = end;
    c->brk_cur = want;
    raw_unlock(&c->lock);
    return (long)want;
}

static long emu_shmat(long id, uint64_t addr, long shmflg)
{
    struct crac_ctrl *c = crac_ctrl();
    struct shmid_ds ds;
    long r = raw_syscall3(SYS_shmctl, id, IPC_STAT, &ds);
    if (raw_is_err(r))
        return r;
    uint64_t size = page_up(ds.shm_segsz);
    if (addr && (shmflg & SHM_RND))
        addr &= ~(uint64_t)(CRAC_PAGE - 1);
    if (addr && !touches_w(addr, size)) {
        r = raw_syscall3(SYS_shmat, id, addr, shmflg);
        if (raw_is_err(r))
            return r;
        raw_lock(&c->lock);
        int full = extras_add(c, (uint64_t)r, (uint64_t)r + size) != 0;
        raw_unlock(&c->lock);
        if (full) {
            raw_syscall1(SYS_shmdt, r);
            return -ENOMEM;
        }
        return r;
    }
    uint64_t at;
    if (addr) {
        raw_lock(&c->lock);
        int ok = inside_w(addr, size) && addr >= CRAC_ALLOC_START &&
                 (ualloc_is_free(c, addr, addr + size) || (shmflg & SHM_REMAP)) &&
                 ualloc_mark_used(c, addr, addr + size) == 0;
        raw_unlock(&c->lock);
        if (!ok)
            return -EINVAL;
        at = addr;
    } else {
        at = claim_gap(c, size, CRAC_PAGE, 0);
        if (!at)
            return -ENOMEM;
    }
    r = raw_syscall3(SYS_shmat, id, at, shmflg | SHM_REMAP);
    raw_lock(&c->lock);
    if (raw_is_err(r))
        ualloc_mark_free(c, at, at + size);
    else if (c->n_shm < CRAC_MAX_SHM)
        c->shm[c->n_shm++] = (struct crac_range){at, at + size};
    if (!raw_is_err(r))
        advice_change(c, at, at + size, 0, CRAC_ADVICE_ALL);
    raw_unlock(&c->lock);
    if (raw_is_err(r))
        rereserve(at, at + size);
    return r;
}

static long emu_shmdt(uint64_t addr)
{
    struct crac_ctrl *c = crac_ctrl();
    long r = raw_syscall1(SYS_shmdt, addr);
    if (raw_is_err(r))
        return r;
    raw_lock(&c->lock);
    struct crac_range found = {0, 0};
    for (uint32_t k = 0; k < c->n_shm; k++) {
        if (c->shm[k].start == addr) {
            found = c->shm[k];
            c->shm[k] = c->shm[--c->n_shm];
            break;
        }
    }
    if (!found.end && !inside_w(addr, CRAC_PAGE)) {
        extras_remove(c, addr, addr + CRAC_PAGE);
        advice_change(c, addr, addr + CRAC_PAGE, 0, CRAC_ADVICE_ALL);
    }
    raw_unlock(&c->lock);
    if (found.end)
        vacate(c, found.start, found.end);
    return r;
}

/* madvise is trapped only for fork advice and MADV_DONTDUMP (confine_filter.c): the table follows
 * what the kernel did. A range partly unmapped (ENOMEM: the rest got the advice) is not recorded.
 * MADV_DONTDUMP only marks the process, tried or not: from now on its checkpoints read which
 * mappings are excluded before writing (image_core.c). */
static long emu_madvise(uint64_t addr, uint64_t len, long advice)
{
    if (advice == MADV_DONTDUMP)
        __atomic_store_n(&crac_ctrl()->dump_advised, 1, __ATOMIC_RELEASE);
    long r = raw_syscall3(SYS_madvise, addr, len, advice);
    if (r == 0 && len) {
        struct crac_ctrl *c = crac_ctrl();
        raw_lock(&c->lock);
        advice_record(c, addr, addr + page_up(len), advice);
        raw_unlock(&c->lock);
    }
    return r;
}

static inline uint64_t sigbit(int sig) { return 1UL << (sig - 1); }

/* The emulations read and write the program's memory through pointers it passed; a bad one must
 * give -EFAULT as the kernel would, never a SIGSEGV inside this handler. process_vm_readv/writev
 * on our own process let the kernel check the pointer (a read-only page refuses the write). Where
 * those calls are not allowed (a container's seccomp profile), the copy is done directly. */
static long user_copy(void *local, const void *remote, unsigned long n, int to_user)
{
    struct iovec l = {local, n}, r = {(void *)remote, n};
    long got = raw_syscall6(to_user ? SYS_process_vm_writev : SYS_process_vm_readv,
                            raw_syscall0(SYS_getpid), (long)&l, 1, (long)&r, 1, 0);
    if (got == (long)n)
        return 0;
    if (got == -ENOSYS || got == -EPERM) {
        if (to_user)
            raw_memcpy((void *)remote, local, n);
        else
            raw_memcpy(local, remote, n);
        return 0;
    }
    return -EFAULT;
}

static inline long from_user(void *dst, const void *src, unsigned long n)
{
    return user_copy(dst, src, n, 0);
}

static inline long to_user(void *dst, const void *src, unsigned long n)
{
    return user_copy((void *)src, dst, n, 1);
}

long confine_from_user(void *dst, const void *src, unsigned long n)
{
    return from_user(dst, src, n);
}

long confine_to_user(void *dst, const void *src, unsigned long n) { return to_user(dst, src, n); }

static inline uint64_t ckpt_blocked(const struct crac_ctrl *c) { return sigbit(c->ckpt_sig); }

/* Upper threads keep the checkpoint signal blocked, so the kernel hands a process-directed one
 * to the manager thread instead of interrupting a program thread's system call with EINTR. */
static inline uint64_t upper_mask(const struct crac_ctrl *c, uint64_t wanted)
{
    return (wanted & ~c->reserved_sigs) | ckpt_blocked(c);
}

static inline int is_handler(uint64_t h)
{
    return h != (uint64_t)SIG_DFL && h != (uint64_t)SIG_IGN;
}

/* Once per job: the program's handler for the checkpoint signal gets only what processes under
 * crac send; DMTCP users know to move the checkpoint signal (docs/DECISIONS.md). The flag covers
 * a process and its descendants, restarted or not; a marker file in the job's checkpoint
 * directory (removed by crac launch) the programs other processes exec (xargs, ps: each installs
 * one), which would otherwise say it again at every exec. */
#define WARNED_MARKER "/.crac-warned-ckpt-signal"
static int warned_in_job(void)
{
    char path[sizeof(ckpt_cfg.ckpt_dir) + sizeof(WARNED_MARKER)];
    unsigned n = 0;
    for (; n < sizeof(ckpt_cfg.ckpt_dir) && ckpt_cfg.ckpt_dir[n]; n++)
        path[n] = ckpt_cfg.ckpt_dir[n];
    if (!n || n == sizeof(ckpt_cfg.ckpt_dir))
        return 0;
    for (unsigned i = 0; i < sizeof(WARNED_MARKER); i++)
        path[n + i] = WARNED_MARKER[i];
    long fd =
        raw_syscall4(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
        raw_syscall1(SYS_close, fd);
    return fd == -EEXIST;
}

static void warn_ckpt_handler(int sig)
{
    if (__atomic_exchange_n(&crac_ctrl()->ckpt_handler_warned, 1, __ATOMIC_ACQ_REL))
        return;
    if (warned_in_job())
        return;
    char num[4] = {(char)('0' + sig / 10), (char)('0' + sig % 10), 0, 0};
    const char *n = sig < 10 ? num + 1 : num;
    const char *parts[] = {"crac: warning: the program installs a handler for signal ", n,
                           ", crac's checkpoint signal: that signal from outside starts a "
                           "checkpoint and never reaches the handler (only the program's own "
                           "kill/raise of it, or one from a process under crac, does); choose "
                           "another with --ckpt-signal N (or CRAC_SIGCKPT=N)\n"};
    for (unsigned i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        raw_syscall3(SYS_write, 2, parts[i], __builtin_strlen(parts[i]));
}

static long emu_rt_sigaction(long sig, const struct crac_ksigaction *act,
                             struct crac_ksigaction *oact, long setsize)
{
    struct crac_ctrl *c = crac_ctrl();
    if (setsize != 8)
        return -EINVAL;
    struct crac_ksigaction copy, old;
    if (act && from_user(&copy, act, sizeof(copy)) != 0)
        return -EFAULT; /* as the kernel: the new action is read before anything is checked */
    if (sig < 1 || sig > 64)
        return -EINVAL;
    if (c->reserved_sigs & sigbit((int)sig)) {
        /* Reserved: the program's handler is recorded and reported back, never installed. A
         * vfork child (posix_spawn) shares this memory, so it must not change the record. */
        old = c->virt_act[sig];
        if (act && (int32_t)raw_syscall0(SYS_getpid) == c->pid) {
            c->virt_act[sig] = copy;
            c->virt_act[sig].mask &= ~c->reserved_sigs;
            if (sig == c->ckpt_sig && is_handler(copy.handler))
                warn_ckpt_handler((int)sig);
        }
        return oact ? to_user(oact, &old, sizeof(old)) : 0;
    }
    if (act)
        copy.mask &= ~c->reserved_sigs;
    /* handlers run with the upper fs */
    long r = sigwrap_rt_sigaction(sig, act ? &copy : 0, oact ? &old : 0);
    if (r == 0 && oact)
        r = to_user(oact, &old, sizeof(old));
    return r;
}

static void run_ckpt_handler(ucontext_t *uc, int code, const siginfo_t *queued);
static int take_virt_pending(struct crac_ctrl *c);

/* The mask restored when this handler returns is uc_sigmask, so that is what we change. The
 * reserved signals are never really blocked; the program's wish is kept per thread and reported. */
static long emu_rt_sigprocmask(ucontext_t *uc, long how, const uint64_t *set, uint64_t *oset,
                               long setsize)
{
    struct crac_ctrl *c = crac_ctrl();
    if (setsize != 8)
        return -EINVAL;
    int32_t tid = (int32_t)raw_syscall0(SYS_gettid);
    uint64_t *live = (uint64_t *)&uc->uc_sigmask;
    uint64_t old = (*live & ~c->reserved_sigs) | vmask_get(c, tid);
    uint64_t next = old;
    if (set) {
        uint64_t s;
        if (from_user(&s, set, 8) != 0)
            return -EFAULT;
        switch (how) {
        case SIG_BLOCK: next = old | s; break;
        case SIG_UNBLOCK: next = old & ~s; break;
        case SIG_SETMASK: next = s; break;
        default: return -EINVAL;
        }
        next &= ~(sigbit(SIGKILL) | sigbit(SIGSTOP));
    }
    if (set) {
        *live = upper_mask(c, next);
        vmask_set(c, tid, next & c->reserved_sigs);
        siginfo_t peer; /* another crac process's, if that is what waited (peer_signal.c) */
        if (!(next & ckpt_blocked(c)) && (c->virt_pending & ckpt_blocked(c)) &&
            take_virt_pending(c))
            run_ckpt_handler(uc, SI_TKILL, peer_sig_take(c, &peer) ? &peer : 0);
    }
    return oset ? to_user(oset, &old, 8) : 0; /* as the kernel: the mask is set even then */
}

static inline int mask_ok(long setsize) { return setsize == 8; }

/* The checkpoint signal the program sent itself, given to its own handler on this thread as a
 * delivery would. */
static void run_ckpt_handler(ucontext_t *uc, int code, const siginfo_t *queued)
{
    struct crac_ctrl *c = crac_ctrl();
    siginfo_t si;
    __builtin_memset(&si, 0, sizeof(si));
    if (queued)
        __builtin_memcpy(&si, queued, sizeof(si));
    si.si_signo = c->ckpt_sig;
    if (!queued) {
        si.si_code = code;
        si.si_pid = vid_from_real(c, c->pid);
        si.si_uid = (uid_t)raw_syscall0(SYS_getuid);
    }
    confine_run_ckpt_handler(uc, &si);
}

void confine_run_ckpt_handler(ucontext_t *uc, const siginfo_t *delivered)
{
    struct crac_ctrl *c = crac_ctrl();
    int sig = c->ckpt_sig;
    struct crac_ksigaction act = c->virt_act[sig];
    if (!is_handler(act.handler))
        return;
    if (act.flags & SA_RESETHAND)
        c->virt_act[sig].handler = (uint64_t)SIG_DFL;
    siginfo_t si = *delivered; /* the handler's own copy, as on a signal frame */
    int32_t tid = (int32_t)raw_syscall0(SYS_gettid);
    uint64_t vsaved = vmask_get(c, tid), self = (act.flags & SA_NODEFER) ? 0 : sigbit(sig);
    vmask_set(c, tid, vsaved | ((act.mask | self) & c->reserved_sigs));
    uint64_t during = upper_mask(c, *(uint64_t *)&uc->uc_sigmask | act.mask), saved;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &during, &saved, 8);
    if (act.flags & SA_SIGINFO)
        ((void (*)(int, siginfo_t *, void *))act.handler)(sig, &si, uc);
    else
        ((void (*)(int))act.handler)(sig);
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &saved, 0, 8);
    /* Asked again: a checkpoint may have suspended the thread in the handler (this thread's
     * mask lets it), and the restarted thread has another id; the old one's record would be
     * restored, and this one's keep the signal blocked for ever (ids_remap moved it here). */
    tid = (int32_t)raw_syscall0(SYS_gettid);
    vmask_set(c, tid, vsaved);
}

/* A checkpoint signal the program sent itself and had blocked: taken (1) or none (0). */
static int take_virt_pending(struct crac_ctrl *c)
{
    uint64_t bit = sigbit(c->ckpt_sig);
    return (__atomic_fetch_and(&c->virt_pending, ~bit, __ATOMIC_ACQ_REL) & bit) != 0;
}

/* kill/tkill/tgkill/sigqueue from the program with the checkpoint signal's number, aimed at
 * itself: its own handler gets it; without a handler it asks for a checkpoint, as from outside. */
static long self_ckpt_signal(ucontext_t *uc, int code, const siginfo_t *queued)
{
    struct crac_ctrl *c = crac_ctrl();
    int sig = c->ckpt_sig;
    uint64_t h = c->virt_act[sig].handler;
    if (h == (uint64_t)SIG_IGN)
        return 0;
    if (h == (uint64_t)SIG_DFL)
        return raw_syscall2(SYS_kill, c->pid, sig);
    if (vmask_get(c, (int32_t)raw_syscall0(SYS_gettid)) & sigbit(sig)) {
        __atomic_or_fetch(&c->virt_pending, sigbit(sig), __ATOMIC_ACQ_REL);
        return 0;
    }
    run_ckpt_handler(uc, code, queued);
    return 0;
}

/* Is this kill-family call aimed at this process (one of its threads) with the checkpoint
 * signal? A vfork child (posix_spawn) shares the control block: it is never "this process". */
static int self_ckpt_target(const struct crac_ctrl *c, long nr, long a1, long a2, long a3)
{
    long sig = (nr == SYS_tgkill || nr == SYS_rt_tgsigqueueinfo) ? a3 : a2;
    if (sig != c->ckpt_sig || (int32_t)raw_syscall0(SYS_getpid) != c->pid)
        return 0;
    int32_t me = c->vpid ? c->vpid : c->pid;
    if (nr == SYS_tkill)
        return raw_syscall3(SYS_tgkill, c->pid, vid_to_real(c, (int32_t)a1), 0) == 0;
    return a1 == me;
}

/* What the program may learn of pending signals: never the checkpoint signal from outside. The
 * kernel answers with this handler's mask; the program's is the interrupted one. */
static long emu_rt_sigpending(ucontext_t *uc, uint64_t *set, long setsize)
{
    struct crac_ctrl *c = crac_ctrl();
    if (!mask_ok(setsize))
        return -EINVAL;
    uint64_t pend;
    long r = raw_syscall2(SYS_rt_sigpending, &pend, 8);
    if (r < 0)
        return r;
    uint64_t vblocked = vmask_get(c, (int32_t)raw_syscall0(SYS_gettid));
    uint64_t shown = (pend & *(uint64_t *)&uc->uc_sigmask & ~c->reserved_sigs) |
                     (__atomic_load_n(&c->virt_pending, __ATOMIC_ACQUIRE) & vblocked);
    return to_user(set, &shown, 8);
}

/* sigwaitinfo/sigtimedwait never take the checkpoint signal (crac's lower thread does); the
 * program's own one, or another crac process's, if it waits for it, is taken from virt_pending. */
static long emu_rt_sigtimedwait(ucontext_t *uc, const uint64_t *these, siginfo_t *info,
                                const void *timeout, long setsize, long marker)
{
    struct crac_ctrl *c = crac_ctrl();
    if (!mask_ok(setsize))
        return -EINVAL;
    uint64_t want;
    if (from_user(&want, these, 8) != 0)
        return -EFAULT;
    if ((want & sigbit(c->ckpt_sig)) && take_virt_pending(c)) {
        siginfo_t si; /* another crac process's, if that is what waited (peer_signal.c) */
        if (!peer_sig_take(c, &si)) {
            __builtin_memset(&si, 0, sizeof(si));
            si.si_signo = c->ckpt_sig;
            si.si_code = SI_TKILL;
            si.si_pid = vid_from_real(c, c->pid);
            si.si_uid = (uid_t)raw_syscall0(SYS_getuid);
        }
        if (info && to_user(info, &si, sizeof(si)) != 0)
            return -EFAULT;
        return c->ckpt_sig;
    }
    want &= ~c->reserved_sigs;
    /* Wait under the program's mask, not this handler's (which blocks nearly everything), so
     * crac's suspension and the program's handlers can interrupt the wait as they would. */
    uint64_t prog = *(uint64_t *)&uc->uc_sigmask, saved;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &prog, &saved, 8);
    long r = raw_syscall4(SYS_rt_sigtimedwait, &want, info, timeout, 8);
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &saved, 0, 8);
    /* The sender (or SIGCHLD's child) as the program knows it, as its handlers see it
     * (signal_wrap.c); the upper runtime's own wait keeps the kernel's. */
    siginfo_t si;
    if (r > 0 && info && ids_differ(c) && (unsigned long)marker != CRAC_SIGWAIT_KERNEL_IDS &&
        from_user(&si, info, sizeof(si)) == 0) {
        siginfo_pid_to_program(c, &si);
        to_user(info, &si, sizeof(si));
    }
    return r;
}

static long emu_signalfd(long nr, long fd, const uint64_t *mask, long setsize, long flags)
{
    if (!mask_ok(setsize))
        return -EINVAL;
    uint64_t m;
    if (from_user(&m, mask, 8) != 0)
        return -EFAULT;
    m &= ~crac_ctrl()->reserved_sigs;
    return nr == SYS_signalfd4 ? raw_syscall4(nr, fd, &m, 8, flags) : raw_syscall3(nr, fd, &m, 8);
}

static long emu_masked_wait(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    struct crac_ctrl *c = crac_ctrl();
    uint64_t mask;
    switch (nr) {
    case SYS_rt_sigsuspend:
        if (!mask_ok(a2))
            return -EINVAL;
        if (from_user(&mask, (const void *)a1, 8) != 0)
            return -EFAULT;
        mask = upper_mask(c, mask);
        return raw_syscall2(SYS_rt_sigsuspend, &mask, 8);
    case SYS_ppoll:
        if (!mask_ok(a5))
            return -EINVAL;
        if (from_user(&mask, (const void *)a4, 8) != 0)
            return -EFAULT;
        mask = upper_mask(c, mask);
        return raw_syscall6(SYS_ppoll, a1, a2, a3, (long)&mask, 8, 0);
    case SYS_epoll_pwait:
    case SYS_epoll_pwait2:
        if (!mask_ok(a6))
            return -EINVAL;
        if (from_user(&mask, (const void *)a5, 8) != 0)
            return -EFAULT;
        mask = upper_mask(c, mask);
        return raw_syscall6(nr, a1, a2, a3, a4, (long)&mask, 8);
    case SYS_pselect6: {
        struct {
            const uint64_t *set;
            uint64_t size;
        } in, data = {&mask, 8};
        if (from_user(&in, (const void *)a6, sizeof(in)) != 0)
            return -EFAULT;
        if (!in.set)
            return raw_syscall6(SYS_pselect6, a1, a2, a3, a4, a5, a6);
        if (!mask_ok((long)in.size))
            return -EINVAL;
        if (from_user(&mask, in.set, 8) != 0)
            return -EFAULT;
        mask = upper_mask(c, mask);
        return raw_syscall6(SYS_pselect6, a1, a2, a3, a4, a5, (long)&data);
    }
    }
    return -ENOSYS;
}

long (*confine_lower_fork)(void);
int (*confine_fork_gate)(int failed);
long (*confine_lower_exec)(const void *call);

/* An emulation's answer that the program must issue its system call again (the kernel's own
 * ERESTARTNOINTR, never seen in user space). */
#define EMU_AGAIN (-513L)

/* fs:0 is the TCB's own address in glibc (both halves). */
static inline uint64_t current_fs(void)
{
    uint64_t self;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(self));
    return self;
}

static inline void set_fs(uint64_t fs)
{
    if (crac_fsgsbase)
        __asm__ volatile("wrfsbase %0" : : "r"(fs) : "memory");
    else
        raw_syscall2(SYS_arch_prctl, 0x1002 /* ARCH_SET_FS */, fs);
}

/* The lower libc's fork, on a borrowed shadow TCB as a crossing would (docs/DECISIONS.md
 * "Process trees"). noinline: nothing between the two switches may be cached across them. */
__attribute__((noinline)) static long lower_fork(void)
{
    uint64_t lower = shadow_pool_borrow();
    if (!lower)
        return -EAGAIN;
    uint64_t upper = current_fs();
    set_fs(lower);
    long r = confine_lower_fork();
    set_fs(upper);
    if (r != 0)
        shadow_pool_return(lower); /* the child's copy of the pool was reset: nothing to return */
    return r;
}

/* The same borrowing for other lower-libc work of the handler (an exec under crac). */
__attribute__((noinline)) long confine_on_lower(long (*fn)(const void *), const void *arg)
{
    uint64_t lower = shadow_pool_borrow();
    if (!lower)
        return -EAGAIN;
    uint64_t upper = current_fs();
    set_fs(lower);
    long r = fn(arg);
    set_fs(upper);
    shadow_pool_return(lower);
    return r;
}

/* In a forked child: the MADV_DONTFORK ranges were not copied. W gets its reservation back
 * there (it never has holes), and they are no longer the program's. */
static void drop_dontfork(struct crac_ctrl *c)
{
    for (uint32_t k = 0; k < c->n_advice; k++) {
        struct crac_advice a = c->advice[k];
        if (!(a.bits & CRAC_ADVICE_DONTFORK))
            continue;
        if (inside_w(a.start, a.end - a.start)) {
            rereserve(a.start, a.end);
            ualloc_mark_free(c, a.start, a.end);
        } else
            extras_remove(c, a.start, a.end);
    }
    advice_change(c, 0, UINT64_MAX, 0, CRAC_ADVICE_DONTFORK);
}

#define TREE_CLONE_FLAGS (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | CLONE_PARENT_SETTID)

/* A fork the child of which is a split process of the job: fork, or a clone of a new process
 * with only the flags libc's fork uses, and SIGCHLD. Others (a new stack, namespaces, another
 * exit signal) are the kernel's plain fork of this process, as before. */
static int tree_forkable(long nr, long flags)
{
    if (!confine_lower_fork)
        return 0;
    return nr == SYS_fork || ((flags & 0xff) == SIGCHLD && !(flags & ~(TREE_CLONE_FLAGS | 0xffL)));
}

/* vfork, and posix_spawn's clone(CLONE_VM|CLONE_VFORK) on a stack of its own: a fork of a split
 * process too, a copy, and the parent does not wait for the child's exec (docs/DECISIONS.md
 * "Exec under crac"). */
#define VFORK_FLAGS (CLONE_VM | CLONE_VFORK)
static int tree_vforkable(long nr, long flags)
{
    if (!confine_lower_fork)
        return 0;
    return nr == SYS_vfork || ((flags & VFORK_FLAGS) == VFORK_FLAGS && (flags & 0xff) == SIGCHLD &&
                               !(flags & ~(TREE_CLONE_FLAGS | VFORK_FLAGS | 0xffL)));
}

static int path_exists(const char *path)
{
    struct stat st;
    return raw_syscall4(SYS_newfstatat, AT_FDCWD, (long)path, (long)&st, 0) == 0;
}

/* In a child just forked (c->pid its own, c->real_ppid its parent): of the parent's id map it
 * keeps the processes', so after a restart it signals a sibling by the pid its parent knew (a
 * PostgreSQL backend its checkpointer), and drops the parent's other threads' and the ids of
 * processes gone, whose numbers its own threads and children may get (its own pid among them).
 * Its parent is mapped too. */
static void keep_process_ids(struct crac_ctrl *c)
{
    int32_t parent = c->real_ppid;
    char task[64], alive[32];
    raw_proc_path(task, parent, "/task/");
    int at = (int)__builtin_strlen(task);
    uint32_t kept = 0;
    for (uint32_t k = 0; k < c->n_vids; k++) {
        int32_t real = c->vids[k].real;
        raw_put_uint(task + at, real);
        raw_proc_path(alive, real, "");
        if ((real == parent || !path_exists(task)) && path_exists(alive) && real != c->pid)
            c->vids[kept++] = c->vids[k];
    }
    c->n_vids = kept;
    if (c->vppid != parent && vid_to_real(c, c->vppid) == c->vppid && kept < CRAC_MAX_VIDS)
        c->vids[c->n_vids++] = (struct crac_vid){c->vppid, parent};
}

/* fork and fork-like clone, done with the allocator lock held so the child never inherits it
 * locked. The child returns through this handler's frame on its copy of the stack. */
static long emu_fork(ucontext_t *uc, long nr, long flags, long stack, long ptid, long ctid,
                     long tls)
{
    struct crac_ctrl *c = crac_ctrl();
    int32_t forking_tid = (int32_t)raw_syscall0(SYS_gettid);
    if (nr != SYS_clone) /* fork and vfork take no arguments: the registers hold anything */
        flags = stack = ptid = ctid = tls = 0;
    /* A copy made while a lazy restart still has pages missing would read them as zeros
     * (docs/DECISIONS.md "Lazy restart"): the fork waits for the prefetcher. */
    if (!(flags & CLONE_VM) || (flags & CLONE_VFORK))
        restart_lazy_wait();
    int vfork = tree_vforkable(nr, flags);
    int tree = vfork || tree_forkable(nr, flags);
    if (tree && confine_fork_gate && confine_fork_gate(0))
        return EMU_AGAIN;
    /* A vfork that is not a split process is still a copy: the child must not run on the
     * parent's stack below this handler's frame. */
    if (!tree && nr == SYS_vfork)
        nr = SYS_fork;
    if (!tree && nr == SYS_clone)
        flags &= ~(long)VFORK_FLAGS;
    raw_lock(&c->lock);
    long r = tree             ? lower_fork()
             : nr == SYS_fork ? raw_syscall0(SYS_fork)
                              : raw_syscall6(SYS_clone, flags, 0, ptid, ctid, tls, 0);
    if (tree && r < 0 && confine_fork_gate)
        confine_fork_gate(1);
    if (r == 0) {
        c->vppid = c->vpid ? c->vpid : c->pid; /* the parent, as the program knows it */
        c->real_ppid = c->pid;
        c->pid = (int32_t)raw_syscall0(SYS_getpid);
        c->lock = 0;
        c->vpid = 0;         /* a new process: its ids are the kernel's */
        c->virt_pending = 0; /* a child starts with no pending signals */
        c->peer_sig.state = CRAC_PEER_FREE;
        keep_process_ids(c);
        c->cpu_offset_ns = 0; /* its CPU time starts at 0 */
        c->start_ticks = 0;   /* and its start is now: its first checkpoint records it */
        c->n_tcpu = 0;
        vmask_set(c, c->pid, vmask_get(c, forking_tid)); /* the child's only thread inherits */
        drop_dontfork(c);
        if (stack)
            uc->uc_mcontext.gregs[REG_RSP] = stack;
        if (tree && nr == SYS_clone) {
            /* What the kernel does for the upper libc's flags; the lower libc's fork used its
             * own. */
            if (flags & CLONE_CHILD_SETTID)
                *(int32_t *)ctid = c->pid;
            if (flags & CLONE_CHILD_CLEARTID)
                raw_syscall1(SYS_set_tid_address, ctid);
        }
    } else {
        raw_unlock(&c->lock);
        if (r > 0 && tree && nr == SYS_clone && (flags & CLONE_PARENT_SETTID))
            to_user((void *)ptid, &r, 4);
    }
    return r;
}

/* Group and session ids of a restarted tree (loader/state/pgrp.c) before the pid map: one kernel
 * id can be both the group and the session id the program knew as two. */
int32_t vgroup_from_real(const struct crac_ctrl *c, int32_t real, int session)
{
    for (int i = 0; i < tree_n_vgroups && i < TREE_MAX_VGROUPS; i++)
        if (tree_vgroups[i].real == real && tree_vgroups[i].session == session)
            return tree_vgroups[i].virt;
    return vid_from_real(c, real);
}

static int32_t vgroup_to_real(const struct crac_ctrl *c, int32_t virt)
{
    if (virt <= 0) /* setpgid's 0 is "the pid's own"; a mapped 0 is only ever an answer */
        return virt;
    for (int i = 0; i < tree_n_vgroups && i < TREE_MAX_VGROUPS; i++)
        if (tree_vgroups[i].virt == virt && !tree_vgroups[i].session)
            return tree_vgroups[i].real;
    return vid_to_real(c, virt);
}

/* Ids the program holds are the ones of its first launch; the kernel's differ after a restart. */
static long emu_ids(ucontext_t *uc, long nr, long a1, long a2, long a3, long a4)
{
    const struct crac_ctrl *c = crac_ctrl();
    if (nr != SYS_getpid && nr != SYS_gettid && nr != SYS_getppid &&
        self_ckpt_target(c, nr, a1, a2, a3)) {
        const siginfo_t *queued = nr == SYS_rt_sigqueueinfo     ? (const siginfo_t *)a3
                                  : nr == SYS_rt_tgsigqueueinfo ? (const siginfo_t *)a4
                                                                : 0;
        siginfo_t copy;
        if (queued && from_user(&copy, queued, sizeof(copy)) != 0)
            return -EFAULT;
        return self_ckpt_signal(uc, nr == SYS_kill ? SI_USER : SI_TKILL, queued ? &copy : 0);
    }
    if (nr == SYS_kill && a2 == c->ckpt_sig && ((int32_t)a1 == 0 || (int32_t)a1 < -1)) {
        /* A group's: each process of it gets the program's signal, not a checkpoint request. */
        int32_t group = (int32_t)a1 == 0 ? (int32_t)raw_syscall1(SYS_getpgid, 0)
                                         : vgroup_to_real(c, -(int32_t)a1);
        int self = 0;
        long r = peer_signal_group(a2, group, &self);
        if (r != -ENOSYS) {
            if (self)
                self_ckpt_signal(uc, SI_USER, 0);
            return r;
        }
    }
    if (nr == SYS_kill || nr == SYS_tgkill || nr == SYS_rt_sigqueueinfo) {
        long r = peer_signal_send(c, nr, a1, a2, a3);
        if (r != -ENOSYS)
            return r;
    }
    switch (nr) {
    case SYS_getppid: {
        int32_t real = (int32_t)raw_syscall0(SYS_getppid);
        return c->vppid && real == c->real_ppid ? c->vppid : real; /* else: reparented */
    }
    case SYS_getpid: return vid_from_real(c, (int32_t)raw_syscall0(SYS_getpid));
    case SYS_gettid: return vid_from_real(c, (int32_t)raw_syscall0(SYS_gettid));
    case SYS_tgkill:
        return raw_syscall3(SYS_tgkill, vid_to_real(c, (int32_t)a1), vid_to_real(c, (int32_t)a2),
                            a3);
    case SYS_tkill: return raw_syscall2(SYS_tkill, vid_to_real(c, (int32_t)a1), a2);
    case SYS_kill:
        /* Our own pid, and our children's in a restarted tree (and their groups); other pids
         * are the kernel's. 0 and -1 are not ids. A pid_t: glibc's kill is an assembly stub,
         * so the register's upper half is not the argument's sign (kill(-pgid) arrives as a
         * large positive number). */
        a1 = (int32_t)a1;
        if (a1 > 0 || a1 < -1)
            a1 = a1 > 0 ? vid_to_real(c, (int32_t)a1) : -vgroup_to_real(c, (int32_t)-a1);
        return raw_syscall2(SYS_kill, a1, a2);
    case SYS_rt_sigqueueinfo: /* as kill: a process of the tree by the pid the program knows */
    case SYS_rt_tgsigqueueinfo: {
        /* The kernel passes the siginfo on as given, and sigqueue() puts getpid() in it: the
         * sender's id as the program knows it, meaningless to a receiver outside the tree after
         * a restart (it would answer another process). The kernel's id goes; a receiver of the
         * tree turns it back (signal_wrap.c). */
        siginfo_t si;
        const long at = nr == SYS_rt_sigqueueinfo ? a3 : a4;
        if (from_user(&si, (const void *)at, sizeof(si)) != 0)
            return -EFAULT;
        siginfo_pid_to_kernel(c, &si);
        if (nr == SYS_rt_sigqueueinfo)
            return raw_syscall3(nr, vid_to_real(c, (int32_t)a1), a2, (long)&si);
        return raw_syscall4(nr, vid_to_real(c, (int32_t)a1), vid_to_real(c, (int32_t)a2), a3,
                            (long)&si);
    }
    }
    return -ENOSYS;
}

long emu_self_id(long nr)
{
    if (nr != SYS_getpid && nr != SYS_gettid && nr != SYS_getppid)
        return -ENOSYS;
    return emu_ids(0, nr, 0, 0, 0, 0);
}

/* wait4 and waitid name children (and groups) by the ids the program knows and answer with them
 * (a restarted tree: children have new kernel pids). They may block: they wait under the
 * program's mask, so its handlers and crac's suspension can interrupt them. A checkpoint taken
 * during the wait resumes it, after a restart, with the old kernel pid in its registers: ECHILD
 * then, and c->pid changed; the ids are translated again and the wait re-issued. */
static long emu_wait(ucontext_t *uc, long nr, long a1, long a2, long a3, long a4, long a5)
{
    struct crac_ctrl *c = crac_ctrl();
    long r;
    for (;;) {
        long id = nr == SYS_wait4 ? (int32_t)a1 : a1, arg2 = a2; /* pid_t, as kill's */
        if (nr == SYS_wait4 && (id > 0 || id < -1))
            id = id > 0 ? vid_to_real(c, (int32_t)id) : -vgroup_to_real(c, (int32_t)-id);
        if (nr == SYS_waitid && (a1 == P_PID || a1 == P_PGID) && a2 > 0)
            arg2 = a1 == P_PGID ? vgroup_to_real(c, (int32_t)a2) : vid_to_real(c, (int32_t)a2);
        int32_t before = __atomic_load_n(&c->pid, __ATOMIC_ACQUIRE);
        uint64_t during = upper_mask(c, *(uint64_t *)&uc->uc_sigmask), saved;
        raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &during, &saved, 8);
        r = raw_syscall6(nr, id, arg2, a3, a4, a5, 0);
        raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &saved, 0, 8);
        if (r != -ECHILD || __atomic_load_n(&c->pid, __ATOMIC_ACQUIRE) == before)
            break;
    }
    if (nr == SYS_wait4 && r > 0)
        return vid_from_real(c, (int32_t)r);
    if (nr == SYS_waitid && r == 0 && a3) {
        siginfo_t si; /* written by the kernel just now (or left as the program had it) */
        if (from_user(&si, (const void *)a3, sizeof(si)) == 0 && si.si_pid > 0) {
            si.si_pid = vid_from_real(c, si.si_pid);
            to_user((void *)a3, &si, sizeof(si));
        }
    }
    return r;
}

/* The process's own CPU-time clock, as the program reads it (CLOCK_PROCESS_CPUTIME_ID is the
 * encoded clock of pid 0, type SCHED). The PROF and VIRT kinds start again at 0. */
static int own_process_sched_clock(const struct crac_ctrl *c, int32_t clk)
{
    if (clk == 2)
        return 1;
    if (!cpuclock_names_id(clk) || (clk & 7) != 2)
        return 0;
    int32_t id = cpuclock_id(clk);
    return id == 0 || id == c->pid || (c->vpid && id == c->vpid);
}

int64_t cpu_thread_offset(const struct crac_ctrl *c, int32_t tid)
{
    for (uint32_t k = 0; k < c->n_tcpu && k < CRAC_MAX_TCPU; k++)
        if (c->tcpu[k].tid == tid)
            return c->tcpu[k].offset_ns;
    return 0;
}

/* What a read of clock `clk` gets added: the CPU time the program had before the restart. */
static int64_t cpu_offset(const struct crac_ctrl *c, int32_t clk)
{
    if (own_process_sched_clock(c, clk))
        return c->cpu_offset_ns;
    int32_t id = clk == 3 /* CLOCK_THREAD_CPUTIME_ID */ ? 0 : cpuclock_id(clk);
    if (clk != 3 && (!cpuclock_names_id(clk) || (clk & 7) != 6 /* a thread's, SCHED */))
        return 0;
    if (id == 0)
        id = vid_from_real(c, (int32_t)raw_syscall0(SYS_gettid));
    return cpu_thread_offset(c, id);
}

static int32_t real_clock(const struct crac_ctrl *c, int32_t clk)
{
    if (!cpuclock_names_id(clk))
        return clk;
    return cpuclock_with_id(clk, vid_to_real(c, cpuclock_id(clk)));
}

static void ts_shift(struct timespec *t, int64_t ns)
{
    int64_t v = t->tv_sec * 1000000000LL + t->tv_nsec + ns;
    if (v < 1)
        v = 1; /* an absolute time before the restart: already past */
    t->tv_sec = v / 1000000000LL;
    t->tv_nsec = v % 1000000000LL;
}

#define SIGEV_THREAD_ID_ 4
#define IOPRIO_WHO_PROCESS_ 1

/* A process (group) id as the program knows it and as the kernel does: negative for a group,
 * whose id is the leader's pid. */
static int32_t owner_to_real(const struct crac_ctrl *c, int32_t id)
{
    return id < 0 ? -vid_to_real(c, -id) : vid_to_real(c, id);
}

static int32_t owner_from_real(const struct crac_ctrl *c, int32_t id)
{
    return id < 0 ? -vid_from_real(c, -id) : vid_from_real(c, id);
}

/* F_SETOWN/F_GETOWN(_EX): the process, group or thread that gets SIGIO/SIGURG. */
static long emu_fcntl_owner(const struct crac_ctrl *c, long fd, long cmd, long arg)
{
    struct f_owner_ex ex;
    long r;
    switch (cmd) {
    case F_SETOWN: return raw_syscall3(SYS_fcntl, fd, cmd, owner_to_real(c, (int32_t)arg));
    case F_GETOWN:
        r = raw_syscall3(SYS_fcntl, fd, cmd, 0);
        return r < 0 && r >= -133 ? r : owner_from_real(c, (int32_t)r); /* -errno, or a group */
    case F_SETOWN_EX:
        if (from_user(&ex, (const void *)arg, sizeof(ex)) != 0)
            return -EFAULT;
        ex.pid = vid_to_real(c, ex.pid);
        return raw_syscall3(SYS_fcntl, fd, cmd, &ex);
    case F_GETOWN_EX:
        r = raw_syscall3(SYS_fcntl, fd, cmd, arg);
        if (r == 0) /* written by the kernel just now: the pointer is good */
            ((struct f_owner_ex *)arg)->pid = vid_from_real(c, ((struct f_owner_ex *)arg)->pid);
        return r;
    }
    return raw_syscall3(SYS_fcntl, fd, cmd, arg);
}

/* A terminal's foreground group (tcsetpgrp/tcgetpgrp) and session (tcgetsid), in the ids the
 * program knows. The kernel reads and writes a pid_t through the pointer: use one of ours. */
static long emu_ioctl_pgrp(const struct crac_ctrl *c, long fd, long cmd, long arg)
{
    int32_t id;
    if (cmd == TIOCSPGRP) {
        if (from_user(&id, (const void *)arg, sizeof(id)) != 0)
            return -EFAULT;
        id = vgroup_to_real(c, id);
        return raw_syscall3(SYS_ioctl, fd, cmd, &id);
    }
    long r = raw_syscall3(SYS_ioctl, fd, cmd, &id);
    if (r != 0)
        return r;
    id = vgroup_from_real(c, id, cmd == TIOCGSID);
    return to_user((void *)arg, &id, sizeof(id)) != 0 ? -EFAULT : 0;
}

/* Calls that name a process or thread by the id the program knows (after a restart). Only the
 * process's own ids and its threads' are translated: other pids are the kernel's. */
static long emu_id_args(ucontext_t *uc, long nr, long a1, long a2, long a3, long a4, long a5,
                        long a6)
{
    struct crac_ctrl *c = crac_ctrl();
    switch (nr) {
    case SYS_getpriority:
    case SYS_setpriority:
        if (a1 == 0 /* PRIO_PROCESS */)
            a2 = vid_to_real(c, (int32_t)a2);
        break;
    case SYS_ioprio_get:
    case SYS_ioprio_set:
        if (a1 == IOPRIO_WHO_PROCESS_)
            a2 = vid_to_real(c, (int32_t)a2);
        break;
    case SYS_getpgid:
    case SYS_getsid: {
        long r = raw_syscall1(nr, vid_to_real(c, (int32_t)a1));
        /* a leader's group is its pid */
        return r >= 0 ? vgroup_from_real(c, (int32_t)r, nr == SYS_getsid) : r;
    }
    case SYS_getpgrp: return vgroup_from_real(c, (int32_t)raw_syscall0(nr), 0);
    case SYS_setpgid:
        /* the group to join: this process's, a child's, or the one it was restarted in */
        a1 = vid_to_real(c, (int32_t)a1);
        a2 = vgroup_to_real(c, (int32_t)a2);
        break;
    case SYS_timer_create: {
        struct sigevent ev;
        if (a2) {
            if (from_user(&ev, (const void *)a2, sizeof(ev)) != 0)
                return -EFAULT;
            if (ev.sigev_notify & SIGEV_THREAD_ID_)
                ev._sigev_un._tid = vid_to_real(c, ev._sigev_un._tid);
            a2 = (long)&ev;
        }
        return raw_syscall3(nr, real_clock(c, (int32_t)a1), a2, a3);
    }
    case SYS_clock_gettime: {
        long r = raw_syscall2(nr, real_clock(c, (int32_t)a1), a2);
        /* (the kernel has just written *a2: the pointer is good) */
        int64_t add = r == 0 && a2 ? cpu_offset(c, (int32_t)a1) : 0;
        if (add)
            ts_shift((struct timespec *)a2, add);
        return r;
    }
    case SYS_clock_nanosleep: {
        struct timespec at;
        if ((a2 & TIMER_ABSTIME) && a3 && own_process_sched_clock(c, (int32_t)a1)) {
            if (from_user(&at, (const void *)a3, sizeof(at)) != 0)
                return -EFAULT;
            ts_shift(&at, -c->cpu_offset_ns);
            a3 = (long)&at;
        }
        /* It may sleep long: take the signals the program takes meanwhile (the checkpoint's
         * among them), not this handler's mask. */
        uint64_t during = upper_mask(c, *(uint64_t *)&uc->uc_sigmask), saved;
        raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &during, &saved, 8);
        long r = raw_syscall4(nr, real_clock(c, (int32_t)a1), a2, a3, a4);
        raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &saved, 0, 8);
        return r;
    }
    case SYS_clock_getres:
    case SYS_clock_settime:
    case SYS_clock_adjtime: a1 = real_clock(c, (int32_t)a1); break;
    case SYS_fcntl: return emu_fcntl_owner(c, a1, a2, a3);
    case SYS_ioctl: return emu_ioctl_pgrp(c, a1, a2, a3);
    default: /* sched_*, prlimit64, pidfd_open, process_vm_*, get_robust_list: the id first */
        a1 = vid_to_real(c, (int32_t)a1);
        break;
    }
    return raw_syscall6(nr, a1, a2, a3, a4, a5, a6);
}

/* The program ends while a checkpoint is under way: it finishes first. One about to hold the
 * threads (the program's dmtcp_disable_ckpt() sections all closed) parks this thread too: the
 * call is issued again once released, and then waits for the publishing. A checkpoint still
 * waiting for a section does not hold the exit: a program may end inside its section, which that
 * checkpoint would wait for forever. */
static long emu_exit_group(long status)
{
    struct crac_registry *r = ckpt_registry;
    if (r && __atomic_load_n(&r->holding, __ATOMIC_SEQ_CST) &&
        __atomic_load_n(&r->sections, __ATOMIC_SEQ_CST) <= 0) {
        struct timespec t = {0, 1000000L}; /* not a busy loop of traps until the park signal */
        raw_futex_wait(&r->holding, 1, &t);
        return EMU_AGAIN;
    }
    int32_t busy;
    while ((busy = __atomic_load_n(&ckpt_publishing, __ATOMIC_ACQUIRE)) != 0)
        raw_futex_wait(&ckpt_publishing, busy, NULL);
    return raw_syscall1(SYS_exit_group, status);
}

typedef void (*plain_handler)(int);
typedef void (*info_handler)(int, siginfo_t *, void *);

/* A SIGSYS the program raised itself goes to the program's own (virtual) disposition. */
static void forward_program_sigsys(siginfo_t *info, ucontext_t *uc)
{
    struct crac_ctrl *c = crac_ctrl();
    struct crac_ksigaction *va = &c->virt_act[SIGSYS];
    if (va->handler == (uint64_t)SIG_IGN)
        return;
    if (va->handler == (uint64_t)SIG_DFL) {
        struct crac_ksigaction dfl = {(uint64_t)SIG_DFL, 0, 0, 0};
        raw_syscall4(SYS_rt_sigaction, SIGSYS, &dfl, 0, 8);
        raw_syscall3(SYS_tgkill, raw_syscall0(SYS_getpid), raw_syscall0(SYS_gettid), SIGSYS);
        return; /* not reached: the default action ends the process */
    }
    struct crac_ksigaction act = *va;
    if (act.flags & SA_RESETHAND)
        va->handler = (uint64_t)SIG_DFL;
    /* SIGSYS itself stays unblocked: a seccomp trap while it is blocked kills the process. */
    uint64_t during = upper_mask(c, *(uint64_t *)&uc->uc_sigmask | act.mask);
    uint64_t saved;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &during, &saved, 8);
    if (act.flags & SA_SIGINFO)
        ((info_handler)act.handler)(SIGSYS, info, uc);
    else
        ((plain_handler)act.handler)(SIGSYS);
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &saved, 0, 8);
}

static void on_sigsys(int sig, siginfo_t *info, void *ucv)
{
    (void)sig;
    ucontext_t *uc = ucv;
    greg_t *g = uc->uc_mcontext.gregs;
    if (info->si_code != SECCOMP_SI_CODE) {
        forward_program_sigsys(info, uc);
        return;
    }
    long a1 = g[REG_RDI], a2 = g[REG_RSI], a3 = g[REG_RDX], a4 = g[REG_R10], a5 = g[REG_R8],
         a6 = g[REG_R9];
    long nr = info->si_syscall, r;
    switch (nr) {
    case SYS_mmap: r = emu_mmap(a1, a2, a3, a4, a5, a6); break;
    case SYS_munmap: r = emu_munmap(a1, a2); break;
    case SYS_mremap: r = emu_mremap(a1, a2, a3, a4, a5); break;
    case SYS_brk: r = emu_brk(a1); break;
    case SYS_shmat: r = emu_shmat(a1, a2, a3); break;
    case SYS_shmdt: r = emu_shmdt(a1); break;
    case SYS_madvise: r = emu_madvise(a1, a2, a3); break;
    case SYS_rt_sigaction: r = emu_rt_sigaction(a1, (const void *)a2, (void *)a3, a4); break;
    case SYS_rt_sigprocmask:
        r = emu_rt_sigprocmask(uc, a1, (const void *)a2, (void *)a3, a4);
        break;
    case SYS_fork:
    case SYS_vfork:
    case SYS_clone: r = emu_fork(uc, nr, a1, a2, a3, a4, a5); break;
    case SYS_exit_group: r = emu_exit_group(a1); break;
    case SYS_readlink:
    case SYS_readlinkat: r = emu_readlink(nr, a1, a2, a3, a4); break;
    case SYS_open:
    case SYS_openat:
    case SYS_stat:
    case SYS_lstat:
    case SYS_newfstatat:
    case SYS_statx:
    case SYS_access:
    case SYS_faccessat:
    case SYS_faccessat2: r = emu_path_call(uc, nr, a1, a2, a3, a4, a5); break;
    case SYS_getdents64: r = emu_getdents(a1, a2, a3); break;
    case SYS_execve:
    case SYS_execveat:
        r = emu_execve((uint64_t *)&uc->uc_sigmask, nr, a1, a2, a3, a4, a5);
        if (r == -513) { /* a checkpoint holds the threads: park, then exec (tree_exec.c) */
            g[REG_RIP] -= 2;
            r = nr;
        }
        break;
    case SYS_close_range: r = emu_close_range(a1, a2, a3); break;
    case SYS_close: r = emu_close(a1); break;
    case SYS_dup2: r = emu_dup3(a1, a2, 0, 1); break;
    case SYS_dup3: r = emu_dup3(a1, a2, a3, 0); break;
    case SYS_listen: r = emu_listen(a1, a2); break;
    case SYS_wait4:
    case SYS_waitid: r = emu_wait(uc, nr, a1, a2, a3, a4, a5); break;
    case SYS_getppid:
    case SYS_getpid:
    case SYS_gettid:
    case SYS_tgkill:
    case SYS_tkill:
    case SYS_kill:
    case SYS_rt_sigqueueinfo:
    case SYS_rt_tgsigqueueinfo: r = emu_ids(uc, nr, a1, a2, a3, a4); break;
    case SYS_rt_sigpending: r = emu_rt_sigpending(uc, (void *)a1, a2); break;
    case SYS_rt_sigtimedwait:
        r = emu_rt_sigtimedwait(uc, (const void *)a1, (void *)a2, (const void *)a3, a4, a5);
        break;
    case SYS_signalfd:
    case SYS_signalfd4:
        r = emu_signalfd(nr, a1, (const void *)a2, a3, nr == SYS_signalfd4 ? a4 : 0);
        break;
    case SYS_sched_setaffinity:
    case SYS_sched_getaffinity:
    case SYS_sched_setparam:
    case SYS_sched_getparam:
    case SYS_sched_setscheduler:
    case SYS_sched_getscheduler:
    case SYS_sched_rr_get_interval:
    case SYS_sched_setattr:
    case SYS_sched_getattr:
    case SYS_getpriority:
    case SYS_setpriority:
    case SYS_prlimit64:
    case SYS_ioprio_get:
    case SYS_ioprio_set:
    case SYS_pidfd_open:
    case SYS_process_vm_readv:
    case SYS_process_vm_writev:
    case SYS_get_robust_list:
    case SYS_getpgid:
    case SYS_getsid:
    case SYS_setpgid:
    case SYS_getpgrp:
    case SYS_timer_create:
    case SYS_clock_gettime:
    case SYS_clock_getres:
    case SYS_clock_nanosleep:
    case SYS_clock_settime:
    case SYS_clock_adjtime:
    case SYS_migrate_pages:
    case SYS_move_pages:
    case SYS_ioctl:
    case SYS_fcntl: r = emu_id_args(uc, nr, a1, a2, a3, a4, a5, a6); break;
    case SYS_rt_sigsuspend:
    case SYS_ppoll:
    case SYS_pselect6:
    case SYS_epoll_pwait:
    case SYS_epoll_pwait2: r = emu_masked_wait(nr, a1, a2, a3, a4, a5, a6); break;
    case SYS_seccomp: r = emu_seccomp(a1, a2, a3); break;
    case SYS_prctl: r = emu_prctl(a1, a2, a3, a4, a5); break;
    default:
        /* Not one of ours (the program's own seccomp filter): its SIGSYS. */
        forward_program_sigsys(info, uc);
        return;
    }
    if (r == EMU_AGAIN) { /* back at the syscall instruction, under the program's mask */
        g[REG_RIP] -= 2;
        g[REG_RAX] = nr;
        return;
    }
    g[REG_RAX] = r;
}

void crac_loader_restorer(void);

int confine_install_handler(void)
{
    /* NODEFER and never blocking SIGSYS: a trap while SIGSYS is blocked kills the process.
     * Asynchronous signals are blocked while we hold the allocator lock. The restorer is ours,
     * in the loader's fixed text, so a SIGSYS frame saved on an upper stack stays valid. */
    uint64_t keep_open = 0;
    static const int synchronous[] = {SIGSYS, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT};
    for (unsigned i = 0; i < sizeof(synchronous) / sizeof(synchronous[0]); i++)
        keep_open |= sigbit(synchronous[i]);
    struct crac_ksigaction sa = {(uint64_t)on_sigsys,
                                 SA_SIGINFO | SA_NODEFER | 0x04000000 /* SA_RESTORER */,
                                 (uint64_t)crac_loader_restorer, ~keep_open};
    return (int)raw_syscall4(SYS_rt_sigaction, SIGSYS, &sa, 0, 8);
}

long confine_place(unsigned long len, int prot, int flags, int fd, long off)
{
    return emu_mmap(0, len, prot, flags, fd, off);
}
