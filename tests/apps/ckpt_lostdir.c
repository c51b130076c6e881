/* ckpt_lostdir DIR [STEPS=60]: opens DIR/d/f for writing and DIR/d as a directory, then removes
   the whole of DIR/d (`rm -rf`) while both stay open; per step appends a record to the file and
   reads every record back. The file must stay unlinked with all its contents, the directory
   deleted and empty. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#define PROG "ckpt_lostdir"
#define USAGE "DIR [STEPS]"
#include "ckpt_common.h"

#define REC_LEN 11 /* "rec 000001\n" */

static void rec(char *buf, long k) { snprintf(buf, 32, "rec %06ld\n", k % 1000000); }

static void check_file(int fd, long k)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        fail("step %ld: fstat of the file: %s", k, strerror(errno));
    if (st.st_nlink != 0)
        fail("step %ld: the removed file has %ld links", k, (long)st.st_nlink);
    if ((st.st_mode & 07777) != 0640)
        fail("step %ld: the file has mode %o, expected 640", k, (unsigned)(st.st_mode & 07777));
    if (st.st_size != (off_t)k * REC_LEN)
        fail("step %ld: the file has %lld bytes, expected %ld", k, (long long)st.st_size,
             k * REC_LEN);
    if (lseek(fd, 0, SEEK_CUR) != (off_t)k * REC_LEN)
        fail("step %ld: the file offset is not at its end", k);
    char buf[32], want[32];
    for (long j = 1; j <= k; j++) {
        rec(want, j);
        if (pread(fd, buf, REC_LEN, (off_t)(j - 1) * REC_LEN) != REC_LEN ||
            memcmp(buf, want, REC_LEN) != 0)
            fail("step %ld: record %ld of the file does not read back", k, j);
    }
}

static void check_dir(int dfd, long k)
{
    struct stat st;
    if (fstat(dfd, &st) != 0 || !S_ISDIR(st.st_mode))
        fail("step %ld: the removed directory's fd is not a directory", k);
    if (st.st_nlink != 0)
        fail("step %ld: the removed directory has %ld links", k, (long)st.st_nlink);
    int again = dup(dfd);
    DIR *d = fdopendir(again);
    if (!d)
        fail("step %ld: fdopendir: %s", k, strerror(errno));
    rewinddir(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            fail("step %ld: the removed directory lists %s", k, de->d_name);
    closedir(d);
    int fd = openat(dfd, "new", O_WRONLY | O_CREAT, 0600);
    if (fd >= 0 || errno != ENOENT)
        fail("step %ld: creating a file in the removed directory: %s", k,
             fd >= 0 ? "succeeded" : strerror(errno));
}

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: " PROG " " USAGE);
    const char *dir = argv[1];
    long steps = arg(argc, argv, 2, 60, 1, 999999);
    char d[PATH_MAX], f[PATH_MAX];
    snprintf(d, sizeof d, "%s/d", dir);
    snprintf(f, sizeof f, "%s/d/f", dir);
    if (mkdir(d, 0755) != 0)
        fail("mkdir %s: %s", d, strerror(errno));
    int fd = open(f, O_RDWR | O_CREAT | O_EXCL, 0640);
    if (fd < 0)
        fail("open %s: %s", f, strerror(errno));
    int dfd = open(d, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        fail("open %s: %s", d, strerror(errno));
    /* rm -rf DIR/d */
    if (unlink(f) != 0 || rmdir(d) != 0)
        fail("removing %s: %s", d, strerror(errno));
    for (long k = 1; k <= steps; k++) {
        char buf[32];
        rec(buf, k);
        if (write(fd, buf, REC_LEN) != REC_LEN)
            fail("step %ld: write: %s", k, strerror(errno));
        check_file(fd, k);
        check_dir(dfd, k);
        if (access(d, F_OK) == 0)
            fail("step %ld: %s exists again", k, d);
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    printf("DONE steps=%ld bytes=%ld\n", steps, steps * REC_LEN);
    return fflush(stdout) == 0 ? 0 : 1;
}
