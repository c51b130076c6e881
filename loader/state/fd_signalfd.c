/* fd_signalfd.c — signalfds: the mask saved at checkpoint (files/signalfd-<fd>), a new signalfd
 * with it at restart; crac's own signals are never in it (confine_trap.c keeps them out). */
#include "fds.h"

#include "upper_alloc.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static int signalfd_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)st;
    return strcmp(e->path, "anon_inode:[signalfd]") == 0;
}

static int signalfd_save(struct fd_entry *e, const struct fd_entry *all, int n,
                         const char *files_dir)
{
    (void)all, (void)n;
    char *info = fd_fdinfo(e->rec.fd);
    const char *mask = info ? fd_info_field(info, "sigmask:") : NULL;
    if (!mask) {
        free(info);
        fprintf(stderr, "crac: error: cannot read the signalfd fd %d's mask\n", e->rec.fd);
        return -1;
    }
    char text[64];
    snprintf(text, sizeof(text), "mask %016" PRIx64 "\n", (uint64_t)strtoull(mask, NULL, 16));
    free(info);
    return fd_save_text(e, files_dir, "signalfd", text);
}

/* The signals the program waits for: the kernel's 8-byte mask, set with the raw call (glibc's
 * sigset_t is 128 bytes). The restarted process's reserved signals (the checkpoint signal) are
 * taken out again, as confine_trap.c does when the program makes one. */
static int signalfd_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    char *text = fd_read_text(r, v, "signalfd");
    if (!text)
        return -1;
    uint64_t mask;
    int ok = sscanf(text, "mask %" SCNx64, &mask) == 1;
    free(text);
    if (!ok) {
        snprintf(r->err, r->errlen, "fd %d (signalfd): image corrupted: bad saved mask", v->rec.fd);
        return -1;
    }
    mask &= ~crac_ctrl()->reserved_sigs;
    long fd = syscall(SYS_signalfd4, -1, &mask, (size_t)8, SFD_CLOEXEC);
    return fd < 0 ? -1 : fd_install((int)fd, &v->rec);
}

const struct fd_ops fd_signalfd_ops = {.kind = CRAC_FD_SIGNALFD,
                                       .name = "signalfd",
                                       .recognise = signalfd_recognise,
                                       .save = signalfd_save,
                                       .reopen = signalfd_reopen};
