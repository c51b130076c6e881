/* coord_client.c — the manager's side of the coordinator protocol (docs/PROTOCOL.md): hello,
 * requests, and the barriers between the phases of a job-wide checkpoint. Runs on the manager
 * thread (lower half, ordinary libc). */
#include "coord_client.h"
#include "tree.h"

#include "ckpt.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 65536
#define HELLO_TIMEOUT_MS 10000
#define PHASE_TIMEOUT_MS (3600 * 1000) /* the coordinator times phases out; we wait for it */
#define READY_TIMEOUT_MS (60 * 1000)   /* a checkpoint asked for before the program runs */
/* The coordinator opens the restore barrier by its own deadline (its phase timeout); this bound
 * is for a coordinator that never answers. */
#define GO_TIMEOUT_S (15 * 60)

struct conn {
    int fd;
    char buf[LINE_MAX_BYTES];
    size_t len;
};

static struct conn conn = {-1, {0}, 0};
static int serve_wake_fd = -1;      /* coord_serve's: the requests the checkpoint signal made */
static volatile int32_t restore_go; /* futex: the coordinator's go after a restart, or it is gone */
static int restore_said;            /* this restarted process said "restored" */

static void open_restore_gate(void)
{
    __atomic_store_n(&restore_go, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &restore_go, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

int coord_tree_child;

/* Write s as a JSON string (quotes included) into out. */
static void json_string(char *out, size_t outlen, const char *s)
{
    size_t k = 0;
    if (outlen < 3)
        return;
    out[k++] = '"';
    for (; *s && k + 8 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            k += (size_t)snprintf(out + k, outlen - k, "\\%c", c);
        else if (c < 0x20)
            k += (size_t)snprintf(out + k, outlen - k, "\\u%04x", c);
        else
            out[k++] = (char)c;
    }
    out[k++] = '"';
    out[k] = '\0';
}

__attribute__((format(printf, 2, 3))) static int send_line(int fd, const char *fmt, ...)
{
    char line[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(line) - 1)
        return -1;
    line[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = send(fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        off += (int)w;
    }
    return 0;
}

/* Next line from the coordinator: 1 with it in line, 0 on timeout, -1 when the connection ended. */
static int recv_line(struct conn *c, char *line, size_t linelen, int timeout_ms)
{
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            if (n >= linelen)
                n = linelen - 1;
            memcpy(line, c->buf, n);
            line[n] = '\0';
            c->len -= (size_t)(nl + 1 - c->buf);
            memmove(c->buf, nl + 1, c->len);
            return 1;
        }
        if (c->len == sizeof(c->buf))
            return -1; /* a line longer than the protocol allows */
        struct pollfd p = {c->fd, POLLIN, 0};
        int r = poll(&p, 1, timeout_ms);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (n <= 0)
            return -1;
        c->len += (size_t)n;
    }
}

/* The value of "key" in a flat JSON object: a string (without quotes) or a literal. */
static int json_field(const char *line, const char *key, char *out, size_t outlen)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    const char *p = strstr(line, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p++ != ':')
        return -1;
    while (*p == ' ')
        p++;
    size_t k = 0;
    if (*p == '"') {
        for (p++; *p && *p != '"' && k + 1 < outlen; p++)
            out[k++] = *p == '\\' && p[1] ? *++p : *p;
    } else {
        for (; *p && *p != ',' && *p != '}' && *p != ' ' && k + 1 < outlen; p++)
            out[k++] = *p;
    }
    out[k] = '\0';
    return 0;
}

static int is_type(const char *line, const char *type)
{
    char t[64];
    return json_field(line, "type", t, sizeof(t)) == 0 && strcmp(t, type) == 0;
}

/* A TCP connection to host:port; -1 with a message in err. */
static int tcp_connect(const char *host, const char *port, char *err, size_t errlen)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "coordinator not found at %s:%s (%s)", host, port, gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errlen, "coordinator not found at %s:%s", host, port);
    return fd;
}

/* Runs on a program thread's stack (a crossing switches fs, not stacks), which may be small: the
 * buffers are static, under a lock of their own (the manager's connection has its own). */
int coord_status(int *num_peers, int *running)
{
    static struct conn c;
    static char line[LINE_MAX_BYTES], tok[600];
    static volatile int32_t busy;
    char err[256], v[32];
    if (ckpt_cfg.coord_fd < 0 || !ckpt_cfg.coord_host[0])
        return -1;
    int fd = tcp_connect(ckpt_cfg.coord_host, ckpt_cfg.coord_port, err, sizeof(err));
    if (fd < 0)
        return -1;
    while (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    c.fd = fd;
    c.len = 0;
    json_string(tok, sizeof(tok), ckpt_cfg.coord_token);
    int n = snprintf(line, sizeof(line),
                     "{\"type\":\"command\",\"verb\":\"status\",\"token\":%s}\n", tok);
    int ok = send(fd, line, (size_t)n, MSG_NOSIGNAL) == n &&
             recv_line(&c, line, sizeof(line), HELLO_TIMEOUT_MS) == 1 &&
             json_field(line, "num_peers", v, sizeof(v)) == 0;
    if (ok) {
        *num_peers = atoi(v);
        *running = json_field(line, "running", v, sizeof(v)) == 0 && strcmp(v, "yes") == 0;
    }
    __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
    close(fd);
    return ok ? 0 : -1;
}

int coord_launcher_rank(long *rank, long *size)
{
    static const char *const names[][2] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI_RANK", "PMI_SIZE"},
        {"PMIX_RANK", "PMIX_SIZE"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *r_text = getenv(names[i][0]), *n_text = getenv(names[i][1]);
        if (!r_text || !n_text)
            continue;
        char *end_r, *end_s;
        long r = strtol(r_text, &end_r, 10), n = strtol(n_text, &end_s, 10);
        if (*r_text && *n_text && !*end_r && !*end_s && n >= 1 && n <= (1 << 20) && r >= 0 &&
            r < n) {
            *rank = r;
            *size = n;
            return 0;
        }
    }
    return -1;
}

/* ",\"mpi_rank\":R,\"mpi_size\":S" for the hello, so the coordinator starts no checkpoint while a
 * rank has yet to join; "" outside MPI. */
static void mpi_fields(char *out, size_t outlen)
{
    long r, n;
    out[0] = '\0';
    if (coord_launcher_rank(&r, &n) == 0)
        snprintf(out, outlen, ",\"mpi_rank\":%ld,\"mpi_size\":%ld", r, n);
}

void coord_record_launcher_rank(const char *proc_dir)
{
    long r, n;
    char path[PATH_MAX + 16];
    if (tree_forked || coord_launcher_rank(&r, &n) != 0 ||
        snprintf(path, sizeof(path), "%s/mpi_rank", proc_dir) >= (int)sizeof(path) ||
        access(path, F_OK) == 0)
        return;
    FILE *f = fopen(path, "wxe"); /* the shim's MPI_Init may have written it: that one stays */
    if (!f)
        return;
    fprintf(f, "%ld %ld\n", r, n);
    fclose(f);
}

int coord_connect(const char *host, const char *port, const char *token, int restarted, int vpid,
                  char *err, size_t errlen)
{
    int fd = tcp_connect(host, port, err, errlen);
    if (fd < 0)
        return -1;
    char prog[PATH_MAX + 16], dir[2 * PATH_MAX], tok[1024], hostname[256] = "", hostq[600];
    const char *base = strrchr(ckpt_cfg.program, '/');
    json_string(prog, sizeof(prog), base ? base + 1 : ckpt_cfg.program);
    json_string(dir, sizeof(dir), ckpt_cfg.proc_dir);
    json_string(tok, sizeof(tok), token ? token : "");
    gethostname(hostname, sizeof(hostname) - 1);
    json_string(hostq, sizeof(hostq), hostname);
    char mpi[80], gen[40] = "";
    mpi_fields(mpi, sizeof(mpi));
    if (restarted) /* the generation it restarted from: the job's count goes on from it */
        snprintf(gen, sizeof(gen), ",\"image_gen\":%d", restarted);
    conn.fd = fd;
    conn.len = 0;
    char line[LINE_MAX_BYTES];
    if (send_line(fd,
                  "{\"type\":\"hello\",\"role\":\"worker\",\"token\":%s,\"pid\":%d,\"vpid\":%d,"
                  "\"program\":%s,\"host\":%s,\"proc_dir\":%s,\"restarted\":%s%s%s%s}",
                  tok, getpid(), vpid, prog, hostq, dir, restarted ? "true" : "false", gen,
                  coord_tree_child ? ",\"tree_child\":true" : "", mpi) != 0 ||
        recv_line(&conn, line, sizeof(line), HELLO_TIMEOUT_MS) != 1) {
        snprintf(err, errlen, "coordinator at %s:%s did not answer", host, port);
        close(fd);
        return -1;
    }
    if (!is_type(line, "welcome")) {
        char reason[512] = "no reason given";
        json_field(line, "reason", reason, sizeof(reason));
        snprintf(err, errlen, "coordinator at %s:%s refused this process: %s", host, port, reason);
        close(fd);
        return -1;
    }
    return fd;
}

/* Wait for the coordinator's go for the next phase: 0 for `expect`, -1 for abort or a lost
 * coordinator. kill is obeyed at once. */
static int wait_for(const char *expect)
{
    char line[LINE_MAX_BYTES];
    for (;;) {
        int r = recv_line(&conn, line, sizeof(line), PHASE_TIMEOUT_MS);
        if (r <= 0) {
            fprintf(stderr, "crac: error: lost the coordinator during a checkpoint\n");
            return -1;
        }
        if (is_type(line, expect))
            return 0;
        if (is_type(line, "kill"))
            kill(getpid(), SIGKILL);
        if (is_type(line, "abort")) {
            char reason[512] = "";
            json_field(line, "reason", reason, sizeof(reason));
            fprintf(stderr, "crac: checkpoint called off by the coordinator%s%s\n",
                    reason[0] ? ": " : "", reason);
            return -1;
        }
    }
}

static int on_suspended(void *ctx)
{
    (void)ctx;
    if (send_line(conn.fd, "{\"type\":\"suspended\"}") != 0)
        return -1;
    return wait_for("write");
}

static int on_written(void *ctx, int generation)
{
    (void)ctx;
    if (send_line(conn.fd, "{\"type\":\"written\",\"gen\":%d}", generation) != 0)
        return -1;
    return wait_for("resume");
}

/* Every process's image is on disk before any publishes (docs/PROTOCOL.md). */
static int on_durable(void *ctx, int generation)
{
    (void)ctx;
    if (send_line(conn.fd, "{\"type\":\"durable\",\"gen\":%d}", generation) != 0)
        return -1;
    if (wait_for("publish") != 0)
        return -1;
    /* Before anything of this generation can be seen: a checkpoint signal that came until now
     * was for it, one that comes from now on asks for the next (docs/PROTOCOL.md). */
    if (serve_wake_fd >= 0)
        ckpt_drop_requests_during(serve_wake_fd);
    return 0;
}

/* The checkpoint being taken ends the process (its `checkpoint` said exit_after). */
static int checkpoint_exits;

/* A process that exits after the checkpoint waits for the job's restart script first (the
 * coordinator's `complete`, or its end): whoever started the job finds the script written once
 * the process has ended. Bounded: a coordinator that never says it only delays the exit. */
#define COMPLETE_WAIT_MS (30 * 1000)

static void await_complete(void)
{
    char line[LINE_MAX_BYTES];
    int r;
    while ((r = recv_line(&conn, line, sizeof(line), COMPLETE_WAIT_MS)) > 0 &&
           !is_type(line, "complete"))
        ;
}

static void on_published(void *ctx, int generation, const char *dir)
{
    (void)ctx;
    char d[2 * PATH_MAX];
    json_string(d, sizeof(d), dir);
    if (generation <= 0) {
        send_line(conn.fd, "{\"type\":\"failed\",\"reason\":\"cannot publish the image\"}");
        return;
    }
    if (send_line(conn.fd, "{\"type\":\"published\",\"gen\":%d,\"dir\":%s}", generation, d) == 0 &&
        checkpoint_exits)
        await_complete();
}

static void on_failed(void *ctx, const char *why)
{
    (void)ctx;
    char w[1024];
    json_string(w, sizeof(w), why);
    send_line(conn.fd, "{\"type\":\"failed\",\"reason\":%s}", w);
}

static const struct ckpt_barrier barrier = {.suspended = on_suspended,
                                            .written = on_written,
                                            .durable = on_durable,
                                            .published = on_published,
                                            .failed = on_failed};

void coord_serve(int fd, int wake_fd)
{
    char line[LINE_MAX_BYTES];
    conn.fd = fd;
    serve_wake_fd = wake_fd;
    for (;;) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
        if (conn.len == 0 && poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents & POLLIN) {
            uint64_t n;
            /* Launched with --exit-after-checkpoint: the job ends after the one it asks for. */
            if (read(wake_fd, &n, sizeof(n)) > 0 &&
                send_line(fd, ckpt_cfg.exit_after
                                  ? "{\"type\":\"request\",\"verb\":\"checkpoint\","
                                    "\"exit_after\":true}"
                                  : "{\"type\":\"request\",\"verb\":\"checkpoint\"}") == 0)
                ckpt_request_sent();
        }
        if (conn.len == 0 && !(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        int r = recv_line(&conn, line, sizeof(line), 0);
        if (r < 0)
            break;
        if (r == 0)
            continue;
        if (is_type(line, "checkpoint")) {
            char ex[16] = "false";
            json_field(line, "exit_after", ex, sizeof(ex));
            /* A request that comes before the program can be checkpointed (start-up, a restart
             * still bringing threads back) waits for it, as the checkpoint signal does. */
            checkpoint_exits = strcmp(ex, "true") == 0;
            if (!ckpt_wait_ready(READY_TIMEOUT_MS))
                on_failed(NULL, "the program has not started yet");
            else
                ckpt_run(checkpoint_exits, &barrier);
            checkpoint_exits = 0;
        } else if (is_type(line, "restore_failed") && restore_said &&
                   !__atomic_load_n(&restore_go, __ATOMIC_ACQUIRE)) {
            /* Another process of this restart could not be restarted: none of the program has
             * run here yet, and it must not run without that process. */
            char why[1024] = "";
            json_field(line, "error", why, sizeof(why));
            fprintf(stderr, "crac: error: the restart stops: %s\n", why);
            _exit(2);
        } else if (is_type(line, "go") || is_type(line, "error")) {
            /* error: a coordinator of a crac without the restore barrier did not know
             * "restored" (the only message a worker sends outside a checkpoint that it answers) */
            if (is_type(line, "go") && restore_said)
                tree_restart_job_pids(line); /* before any program thread runs */
            open_restore_gate();
        } else if (is_type(line, "kill")) {
            kill(getpid(), SIGKILL);
        } else if (is_type(line, "abort")) {
            send_line(fd, "{\"type\":\"aborted\"}");
        }
    }
    fprintf(stderr, "crac: warning: the coordinator went away; checkpoints of this process now "
                    "only through its own signal\n");
    close(fd);
    conn.fd = -1;
    ckpt_cfg.coord_fd = -1;
    open_restore_gate();
}

void coord_restart_failed(const char *host, const char *port, const char *token, const char *why)
{
    if (restore_said)
        return;
    int fd = ckpt_cfg.coord_fd;
    char err[256], what[2048];
    if (fd < 0 && host)
        fd = coord_connect(host, port, token, 1, 0 /* no vpid needed */, err, sizeof(err));
    if (fd < 0)
        return;
    json_string(what, sizeof(what), why);
    send_line(fd, "{\"type\":\"restore_failed\",\"error\":%s}", what);
}

void coord_restored(void)
{
    restore_said = 1;
    if (ckpt_cfg.coord_fd < 0 || send_line(ckpt_cfg.coord_fd, "{\"type\":\"restored\"}") != 0)
        return;
    struct timespec step = {1, 0};
    for (int waited = 0; !__atomic_load_n(&restore_go, __ATOMIC_ACQUIRE); waited++) {
        if (waited == GO_TIMEOUT_S) {
            fprintf(stderr, "crac: warning: the coordinator gave no go after the restart; the "
                            "program goes on\n");
            return;
        }
        syscall(SYS_futex, &restore_go, FUTEX_WAIT_PRIVATE, 0, &step, NULL, 0);
    }
}
