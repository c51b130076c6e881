/* restart.c — restart mode: read and check upper.core, hold fd numbers, then (with the fresh
 * lower half running) map the upper half back, restore the kinds of state (loader/state/), point
 * the upper runtime at the new lower half, confine it again and bring the threads back. */
#include "restart.h"

#include "ckpt.h"
#include "confine.h"
#include "crac_layout.h"
#include "crc32c.h"
#include "image_device.h"
#include "restart_lazy.h"
#include "fork_advice.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_HEAD (256UL << 20)

static void *copy_desc(const unsigned char *p, size_t len)
{
    void *d = malloc(len ? len : 1);
    if (d)
        memcpy(d, p, len);
    return d;
}

static int parse_notes(struct restart_image *img, const unsigned char *notes, size_t len, char *err,
                       size_t errlen)
{
    size_t off = 0;
    uint32_t seen = 0;
    while (off + sizeof(Elf64_Nhdr) <= len) {
        Elf64_Nhdr h;
        memcpy(&h, notes + off, sizeof(h));
        /* Rounded up in 64 bits: a 32-bit size near 4 GiB must not wrap to a small one. */
        size_t name_off = off + sizeof(h);
        size_t desc_off = name_off + (((size_t)h.n_namesz + 3) & ~(size_t)3);
        size_t next = desc_off + (((size_t)h.n_descsz + 3) & ~(size_t)3);
        if (next > len || desc_off > len)
            break;
        const unsigned char *desc = notes + desc_off;
        if (h.n_namesz == 5 && memcmp(notes + name_off, CRAC_NOTE_NAME, 5) == 0) {
            /* Each crac note once: a second one would silently replace the first. */
            uint32_t bit = h.n_type - CRAC_NT_PROCESS;
            if (bit < 32) {
                img->duplicate_note |= (seen >> bit) & 1;
                seen |= 1u << bit;
            }
            switch (h.n_type) {
            case CRAC_NT_PROCESS:
                if (h.n_descsz < sizeof(img->proc))
                    break;
                memcpy(&img->proc, desc, sizeof(img->proc));
                snprintf(img->cwd, sizeof(img->cwd), "%.*s", (int)(h.n_descsz - sizeof(img->proc)),
                         desc + sizeof(img->proc));
                break;
            case CRAC_NT_REGIONS:
                free(img->regions);
                img->regions = copy_desc(desc, h.n_descsz);
                img->regions_len = h.n_descsz;
                break;
            case CRAC_NT_PARENT: /* an incremental generation's (restart_chain.c) */
                if (h.n_descsz != sizeof(img->parent))
                    break;
                memcpy(&img->parent, desc, sizeof(img->parent));
                img->has_parent = 1;
                break;
            case CRAC_NT_PAGE_CRCS:
                free((void *)img->page_crcs);
                img->page_crcs = copy_desc(desc, h.n_descsz);
                img->page_crcs_len = img->page_crcs ? h.n_descsz : 0;
                break;
            case CRAC_NT_THREADS:
                free(img->threads);
                img->threads = copy_desc(desc, h.n_descsz);
                img->threads_len = h.n_descsz;
                img->n_threads = (int)(h.n_descsz / sizeof(struct crac_thread_note));
                break;
            default: /* the other kinds' notes (loader/state/kinds.c) */
                state_note_take(img, h.n_type, desc, h.n_descsz);
                break;
            }
        }
        off = next;
    }
    if ((img->proc.format != CRAC_IMAGE_FORMAT &&
         img->proc.format != CRAC_IMAGE_FORMAT_COMPRESSED &&
         img->proc.format != CRAC_IMAGE_FORMAT_INCREMENTAL) ||
        (img->proc.format == CRAC_IMAGE_FORMAT_INCREMENTAL) != img->has_parent || !img->regions ||
        !img->threads || state_note_missing(img)) {
        snprintf(err, errlen, "image corrupted: upper.core lacks crac's notes");
        return -1;
    }
    if (img->proc.w_start != CRAC_W_START || img->proc.w_end != CRAC_W_END ||
        img->proc.d_start != CRAC_D_START || img->proc.d_end != CRAC_D_END) {
        snprintf(err, errlen, "image uses a different window layout than this crac");
        return -1;
    }
    return 0;
}

int restart_read_image(const char *gen_dir, uint64_t core_size, uint32_t header_crc,
                       struct restart_image *img, char *err, size_t errlen)
{
    memset(img, 0, sizeof(*img));
    img->gen_dir = gen_dir;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/upper.core", gen_dir);
    /* Never through a link, never blocking on a FIFO: only a regular file is an image
     * (docs/TRUST.md). */
    img->core_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (img->core_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path,
                 errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(img->core_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "untrusted image: %s is not a regular file", path);
        return -1;
    }
    if ((uint64_t)st.st_size != core_size) {
        snprintf(err, errlen, "image corrupted: %s is %lld bytes, the manifest says %llu", path,
                 (long long)st.st_size, (unsigned long long)core_size);
        return -1;
    }
    Elf64_Ehdr eh;
    if (pread(img->core_fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_type != ET_CORE ||
        eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phoff != sizeof(eh) || eh.e_phnum < 1) {
        snprintf(err, errlen, "image corrupted: %s is not a crac core file", path);
        return -1;
    }
    Elf64_Phdr note;
    if (pread(img->core_fd, &note, sizeof(note), (off_t)eh.e_phoff) != sizeof(note) ||
        note.p_type != PT_NOTE || note.p_offset != eh.e_phoff + eh.e_phnum * sizeof(note) ||
        note.p_filesz > MAX_HEAD || note.p_offset + note.p_filesz > MAX_HEAD) {
        snprintf(err, errlen, "image corrupted: %s has no valid note segment", path);
        return -1;
    }
    img->data_start = (note.p_offset + note.p_filesz + PAGE - 1) & ~(PAGE - 1);
    if (img->data_start > core_size) {
        snprintf(err, errlen, "image corrupted: %s is truncated", path);
        return -1;
    }
    unsigned char *head = malloc(img->data_start);
    if (!head || pread(img->core_fd, head, img->data_start, 0) != (ssize_t)img->data_start) {
        free(head);
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    if (crc32c_update(0, head, img->data_start) != header_crc) {
        free(head);
        snprintf(err, errlen, "image corrupted: the headers of %s fail their checksum", path);
        return -1;
    }
    int rc = parse_notes(img, head + note.p_offset, note.p_filesz, err, errlen);
    /* The PT_LOAD headers after the PT_NOTE: restart_check.c holds the region records to them. */
    img->n_loads = eh.e_phnum - 1;
    img->loads = malloc((size_t)img->n_loads * sizeof(Elf64_Phdr) + 1);
    if (img->loads)
        memcpy(img->loads, head + eh.e_phoff + sizeof(Elf64_Phdr),
               (size_t)img->n_loads * sizeof(Elf64_Phdr));
    free(head);
    if (rc != 0)
        return -1;
    /* Structure before action: nothing of the image is mapped, opened or jumped to unless it
     * passes (restart_check.c). */
    return restart_check_image(img, core_size, err, errlen);
}

int restart_open_image(const struct options *o, struct restart_image *img, char *err, size_t errlen)
{
    if (restart_read_image(o->restart_dir, o->core_size, o->header_crc, img, err, errlen) != 0)
        return -1;
    /* The FIFO guard was for the open: reads of the core are plain blocking ones. */
    fcntl(img->core_fd, F_SETFL, 0);
    /* Before the backend, the lower half's threads and their heaps are placed (by the kernel,
     * anywhere): the program's mappings outside W get their addresses back. */
    if (restart_hold_outside(img, err, errlen) != 0)
        return -1;
    struct state_restore hold = {img, o->restart_dir, o->no_truncate,        NULL,
                                 err, errlen,         o->allow_changed_files};
    return state_hold_all(&hold);
}

int restart_check_main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: crac-loader --check-image GEN_DIR CORE_SIZE HEADER_CRC\n");
        return EXIT_REFUSED;
    }
    char *end1, *end2;
    uint64_t size = strtoull(argv[3], &end1, 10);
    unsigned long crc = strtoul(argv[4], &end2, 10);
    if (*end1 || *end2 || !argv[3][0] || !argv[4][0] || crc > 0xffffffffUL) {
        fprintf(stderr, "crac: error: --check-image: bad size or checksum\n");
        return EXIT_REFUSED;
    }
    struct restart_image img;
    char err[1024];
    if (restart_read_image(argv[2], size, (uint32_t)crc, &img, err, sizeof(err)) != 0) {
        fprintf(stderr, "crac: error: %s\n", err);
        return EXIT_REFUSED;
    }
    return 0;
}

/* Point a restored thread's saved state at this process: the lower-half API, a new epoch for the
 * TCBs upper threads borrow, one more restart. */
static struct crac_registry *adopt_registry(const struct restart_image *img,
                                            const struct crac_lh_api *api)
{
    struct crac_registry *r = (struct crac_registry *)img->proc.registry;
    if (r->magic != CRAC_REGISTRY_MAGIC || r->version != CRAC_REGISTRY_VERSION)
        die("image corrupted: the upper runtime's registry is not where the image says");
    /* The one pointer of the registry the loader writes through. */
    if (!restart_addr_ok(img, r->api_slot, sizeof(void *), PROT_READ | PROT_WRITE))
        die("image corrupted: the registry's API slot is not in the upper half's memory");
    *(const struct crac_lh_api **)r->api_slot = api;
    r->lower_epoch++;
    r->restarts++;
    r->parked = 0;
    return r;
}

void restart_run(const struct options *o, struct restart_image *img, const struct crac_lh_api *api)
{
    char err[1024];
    /* Nothing of the program may run before its threads are back: block what can be blocked. */
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGSYS);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigprocmask(SIG_SETMASK, &all, NULL);
    /* A lazy restart's fault server runs before anything (this loader included) touches W. */
    img->keep_files = o->no_truncate;
    if (restart_map_regions(img, err, sizeof(err)) != 0 ||
        restart_lazy_start(o->restart_dir, err, sizeof(err)) != 0 ||
        device_image_restore(o->restart_dir, err, sizeof(err)) != 0)
        die("%s", err);
    /* The program's MADV_DONTFORK / MADV_WIPEONFORK, on its fresh mappings (fork_advice.c). */
    long advised = advice_apply(crac_ctrl());
    if (advised != 0)
        fprintf(stderr, "crac: warning: cannot give the program its fork advice back: %s\n",
                strerror((int)-advised));
    restart_note_excluded(img);
    if (img->cwd[0] && chdir(img->cwd) != 0)
        die("cannot return to the working directory %s: %s", img->cwd, strerror(errno));
    umask(img->proc.umask);
    /* Memory is back: the kinds restored before crac's handlers and confinement (fds,
     * signals; loader/state/kinds.c). The others wait for the threads (restart_threads.c). */
    struct state_restore st = {img, o->restart_dir, o->no_truncate,        NULL,
                               err, sizeof(err),    o->allow_changed_files};
    if (state_restore_phase(STATE_WITH_MEMORY, &st) != 0)
        die("%s", err);
    close(img->core_fd);
    struct crac_registry *r = adopt_registry(img, api);
    ckpt_registry = r;
    ckpt_cfg.ckpt_signal = img->proc.ckpt_signal;
    int e;
    if ((e = ckpt_install_suspend_handler(r)) != 0)
        die("cannot install crac's signal handlers: %s", strerror(-e));
    if ((e = confine_install_handler()) != 0 || (e = confine_install_filter(1)) != 0)
        die("cannot install the seccomp confinement: %s", strerror(-e));
    fflush(NULL);
    restart_threads(r, img, &st);
}
