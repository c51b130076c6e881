/* page_crcs.h — the per-page CRC-32Cs of the PAGE_CRCS note (docs/IMAGE.md "Incremental
 * generations"): computing a region's CRC-32C from them, and finding a region's table. */
#ifndef CRAC_PAGE_CRCS_H
#define CRAC_PAGE_CRCS_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of a page of zeros (what a page a generation holds as zero has). */
uint32_t page_crc_zero(void);
/* crc32c_update(crc, page, 4096), given page_crc = crc32c_update(0, page, 4096). */
uint32_t page_crc_extend(uint32_t crc, uint32_t page_crc);
/* The table (one u32 per page) of the region [start, end) in a PAGE_CRCS note's descriptor,
 * or NULL when the note has none for it or is malformed. */
const unsigned char *page_crcs_find(const unsigned char *note, size_t len, uint64_t start,
                                    uint64_t end);
/* Entry i of a table (tables are not 4-aligned in a note read into memory: read bytewise). */
uint32_t page_crcs_at(const unsigned char *table, uint64_t i);

#endif
