/* self_exe [STEPS]: launched through a symlink in another directory, finds its library next to
   its real file (RUNPATH $ORIGIN); each step checks that readlink, realpath, open and fopen of
   /proc/self/exe name the real program (realpath(argv[0])), and every 10th step re-executes
   itself through /proc/self/exe and checks the child's answer. `self_exe --child`: that child. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define PROG "self_exe"
#define USAGE "[STEPS] | --child"
#include "../ckpt_common.h"

long self_exe_lib_square(long k);

#define CHILD_OK 42

static void check_exe(const char *argv0, long k)
{
    char real[PATH_MAX], link[PATH_MAX], resolved[PATH_MAX];
    if (!realpath(argv0, real))
        fail("realpath(%s): %s", argv0, strerror(errno));
    ssize_t n = readlink("/proc/self/exe", link, sizeof(link) - 1);
    if (n < 0)
        fail("readlink(/proc/self/exe): %s", strerror(errno));
    link[n] = '\0';
    if (strcmp(link, real) != 0)
        fail("step %ld: readlink(/proc/self/exe) = %s, realpath(argv[0]) = %s", k, link, real);
    if (!realpath("/proc/self/exe", resolved) || strcmp(resolved, real) != 0)
        fail("step %ld: realpath(/proc/self/exe) = %s, not %s", k, resolved, real);
    /* Opened, it is the real file too (open and fopen). */
    struct stat want, got;
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || stat(real, &want) != 0 || fstat(fd, &got) != 0 || got.st_ino != want.st_ino ||
        got.st_dev != want.st_dev)
        fail("step %ld: open(/proc/self/exe) is not %s", k, real);
    close(fd);
    char self[32];
    snprintf(self, sizeof(self), "/proc/%d/exe", (int)getpid());
    FILE *f = fopen(self, "r");
    if (!f || fstat(fileno(f), &got) != 0 || got.st_ino != want.st_ino)
        fail("step %ld: fopen(%s) is not %s", k, self, real);
    fclose(f);
    /* A short buffer gets the first bytes, without a NUL, as readlink gives them. */
    char shortbuf[4];
    if (readlink("/proc/self/exe", shortbuf, sizeof(shortbuf)) != (ssize_t)sizeof(shortbuf) ||
        memcmp(shortbuf, real, sizeof(shortbuf)) != 0)
        fail("step %ld: readlink into 4 bytes", k);
}

static void reexec(const char *argv0, long k)
{
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        char *args[] = {(char *)argv0, "--child", NULL};
        execv("/proc/self/exe", args);
        _exit(100 + errno);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            fail("waitpid: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK)
        fail("step %ld: the program re-executed through /proc/self/exe ended with status %#x", k,
             status);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        check_exe(argv[0], 0);
        return self_exe_lib_square(7) == 49 ? CHILD_OK : 1;
    }
    long steps = arg(argc, argv, 1, 40, 1, 100000);
    long sum = 0;
    for (long k = 1; k <= steps; k++) {
        check_exe(argv[0], k);
        sum += self_exe_lib_square(k);
        if (k % 10 == 0)
            reexec(argv[0], k);
        step_line(k);
        struct timespec req = {0, 50 * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0)
            req = rem;
    }
    printf("DONE sum=%ld steps=%ld\n", sum, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
