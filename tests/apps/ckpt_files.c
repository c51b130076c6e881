/* ckpt_files DIR [STEPS=100] [RENAME_AT=STEPS/10]: per step appends to an O_APPEND log, reads a record
   of an input file, writes an unlinked open file and a file renamed at RENAME_AT; all checked at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_files"
#define USAGE "DIR [STEPS] [RENAME_AT]"
#include "ckpt_common.h"
#define IN_LEN 19  /* "in 000001 9e3779b9\n" */
#define LOG_LEN 11 /* "log 000001\n" */
#define TMP_LEN 11 /* "tmp 000001\n" */
#define REN_LEN 11 /* "ren 000001\n" */

static void rec(char *buf, const char *tag, long k)
{
    snprintf(buf, 48, "%s %06ld\n", tag, k % 1000000);
}

static void in_rec(char *buf, long k)
{
    snprintf(buf, 48, "in %06ld %08x\n", k % 1000000, (unsigned)((uint32_t)k * 0x9e3779b9u));
}

static void write_all(int fd, const char *buf, size_t n, const char *what)
{
    ssize_t w = write(fd, buf, n);
    if (w != (ssize_t)n)
        fail("write to %s: %s (%zd of %zu)", what, w < 0 ? strerror(errno) : "short", w, n);
}

static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail("open %s: %s", path, strerror(errno));
    struct stat st;
    fstat(fd, &st);
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        fail("malloc");
    ssize_t n = read(fd, buf, (size_t)st.st_size + 1);
    if (n != st.st_size)
        fail("read %s: %zd of %lld bytes", path, n, (long long)st.st_size);
    close(fd);
    *len = (size_t)n;
    return buf;
}

static void check_records(const char *what, const char *data, size_t len, const char *tag,
                          size_t rec_len, long steps)
{
    if (len != rec_len * (size_t)steps)
        fail("%s has %zu bytes, expected %zu (%ld records)", what, len, rec_len * (size_t)steps,
             steps);
    char buf[48];
    for (long k = 1; k <= steps; k++) {
        rec(buf, tag, k);
        if (memcmp(data + (size_t)(k - 1) * rec_len, buf, rec_len) != 0)
            fail("%s: record %ld is \"%.*s\", expected \"%.*s\"", what, k, (int)rec_len - 1,
                 data + (size_t)(k - 1) * rec_len, (int)rec_len - 1, buf);
    }
}

static void same_file(int fd, const char *path, long k, const char *what)
{
    struct stat a, b;
    if (fstat(fd, &a) != 0)
        fail("step %ld: fstat %s: %s", k, what, strerror(errno));
    if (stat(path, &b) != 0)
        fail("step %ld: stat %s: %s", k, path, strerror(errno));
    if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
        fail("step %ld: the fd of %s is no longer the file %s", k, what, path);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " DIR [STEPS] [RENAME_AT]\n");
        return 2;
    }
    const char *dir = argv[1];
    long steps = arg(argc, argv, 2, 100, 1, 999999);
    long rename_at = arg(argc, argv, 3, steps / 10, 0, steps); /* 0: never */
    char in_path[PATH_MAX], log_path[PATH_MAX], tmp_path[PATH_MAX], ren_a[PATH_MAX],
        ren_b[PATH_MAX];
    snprintf(in_path, sizeof in_path, "%s/input.txt", dir);
    snprintf(log_path, sizeof log_path, "%s/append.log", dir);
    snprintf(tmp_path, sizeof tmp_path, "%s/unlinked.tmp", dir);
    snprintf(ren_a, sizeof ren_a, "%s/renamed_a.txt", dir);
    snprintf(ren_b, sizeof ren_b, "%s/renamed_b.txt", dir);
    char buf[64];

    /* The input file, written in full and closed, then read one record per step. */
    int fd = open(in_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        fail("create %s: %s", in_path, strerror(errno));
    for (long k = 1; k <= steps; k++) {
        in_rec(buf, k);
        write_all(fd, buf, IN_LEN, in_path);
    }
    close(fd);
    int in_fd = open(in_path, O_RDONLY);
    if (in_fd < 0)
        fail("open %s: %s", in_path, strerror(errno));

    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (log_fd < 0)
        fail("open %s: %s", log_path, strerror(errno));

    unlink(tmp_path);
    int tmp_fd = open(tmp_path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (tmp_fd < 0)
        fail("open %s: %s", tmp_path, strerror(errno));
    if (fchmod(tmp_fd, 0640) != 0 || unlink(tmp_path) != 0)
        fail("fchmod/unlink %s: %s", tmp_path, strerror(errno));

    unlink(ren_b);
    int ren_fd = open(ren_a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (ren_fd < 0)
        fail("open %s: %s", ren_a, strerror(errno));

    for (long k = 1; k <= steps; k++) {
        char expect[48];
        in_rec(expect, k);
        ssize_t n = read(in_fd, buf, IN_LEN);
        if (n != IN_LEN || memcmp(buf, expect, IN_LEN) != 0)
            fail("step %ld: read %zd bytes \"%.*s\" from the input, expected \"%.*s\"", k, n,
                 n > 0 ? (int)n - 1 : 0, buf, IN_LEN - 1, expect);
        off_t off = lseek(in_fd, 0, SEEK_CUR);
        if (off != (off_t)k * IN_LEN)
            fail("step %ld: input offset %lld, expected %lld", k, (long long)off,
                 (long long)k * IN_LEN);

        rec(buf, "log", k);
        write_all(log_fd, buf, LOG_LEN, log_path);
        same_file(log_fd, log_path, k, "append.log");

        rec(buf, "tmp", k);
        write_all(tmp_fd, buf, TMP_LEN, "the unlinked file");
        if (k > 1) {
            char back[48], prev[48];
            rec(prev, "tmp", k - 1);
            if (pread(tmp_fd, back, TMP_LEN, (off_t)(k - 2) * TMP_LEN) != TMP_LEN ||
                memcmp(back, prev, TMP_LEN) != 0)
                fail("step %ld: the unlinked file does not read back record %ld", k, k - 1);
        }

        rec(buf, "ren", k);
        write_all(ren_fd, buf, REN_LEN, "the renamed file");
        if (k == rename_at && rename(ren_a, ren_b) != 0)
            fail("step %ld: rename: %s", k, strerror(errno));
        int renamed = rename_at > 0 && k >= rename_at;
        same_file(ren_fd, renamed ? ren_b : ren_a, k, "the renamed file");
        if (access(renamed ? ren_a : ren_b, F_OK) == 0)
            fail("step %ld: %s exists", k, renamed ? ren_a : ren_b);

        step_line(k);
        struct timespec req = {0, 20 * 1000000L};
        nanosleep(&req, NULL);
    }

    /* The input is at its end. */
    if (read(in_fd, buf, sizeof buf) != 0)
        fail("the input file is not at its end after %ld records", steps);
    close(in_fd);

    /* The unlinked file: still unlinked, its mode kept, every record there. */
    struct stat st;
    if (fstat(tmp_fd, &st) != 0)
        fail("fstat of the unlinked file: %s", strerror(errno));
    if (st.st_nlink != 0)
        fail("the unlinked file has %ld links", (long)st.st_nlink);
    if ((st.st_mode & 07777) != 0640)
        fail("the unlinked file has mode %o, expected 640", (unsigned)(st.st_mode & 07777));
    size_t len = (size_t)st.st_size;
    char *data = malloc(len + 1);
    if (!data || pread(tmp_fd, data, len + 1, 0) != (ssize_t)len)
        fail("cannot read back the unlinked file");
    check_records("the unlinked file", data, len, "tmp", TMP_LEN, steps);
    free(data);
    close(tmp_fd);

    close(log_fd);
    data = slurp(log_path, &len);
    check_records("append.log", data, len, "log", LOG_LEN, steps);
    free(data);

    close(ren_fd);
    const char *final_ren = rename_at > 0 ? ren_b : ren_a;
    data = slurp(final_ren, &len);
    check_records(final_ren, data, len, "ren", REN_LEN, steps);
    free(data);
    if (rename_at > 0 && access(ren_a, F_OK) == 0)
        fail("%s exists at the end", ren_a);

    printf("DONE steps=%ld bytes=%ld\n", steps, steps * (IN_LEN + LOG_LEN + TMP_LEN + REN_LEN));
    return fflush(stdout) == 0 ? 0 : 1;
}
