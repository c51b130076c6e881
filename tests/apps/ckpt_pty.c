/* ckpt_pty [STEPS=60]: a pseudo-terminal pair (posix_openpt, master and slave both held) with
   raw-ish termios and a window size set on the slave; per step a line goes master -> slave and
   one back, and the termios, window size and pairing are checked. A third line, from the slave,
   waits in the pair from the end of each step to the next one's start. A second pair keeps a
   terminal's default settings (canonical, echo): what is typed into its master at the end of a
   step, a line and the start of the next, waits for the slave's reader until the next step, and
   each echo comes back to the master once. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>

#define PROG "ckpt_pty"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static void read_line(int fd, char *buf, size_t size, const char *what, long k)
{
    size_t n = 0;
    while (n == 0 || buf[n - 1] != '\n') {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 60000) != 1)
            fail("step %ld: nothing to read on the %s", k, what);
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r <= 0)
            fail("step %ld: read on the %s: %s", k, what, r < 0 ? strerror(errno) : "EOF");
        n += (size_t)r;
        if (n >= size - 1)
            fail("step %ld: line too long on the %s", k, what);
    }
    buf[n] = '\0';
}

/* Exactly the bytes WANT from fd (a master's echo), or fail. */
static void expect_bytes(int fd, const char *want, const char *what, long k)
{
    size_t n = 0, len = strlen(want);
    char got[256];
    while (n < len) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 60000) != 1)
            fail("step %ld: no %s", k, what);
        ssize_t r = read(fd, got + n, len - n);
        if (r <= 0)
            fail("step %ld: read of the %s: %s", k, what, r < 0 ? strerror(errno) : "EOF");
        n += (size_t)r;
    }
    got[n] = '\0';
    struct pollfd p = {fd, POLLIN, 0};
    if (memcmp(got, want, len) != 0 || poll(&p, 1, 0) != 0)
        fail("step %ld: the %s is not \"%s\" alone", k, what, want);
}

/* The cooked pair at the end of step K: a line and the start of another typed into its master,
   their echo read back. */
static void type_ahead(int m2, long k)
{
    char typed[64], echo[64];
    snprintf(typed, sizeof typed, "typed %ld\npart", k);
    snprintf(echo, sizeof echo, "typed %ld\r\npart", k);
    if (write(m2, typed, strlen(typed)) != (ssize_t)strlen(typed))
        fail("step %ld: write to the second master: %s", k, strerror(errno));
    expect_bytes(m2, echo, "echo of the typed line", k);
}

/* At the start of step K + 1 the slave reads the typed line; the rest of the second is typed,
   and it reads that whole line. */
static void read_typed(int m2, int s2, long k)
{
    char want[64], got[128], rest[64], echo[64];
    snprintf(want, sizeof want, "typed %ld\n", k);
    read_line(s2, got, sizeof got, "second slave", k + 1);
    if (strcmp(got, want) != 0)
        fail("step %ld: the second slave read \"%s\", expected \"%s\"", k + 1, got, want);
    snprintf(rest, sizeof rest, "ial %ld\n", k);
    snprintf(echo, sizeof echo, "ial %ld\r\n", k);
    if (write(m2, rest, strlen(rest)) != (ssize_t)strlen(rest))
        fail("step %ld: write to the second master: %s", k + 1, strerror(errno));
    snprintf(want, sizeof want, "partial %ld\n", k);
    read_line(s2, got, sizeof got, "second slave", k + 1);
    if (strcmp(got, want) != 0)
        fail("step %ld: the second slave read \"%s\", expected \"%s\"", k + 1, got, want);
    expect_bytes(m2, echo, "echo of the rest of the line", k + 1);
}

/* The line the slave writes at the end of step K (TO_WRITE), read by the master only at the start
   of step K + 1: between steps, where checkpoints come, it waits in the pair. */
static void late(int fd, long k, int to_write)
{
    char line[64], got[128];
    snprintf(line, sizeof line, "late %ld\n", k);
    if (to_write) {
        if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
            fail("step %ld: write to the slave: %s", k, strerror(errno));
        return;
    }
    read_line(fd, got, sizeof got, "master", k + 1);
    if (strcmp(got, line) != 0)
        fail("step %ld: the master read \"%s\", expected \"%s\"", k + 1, got, line);
}

/* A new pair, both ends held. */
static void open_pair(int *m, int *s)
{
    *m = posix_openpt(O_RDWR | O_NOCTTY);
    if (*m < 0 || grantpt(*m) != 0 || unlockpt(*m) != 0)
        fail("posix_openpt: %s", strerror(errno));
    *s = open(ptsname(*m), O_RDWR | O_NOCTTY);
    if (*s < 0)
        fail("open %s: %s", ptsname(*m), strerror(errno));
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 999999);
    int m, s, m2, s2;
    open_pair(&m, &s);
    open_pair(&m2, &s2);
    struct termios want;
    if (tcgetattr(s, &want) != 0)
        fail("tcgetattr: %s", strerror(errno));
    want.c_lflag &= ~(tcflag_t)(ECHO | ICANON | ISIG);
    want.c_oflag &= ~(tcflag_t)OPOST;
    want.c_iflag &= ~(tcflag_t)ICRNL;
    want.c_cc[VMIN] = 1;
    want.c_cc[VTIME] = 0;
    want.c_cc[VINTR] = 0x01;
    cfsetspeed(&want, B9600);
    if (tcsetattr(s, TCSANOW, &want) != 0)
        fail("tcsetattr: %s", strerror(errno));
    struct winsize ws = {.ws_row = 33, .ws_col = 111};
    if (ioctl(m, TIOCSWINSZ, &ws) != 0)
        fail("TIOCSWINSZ: %s", strerror(errno));
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        char line[128], got[128];
        if (k > 1) {
            late(m, k - 1, 0);
            read_typed(m2, s2, k - 1);
        }
        snprintf(line, sizeof line, "ping %ld\n", k);
        if (write(m, line, strlen(line)) != (ssize_t)strlen(line))
            fail("step %ld: write to the master: %s", k, strerror(errno));
        read_line(s, got, sizeof got, "slave", k);
        if (strcmp(got, line) != 0)
            fail("step %ld: the slave read \"%s\", expected \"%s\"", k, got, line);
        snprintf(line, sizeof line, "pong %ld\n", k);
        if (write(s, line, strlen(line)) != (ssize_t)strlen(line))
            fail("step %ld: write to the slave: %s", k, strerror(errno));
        read_line(m, got, sizeof got, "master", k);
        if (strcmp(got, line) != 0)
            fail("step %ld: the master read \"%s\", expected \"%s\"", k, got, line);
        late(s, k, 1);
        type_ahead(m2, k);
        struct termios now;
        if (tcgetattr(s, &now) != 0)
            fail("step %ld: tcgetattr: %s", k, strerror(errno));
        if (now.c_lflag != want.c_lflag || now.c_oflag != want.c_oflag ||
            now.c_iflag != want.c_iflag || now.c_cflag != want.c_cflag ||
            memcmp(now.c_cc, want.c_cc, sizeof now.c_cc) != 0 || cfgetospeed(&now) != B9600)
            fail("step %ld: the slave's termios changed", k);
        struct winsize w;
        if (ioctl(s, TIOCGWINSZ, &w) != 0 || w.ws_row != 33 || w.ws_col != 111)
            fail("step %ld: the window size changed", k);
        unsigned n;
        struct stat st;
        if (ioctl(m, TIOCGPTN, &n) != 0 || fstat(s, &st) != 0 ||
            (unsigned)minor(st.st_rdev) + 256u * (major(st.st_rdev) - 136u) != n)
            fail("step %ld: the slave is not the master's", k);
        if (!isatty(s) || !isatty(m))
            fail("step %ld: not a terminal", k);
        sum = sum * 31 + strlen(got);
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    late(m, steps, 0);
    read_typed(m2, s2, steps);
    printf("DONE steps=%ld sum=%lu\n", steps, sum);
    return fflush(stdout) == 0 ? 0 : 1;
}
