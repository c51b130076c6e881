/* crac_version.h — crac's version, recorded in images. Its one source is pyproject.toml:
 * build_native.py passes it as -DCRAC_VERSION; Python reads the same (crac_py.version()). */
#ifndef CRAC_VERSION_H
#define CRAC_VERSION_H

#ifndef CRAC_VERSION
#error "CRAC_VERSION comes from pyproject.toml through build_native.py (-DCRAC_VERSION=...)"
#endif

#endif
