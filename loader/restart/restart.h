/* restart.h — restarting a program from an image with a fresh lower half (docs/ARCHITECTURE.md "Restart"). */
#ifndef CRAC_RESTART_H
#define CRAC_RESTART_H

#include "crac_image.h"
#include "crac_lh_api.h"
#include "crac_registry.h"
#include "launch.h"
#include "state.h"

#include <elf.h>
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
    size_t threads_len;
    int n_threads;
    int duplicate_note; /* a crac note seen twice: refused (restart_check.c) */
    Elf64_Phdr *loads;  /* the PT_LOAD headers, one per region in order (restart_check.c) */
    int n_loads;
    /* The notes of the other kinds of state, by their index in state_kinds[] (state.h). */
    struct state_note notes[STATE_KINDS_MAX];
    /* An incremental generation (format 4): the generation it builds on (restart_chain.c). */
    struct crac_parent_rec parent;
    int has_parent;
    /* A generation of an --incremental run: the PAGE_CRCS note (a restart from a chain checks
     * the pages it reads of a parent by it, restart_chain.c). */
    const unsigned char *page_crcs;
    size_t page_crcs_len;
    const char *gen_dir;
    /* --no-truncate, and `crac compact`: a kept file that is there is mapped as it is, not put
     * back as the checkpoint saw it (restart_keptfile.c). */
    int keep_files;
    /* restart_hold_outside ran: every region outside W is held by a PROT_NONE mapping of ours,
     * which its own mapping replaces (restart_memory.c). */
    int outside_held;
};

/* Check upper.core (size, header checksum, notes) and run the kinds' hold (the fds hold their
 * numbers). */
int restart_open_image(const struct options *o, struct restart_image *img, char *err,
                       size_t errlen);
__attribute__((noreturn)) void restart_run(const struct options *o, struct restart_image *img,
                                           const struct crac_lh_api *api);

/* Read and check upper.core without acting on it (crac-loader --check-image). */
int restart_read_image(const char *gen_dir, uint64_t core_size, uint32_t header_crc,
                       struct restart_image *img, char *err, size_t errlen);
/* restart_check.c: the structural checks (docs/TRUST.md); 0, or -1 with a one-line reason. */
int restart_check_image(const struct restart_image *img, uint64_t core_size, char *err,
                        size_t errlen);
/* Whether [addr, addr+len) lies in one region of W restored with at least PROT. */
int restart_addr_ok(const struct restart_image *img, uint64_t addr, uint64_t len, int prot);
int restart_check_thread_rec(const struct restart_image *img, const struct crac_thread_rec *rec,
                             int32_t tid, char *err, size_t errlen);
/* `crac-loader --check-image GEN_DIR CORE_SIZE HEADER_CRC`: exit 0, or 2 with one line. */
int restart_check_main(int argc, char **argv);

/* Regions from RESTART_SPLIT_MIN bytes are filled by two threads, the loader's and a helper, when
 * another CPU is there (restart_other_cpu): the restart runs before the program's threads
 * exist, so a second CPU is otherwise idle; below it the thread costs more than it saves. */
#define RESTART_SPLIT_MIN (64UL << 20)
int restart_other_cpu(void);
/* WORK on part A on this thread and on part B on a helper thread beside it (or here after A when
 * no thread can be started): the two halves of a split region. */
void restart_two_parts(void *(*work)(void *), void *a, void *b);

/* restart_keptfile.c: a CRAC_REGION_FILE_KEPT region's file, opened as it is or, where it is
 * gone, made again at its checkpoint size (MADE says which: an unnamed one is filled through the
 * mapping, then named by kept_file_name; one that is there is put back through the mapping unless
 * KEEP, as a written file is, grown to its checkpoint size). The descriptor; -1 with ERR. */
enum { KEPT_AS_IT_IS, KEPT_PUT_BACK, KEPT_NAMED, KEPT_UNNAMED };
int kept_file_open(const struct crac_region_rec *r, const char *path, int keep, int *made,
                   char *err, size_t errlen);
/* The filled unnamed file FD linked at PATH; where another process of the restart made it first,
 * that file is mapped over the region instead. 0, or -1 with ERR. */
int kept_file_name(int fd, const struct crac_region_rec *r, const char *path, char *err,
                   size_t errlen);

/* restart_memory.c */
/* Hold the addresses of the regions outside W (MAP_32BIT mappings, io_uring rings) with PROT_NONE
 * mappings before the new lower half loads anything that the kernel could place there. 0, or -1
 * with ERR naming what of this loader is there already. */
int restart_hold_outside(struct restart_image *img, char *err, size_t errlen);
int restart_map_regions(const struct restart_image *img, char *err, size_t errlen);
/* Once the control block is back (a lazy restart's fault server running): a region given back
 * its MADV_DONTDUMP marks the process as advised (upper_alloc.h dump_advised). */
void restart_note_excluded(const struct restart_image *img);
/* `--shared-mem DEV:INO:FD`: the shared object DEV:INO (ANON_SHARED regions) is the inherited
 * FD, made and filled once for the whole tree. 0, or -1 when malformed. */
int restart_shared_mem_add(const char *spec);
/* restart_chain.c: fill the CRAC_REGION_INCREMENTAL region r (mapped, writable) from its chain,
 * oldest generation first, then its own pages; crc and pages as for a region of a full image.
 * 0; -1 damaged; -2 with err saying which link of the chain is missing or damaged. */
int restart_chain_fill(const struct restart_image *img, const struct crac_region_rec *r,
                       const unsigned char *inherit, uint32_t *crc, uint32_t *pages, char *err,
                       size_t errlen);
/* restart_chain.c: every region is filled: the parents' files are closed (the program must not
 * inherit them as descriptors). */
void restart_chain_done(void);
/* restart_threads.c */
__attribute__((noreturn)) void restart_threads(struct crac_registry *r, struct restart_image *img,
                                               const struct state_restore *st);

#endif
