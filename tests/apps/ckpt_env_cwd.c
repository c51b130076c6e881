/* ckpt_env_cwd DIR [STEPS=100]: sets, changes and unsets environment variables, chdir()s to DIR and
   checks every step that environ, getenv(), getcwd() and relative paths are exactly as it left them. */
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

#define PROG "ckpt_env_cwd"
#define USAGE "DIR [STEPS]"
#include "ckpt_common.h"
#define MAXENV 4096

extern char **environ;

/* The program's own record of what its environment must be: a private copy of every string. */
static char *expected[MAXENV];
static int nexpected;

static void snapshot(void)
{
    for (int i = 0; i < nexpected; i++)
        free(expected[i]);
    nexpected = 0;
    for (char **e = environ; *e; e++) {
        if (nexpected == MAXENV)
            fail("too many environment variables");
        expected[nexpected++] = strdup(*e);
    }
}

static void check_env(long k)
{
    int n = 0;
    for (char **e = environ; *e; e++, n++) {
        if (n >= nexpected)
            fail("step %ld: an extra environment entry appeared: %.80s", k, *e);
        if (strcmp(*e, expected[n]) != 0)
            fail("step %ld: environment entry %d is \"%.80s\", expected \"%.80s\"", k, n, *e,
                 expected[n]);
    }
    if (n != nexpected)
        fail("step %ld: %d environment entries, expected %d", k, n, nexpected);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " DIR [STEPS]\n");
        return 2;
    }
    long steps = arg(argc, argv, 2, 100, 1, 1000000);
    char dir[PATH_MAX];
    if (!realpath(argv[1], dir))
        fail("realpath %s: %s", argv[1], strerror(errno));
    struct stat dir_st;
    if (stat(dir, &dir_st) != 0 || !S_ISDIR(dir_st.st_mode))
        fail("%s is not a directory", dir);

    static char long_value[1500];
    for (size_t i = 0; i < sizeof long_value - 1; i++)
        long_value[i] = (char)('a' + i % 26);
    static char put_string[] = "CKPT_PUTENV=from putenv";
    if (setenv("CKPT_ALPHA", "alpha", 1) || setenv("CKPT_SPACES", "value with spaces = and =", 1) ||
        setenv("CKPT_LONG", long_value, 1) || setenv("CKPT_EMPTY", "", 1) ||
        setenv("CKPT_GONE", "to be removed", 1) || putenv(put_string))
        fail("setenv: %s", strerror(errno));
    if (unsetenv("CKPT_GONE") || unsetenv("CKPT_NEVER_SET"))
        fail("unsetenv: %s", strerror(errno));
    if (chdir(dir) != 0)
        fail("chdir %s: %s", dir, strerror(errno));
    int fd = open("marker.txt", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, "marker\n", 7) != 7 || close(fd) != 0)
        fail("cannot create marker.txt in %s", dir);

    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        char val[32];
        snprintf(val, sizeof val, "%ld", k);
        if (setenv("CKPT_STEP", val, 1) != 0)
            fail("setenv: %s", strerror(errno));
        if (k % 2 == 0) {
            if (setenv("CKPT_ODD", "odd", 1) != 0)
                fail("setenv: %s", strerror(errno));
        } else if (unsetenv("CKPT_ODD") != 0) {
            fail("unsetenv: %s", strerror(errno));
        }
        snapshot();
        check_env(k);

        for (int s = 0; s < 2; s++) {
            /* s == 0: right after setting; s == 1: after the sleep, where a checkpoint may fall. */
            const char *v;
            if (!(v = getenv("CKPT_STEP")) || strcmp(v, val) != 0)
                fail("step %ld: CKPT_STEP=%s", k, v ? v : "(unset)");
            if (!(v = getenv("CKPT_ALPHA")) || strcmp(v, "alpha") != 0)
                fail("step %ld: CKPT_ALPHA=%s", k, v ? v : "(unset)");
            if (!(v = getenv("CKPT_SPACES")) || strcmp(v, "value with spaces = and =") != 0)
                fail("step %ld: CKPT_SPACES=%s", k, v ? v : "(unset)");
            if (!(v = getenv("CKPT_LONG")) || strcmp(v, long_value) != 0)
                fail("step %ld: CKPT_LONG changed", k);
            if (!(v = getenv("CKPT_EMPTY")) || *v)
                fail("step %ld: CKPT_EMPTY=%s", k, v ? v : "(unset)");
            if (!(v = getenv("CKPT_PUTENV")) || strcmp(v, "from putenv") != 0)
                fail("step %ld: CKPT_PUTENV=%s", k, v ? v : "(unset)");
            if (getenv("CKPT_GONE") || getenv("CKPT_NEVER_SET"))
                fail("step %ld: an unset variable is back", k);
            if ((getenv("CKPT_ODD") != NULL) != (k % 2 == 0))
                fail("step %ld: CKPT_ODD is %s", k, getenv("CKPT_ODD") ? "set" : "unset");
            check_env(k);

            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd))
                fail("step %ld: getcwd: %s", k, strerror(errno));
            if (strcmp(cwd, dir) != 0)
                fail("step %ld: getcwd() = %s, expected %s", k, cwd, dir);
            struct stat st;
            if (stat(".", &st) != 0 || st.st_ino != dir_st.st_ino || st.st_dev != dir_st.st_dev)
                fail("step %ld: \".\" is not %s", k, dir);
            char buf[16] = {0};
            fd = open("marker.txt", O_RDONLY);
            if (fd < 0 || read(fd, buf, sizeof buf - 1) != 7 || strcmp(buf, "marker\n") != 0)
                fail("step %ld: cannot read marker.txt relative to the working directory", k);
            close(fd);
            if (s == 0) {
                step_line(k);
                struct timespec req = {0, 20 * 1000000L};
                nanosleep(&req, NULL);
            }
        }
        for (const char *c = val; *c; c++) {
            h ^= (unsigned char)*c;
            h *= 0x100000001b3ULL;
        }
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
