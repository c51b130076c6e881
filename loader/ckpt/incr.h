/* incr.h — incremental checkpoints (--incremental): which pages of the upper half were written
 * since the last checkpoint (ckpt_incr.c) and the PARENT link an incremental generation records. */
#ifndef CRAC_INCR_H
#define CRAC_INCR_H

#include "crac_image.h"

#include <stdint.h>

/* --incremental K: every Kth generation is full, the others incremental; 0: off. */
void incr_configure(int full_every);
int incr_full_every(void);
/* While the threads are parked, before the image is captured (and before the writer forks):
 * decide whether this generation is incremental, list the pages written since the last one and
 * write-protect every tracked page again. Returns 1 incremental, 0 full. */
int incr_prepare(int generation);
/* For the image writer: the written-page bitmap (bit i: page i written since the parent) of the
 * region [start, end) when it is saved incrementally, else NULL (saved whole). */
const uint64_t *incr_written(uint64_t start, uint64_t end);
/* The PARENT note of this generation; NULL when it is a full one. */
const struct crac_parent_rec *incr_parent(void);
/* The chain's full generation for this one (0 when off). */
int incr_base(void);
/* The generation was published (header_crc, core_size: its upper.core) or abandoned: the next
 * builds on it, or is full. */
void incr_published(int generation, uint32_t header_crc, uint64_t core_size);
void incr_abandoned(void);

#endif
