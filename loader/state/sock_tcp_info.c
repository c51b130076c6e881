/* sock_tcp_info.c — what the kernel's TCP_INFO says of a TCP socket: which ends of a connection
 * finished sending; whether one with no peer name left had a connection (its bytes readable). */
#include "fds.h"

#include <linux/tcp.h> /* the kernel's struct tcp_info: glibc's lacks the byte counters */
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

/* The kernel's TCP states (include/net/tcp_states.h; not in the uapi headers). */
enum {
    STATE_FIN_WAIT1 = 4,
    STATE_FIN_WAIT2 = 5,
    STATE_CLOSE = 7,
    STATE_CLOSE_WAIT = 8,
    STATE_LAST_ACK = 9,
    STATE_CLOSING = 11,
};

static int tcp_info_of(int fd, struct tcp_info *ti, socklen_t *len)
{
    *len = sizeof(*ti);
    memset(ti, 0, sizeof(*ti));
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, len);
}

int sock_tcp_shut(int fd)
{
    struct tcp_info ti;
    socklen_t len;
    if (tcp_info_of(fd, &ti, &len) != 0)
        return 0;
    switch (ti.tcpi_state) {
    case STATE_CLOSE_WAIT: return PEER_DONE;
    case STATE_FIN_WAIT1:
    case STATE_FIN_WAIT2: return SELF_DONE;
    case STATE_LAST_ACK:
    case STATE_CLOSING: return PEER_DONE | SELF_DONE;
    default: return 0;
    }
}

int sock_tcp_was_connected(int fd)
{
    struct tcp_info ti;
    socklen_t len;
    if (tcp_info_of(fd, &ti, &len) != 0 || ti.tcpi_state != STATE_CLOSE ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
        return 0;
    /* Its SYN was acknowledged (a connect that was refused has 0), or bytes came in. */
    return ti.tcpi_bytes_acked > 0 || ti.tcpi_bytes_received > 0;
}
