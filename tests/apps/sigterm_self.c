/* sigterm_self: prints a line, flushes, then kills itself with SIGTERM under the default disposition;
   it must die by SIGTERM (exit status 1 with a message if it survives). */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    signal(SIGTERM, SIG_DFL);
    printf("about to die by SIGTERM\n");
    fflush(stdout);
    kill(getpid(), SIGTERM);
    sleep(5);
    fprintf(stderr, "sigterm_self: still alive after SIGTERM\n");
    return 1;
}
