/* page_crcs.c — per-page CRC-32Cs (PAGE_CRCS note): a region's running CRC-32C extended by a
 * page's own CRC-32C without reading the page again, and the lookup of a region's table. */

/* Why the extension is exact: with crc32c_update(c, d) = ~raw(~c, d) and raw linear in its
 * register, crc32c_update(c, page) = A(c) ^ crc32c_update(0, page), where A advances a raw
 * register over 4096 zero bytes. A is a 32x32 bit matrix over GF(2), applied here a byte of
 * the register at a time (four 256-entry tables, built once from A of each bit). */
#include "page_crcs.h"

#include "crac_image.h"
#include "crc32c.h"

#include <string.h>

#define PAGE 4096UL

static uint32_t advance[4][256], zero_crc;
static int ready;

static void build(void)
{
    static const unsigned char zeros[PAGE];
    uint32_t bit[32];
    for (int k = 0; k < 32; k++) /* raw(r, zeros) = ~crc32c_update(~r, zeros) */
        bit[k] = ~crc32c_update(~(1u << k), zeros, PAGE);
    for (int j = 0; j < 4; j++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++)
                if (b >> k & 1)
                    v ^= bit[j * 8 + k];
            advance[j][b] = v;
        }
    zero_crc = crc32c_update(0, zeros, PAGE);
    ready = 1;
}

uint32_t page_crc_zero(void)
{
    if (!ready)
        build();
    return zero_crc;
}

uint32_t page_crc_extend(uint32_t crc, uint32_t page_crc)
{
    if (!ready)
        build();
    return advance[0][crc & 0xff] ^ advance[1][crc >> 8 & 0xff] ^ advance[2][crc >> 16 & 0xff] ^
           advance[3][crc >> 24] ^ page_crc;
}

const unsigned char *page_crcs_find(const unsigned char *note, size_t len, uint64_t start,
                                    uint64_t end)
{
    for (size_t off = 0; note && off + sizeof(struct crac_page_crcs_rec) <= len;) {
        struct crac_page_crcs_rec r;
        memcpy(&r, note + off, sizeof(r));
        if (r.end <= r.start || (r.end - r.start) % PAGE)
            return NULL;
        uint64_t bytes = ((r.end - r.start) / PAGE * 4 + 7) & ~7UL;
        if (bytes > len - off - sizeof(r))
            return NULL;
        if (r.start == start && r.end == end)
            return note + off + sizeof(r);
        off += sizeof(r) + bytes;
    }
    return NULL;
}

uint32_t page_crcs_at(const unsigned char *table, uint64_t i)
{
    uint32_t v;
    memcpy(&v, table + i * 4, 4);
    return v;
}
