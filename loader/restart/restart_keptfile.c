/* restart_keptfile.c — a small file on disk the program wrote through a shared mapping
 * (CRAC_REGION_FILE_KEPT): opened to be put back as the checkpoint saw it, or made again. */
#include "restart.h"

#include "make_dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int kept_file_open(const struct crac_region_rec *r, const char *path, int keep, int *made,
                   char *err, size_t errlen)
{
    *made = keep ? KEPT_AS_IT_IS : KEPT_PUT_BACK;
    int fd = open(path, O_RDWR | O_CLOEXEC); /* the program writes it through its mapping */
    struct stat st;
    if (fd >= 0 && *made == KEPT_PUT_BACK && fstat(fd, &st) == 0 &&
        (uint64_t)st.st_size < r->file_size && ftruncate(fd, (off_t)r->file_size) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0 || errno != ENOENT)
        goto out;
    /* Gone: made unnamed in its directory, filled, then named (kept_file_name), so that no other
     * process of the restart maps it half filled. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (make_dirs(path, 0) != 0)
        goto out;
    *slash = '\0';
    fd = open(dir[0] ? dir : "/", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    *made = KEPT_UNNAMED;
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        /* A file system without unnamed files: made under its name at once. */
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        *made = KEPT_NAMED;
        if (fd < 0 && errno == EEXIST) { /* another process of the restart made it */
            *made = KEPT_AS_IT_IS;
            fd = open(path, O_RDWR | O_CLOEXEC);
        }
    }
    if (fd >= 0 && *made != KEPT_AS_IT_IS && ftruncate(fd, (off_t)r->file_size) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        fd = -1;
    }
out:
    if (fd < 0)
        snprintf(err, errlen, "%s, mapped shared at 0x%lx, cannot be opened or made again: %s",
                 path, (unsigned long)r->start, strerror(errno));
    return fd;
}

int kept_file_name(int fd, const struct crac_region_rec *r, const char *path, char *err,
                   size_t errlen)
{
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    /* EEXIST: another process of the restart made it first; its file is the one they share. */
    int named = linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 || errno == EEXIST;
    /* Mapped again by its name: the unnamed file's mapping would show as deleted in
     * /proc/self/maps, and the next checkpoint would save it as such. */
    int by_name = named ? open(path, O_RDWR | O_CLOEXEC) : -1;
    if (by_name >= 0) {
        void *m = mmap((void *)r->start, r->end - r->start, (int)r->prot | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED, by_name, (off_t)r->file_offset);
        close(by_name);
        if (m == (void *)r->start && (!(r->flags & CRAC_REGION_DONTDUMP) ||
                                      madvise(m, r->end - r->start, MADV_DONTDUMP) == 0))
            return 0;
    }
    snprintf(err, errlen, "%s, mapped shared at 0x%lx, cannot be made again: %s", path,
             (unsigned long)r->start, strerror(errno));
    return -1;
}
