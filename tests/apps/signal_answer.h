/* signal_answer.h — the parent's side of share_signal.c and share_siblings.c: a process answers
   each signal it took through a pipe; the parent waits for answer K, and every 500 ms without
   one writes a byte into the idle pipe the answering process reads between signals (a signal
   that came just before that read() would otherwise leave it waiting). Include after
   ckpt_common.h. */
#ifndef SIGNAL_ANSWER_H
#define SIGNAL_ANSWER_H

#include <poll.h>

/* Two minutes of wake bytes without an answer: the signal was lost, not late (say so and fail,
   rather than leave the test to its harness's timeout). */
#define AWAIT_WAKES_MAX 240

/* The signal lines of /proc/PID/status and of each of its threads' (queued, blocked, caught),
   on stderr: where a lost signal stopped. */
static inline void show_signal_state(pid_t pid)
{
    char cmd[160], line[256];
    snprintf(cmd, sizeof(cmd),
             "for t in /proc/%d/task/*; do echo \"$t\"; grep -E '^(State|Sig|Shd)' \"$t/status\"; "
             "done",
             (int)pid);
    FILE *out = popen(cmd, "r");
    while (out && fgets(line, sizeof(line), out))
        fprintf(stderr, "  %s", line);
    if (out)
        pclose(out);
}

static inline void await_answer(int answer_fd, int idle_fd, long k, pid_t from)
{
    for (int wakes = 0;; wakes++) {
        if (wakes == AWAIT_WAKES_MAX) {
            fprintf(stderr, "process %d, which did not answer:\n", (int)from);
            show_signal_state(from);
            fail("no answer %ld after %d wake bytes: the signal was lost", k, wakes);
        }
        struct pollfd p = {answer_fd, POLLIN, 0};
        int n = poll(&p, 1, 500);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail("poll: %s", strerror(errno));
        if (n == 1)
            break;
        if (write(idle_fd, "w", 1) != 1)
            fail("write: %s", strerror(errno));
    }
    long got = -1;
    ssize_t r = read(answer_fd, &got, sizeof(got));
    if (r != (ssize_t)sizeof(got))
        fail("answer %ld: %s", k, r < 0 ? strerror(errno) : "end-of-file");
    if (got != k)
        fail("answer %ld says %ld", k, got);
}

#endif
