/* fd_eventfd.c — eventfds: a new one at restart with the counter and the semaphore flag it had
 * (files/eventfd-<fd>); read from fdinfo, so the program's counter is not consumed. */
#include "fds.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int eventfd_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)st;
    return strcmp(e->path, "anon_inode:[eventfd]") == 0;
}

/* fdinfo shows "eventfd-count: <hex>" and, since Linux 6.6, "eventfd-semaphore: 0|1"; an older
 * kernel's semaphore flag cannot be seen and is saved as 0. */
static int eventfd_save(struct fd_entry *e, const struct fd_entry *all, int n,
                        const char *files_dir)
{
    (void)all, (void)n;
    char *info = fd_fdinfo(e->rec.fd);
    const char *count = info ? fd_info_field(info, "eventfd-count:") : NULL;
    const char *sem = info ? fd_info_field(info, "eventfd-semaphore:") : NULL;
    if (!count) {
        free(info);
        state_loss("fd %d (eventfd): its counter cannot be read; it comes back at 0", e->rec.fd);
        return 0;
    }
    char text[96];
    snprintf(text, sizeof(text), "count %" PRIx64 " semaphore %d\n",
             (uint64_t)strtoull(count, NULL, 16), sem ? atoi(sem) : 0);
    free(info);
    return fd_save_text(e, files_dir, "eventfd", text);
}

static int eventfd_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    uint64_t count = 0;
    int sem = 0;
    if (v->rec.saved) { /* images before the counter was kept have none: 0 */
        char *text = fd_read_text(r, v, "eventfd");
        if (!text)
            return -1;
        int ok = sscanf(text, "count %" SCNx64 " semaphore %d", &count, &sem) == 2;
        free(text);
        if (!ok || count == UINT64_MAX) {
            snprintf(r->err, r->errlen, "fd %d (eventfd): image corrupted: bad saved counter",
                     v->rec.fd);
            return -1;
        }
    }
    int fd = eventfd(0, EFD_CLOEXEC | (sem ? EFD_SEMAPHORE : 0));
    if (fd < 0)
        return -1;
    /* The counter is 64-bit, eventfd()'s initial value only 32: written instead. */
    if (count && write(fd, &count, sizeof(count)) != (ssize_t)sizeof(count)) {
        close(fd);
        return -1;
    }
    return fd_install(fd, &v->rec);
}

const struct fd_ops fd_eventfd_ops = {.kind = CRAC_FD_EVENTFD,
                                      .name = "eventfd",
                                      .recognise = eventfd_recognise,
                                      .save = eventfd_save,
                                      .reopen = eventfd_reopen};
