/* lower_fds.h — file descriptors the lower half keeps open (coordinator socket, wake-up eventfd,
 * backend files): never saved as the program's, and kept at high numbers out of its way. */
#ifndef CRAC_LOWER_FDS_H
#define CRAC_LOWER_FDS_H

/* Move fd to a high free number (close-on-exec), record it, return the new number or -1. */
int lower_fd_adopt(int fd);
int lower_fd_is_ours(int fd);
/* The smallest recorded fd >= from, or -1 (TLS-free). */
long lower_fd_next(long from);
/* Record fd as the lower half's without moving it. */
void lower_fd_record(int fd);

#endif
