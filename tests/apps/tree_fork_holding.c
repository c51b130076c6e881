/* tree_fork_holding GOFILE: inside a dmtcp_disable_ckpt() section, waits for GOFILE (the test makes
   it once crac says a checkpoint waits for the section, i.e. holds the threads), then forks a
   child that execs /bin/true, leaves the section and waits for the child: the child must not
   inherit its parent's checkpoint state. Prints `in section`, then `DONE`. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "tree_fork_holding"
#define USAGE "GOFILE"
#include "ckpt_common.h"

int dmtcp_disable_ckpt(void) __attribute__((weak));
int dmtcp_enable_ckpt(void) __attribute__((weak));

int main(int argc, char **argv)
{
    if (argc != 2)
        fail("usage: " PROG " " USAGE);
    if (!dmtcp_disable_ckpt || !dmtcp_enable_ckpt)
        fail("not under crac (no dmtcp_disable_ckpt)");
    if (dmtcp_disable_ckpt() != 1)
        fail("dmtcp_disable_ckpt");
    printf("in section\n");
    fflush(stdout);
    while (access(argv[1], F_OK) != 0) {
        struct timespec t = {0, 10 * 1000000L};
        nanosleep(&t, NULL);
    }
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    if (dmtcp_enable_ckpt() != 1)
        fail("dmtcp_enable_ckpt");
    int st;
    pid_t got;
    while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (got != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("child %d: waitpid %d, status %#x", (int)pid, (int)got, st);
    printf("DONE\n");
    return fflush(stdout) == 0 ? 0 : 1;
}
