/* image_chain.h — one generation's layer of an incremental region (CRAC_REGION_INCREMENTAL):
 * reading and checking its saved pages, for the restart and for --check-core (image_chain.c). */
#ifndef CRAC_IMAGE_CHAIN_H
#define CRAC_IMAGE_CHAIN_H

#include "crac_image.h"

#include <stdint.h>

/* The saved pages of ANON region r in the upper.core open as fd: each page of a data extent that
 * `inherit` does not mark (NULL: none; bit set: the parent's page) is a saved page when non-zero
 * (CRC-32C and count as docs/IMAGE.md "Checksums" says); a marked page must be a hole or zeros.
 * dst NULL: check only (buf: 1 MiB). dst: the region's mapping, the saved pages read into place;
 * with zero_rest, the unmarked pages not in any extent are zeroed too (a lower layer filled them).
 * 0, or -1 when unreadable or damaged. */
int chain_layer(int fd, const struct crac_region_rec *r, const unsigned char *inherit,
                unsigned char *dst, int zero_rest, unsigned char *buf, uint32_t *crc,
                uint32_t *pages);

#endif
