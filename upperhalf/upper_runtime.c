/* upper_runtime.c — the upper runtime's constructor: find the lower-half API table (private auxv
 * entry), check its version, record the main thread, discover glibc's struct pthread tid offset. */
#include "upper_runtime.h"

#include "crac_layout.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

/* glibc 2.35+ exports where each thread's rseq area is; weak so older glibcs still load us. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
extern char **environ;

#define RSEQ_SIG_X86 0x53053053

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

/* The auxv follows the environment's terminating NULL on the initial stack; environ still points
 * there while constructors run. */
static uint64_t initial_auxv(void)
{
    char **p = environ;
    while (*p)
        p++;
    return (uint64_t)(p + 1);
}

/* Tell the lower half where our registry is; it installs the suspend handler from it. */
static void register_with_lower_half(void)
{
    struct crac_registry *r = &crac_registry;
    r->magic = CRAC_REGISTRY_MAGIC;
    r->version = CRAC_REGISTRY_VERSION;
    r->pthread_tid_offset = crac_upper.pthread_tid_offset;
    if (&__rseq_size && &__rseq_offset && __rseq_size > 0) {
        r->rseq_offset = __rseq_offset;
        r->rseq_size = __rseq_size;
        r->rseq_sig = RSEQ_SIG_X86;
    }
    r->auxv = initial_auxv();
    r->api_slot = (uint64_t)&crac_upper.api;
    suspend_register();
    void *reg = upper_lookup("crac_lh_register_upper");
    if (!reg || cross_call(reg, (uint64_t)r, 0, 0) != 0) {
        fprintf(stderr, "crac: error: the lower half refused the upper runtime's registry\n");
        _exit(2);
    }
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
    register_with_lower_half();
    fastpath_install();
}
