/* biglib.c — a shared library linked like manylinux wheels' (2 MiB max-page-size, code not
   separated), so ld.so maps its alignment gap PROT_NONE from the file, past the file's end. */
#include <stdint.h>

static uint64_t state = 0x9E3779B97F4A7C15ULL; /* in the library's writable segment */

uint64_t biglib_step(uint64_t k)
{
    state ^= k + 0x632BE59BD9B4E5ULL + (state << 6) + (state >> 2);
    return state;
}
