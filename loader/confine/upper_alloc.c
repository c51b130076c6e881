/* upper_alloc.c — bookkeeping of which parts of W are in use, and of mappings outside W.
 * TLS-free (raw syscalls only): runs inside the SIGSYS handler on upper-half threads. */
#include "upper_alloc.h"

#include "crac_layout.h"
#include "crac_rawsys.h"

#include <sys/mman.h>

/* Move n ranges from src to dst (overlapping allowed) without calling libc's memmove. */
static void move_ranges(struct crac_range *dst, const struct crac_range *src, uint32_t n)
{
    raw_memmove(dst, src, n * sizeof(*dst));
}

/* Index of the first range whose end is >= addr (touching ranges count, so they coalesce). */
static uint32_t first_end_at_or_after(const struct crac_ctrl *c, uint64_t addr)
{
    uint32_t lo = 0, hi = c->n_used;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (c->used[mid].end < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int ualloc_mark_used(struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    uint32_t i = first_end_at_or_after(c, start);
    uint32_t j = i;
    while (j < c->n_used && c->used[j].start <= end)
        j++;
    if (i == j) {
        if (c->n_used == c->cap_used)
            return -1;
        move_ranges(&c->used[i + 1], &c->used[i], c->n_used - i);
        c->used[i].start = start;
        c->used[i].end = end;
        c->n_used++;
        return 0;
    }
    uint64_t s = c->used[i].start < start ? c->used[i].start : start;
    uint64_t e = c->used[j - 1].end > end ? c->used[j - 1].end : end;
    c->used[i].start = s;
    c->used[i].end = e;
    move_ranges(&c->used[i + 1], &c->used[j], c->n_used - j);
    c->n_used -= (j - i - 1);
    return 0;
}

void ualloc_mark_free(struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    uint32_t i = first_end_at_or_after(c, start + 1);
    uint32_t j = i;
    while (j < c->n_used && c->used[j].start < end)
        j++;
    if (i == j)
        return;
    struct crac_range pieces[2];
    uint32_t np = 0;
    if (c->used[i].start < start)
        pieces[np++] = (struct crac_range){c->used[i].start, start};
    if (c->used[j - 1].end > end)
        pieces[np++] = (struct crac_range){end, c->used[j - 1].end};
    uint32_t removed = j - i;
    if (np > removed && c->n_used == c->cap_used)
        return; /* cannot split: keep it marked used (leaks address space, never overlaps) */
    move_ranges(&c->used[i + np], &c->used[j], c->n_used - j);
    for (uint32_t k = 0; k < np; k++)
        c->used[i + k] = pieces[k];
    c->n_used = c->n_used - removed + np;
}

int ualloc_is_free(const struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    uint32_t i = first_end_at_or_after(c, start + 1);
    return i == c->n_used || c->used[i].start >= end;
}

uint64_t ualloc_find_gap(const struct crac_ctrl *c, uint64_t len, uint64_t align)
{
    uint64_t cursor = CRAC_ALLOC_START;
    uint32_t i = first_end_at_or_after(c, cursor + 1);
    for (;; i++) {
        uint64_t cand = (cursor + align - 1) & ~(align - 1);
        uint64_t limit = i < c->n_used ? c->used[i].start : CRAC_W_END;
        if (cand + len >= cand && cand + len <= limit)
            return cand;
        if (i >= c->n_used)
            return 0;
        if (c->used[i].end > cursor)
            cursor = c->used[i].end;
    }
}

int extras_contains(const struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    /* True when [start,end) is covered by the union of the recorded extras. */
    uint64_t pos = start;
    int progress = 1;
    while (pos < end && progress) {
        progress = 0;
        for (uint32_t k = 0; k < c->n_extras; k++) {
            if (c->extras[k].start <= pos && c->extras[k].end > pos) {
                pos = c->extras[k].end;
                progress = 1;
            }
        }
    }
    return pos >= end;
}

int extras_add(struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    extras_remove(c, start, end);
    /* Ranges that touch it become one: a program's MAP_32BIT mappings, placed by the kernel one
     * below the other, take one slot however many there are. */
    for (uint32_t k = 0; k < c->n_extras;) {
        struct crac_range r = c->extras[k];
        if (r.end == start || r.start == end) {
            start = r.start < start ? r.start : start;
            end = r.end > end ? r.end : end;
            c->extras[k] = c->extras[--c->n_extras];
            continue;
        }
        k++;
    }
    if (c->n_extras >= CRAC_MAX_EXTRAS)
        return -1;
    c->extras[c->n_extras++] = (struct crac_range){start, end};
    return 0;
}

void extras_remove(struct crac_ctrl *c, uint64_t start, uint64_t end)
{
    for (uint32_t k = 0; k < c->n_extras;) {
        struct crac_range r = c->extras[k];
        if (r.end <= start || r.start >= end) {
            k++;
            continue;
        }
        /* A cut out of the middle needs a second slot: with none left the range stays whole
         * (a checkpoint saves what is mapped in it; losing its right piece would lose memory). */
        if (r.start < start && r.end > end && c->n_extras >= CRAC_MAX_EXTRAS) {
            k++;
            continue;
        }
        /* Cut [start,end) out of r: keep the left piece in place, append the right piece. */
        c->extras[k] = c->extras[--c->n_extras];
        if (r.start < start)
            c->extras[c->n_extras++] = (struct crac_range){r.start, start};
        if (r.end > end)
            c->extras[c->n_extras++] = (struct crac_range){end, r.end};
    }
}

/* Open addressing by tid. Slots are never emptied (lookups stop at an empty one); a slot whose
 * bits are 0 means nothing and may be taken over by another tid, so dead threads do not fill it. */
static struct crac_vmask *vmask_slot(struct crac_ctrl *c, int32_t tid, int create)
{
    uint32_t h = (uint32_t)tid % CRAC_MAX_VMASK;
    struct crac_vmask *reusable = 0;
    for (uint32_t k = 0; k < CRAC_MAX_VMASK; k++) {
        struct crac_vmask *v = &c->vmask[(h + k) % CRAC_MAX_VMASK];
        int32_t seen = __atomic_load_n(&v->tid, __ATOMIC_ACQUIRE);
        if (seen == tid)
            return v;
        if (seen != 0) {
            if (!reusable && v->bits == 0)
                reusable = v;
            continue;
        }
        if (!create)
            return 0;
        if (reusable && __sync_bool_compare_and_swap(&reusable->tid, reusable->tid, tid))
            return reusable;
        if (__sync_bool_compare_and_swap(&v->tid, 0, tid))
            return v;
    }
    return 0;
}

uint64_t vmask_get(struct crac_ctrl *c, int32_t tid)
{
    struct crac_vmask *v = vmask_slot(c, tid, 0);
    return v ? v->bits : 0;
}

void vmask_set(struct crac_ctrl *c, int32_t tid, uint64_t bits)
{
    struct crac_vmask *v = vmask_slot(c, tid, bits != 0);
    if (v)
        v->bits = bits;
}

int32_t vid_to_real(const struct crac_ctrl *c, int32_t virt)
{
    if (c->vpid && virt == c->vpid)
        return c->pid;
    for (uint32_t k = 0; k < c->n_vids; k++)
        if (c->vids[k].virt == virt)
            return c->vids[k].real;
    return virt;
}

int32_t vid_from_real(const struct crac_ctrl *c, int32_t real)
{
    if (c->vpid && real == c->pid)
        return c->vpid;
    for (uint32_t k = 0; k < c->n_vids; k++)
        if (c->vids[k].real == real)
            return c->vids[k].virt;
    return real;
}

static int siginfo_names_pid(const siginfo_t *si)
{
    int code = si->si_code;
    return si->si_pid > 0 && (code == SI_USER || code == SI_QUEUE || code == SI_TKILL ||
                              code == SI_MESGQ || (si->si_signo == SIGCHLD && code > 0));
}

void siginfo_pid_to_program(const struct crac_ctrl *c, siginfo_t *si)
{
    if (ids_differ(c) && siginfo_names_pid(si))
        si->si_pid = vid_from_real(c, si->si_pid);
}

void siginfo_pid_to_kernel(const struct crac_ctrl *c, siginfo_t *si)
{
    if (ids_differ(c) && siginfo_names_pid(si))
        si->si_pid = vid_to_real(c, si->si_pid);
}

int ctrl_init(int ckpt_sig)
{
    long r = raw_syscall6(9 /* mmap */, (long)CRAC_CTRL_START, (long)CRAC_CTRL_SIZE,
                          PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (raw_is_err(r))
        return (int)r;
    struct crac_ctrl *c = crac_ctrl();
    c->magic = CRAC_CTRL_MAGIC;
    c->pid = (int32_t)raw_syscall0(39 /* getpid */);
    c->brk_cur = CRAC_BRK_START;
    c->brk_mapped = CRAC_BRK_START;
    c->ckpt_sig = ckpt_sig;
    c->reserved_sigs =
        (1UL << (31 - 1)) | (1UL << (ckpt_sig - 1)) | (1UL << (CRAC_SIG_SUSPEND - 1));
    c->cap_used = (uint32_t)((CRAC_CTRL_SIZE - sizeof(*c)) / sizeof(struct crac_range));
    c->n_used = 0;
    /* The control block and the whole brk range are never handed out by first fit. */
    ualloc_mark_used(c, CRAC_CTRL_START, CRAC_BRK_START + CRAC_BRK_MAX);
    return 0;
}
