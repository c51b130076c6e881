/* confine_listen.c — the program's listen() on a TCP socket gets SO_REUSEADDR first, so a restart
 * can listen on its address again at once (docs/DECISIONS.md). TLS-free (SIGSYS handler). */
#include "confine.h"

#include "crac_rawsys.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static int sock_opt(long fd, int name)
{
    int v = 0;
    socklen_t len = sizeof(v);
    return raw_syscall6(SYS_getsockopt, fd, SOL_SOCKET, name, (long)&v, (long)&len, 0) == 0 ? v
                                                                                            : -1;
}

/* The connections a listener accepts inherit its SO_REUSEADDR, and so do the TIME_WAIT sockets
 * they leave when the program or a SIGKILL closes them first. Without it (Python's socketserver
 * by default) a restart within the minute those linger could not listen on the address again:
 * the kernel refuses it while a lingering socket without SO_REUSEADDR holds the port. The
 * program then reads SO_REUSEADDR as 1, and may bind a socket of its own over such lingering
 * ones where it would have got EADDRINUSE. */
long emu_listen(long fd, long backlog)
{
    int domain = sock_opt(fd, SO_DOMAIN);
    if ((domain == AF_INET || domain == AF_INET6) && sock_opt(fd, SO_TYPE) == SOCK_STREAM &&
        sock_opt(fd, SO_REUSEADDR) == 0) {
        int one = 1;
        raw_syscall6(SYS_setsockopt, fd, SOL_SOCKET, SO_REUSEADDR, (long)&one, sizeof(one), 0);
    }
    return raw_syscall6(SYS_listen, fd, backlog, 0, 0, 0, 0);
}
