/* crac_image.h — the on-disk records of upper.core's "CRAC" notes and of device.img (docs/IMAGE.md).
 * Their one definition is crac_py/image/format.py; build_native.py generates this header from it. */
#ifndef CRAC_IMAGE_H
#define CRAC_IMAGE_H

#include "crac_image_gen.h"

#endif
