/* fd_inotify.c — inotify instances: each watch's number, mask and path saved at checkpoint
 * (files/inotify-<fd>), watched again at restart under the same numbers. */
#include "fds.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int inotify_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)st;
    return strcmp(e->path, "anon_inode:inotify") == 0;
}

/* ---- checkpoint ---- */

/* A mountinfo field with its octal escapes (\040 ...) undone, in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++, o++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o = *s;
        }
    }
    *o = '\0';
}

/* The path of the file a watch is on. fdinfo names it by a file handle (and the kernel's device
 * number sdev): the handle is opened through each mount of that filesystem until one gives it,
 * and the opened file's /proc/self/fd link is its path. Opening handles needs
 * CAP_DAC_READ_SEARCH; without it (or with the file gone) 0 is returned. */
static int watch_path(unsigned sdev, const char *hex, unsigned bytes, int type, char *out,
                      size_t size)
{
    if (bytes > MAX_HANDLE_SZ || strlen(hex) < 2 * (size_t)bytes)
        return 0;
    /* struct file_handle ends in a flexible array: its bytes are built in a buffer after it. */
    union {
        struct file_handle h;
        unsigned char raw[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    } fh;
    fh.h.handle_bytes = bytes;
    fh.h.handle_type = type;
    for (unsigned i = 0; i < bytes; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 0;
        fh.raw[sizeof(struct file_handle) + i] = (unsigned char)v;
    }
    FILE *mi = fopen("/proc/self/mountinfo", "re");
    if (!mi)
        return 0;
    char line[2 * PATH_MAX], mnt[PATH_MAX];
    int found = 0;
    while (!found && fgets(line, sizeof(line), mi)) {
        unsigned major, minor;
        if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &major, &minor, mnt) != 3 ||
            ((major << 20) | minor) != sdev)
            continue;
        unescape(mnt);
        /* Not O_PATH: open_by_handle_at does not take an O_PATH descriptor (EBADF). */
        int mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (mfd < 0)
            continue;
        int f = open_by_handle_at(mfd, &fh.h, O_PATH | O_CLOEXEC);
        close(mfd);
        if (f < 0)
            continue;
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", f);
        ssize_t n = readlink(link, out, size - 1);
        close(f);
        if (n > 0 && out[0] == '/') {
            out[n] = '\0';
            found = 1;
        }
    }
    fclose(mi);
    return found;
}

struct watch {
    int wd;
    unsigned mask;
    char *path;
};

static int by_wd(const void *a, const void *b)
{
    return ((const struct watch *)a)->wd - ((const struct watch *)b)->wd;
}

/* fdinfo: "inotify wd:HEX ino:HEX sdev:HEX mask:HEX ignored_mask:HEX fhandle-bytes:HEX
 * fhandle-type:HEX f_handle:HEX", newest first. Saved per watch, by rising number: "wd N mask
 * HEX len L\n" then the path's L bytes and a newline (a path may hold any byte but NUL). Events
 * already queued at the checkpoint cannot be read without taking them from the program: lost,
 * with a loss line. */
static int inotify_save(struct fd_entry *e, const struct fd_entry *all, int n,
                        const char *files_dir)
{
    (void)all, (void)n;
    char *info = fd_fdinfo(e->rec.fd);
    if (!info) {
        fprintf(stderr, "crac: error: cannot read the inotify fd %d\n", e->rec.fd);
        return -1;
    }
    size_t n_w = 0, cap_w = 0, bytes_out = 1;
    struct watch *w = NULL;
    int rc = 0;
    for (const char *line = fd_info_field(info, "inotify "); line && rc == 0;
         line = fd_info_field(line, "inotify ")) {
        int wd, type;
        unsigned sdev, mask, bytes;
        char hex[2 * MAX_HANDLE_SZ + 1], path[PATH_MAX];
        if (sscanf(line,
                   "wd:%x ino:%*x sdev:%x mask:%x ignored_mask:%*x fhandle-bytes:%x "
                   "fhandle-type:%x f_handle:%256s",
                   &wd, &sdev, &mask, &bytes, &type, hex) != 6 ||
            !watch_path(sdev, hex, bytes, type, path, sizeof(path))) {
            state_loss("inotify fd %d: watch %d cannot be saved (its path cannot be found)",
                       e->rec.fd, wd);
            continue;
        }
        if (n_w == cap_w) {
            struct watch *more = realloc(w, (cap_w = cap_w ? 2 * cap_w : 16) * sizeof(*w));
            if (!more) {
                rc = -1;
                break;
            }
            w = more;
        }
        w[n_w] = (struct watch){wd, mask, strdup(path)};
        if (!w[n_w].path) {
            rc = -1;
            break;
        }
        bytes_out += strlen(path) + 64;
        n_w++;
    }
    free(info);
    char *text = rc == 0 ? malloc(bytes_out) : NULL;
    if (text) {
        qsort(w, n_w, sizeof(*w), by_wd);
        size_t len = 0;
        text[0] = '\0';
        for (size_t i = 0; i < n_w; i++)
            len += (size_t)snprintf(text + len, bytes_out - len, "wd %d mask %x len %zu\n%s\n",
                                    w[i].wd, w[i].mask, strlen(w[i].path), w[i].path);
    }
    for (size_t i = 0; i < n_w; i++)
        free(w[i].path);
    free(w);
    int queued = 0;
    if (ioctl(e->rec.fd, FIONREAD, &queued) == 0 && queued > 0)
        state_loss("inotify fd %d: %d bytes of events queued at the checkpoint are lost", e->rec.fd,
                   queued);
    rc = text ? fd_save_text(e, files_dir, "inotify", text) : -1;
    free(text);
    return rc;
}

/* ---- restart ---- */

/* Watch numbers are handed out in rising order and not reused at once (the kernel allocates
 * them cyclically), so the watches are added in the saved (rising) order, and a number the
 * program had removed is taken by a watch of something else (IN_MASK_CREATE: never one of the
 * program's) removed at once. */
static int fill_hole(int fd, int want, const struct fd_restore *r)
{
    const char *spare[] = {"/", r->gen_dir, "/proc", "/dev"};
    for (size_t i = 0; i < sizeof(spare) / sizeof(spare[0]); i++) {
        int wd = inotify_add_watch(fd, spare[i], IN_DELETE_SELF | IN_MASK_CREATE);
        if (wd >= 0) {
            inotify_rm_watch(fd, wd);
            /* Removing it queued an IN_IGNORED event the program must not see: read now, when
             * nothing else can be queued but events of the watches just made (the restarted
             * program is not running yet; another process's file activity meanwhile is lost). */
            struct pollfd p = {fd, POLLIN, 0};
            char buf[4096] __attribute__((aligned(8)));
            while (poll(&p, 1, 0) == 1 && read(fd, buf, sizeof(buf)) > 0)
                ;
            return wd == want ? 0 : -1;
        }
    }
    return -1;
}

static int inotify_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    char *text = fd_read_text(r, v, "inotify");
    if (!text)
        return -1;
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0) {
        free(text);
        return -1;
    }
    int next = 1, rc = 0;
    char *p = text;
    while (*p && rc == 0) {
        int wd, used = 0;
        unsigned mask;
        size_t len;
        char path[PATH_MAX];
        if (sscanf(p, "wd %d mask %x len %zu\n%n", &wd, &mask, &len, &used) != 3 || !used ||
            len >= sizeof(path) || strlen(p + used) < len + 1 || wd < next) {
            snprintf(r->err, r->errlen, "fd %d (inotify): image corrupted: bad saved watch",
                     v->rec.fd);
            rc = -1;
            break;
        }
        memcpy(path, p + used, len);
        path[len] = '\0';
        p += used + len + 1;
        while (next < wd && fill_hole(fd, next, r) == 0)
            next++;
        uint32_t flags = IN_ALL_EVENTS | IN_ONESHOT | IN_EXCL_UNLINK | IN_ONLYDIR;
        int got = next == wd ? inotify_add_watch(fd, path, (mask & flags) | IN_DONT_FOLLOW) : -1;
        if (got != wd)
            fprintf(stderr, "crac: warning: inotify fd %d: watch %d on %s cannot be made again%s\n",
                    v->rec.fd, wd, path, got < 0 ? " (the file is gone)" : "");
        if (got >= next)
            next = got + 1;
    }
    free(text);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    return fd_install(fd, &v->rec);
}

const struct fd_ops fd_inotify_ops = {.kind = CRAC_FD_INOTIFY,
                                      .name = "inotify",
                                      .recognise = inotify_recognise,
                                      .save = inotify_save,
                                      .reopen = inotify_reopen};
