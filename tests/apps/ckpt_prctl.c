/* ckpt_prctl.c — sets the prctl attributes a restart must keep (undumpable, no_new_privs, child
   subreaper, timer slack) and checks them at every step: a restart that gave them back to their
   defaults fails the program. */
#define PROG "ckpt_prctl"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

#include <sys/prctl.h>

#define SLACK 123457UL

static void check(long k)
{
    int reaper = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &reaper, 0, 0, 0);
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        fail("step %ld: the process is dumpable again", k);
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        fail("step %ld: no_new_privs was lost", k);
    if (reaper != 1)
        fail("step %ld: no longer a child subreaper", k);
    if (prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) != (int)SLACK)
        fail("step %ld: timer slack is %d", k, prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_TIMERSLACK, SLACK, 0, 0, 0) != 0)
        fail("prctl: %s", strerror(errno));
    for (long k = 1; k <= steps; k++) {
        check(k);
        step_line(k);
        usleep((useconds_t)(ms * 1000));
    }
    printf("DONE steps=%ld\n", steps);
    return 0;
}
