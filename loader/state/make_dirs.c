/* make_dirs.c — the missing directories of a path made owner-only: a checkpoint's own directory,
 * and at restart the directory of a file or socket name the program had and that is gone. */
#include "make_dirs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int make_dirs(const char *path, int with_last)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *slash = strchr(dir + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return -1;
        *slash = '/';
    }
    return with_last && mkdir(dir, 0700) != 0 && errno != EEXIST ? -1 : 0;
}
