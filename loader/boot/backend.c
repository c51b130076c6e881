/* backend.c — dlopens the device backend after W and D are reserved (so none of its mappings can
 * land there) and hands it the loader's services. */
#include "backend.h"

#include "crac_layout.h"
#include "lower_threads.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#define DEFAULT_SIM_VERSION 1

static struct crac_backend_host host = {
    CRAC_D_START, CRAC_D_END, lower_threads_register, lower_threads_unregister, NULL,
};

const struct crac_backend_info *backend_load(const char *dir, const char *device, int version,
                                             const char *runtime_path, char *err, size_t errlen)
{
    char path[PATH_MAX];
    host.runtime_path = runtime_path;
    if (version <= 0)
        version = DEFAULT_SIM_VERSION;
    snprintf(path, sizeof(path), "%s/libcrac-%s%d.so", dir, device, version);
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "backend %s version %d is not installed (%s missing)", device,
                 version, path);
        return NULL;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "cannot load backend %s: %s", path, dlerror());
        return NULL;
    }
    crac_backend_init_fn init = (crac_backend_init_fn)dlsym(lib, CRAC_BACKEND_INIT_SYMBOL);
    const struct crac_backend_info *info = init ? init(&host) : NULL;
    if (!info || info->abi != CRAC_BACKEND_ABI) {
        snprintf(err, errlen, "backend %s did not initialise (ABI %u, expected %u)", path,
                 info ? info->abi : 0, CRAC_BACKEND_ABI);
        return NULL;
    }
    return info;
}
