/* ckpt_sockets MODE DIR [STEPS=60]: sockets within one process, each holding bytes in flight
   between steps. MODE unix: a socketpair stream and a seqpacket pair (each step's message read one
   step later), a datagram socketpair ping-pong with a second thread (a reply always queued), a
   listener on a path and one on an abstract name (a connection accepted each step, a long-lived
   accepted one, one connection waiting unaccepted until the end), two datagram sockets bound to
   paths (one datagram from the first to the second always queued; its sender is checked). MODE tcp: a loopback listener
   (same port every step, a new connection accepted each step) and a connected pair with bytes
   in flight both ways, TCP_NODELAY, SO_RCVBUF and non-blocking mode kept. MODE outside (DIR: a
   port on 127.0.0.1 where a line echo server runs, outside crac): "ping K" answered "pong K";
   a send failing with EPIPE or a receive with ECONNRESET (a dropped connection) reconnects, with
   a line on stderr; anything else (end of file, ENOTSOCK) fails. */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#define PROG "ckpt_sockets"
#define USAGE "unix|tcp|outside DIR|PORT [STEPS]"
#include "ckpt_common.h"

/* Message K: 40 + K % 50 bytes of a pattern that depends on K and TAG. */
static size_t msg(char *buf, long k, int tag)
{
    size_t n = 40 + (size_t)(k % 50);
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('A' + (k * 7 + (long)i * 3 + tag) % 26);
    return n;
}

static void write_all(int fd, const char *b, size_t n, const char *what, long k)
{
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
            struct pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, 1000);
            continue;
        }
        if (w <= 0)
            fail("step %ld: %s: send: %s", k, what, strerror(errno));
        b += w;
        n -= (size_t)w;
    }
}

/* Exactly N bytes (a stream), or one record of N bytes (SEQ). */
static void read_exact(int fd, char *b, size_t n, int seq, const char *what, long k)
{
    struct watchdog w;
    wd_start(&w);
    while (n) {
        ssize_t r = recv(fd, b, seq ? n + 1 : n, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wd_expired(&w, 60))
                fail("step %ld: %s: nothing to read", k, what);
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, 1000);
            continue;
        }
        if (r <= 0 || (seq && (size_t)r != n))
            fail("step %ld: %s: recv %zd of %zu: %s", k, what, r, n, r < 0 ? strerror(errno) : "");
        b += r;
        n -= (size_t)r;
    }
}

static void check_msg(int fd, long k, int tag, int seq, const char *what)
{
    char want[128], got[128];
    size_t n = msg(want, k, tag);
    read_exact(fd, got, n, seq, what, k);
    if (memcmp(want, got, n) != 0)
        fail("step %ld: %s: message %ld differs", k, what, k);
}

/* The datagram ping-pong's other side: each "ping K" answered with "pong K". */
static int dg_thread_fd;
static void *ponger(void *arg)
{
    (void)arg;
    for (;;) {
        char b[64];
        ssize_t n = recv(dg_thread_fd, b, sizeof b - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail("ponger: recv: %s", n < 0 ? strerror(errno) : "EOF");
        b[n] = '\0';
        long k;
        if (strcmp(b, "quit") == 0)
            return NULL;
        if (sscanf(b, "ping %ld", &k) != 1)
            fail("ponger: got \"%s\"", b);
        int len = snprintf(b, sizeof b, "pong %ld", k);
        if (send(dg_thread_fd, b, (size_t)len, 0) != len)
            fail("ponger: send: %s", strerror(errno));
    }
}

static int listen_on(struct sockaddr *a, socklen_t len, int type)
{
    int l = socket(a->sa_family, type, 0);
    if (l < 0 || bind(l, a, len) != 0 || listen(l, 8) != 0)
        fail("listen: %s", strerror(errno));
    return l;
}

static int connect_to(struct sockaddr *a, socklen_t len, int type, long k)
{
    int c = socket(a->sa_family, type, 0);
    if (c < 0 || connect(c, a, len) != 0)
        fail("step %ld: connect: %s", k, strerror(errno));
    return c;
}

/* One connection to listener L at ADDR, accepted, a message each way, closed. */
static void one_connection(int l, struct sockaddr *a, socklen_t len, int type, long k, int tag)
{
    int c = connect_to(a, len, type, k);
    int s = accept(l, NULL, NULL);
    if (s < 0)
        fail("step %ld: accept: %s", k, strerror(errno));
    char b[128];
    size_t n = msg(b, k, tag);
    write_all(c, b, n, "new connection", k);
    check_msg(s, k, tag, 0, "new connection");
    n = msg(b, k, tag + 1);
    write_all(s, b, n, "new connection back", k);
    check_msg(c, k, tag + 1, 0, "new connection back");
    close(c);
    close(s);
}

static void run_unix(const char *dir, long steps)
{
    int st[2], sq[2], dg[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, st) != 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sq) != 0 ||
        socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) != 0)
        fail("socketpair: %s", strerror(errno));
    dg_thread_fd = dg[1];
    pthread_t t;
    if (pthread_create(&t, NULL, ponger, NULL) != 0)
        fail("pthread_create");
    struct sockaddr_un path = {.sun_family = AF_UNIX}, abs = {.sun_family = AF_UNIX};
    snprintf(path.sun_path, sizeof path.sun_path, "%s/listen.sock", dir);
    snprintf(abs.sun_path + 1, sizeof abs.sun_path - 1, "ckpt_sockets-%d", (int)getpid());
    socklen_t abs_len =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abs.sun_path + 1));
    int lp = listen_on((struct sockaddr *)&path, sizeof path, SOCK_STREAM);
    int la = listen_on((struct sockaddr *)&abs, abs_len, SOCK_STREAM);
    /* A long-lived connection through the path listener, and one left waiting on the other. */
    int lc = connect_to((struct sockaddr *)&path, sizeof path, SOCK_STREAM, 0);
    int ls = accept(lp, NULL, NULL);
    int waiting = connect_to((struct sockaddr *)&abs, abs_len, SOCK_STREAM, 0);
    /* Two datagram sockets bound to paths, talking with sendto. */
    struct sockaddr_un da = {.sun_family = AF_UNIX}, db = {.sun_family = AF_UNIX};
    snprintf(da.sun_path, sizeof da.sun_path, "%s/a.dgram", dir);
    snprintf(db.sun_path, sizeof db.sun_path, "%s/b.dgram", dir);
    int nda = socket(AF_UNIX, SOCK_DGRAM, 0), ndb = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (nda < 0 || ndb < 0 || bind(nda, (struct sockaddr *)&da, sizeof da) != 0 ||
        bind(ndb, (struct sockaddr *)&db, sizeof db) != 0)
        fail("binding the datagram sockets: %s", strerror(errno));
    if (ls < 0)
        fail("setup: %s", strerror(errno));
    char b[128];
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        size_t n = msg(b, k, 0);
        write_all(st[0], b, n, "stream", k);
        n = msg(b, k, 1);
        if (send(sq[1], b, n, 0) != (ssize_t)n)
            fail("step %ld: seqpacket send: %s", k, strerror(errno));
        n = msg(b, k, 2);
        write_all(lc, b, n, "accepted", k);
        n = msg(b, k, 7);
        if (sendto(nda, b, n, 0, (struct sockaddr *)&db, sizeof db) != (ssize_t)n)
            fail("step %ld: sendto: %s", k, strerror(errno));
        if (k > 1) {
            char got[128];
            struct sockaddr_un from;
            socklen_t fl = sizeof from;
            size_t want = msg(b, k - 1, 7);
            ssize_t r = recvfrom(ndb, got, sizeof got, 0, (struct sockaddr *)&from, &fl);
            if (r != (ssize_t)want || memcmp(got, b, want) != 0)
                fail("step %ld: named datagram differs (%zd bytes)", k, r);
            if (fl <= offsetof(struct sockaddr_un, sun_path) ||
                strcmp(from.sun_path, da.sun_path) != 0)
                fail("step %ld: named datagram's sender is not %s", k, da.sun_path);
        }
        int len = snprintf(b, sizeof b, "ping %ld", k);
        if (send(dg[0], b, (size_t)len, 0) != len)
            fail("step %ld: dgram send: %s", k, strerror(errno));
        if (k > 1) {
            check_msg(st[1], k - 1, 0, 0, "stream");
            check_msg(sq[0], k - 1, 1, 1, "seqpacket");
            check_msg(ls, k - 1, 2, 0, "accepted");
            char want[64];
            snprintf(want, sizeof want, "pong %ld", k - 1);
            read_exact(dg[0], b, strlen(want), 1, "dgram", k);
            if (memcmp(b, want, strlen(want)) != 0)
                fail("step %ld: dgram reply differs", k);
        }
        one_connection(lp, (struct sockaddr *)&path, sizeof path, SOCK_STREAM, k, 3);
        sum = sum * 31 + (unsigned long)k;
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    int w = accept(la, NULL, NULL);
    if (w < 0)
        fail("accepting the waiting connection: %s", strerror(errno));
    if (send(waiting, "hello", 5, 0) != 5)
        fail("send on the waiting connection: %s", strerror(errno));
    read_exact(w, b, 5, 0, "waiting", steps);
    if (memcmp(b, "hello", 5) != 0)
        fail("the waiting connection's bytes differ");
    if (send(dg[0], "quit", 4, 0) != 4 || pthread_join(t, NULL) != 0)
        fail("stopping the ponger");
    unlink(path.sun_path);
    unlink(da.sun_path);
    unlink(db.sun_path);
    printf("DONE steps=%ld sum=%lu\n", steps, sum);
}

static int port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        fail("getsockname: %s", strerror(errno));
    return ntohs(a.sin_port);
}

static void run_tcp(long steps)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 8) != 0)
        fail("listener: %s", strerror(errno));
    a.sin_port = htons((uint16_t)port_of(l));
    int port = port_of(l);
    int c = connect_to((struct sockaddr *)&a, sizeof a, SOCK_STREAM, 0);
    int s = accept(l, NULL, NULL);
    int rcv = 65536;
    if (s < 0 || setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv) != 0 ||
        fcntl(s, F_SETFL, O_NONBLOCK) != 0)
        fail("setup: %s", strerror(errno));
    int rcv_got;
    socklen_t ol = sizeof rcv_got;
    getsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv_got, &ol);
    char b[128];
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        size_t n = msg(b, k, 4);
        write_all(c, b, n, "to server", k);
        n = msg(b, k, 5);
        write_all(s, b, n, "to client", k);
        if (k > 1) {
            check_msg(s, k - 1, 4, 0, "to server");
            check_msg(c, k - 1, 5, 0, "to client");
        }
        if (port_of(l) != port)
            fail("step %ld: the listener moved from port %d to %d", k, port, port_of(l));
        int v = 0, r = 0;
        socklen_t vl = sizeof v;
        if (getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &vl) != 0 || !v)
            fail("step %ld: TCP_NODELAY lost", k);
        vl = sizeof r;
        if (getsockopt(s, SOL_SOCKET, SO_RCVBUF, &r, &vl) != 0 || r != rcv_got)
            fail("step %ld: SO_RCVBUF %d, expected %d", k, r, rcv_got);
        if (!(fcntl(s, F_GETFL) & O_NONBLOCK) || (fcntl(c, F_GETFL) & O_NONBLOCK))
            fail("step %ld: non-blocking mode changed", k);
        one_connection(l, (struct sockaddr *)&a, sizeof a, SOCK_STREAM, k, 6);
        sum = sum * 31 + (unsigned long)k;
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    printf("DONE steps=%ld sum=%lu\n", steps, sum);
}

static int dial(int port, long k)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)port)};
    return connect_to((struct sockaddr *)&a, sizeof a, SOCK_STREAM, k);
}

static void run_outside(int port, long steps)
{
    int c = dial(port, 0);
    unsigned long sum = 0;
    for (long k = 1; k <= steps; k++) {
        char b[64], want[64], got[64];
        int len = snprintf(b, sizeof b, "ping %ld\n", k),
            wl = snprintf(want, sizeof want, "pong %ld\n", k);
        for (int attempt = 0;; attempt++) {
            ssize_t n = send(c, b, (size_t)len, MSG_NOSIGNAL), r = 0;
            int err = n == len ? 0 : errno;
            size_t have = 0;
            while (!err && have < (size_t)wl) {
                r = recv(c, got + have, (size_t)wl - have, 0);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0)
                    err = r < 0 ? errno : -1;
                else
                    have += (size_t)r;
            }
            if (!err)
                break;
            if ((err != EPIPE && err != ECONNRESET) || attempt > 0)
                fail("step %ld: the connection fails with %s, not as a dropped one", k,
                     err < 0 ? "end of file" : strerror(err));
            fprintf(stderr, PROG ": reconnected after %s\n", err == EPIPE ? "EPIPE" : "ECONNRESET");
            close(c);
            c = dial(port, k);
        }
        if (memcmp(got, want, (size_t)wl) != 0)
            fail("step %ld: reply differs", k);
        sum = sum * 31 + (unsigned long)k;
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    close(c);
    printf("DONE steps=%ld sum=%lu\n", steps, sum);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    long steps = arg(argc, argv, 3, 60, 3, 999999);
    if (strcmp(argv[1], "unix") == 0)
        run_unix(argv[2], steps);
    else if (strcmp(argv[1], "tcp") == 0)
        run_tcp(steps);
    else if (strcmp(argv[1], "outside") == 0)
        run_outside((int)arg(argc, argv, 2, 0, 1, 65535), steps);
    else
        fail("unknown mode %s", argv[1]);
    return fflush(stdout) == 0 ? 0 : 1;
}
