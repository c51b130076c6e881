/* window.h — reserving the upper window W and the device window D (docs/ARCHITECTURE.md "Windows" invariant 1). */
#ifndef CRAC_WINDOW_H
#define CRAC_WINDOW_H

#include <stddef.h>
#include <stdint.h>

/* Reserve [start,end) PROT_NONE without replacing anything. 0, or -1 with a message in err
 * naming the mapping that is in the way. */
int window_reserve(const char *name, uint64_t start, uint64_t end, char *err, size_t errlen);

#endif
