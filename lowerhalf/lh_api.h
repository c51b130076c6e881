/* lh_api.h — building the lower-half API table the upper runtime looks up by name. */
#ifndef CRAC_LH_API_BUILD_H
#define CRAC_LH_API_BUILD_H

#include "crac_lh_api.h"

const struct crac_lh_api *lh_api_table(const char *backend, int fsgsbase);

#endif
