/* image_device.h — device.img: device and managed memory of the upper half's allocations. */
#ifndef CRAC_IMAGE_DEVICE_H
#define CRAC_IMAGE_DEVICE_H

#include "crac_backend.h"
#include "crac_registry.h"

#include <stddef.h>

#define CRAC_DEVICE_IMAGE "device.img"

extern const struct crac_backend_info *ckpt_backend; /* the loaded backend, or NULL */

/* Write dir/device.img from the registry's allocations (0 and nothing written when there are
 * none). The backend has been quiesced; the program's threads are parked. */
struct page_digest;
int device_image_write(const char *dir, const struct crac_registry *r, char *err, size_t errlen,
                       struct page_digest **digest);
/* The device state device_image_write saw, while the program was parked: MANIFEST.json is written
 * after the program resumes, when the registry may already hold other allocations. */
struct device_summary {
    uint32_t n; /* allocations of device.img's index, in its order */
    struct device_summary_alloc {
        uint64_t addr, size;
        uint32_t kind; /* enum crac_dev_kind */
    } *v;
    int32_t streams, events, modules, pinned;
};
const struct device_summary *device_image_summary(void);
/* Recreate every allocation of dir/device.img at its address with the (new) backend and fill it,
 * checking the checksums. A missing device.img means there was no device state. */
int device_image_restore(const char *dir, char *err, size_t errlen);

#endif
