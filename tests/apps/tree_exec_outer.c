/* tree_exec_outer STATIC PIDFILE DONEFILE: prints `O step N` every 50 ms until a file `go` appears
   beside PIDFILE, then forks and execs STATIC PIDFILE DONEFILE (a static program: outside crac),
   waits for it, checks it exited 0 and prints `O DONE`. */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tree_exec_outer STATIC PIDFILE DONEFILE\n");
        return 2;
    }
    char dir[4096], go[4200];
    snprintf(dir, sizeof(dir), "%s", argv[2]);
    snprintf(go, sizeof(go), "%s/go", dirname(dir));
    for (long k = 1; access(go, F_OK) != 0; k++) {
        printf("O step %ld\n", k);
        fflush(stdout);
        usleep(50000);
        if (k > 20 * 300)
            return 3;
    }
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        execl(argv[1], "tree_exec_static", argv[2], argv[3], (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "tree_exec_outer: FAIL: the static program ended with %#x\n", st);
        return 1;
    }
    printf("O DONE\n");
    return fflush(stdout) == 0 ? 0 : 1;
}
