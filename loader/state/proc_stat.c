/* proc_stat.c — numeric fields of /proc/PID/stat (a process's start time, its controlling
 * terminal), read past the command name, which may hold spaces and parentheses. */
#include "state.h"

#include "lower_fds.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t proc_read_text(const char *path, char *buf, size_t len)
{
    int fd = lower_open(path, O_RDONLY | O_CLOEXEC); /* the program may run on */
    ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

int proc_stat_fields(int pid, int first, int count, long long *values)
{
    char path[64], buf[1024];
    if (pid)
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    else
        snprintf(path, sizeof(path), "/proc/self/stat");
    if (proc_read_text(path, buf, sizeof(buf)) <= 0 || first < 3)
        return -1;
    const char *p = strrchr(buf, ')'); /* field 2 ends there */
    for (int at = 2; p && at < first; at++)
        p = strchr(p + 1, ' ');
    for (int i = 0; p && i < count; i++) {
        char *end;
        values[i] = strtoll(p + 1, &end, 10);
        if (end == p + 1)
            return -1;
        p = end;
    }
    return p ? 0 : -1;
}
