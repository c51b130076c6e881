/* sock_tcp_queue.c — a TCP listener's accept queue from the kernel's sock_diag: the connections
 * waiting in it (where each comes from, the bytes it brought) for a tree's restart, its backlog. */
#include "fds.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Whether the kernel's SRC/SPORT is an address the listener LOCAL takes connections on: its port,
 * and its address or the wildcard one. */
static int on_listener(const struct sockaddr_storage *local, const struct inet_diag_sockid *id)
{
    if (local->ss_family == AF_INET) {
        const struct sockaddr_in *l = (const void *)local;
        return id->idiag_sport == l->sin_port &&
               (l->sin_addr.s_addr == htonl(INADDR_ANY) || id->idiag_src[0] == l->sin_addr.s_addr);
    }
    const struct sockaddr_in6 *l = (const void *)local;
    return id->idiag_sport == l->sin6_port &&
           (IN6_IS_ADDR_UNSPECIFIED(&l->sin6_addr) ||
            memcmp(id->idiag_src, &l->sin6_addr, sizeof(l->sin6_addr)) == 0);
}

int sock_tcp_waiting(const struct sockaddr_storage *local, uint64_t ino, uint32_t *backlog,
                     struct sock_tcp_wait *out, int max)
{
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct {
        struct nlmsghdr h;
        struct inet_diag_req_v2 r;
    } req = {.h = {.nlmsg_len = sizeof(req),
                   .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
             .r = {.sdiag_family = (uint8_t)local->ss_family,
                   .sdiag_protocol = IPPROTO_TCP,
                   .idiag_states = 1u << TCP_ESTABLISHED | 1u << TCP_LISTEN}};
    int n = 0, done = 0;
    size_t cap = 32768;
    char *buf = malloc(cap);
    if (!buf || send(nl, &req, sizeof(req), 0) != (ssize_t)sizeof(req))
        done = -1;
    while (!done) {
        ssize_t got = recv(nl, buf, cap, 0);
        if (got <= 0) {
            done = -1;
            break;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)got);
             h = NLMSG_NEXT(h, got)) {
            if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
                done = h->nlmsg_type == NLMSG_DONE ? 1 : -1;
                break;
            }
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            /* The listener itself: for a listening socket the kernel reports its backlog (the
             * most connections listen() let wait) as the write queue. */
            if (m->idiag_state == TCP_LISTEN) {
                if (m->idiag_inode == ino)
                    *backlog = m->idiag_wqueue;
                continue;
            }
            /* Established, on the listener's address, and no descriptor (no inode) yet: in the
             * accept queue. A socket the program closed has left ESTABLISHED (FIN sent). */
            if (m->idiag_inode != 0 || !on_listener(local, &m->id))
                continue;
            if (n < max) {
                struct sock_tcp_wait *w = &out[n];
                memset(w, 0, sizeof(*w));
                w->peer.ss_family = local->ss_family;
                if (local->ss_family == AF_INET) {
                    struct sockaddr_in *p = (void *)&w->peer;
                    p->sin_port = m->id.idiag_dport;
                    p->sin_addr.s_addr = m->id.idiag_dst[0];
                    w->plen = sizeof(*p);
                } else {
                    struct sockaddr_in6 *p = (void *)&w->peer;
                    p->sin6_port = m->id.idiag_dport;
                    memcpy(&p->sin6_addr, m->id.idiag_dst, sizeof(p->sin6_addr));
                    w->plen = sizeof(*p);
                }
                w->rqueue = m->idiag_rqueue;
            }
            n++;
        }
    }
    free(buf);
    close(nl);
    return done < 0 ? -1 : n;
}
