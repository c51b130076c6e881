/* spawn_loop N: what a process tree's program pays per child: N forks whose child exits at once,
   then N fork + exec of /bin/true, each waited for; prints `first_fork_ms X fork_ms Y
   fork_exec_ms Z` (the first fork apart: under crac it starts the tree's coordinator; Y and Z
   the medians of the rest, in milliseconds). bench/spawn.py runs it natively and under crac. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One child, waited for: it exits at once, or execs /bin/true. */
static double one(int exec_true)
{
    double t = now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        if (exec_true)
            execl("/bin/true", "true", (char *)NULL);
        _exit(exec_true ? 127 : 0);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "spawn_loop: a child failed\n");
        exit(1);
    }
    return now_ms() - t;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 50;
    if (n < 2)
        n = 2;
    double *t = calloc((size_t)n, sizeof(double));
    if (!t)
        return 1;
    double first = one(0);
    for (int i = 0; i < n; i++)
        t[i] = one(0);
    qsort(t, (size_t)n, sizeof(double), by_value);
    double fork_ms = t[n / 2];
    for (int i = 0; i < n; i++)
        t[i] = one(1);
    qsort(t, (size_t)n, sizeof(double), by_value);
    printf("first_fork_ms %.3f fork_ms %.3f fork_exec_ms %.3f\n", first, fork_ms, t[n / 2]);
    free(t);
    return 0;
}
