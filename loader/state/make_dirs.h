/* make_dirs.h — directories made where a checkpoint or a restart needs them and they are gone
 * (make_dirs.c). */
#ifndef CRAC_MAKE_DIRS_H
#define CRAC_MAKE_DIRS_H

/* The missing directories above PATH made, and PATH too when WITH_LAST, owner-only (who else may
 * read them is not known). 0, or -1 with errno. */
int make_dirs(const char *path, int with_last);

#endif
