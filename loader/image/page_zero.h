/* page_zero.h — whether a 4 KiB page is all zeros: the test every image writer, reader and
 * digest uses to leave such pages as holes. */
#ifndef CRAC_PAGE_ZERO_H
#define CRAC_PAGE_ZERO_H

#include <stddef.h>
#include <stdint.h>

#define CRAC_PAGE_SIZE 4096UL

static inline int page_is_zero(const unsigned char *p)
{
    const uint64_t *w = (const uint64_t *)p;
    /* Most data pages are told apart by their first or last word: no need to read the rest. */
    if (w[0] | w[CRAC_PAGE_SIZE / 8 - 1])
        return 0;
    uint64_t acc = 0;
    for (size_t i = 0; i < CRAC_PAGE_SIZE / 8; i++)
        acc |= w[i];
    return acc == 0;
}

#endif
