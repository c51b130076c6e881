/* launch.h — the loader's options, and launching a program as the upper half (docs/ARCHITECTURE.md "Launch"). */
#ifndef CRAC_LAUNCH_H
#define CRAC_LAUNCH_H

#include "crac_lh_api.h"

#include <limits.h>
#include <stdint.h>

#define EXIT_REFUSED 2

struct options {
    const char *device;
    const char *mpi_shim; /* soname of the upper MPI shim to preload (docs/MPI.md), or NULL */
    /* libcudart.so.12: the CUDA 12 layer preloaded after the 13 shim (docs/CUDA.md), or NULL */
    const char *cudart_shim;
    int sim_version;
    const char *cuda_runtime; /* --device cuda: NVIDIA's libcudart the backend loads */
    const char *argv0;
    int ckpt_signal;
    const char *ckpt_dir;
    int keep, interval, exit_after, no_truncate, verbose;
    int allow_changed_files; /* restart: go on when a file the program reads changed */
    int no_fork_writer;      /* --no-fork-writer (ckpt_writer.c) */
    int ckpt_open_files;     /* --ckpt-open-files (fd_regular.c) */
    const char *compress;    /* --compress none|lz4|zstd[:LEVEL] (image_compress.c) */
    int incremental;         /* --incremental K: every Kth generation full (ckpt_incr.c) */
    const char *crac_cmd;
    const char *coord_host, *coord_port, *coord_token; /* host NULL: no coordinator */
    const char *restart_dir;                           /* restart mode: the generation directory */
    uint64_t core_size;
    uint32_t header_crc;
    char **program_argv;
    int program_argc;
    char native_dir[PATH_MAX];
};

__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);
__attribute__((noreturn)) void launch_run(const struct options *o, const struct crac_lh_api *api,
                                          char **envp);
/* Give the main thread's rseq registration from the lower libc up, so the upper libc's works. */
void release_lower_rseq(void);

#endif
