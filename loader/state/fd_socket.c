/* fd_socket.c — sockets: Unix, TCP and UDP sockets rebuilt at restart (bound, listening,
 * connected pairs within the process with their queued bytes); connections to outside fail. */
#include "fds.h"

#include "make_dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define QUEUE_MAX (16u << 20) /* queued bytes kept per socket, at most */
#define BACKLOG 128           /* listen() backlog at restart when the image has none */

/* What the checkpoint says a socket is (files/socket-<fd>, docs/IMAGE.md). */
enum role {
    R_PLAIN = 0,   /* not connected: made again, bound to its name if it had one */
    R_LISTEN = 1,  /* listening: bound to its name and listening again */
    R_PAIR = 2,    /* connected to another of the program's fds (`partner`) */
    R_PENDING = 3, /* connected to one of the program's listeners, not yet accepted */
    R_OUTSIDE = 4, /* connected to something outside the process: fails as a dropped connection */
};

struct sock {
    int domain, type, proto, role, partner;
    int reuse, nodelay, keepalive, rcvbuf, sndbuf;
    int reuseport, v6only; /* set before bind: they decide which names can be bound */
    int backlog;           /* a listener's, from sock_diag; 0: unknown */
    int shut;              /* a connection's ends that finished sending: PEER_DONE, SELF_DONE */
    unsigned llen, plen;
    struct sockaddr_storage local, peer;
};

/* Unix, IPv4 and IPv6 sockets; others (netlink, packet, ...) stay unsupported. */
static int sock_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)e;
    if (!S_ISSOCK(st->st_mode))
        return 0;
    int domain = fd_sock_int(fd, SOL_SOCKET, SO_DOMAIN),
        type = fd_sock_int(fd, SOL_SOCKET, SO_TYPE);
    return (domain == AF_UNIX || domain == AF_INET || domain == AF_INET6) &&
           (type == SOCK_STREAM || type == SOCK_DGRAM || type == SOCK_SEQPACKET);
}

/* ---- checkpoint ---- */

static int sock_read(int fd, struct sock *s)
{
    memset(s, 0, sizeof(*s));
    s->domain = fd_sock_int(fd, SOL_SOCKET, SO_DOMAIN);
    s->type = fd_sock_int(fd, SOL_SOCKET, SO_TYPE);
    s->proto = fd_sock_int(fd, SOL_SOCKET, SO_PROTOCOL);
    s->reuse = fd_sock_int(fd, SOL_SOCKET, SO_REUSEADDR);
    s->keepalive = fd_sock_int(fd, SOL_SOCKET, SO_KEEPALIVE);
    s->rcvbuf = fd_sock_int(fd, SOL_SOCKET, SO_RCVBUF);
    s->sndbuf = fd_sock_int(fd, SOL_SOCKET, SO_SNDBUF);
    if (s->domain == AF_INET || s->domain == AF_INET6)
        s->reuseport = fd_sock_int(fd, SOL_SOCKET, SO_REUSEPORT);
    if (s->domain == AF_INET6)
        s->v6only = fd_sock_int(fd, IPPROTO_IPV6, IPV6_V6ONLY);
    if ((s->domain == AF_INET || s->domain == AF_INET6) && s->type == SOCK_STREAM)
        s->nodelay = fd_sock_int(fd, IPPROTO_TCP, TCP_NODELAY);
    socklen_t l = sizeof(s->local);
    if (getsockname(fd, (struct sockaddr *)&s->local, &l) == 0)
        s->llen = l;
    l = sizeof(s->peer);
    if (getpeername(fd, (struct sockaddr *)&s->peer, &l) == 0)
        s->plen = l;
    if (fd_sock_int(fd, SOL_SOCKET, SO_ACCEPTCONN))
        s->role = R_LISTEN;
    return 0;
}

#define ICONS_MAX 256  /* a Unix listener's queued connections recorded, at most */
#define WAITING_MAX 64 /* a TCP listener's */

/* From the kernel's sock_diag, for the Unix socket with inode INO: its peer's inode (0 if none,
 * or a connection its listener has not accepted yet: that end has no inode), and for a listener
 * the inodes of the sockets whose connections wait in its queue, in the order accept() takes
 * them (at most MAX into ICONS; their count is returned, -1 if unknown) and its backlog; SHUT
 * (if not NULL) gets its PEER_DONE and SELF_DONE bits. */
static int unix_diag(uint64_t ino, uint64_t *peer, uint32_t *icons, int max, uint32_t *backlog,
                     int *shut)
{
    *peer = 0;
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct {
        struct nlmsghdr h;
        struct unix_diag_req r;
    } req = {
        .h = {.nlmsg_len = sizeof(req),
              .nlmsg_type = SOCK_DIAG_BY_FAMILY,
              .nlmsg_flags = NLM_F_REQUEST},
        .r = {.sdiag_family = AF_UNIX,
              .udiag_states = ~0u,
              .udiag_ino = (uint32_t)ino,
              .udiag_show = UDIAG_SHOW_PEER | (max > 0 ? UDIAG_SHOW_ICONS | UDIAG_SHOW_RQLEN : 0),
              .udiag_cookie = {~0u, ~0u}}};
    int n_icons = -1;
    char buf[8192] __attribute__((aligned(8)));
    if (send(nl, &req, sizeof(req), 0) == (ssize_t)sizeof(req)) {
        ssize_t n = recv(nl, buf, sizeof(buf), 0);
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        if (n > 0 && NLMSG_OK(h, (size_t)n) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            struct unix_diag_msg *m = NLMSG_DATA(h);
            int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
            n_icons = 0;
            for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, len);
                 a = RTA_NEXT(a, len)) {
                if (a->rta_type == UNIX_DIAG_PEER)
                    *peer = *(uint32_t *)RTA_DATA(a);
                if (a->rta_type == UNIX_DIAG_SHUTDOWN && shut)
                    *shut = *(uint8_t *)RTA_DATA(a) & (PEER_DONE | SELF_DONE);
                /* A listener's write queue is its backlog, as for TCP. */
                if (a->rta_type == UNIX_DIAG_RQLEN && backlog)
                    *backlog = ((const struct unix_diag_rqlen *)RTA_DATA(a))->udiag_wqueue;
                if (a->rta_type == UNIX_DIAG_ICONS) {
                    n_icons = (int)(RTA_PAYLOAD(a) / sizeof(uint32_t));
                    memcpy(icons, RTA_DATA(a),
                           sizeof(uint32_t) * (size_t)(n_icons < max ? n_icons : max));
                }
            }
        }
    }
    close(nl);
    return n_icons;
}

static uint64_t unix_peer_ino(uint64_t ino)
{
    uint64_t peer;
    unix_diag(ino, &peer, NULL, 0, NULL, NULL);
    return peer;
}

static int same_addr(const struct sockaddr_storage *a, unsigned alen,
                     const struct sockaddr_storage *b, unsigned blen)
{
    return alen && alen == blen && memcmp(a, b, alen) == 0;
}

/* Whether LISTENER (a listening socket's name) takes connections to ADDR: the same name, or
 * for IP the same port on the wildcard address. */
static int listens_on(const struct sock *listener, const struct sockaddr_storage *addr,
                      unsigned alen)
{
    if (same_addr(&listener->local, listener->llen, addr, alen))
        return 1;
    if (listener->local.ss_family != addr->ss_family)
        return 0;
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *l = (const void *)&listener->local, *a = (const void *)addr;
        return l->sin_port == a->sin_port && l->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *l = (const void *)&listener->local, *a = (const void *)addr;
        return l->sin6_port == a->sin6_port && IN6_IS_ADDR_UNSPECIFIED(&l->sin6_addr);
    }
    return 0;
}

static void hex_put(char *out, const void *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Bytes queued for the program on a connected socket, into files/sockq-<fd>. A stream's are
 * peeked (left in place); datagrams (each kept with its length) are taken and sent straight
 * back through the partner, so the running program sees the same queue in the same order. */
static int save_queue(struct fd_entry *e, const struct sock *s, const char *files_dir)
{
    int avail = 0;
    if (ioctl(e->rec.fd, FIONREAD, &avail) != 0 || avail <= 0)
        return 0;
    if ((unsigned)avail > QUEUE_MAX) {
        state_loss("socket fd %d: %d queued bytes are too many to keep", e->rec.fd, avail);
        return 0;
    }
    char dst[PATH_MAX], name[48];
    snprintf(name, sizeof(name), "sockq-%d", e->rec.fd);
    fd_files_path(dst, sizeof(dst), files_dir, name);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
        return -1;
    int rc = 0;
    if (s->type == SOCK_STREAM) {
        char *buf = malloc((size_t)avail);
        ssize_t n = buf ? recv(e->rec.fd, buf, (size_t)avail, MSG_PEEK | MSG_DONTWAIT) : -1;
        rc = n > 0 && write(out, buf, (size_t)n) == n ? 0 : -1;
        free(buf);
    } else if (s->partner < 0) {
        /* Datagrams for a socket whose peer is in another process of the tree: peeked one after
         * the other (SO_PEEK_OFF moves past each one peeked), left in place. */
        int zero = 0, off = -1;
        size_t cap = (size_t)avail + 65536, len = 0;
        char *all = setsockopt(e->rec.fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) == 0
                        ? malloc(cap)
                        : NULL;
        rc = all ? 0 : -1;
        while (all && len + 4 + 65536 <= cap) {
            ssize_t n = recv(e->rec.fd, all + len + 4, 65536, MSG_PEEK | MSG_DONTWAIT);
            if (n < 0)
                break;
            uint32_t l32 = (uint32_t)n;
            memcpy(all + len, &l32, 4);
            len += 4 + (size_t)n;
            if (n == 0)
                break; /* an empty datagram does not move the offset: the rest is not seen */
        }
        setsockopt(e->rec.fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
        if (all && write(out, all, len) != (ssize_t)len)
            rc = -1;
        free(all);
    } else {
        /* Datagrams: taken one by one, then sent back in order through the partner. */
        size_t cap = (size_t)avail + 65536, len = 0;
        char *all = malloc(cap);
        for (;;) {
            if (!all || len + 4 + 65536 > cap) {
                char *more = realloc(all, cap *= 2);
                if (!more)
                    break;
                all = more;
            }
            ssize_t n = recv(e->rec.fd, all + len + 4, 65536, MSG_DONTWAIT);
            if (n < 0)
                break;
            uint32_t l32 = (uint32_t)n;
            memcpy(all + len, &l32, 4);
            len += 4 + (size_t)n;
        }
        for (size_t at = 0; all && at < len;) {
            uint32_t l32;
            memcpy(&l32, all + at, 4);
            if (send(s->partner, all + at + 4, l32, MSG_DONTWAIT) != (ssize_t)l32)
                rc = -1;
            at += 4 + l32;
        }
        if (!all || write(out, all, len) != (ssize_t)len)
            rc = -1;
        free(all);
    }
    close(out); /* synced at commit (image_commit.c) */
    if (rc != 0) {
        fprintf(stderr, "crac: error: cannot save the bytes queued on socket fd %d\n", e->rec.fd);
        return -1;
    }
    return 1;
}

/* A Unix datagram socket that is not one end of a pair: its datagrams are peeked one after the
 * other with their senders (SO_PEEK_OFF moves past each one), left in place for the running
 * program. Saved per datagram: a u32 length, the sender (the fd of the program's socket that
 * sent it; -2: a named socket outside the process, its u32 name length and name follow, which
 * another process of the tree may hold; -1: unnamed, resent from an unnamed socket, said with a
 * loss line) and its bytes, into files/sockq-<fd>. */
static int save_named_dgrams(struct fd_entry *e, const struct sock *s, const struct fd_entry *all,
                             int n, const char *files_dir)
{
    (void)s;
    size_t cap = 0, len = 0;
    char *q = NULL, data[65536];
    int rc = 0, lost = 0, zero = 0, off = -1;
    if (setsockopt(e->rec.fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) != 0)
        rc = -1;
    while (rc == 0) {
        struct sockaddr_storage from;
        socklen_t flen = sizeof(from);
        ssize_t got = recvfrom(e->rec.fd, data, sizeof(data), MSG_PEEK | MSG_DONTWAIT,
                               (struct sockaddr *)&from, &flen);
        if (got < 0)
            break;
        int32_t sender = -1;
        struct sock o;
        int named = flen > offsetof(struct sockaddr_un, sun_path);
        for (int k = 0; k < n && sender < 0 && named; k++)
            if (all[k].rec.kind == CRAC_FD_SOCKET && sock_read(all[k].rec.fd, &o) == 0 &&
                same_addr(&o.local, o.llen, &from, flen))
                sender = all[k].rec.fd;
        if (sender < 0 && named)
            sender = -2;
        lost += sender == -1;
        uint32_t name_len = sender == -2 ? (uint32_t)flen : 0;
        size_t need = 8 + (sender == -2 ? 4 + name_len : 0) + (size_t)got;
        if (len + need > QUEUE_MAX) {
            state_loss("socket fd %d: datagrams past %u queued bytes are not saved", e->rec.fd,
                       QUEUE_MAX);
            break;
        }
        if (len + need > cap) {
            char *more = realloc(q, cap = 2 * (len + need) + 65536);
            if (!more) {
                rc = -1;
                break;
            }
            q = more;
        }
        uint32_t l32 = (uint32_t)got;
        memcpy(q + len, &l32, 4);
        memcpy(q + len + 4, &sender, 4);
        len += 8;
        if (sender == -2) {
            memcpy(q + len, &name_len, 4);
            memcpy(q + len + 4, &from, name_len);
            len += 4 + name_len;
        }
        memcpy(q + len, data, (size_t)got);
        len += (size_t)got;
        if (got == 0)
            break; /* an empty datagram does not move the offset: the rest is not seen */
    }
    setsockopt(e->rec.fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
    if (len && rc == 0) {
        char dst[PATH_MAX], name[48];
        snprintf(name, sizeof(name), "sockq-%d", e->rec.fd);
        fd_files_path(dst, sizeof(dst), files_dir, name);
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0 || write(out, q, len) != (ssize_t)len) /* synced at commit */
            rc = -1;
        if (out >= 0)
            close(out);
    }
    free(q);
    if (lost)
        state_loss("socket fd %d: %d queued datagrams from unnamed senders lose their sender",
                   e->rec.fd, lost);
    if (rc != 0) {
        fprintf(stderr, "crac: error: cannot save the datagrams queued on socket fd %d\n",
                e->rec.fd);
        return -1;
    }
    return len > 0;
}

/* Whether ADDR is a loopback address (a connection to it may stay within the tree). */
static int loopback(const struct sockaddr_storage *addr, unsigned alen)
{
    if (addr->ss_family == AF_INET && alen >= sizeof(struct sockaddr_in))
        return (ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr) >> 24) == 127;
    if (addr->ss_family == AF_INET6 && alen >= sizeof(struct sockaddr_in6))
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)addr)->sin6_addr);
    return 0;
}

void fd_socket_push_all(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int self = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        struct stat st;
        if (de->d_name[0] == '.' || fd == self || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
            continue;
        int domain = fd_sock_int(fd, SOL_SOCKET, SO_DOMAIN), one = 1;
        if ((domain != AF_INET && domain != AF_INET6) ||
            fd_sock_int(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM ||
            fd_sock_int(fd, IPPROTO_TCP, TCP_NODELAY))
            continue;
        /* Setting TCP_NODELAY sends the pending segments at once; then the program's value. */
        int zero = 0;
        if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &zero, sizeof(zero));
    }
    closedir(d);
}

/* N connections waiting in a listener's queue, of which MAX are recorded. */
static int at_most(const struct fd_entry *e, int n, int max)
{
    if (n <= max)
        return n;
    state_loss("socket fd %d: past %d connections waiting in its queue, those from other "
               "processes come back dropped",
               e->rec.fd, max);
    return max;
}

/* A listener's lines about the connections waiting in its queue, into OUT (docs/IMAGE.md): a
 * Unix one's connecting sockets, in the order accept() takes them (`icons`); a TCP one's
 * addresses they come from, with the bytes each brought (`waiting`; the kernel does not say
 * their order). The tree's restart connects those another process holds again (share.py). */
static void listener_queue_text(const struct fd_entry *e, const struct sock *s, char *out,
                                size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    if (s->role != R_LISTEN || s->type == SOCK_DGRAM)
        return;
    uint32_t backlog = 0;
    if (s->domain == AF_UNIX) {
        uint32_t icons[ICONS_MAX];
        uint64_t none;
        int n =
            at_most(e, unix_diag(e->rec.ino, &none, icons, ICONS_MAX, &backlog, NULL), ICONS_MAX);
        if (backlog)
            at += (size_t)snprintf(out, len, "backlog %u\n", backlog);
        for (int i = 0; i < n && at < len; i++)
            at += (size_t)snprintf(out + at, len - at, "%s %u", i ? "" : "icons", icons[i]);
        if (n > 0 && at < len)
            snprintf(out + at, len - at, "\n");
        return;
    }
    struct sock_tcp_wait waits[WAITING_MAX];
    int n = at_most(e, sock_tcp_waiting(&s->local, e->rec.ino, &backlog, waits, WAITING_MAX),
                    WAITING_MAX);
    if (backlog)
        at += (size_t)snprintf(out, len, "backlog %u\n", backlog);
    for (int i = 0; i < n && at < len; i++) {
        char hex[2 * sizeof(waits[i].peer) + 1];
        hex_put(hex, &waits[i].peer, waits[i].plen);
        at += (size_t)snprintf(out + at, len - at, "waiting %s %u\n", hex, waits[i].rqueue);
    }
}

static int sock_save(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir)
{
    struct sock s, o;
    sock_read(e->rec.fd, &s);
    s.partner = -1;
    uint64_t peer_ino = 0;
    int maybe_tree = 0, unsent = 0;
    /* A connected socket's peer name reads back (for an unnamed Unix peer: the family only).
     * UDP is not connected in the sense here: connect() again at restart is all it needs. */
    int connected =
        s.plen > 0 && s.role != R_LISTEN && !(s.domain != AF_UNIX && s.type == SOCK_DGRAM);
    if (connected) {
        uint64_t peer = 0;
        if (s.domain == AF_UNIX)
            unix_diag(e->rec.ino, &peer, NULL, 0, NULL, &s.shut);
        else if (s.type == SOCK_STREAM)
            s.shut = sock_tcp_shut(e->rec.fd);
        s.role = R_OUTSIDE;
        for (int k = 0; k < n && s.role == R_OUTSIDE; k++) {
            if (&all[k] == e || all[k].rec.kind != CRAC_FD_SOCKET)
                continue;
            /* Unix: the kernel's peer inode, both ways (a datagram socket may be many's peer);
             * IP: the two names crossed. */
            if (s.domain == AF_UNIX
                    ? peer && all[k].rec.ino == peer && unix_peer_ino(all[k].rec.ino) == e->rec.ino
                    : sock_read(all[k].rec.fd, &o) == 0 && o.role != R_LISTEN &&
                          same_addr(&o.local, o.llen, &s.peer, s.plen) &&
                          same_addr(&o.peer, o.plen, &s.local, s.llen)) {
                s.role = R_PAIR;
                s.partner = all[k].rec.fd;
            }
        }
        /* Not accepted yet by our own listener. A Unix one has no peer inode then: one that has
         * (accepted by another process of the tree, which holds the listener too, as a
         * pre-forking server's workers do) is a connection like any, as is one whose peer has
         * finished sending (no waiting connection's has). */
        int maybe_waiting = !(s.shut & PEER_DONE) && (s.domain != AF_UNIX || !peer);
        for (int k = 0; k < n && s.role == R_OUTSIDE && maybe_waiting; k++)
            if (&all[k] != e && S_ISSOCK(all[k].rec.mode) && sock_read(all[k].rec.fd, &o) == 0 &&
                o.role == R_LISTEN && o.type == s.type && listens_on(&o, &s.peer, s.plen))
                s.role = R_PENDING;
        if (s.role == R_OUTSIDE && s.type == SOCK_DGRAM &&
            (!peer || s.plen > offsetof(struct sockaddr_un, sun_path)))
            s.role = R_PLAIN; /* connected to a named socket: connect() again by name */
        peer_ino = peer;
        /* Its peer may be in another process of the tree (a Unix peer, a loopback address):
         * the restart of the tree rebuilds it then (crac_py/launch/share.py), else the loader
         * warns that it fails as a dropped connection. */
        maybe_tree = s.role == R_OUTSIDE && (peer || loopback(&s.peer, s.plen));
        /* A Unix stream without a peer inode: its connection waits in a listener's queue, which
         * may be another process's of the tree (that listener's image lists it), or its peer
         * is closed. What it sent there is in the waiting socket, which nothing can read. */
        if (s.role == R_OUTSIDE && s.domain == AF_UNIX && s.type != SOCK_DGRAM && !peer) {
            maybe_tree = 1;
            ioctl(e->rec.fd, SIOCOUTQ, &unsent);
        }
        /* A TCP connection may lead to a process of the job on another host or in another
         * tree: the restart makes it again through the coordinator (crac_py/launch/xconn.py)
         * with its bytes, else the loader warns then that it fails as a dropped connection. */
        if (s.role == R_OUTSIDE && s.domain != AF_UNIX && s.type == SOCK_STREAM) {
            maybe_tree = 1;
            /* Bytes still in our send queue, never sent (the peer's buffer was full), are not
             * readable here and not in the peer's saved queue: say so. Not those sent and not
             * yet acknowledged (SIOCOUTQ counts them): over loopback they are in the peer's
             * queue already, its ACK delayed (a dask scheduler's connections to its workers). */
            int outq = 0;
            if (ioctl(e->rec.fd, SIOCOUTQNSD, &outq) == 0 && outq > 0)
                state_loss("socket fd %d: %d bytes sent but not yet received by the peer are "
                           "not saved",
                           e->rec.fd, outq);
        }
        if (s.role == R_OUTSIDE && !maybe_tree)
            state_loss("socket fd %d: its connection leaves the process; after a restart it "
                       "fails as a dropped connection",
                       e->rec.fd);
    }
    /* A TCP connection finished both ways (both FINs: the kernel has closed it and its peer
     * name is gone) with bytes still to read: they come back, then end of file. */
    if (!connected && s.role != R_LISTEN && s.type == SOCK_STREAM && s.domain != AF_UNIX &&
        sock_tcp_was_connected(e->rec.fd)) {
        s.role = R_OUTSIDE;
        s.shut = PEER_DONE | SELF_DONE;
        maybe_tree = 1;
    }
    int queued = 0;
    if (s.role == R_PAIR || maybe_tree || (s.role == R_PENDING && s.type == SOCK_STREAM)) {
        /* save_queue sends datagrams back through the partner's fd (still the program's). */
        int rc = save_queue(e, &s, files_dir);
        if (rc < 0)
            return -1;
        queued = rc > 0;
        int outq = 0;
        if (s.role == R_PENDING && ioctl(e->rec.fd, SIOCOUTQ, &outq) == 0 && outq > 0)
            state_loss("socket fd %d: %d bytes sent on a connection not yet accepted are lost",
                       e->rec.fd, outq);
    } else if (s.role == R_PENDING && ioctl(e->rec.fd, SIOCOUTQ, &queued) == 0 && queued > 0) {
        /* They wait in the listener's queue, in a socket no fd names: not readable here. */
        state_loss("socket fd %d: %d bytes sent on a connection not yet accepted are lost",
                   e->rec.fd, queued);
        queued = 0;
    } else if (s.role == R_PLAIN && s.domain == AF_UNIX && s.type == SOCK_DGRAM &&
               s.llen > offsetof(struct sockaddr_un, sun_path)) {
        int rc = save_named_dgrams(e, &s, all, n, files_dir);
        if (rc < 0)
            return -1;
        queued = rc > 0;
    } else if (s.role != R_LISTEN && ioctl(e->rec.fd, FIONREAD, &queued) == 0 && queued > 0) {
        state_loss("socket fd %d: %d bytes queued at the checkpoint are lost", e->rec.fd, queued);
        queued = 0;
    }
    char lhex[2 * sizeof(s.local) + 1], phex[2 * sizeof(s.peer) + 1];
    char text[512 + sizeof(lhex) + sizeof(phex) + 11 * ICONS_MAX +
              (sizeof(phex) + 20) * WAITING_MAX];
    hex_put(lhex, &s.local, s.llen);
    hex_put(phex, &s.peer, s.plen);
    int at = snprintf(text, sizeof(text),
                      "domain %d type %d proto %d role %d partner %d queued %d reuse %d nodelay %d "
                      "keepalive %d rcvbuf %d sndbuf %d unsent %d reuseport %d v6only %d shut %d\n"
                      "local %s\npeer %s\npeerino %llu\n",
                      s.domain, s.type, s.proto, s.role, s.partner, queued, s.reuse, s.nodelay,
                      s.keepalive, s.rcvbuf, s.sndbuf, unsent > 0, s.reuseport, s.v6only, s.shut,
                      s.llen ? lhex : "-", s.plen ? phex : "-", (unsigned long long)peer_ino);
    listener_queue_text(e, &s, text + at, sizeof(text) - (size_t)at);
    return fd_save_text(e, files_dir, "socket", text);
}

/* ---- restart ---- */

static int hex_get(const char *p, void *out, size_t max, unsigned *len)
{
    *len = 0;
    if (*p == '-')
        return 0;
    unsigned char *b = out;
    while (p[0] && p[0] != '\n') {
        unsigned v;
        if (*len >= max || sscanf(p, "%2x", &v) != 1)
            return -1;
        b[(*len)++] = (unsigned char)v;
        p += 2;
    }
    return 0;
}

static int sock_load(const struct fd_restore *r, const struct fd_view *v, struct sock *s,
                     int *queued)
{
    char *text = fd_read_text(r, v, "socket");
    if (!text)
        return -1;
    memset(s, 0, sizeof(*s));
    const char *l = strstr(text, "\nlocal "), *p = strstr(text, "\npeer ");
    int ok = sscanf(text,
                    "domain %d type %d proto %d role %d partner %d queued %d reuse %d nodelay %d "
                    "keepalive %d rcvbuf %d sndbuf %d",
                    &s->domain, &s->type, &s->proto, &s->role, &s->partner, queued, &s->reuse,
                    &s->nodelay, &s->keepalive, &s->rcvbuf, &s->sndbuf) == 11 &&
             l && p && hex_get(l + 7, &s->local, sizeof(s->local), &s->llen) == 0 &&
             hex_get(p + 6, &s->peer, sizeof(s->peer), &s->plen) == 0 && s->role >= R_PLAIN &&
             s->role <= R_OUTSIDE;
    /* Absent in older images: 0, the kernel's default. */
    const char *end = strchr(text, '\n'), *w;
    if ((w = strstr(text, " reuseport ")) && (!end || w < end))
        s->reuseport = atoi(w + strlen(" reuseport "));
    if ((w = strstr(text, " v6only ")) && (!end || w < end))
        s->v6only = atoi(w + strlen(" v6only "));
    if ((w = strstr(text, " shut ")) && (!end || w < end))
        s->shut = atoi(w + strlen(" shut ")) & (PEER_DONE | SELF_DONE);
    if ((w = strstr(text, "\nbacklog ")))
        s->backlog = atoi(w + strlen("\nbacklog "));
    free(text);
    if (!ok)
        snprintf(r->err, r->errlen, "fd %d (socket): image corrupted: bad saved socket", v->rec.fd);
    return ok ? 0 : -1;
}

static void set_opts(int fd, const struct sock *s)
{
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &s->reuse, sizeof(int));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &s->keepalive, sizeof(int));
    fd_sock_buffers(fd, s->rcvbuf, s->sndbuf);
    if ((s->domain == AF_INET || s->domain == AF_INET6) && s->type == SOCK_STREAM)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &s->nodelay, sizeof(int));
}

/* The options that decide which names an IP socket may bind beside others: SO_REUSEPORT (a
 * pre-forked server's listeners on one port) and IPV6_V6ONLY (an IPv6 listener beside an IPv4
 * one on the same port, as Redis and nginx make them; without it the second bind fails). */
static void bind_opts(int fd, const struct sock *s)
{
    if (s->reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &s->reuseport, sizeof(int));
    if (s->domain == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &s->v6only, sizeof(int));
}

/* Bind to the recorded name. A Unix path left by the killed process is removed first (only a
 * socket file), and its directory made again if it is gone: a process of the killed run that went
 * on past the checkpoint may have removed it (Python's multiprocessing binds its resource
 * sharer's listener in a temporary directory that a DataLoader worker removes when it ends). An
 * IP address is taken with SO_REUSEADDR (its old connections may linger). */
static int bind_name(int fd, const struct sock *s)
{
    if (!s->llen)
        return 0;
    if (s->domain == AF_UNIX) {
        const struct sockaddr_un *u = (const void *)&s->local;
        if (s->llen <= offsetof(struct sockaddr_un, sun_path))
            return 0; /* unnamed */
        struct stat st;
        if (u->sun_path[0] && stat(u->sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(u->sun_path);
        int rc = bind(fd, (const struct sockaddr *)&s->local, s->llen);
        if (rc == 0 || errno != ENOENT || !u->sun_path[0] ||
            strnlen(u->sun_path, sizeof(u->sun_path)) == sizeof(u->sun_path) ||
            make_dirs(u->sun_path, 0) != 0)
            return rc;
    } else {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        bind_opts(fd, s);
    }
    return bind(fd, (const struct sockaddr *)&s->local, s->llen);
}

static int new_sock(const struct sock *s)
{
    return socket(s->domain, s->type | SOCK_CLOEXEC, s->proto);
}

/* Not connected, or listening: made at once. Connections wait for every fd (sock_finish). */
static int sock_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    struct sock s;
    int queued;
    if (sock_load(r, v, &s, &queued) != 0)
        return -1;
    if (s.role != R_PLAIN && s.role != R_LISTEN)
        return 0;
    int fd = new_sock(&s);
    if (fd < 0)
        return -1;
    if (bind_name(fd, &s) != 0 ||
        (s.role == R_LISTEN && listen(fd, s.backlog > 0 ? s.backlog : BACKLOG) != 0) ||
        (s.role == R_PLAIN && s.type == SOCK_DGRAM &&
         s.plen > (s.domain == AF_UNIX ? offsetof(struct sockaddr_un, sun_path) : 0) &&
         connect(fd, (const struct sockaddr *)&s.peer, s.plen) != 0)) {
        /* The name is taken (another copy of the program still runs, say): the rest of the
         * program can still run, so a warning and a socket without the name. */
        fprintf(stderr,
                "crac: warning: fd %d (socket): cannot %s again (%s); it comes back without its "
                "name\n",
                v->rec.fd, s.role == R_LISTEN ? "bind and listen" : "bind or connect",
                strerror(errno));
        close(fd);
        fd = new_sock(&s);
        if (fd < 0)
            return -1;
    }
    set_opts(fd, &s);
    return fd_install(fd, &v->rec);
}

/* A loopback TCP connection between the names A (the connecting end) and B: bound to A and
 * connected to B through LISTENER (the program's own, or one made for the purpose). */
static int tcp_connect_pair(const struct sock *a, const struct sock *b, int listener, int *fa,
                            int *fb)
{
    int tmp = -1;
    *fa = -1;
    if (listener < 0) {
        tmp = listener = new_sock(b);
        int one = 1;
        if (tmp >= 0)
            bind_opts(tmp, b);
        if (tmp < 0 || setsockopt(tmp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
            bind(tmp, (const struct sockaddr *)&b->local, b->llen) != 0 || listen(tmp, 1) != 0)
            goto fail;
    }
    *fa = new_sock(a);
    if (*fa < 0)
        goto fail;
    if (bind_name(*fa, a) != 0 || connect(*fa, (const struct sockaddr *)&b->local, b->llen) != 0) {
        /* The killed process's connection may linger in TIME_WAIT with the same two addresses
         * (it closed without unread bytes): connect from a new port rather than fail the
         * connection; only the connecting end's own port changes. */
        if (errno != EADDRINUSE && errno != EADDRNOTAVAIL)
            goto fail;
        close(*fa);
        *fa = new_sock(a);
        if (*fa < 0 || connect(*fa, (const struct sockaddr *)&b->local, b->llen) != 0)
            goto fail;
    }
    *fb = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (*fb < 0)
        goto fail;
    if (tmp >= 0)
        close(tmp);
    return 0;
fail:
    if (tmp >= 0)
        close(tmp);
    if (*fa >= 0)
        close(*fa);
    *fa = -1;
    return -1;
}

/* The partner's queued bytes written into the new connection from the other end. */
static void refill(const struct fd_restore *r, int fd_no, const struct sock *s, int into_end,
                   int from_end)
{
    (void)into_end;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/files/sockq-%d", r->gen_dir, fd_no);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    struct stat st;
    char *buf = fstat(in, &st) == 0 && st.st_size > 0 && st.st_size <= (off_t)QUEUE_MAX + 65536
                    ? malloc((size_t)st.st_size)
                    : NULL;
    ssize_t len = buf ? read(in, buf, (size_t)st.st_size) : -1;
    close(in);
    int ok = len > 0;
    if (ok && s->type == SOCK_STREAM) {
        for (ssize_t at = 0; ok && at < len;) {
            ssize_t w = send(from_end, buf + at, (size_t)(len - at), MSG_NOSIGNAL);
            ok = w > 0;
            at += w > 0 ? w : 0;
        }
    } else {
        for (ssize_t at = 0; ok && at + 4 <= len;) {
            uint32_t l32;
            memcpy(&l32, buf + at, 4);
            ok = at + 4 + (ssize_t)l32 <= len &&
                 send(from_end, buf + at + 4, l32, MSG_NOSIGNAL) == (ssize_t)l32;
            at += 4 + (ssize_t)l32;
        }
    }
    if (!ok)
        fprintf(stderr, "crac: warning: socket fd %d: its queued bytes cannot be put back\n",
                fd_no);
    free(buf);
}

/* A named datagram socket's saved datagrams, sent to it again from their senders (the program's
 * sockets, back at their numbers now) or from an unnamed socket. */
static void refill_named(const struct fd_restore *r, int fd_no, const struct sock *s)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/files/sockq-%d", r->gen_dir, fd_no);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    static char buf[65536];
    int ok = 1, lost_sender = 0;
    for (;;) {
        uint32_t l32;
        int32_t sender;
        ssize_t h = read(in, &l32, 4);
        if (h == 0)
            break;
        uint32_t name_len = 0;
        struct sockaddr_storage name;
        if (h != 4 || read(in, &sender, 4) != 4 || l32 > sizeof(buf) ||
            (sender == -2 && (read(in, &name_len, 4) != 4 || name_len > sizeof(name) ||
                              read(in, &name, name_len) != (ssize_t)name_len)) ||
            read(in, buf, l32) != (ssize_t)l32) {
            ok = 0;
            break;
        }
        if (sender == -2) {
            /* Its sender was another process's socket; restarted outside that process's tree,
             * it comes from an unnamed socket (the tree's restart sends it from the name). */
            lost_sender = 1;
            sender = -1;
        }
        int via = sender >= 0 ? sender : socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (via < 0 || sendto(via, buf, l32, MSG_DONTWAIT, (const struct sockaddr *)&s->local,
                              s->llen) != (ssize_t)l32)
            ok = 0;
        if (sender < 0 && via >= 0)
            close(via);
    }
    close(in);
    if (!ok)
        fprintf(stderr, "crac: warning: socket fd %d: its queued datagrams cannot be put back\n",
                fd_no);
    if (lost_sender)
        fprintf(stderr,
                "crac: warning: socket fd %d: datagrams queued from another process come back "
                "from an unnamed socket\n",
                fd_no);
}

/* Where the program's listener for ADDR was restored (its fd), or -1. */
static int find_listener(const struct fd_restore *r, int type, const struct sockaddr_storage *addr,
                         unsigned alen)
{
    struct fd_view o;
    size_t off = 0;
    while (fd_next(r->note, r->len, &off, &o) > 0) {
        struct sock l;
        int q;
        if (o.rec.kind == CRAC_FD_SOCKET && sock_load(r, &o, &l, &q) == 0 && l.role == R_LISTEN &&
            l.type == type && listens_on(&l, addr, alen))
            return o.rec.fd;
    }
    r->err[0] = '\0';
    return -1;
}

/* A new connection of S's kind, its end FA to stand for S's and FB the other: a Unix socket
 * pair, or a loopback TCP connection through a listener made for the purpose. */
static int stand_in_pair(const struct sock *s, int *fa, int *fb)
{
    if (s->domain == AF_UNIX) {
        int sv[2];
        if (socketpair(AF_UNIX, s->type | SOCK_CLOEXEC, 0, sv) != 0)
            return -1;
        *fa = sv[0], *fb = sv[1];
        return 0;
    }
    struct sock lo = *s, cl = *s;
    memset(&lo.local, 0, sizeof(lo.local));
    lo.local.ss_family = (sa_family_t)s->domain;
    if (s->domain == AF_INET) {
        struct sockaddr_in *a = (void *)&lo.local;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        lo.llen = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (void *)&lo.local;
        a->sin6_addr = in6addr_loopback;
        lo.llen = sizeof(*a);
    }
    int l = new_sock(&lo);
    socklen_t len = sizeof(lo.local);
    if (l < 0 || bind(l, (struct sockaddr *)&lo.local, lo.llen) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&lo.local, &len) != 0) {
        if (l >= 0)
            close(l);
        return -1;
    }
    cl.llen = 0;
    int rc = tcp_connect_pair(&cl, &lo, l, fa, fb);
    close(l);
    return rc;
}

/* A socket that fails on first use as a dropped connection does: a TCP connection reset by its
 * peer (ECONNRESET, then EPIPE); a Unix stream whose peer closed with bytes unread. */
static int broken_socket(const struct sock *s)
{
    int fa, fb;
    if (stand_in_pair(s, &fa, &fb) != 0)
        return -1;
    if (s->domain == AF_UNIX) {
        send(fa, "", 1, MSG_NOSIGNAL); /* unread by fb: its close resets fa */
    } else {
        struct linger lg = {1, 0}; /* closing sends a reset */
        setsockopt(fb, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(fb);
    return fa;
}

/* A connection whose peer outside the process had finished sending (it closed, or shut its
 * writing down): the bytes it had sent (S's queue, saved as fd FD_NO's), then end of file, from a
 * peer that is gone; writing to it then fails as writing to a closed peer does. */
static int finished_socket(const struct fd_restore *r, int fd_no, const struct sock *s, int queued)
{
    int fa, fb;
    if (stand_in_pair(s, &fa, &fb) != 0)
        return -1;
    if (queued)
        refill(r, fd_no, s, fa, fb);
    shutdown(fb, SHUT_WR);
    close(fb);
    if (s->shut & SELF_DONE)
        shutdown(fa, SHUT_WR);
    return fa;
}

static int place(int fd, const struct fd_view *v, const struct sock *s)
{
    set_opts(fd, s);
    return fd_install(fd, &v->rec);
}

/* Once every fd is back (the listeners too): the connections, made once for all at the first
 * connected socket: pairs, then connections waiting in a listener's queue (after the pairs, so
 * a pair made through the program's listener is accepted before anything else waits there),
 * then the broken ones. */
static int sock_finish(const struct fd_restore *r, const struct fd_view *v)
{
    struct fd_view o, p;
    size_t off = 0;
    struct sock s, t;
    int q, qt;
    while (fd_next(r->note, r->len, &off, &o) > 0)
        if (o.rec.kind == CRAC_FD_SOCKET)
            break;
    if (o.rec.fd != v->rec.fd)
        return 0;
    /* Named datagram sockets' queues first: their senders are all back (made at reopen). */
    off = 0;
    while (fd_next(r->note, r->len, &off, &o) > 0)
        if (o.rec.kind == CRAC_FD_SOCKET && fd_shared_held(o.rec.fd) < 0 &&
            sock_load(r, &o, &s, &q) == 0 && s.role == R_PLAIN && q)
            refill_named(r, o.rec.fd, &s);
    for (int round = R_PAIR; round <= R_OUTSIDE; round++) {
        off = 0;
        while (fd_next(r->note, r->len, &off, &o) > 0) {
            /* Shared with another process of the tree: inherited, already in place. */
            if (o.rec.kind != CRAC_FD_SOCKET || fd_shared_held(o.rec.fd) >= 0)
                continue;
            if (sock_load(r, &o, &s, &q) != 0)
                return -1;
            if (s.role != round)
                continue;
            int fa = -1, fb = -1;
            if (round == R_PAIR) {
                if (s.partner < o.rec.fd)
                    continue; /* made at the lower-numbered end */
                size_t off2 = 0;
                int found = 0;
                while (!found && fd_next(r->note, r->len, &off2, &p) > 0)
                    found = p.rec.kind == CRAC_FD_SOCKET && p.rec.fd == s.partner;
                if (!found || sock_load(r, &p, &t, &qt) != 0) {
                    snprintf(r->err, r->errlen, "fd %d (socket): image corrupted: no partner",
                             o.rec.fd);
                    return -1;
                }
                if (s.domain == AF_UNIX) {
                    int sv[2];
                    if (socketpair(AF_UNIX, s.type | SOCK_CLOEXEC, 0, sv) != 0)
                        return -1;
                    fa = sv[0], fb = sv[1];
                } else {
                    /* The end on a listener's port is the accepted one. */
                    int l = find_listener(r, t.type, &t.local, t.llen);
                    int swap = l < 0 && find_listener(r, s.type, &s.local, s.llen) >= 0;
                    int rc =
                        swap ? tcp_connect_pair(&t, &s, find_listener(r, s.type, &s.local, s.llen),
                                                &fb, &fa)
                             : tcp_connect_pair(&s, &t, l, &fa, &fb);
                    if (rc != 0) {
                        /* Its addresses are taken: both ends fail as a dropped connection. */
                        fprintf(stderr,
                                "crac: warning: fds %d and %d (a TCP connection): cannot connect "
                                "again (%s); they fail as a dropped connection\n",
                                o.rec.fd, p.rec.fd, strerror(errno));
                        fa = broken_socket(&s);
                        fb = broken_socket(&t);
                        if (fa < 0 || fb < 0)
                            return -1;
                        q = qt = 0;
                    }
                }
                set_opts(fa, &s);
                set_opts(fb, &t);
                if (q)
                    refill(r, o.rec.fd, &s, fa, fb);
                if (qt)
                    refill(r, p.rec.fd, &t, fb, fa);
                /* A half-closed connection stays half-closed, after the bytes it carried. */
                if (s.shut & SELF_DONE)
                    shutdown(fa, SHUT_WR);
                if (t.shut & SELF_DONE)
                    shutdown(fb, SHUT_WR);
                if (fd_install(fa, &o.rec) != 0 || fd_install(fb, &p.rec) != 0)
                    return -1;
                continue;
            }
            if (round == R_PENDING) {
                fa = new_sock(&s);
                if (fa < 0)
                    return -1;
                if (bind_name(fa, &s) != 0 ||
                    connect(fa, (const struct sockaddr *)&s.peer, s.plen) != 0) {
                    fprintf(stderr,
                            "crac: warning: fd %d (socket): cannot connect to the program's "
                            "listener again (%s); it fails as a dropped connection\n",
                            o.rec.fd, strerror(errno));
                    close(fa);
                    fa = broken_socket(&s);
                    if (fa < 0)
                        return -1;
                }
            } else if (s.shut & PEER_DONE) {
                fa = finished_socket(r, o.rec.fd, &s, q);
                if (fa < 0)
                    return -1;
                /* A peer of the tree that closed is gone as the stand-in is; one elsewhere may
                 * still read what the program writes now. */
                if (!(s.shut & SELF_DONE) && s.domain != AF_UNIX && !loopback(&s.peer, s.plen))
                    fprintf(stderr,
                            "crac: warning: fd %d: a connection leaving the process whose peer "
                            "had finished sending comes back with the rest to read, then end of "
                            "file; what the program writes to it is lost\n",
                            o.rec.fd);
            } else {
                fa = broken_socket(&s);
                if (fa < 0)
                    return -1;
                fprintf(stderr,
                        "crac: warning: fd %d: a connection leaving the process cannot be "
                        "restored; it fails as a dropped connection\n",
                        o.rec.fd);
            }
            if (place(fa, &o, &s) != 0)
                return -1;
        }
    }
    return 0;
}

const struct fd_ops fd_socket_ops = {.kind = CRAC_FD_SOCKET,
                                     .name = "socket",
                                     .recognise = sock_recognise,
                                     .save = sock_save,
                                     .reopen = sock_reopen,
                                     .finish = sock_finish};
