/* upper_runtime.c — the upper runtime's constructor: find the lower-half API table (private auxv
 * entry), check its version, record the main thread, discover glibc's struct pthread tid offset. */
#include "upper_runtime.h"

#include "crac_layout.h"

#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

struct upper_runtime crac_upper = {NULL, 0, -1};

void *upper_lookup(const char *name)
{
    const struct crac_lh_api *api = crac_upper.api;
    if (!api)
        return NULL;
    for (uint32_t i = 0; i < api->n_entries; i++)
        if (strcmp(api->entries[i].name, name) == 0)
            return api->entries[i].fn;
    return NULL;
}

__attribute__((constructor(101))) static void upper_runtime_init(void)
{
    const struct crac_lh_api *api = (const void *)getauxval(CRAC_AT_LH_API);
    if (!api)
        return; /* preloaded outside crac: stay out of the way */
    if (api->magic != CRAC_LH_API_MAGIC || api->version != CRAC_LH_API_VERSION) {
        fprintf(stderr,
                "crac: error: lower-half API version %u does not match the upper runtime's %u; "
                "reinstall crac-py\n",
                api->magic == CRAC_LH_API_MAGIC ? api->version : 0, CRAC_LH_API_VERSION);
        _exit(2);
    }
    crac_upper.api = api;
    crac_upper.main_tid = gettid();
    crac_upper.pthread_tid_offset = discover_tid_offset();
}
