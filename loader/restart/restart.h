/* restart.h — restarting a program from an image with a fresh lower half (docs/ARCHITECTURE.md "Restart"). */
#ifndef CRAC_RESTART_H
#define CRAC_RESTART_H

#include "crac_image.h"
#include "crac_lh_api.h"
#include "crac_registry.h"
#include "launch.h"
#include "state.h"

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
    /* The notes of the other kinds of state, by their index in state_kinds[] (state.h). */
    struct state_note notes[STATE_KINDS_MAX];
};

/* Check upper.core (size, header checksum, notes) and run the kinds' hold (the fds hold their
 * numbers). */
int restart_open_image(const struct options *o, struct restart_image *img, char *err,
                       size_t errlen);
__attribute__((noreturn)) void restart_run(const struct options *o, struct restart_image *img,
                                           const struct crac_lh_api *api);

/* restart_memory.c */
int restart_map_regions(const struct restart_image *img, char *err, size_t errlen);
/* restart_threads.c */
__attribute__((noreturn)) void restart_threads(struct crac_registry *r, struct restart_image *img,
                                               const struct state_restore *st);

#endif
