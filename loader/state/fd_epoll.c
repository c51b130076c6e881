/* fd_epoll.c — epoll instances: the interest list (fd, events, data) saved from fdinfo at
 * checkpoint (files/epoll-<fd>); at restart a new instance, filled once every fd is back. */
#include "fds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static int epoll_recognise(int fd, const struct fd_entry *e, const struct stat *st)
{
    (void)fd, (void)st;
    return strcmp(e->path, "anon_inode:[eventpoll]") == 0;
}

/* fdinfo has a line per registration: "tfd: N events: HEX data: HEX pos:P ino:HEX sdev:HEX".
 * N is the number the file was registered under; the registration lives as long as that file
 * does, so when N was closed (or now names another file: its inode differs) the registration
 * cannot be made again by number: a loss line, and it is left out. */
static int epoll_save(struct fd_entry *e, const struct fd_entry *all, int n, const char *files_dir)
{
    (void)all, (void)n;
    char *info = fd_fdinfo(e->rec.fd);
    if (!info) {
        fprintf(stderr, "crac: error: cannot read the epoll fd %d\n", e->rec.fd);
        return -1;
    }
    size_t cap = strlen(info) + 1, len = 0;
    char *text = malloc(cap);
    if (!text) {
        free(info);
        return -1;
    }
    text[0] = '\0';
    for (const char *line = fd_info_field(info, "tfd:"); line; line = fd_info_field(line, "tfd:")) {
        int tfd;
        unsigned events;
        unsigned long long data, ino;
        if (sscanf(line, " %d events: %x data: %llx pos:%*s ino:%llx", &tfd, &events, &data,
                   &ino) != 4)
            continue;
        struct stat st;
        if (fstat(tfd, &st) != 0 || (unsigned long long)st.st_ino != ino) {
            state_loss("epoll fd %d: its registration of fd %d (closed since) cannot be saved",
                       e->rec.fd, tfd);
            continue;
        }
        /* Each saved line is shorter than the fdinfo line it comes from. */
        len += (size_t)snprintf(text + len, cap - len, "fd %d events %x data %llx\n", tfd, events,
                                data);
    }
    free(info);
    int rc = fd_save_text(e, files_dir, "epoll", text);
    free(text);
    return rc;
}

static int epoll_reopen(const struct fd_restore *r, const struct fd_view *v)
{
    (void)r;
    int fd = epoll_create1(EPOLL_CLOEXEC);
    return fd < 0 ? -1 : fd_install(fd, &v->rec);
}

/* Every fd is back at its number: registered again in the saved order (fds.c calls this after
 * every reopen). The events word keeps
 * EPOLLET, EPOLLONESHOT (a fired one-shot registration has no event bits left, and stays so). */
static int epoll_finish(const struct fd_restore *r, const struct fd_view *v)
{
    char *text = fd_read_text(r, v, "epoll");
    if (!text)
        return -1;
    int rc = 0;
    for (char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : 0) {
        int tfd;
        unsigned events;
        unsigned long long data;
        if (sscanf(line, "fd %d events %x data %llx", &tfd, &events, &data) != 3) {
            snprintf(r->err, r->errlen, "fd %d (epoll): image corrupted: bad saved registration",
                     v->rec.fd);
            rc = -1;
            break;
        }
        struct epoll_event ev = {.events = events, .data.u64 = data};
        /* A target that came back as something else (/dev/null for what cannot be restored)
         * may refuse: the rest of the program still runs, so a warning, not a failed restart. */
        if (epoll_ctl(v->rec.fd, EPOLL_CTL_ADD, tfd, &ev) != 0)
            fprintf(stderr, "crac: warning: epoll fd %d: fd %d cannot be registered again: %s\n",
                    v->rec.fd, tfd, strerror(errno));
    }
    free(text);
    return rc;
}

const struct fd_ops fd_epoll_ops = {.kind = CRAC_FD_EPOLL,
                                    .name = "epoll",
                                    .recognise = epoll_recognise,
                                    .save = epoll_save,
                                    .reopen = epoll_reopen,
                                    .finish = epoll_finish};
