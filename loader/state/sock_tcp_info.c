/* sock_tcp_info.c — what the kernel's TCP_INFO says of a TCP socket whose peer name is gone: a
 * connection finished both ways (its bytes still readable) or a socket never connected. */
#include "fds.h"

#include <linux/tcp.h> /* the kernel's struct tcp_info: glibc's lacks the byte counters */
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

#define TCP_STATE_CLOSE 7 /* the kernel's TCP_CLOSE */

int sock_tcp_was_connected(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || ti.tcpi_state != TCP_STATE_CLOSE ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
        return 0;
    /* Its SYN was acknowledged (a connect that was refused has 0), or bytes came in. */
    return ti.tcpi_bytes_acked > 0 || ti.tcpi_bytes_received > 0;
}
