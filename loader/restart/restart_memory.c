/* restart_memory.c — maps every saved region back at its address and fills it from upper.core,
 * checking each region's CRC-32C as it goes (holes are skipped with SEEK_DATA). */
#include "restart.h"
#include "brk_guard.h"
#include "image_read.h"

#include "crac_layout.h"
#include "crc32c.h"
#include "crc32c_combine.h"
#include "fds.h"
#include "image_compress.h"
#include "page_zero.h"
#include "region_walk.h"
#include "restart_lazy.h"
#include "restart_stage.h"
#include "upper_alloc.h"

#include <errno.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

/* Anonymous regions: the data extents of the region's range in the core; zero pages inside an
 * extent are holes the writer did not write, so they do not count. One part of a region, [from,
 * to) in the core, summed from crc: a large region is filled by two threads, one part each. */
struct fill_part {
    int core;
    const struct crac_region_rec *r;
    uint64_t from, to;
    uint32_t crc, pages;
    int rc;
    int uffd; /* >= 0: the region is registered with it, filled through a staging buffer */
};

/* Bytes filled then checked at a time: small enough that the pages the kernel just cleared and
 * pread just wrote are still in the core's cache when they are checked, so memory is crossed
 * once rather than three times (docs/DECISIONS.md "Restart fill"). */
#define FILL_PIECE (256UL << 10)

/* The next data extent of the core in [pos, f->to), page-aligned, as [*data, *stop): 0 when
 * none is left (zero pages inside an extent are holes the writer did not write). */
static int next_extent(const struct fill_part *f, uint64_t pos, uint64_t *data, uint64_t *stop)
{
    if (pos >= f->to)
        return 0;
    off_t d = lseek(f->core, (off_t)pos, SEEK_DATA);
    if (d < 0 || (uint64_t)d >= f->to)
        return 0;
    *data = (uint64_t)d & ~(PAGE - 1);
    off_t h = lseek(f->core, d, SEEK_HOLE);
    *stop = h < 0 || (uint64_t)h > f->to ? f->to : ((uint64_t)h + PAGE - 1) & ~(PAGE - 1);
    if (*stop > f->to)
        *stop = f->to;
    return 1;
}

static void fill_range(struct fill_part *f)
{
    const struct crac_region_rec *r = f->r;
    for (uint64_t pos = f->from, data, stop; next_extent(f, pos, &data, &stop); pos = stop) {
        for (uint64_t at = data; at < stop; at += FILL_PIECE) {
            uint64_t n = stop - at < FILL_PIECE ? stop - at : FILL_PIECE;
            unsigned char *dst = (unsigned char *)(r->start + (at - r->core_offset));
            /* Fault the piece in with one call rather than one fault per page as read() copies
             * (the extent is data: its pages would all be touched anyway). */
            madvise(dst, n, MADV_POPULATE_WRITE);
            if (image_pread_full(f->core, dst, n, at) != 0) {
                f->rc = -1;
                return;
            }
            for (uint64_t p = 0; p < n; p += PAGE) {
                if (page_is_zero(dst + p))
                    continue;
                uint64_t index = (at - r->core_offset + p) / PAGE;
                f->crc = crc32c_update(f->crc, &index, 8);
                f->crc = crc32c_update(f->crc, dst + p, PAGE);
                f->pages++;
            }
        }
    }
}

/* fill_range through a staging buffer (restart_stage.c): each piece within one huge page of the
 * address space is read there, checked, and moved into place whole (the region is registered
 * MISSING with f->uffd); holes are left missing, zero when first touched, as a hole is. */
static void fill_range_staged(struct fill_part *f)
{
    const struct crac_region_rec *r = f->r;
    struct stage st;
    if (stage_init(&st) != 0) {
        f->rc = -1;
        return;
    }
    for (uint64_t pos = f->from, data, stop; !f->rc && next_extent(f, pos, &data, &stop);
         pos = stop) {
        for (uint64_t at = data, n; at < stop && !f->rc; at += n) {
            uint64_t dst = r->start + (at - r->core_offset);
            uint64_t to_boundary = STAGE_PIECE - (dst & (STAGE_PIECE - 1));
            n = stop - at < to_boundary ? stop - at : to_boundary;
            uint64_t index = (at - r->core_offset) / PAGE;
            if (stage_read(&st, f->core, at, dst, n, index, &f->crc, &f->pages) != 0) {
                f->rc = -1;
                break;
            }
            uint64_t moved = stage_move(&st, f->uffd, dst, n);
            if (moved < n && stage_copy(&st, f->uffd, dst + moved, n - moved) != 0)
                f->rc = -1;
        }
    }
    stage_end(&st);
}

static void fill_part_run(struct fill_part *f)
{
    if (f->uffd >= 0)
        fill_range_staged(f);
    else
        fill_range(f);
}

static void *fill_helper(void *p)
{
    fill_part_run(p);
    return NULL;
}

/* The eager fill's userfaultfd, opened on the first region large enough to use it and closed
 * once every region is mapped; -2 once it could not be (no userfaultfd, no UFFDIO_MOVE here:
 * regions are read in place as before). */
static int eager_uffd = -1;

static int staged_uffd(uint64_t len)
{
    if (len < STAGE_PIECE || eager_uffd == -2 || !stage_wanted())
        return -1;
    if (eager_uffd < 0) {
        int can_move = 0;
        eager_uffd = stage_uffd_open(0, &can_move);
        if (eager_uffd >= 0 && !can_move) {
            close(eager_uffd);
            eager_uffd = -1;
        }
        if (eager_uffd < 0) {
            eager_uffd = -2;
            return -1;
        }
    }
    return eager_uffd;
}

static void eager_uffd_close(void)
{
    if (eager_uffd >= 0)
        close(eager_uffd);
    eager_uffd = -1;
}

int restart_other_cpu(void)
{
    static int n;
    if (!n) {
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    return n > 1;
}

void restart_two_parts(void *(*work)(void *), void *a, void *b)
{
    pthread_t t;
    int helped = pthread_create(&t, NULL, work, b) == 0;
    work(a);
    if (helped)
        pthread_join(t, NULL);
    else
        work(b);
}

static int fill_anon(int core, const struct crac_region_rec *r, uint32_t *crc, uint32_t *pages)
{
    uint64_t len = r->end - r->start, end = r->core_offset + len;
    /* Registered with a userfaultfd only while it is filled: the pieces move in as huge pages
     * (docs/DECISIONS.md "Restart fill through a staging buffer"). */
    int uffd = staged_uffd(len);
    if (uffd >= 0) {
        struct uffdio_register reg = {.range = {r->start, len},
                                      .mode = UFFDIO_REGISTER_MODE_MISSING};
        if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
            uffd = -1;
    }
    struct fill_part a = {core, r, r->core_offset, end, *crc, 0, 0, uffd};
    struct fill_part b = {core, r, end, end, 0, 0, 0, uffd};
    if (len >= RESTART_SPLIT_MIN && restart_other_cpu()) {
        /* The halves meet on a huge page boundary (each moves whole huge pages); each finds its
         * own extents (lseek returns them, the shared file offset is never used) and sums its
         * pages from 0, joined by crc32c_combine. */
        uint64_t mid = (r->start + len / 2) & ~(STAGE_PIECE - 1);
        if (mid <= r->start)
            mid = r->start + (len / 2 & ~(PAGE - 1));
        a.to = b.from = r->core_offset + (mid - r->start);
        restart_two_parts(fill_helper, &a, &b);
    } else
        fill_part_run(&a);
    if (uffd >= 0) {
        struct uffdio_range range = {r->start, len};
        if (ioctl(uffd, UFFDIO_UNREGISTER, &range) != 0)
            return -1;
    }
    if (a.rc || b.rc)
        return -1;
    *crc = crc32c_combine(a.crc, b.crc, (uint64_t)b.pages * (8 + PAGE));
    *pages += a.pages + b.pages;
    return 0;
}

/* Pages of a private file region that were not saved must be holes (or zeros) in the core: a
 * byte there means the image was altered. */
static int unsaved_pages_empty(int core, const struct crac_region_rec *r,
                               const unsigned char *bitmap)
{
    uint64_t end = r->core_offset + (r->end - r->start);
    unsigned char page[PAGE];
    for (uint64_t pos = r->core_offset; pos < end;) {
        off_t d = lseek(core, (off_t)pos, SEEK_DATA);
        if (d < 0 || (uint64_t)d >= end)
            return 1;
        off_t h = lseek(core, d, SEEK_HOLE);
        uint64_t stop = h < 0 || (uint64_t)h > end ? end : (uint64_t)h;
        for (uint64_t p = (uint64_t)d & ~(PAGE - 1); p < stop; p += PAGE) {
            uint64_t i = (p - r->core_offset) / PAGE;
            if (bitmap[i / 8] & (1u << (i % 8)))
                continue;
            if (image_pread_full(core, page, PAGE, p) != 0 || !page_is_zero(page))
                return 0;
        }
        pos = (stop + PAGE - 1) & ~(PAGE - 1);
    }
    return 1;
}

/* Private file regions: the pages in the bitmap come from the core, the rest from the file. */
static int fill_bitmap(int core, const struct crac_region_rec *r, const unsigned char *bitmap,
                       uint32_t *crc, uint32_t *pages)
{
    if (!unsaved_pages_empty(core, r, bitmap))
        return -1;
    uint64_t n = (r->end - r->start) / PAGE;
    for (uint64_t i = 0; i < n; i++) {
        if (!(bitmap[i / 8] & (1u << (i % 8))))
            continue;
        unsigned char *dst = (unsigned char *)(r->start + i * PAGE);
        if (image_pread_full(core, dst, PAGE, r->core_offset + i * PAGE) != 0)
            return -1;
        *crc = crc32c_update(*crc, &i, 8);
        *crc = crc32c_update(*crc, dst, PAGE);
        (*pages)++;
    }
    return 0;
}

/* Compressed regions (image_compress.c): the chunks from core_offset, each decompressed straight
 * into place and checked against its CRC-32C; pages not in a chunk stay as mapped (zero, or the
 * file's). A large region in two parts on two threads, as fill_anon: the first takes the chunks
 * that start in the region's first half and stops at the first that does not; the second walks
 * the headers of those (their bytes not read) and takes the rest to the region's end marker,
 * summing its chunks' CRCs from 0 (joined by crc32c_combine). A library that cannot be loaded
 * is said in err (-2); any other failure is a corrupted image (-1). */
struct chunk_part {
    int core;
    const struct crac_region_rec *r;
    const unsigned char *bitmap;
    struct cz_reader *rd; /* its scratch buffers kept for the next region */
    uint64_t from, to;    /* the chunks whose first page is in [from, to) */
    uint32_t crc, pages, chunks;
    int rc;
    char err[256];
};

static void fill_chunks_part(struct chunk_part *p)
{
    const struct crac_region_rec *r = p->r;
    struct crac_chunk_hdr h;
    int more;
    cz_read_begin(p->rd, p->core, r->core_offset, (r->end - r->start) / PAGE, p->bitmap);
    p->rd->headers_only = p->from > 0;
    while ((more = cz_read_next(p->rd, &h)) == 1) {
        if (h.first_page >= p->to)
            return;
        if (h.first_page < p->from)
            continue;
        p->rd->headers_only = 0;
        unsigned char *dst = (unsigned char *)(r->start + h.first_page * PAGE);
        madvise(dst, (size_t)h.n_pages * PAGE, MADV_POPULATE_WRITE);
        int c = cz_read_pages(p->rd, &h, dst, p->err, sizeof(p->err));
        if (c != 0) {
            p->rc = c;
            return;
        }
        p->crc = crc32c_update(p->crc, &h.crc32c, 4);
        p->pages += h.n_pages;
        p->chunks++;
    }
    if (more < 0)
        p->rc = -1;
}

static void *chunks_helper(void *p)
{
    fill_chunks_part(p);
    return NULL;
}

static int fill_chunks(int core, const struct crac_region_rec *r, const unsigned char *bitmap,
                       uint32_t *crc, uint32_t *pages, char *err, size_t errlen)
{
    static struct cz_reader readers[2];
    uint64_t n = (r->end - r->start) / PAGE;
    struct chunk_part parts[2];
    for (int i = 0; i < 2; i++)
        parts[i] = (struct chunk_part){.core = core,
                                       .r = r,
                                       .bitmap = bitmap,
                                       .rd = &readers[i],
                                       .from = UINT64_MAX,
                                       .to = UINT64_MAX};
    parts[0].from = 0;
    parts[0].crc = *crc;
    if (r->end - r->start >= RESTART_SPLIT_MIN && restart_other_cpu()) {
        parts[0].to = parts[1].from = n / 2;
        restart_two_parts(chunks_helper, &parts[0], &parts[1]);
    } else
        fill_chunks_part(&parts[0]);
    for (int i = 0; i < 2; i++)
        if (parts[i].rc != 0) {
            if (parts[i].rc == -2)
                snprintf(err, errlen, "%s", parts[i].err);
            return parts[i].rc;
        }
    *crc = crc32c_combine(parts[0].crc, parts[1].crc, (uint64_t)parts[1].chunks * 4);
    *pages += parts[0].pages + parts[1].pages;
    return 0;
}

static int same_file(const struct crac_region_rec *r, const struct stat *st)
{
    int64_t mtime = st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    return (uint64_t)st->st_size == r->file_size && mtime == r->mtime_ns && st->st_ino == r->ino;
}

/* Shared objects mapped by the program (ANON_SHARED regions with an identity): one new shmem
 * object (a memfd) each, sized to cover every region that maps it, so the regions that shared
 * pages before share them again. Kept open until every region is mapped. */
#define MAX_SHARED 256
static struct shared_obj {
    uint64_t dev, ino;
    int fd;
} shared_objs[MAX_SHARED];
static int n_shared;

/* How far into the shared object r's regions reach: the size it must have. */
static uint64_t shared_object_size(const struct restart_image *img, const struct crac_region_rec *r)
{
    uint64_t size = 0;
    struct region_walk w = region_walk_start(img->regions, img->regions_len);
    struct crac_region_rec o;
    while (region_walk_next(&w, &o, NULL, NULL) > 0)
        if (o.kind == CRAC_REGION_ANON_SHARED && o.dev == r->dev && o.ino == r->ino &&
            o.end > o.start && o.file_offset + (o.end - o.start) > size)
            size = o.file_offset + (o.end - o.start);
    return size;
}

static int shared_object_fd(const struct restart_image *img, const struct crac_region_rec *r)
{
    for (int i = 0; i < n_shared; i++)
        if (shared_objs[i].dev == r->dev && shared_objs[i].ino == r->ino)
            return shared_objs[i].fd;
    if (n_shared == MAX_SHARED)
        return -2; /* too many: this one is mapped on its own, as before */
    uint64_t size = shared_object_size(img, r);
    int fd = memfd_create("crac-shared", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    shared_objs[n_shared++] = (struct shared_obj){r->dev, r->ino, fd};
    return fd;
}

/* Shared objects another process of the tree maps too (`--shared-mem DEV:INO:FD`): made once and
 * filled by the restart of the tree (crac_py/launch/share.py), inherited here; mapped as they
 * are, never filled again (a process already running would see its memory go back). */
static struct shared_obj inherited_objs[MAX_SHARED];
static int n_inherited;

int restart_shared_mem_add(const char *spec)
{
    unsigned long long dev, ino;
    int fd, used = 0;
    if (sscanf(spec, "%llu:%llu:%d%n", &dev, &ino, &fd, &used) != 3 || spec[used] || fd < 3 ||
        n_inherited == MAX_SHARED)
        return -1;
    inherited_objs[n_inherited++] = (struct shared_obj){dev, ino, fd};
    return 0;
}

static int inherited_object_fd(const struct crac_region_rec *r)
{
    for (int i = 0; i < n_inherited; i++)
        if (inherited_objs[i].dev == r->dev && inherited_objs[i].ino == r->ino)
            return inherited_objs[i].fd;
    return -1;
}

static void shared_objects_close(void)
{
    for (int i = 0; i < n_inherited; i++)
        close(inherited_objs[i].fd);
    n_inherited = 0;
    for (int i = 0; i < n_shared; i++)
        close(shared_objs[i].fd);
    n_shared = 0;
}

/* SysV segments ("/SYSV<key> (deleted)" in /proc/self/maps, attached whole): a new segment per
 * old one (its key if it had one, so the program's later shmget finds it), attached at each old
 * address, so shmdt works on them again. One without a key is marked for removal once every
 * region is mapped: the old id is gone with the killed process, nothing could name it. The
 * program's old segment id does not come back (docs/DECISIONS.md). */
static struct sysv_obj {
    uint64_t dev, ino;
    int id, private_key;
    int existed; /* the key's segment was there already (the killed job's): emptied before the fill */
} sysv_objs[MAX_SHARED];
static int n_sysv;

/* The segment for r, made on first use; -1 (mapped as a plain shared object instead) when r is
 * not a whole SysV segment or none can be made. */
static int sysv_segment(const struct restart_image *img, const struct crac_region_rec *r,
                        const char *path)
{
    unsigned key;
    if (strncmp(path, "/SYSV", 5) != 0 || sscanf(path + 5, "%8x", &key) != 1 || r->file_offset)
        return -1;
    for (int i = 0; i < n_sysv; i++)
        if (sysv_objs[i].dev == r->dev && sysv_objs[i].ino == r->ino)
            return sysv_objs[i].id;
    if (n_sysv == MAX_SHARED)
        return -1;
    uint64_t size = shared_object_size(img, r);
    int id = shmget(key ? (key_t)key : IPC_PRIVATE, size, IPC_CREAT | IPC_EXCL | 0600), existed = 0;
    if (id < 0 && errno == EEXIST) {
        id = shmget((key_t)key, 0, 0600); /* any size: the kernel's may be under a page */
        existed = 1;
    }
    if (id < 0)
        return -1;
    sysv_objs[n_sysv++] = (struct sysv_obj){r->dev, r->ino, id, key == 0, existed};
    return id;
}

static int sysv_existed(int id)
{
    for (int i = 0; i < n_sysv; i++)
        if (sysv_objs[i].id == id)
            return sysv_objs[i].existed;
    return 0;
}

static void sysv_done(void)
{
    for (int i = 0; i < n_sysv; i++)
        if (sysv_objs[i].private_key)
            shmctl(sysv_objs[i].id, IPC_RMID, NULL);
    n_sysv = 0;
}

/* A file in memory that the program mapped shared (CRAC_REGION_SHMEM_FILE: /dev/shm): opened,
 * made again if it is gone (a restart on another node), at least as long as it was, and the
 * region's range emptied, so that the fill leaves in it what the checkpoint saved (zero pages were
 * not saved) rather than what the program wrote after. The descriptor; -1 with ERR. */
static int shmem_file_put_back(const struct crac_region_rec *r, const char *path, char *err,
                               size_t errlen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s, mapped shared at 0x%lx, cannot be opened or made: %s", path,
                 (unsigned long)r->start, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    uint64_t len = r->end - r->start;
    if (((uint64_t)st.st_size < r->file_size && ftruncate(fd, (off_t)r->file_size) != 0) ||
        (r->core_offset && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                     (off_t)r->file_offset, (off_t)len) != 0)) {
        snprintf(err, errlen, "%s, mapped shared at 0x%lx, cannot be put back as it was: %s", path,
                 (unsigned long)r->start, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* A kept file made again, filled: named, its descriptor closed. */
static int name_made_file(int fd, const struct crac_region_rec *r, const char *path, char *err,
                          size_t errlen)
{
    int rc = kept_file_name(fd, r, path, err, errlen);
    close(fd);
    return rc;
}

static int map_one(const struct restart_image *img, const struct crac_region_rec *r,
                   const char *path, const unsigned char *bitmap, char *err, size_t errlen)
{
    int core = img->core_fd;
    uint64_t len = r->end - r->start;
    int outside = r->flags & CRAC_REGION_OUTSIDE_W;
    int fixed = outside && !img->outside_held ? MAP_FIXED_NOREPLACE : MAP_FIXED;
    int fd = -1, flags = 0, kept = KEPT_AS_IT_IS;
    /* An object the tree's restart made and filled for every process that maps it (share.py). */
    int held = inherited_object_fd(r);
    /* Its saved pages go into it: not into an object another process filled, nor into a file in
     * memory this restart may not write. */
    int fill = r->core_offset && held < 0;
    switch (r->kind) {
    case CRAC_REGION_ANON: flags = MAP_PRIVATE | MAP_ANONYMOUS; break;
    case CRAC_REGION_ANON_SHARED:
        flags = MAP_SHARED | MAP_ANONYMOUS;
        if (r->ino && !outside && (fd = held) >= 0) {
            void *m = mmap((void *)r->start, len, (int)r->prot, MAP_SHARED | fixed, fd,
                           (off_t)r->file_offset);
            if (m == (void *)r->start)
                goto shared_mapped;
            snprintf(err, errlen, "cannot map the shared region 0x%lx-0x%lx back: %s",
                     (unsigned long)r->start, (unsigned long)r->end, strerror(errno));
            return -1;
        }
        /* A removed file the program also has open: the file its fds get again
         * (fd_regular.c), so the mapping and the fds are one file; its bytes are the file's,
         * saved with the fd (the same pages, a page cache apart). */
        int removed = r->ino && !outside ? fd_unlinked_file(r->ino, path) : -1;
        if (removed >= 0) {
            void *m = mmap((void *)r->start, len, (int)r->prot, MAP_SHARED | fixed, removed,
                           (off_t)r->file_offset);
            if (m == (void *)r->start) {
                fill = 0;
                goto shared_mapped;
            }
            snprintf(err, errlen, "cannot map the removed file %s back at 0x%lx: %s", path,
                     (unsigned long)r->start, strerror(errno));
            return -1;
        }
        if (r->ino && !outside) {
            int id = sysv_segment(img, r, path);
            void *at = id < 0
                           ? (void *)-1
                           : shmat(id, (void *)r->start,
                                   SHM_REMAP |
                                       ((r->prot & PROT_WRITE) || r->core_offset ? 0 : SHM_RDONLY));
            /* What the killed job left in pages the checkpoint found empty (not saved) goes:
             * the fill puts back the others. */
            if (at == (void *)r->start && fill && sysv_existed(id))
                madvise(at, len, MADV_REMOVE);
            if (at == (void *)r->start)
                goto mapped;
        }
        if (r->ino) {
            int obj = shared_object_fd(img, r);
            if (obj == -1) {
                snprintf(err, errlen, "cannot make a shared object for 0x%lx-0x%lx: %s",
                         (unsigned long)r->start, (unsigned long)r->end, strerror(errno));
                return -1;
            }
            if (obj >= 0) {
                flags = MAP_SHARED;
                fd = obj;
            }
        }
        break;
    case CRAC_REGION_FILE_SHARED:
        if (r->flags & CRAC_REGION_SHMEM_FILE) {
            flags = MAP_SHARED;
            /* Written back by the tree's restart already (crac_py/launch/share.py) when another
             * process maps the file too: mapped as it is. */
            if ((fd = held) >= 0)
                break;
            if ((fd = shmem_file_put_back(r, path, err, errlen)) >= 0)
                break;
            /* Another's file the program only read, which this restart may not write: mapped
             * as it is now, not put back. */
            if (r->prot & PROT_WRITE || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                return -1;
            fprintf(stderr,
                    "crac: warning: %s, mapped read-only, cannot be written by this restart: "
                    "mapped as it is now, not as the checkpoint saw it\n",
                    path);
            fill = 0;
            break;
        }
        if (r->flags & CRAC_REGION_FILE_KEPT) {
            flags = MAP_SHARED;
            if ((fd = kept_file_open(r, path, img->keep_files, &kept, err, errlen)) < 0)
                return -1;
            if (kept == KEPT_AS_IT_IS)
                fill = 0;
            break;
        }
        /* fallthrough */
    case CRAC_REGION_FILE_PRIVATE: {
        int shared = r->kind == CRAC_REGION_FILE_SHARED;
        fd = open(path, (shared && (r->prot & PROT_WRITE) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            snprintf(err, errlen, "%s, mapped at 0x%lx, cannot be opened: %s", path,
                     (unsigned long)r->start, strerror(errno));
            return -1;
        }
        if (!shared && !same_file(r, &st)) {
            snprintf(err, errlen, "%s changed since the checkpoint (it is mapped by the program)",
                     path);
            close(fd);
            return -1;
        }
        flags = shared ? MAP_SHARED : MAP_PRIVATE;
        break;
    }
    default: snprintf(err, errlen, "image corrupted: unknown region kind %u", r->kind); return -1;
    }
    /* As the program had it: a huge MAP_NORESERVE region is refused without the flag. */
    if (r->flags & CRAC_REGION_NORESERVE)
        flags |= MAP_NORESERVE;
    int prot = (int)r->prot | (fill ? PROT_READ | PROT_WRITE : 0);
    void *m =
        mmap((void *)r->start, len, prot, flags | fixed, fd, fd >= 0 ? (off_t)r->file_offset : 0);
    /* A shared object's stays open for its other regions; a kept file made again until it is
     * filled and named. */
    if (fd >= 0 && r->kind != CRAC_REGION_ANON_SHARED && held < 0 && kept != KEPT_UNNAMED)
        close(fd);
    if (m != (void *)r->start) {
        snprintf(err, errlen, "cannot map the region 0x%lx-0x%lx back%s: %s",
                 (unsigned long)r->start, (unsigned long)r->end,
                 outside && !img->outside_held
                     ? " (outside the window: something of the new lower half is there)"
                     : "",
                 strerror(errno));
        return -1;
    }
mapped:
shared_mapped:
    /* Still excluded from the next checkpoints, as the program asked. */
    if ((r->flags & CRAC_REGION_DONTDUMP) && madvise((void *)r->start, len, MADV_DONTDUMP) != 0) {
        snprintf(err, errlen, "cannot exclude the region 0x%lx-0x%lx from images again: %s",
                 (unsigned long)r->start, (unsigned long)r->end, strerror(errno));
        return -1;
    }
    if (!fill)
        return kept == KEPT_UNNAMED ? name_made_file(fd, r, path, err, errlen) : 0;
    /* A kept file that is there, put back: emptied, then the saved pages written over it (pages
     * not saved were zero), as the program had it at the checkpoint. */
    if (kept == KEPT_PUT_BACK && r->file_offset < r->file_size) {
        uint64_t in_file = ((r->file_size + PAGE - 1) & ~(PAGE - 1)) - r->file_offset;
        memset((void *)r->start, 0, in_file < len ? in_file : len);
    }
    /* --lazy: filled on first touch and by a prefetcher instead (restart_lazy.c). */
    int lazy = restart_lazy_take(r, core, err, errlen);
    if (lazy != 0)
        return lazy < 0 ? -1 : 0;
    uint32_t crc = 0, pages = 0;
    int rc = r->flags & CRAC_REGION_INCREMENTAL
                 ? restart_chain_fill(img, r, bitmap, &crc, &pages, err, errlen)
             : r->flags & CRAC_REGION_COMPRESSED
                 ? fill_chunks(core, r, r->kind == CRAC_REGION_FILE_PRIVATE ? bitmap : NULL, &crc,
                               &pages, err, errlen)
             : r->kind == CRAC_REGION_FILE_PRIVATE ? fill_bitmap(core, r, bitmap, &crc, &pages)
                                                   : fill_anon(core, r, &crc, &pages);
    if (rc == -2) /* err says which library, or which link of the chain */
        return -1;
    if (rc != 0 || crc != r->crc32c || pages != r->saved_pages) {
        snprintf(err, errlen, "image corrupted: region 0x%lx-0x%lx %s fails its checksum",
                 (unsigned long)r->start, (unsigned long)r->end, path[0] ? path : "(anonymous)");
        if (kept == KEPT_UNNAMED)
            close(fd);
        return -1;
    }
    if (kept == KEPT_UNNAMED && name_made_file(fd, r, path, err, errlen) != 0)
        return -1;
    return mprotect((void *)r->start, len, (int)r->prot);
}

static double clock_ms(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* CRAC_TIMING=1: how long mapping and filling memory took, in wall and CPU time (both threads):
 * the fill's cost apart from the rest of the restart (docs/PERFORMANCE.md). */
static void report_timing(const struct restart_image *img, double wall0, double cpu0)
{
    if (!getenv("CRAC_TIMING"))
        return;
    uint64_t saved = 0;
    struct region_walk w = region_walk_start(img->regions, img->regions_len);
    struct crac_region_rec r;
    while (region_walk_next(&w, &r, NULL, NULL) > 0)
        saved += r.saved_pages;
    fprintf(stderr, "crac: timing: restart memory: %.1f MiB saved, %.2f ms, cpu %.2f ms\n",
            saved * (double)PAGE / 1048576.0, clock_ms(CLOCK_MONOTONIC) - wall0,
            clock_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0);
}

int restart_hold_outside(struct restart_image *img, char *err, size_t errlen)
{
    struct region_walk w = region_walk_start(img->regions, img->regions_len);
    struct crac_region_rec r;
    while (region_walk_next(&w, &r, NULL, NULL) > 0) {
        if (!(r.flags & CRAC_REGION_OUTSIDE_W) || r.end <= r.start)
            continue;
        brk_guard_yield(r.start, r.end);
        void *m = mmap((void *)r.start, r.end - r.start, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (m != (void *)r.start) {
            if (m != MAP_FAILED)
                munmap(m, r.end - r.start);
            snprintf(err, errlen,
                     "cannot hold the region 0x%lx-0x%lx outside the window for the program: "
                     "%s (this loader's own code, stack or heap is there; restarting again "
                     "places it elsewhere)",
                     (unsigned long)r.start, (unsigned long)r.end, strerror(errno));
            return -1;
        }
    }
    img->outside_held = 1;
    return 0;
}

int restart_map_regions(const struct restart_image *img, char *err, size_t errlen)
{
    double wall0 = clock_ms(CLOCK_MONOTONIC), cpu0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    struct region_walk w = region_walk_start(img->regions, img->regions_len);
    struct crac_region_rec r;
    const char *path;
    const unsigned char *bitmap;
    int more;
    while ((more = region_walk_next(&w, &r, &path, &bitmap)) != 0) {
        if (more < 0 || r.end <= r.start || (r.start | r.end) & (PAGE - 1) ||
            (r.kind == CRAC_REGION_FILE_PRIVATE &&
             r.bitmap_bytes * 8ULL < (r.end - r.start) / PAGE)) {
            snprintf(err, errlen, "image corrupted: bad region record");
            return -1;
        }
        if (map_one(img, &r, path, bitmap, err, errlen) != 0) {
            eager_uffd_close();
            shared_objects_close();
            sysv_done();
            restart_chain_done();
            return -1;
        }
    }
    eager_uffd_close();
    shared_objects_close();
    sysv_done();
    restart_chain_done();
    report_timing(img, wall0, cpu0);
    return 0;
}

/* A region excluded from dumps may be one the kernel excluded, not the program (a perf buffer's):
 * given back as plain anonymous memory, only the flag makes the next checkpoints read VmFlags
 * before writing and keep it out (image_core.c collect_regions). */
void restart_note_excluded(const struct restart_image *img)
{
    struct region_walk walk = region_walk_start(img->regions, img->regions_len);
    struct crac_region_rec r;
    while (region_walk_next(&walk, &r, NULL, NULL) > 0)
        if (r.flags & CRAC_REGION_DONTDUMP)
            crac_ctrl()->dump_advised = 1;
}
