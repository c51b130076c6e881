/* image_core.c — writes upper.core: an ELF core file holding every upper-half region (PT_LOAD at
 * page-aligned offsets, never-touched and zero pages left as holes), a NT_PRSTATUS per thread,
 * NT_FILE, NT_AUXV, and crac's own notes (crac_image.h, docs/IMAGE.md). */
#include "ckpt.h"
#include "image_read.h"

#include "crac_layout.h"
#include "crc32c.h"
#include "page_crcs.h"
#include "image_compress.h"
#include "image_direct.h"
#include "incr.h"
#include "page_digest.h"
#include "page_zero.h"
#include "state.h"
#include "upper_alloc.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <ucontext.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_REGIONS 65536
#define PM_PRESENT (1ULL << 63)
#define PM_SWAPPED (1ULL << 62)
#define PM_FILE (1ULL << 61)
#define PAGEMAP_BATCH 512
#define WRITE_RUN_PAGES 64 /* 256 KiB: written, then summed while in the cache (crc_run) */

struct region {
    struct crac_region_rec rec;
    char path[PATH_MAX];
    unsigned char *bitmap;
    struct cz_region cz;     /* --compress: where its chunks went */
    const uint64_t *written; /* --incremental: pages written since the parent (ckpt_incr.c) */
    uint32_t *page_crcs;     /* --incremental: each page's CRC-32C (the PAGE_CRCS note) */
};

struct buf {
    unsigned char *data;
    size_t len, cap;
};

static int put(struct buf *b, const void *p, size_t n)
{
    if (b->len + n + 8 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap < b->len + n + 8)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    if (p)
        memcpy(b->data + b->len, p, n);
    else
        memset(b->data + b->len, 0, n);
    b->len += n;
    return 0;
}

static int pad(struct buf *b, size_t align)
{
    size_t extra = (align - b->len % align) % align;
    return extra ? put(b, NULL, extra) : 0;
}

static int put_note(struct buf *b, const char *name, uint32_t type, const void *desc, size_t len)
{
    Elf64_Nhdr h = {(Elf64_Word)(strlen(name) + 1), (Elf64_Word)len, type};
    return put(b, &h, sizeof(h)) || put(b, name, h.n_namesz) || pad(b, 4) || put(b, desc, len) ||
           pad(b, 4);
}

/* The checkpointed process's pid: not getpid() in the forked writer, a process of its own. */
pid_t core_owner_pid;

int core_in_forked_copy;

static pid_t core_pid(void) { return core_owner_pid ? core_owner_pid : getpid(); }

static int is_outside_w(uint64_t start) { return start < CRAC_W_START || start >= CRAC_W_END; }

static int wanted(uint64_t start, uint64_t end)
{
    if (start >= CRAC_W_START && end <= CRAC_W_END)
        return 1;
    struct crac_ctrl *c = crac_ctrl();
    for (uint32_t k = 0; k < c->n_extras; k++)
        if (c->extras[k].start < end && c->extras[k].end > start)
            return 1;
    return 0;
}

/* The program's parts of a mapping outside W, in address order: the kernel merges a program's
 * mapping with a lower-half one next to it (same protection, both anonymous: a MAP_32BIT one
 * right after the loader's data) into one line of /proc/self/maps, of which only the program's
 * ranges are its to save. Inside W: the whole mapping. */
static int program_pieces(uint64_t start, uint64_t end, struct crac_range *out, int max)
{
    if (!is_outside_w(start)) {
        out[0] = (struct crac_range){start, end};
        return 1;
    }
    const struct crac_ctrl *c = crac_ctrl();
    int n = 0;
    for (uint32_t k = 0; k < c->n_extras && n < max; k++) {
        uint64_t a = c->extras[k].start > start ? c->extras[k].start : start;
        uint64_t b = c->extras[k].end < end ? c->extras[k].end : end;
        if (a >= b)
            continue;
        int i = n++;
        for (; i > 0 && out[i - 1].start > a; i--)
            out[i] = out[i - 1];
        out[i] = (struct crac_range){a, b};
    }
    return n;
}

static int any_present(int pagemap, uint64_t start, uint64_t end)
{
    uint64_t entries[PAGEMAP_BATCH];
    for (uint64_t a = start; a < end; a += PAGEMAP_BATCH * PAGE) {
        uint64_t n = (end - a) / PAGE < PAGEMAP_BATCH ? (end - a) / PAGE : PAGEMAP_BATCH;
        if (pread(pagemap, entries, n * 8, (off_t)(a / PAGE * 8)) != (ssize_t)(n * 8))
            return 1;
        for (uint64_t i = 0; i < n; i++)
            if (entries[i] & (PM_PRESENT | PM_SWAPPED))
                return 1;
    }
    return 0;
}

/* Narrow a PROT_NONE range to the span of its pages that are in use and present; 0 if none. */
static int used_and_present(int pagemap, unsigned long *start, unsigned long *end)
{
    const struct crac_ctrl *c = crac_ctrl();
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t k = 0; k < c->n_used; k++) {
        uint64_t s = c->used[k].start > *start ? c->used[k].start : *start;
        uint64_t e = c->used[k].end < *end ? c->used[k].end : *end;
        /* The emulated brk range beyond the break is reservation too: look at what is below
         * the break and what is above the brk range. */
        uint64_t pieces[2][2] = {
            {s, e < c->brk_mapped || s >= CRAC_BRK_START + CRAC_BRK_MAX
                    ? e
                    : (s > c->brk_mapped ? s : c->brk_mapped)},
            {s > CRAC_BRK_START + CRAC_BRK_MAX ? s : CRAC_BRK_START + CRAC_BRK_MAX, e}};
        for (int p = 0; p < 2; p++) {
            uint64_t ps = pieces[p][0], pe = pieces[p][1];
            if (ps >= pe || !any_present(pagemap, ps, pe))
                continue;
            lo = ps < lo ? ps : lo;
            hi = pe > hi ? pe : hi;
        }
    }
    if (*start < CRAC_W_START || *end > CRAC_W_END) /* an extra outside W: look at all of it */
        return any_present(pagemap, *start, *end);
    if (hi <= lo)
        return 0;
    *start = lo;
    *end = hi;
    return 1;
}

/* /proc/self/(s)maps writes a newline in a path as the four characters \\012. Undo that when the
 * unescaped name is the mapped file (same inode); a name that really holds a backslash stays. */
static void unescape_maps_path(char *path, unsigned long ino)
{
    if (!strstr(path, "\\012"))
        return;
    char plain[PATH_MAX];
    size_t o = 0;
    for (const char *c = path; *c && o + 1 < sizeof(plain); o++) {
        if (strncmp(c, "\\012", 4) == 0) {
            plain[o] = '\n';
            c += 4;
        } else
            plain[o] = *c++;
    }
    plain[o] = '\0';
    struct stat st;
    if (stat(plain, &st) == 0 && st.st_ino == ino)
        memcpy(path, plain, o + 1);
}

/* glibc's sem_open makes a semaphore under a temporary name in /dev/shm, maps it, then links it
 * to its name and removes the temporary one: /proc/self/maps names the mapping by the removed
 * name ("/dev/shm/sem.XXXXXX (deleted)") although the file lives on. For such a removed PATH,
 * its name now, from the directory (same device and inode), replaces it (room for LEN bytes); 1
 * if found. Every
 * process that opened the semaphore by name maps that name: recorded as the removed name, the
 * creator's mapping came back as memory of its own (Python's multiprocessing locks under the
 * spawn and forkserver methods, one copy each side). */
static int shm_live_name(char *path, size_t len, dev_t dev, unsigned long ino)
{
    if (strncmp(path, "/dev/shm/", 9) != 0)
        return 0;
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    struct dirent *de;
    int found = 0;
    char name[PATH_MAX];
    while (!found && (de = readdir(d))) {
        struct stat st;
        if (de->d_ino != ino || snprintf(name, sizeof(name), "/dev/shm/%s", de->d_name) < 0)
            continue;
        found = stat(name, &st) == 0 && st.st_ino == ino && st.st_dev == dev &&
                S_ISREG(st.st_mode) && strlen(name) < len;
    }
    closedir(d);
    if (found)
        snprintf(path, len, "%s", name);
    return found;
}

/* Whether "VmFlags: rd wr mr mw me nr ..." holds the two-letter FLAG: "nr" when the mapping
 * reserves no swap (MAP_NORESERVE, or the kernel's own choice for read-only/shared mappings),
 * "dd" when the program excluded it from dumps (MADV_DONTDUMP). */
static int vmflags_has(const char *line, const char *flag)
{
    const char *p = line + strlen("VmFlags:");
    while (*p) {
        while (*p == ' ')
            p++;
        if (p[0] == flag[0] && p[1] == flag[1] && (p[2] == ' ' || p[2] == '\n' || p[2] == '\0'))
            return 1;
        while (*p && *p != ' ')
            p++;
    }
    return 0;
}

/* Whether the kernel may have excluded a mapping from dumps ("dd") without the program asking,
 * so that VmFlags must be read before its pages are: a device's (remap_pfn_range), an anonymous
 * inode's (a perf buffer), a deleted file that is no shared memory (memfd_secret), a special
 * mapping ([vvar]). Plain: anonymous memory, a regular file, shared memory. */
static int dump_flag_unsure(const char *path, int anon_inode, int deleted, int regular_file)
{
    if (anon_inode)
        return 1;
    if (deleted) {
        static const char *const shmem[] = {"/dev/zero (deleted)", "/SYSV", "/memfd:", "/dev/shm/"};
        for (size_t k = 0; k < sizeof(shmem) / sizeof(shmem[0]); k++)
            if (strncmp(path, shmem[k], strlen(shmem[k])) == 0)
                return 0;
        return 1;
    }
    if (path[0] == '\0' || strcmp(path, "[heap]") == 0 || strcmp(path, "[stack]") == 0 ||
        strncmp(path, "[anon:", 6) == 0 || strncmp(path, "[anon_shmem:", 12) == 0)
        return 0;
    return !regular_file;
}

/* The VmFlags of /proc/self/smaps, onto the regions inside each mapping: "nr" always, "dd" when
 * WITH_DONTDUMP. smaps accounts every page it walks (20-70 ms of CPU for 2 GiB here), so unless
 * the program asked MADV_DONTDUMP or a mapping is one the kernel may exclude itself
 * (dump_flag_unsure), it is read after the writer dropped the pages it wrote, for "nr" alone
 * (docs/DECISIONS.md "VmFlags after the write"). */
static int read_vmflags(struct region *rs, int n, int with_dontdump)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -1;
    char line[PATH_MAX + 256];
    unsigned long start = 0, end = 0;
    int k = 0; /* the first region not below the mapping being read */
    while (fgets(line, sizeof(line), f)) {
        unsigned long s, e, off, ino;
        unsigned int dmaj, dmin;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &s, &e, perms, &off, &dmaj, &dmin, &ino) ==
            7) {
            start = s;
            end = e;
            continue;
        }
        if (strncmp(line, "VmFlags:", 8) != 0)
            continue; /* a detail line */
        while (k < n && rs[k].rec.start < start)
            k++;
        for (int i = k; i < n && rs[i].rec.start < end; i++) {
            if (vmflags_has(line, "nr"))
                rs[i].rec.flags |= CRAC_REGION_NORESERVE;
            /* Excluded by the program (crac_py.api.exclude, MADV_DONTDUMP): as a core dump
             * does, its contents are left out; the restart maps it back empty. */
            if (with_dontdump && vmflags_has(line, "dd"))
                rs[i].rec.flags |= CRAC_REGION_DONTDUMP;
        }
    }
    fclose(f);
    return 0;
}

/* The regions of /proc/self/maps that belong to the upper half; their VmFlags come from smaps
 * (read_vmflags): whether a mapping was made with MAP_NORESERVE, which the restart must repeat
 * (a 64 GiB private writable mapping is refused without it on a smaller machine), and whether
 * it is excluded from dumps. *FLAGS_FIRST: 1 when they must be read before any page is. */
static int collect_regions(struct region *rs, int max, int pagemap, int *flags_first)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[PATH_MAX + 256];
    int n = 0;
    *flags_first = __atomic_load_n(&crac_ctrl()->dump_advised, __ATOMIC_ACQUIRE);
    while (fgets(line, sizeof(line), f)) {
        unsigned long start, end, off, ino;
        unsigned int dmaj, dmin;
        char perms[8];
        int consumed = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, perms, &off, &dmaj, &dmin,
                   &ino, &consumed) < 7)
            continue;
        if (!wanted(start, end))
            continue;
        char *path = line + consumed;
        path[strcspn(path, "\n")] = '\0';
        unescape_maps_path(path, ino);
        int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                   (perms[2] == 'x' ? PROT_EXEC : 0);
        int shared = perms[3] == 's';
        /* A mapping of an anonymous inode (io_uring's rings, a perf buffer) has no file to map
         * again: its bytes are kept as memory, without an identity (every anonymous inode
         * mapping has the same inode). Its descriptor is not saved; the checkpoint says so. */
        int anon_inode = strncmp(path, "anon_inode:", 11) == 0;
        int anon = path[0] == '\0' || path[0] == '[' || anon_inode;
        size_t plen = strlen(path);
        int deleted = plen > 10 && strcmp(path + plen - 10, " (deleted)") == 0;
        if (deleted && shared && ino &&
            shm_live_name(path, sizeof(line) - (size_t)consumed, makedev(dmaj, dmin), ino)) {
            plen = strlen(path);
            deleted = 0;
        }
        struct crac_range pieces[64];
        int n_pieces = program_pieces(start, end, pieces, 64);
        uint64_t vma_start = start, vma_off = off;
        for (int piece = 0; piece < n_pieces; piece++) {
            start = pieces[piece].start;
            end = pieces[piece].end;
            off = vma_off + (start - vma_start);
            /* PROT_NONE and never touched: a reservation, recreated by reserving W. Only what the
             * allocator handed out can hold data, so only that is looked at (W is 16 TiB). */
            if (!prot && anon) {
                if (!used_and_present(pagemap, &start, &end))
                    continue;
            }
            if (n >= max) {
                fclose(f);
                errno = E2BIG;
                return -1;
            }
            struct region *r = &rs[n++];
            memset(&r->rec, 0, sizeof(r->rec));
            r->bitmap = NULL;
            r->written = NULL;
            r->page_crcs = NULL;
            /* rs is static: a paused writer (this process, generation after generation) must not
             * count the last generation's chunks. */
            memset(&r->cz, 0, sizeof(r->cz));
            r->rec.start = start;
            r->rec.end = end;
            r->rec.prot = (uint32_t)prot;
            r->rec.flags = is_outside_w(start) ? CRAC_REGION_OUTSIDE_W : 0;
            r->rec.file_offset = off;
            snprintf(r->path, sizeof(r->path), "%s", anon ? "" : path);
            if (anon || deleted)
                r->rec.kind = shared ? CRAC_REGION_ANON_SHARED : CRAC_REGION_ANON;
            else
                r->rec.kind = shared ? CRAC_REGION_FILE_SHARED : CRAC_REGION_FILE_PRIVATE;
            /* The shared object's identity (a shmem inode: MAP_SHARED|MAP_ANONYMOUS, SysV shm, an
             * unlinked /dev/shm object): its other mappings are found by it (mark_aliases). */
            if (r->rec.kind == CRAC_REGION_ANON_SHARED && ino && !anon_inode) {
                r->rec.dev = makedev(dmaj, dmin);
                r->rec.ino = ino;
            }
            int regular_file = 0; /* the mapped file itself: its inode, not one at its name now */
            if (r->rec.kind == CRAC_REGION_FILE_PRIVATE || r->rec.kind == CRAC_REGION_FILE_SHARED) {
                struct stat st = {0};
                if (stat(path, &st) == 0) {
                    regular_file = S_ISREG(st.st_mode) && st.st_ino == ino;
                    r->rec.dev = st.st_dev;
                    r->rec.ino = st.st_ino;
                    r->rec.file_size = (uint64_t)st.st_size;
                    r->rec.mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
                }
                /* A file in memory (a POSIX shm object or sem_open semaphore in /dev/shm) is state
                 * like shared anonymous memory: gone with the node, and changed by the program after
                 * the checkpoint. Its pages are saved and written back at restart. */
                struct statfs fs;
                if (r->rec.kind == CRAC_REGION_FILE_SHARED && statfs(path, &fs) == 0 &&
                    fs.f_type == TMPFS_MAGIC)
                    r->rec.flags |= CRAC_REGION_SHMEM_FILE;
                /* A small file on disk the program writes through a shared mapping (the JVM's
                 * hsperfdata, a database's -shm index), any size with --ckpt-open-files: its pages
                 * are kept, for a restart to put the file back as it was, or make it again where it
                 * is gone (another JVM removes a dead pid's, another node). */
                else if (r->rec.kind == CRAC_REGION_FILE_SHARED &&
                         mapping_file_kept(&st, ino, prot & PROT_WRITE))
                    r->rec.flags |= CRAC_REGION_FILE_KEPT;
            }
            *flags_first |= dump_flag_unsure(path, anon_inode, deleted, regular_file);
            r->cz.raw =
                r->rec.kind == CRAC_REGION_ANON_SHARED || r->rec.kind == CRAC_REGION_FILE_SHARED;
            if (r->rec.kind == CRAC_REGION_FILE_PRIVATE) {
                r->rec.bitmap_bytes = (uint32_t)((((end - start) / PAGE + 7) / 8 + 7) & ~7UL);
                r->bitmap = calloc(1, r->rec.bitmap_bytes);
                if (!r->bitmap) {
                    fclose(f);
                    return -1;
                }
            }
        }
    }
    fclose(f);
    return n;
}

/* A shared object mapped more than once: a region whose pages an earlier region of the same
 * object (dev, ino) covers is not saved again (CRAC_REGION_SHARED_ALIAS); the restart maps both
 * from one new object (restart_memory.c). */
static void mark_aliases(struct region *rs, int n)
{
    for (int i = 0; i < n; i++) {
        struct crac_region_rec *r = &rs[i].rec;
        if (r->kind != CRAC_REGION_ANON_SHARED || !r->ino)
            continue;
        for (int q = 0; q < i; q++) {
            const struct crac_region_rec *p = &rs[q].rec;
            if (p->kind == r->kind && p->dev == r->dev && p->ino == r->ino &&
                !(p->flags & (CRAC_REGION_SHARED_ALIAS | CRAC_REGION_DONTDUMP)) &&
                p->file_offset <= r->file_offset &&
                p->file_offset + (p->end - p->start) >= r->file_offset + (r->end - r->start)) {
                r->flags |= CRAC_REGION_SHARED_ALIAS;
                break;
            }
        }
    }
}

/* Written-back in steps of this many bytes (sync_file_range): the disk works while the writer
 * goes on, and the final fsync finds little left to write. */
#define WRITEBACK_STEP (32UL << 20)

struct writer {
    int core, mem, pagemap;
    uint64_t kicked;            /* file offsets below this were handed to write-back */
    unsigned char *bounce;      /* for regions we cannot read directly (PROT_NONE, write-only) */
    struct page_digest *digest; /* hashes behind us */
    struct cz_pipe *cz;         /* --compress: regions go through the chunk pipeline */
    struct direct_io *direct; /* CRAC_DIRECT_WRITE: runs from memory go O_DIRECT (image_direct.c) */
};

/* Which pages of [a, a+n pages) to consider saving; FIRST is a's page index in the region. */
static void candidates(const struct region *r, const uint64_t *pm, uint64_t first, uint64_t n,
                       unsigned char *want)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = pm[i];
        if (r->rec.flags & CRAC_REGION_DONTDUMP) {
            want[i] = 0;
            continue;
        }
        switch (r->rec.kind) {
        case CRAC_REGION_ANON: want[i] = (e & (PM_PRESENT | PM_SWAPPED)) != 0; break;
        case CRAC_REGION_ANON_SHARED: want[i] = 1; break; /* shared pages may be unmapped here */
        case CRAC_REGION_FILE_SHARED:
            /* A file in memory's pages, those inside the file (touching one past its end is
             * SIGBUS). */
            want[i] = (r->rec.flags & (CRAC_REGION_SHMEM_FILE | CRAC_REGION_FILE_KEPT)) &&
                      r->rec.file_offset + (first + i) * PAGE < r->rec.file_size;
            break;
        case CRAC_REGION_FILE_PRIVATE:
            /* Only pages the program wrote (now anonymous copies); the rest come from the file. */
            want[i] = (e & PM_SWAPPED) || ((e & PM_PRESENT) && !(e & PM_FILE));
            break;
        default: want[i] = 0;
        }
    }
}

/* A region the program cannot read (PROT_NONE, write-only) is read through /proc/self/mem, and
 * only its wanted pages: the rest may not be readable at all. ld.so maps a library's 2 MiB
 * alignment gap PROT_NONE from the file, past the file's end; reading those pages fails. */
static int read_wanted(int mem, unsigned char *bounce, uint64_t a, const unsigned char *want,
                       uint64_t n)
{
    for (uint64_t i = 0; i < n;) {
        if (!want[i]) {
            i++;
            continue;
        }
        uint64_t j = i;
        while (j < n && want[j])
            j++;
        if (image_pread_full(mem, bounce + i * PAGE, (j - i) * PAGE, a + i * PAGE) != 0)
            return -1;
        i = j;
    }
    return 0;
}

static int write_all(int fd, const unsigned char *p, size_t len, off_t off)
{
    while (len) {
        ssize_t wr = pwrite(fd, p, len, off);
        if (wr < 0 && errno == EINTR)
            continue;
        if (wr <= 0) {
            if (wr == 0)
                errno = ENOSPC;
            return -1;
        }
        p += wr;
        len -= (size_t)wr;
        off += wr;
    }
    return 0;
}

/* A run of saved pages to its place in the file: queued O_DIRECT when direct writes are on and
 * the run is the program's memory itself (a bounce buffer is reused by the next batch), else
 * through the page cache. A filesystem that takes O_DIRECT opens but refuses the first write
 * (EINVAL) gets every run through the page cache from then on. */
static int write_run(struct writer *w, const unsigned char *p, size_t len, off_t off,
                     int from_memory)
{
    if (w->direct && from_memory) {
        if (direct_write(w->direct, p, len, (uint64_t)off) == 0)
            return 0;
        if (errno != EINVAL || direct_write_used)
            return -1;
        direct_finish(w->direct);
        w->direct = NULL;
    }
    return write_all(w->core, p, len, off);
}

/* Asks for the two lines of a page the zero test reads first (page_is_zero), PROBE_AHEAD pages
 * before it is tested: the hardware prefetcher does not cross a page boundary, and one page
 * ahead left most of each miss to wait for. The sum reads a run's pages only after the whole run
 * is tested, so more lines asked for here were gone by then (crc_run asks for its own). */
#define PROBE_AHEAD 4
static inline void prefetch_probe(const unsigned char *page)
{
    __builtin_prefetch(page, 0, 3);
    __builtin_prefetch(page + PAGE - 64, 0, 3);
}

/* The CRC-32C of a run of saved pages (the region's, chained page by page with each page's index;
 * with --incremental each page's own too), taken once the run is written: a write through the
 * page cache brought the pages into the CPU's cache, and a run is short enough to still be there
 * (WRITE_RUN_PAGES). Summed first, the CRC was the one to read them from memory, and the writer
 * paid ~0.1 s of CPU a GiB more (docs/PERFORMANCE.md "The checkpoint writer's CPU"). A direct
 * write reads nothing with the CPU, so there the CRC is the one read. The pages cannot change
 * meanwhile: the forked writer's copy is its own, and a paused writer's program is stopped. */
static uint32_t crc_run(struct region *r, uint32_t crc, const unsigned char *p, uint64_t first,
                        uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        uint64_t index = first + k;
        const unsigned char *page = p + k * PAGE;
        if (k + 1 < n)
            crc32c_prefetch(page + PAGE, PAGE);
        if (r->page_crcs) { /* the page's own, and the region's from it */
            uint32_t own = crc32c_update(0, page, PAGE);
            r->page_crcs[index] = own;
            crc = page_crc_extend(crc32c_update(crc, &index, 8), own);
        } else {
            crc = crc32c_update(crc, &index, 8);
            crc = crc32c_update(crc, page, PAGE);
        }
    }
    return crc;
}

/* Says which region failed and why before the caller's generic message (errno kept). */
static int region_failed(const struct region *r, const char *why)
{
    int saved = errno;
    fprintf(stderr, "crac: error: region 0x%lx-0x%lx %s: %s: %s\n", (unsigned long)r->rec.start,
            (unsigned long)r->rec.end, r->path[0] ? r->path : "(anonymous)", why, strerror(saved));
    errno = saved;
    return -1;
}

/* The forked writer is done with a run of R's pages once they are written: dropping its copy
 * (MADV_DONTNEED) means the program's next store to each is no copy-on-write copy (the page is
 * the program's alone again), and the writer's memory does not grow with what the program
 * rewrites meanwhile. Only in the forked copy (core_in_forked_copy), only private memory of W;
 * an error (a locked or special mapping) just keeps the pages. */
static int writer_may_drop(const struct region *r)
{
    return core_in_forked_copy && !(r->rec.flags & CRAC_REGION_OUTSIDE_W) &&
           (r->rec.kind == CRAC_REGION_ANON || r->rec.kind == CRAC_REGION_FILE_PRIVATE);
}

static int write_region(struct writer *w, struct region *r)
{
    uint64_t pm[PAGEMAP_BATCH];
    unsigned char want[PAGEMAP_BATCH];
    uint32_t crc = 0;
    int readable = (r->rec.prot & PROT_READ) != 0;
    /* A batch ends a run of pages, so it holds whole runs: compressed, two whole chunks (a
     * direct one holds 253 pages here; 512 made a chunk of two pages after each two, a small
     * write of its own); direct, whole direct runs (254 pages here: 512 made a third write of 4
     * pages in each batch). */
    uint64_t batch = w->cz ? 2 * cz_chunk_pages(w->cz)
                     : w->direct
                         ? PAGEMAP_BATCH / direct_run_pages(w->direct) * direct_run_pages(w->direct)
                         : PAGEMAP_BATCH;
    for (uint64_t a = r->rec.start; a < r->rec.end; a += batch * PAGE) {
        uint64_t n = (r->rec.end - a) / PAGE < batch ? (r->rec.end - a) / PAGE : batch;
        if (image_pread_full(w->pagemap, (unsigned char *)pm, n * 8, a / PAGE * 8) != 0)
            return region_failed(r, "its page map cannot be read");
        candidates(r, pm, (a - r->rec.start) / PAGE, n, want);
        /* Incremental: a page in memory that was not written since the parent is the parent's
         * (its bit in the bitmap); one not in memory is zero, as in a full image. */
        for (uint64_t i = 0; r->written && i < n; i++) {
            uint64_t index = (a - r->rec.start) / PAGE + i;
            if (want[i] && !((r->written[index / 64] >> (index % 64)) & 1)) {
                want[i] = 0;
                r->bitmap[index / 8] |= (unsigned char)(1u << (index % 8));
                if (r->page_crcs)
                    r->page_crcs[index] = 0; /* the parent's */
            }
        }
        const unsigned char *src = (const unsigned char *)a;
        if (!readable) {
            if (read_wanted(w->mem, w->bounce, a, want, n) != 0)
                return region_failed(r, "it cannot be read");
            src = w->bounce;
        }
        /* Write runs of consecutive saved pages with one pwrite each (of at most WRITE_RUN_PAGES
         * uncompressed: crc_run). */
        uint64_t run_start = 0, run_len = 0;
        for (uint64_t i = 0; i <= n; i++) {
            int save = 0;
            if (i < n && want[i]) {
                const unsigned char *page = src + i * PAGE;
                if (i + PROBE_AHEAD < n && want[i + PROBE_AHEAD])
                    prefetch_probe(page + PROBE_AHEAD * PAGE);
                save = r->rec.kind == CRAC_REGION_FILE_PRIVATE || !page_is_zero(page);
                if (save) {
                    uint64_t index = (a - r->rec.start) / PAGE + i;
                    r->rec.saved_pages++;
                    if (r->bitmap && !r->written)
                        r->bitmap[index / 8] |= (unsigned char)(1u << (index % 8));
                }
            }
            if (save &&
                (w->cz || run_len < (w->direct ? direct_run_pages(w->direct) : WRITE_RUN_PAGES))) {
                if (!run_len)
                    run_start = i;
                run_len++;
                continue;
            }
            if (run_len && w->cz) {
                /* Each page's own CRC for --incremental (the region's: each chunk's, on the
                 * workers). Chunks of at most cz_chunk_pages; a bounce buffer is reused by the
                 * next batch, so its pages are copied; the pipeline drops the writer's copy of
                 * the others once written (not pages whose own CRCs are taken below). */
                int use = !readable                             ? CZ_COPY
                          : writer_may_drop(r) && !r->page_crcs ? CZ_DROP
                                                                : CZ_KEEP;
                uint64_t most = cz_chunk_pages(w->cz);
                for (uint64_t c = 0; c < run_len; c += most) {
                    uint64_t k = run_len - c < most ? run_len - c : most;
                    uint64_t first = (a - r->rec.start) / PAGE + run_start + c;
                    if (cz_submit(w->cz, &r->cz, first, (uint32_t)k, src + (run_start + c) * PAGE,
                                  use) != 0)
                        return -1;
                }
                if (r->page_crcs)
                    crc_run(r, 0, src + run_start * PAGE, (a - r->rec.start) / PAGE + run_start,
                            run_len);
                run_len = 0;
            } else if (run_len) {
                off_t off = (off_t)(r->rec.core_offset + (a - r->rec.start) + run_start * PAGE);
                const unsigned char *run = src + run_start * PAGE;
                if (write_run(w, run, run_len * PAGE, off, readable) != 0)
                    return -1;
                if (w->direct && readable && direct_overlap_sum(w->direct) != 0)
                    return -1;
                crc = crc_run(r, crc, run, (a - r->rec.start) / PAGE + run_start, run_len);
                run_len = 0;
            }
            if (save) { /* a page past a full run begins the next one */
                run_start = i;
                run_len = 1;
            }
        }
        if (w->cz)
            continue;
        if (writer_may_drop(r)) /* written: the writer's copy goes */
            madvise((void *)a, n * PAGE, MADV_DONTNEED);
        uint64_t below = r->rec.core_offset + (a - r->rec.start) + n * PAGE;
        page_digest_progress(w->digest, below);
        if (below >= w->kicked + WRITEBACK_STEP) {
            sync_file_range(w->core, (off_t)w->kicked, (off_t)(below - w->kicked),
                            SYNC_FILE_RANGE_WRITE);
            w->kicked = below;
        }
    }
    if (w->cz)
        return cz_end_region(w->cz, &r->cz);
    r->rec.crc32c = crc;
    return 0;
}

static void prstatus_from(const struct parked_thread *t, struct elf_prstatus *ps)
{
    memset(ps, 0, sizeof(*ps));
    ps->pr_pid = t->tid;
    const ucontext_t *uc = (const ucontext_t *)t->rec->ucontext;
    const greg_t *g = uc->uc_mcontext.gregs;
    struct user_regs_struct *u = (struct user_regs_struct *)&ps->pr_reg;
    u->r15 = (uint64_t)g[REG_R15], u->r14 = (uint64_t)g[REG_R14], u->r13 = (uint64_t)g[REG_R13];
    u->r12 = (uint64_t)g[REG_R12], u->rbp = (uint64_t)g[REG_RBP], u->rbx = (uint64_t)g[REG_RBX];
    u->r11 = (uint64_t)g[REG_R11], u->r10 = (uint64_t)g[REG_R10], u->r9 = (uint64_t)g[REG_R9];
    u->r8 = (uint64_t)g[REG_R8], u->rax = (uint64_t)g[REG_RAX], u->rcx = (uint64_t)g[REG_RCX];
    u->rdx = (uint64_t)g[REG_RDX], u->rsi = (uint64_t)g[REG_RSI], u->rdi = (uint64_t)g[REG_RDI];
    u->orig_rax = (uint64_t)-1, u->rip = (uint64_t)g[REG_RIP], u->eflags = (uint64_t)g[REG_EFL];
    u->rsp = (uint64_t)g[REG_RSP], u->fs_base = t->rec->fsbase, u->cs = 0x33, u->ss = 0x2b;
}

/* The REGIONS note's description: a record, path and bitmap per region. */
static int regions_desc(struct buf *rb, const struct region *rs, int nr)
{
    for (int i = 0; i < nr; i++) {
        struct crac_region_rec rec = rs[i].rec;
        rec.path_len = (uint32_t)((strlen(rs[i].path) + 1 + 7) & ~7UL);
        rec.size = (uint32_t)(sizeof(rec) + rec.path_len + rec.bitmap_bytes);
        if (put(rb, &rec, sizeof(rec)) || put(rb, rs[i].path, strlen(rs[i].path) + 1) ||
            pad(rb, 8) || (rec.bitmap_bytes && put(rb, rs[i].bitmap, rec.bitmap_bytes)))
            return -1;
    }
    return 0;
}

/* --incremental: each page's CRC-32C, so a restart from a chain can check the pages it reads of
 * a generation without reading the others (docs/DECISIONS.md, branch incr2). Known once the
 * regions are written: patched in place like the REGIONS note, at page_crcs_note_at. */
static size_t page_crcs_note_at;

static int page_crcs_desc(struct buf *cb, const struct region *rs, int nr)
{
    for (int i = 0; i < nr; i++) {
        if (!rs[i].page_crcs)
            continue;
        struct crac_page_crcs_rec pc = {rs[i].rec.start, rs[i].rec.end};
        uint64_t n = (rs[i].rec.end - rs[i].rec.start) / PAGE;
        if (put(cb, &pc, sizeof(pc)) || put(cb, rs[i].page_crcs, n * 4) || pad(cb, 8)) {
            free(cb->data);
            cb->data = NULL;
            return -1;
        }
    }
    return 0;
}

static int build_notes(struct buf *b, const struct region *rs, int nr,
                       const struct parked_thread *ts, int nt, int generation,
                       const struct state_note *kind_notes, size_t *regions_at)
{
    for (int i = 0; i < nt; i++) {
        struct elf_prstatus ps;
        prstatus_from(&ts[i], &ps);
        if (put_note(b, "CORE", NT_PRSTATUS, &ps, sizeof(ps)))
            return -1;
    }
    /* NT_FILE: count, page size, (start, end, page offset) each, then the names. */
    struct buf nf = {0};
    uint64_t count = 0, page = PAGE;
    for (int i = 0; i < nr; i++)
        count += rs[i].path[0] != '\0';
    put(&nf, &count, 8);
    put(&nf, &page, 8);
    for (int i = 0; i < nr; i++)
        if (rs[i].path[0]) {
            uint64_t e[3] = {rs[i].rec.start, rs[i].rec.end, rs[i].rec.file_offset / PAGE};
            put(&nf, e, sizeof(e));
        }
    for (int i = 0; i < nr; i++)
        if (rs[i].path[0])
            put(&nf, rs[i].path, strlen(rs[i].path) + 1);
    int rc = put_note(b, "CORE", NT_FILE, nf.data, nf.len);
    free(nf.data);
    if (rc)
        return -1;
    const Elf64_auxv_t *aux = (const Elf64_auxv_t *)ckpt_registry->auxv;
    size_t naux = 0;
    if (aux)
        while (naux < 64 && aux[naux++].a_type != AT_NULL)
            ;
    if (naux && put_note(b, "CORE", NT_AUXV, aux, naux * sizeof(*aux)))
        return -1;

    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)))
        cwd[0] = '\0';
    struct buf pb = {0};
    mode_t mask = umask(0);
    umask(mask);
    struct crac_process_rec pr = {(uint32_t)CKPT_IMAGE_FORMAT(),
                                  (uint32_t)vid_from_real(crac_ctrl(), core_pid()),
                                  (uint64_t)ckpt_registry,
                                  CRAC_W_START,
                                  CRAC_W_END,
                                  CRAC_D_START,
                                  CRAC_D_END,
                                  generation,
                                  ckpt_cfg.ckpt_signal,
                                  (uint32_t)mask,
                                  (uint32_t)((strlen(cwd) + 1 + 7) & ~7UL)};
    put(&pb, &pr, sizeof(pr));
    put(&pb, cwd, strlen(cwd) + 1);
    pad(&pb, 8);
    rc = put_note(b, CRAC_NOTE_NAME, CRAC_NT_PROCESS, pb.data, pb.len);
    free(pb.data);
    if (rc)
        return -1;
    const struct crac_parent_rec *parent = incr_parent();
    if (parent && put_note(b, CRAC_NOTE_NAME, CRAC_NT_PARENT, parent, sizeof(*parent)))
        return -1;

    struct buf rb = {0};
    if (regions_desc(&rb, rs, nr) != 0)
        return -1;
    /* Where the REGIONS note's bytes start: the only note the data written changes (its
     * checksums, page counts, bitmaps, offsets), patched there once the regions are written. */
    rc = put_note(b, CRAC_NOTE_NAME, CRAC_NT_REGIONS, rb.data, rb.len);
    *regions_at = b->len - ((rb.len + 3) & ~(size_t)3);
    free(rb.data);
    if (rc)
        return -1;
    struct buf cb = {0};
    if (page_crcs_desc(&cb, rs, nr) != 0)
        return -1;
    rc = cb.len ? put_note(b, CRAC_NOTE_NAME, CRAC_NT_PAGE_CRCS, cb.data, cb.len) : 0;
    page_crcs_note_at = b->len - ((cb.len + 3) & ~(size_t)3); /* patched as REGIONS is */
    free(cb.data);
    if (rc)
        return -1;

    struct crac_thread_note *tn = calloc((size_t)nt + 1, sizeof(*tn));
    for (int i = 0; i < nt; i++)
        tn[i] = (struct crac_thread_note){ts[i].rec->tid, ts[i].tid, ts[i].tid == core_pid(), 0,
                                          (uint64_t)ts[i].rec};
    rc = put_note(b, CRAC_NOTE_NAME, CRAC_NT_THREADS, tn, (size_t)nt * sizeof(*tn));
    free(tn);
    if (rc)
        return -1;
    /* The other kinds of state, in the table's order (loader/state/kinds.c). */
    for (int k = 0; k < n_state_kinds; k++)
        if (state_kinds[k].note &&
            put_note(b, CRAC_NOTE_NAME, state_kinds[k].note, kind_notes[k].data, kind_notes[k].len))
            return -1;
    return 0;
}

/* CRAC_DIRECT_WRITE: the file at its final size first (an O_DIRECT write past the end waits
 * for the disk on ext4; within the size it is queued), then a direct descriptor. A filesystem
 * that refuses O_DIRECT (EINVAL) leaves the buffered writer in charge; other errors fail. */
static int open_direct(struct writer *w, const char *path, uint64_t size)
{
    if (ftruncate(w->core, (off_t)size) != 0)
        return -1;
    w->direct = direct_open(path);
    return w->direct || errno == EINVAL ? 0 : -1;
}

int core_write(const char *path, const struct parked_thread *ts, int nt, int generation,
               const struct state_note *kind_notes, uint32_t *header_crc, uint64_t *file_size,
               struct page_digest **digest)
{
    static struct region rs[MAX_REGIONS];
    struct writer w = {-1, -1, -1, 0, NULL, NULL, NULL, NULL};
    int rc = -1, nr = 0;
    struct buf notes = {0};
    w.pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    w.mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    w.bounce = malloc(PAGEMAP_BATCH * PAGE);
    if (w.pagemap < 0 || w.mem < 0 || !w.bounce)
        goto out;
    int vmflags_first = 0;
    nr = collect_regions(rs, MAX_REGIONS, w.pagemap, &vmflags_first);
    if (nr < 0 || (vmflags_first && read_vmflags(rs, nr, 1) != 0))
        goto out;
    mark_aliases(rs, nr);
    /* Incremental: the regions tracked since the parent keep only their written pages; the
     * bitmap (sized now: the notes' size must not change) lists the pages the parent holds. */
    for (int i = 0; i < nr; i++) {
        struct region *r = &rs[i];
        if (r->rec.kind != CRAC_REGION_ANON ||
            (r->rec.flags & (CRAC_REGION_DONTDUMP | CRAC_REGION_OUTSIDE_W)) ||
            !(r->written = incr_written(r->rec.start, r->rec.end)))
            continue;
        r->rec.flags |= CRAC_REGION_INCREMENTAL;
        r->rec.bitmap_bytes = (uint32_t)((((r->rec.end - r->rec.start) / PAGE + 7) / 8 + 7) & ~7UL);
        if (!(r->bitmap = calloc(1, r->rec.bitmap_bytes)))
            goto out;
    }
    /* An incremental generation is written as chunks (stored RAW without --compress): its few
     * scattered pages packed one after another, not each at its address's offset in a sparse
     * file, which cost a pwrite, a filesystem extent and (at restart) a pread a page. Each chunk
     * carries its CRC-32C, so such a generation needs no page CRCs (docs/IMAGE.md). */
    int packed = 0;
    for (int i = 0; i < nr; i++)
        packed |= rs[i].written != NULL;
    /* An --incremental run's other generations (full ones, chains' bases) get a CRC-32C per page
     * of its private anonymous regions (a page not saved: that of zeros until write_region says
     * otherwise): a restart reads only the pages no newer generation holds. */
    for (int i = 0; incr_full_every() && ckpt_cfg.compress == CRAC_CHUNK_RAW && !packed && i < nr;
         i++) {
        struct region *r = &rs[i];
        if (r->rec.kind != CRAC_REGION_ANON ||
            (r->rec.flags & (CRAC_REGION_DONTDUMP | CRAC_REGION_OUTSIDE_W)))
            continue;
        uint64_t n = (r->rec.end - r->rec.start) / PAGE;
        if (!(r->page_crcs = malloc(n * 4)))
            goto out;
        for (uint64_t k = 0; k < n; k++)
            r->page_crcs[k] = page_crc_zero();
    }
    /* Lay out: headers and notes first (their size does not depend on the data), then each
     * region at a page-aligned offset. */
    size_t regions_at = 0;
    if (build_notes(&notes, rs, nr, ts, nt, generation, kind_notes, &regions_at) != 0)
        goto out;
    size_t phnum = 1 + (size_t)nr;
    uint64_t head = sizeof(Elf64_Ehdr) + phnum * sizeof(Elf64_Phdr) + notes.len;
    uint64_t base = (head + PAGE - 1) & ~(PAGE - 1), offset = base;
    for (int i = 0; i < nr; i++) {
        if ((rs[i].rec.kind == CRAC_REGION_FILE_SHARED &&
             !(rs[i].rec.flags & (CRAC_REGION_SHMEM_FILE | CRAC_REGION_FILE_KEPT))) ||
            (rs[i].rec.flags & CRAC_REGION_SHARED_ALIAS))
            continue;
        rs[i].rec.core_offset = offset;
        offset += rs[i].rec.end - rs[i].rec.start;
    }
    w.core = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (w.core < 0)
        goto out;
    /* digest NULL: the forked writer (ckpt_writer.c), which starts no digest thread (its
     * --compress workers are the chunk pipeline's, joined before it returns). */
    if (digest)
        w.digest = page_digest_start(path, base, offset > base ? offset : base);
    int direct = core_in_forked_copy && direct_write_requested();
    if (ckpt_cfg.compress != CRAC_CHUNK_RAW || packed) {
        /* Compressed or packed: the regions' chunk streams follow each other from base, in
         * region order, within the uncompressed layout's size plus the direct chunks' gaps (at
         * most a page in 64: the size is set again at the end). */
        if (direct && open_direct(&w, path, offset + offset / 32))
            goto out;
        w.cz = cz_start(ckpt_cfg.compress, ckpt_cfg.compress_level, w.core, base, w.direct);
        w.direct = NULL; /* the pipeline's now */
        if (!w.cz)
            goto out;
    } else if (direct && open_direct(&w, path, offset))
        goto out;
    for (int i = 0; i < nr; i++)
        if (rs[i].rec.core_offset && write_region(&w, &rs[i]) != 0)
            goto out;
    if (w.direct) { /* every page run on disk before the header and the caller's fsync */
        int failed = direct_finish(w.direct);
        w.direct = NULL;
        if (failed)
            goto out;
    }
    if (w.cz) {
        uint64_t end = base;
        int failed = cz_finish(w.cz, &end);
        w.cz = NULL;
        if (failed)
            goto out;
        offset = end;
        for (int i = 0; i < nr; i++) {
            struct region *r = &rs[i];
            if (!r->rec.core_offset)
                continue;
            if (r->cz.pages != r->rec.saved_pages) { /* cannot happen: one count per page */
                errno = EPROTO;
                goto out;
            }
            r->rec.core_offset = r->cz.core_offset;
            r->rec.crc32c = r->cz.crc32c;
            r->rec.flags |= CRAC_REGION_COMPRESSED;
        }
    }
    if (!vmflags_first && read_vmflags(rs, nr, 0) != 0)
        goto out;
    /* Now the REGIONS note with the final checksums and bitmaps, over the one the layout was
     * sized with. The other notes are not built again: the forked writer has released the
     * pages it wrote (write_region), the threads' records among them. */
    struct buf rb = {0};
    if (regions_desc(&rb, rs, nr) != 0)
        goto out;
    if (regions_at + rb.len > notes.len) { /* cannot happen: the same regions, the same sizes */
        free(rb.data);
        errno = EOVERFLOW;
        goto out;
    }
    memcpy(notes.data + regions_at, rb.data, rb.len);
    free(rb.data);
    struct buf cb = {0};
    if (page_crcs_desc(&cb, rs, nr) != 0)
        goto out;
    if (cb.len && page_crcs_note_at + cb.len > notes.len) { /* cannot happen, as above */
        free(cb.data);
        errno = EOVERFLOW;
        goto out;
    }
    if (cb.len)
        memcpy(notes.data + page_crcs_note_at, cb.data, cb.len);
    free(cb.data);
    struct buf head_buf = {0};
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof(eh));
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = ELFOSABI_SYSV;
    eh.e_type = ET_CORE;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(eh);
    eh.e_ehsize = sizeof(eh);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = (Elf64_Half)phnum;
    put(&head_buf, &eh, sizeof(eh));
    Elf64_Phdr note = {PT_NOTE, 0, sizeof(eh) + phnum * sizeof(Elf64_Phdr), 0, 0, notes.len, 0, 4};
    put(&head_buf, &note, sizeof(note));
    for (int i = 0; i < nr; i++) {
        const struct crac_region_rec *r = &rs[i].rec;
        Elf64_Phdr ph = {PT_LOAD,
                         ((r->prot & PROT_READ) ? PF_R : 0) | ((r->prot & PROT_WRITE) ? PF_W : 0) |
                             ((r->prot & PROT_EXEC) ? PF_X : 0),
                         r->core_offset, r->start, 0,
                         /* a compressed region's chunks are not its bytes: none in the file
                          * for gdb and readelf (docs/IMAGE.md) */
                         r->core_offset && !(r->flags & CRAC_REGION_COMPRESSED) ? r->end - r->start
                                                                                : 0,
                         r->end - r->start, PAGE};
        put(&head_buf, &ph, sizeof(ph));
    }
    put(&head_buf, notes.data, notes.len);
    uint64_t data_start = (head_buf.len + PAGE - 1) & ~(PAGE - 1);
    put(&head_buf, NULL, data_start - head_buf.len);
    if (data_start != base) { /* cannot happen: the dry run sized the notes */
        free(head_buf.data);
        errno = EOVERFLOW;
        goto out;
    }
    *header_crc = crc32c_update(0, head_buf.data, head_buf.len);
    int wr = write_all(w.core, head_buf.data, head_buf.len, 0);
    free(head_buf.data);
    if (wr != 0)
        goto out;
    uint64_t size = offset > data_start ? offset : data_start;
    /* No fsync here: the program resumes as soon as the bytes are in the page cache, and
     * publishing flushes them to disk before the generation is renamed into place. */
    if (ftruncate(w.core, (off_t)size) != 0)
        goto out;
    *file_size = size;
    rc = 0;
out:
    if (w.direct) { /* failed on the way: let the queued writes end before the pages go */
        int saved = errno;
        direct_finish(w.direct);
        errno = saved;
    }
    if (w.cz) { /* failed on the way: stop the workers */
        int saved = errno;
        uint64_t end;
        cz_finish(w.cz, &end);
        errno = saved;
    }
    if (rc != 0)
        fprintf(stderr, "crac: error: cannot write %s: %s\n", path, strerror(errno));
    if (rc == 0 && digest) {
        page_digest_written(w.digest, 1);
        *digest = w.digest;
    } else {
        page_digest_cancel(w.digest);
        if (digest)
            *digest = NULL;
    }
    for (int i = 0; i < nr; i++) {
        free(rs[i].bitmap);
        free(rs[i].page_crcs);
        rs[i].page_crcs = NULL;
    }
    free(notes.data);
    free(w.bounce);
    if (w.core >= 0)
        close(w.core);
    if (w.mem >= 0)
        close(w.mem);
    if (w.pagemap >= 0)
        close(w.pagemap);
    return rc;
}
