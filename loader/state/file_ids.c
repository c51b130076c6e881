/* file_ids.c — what each file the program reads (a regular file open read-only, fds 3 and up) was
 * at checkpoint time (CRAC_NT_FILE_IDS): inode, size, mtime, and the SHA-256 of its contents (of
 * its last 4 KiB when larger); a restart refuses a file that changed unless told to go on
 * (--allow-changed-files), so the program never goes on silently with different input, and
 * lets one that was only appended to be read on (docs/TRUST.md). */
#include "state.h"

#include "crac_image.h"
#include "restart.h"
#include "sha256.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HASH_MAX (64UL << 10) /* contents hashed up to this size */
#define FILE_IDS_MAX 4096     /* as FDS_MAX */
/* crac_file_id_rec.hashed: what its sha256 covers (0: nothing). */
#define FILE_ID_WHOLE 1 /* the whole file (up to HASH_MAX bytes) */
#define FILE_ID_TAIL 2  /* its last TAIL_HASHED bytes */
/* A larger file's last TAIL_HASHED bytes (state.h) hashed: ~3 us of the pause per file at
 * SHA-NI's ~1.3 GB/s (64 KiB: ~50 us). */

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

int hash_fd(int fd, uint64_t from, uint64_t len, char hex[65])
{
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf)
        return -1;
    uint64_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)(from + got));
        if (n <= 0)
            break;
        got += (uint64_t)n;
    }
    int rc = got == len ? 0 : -1;
    if (rc == 0)
        sha256_buffer(buf, len, hex);
    free(buf);
    return rc;
}

static int access_mode(int fd)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    unsigned int flags = 0;
    int found = 0;
    while (f && fgets(line, sizeof(line), f))
        found |= sscanf(line, "flags: %o", &flags) == 1;
    if (f)
        fclose(f);
    return found ? (int)(flags & O_ACCMODE) : -1;
}

int file_ids_capture(const struct state_capture *c, void **out, size_t *out_len)
{
    (void)c;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    unsigned char *blob = NULL;
    size_t len = 0, cap = 0;
    int n = 0;
    for (int fd; n < FILE_IDS_MAX && (fd = state_next_program_fd(d, 3)) >= 0;) {
        struct stat st;
        char link[64], path[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t pl = readlink(link, path, sizeof(path) - 1);
        if (pl <= 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || access_mode(fd) != O_RDONLY)
            continue;
        path[pl] = '\0';
        /* Gone files come back from their saved copy, /proc files are generated: nothing to
         * compare either with. */
        if (path[0] != '/' || strncmp(path, "/proc/", 6) == 0 || st.st_nlink == 0)
            continue;
        struct crac_file_id_rec r;
        memset(&r, 0, sizeof(r));
        r.fd = fd;
        r.dev = st.st_dev;
        r.ino = st.st_ino;
        r.file_size = (uint64_t)st.st_size;
        r.mtime_ns = mtime_ns(&st);
        r.path_len = (uint32_t)((strlen(path) + 1 + 7) & ~7UL);
        r.size = (uint32_t)(sizeof(r) + r.path_len);
        /* A small file's whole contents; a larger one's last TAIL_HASHED bytes, which tell a
         * file that was only appended to since (a log the program follows) from one rewritten. */
        char hex[65];
        uint64_t size = (uint64_t)st.st_size, tail = size <= HASH_MAX ? size : TAIL_HASHED;
        if (hash_fd(fd, size - tail, tail, hex) == 0) {
            r.hashed = size <= HASH_MAX ? FILE_ID_WHOLE : FILE_ID_TAIL;
            memcpy(r.sha256, hex, 64);
        }
        if (len + r.size > cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            while (ncap < len + r.size)
                ncap *= 2;
            unsigned char *b = realloc(blob, ncap);
            if (!b) {
                free(blob);
                closedir(d);
                return -1;
            }
            blob = b;
            cap = ncap;
        }
        memcpy(blob + len, &r, sizeof(r));
        memset(blob + len + sizeof(r), 0, r.path_len);
        memcpy(blob + len + sizeof(r), path, strlen(path));
        len += r.size;
        n++;
    }
    closedir(d);
    *out = blob;
    *out_len = len;
    return 0;
}

/* Whether the SHA-256 R recorded still matches what the file at PATH holds in the bytes it
 * covered: the whole file then, or its last TAIL_HASHED bytes then. */
static int recorded_bytes_same(const struct crac_file_id_rec *r, const char *path)
{
    if (r->hashed != FILE_ID_WHOLE && r->hashed != FILE_ID_TAIL)
        return 0;
    uint64_t tail =
        r->hashed == FILE_ID_WHOLE || r->file_size <= TAIL_HASHED ? r->file_size : TAIL_HASHED;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    char hex[65];
    int same = fd >= 0 && hash_fd(fd, r->file_size - tail, tail, hex) == 0 &&
               memcmp(hex, r->sha256, 64) == 0;
    if (fd >= 0)
        close(fd);
    return same;
}

/* How the file at PATH differs from R, or NULL if it does not (lstat: a link now in its place is
 * a change; the restart's open does not follow one either, fd_regular.c). *GREW: only appended
 * to since (longer, and the bytes recorded unchanged): the program reads on into what was added,
 * as it would have had it not been stopped. */
static const char *changed(const struct crac_file_id_rec *r, const char *path, int *fatal,
                           int *grew)
{
    struct stat st;
    *fatal = 0;
    *grew = 0;
    if (lstat(path, &st) != 0)
        return NULL;            /* gone: fd_regular.c says so (or recreates it from a saved copy) */
    if (!S_ISREG(st.st_mode)) { /* never reopened (fd_regular.c), allowed or not */
        *fatal = 1;
        return S_ISLNK(st.st_mode) ? "a symbolic link" : "a special file";
    }
    if (st.st_ino != r->ino)
        return "it is another file now (inode)";
    if ((uint64_t)st.st_size > r->file_size && recorded_bytes_same(r, path)) {
        *grew = 1;
        return NULL;
    }
    if ((uint64_t)st.st_size != r->file_size)
        return "its size changed";
    if (mtime_ns(&st) != r->mtime_ns)
        return "it was modified (mtime)";
    if (r->hashed == FILE_ID_WHOLE && !recorded_bytes_same(r, path))
        return "its contents changed";
    return NULL;
}

/* Right after the image is read, before anything is reopened: every file the program was reading
 * is as it was, or the restart stops (--allow-changed-files: a warning, and it goes on). */
int file_ids_hold(const struct state_restore *rs, const void *note, size_t len)
{
    const unsigned char *p = note;
    size_t off = 0;
    while (off + sizeof(struct crac_file_id_rec) <= len) {
        struct crac_file_id_rec r;
        memcpy(&r, p + off, sizeof(r));
        if (r.size < sizeof(r) + r.path_len || r.size > len - off || r.path_len == 0 ||
            p[off + sizeof(r) + r.path_len - 1] != '\0') {
            snprintf(rs->err, rs->errlen, "image corrupted: bad file identity record");
            return -1;
        }
        const char *path = (const char *)p + off + sizeof(r);
        int fatal, grew;
        const char *why = changed(&r, path, &fatal, &grew);
        if (grew)
            fprintf(stderr,
                    "crac: note: fd %d: %s was appended to since the checkpoint; the program "
                    "reads on into what was added\n",
                    r.fd, path);
        if (why && fatal) {
            snprintf(rs->err, rs->errlen,
                     "fd %d: %s is no longer a regular file (%s); not reopened", r.fd, path, why);
            return -1;
        }
        if (why && !rs->allow_changed) {
            snprintf(rs->err, rs->errlen,
                     "fd %d: %s changed since the checkpoint (%s); the program would go on "
                     "with different data (crac restart --allow-changed-files to go on anyway)",
                     r.fd, path, why);
            return -1;
        }
        if (why)
            fprintf(stderr, "crac: warning: fd %d: %s changed since the checkpoint (%s)\n", r.fd,
                    path, why);
        off += r.size;
    }
    return 0;
}
