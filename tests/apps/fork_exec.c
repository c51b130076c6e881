/* fork_exec: forks, the child execvp()s /bin/echo, the parent waitpid()s and checks the child exited
   with status 0; a second child exits with 42 to check a non-zero status; exits non-zero on mismatch. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_child(char *const argv[], int expect)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork_exec: fork");
        return 0;
    }
    if (pid == 0) {
        if (argv) {
            execvp(argv[0], argv);
            perror("fork_exec: execvp");
            _exit(127);
        }
        _exit(expect);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) {
        perror("fork_exec: waitpid");
        return 0;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != expect) {
        fprintf(stderr, "fork_exec: child status 0x%x, expected exit %d\n", st, expect);
        return 0;
    }
    return 1;
}

int main(void)
{
    char *argv[] = {"/bin/echo", "hello", "from", "child", NULL};
    if (!run_child(argv, 0))
        return 1;
    if (!run_child(NULL, 42))
        return 1;
    printf("fork_exec ok\n");
    return 0;
}
