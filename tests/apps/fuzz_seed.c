/* fuzz_seed.c — the program whose image bench/fuzz_image.py mutates: a second thread, an input
   file read-only, an output file, /dev/null, a pipe, a timer, a seccomp filter of its own (acct:
   EPERM; the SECCOMP note); every step says so on stdout AND stderr (one
   mutated fd record sends one of them to /dev/null; the other still shows the restart is done). */
#define PROG "fuzz_seed"
#define USAGE "DIR [STEPS]"
#include "ckpt_common.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>

static volatile long ticks;

static void *spinner(void *arg)
{
    (void)arg;
    for (;;) {
        ticks++;
        usleep(2000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: " PROG " " USAGE);
    long steps = arg(argc, argv, 2, 1000000, 1, 100000000);
    char in[4096], out[4096];
    snprintf(in, sizeof(in), "%s/input", argv[1]);
    snprintf(out, sizeof(out), "%s/output", argv[1]);
    int ifd = open(in, O_RDWR | O_CREAT, 0600);
    if (ifd < 0 || write(ifd, "input\n", 6) != 6)
        fail("cannot write %s", in);
    close(ifd);
    ifd = open(in, O_RDONLY);
    int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int p[2];
    int nul = open("/dev/null", O_RDONLY); /* a device, reopened by path at restart */
    if (ifd < 0 || ofd < 0 || nul < 0 || pipe(p) != 0)
        fail("cannot open files: %s", strerror(errno));
    struct sock_filter deny_acct[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_acct, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fp = {4, deny_acct};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0)
        fail("seccomp: %s", strerror(errno));
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    signal(SIGALRM, SIG_IGN);
    struct itimerval it = {{3600, 0}, {3600, 0}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (long k = 1; k <= steps; k++) {
        step_line(k);
        fprintf(stderr, "step %ld\n", k);
        char c;
        if (write(ofd, "x", 1) != 1 || pread(ifd, &c, 1, 0) != 1 || write(p[1], "y", 1) != 1 ||
            read(p[0], &c, 1) != 1)
            fail("i/o failed at step %ld", k);
        usleep(5000);
    }
    printf("DONE steps=%ld\n", steps);
    return 0;
}
