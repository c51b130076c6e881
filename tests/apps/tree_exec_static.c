/* tree_exec_static PIDFILE DONEFILE: built with `gcc -static` (tests/test_process_exec.py), so crac
   cannot run it and it runs outside crac. Checks SIGUSR2 is not blocked, takes it with a handler
   of its own, writes its pid to PIDFILE and waits for the signal; then writes "got USR2" to
   DONEFILE and exits 0 (3 after 120 s without it). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void on_usr2(int sig)
{
    (void)sig;
    got = 1;
}

static int write_file(const char *path, const char *text)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) != 0)
        return -1;
    return rename(tmp, path);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: tree_exec_static PIDFILE DONEFILE\n");
        return 2;
    }
    sigset_t m;
    sigprocmask(SIG_BLOCK, NULL, &m);
    if (sigismember(&m, SIGUSR2)) {
        fprintf(stderr, "tree_exec_static: FAIL: SIGUSR2 is blocked\n");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr2;
    if (sigaction(SIGUSR2, &sa, NULL) != 0)
        return 1;
    char pid[32];
    snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (write_file(argv[1], pid) != 0)
        return 1;
    for (int i = 0; i < 120 * 20 && !got; i++)
        usleep(50000);
    if (!got)
        return 3;
    return write_file(argv[2], "got USR2\n") == 0 ? 0 : 1;
}
