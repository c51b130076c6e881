/* backend.h — loading the device backend library into the lower half. */
#ifndef CRAC_BACKEND_LOAD_H
#define CRAC_BACKEND_LOAD_H

#include "crac_backend.h"

#include <stddef.h>

/* Load libcrac-<device><version>.so from dir (e.g. libcrac-sim1.so, libcrac-cuda13.so). version
 * 0: the default. runtime_path: the library the backend drives (cuda), else NULL. Returns the
 * backend's info, or NULL with a message in err. */
const struct crac_backend_info *backend_load(const char *dir, const char *device, int version,
                                             const char *runtime_path, char *err, size_t errlen);

#endif
