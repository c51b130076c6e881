/* ckpt_mqueue [STEPS=60]: a POSIX message queue (its own name, 8 messages of up to 64 bytes)
   that holds messages of several priorities across every step: per step sends two and receives
   one, checking priority order and contents; its attributes must stay, and no file appears. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mqueue.h>
#include <sys/stat.h>

#define PROG "ckpt_mqueue"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

#define MAXMSG 64
#define MSGSIZE 64

/* The model of the queue: messages sorted by priority (high first), FIFO within one. */
struct msg {
    unsigned prio;
    char text[MSGSIZE];
};
static struct msg model[MAXMSG];
static int n_model;

static void model_send(unsigned prio, const char *text)
{
    int at = n_model;
    while (at > 0 && model[at - 1].prio < prio)
        at--;
    memmove(&model[at + 1], &model[at], (size_t)(n_model - at) * sizeof(model[0]));
    model[at].prio = prio;
    snprintf(model[at].text, MSGSIZE, "%s", text);
    n_model++;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 999999);
    char name[64];
    snprintf(name, sizeof name, "/ckpt_mqueue-%d", (int)getpid());
    mq_unlink(name);
    struct mq_attr attr = {.mq_maxmsg = 8, .mq_msgsize = MSGSIZE};
    mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK, 0600, &attr);
    if (q == (mqd_t)-1)
        fail("mq_open %s: %s", name, strerror(errno));
    /* A second, read-only blocking descriptor of the same queue. */
    mqd_t r = mq_open(name, O_RDONLY);
    if (r == (mqd_t)-1)
        fail("mq_open %s O_RDONLY: %s", name, strerror(errno));
    long received = 0;
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        char text[MSGSIZE], got[MSGSIZE];
        for (int j = 0; j < 2; j++) {
            unsigned prio = (unsigned)((k * 7 + j * 3) % 5);
            snprintf(text, sizeof text, "msg %ld.%d prio %u", k, j, prio);
            if (n_model < 8) {
                if (mq_send(q, text, strlen(text) + 1, prio) != 0)
                    fail("step %ld: mq_send: %s", k, strerror(errno));
                model_send(prio, text);
            } else if (mq_send(q, text, strlen(text) + 1, prio) == 0 || errno != EAGAIN) {
                fail("step %ld: mq_send to a full queue: %s", k, strerror(errno));
            }
        }
        struct mq_attr now;
        if (mq_getattr(q, &now) != 0)
            fail("step %ld: mq_getattr: %s", k, strerror(errno));
        if (now.mq_maxmsg != 8 || now.mq_msgsize != MSGSIZE || now.mq_curmsgs != n_model ||
            !(now.mq_flags & O_NONBLOCK))
            fail("step %ld: attributes %ld/%ld/%ld/%lx, expected 8/%d/%d/nonblocking", k,
                 now.mq_maxmsg, now.mq_msgsize, now.mq_curmsgs, now.mq_flags, MSGSIZE, n_model);
        if (mq_getattr(r, &now) != 0 || (now.mq_flags & O_NONBLOCK))
            fail("step %ld: the read-only descriptor is not blocking", k);
        /* Receive the head through the read-only descriptor (the queue is never empty here). */
        unsigned prio;
        ssize_t n = mq_receive(r, got, sizeof got, &prio);
        if (n < 0)
            fail("step %ld: mq_receive: %s", k, strerror(errno));
        if (prio != model[0].prio || strcmp(got, model[0].text) != 0)
            fail("step %ld: received \"%s\" prio %u, expected \"%s\" prio %u", k, got, prio,
                 model[0].text, model[0].prio);
        memmove(&model[0], &model[1], (size_t)(--n_model) * sizeof(model[0]));
        received++;
        sum = sum * 31 + prio + (unsigned long)n;
        struct stat st;
        if (stat(name, &st) == 0)
            fail("step %ld: a file %s exists", k, name);
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    mq_close(r);
    mq_close(q);
    if (mq_unlink(name) != 0)
        fail("mq_unlink: %s", strerror(errno));
    printf("DONE steps=%ld received=%ld sum=%lu\n", steps, received, sum);
    return fflush(stdout) == 0 ? 0 : 1;
}
