/* lower_half_guard: under crac, tries to move the lower half's libc (a mapping outside W that is
   not the program's) with mremap, and to move a mapping of its own outside W over it with
   MREMAP_FIXED; prints what each returned, then shows it still runs. Both must fail (EFAULT,
   ENOMEM) and leave the lower half where it is. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define W_START 0x200000000000UL
#define W_END 0x340000000000UL /* W and D */

int main(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    unsigned long lo = 0, hi = 0;
    while (maps && fgets(line, sizeof(line), maps)) {
        unsigned long s, e;
        if (sscanf(line, "%lx-%lx", &s, &e) == 2 && (s >= W_END || e <= W_START) &&
            strstr(line, "/libc.so.6")) {
            lo = s;
            hi = e;
            break;
        }
    }
    if (!lo) {
        printf("no libc mapping outside W: not under crac\n");
        return 3;
    }
    void *moved = mremap((void *)lo, hi - lo, hi - lo + 4096, MREMAP_MAYMOVE);
    printf("mremap of the lower half: %s\n",
           moved == MAP_FAILED ? strerrorname_np(errno) : "moved");
    char *own =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (own == MAP_FAILED || (uintptr_t)own >= W_START) {
        printf("no MAP_32BIT mapping outside W\n");
        return 3;
    }
    own[0] = 'x';
    void *over = mremap(own, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)lo);
    printf("mremap over the lower half: %s\n",
           over == MAP_FAILED ? strerrorname_np(errno) : "moved");
    void *free_dest = mremap(own, 4096, 8192, MREMAP_MAYMOVE);
    printf("mremap of its own: %s\n", free_dest == MAP_FAILED ? strerrorname_np(errno) : "moved");
    printf("still running: %s\n", ((char *)free_dest)[0] == 'x' ? "yes" : "no");
    return 0;
}
