/* restart_stage.h — filling restored memory in 2 MiB pieces through a huge-page staging buffer
 * moved into place with UFFDIO_MOVE (restart_stage.c), for the eager fill and the lazy prefetch. */
#ifndef CRAC_RESTART_STAGE_H
#define CRAC_RESTART_STAGE_H

#include <stdint.h>

#define STAGE_PIECE (2UL << 20) /* a huge page: the unit read, checked and moved */

/* One thread's staging buffer: STAGE_PIECE bytes aligned on STAGE_PIECE, MADV_HUGEPAGE. */
struct stage {
    unsigned char *buf;
};

/* A userfaultfd with `features` (UFFD_FEATURE_*) and, where the kernel has it, UFFD_FEATURE_MOVE
 * (*can_move says which); -1 with errno when none can be opened. Not adopted as a lower fd. */
int stage_uffd_open(uint64_t features, int *can_move);

/* CRAC_RESTART_STAGE=1: fill through the staging buffer. Off by default: on the machine it was
 * measured on it was slower than the in-place fill (docs/PERFORMANCE.md "Restart fill through a
 * huge-page staging buffer"). */
int stage_wanted(void);

int stage_init(struct stage *s);
void stage_end(struct stage *s);

/* Where the bytes for address dst go in the buffer: the same offset in a huge page, so a piece
 * aligned as the destination is moves as one huge page. */
static inline unsigned char *stage_at(const struct stage *s, uint64_t dst)
{
    return s->buf + (dst & (STAGE_PIECE - 1));
}

/* Read n bytes of core at core_at into stage_at(s, dst) (n and dst page-aligned, the piece
 * within one STAGE_PIECE of the address space) and fold their non-zero pages into *crc and
 * *pages as a region's CRC-32C counts them, page indexes from first_index. 0, or -1 (errno). */
int stage_read(struct stage *s, int core, uint64_t core_at, uint64_t dst, uint64_t n,
               uint64_t first_index, uint32_t *crc, uint32_t *pages);

/* UFFDIO_MOVE of n bytes from stage_at(s, dst) to dst (registered MISSING with uffd): the
 * bytes moved (n when all were; fewer with errno when the kernel refused the rest: a page
 * already there, an event pending, a range no longer registered...). */
uint64_t stage_move(const struct stage *s, int uffd, uint64_t dst, uint64_t n);

/* UFFDIO_COPY of n bytes from stage_at(s, dst) to dst, page by page where a page is already
 * there (left as it is). 0, or -1 (errno) when the kernel refuses. For the eager fill, where
 * nothing else runs. */
int stage_copy(const struct stage *s, int uffd, uint64_t dst, uint64_t n);

#endif
