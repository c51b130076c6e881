/* restart_check.c — the structural checks of an image, run before a restart acts on any of it and
 * by `crac verify` (crac-loader --check-image): one implementation for both (docs/TRUST.md). */
#include "restart.h"

#include "crac_layout.h"
#include "fds.h"
#include "region_walk.h"

#include <elf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096UL
/* Limits a real image stays far below; a crafted one beyond them is refused before anything is
 * allocated or mapped from its numbers. */
#define CHECK_MAX_REGIONS 65536      /* image_core.c writes at most this many */
#define CHECK_MAX_POSIX_TIMERS 65536 /* timer ids are ints; more than this is not a program's */
#define CHECK_MAX_FD 1048576         /* the kernel's default nr_open */
#define USER_END 0x7ffffffff000UL    /* x86-64 user space (4-level paging) */
#define USER_START 0x10000UL         /* vm.mmap_min_addr's default */

static int bad(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "image corrupted: %s", what);
    return -1;
}

static int in_w(uint64_t start, uint64_t end)
{
    return start >= CRAC_W_START && end <= CRAC_W_END && start < end;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static int overlaps(uint64_t s, uint64_t e, uint64_t lo, uint64_t hi) { return s < hi && e > lo; }

int restart_addr_ok(const struct restart_image *img, uint64_t addr, uint64_t len, int prot)
{
    if (addr + len < addr || !in_w(addr, addr + len))
        return 0;
    struct region_walk w = region_walk_start(img->regions, img->regions_len);
    struct crac_region_rec r;
    while (region_walk_next(&w, &r, NULL, NULL) > 0)
        if (!(r.flags & CRAC_REGION_OUTSIDE_W) && addr >= r.start && addr + len <= r.end)
            return ((int)r.prot & prot) == prot;
    return 0;
}

static int check_regions(const struct restart_image *img, uint64_t core_size, char *err,
                         size_t errlen)
{
    struct region_walk walk = region_walk_start(img->regions, img->regions_len);
    struct crac_region_rec r;
    const char *path;
    const unsigned char *bitmap;
    uint64_t prev_end = 0;
    int n = 0, rc;
    char what[160];
    while ((rc = region_walk_next(&walk, &r, &path, &bitmap)) > 0) {
        if (++n > CHECK_MAX_REGIONS)
            return bad(err, errlen, "more than 65536 regions");
        snprintf(what, sizeof(what), "region %d (0x%lx-0x%lx) ", n - 1, (unsigned long)r.start,
                 (unsigned long)r.end);
        size_t w = strlen(what);
        const char *why = NULL;
        uint64_t len = r.end - r.start;
        if (r.end <= r.start || (r.start | r.end) & (PAGE - 1))
            why = "is not a page-aligned range";
        else if (r.kind < CRAC_REGION_ANON || r.kind > CRAC_REGION_FILE_SHARED)
            why = "has an unknown kind";
        else if (r.prot & ~(unsigned)(PROT_READ | PROT_WRITE | PROT_EXEC))
            why = "has unknown protection bits";
        else if (r.flags &
                 ~(CRAC_REGION_OUTSIDE_W | CRAC_REGION_NORESERVE | CRAC_REGION_DONTDUMP |
                   CRAC_REGION_SHARED_ALIAS | CRAC_REGION_COMPRESSED | CRAC_REGION_INCREMENTAL |
                   CRAC_REGION_SHMEM_FILE | CRAC_REGION_FILE_KEPT))
            why = "has unknown flags";
        else if ((r.flags & CRAC_REGION_SHMEM_FILE) && r.kind != CRAC_REGION_FILE_SHARED)
            why = "is marked a file in memory but is not a shared file mapping";
        else if ((r.flags & CRAC_REGION_FILE_KEPT) &&
                 (r.kind != CRAC_REGION_FILE_SHARED || (r.flags & CRAC_REGION_SHMEM_FILE)))
            why = "is marked a kept file but is not a shared mapping of a file on disk";
        /* Only a file in memory's or a kept file's shared mapping has pages of its own
         * (image_core.c). */
        else if (r.kind == CRAC_REGION_FILE_SHARED && r.core_offset &&
                 !(r.flags & (CRAC_REGION_SHMEM_FILE | CRAC_REGION_FILE_KEPT)))
            why = "is a shared file mapping with saved pages";
        /* Incremental (docs/IMAGE.md "Incremental generations"): an anonymous region of a
         * format 4 image with a PARENT note, its bitmap marking the parent's pages. */
        else if ((r.flags & CRAC_REGION_INCREMENTAL) &&
                 (r.kind != CRAC_REGION_ANON || !img->has_parent || !r.core_offset ||
                  img->proc.format != CRAC_IMAGE_FORMAT_INCREMENTAL ||
                  r.bitmap_bytes != (((len / PAGE + 7) / 8 + 7) & ~7UL)))
            why = "is incremental but not an anonymous region of an incremental image";
        /* Chunks (image_compress.c): 8-aligned, from the data on; each is checked as read. */
        /* An incremental generation of a --compress run (format 4) has them too. */
        else if ((r.flags & CRAC_REGION_COMPRESSED) &&
                 ((img->proc.format != CRAC_IMAGE_FORMAT_COMPRESSED &&
                   img->proc.format != CRAC_IMAGE_FORMAT_INCREMENTAL) ||
                  !r.core_offset || r.core_offset & 7 || r.core_offset < img->data_start ||
                  r.core_offset >= core_size))
            why = "has its compressed data outside upper.core";
        /* A second mapping of a shared object saved once (image_core.c): its pages are the
         * earlier region's, none of its own. */
        else if ((r.flags & CRAC_REGION_SHARED_ALIAS) &&
                 (r.kind != CRAC_REGION_ANON_SHARED || r.core_offset || r.saved_pages))
            why = "is an alias of a shared object but not a shared anonymous region without data";
        else if (!(r.flags & CRAC_REGION_OUTSIDE_W) && !in_w(r.start, r.end))
            why = "lies outside the upper window W";
        /* The program's own MAP_FIXED mappings outside W: never over W, D or the kernel's, and
         * mapped back with MAP_FIXED_NOREPLACE (restart_memory.c), so never over the loader. */
        else if ((r.flags & CRAC_REGION_OUTSIDE_W) &&
                 (r.start < USER_START || r.end > USER_END ||
                  overlaps(r.start, r.end, CRAC_W_START, CRAC_D_END)))
            why = "is marked outside W but overlaps W, D or the kernel's range";
        else if (r.start < prev_end)
            why = "overlaps or precedes the region before it";
        else if (r.core_offset && !(r.flags & CRAC_REGION_COMPRESSED) &&
                 (r.core_offset & (PAGE - 1) || r.core_offset < img->data_start ||
                  r.core_offset > core_size || len > core_size - r.core_offset))
            why = "has its data outside upper.core";
        /* Nothing saved means no pages and no checksum: saved pages without data would come
         * back as zeros. */
        else if (!r.core_offset && (r.saved_pages || r.crc32c))
            why = "has saved pages but no data";
        else if ((uint64_t)r.saved_pages > len / PAGE)
            why = "has more saved pages than it has pages";
        else if (r.kind == CRAC_REGION_FILE_PRIVATE &&
                 r.bitmap_bytes != (((len / PAGE + 7) / 8 + 7) & ~7UL))
            why = "has a bitmap of the wrong size";
        else if ((r.kind == CRAC_REGION_FILE_PRIVATE || r.kind == CRAC_REGION_FILE_SHARED) &&
                 path[0] != '/')
            why = "is a file mapping without an absolute path";
        else if (r.file_offset & (PAGE - 1))
            why = "has an unaligned file offset";
        /* As image_core.c names them: anonymous kinds have no path but a deleted file's. */
        else if ((r.kind == CRAC_REGION_ANON || r.kind == CRAC_REGION_ANON_SHARED) && path[0] &&
                 !ends_with(path, " (deleted)"))
            why = "is anonymous but names a file";
        /* A private file mapping starts inside its file (touching a page past its end would be
         * SIGBUS in the restarted program), unless nothing may touch it: ld.so maps a library's
         * whole span from its file and leaves the gaps between segments PROT_NONE, past the
         * file's end where the segments' offsets are far apart (PyTorch's patched libgomp). */
        else if (r.kind == CRAC_REGION_FILE_PRIVATE && r.prot != PROT_NONE &&
                 r.file_offset >= ((r.file_size + PAGE - 1) & ~(PAGE - 1)) && r.file_size)
            why = "starts beyond the end of its file";
        /* The region's PT_LOAD header (image_core.c writes one per region, in order) says the
         * same: a record moved or resized alone would map the saved pages at the wrong place. */
        const Elf64_Phdr *ph = n - 1 < img->n_loads && img->loads ? &img->loads[n - 1] : NULL;
        unsigned flags = ((r.prot & PROT_READ) ? PF_R : 0) | ((r.prot & PROT_WRITE) ? PF_W : 0) |
                         ((r.prot & PROT_EXEC) ? PF_X : 0);
        if (!why &&
            (!ph || ph->p_type != PT_LOAD || ph->p_vaddr != r.start || ph->p_memsz != len ||
             ph->p_offset != r.core_offset ||
             ph->p_filesz != (r.core_offset && !(r.flags & CRAC_REGION_COMPRESSED) ? len : 0) ||
             ph->p_flags != flags))
            why = "does not match its program header";
        if (why) {
            snprintf(what + w, sizeof(what) - w, "%s", why);
            return bad(err, errlen, what);
        }
        prev_end = r.end;
    }
    if (rc < 0)
        return bad(err, errlen, "bad region record");
    if (n == 0)
        return bad(err, errlen, "no regions");
    if (n != img->n_loads)
        return bad(err, errlen, "the regions and the program headers differ in number");
    return 0;
}

static int check_threads(const struct restart_image *img, char *err, size_t errlen)
{
    if (img->threads_len % sizeof(struct crac_thread_note))
        return bad(err, errlen, "the threads note is not a whole number of records");
    if (img->n_threads < 1)
        return bad(err, errlen, "no threads");
    if (img->n_threads > CRAC_MAX_THREADS)
        return bad(err, errlen, "more threads than crac supports (4096)");
    int mains = 0;
    char what[128];
    for (int i = 0; i < img->n_threads; i++) {
        const struct crac_thread_note *t = &img->threads[i];
        mains += t->is_main != 0;
        for (int j = 0; j < i; j++)
            if (img->threads[j].tid == t->tid || img->threads[j].rec == t->rec) {
                snprintf(what, sizeof(what), "thread %d appears twice", t->tid);
                return bad(err, errlen, what);
            }
        if (t->tid <= 0 || t->rec % 8 ||
            !restart_addr_ok(img, t->rec, sizeof(struct crac_thread_rec), PROT_READ | PROT_WRITE)) {
            snprintf(what, sizeof(what),
                     "thread %d's record 0x%lx is not in the upper half's memory", t->tid,
                     (unsigned long)t->rec);
            return bad(err, errlen, what);
        }
    }
    if (mains > 1)
        return bad(err, errlen, "more than one main thread");
    return 0;
}

static int check_state_notes(const struct restart_image *img, char *err, size_t errlen)
{
    for (int k = 0; k < n_state_kinds; k++) {
        const struct state_note *n = &img->notes[k];
        if (!n->data)
            continue;
        switch (state_kinds[k].note) {
        case CRAC_NT_FDS: {
            struct fd_view v;
            size_t off = 0;
            int count = 0, rc;
            static unsigned char seen[CHECK_MAX_FD / 8];
            memset(seen, 0, sizeof(seen));
            while ((rc = fd_next(n->data, n->len, &off, &v)) > 0) {
                if (++count > FDS_MAX)
                    return bad(err, errlen, "more file descriptors than crac records (4096)");
                if (v.rec.fd >= CHECK_MAX_FD)
                    return bad(err, errlen, "a file descriptor number beyond 1048575");
                if (seen[v.rec.fd / 8] & (1u << (v.rec.fd % 8)))
                    return bad(err, errlen, "a file descriptor recorded twice");
                seen[v.rec.fd / 8] |= (unsigned char)(1u << (v.rec.fd % 8));
            }
            if (rc < 0 || off != n->len)
                return bad(err, errlen, "bad file descriptor record");
            break;
        }
        case CRAC_NT_TIMERS: {
            const struct crac_timers_rec *t = n->data;
            if (t->n_posix > CHECK_MAX_POSIX_TIMERS ||
                n->len < sizeof(*t) + (uint64_t)t->n_posix * sizeof(struct crac_posix_timer_rec))
                return bad(err, errlen, "the timers note is shorter than its count of timers");
            break;
        }
        case CRAC_NT_PENDING: {
            const struct crac_pending_rec *p = n->data;
            if (n->len < sizeof(*p) || p->n_threads > CRAC_MAX_THREADS ||
                n->len < sizeof(*p) + (uint64_t)p->n_threads * sizeof(struct crac_pending_thread) +
                             (uint64_t)p->n_infos * sizeof(struct crac_pending_info))
                return bad(err, errlen, "the pending-signals note is shorter than its count");
            /* Then each thread's own instances (docs/IMAGE.md PENDING). */
            const struct crac_pending_thread *pt = (const void *)(p + 1);
            uint64_t own = 0;
            for (uint32_t i = 0; i < p->n_threads; i++)
                own += pt[i].n_infos;
            if (n->len < sizeof(*p) + (uint64_t)p->n_threads * sizeof(struct crac_pending_thread) +
                             ((uint64_t)p->n_infos + own) * sizeof(struct crac_pending_info))
                return bad(err, errlen, "the pending-signals note is shorter than its count");
            break;
        }
        case CRAC_NT_SECCOMP: {
            const char *why = seccomp_note_check(n->data, n->len);
            if (why)
                return bad(err, errlen, why);
            break;
        }
        default: break;
        }
    }
    return 0;
}

int restart_check_image(const struct restart_image *img, uint64_t core_size, char *err,
                        size_t errlen)
{
    if (img->duplicate_note)
        return bad(err, errlen, "a crac note appears twice");
    if (check_regions(img, core_size, err, errlen) != 0 || check_threads(img, err, errlen) != 0 ||
        check_state_notes(img, err, errlen) != 0)
        return -1;
    /* adopt_registry reads and writes its header before checking the magic there. */
    if (img->proc.registry % 8 ||
        !restart_addr_ok(img, img->proc.registry, offsetof(struct crac_registry, threads),
                         PROT_READ | PROT_WRITE))
        return bad(err, errlen, "the registry address is not in the upper half's memory");
    int sig = img->proc.ckpt_signal;
    if (sig < 1 || sig > 64 || sig == 9 || sig == 19)
        return bad(err, errlen, "bad checkpoint signal");
    return 0;
}

/* Once memory is back: what the restart is about to use of a thread's parked record. */
int restart_check_thread_rec(const struct restart_image *img, const struct crac_thread_rec *rec,
                             int32_t tid, char *err, size_t errlen)
{
    char what[128];
    const char *why = NULL;
    if (rec->state != CRAC_SLOT_PARKED)
        why = "has no parked record";
    else if (!restart_addr_ok(img, rec->park.rsp - 1024, 1024, PROT_READ | PROT_WRITE))
        why = "has its stack outside the upper half's memory";
    else if (!restart_addr_ok(img, rec->park.rip, 1, PROT_EXEC))
        why = "resumes outside the upper half's code";
    else if (!in_w(rec->fsbase, rec->fsbase + 1))
        why = "has its thread pointer outside the upper window";
    if (!why)
        return 0;
    snprintf(what, sizeof(what), "thread %d %s", tid, why);
    return bad(err, errlen, what);
}
