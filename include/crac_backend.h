/* crac_backend.h — what a device backend (a shared library loaded into the lower half, e.g.
 * libcrac-sim1.so) exports to the loader, and the services the loader offers it. */
#ifndef CRAC_BACKEND_H
#define CRAC_BACKEND_H

#include "crac_lh_api.h"

#include <stdint.h>
#include <sys/types.h>

#define CRAC_BACKEND_ABI 3

struct crac_backend_host {
    uint64_t device_window_start; /* D: device virtual addresses are assigned here by crac */
    uint64_t device_window_end;
    /* Every thread the backend starts must be registered: the checkpoint suspends and saves
     * every thread that is not a registered lower-half thread. */
    void (*register_lower_thread)(pid_t tid);
    void (*unregister_lower_thread)(pid_t tid);
    /* The device library the backend drives (cuda: NVIDIA's libcudart); NULL for the sim. */
    const char *runtime_path;
};

struct crac_backend_info {
    uint32_t abi;                        /* CRAC_BACKEND_ABI */
    const char *name;                    /* "sim", "cuda" */
    const char *version;                 /* the backend's own version string, recorded in images */
    int driver_version;                  /* what cudaDriverGetVersion reports */
    const struct crac_lh_entry *entries; /* looked up by name from the upper half */
    uint32_t n_entries;
    /* Device state across checkpoint and restart, in terms of the API, not of the backend's
     * internals (docs/ARCHITECTURE.md "Restart"): every call returns 0 or a cudaError_t. */
    int (*quiesce)(void);                                /* wait until every stream is idle */
    int (*map)(uint64_t addr, uint64_t size, int kind);  /* an allocation at a given address */
    int (*read)(uint64_t addr, void *dst, uint64_t len); /* device -> host */
    int (*write)(uint64_t addr, const void *src, uint64_t len); /* host -> device */
    /* Device memory the lower half can read in place (the sim's is host memory): the
     * checkpoint writes it to the image without a copy through a bounce buffer. NULL (or a
     * NULL result) where it cannot: then read() is used. */
    const void *(*host_view)(uint64_t addr, uint64_t len);
    /* Waits until every write() has reached the device (a backend may return from write() with
     * its copy still in flight); NULL where write() is synchronous. 0 or a cudaError_t. */
    int (*flush)(void);
};

/* The one symbol a backend library exports. Returns NULL on failure (message on stderr). */
typedef const struct crac_backend_info *(*crac_backend_init_fn)(const struct crac_backend_host *);
#define CRAC_BACKEND_INIT_SYMBOL "crac_backend_init"

#endif
