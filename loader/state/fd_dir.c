/* fd_dir.c — fds of directories: reopened by path at their offset; one the program holds that was
 * removed comes back as an empty, removed directory. */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dir_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)e;
    return S_ISDIR(st->st_mode);
}

/* A directory the program holds open that was removed: an empty, removed directory, which is
 * what such an fd shows (empty listing, nothing can be created in it). */
static int removed_dir(const char *path, const char *gen_dir, int flags)
{
    struct fd_dir_name dirs[3];
    int n = fd_scratch_dirs(path, gen_dir, dirs);
    for (int i = 0; i < n; i++) {
        char tmpl[PATH_MAX + 32];
        if (fd_temp_name(tmpl, sizeof(tmpl), dirs[i].p) != 0)
            continue;
        if (!mkdtemp(tmpl))
            continue;
        int fd = open(tmpl, flags);
        rmdir(tmpl);
        if (fd >= 0)
            return fd;
    }
    return -1;
}

static int dir_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    const struct crac_fd_rec *rec = &v->rec;
    int flags = (int)(rec->open_flags & ~(unsigned)(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC;
    int fd = open(v->path, flags);
    if (fd < 0 && rec->unlinked)
        fd = removed_dir(v->path, r->gen_dir, flags);
    if (fd < 0)
        fd = fd_proc_gone(v);
    if (fd < 0) {
        snprintf(r->err, r->errlen, "fd %d: cannot reopen %s: %s", rec->fd, v->path,
                 strerror(errno));
        return -1;
    }
    lseek(fd, (off_t)rec->pos, SEEK_SET);
    return fd_install(fd, rec);
}

const struct fd_ops fd_dir_ops = {
    .kind = CRAC_FD_DIR, .name = "dir", .recognise = dir_recognise, .reopen = dir_reopen};
