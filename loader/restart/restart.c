/* restart.c — restart mode: read and check upper.core, hold fd numbers, then (with the fresh
 * lower half running) map the upper half back, restore the kinds of state (loader/state/), point
 * the upper runtime at the new lower half, confine it again and bring the threads back. */
#include "restart.h"

#include "ckpt.h"
#include "confine.h"
#include "crac_layout.h"
#include "crc32c.h"
#include "image_device.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
            switch (h.n_type) {
            case CRAC_NT_PROCESS:
                if (h.n_descsz < sizeof(img->proc))
                    break;
                memcpy(&img->proc, desc, sizeof(img->proc));
                snprintf(img->cwd, sizeof(img->cwd), "%.*s", (int)(h.n_descsz - sizeof(img->proc)),
                         desc + sizeof(img->proc));
                break;
            case CRAC_NT_REGIONS:
                img->regions = copy_desc(desc, h.n_descsz);
                img->regions_len = h.n_descsz;
                break;
            case CRAC_NT_THREADS:
                img->threads = copy_desc(desc, h.n_descsz);
                img->n_threads = (int)(h.n_descsz / sizeof(struct crac_thread_note));
                break;
            default: /* the other kinds' notes (loader/state/kinds.c) */
                state_note_take(img, h.n_type, desc, h.n_descsz);
                break;
            }
        }
        off = next;
    }
    if (img->proc.format != CRAC_IMAGE_FORMAT || !img->regions || !img->threads ||
        state_note_missing(img)) {
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

int restart_open_image(const struct options *o, struct restart_image *img, char *err, size_t errlen)
{
    memset(img, 0, sizeof(*img));
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/upper.core", o->restart_dir);
    img->core_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (img->core_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    fstat(img->core_fd, &st);
    if ((uint64_t)st.st_size != o->core_size) {
        snprintf(err, errlen, "image corrupted: %s is %lld bytes, the manifest says %llu", path,
                 (long long)st.st_size, (unsigned long long)o->core_size);
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
        note.p_offset + note.p_filesz > MAX_HEAD) {
        snprintf(err, errlen, "image corrupted: %s has no valid note segment", path);
        return -1;
    }
    img->data_start = (note.p_offset + note.p_filesz + PAGE - 1) & ~(PAGE - 1);
    if (img->data_start > o->core_size) {
        snprintf(err, errlen, "image corrupted: %s is truncated", path);
        return -1;
    }
    unsigned char *head = malloc(img->data_start);
    if (!head || pread(img->core_fd, head, img->data_start, 0) != (ssize_t)img->data_start) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    if (crc32c_update(0, head, img->data_start) != o->header_crc) {
        snprintf(err, errlen, "image corrupted: the headers of %s fail their checksum", path);
        return -1;
    }
    int rc = parse_notes(img, head + note.p_offset, note.p_filesz, err, errlen);
    free(head);
    if (rc != 0)
        return -1;
    const struct state_restore hold = {img, o->restart_dir, o->no_truncate, NULL, err, errlen};
    return state_hold_all(&hold);
}

/* Point a restored thread's saved state at this process: the lower-half API, a new epoch for the
 * TCBs upper threads borrow, one more restart. */
static struct crac_registry *adopt_registry(const struct restart_image *img,
                                            const struct crac_lh_api *api)
{
    struct crac_registry *r = (struct crac_registry *)img->proc.registry;
    if (r->magic != CRAC_REGISTRY_MAGIC || r->version != CRAC_REGISTRY_VERSION)
        die("image corrupted: the upper runtime's registry is not where the image says");
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
    if (restart_map_regions(img, err, sizeof(err)) != 0 ||
        device_image_restore(o->restart_dir, err, sizeof(err)) != 0)
        die("%s", err);
    if (img->cwd[0] && chdir(img->cwd) != 0)
        die("cannot return to the working directory %s: %s", img->cwd, strerror(errno));
    umask(img->proc.umask);
    /* Memory is back: the kinds restored before crac's handlers and confinement (fds,
     * signals; loader/state/kinds.c). The others wait for the threads (restart_threads.c). */
    struct state_restore st = {img, o->restart_dir, o->no_truncate, NULL, err, sizeof(err)};
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
