/* fork_section: thread B holds a dmtcp_disable_ckpt() section while the main thread forks; the
   child (where B does not exist) then asks for a checkpoint with dmtcp_checkpoint() and must get
   it. Prints `child checkpoint R` (R from dmtcp_checkpoint) and `parent: child status S`. Not
   under crac (the weak symbols are NULL) it says so and exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/types.h>

#define PROG "fork_section"
#define USAGE ""
#include "ckpt_common.h"

#define W __attribute__((weak))
int dmtcp_checkpoint(void) W;
int dmtcp_disable_ckpt(void) W;
int dmtcp_enable_ckpt(void) W;

static int in_section[2], forked[2];

static void *holder(void *arg)
{
    (void)arg;
    if (dmtcp_disable_ckpt() != 1)
        fail("dmtcp_disable_ckpt");
    if (write(in_section[1], "i", 1) != 1)
        fail("write: %s", strerror(errno));
    char b;
    while (read(forked[0], &b, 1) < 0)
        if (errno != EINTR)
            fail("read: %s", strerror(errno));
    if (dmtcp_enable_ckpt() != 1)
        fail("dmtcp_enable_ckpt");
    return NULL;
}

int main(void)
{
    if (!dmtcp_checkpoint || !dmtcp_disable_ckpt || !dmtcp_enable_ckpt) {
        printf("not under DMTCP\n");
        return 0;
    }
    if (pipe(in_section) != 0 || pipe(forked) != 0)
        fail("pipe: %s", strerror(errno));
    pthread_t b;
    if (pthread_create(&b, NULL, holder, NULL) != 0)
        fail("pthread_create");
    char c;
    while (read(in_section[0], &c, 1) < 0)
        if (errno != EINTR)
            fail("read: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Only this thread, in no section: nothing may hold the checkpoint back. */
        int r = dmtcp_checkpoint();
        printf("child checkpoint %d\n", r);
        fflush(stdout);
        _exit(r == 1 ? 0 : 1);
    }
    if (write(forked[1], "f", 1) != 1)
        fail("write: %s", strerror(errno));
    if (pthread_join(b, NULL) != 0)
        fail("pthread_join");
    int status;
    if (waitpid(pid, &status, 0) != pid)
        fail("waitpid: %s", strerror(errno));
    printf("parent: child status %d\n", status);
    return fflush(stdout) == 0 && status == 0 ? 0 : 1;
}
