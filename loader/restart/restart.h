/* restart.h — restarting a program from an image with a fresh lower half (DESIGN §9). */
#ifndef CRAC_RESTART_H
#define CRAC_RESTART_H

#include "crac_image.h"
#include "crac_lh_api.h"
#include "crac_registry.h"
#include "launch.h"

#include <stddef.h>
#include <stdint.h>

struct restart_image {
    int core_fd;
    uint64_t data_start;
    struct crac_process_rec proc;
    char cwd[PATH_MAX];
    unsigned char *regions;
    size_t regions_len;
    struct crac_thread_note *threads;
    int n_threads;
    unsigned char *fds;
    size_t fds_len;
    struct crac_signal_rec *signals;
    struct crac_timers_rec *timers;
    struct crac_pending_rec *pending;
    size_t pending_len;
    struct crac_rlimit_rec *rlimits; /* NULL: an image without them */
    size_t rlimits_len;
};

/* Check upper.core (size, header checksum, notes) and hold the program's fd numbers. */
int restart_open_image(const struct options *o, struct restart_image *img, char *err,
                       size_t errlen);
__attribute__((noreturn)) void restart_run(const struct options *o, struct restart_image *img,
                                           const struct crac_lh_api *api);

/* restart_memory.c */
int restart_map_regions(const struct restart_image *img, char *err, size_t errlen);
/* restart_fds.c */
int restart_hold_fds(const struct restart_image *img, char *err, size_t errlen);
int restart_fds(const struct restart_image *img, const char *gen_dir, int no_truncate, char *err,
                size_t errlen);
/* restart_threads.c */
__attribute__((noreturn)) void restart_threads(struct crac_registry *r,
                                               const struct restart_image *img);

#endif
