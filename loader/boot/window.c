/* window.c — reserves W and D with MAP_FIXED_NOREPLACE|MAP_NORESERVE before any device runtime
 * is loaded, so no lower-half mapping of any version can take an upper-half address. */
#include "window.h"

#include "crac_layout.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* Find the first line of /proc/self/maps overlapping [start,end), for the error message. */
static void describe_occupant(uint64_t start, uint64_t end, char *out, size_t outlen)
{
    snprintf(out, outlen, "an existing mapping");
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo < end && hi > start) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, outlen, "'%.300s'", line);
            break;
        }
    }
    fclose(f);
}

int window_reserve(const char *name, uint64_t start, uint64_t end, char *err, size_t errlen)
{
    void *p = mmap((void *)start, end - start, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == (void *)start)
        return 0;
    int e = errno;
    if (p != MAP_FAILED) /* a kernel without MAP_FIXED_NOREPLACE treated it as a hint */
        munmap(p, end - start);
    struct rlimit as;
    if (e == ENOMEM && getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
        /* ulimit -v: the windows are address space only (MAP_NORESERVE, PROT_NONE), but the
         * limit counts them. Say so, rather than "Cannot allocate memory". */
        unsigned long long need = (CRAC_W_END - CRAC_W_START) + (CRAC_D_END - CRAC_D_START);
        snprintf(err, errlen,
                 "cannot reserve the %s: the address-space limit (ulimit -v) of %llu MiB is too "
                 "small for crac's windows, which take %llu GiB of address space (not memory) "
                 "beside the program's; run crac with `ulimit -v unlimited`",
                 name, (unsigned long long)as.rlim_cur >> 20, need >> 30);
        return -1;
    }
    char who[400];
    if (e == EEXIST)
        describe_occupant(start, end, who, sizeof(who));
    else
        snprintf(who, sizeof(who), "%s", strerror(e));
    snprintf(err, errlen, "cannot reserve the %s [0x%lx, 0x%lx): taken by %s", name,
             (unsigned long)start, (unsigned long)end, who);
    return -1;
}
