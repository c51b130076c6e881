/* brk_guard.h — keeps the lower half off the kernel's break, whose start the kernel picks anywhere
 * in the 1 GiB above the loader: the range a restarted program's MAP_32BIT mappings come from. */
#ifndef CRAC_BRK_GUARD_H
#define CRAC_BRK_GUARD_H

#include <stdint.h>

/* A program's region START-END must be mapped where the guard page is: the guard goes (the
 * region's own mapping then stops the break as well). */
void brk_guard_yield(uint64_t start, uint64_t end);

#endif
