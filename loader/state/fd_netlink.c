/* fd_netlink.c — netlink sockets (glibc's getaddrinfo, iproute2's ss and ip, a daemon's monitor):
 * a new one of the same protocol at restart, on its port id and groups; unread messages found. */
#include "fds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GROUP_WORDS 32 /* groups kept, in 32-bit words: 1024, more than any protocol has */

/* The per-socket options netlink(7) lists, saved and set again by number. */
static const int flag_opts[] = {
    NETLINK_PKTINFO, NETLINK_BROADCAST_ERROR, NETLINK_NO_ENOBUFS,    NETLINK_LISTEN_ALL_NSID,
    NETLINK_CAP_ACK, NETLINK_EXT_ACK,         NETLINK_GET_STRICT_CHK};
#define N_FLAG_OPTS (sizeof(flag_opts) / sizeof(flag_opts[0]))

struct nl_sock {
    int type, proto, rcvbuf, sndbuf;
    uint32_t port, peer_port, peer_groups, flags; /* flags: bit i for flag_opts[i] */
    uint32_t groups[GROUP_WORDS];
};

static int is_netlink(int fd) { return fd_sock_int(fd, SOL_SOCKET, SO_DOMAIN) == AF_NETLINK; }

static int netlink_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)e;
    return S_ISSOCK(st->st_mode) && is_netlink(fd);
}

/* Bytes the kernel queued for the program to read (a request's answer, a dump's next part). */
static uint32_t unread_bytes(int fd)
{
    uint32_t mem[SK_MEMINFO_VARS] = {0};
    socklen_t l = sizeof(mem);
    return getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &l) == 0 ? mem[SK_MEMINFO_RMEM_ALLOC] : 0;
}

/* Whether the socket FD (inode INO) is in the list L of N. */
static int listed(const struct netlink_unread *l, int n, int fd, uint64_t ino)
{
    for (int i = 0; i < n; i++)
        if (l[i].fd == fd && l[i].ino == ino)
            return 1;
    return 0;
}

int fd_netlink_settled(struct netlink_settle *s, int overdue)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 1;
    struct netlink_unread now[NETLINK_SETTLE_MAX];
    int n = 0, all_stuck = 1;
    for (int fd; (fd = state_next_program_fd(d, 0)) >= 0;) {
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || !is_netlink(fd) || !unread_bytes(fd))
            continue;
        if (n < NETLINK_SETTLE_MAX)
            now[n++] = (struct netlink_unread){fd, st.st_ino};
        /* Unread at every look so far: one the program does not read (yet). */
        all_stuck &= s->looks == 0 || listed(s->always, s->n_always, fd, st.st_ino);
    }
    closedir(d);
    if (s->looks++ == 0) {
        memcpy(s->always, now, sizeof(now[0]) * (size_t)n);
        s->n_always = n;
    } else {
        int kept = 0;
        for (int i = 0; i < s->n_always; i++)
            if (listed(now, n, s->always[i].fd, s->always[i].ino))
                s->always[kept++] = s->always[i];
        s->n_always = kept;
    }
    return n == 0 || (overdue && all_stuck);
}

/* ---- checkpoint ---- */

static int netlink_save(struct fd_entry *e, const struct fd_entry *all, int n,
                        const char *files_dir)
{
    (void)all, (void)n;
    int fd = e->rec.fd;
    struct nl_sock s = {.type = fd_sock_int(fd, SOL_SOCKET, SO_TYPE),
                        .proto = fd_sock_int(fd, SOL_SOCKET, SO_PROTOCOL),
                        .rcvbuf = fd_sock_int(fd, SOL_SOCKET, SO_RCVBUF),
                        .sndbuf = fd_sock_int(fd, SOL_SOCKET, SO_SNDBUF)};
    struct sockaddr_nl a;
    socklen_t l = sizeof(a);
    if (getsockname(fd, (struct sockaddr *)&a, &l) == 0 && a.nl_family == AF_NETLINK)
        s.port = a.nl_pid;
    l = sizeof(a);
    if (getpeername(fd, (struct sockaddr *)&a, &l) == 0 && a.nl_family == AF_NETLINK) {
        s.peer_port = a.nl_pid;
        s.peer_groups = a.nl_groups;
    }
    l = sizeof(s.groups);
    if (getsockopt(fd, SOL_NETLINK, NETLINK_LIST_MEMBERSHIPS, s.groups, &l) != 0)
        memset(s.groups, 0, sizeof(s.groups));
    for (size_t i = 0; i < N_FLAG_OPTS; i++)
        if (fd_sock_int(fd, SOL_NETLINK, flag_opts[i]))
            s.flags |= 1u << i;
    /* What the kernel queued cannot be queued again: the checkpoint waited a while for the
     * program to read it (ckpt_run.c); what it still had not read is dropped. */
    uint32_t unread = unread_bytes(fd);
    if (unread)
        state_loss("fd %d (netlink): %u bytes of messages it had not read", fd, unread);
    char text[64 + 12 * GROUP_WORDS + 160];
    int at =
        snprintf(text, sizeof(text),
                 "netlink type %d proto %d port %u peer %u %x flags %x rcvbuf %d sndbuf %d\n"
                 "groups",
                 s.type, s.proto, s.port, s.peer_port, s.peer_groups, s.flags, s.rcvbuf, s.sndbuf);
    for (size_t i = 0; i < GROUP_WORDS; i++)
        at += snprintf(text + at, sizeof(text) - (size_t)at, " %x", s.groups[i]);
    snprintf(text + at, sizeof(text) - (size_t)at, "\n");
    return fd_save_text(e, files_dir, "netlink", text);
}

/* ---- restart ---- */

static int netlink_load(const struct fd_restore *r, const struct fd_view *v, struct nl_sock *s)
{
    char *text = fd_read_text(r, v, "netlink");
    if (!text)
        return -1;
    memset(s, 0, sizeof(*s));
    int ok =
        sscanf(text, "netlink type %d proto %d port %u peer %u %x flags %x rcvbuf %d sndbuf %d",
               &s->type, &s->proto, &s->port, &s->peer_port, &s->peer_groups, &s->flags, &s->rcvbuf,
               &s->sndbuf) == 8;
    const char *g = strstr(text, "\ngroups");
    if (ok && g) {
        char *p = (char *)g + strlen("\ngroups");
        for (size_t i = 0; ok && i < GROUP_WORDS; i++) {
            char *end;
            unsigned long w = strtoul(p, &end, 16);
            ok = end != p && w <= UINT32_MAX;
            s->groups[i] = (uint32_t)w;
            p = end;
        }
    }
    free(text);
    if (!ok || !g) {
        snprintf(r->err, r->errlen, "fd %d (netlink): image corrupted: bad saved socket",
                 v->rec.fd);
        return -1;
    }
    return 0;
}

/* Its port id again, as replies name it and libmnl checks them against it; the kernel's choice
 * if another socket holds it now (this process's own, while the checkpointed one still runs). */
static void bind_port(int fd, const struct nl_sock *s, int program_fd)
{
    struct sockaddr_nl a = {.nl_family = AF_NETLINK, .nl_pid = s->port, .nl_groups = s->groups[0]};
    if (!s->port && !s->groups[0])
        return; /* never used: bound by its first send, as before */
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        return;
    int err = errno;
    a.nl_pid = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        fprintf(stderr, "crac: warning: fd %d (netlink): port id %u is taken; it has another\n",
                program_fd, s->port);
    else
        fprintf(stderr, "crac: warning: fd %d (netlink): cannot bind again (%s)\n", program_fd,
                strerror(err));
}

static int netlink_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    struct nl_sock s;
    if (netlink_load(r, v, &s) != 0)
        return -1;
    int fd = socket(AF_NETLINK, s.type | SOCK_CLOEXEC, s.proto);
    if (fd < 0) {
        /* A protocol this kernel lacks (a module not loaded): the rest of the program runs. */
        fprintf(stderr,
                "crac: warning: fd %d (netlink protocol %d): cannot be made again (%s); it now "
                "reads as /dev/null\n",
                v->rec.fd, s.proto, strerror(errno));
        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        return fd < 0 ? -1 : fd_install(fd, &v->rec);
    }
    for (size_t i = 0; i < N_FLAG_OPTS; i++) {
        int on = (s.flags >> i) & 1;
        if (on)
            setsockopt(fd, SOL_NETLINK, flag_opts[i], &on, sizeof(on));
    }
    fd_sock_buffers(fd, s.rcvbuf, s.sndbuf);
    bind_port(fd, &s, v->rec.fd);
    for (unsigned g = 32; g < 32 * GROUP_WORDS; g++) /* bind gave the first 32 */
        if ((s.groups[g / 32] >> (g % 32)) & 1) {
            unsigned group = g + 1;
            if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) != 0)
                fprintf(stderr, "crac: warning: fd %d (netlink): cannot join group %u (%s)\n",
                        v->rec.fd, group, strerror(errno));
        }
    if (s.peer_port || s.peer_groups) {
        struct sockaddr_nl peer = {
            .nl_family = AF_NETLINK, .nl_pid = s.peer_port, .nl_groups = s.peer_groups};
        if (connect(fd, (struct sockaddr *)&peer, sizeof(peer)) != 0)
            fprintf(stderr, "crac: warning: fd %d (netlink): cannot connect again (%s)\n",
                    v->rec.fd, strerror(errno));
    }
    return fd_install(fd, &v->rec);
}

const struct fd_ops fd_netlink_ops = {.kind = CRAC_FD_NETLINK,
                                      .name = "netlink",
                                      .recognise = netlink_recognise,
                                      .save = netlink_save,
                                      .reopen = netlink_reopen};
