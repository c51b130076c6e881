/* lower_fds.h — file descriptors the lower half keeps open (coordinator socket, wake-up eventfd,
 * backend files): never saved as the program's, and kept at high numbers out of its way. */
#ifndef CRAC_LOWER_FDS_H
#define CRAC_LOWER_FDS_H

#include <stdint.h>

/* The recorded descriptors (the first lower_fd_count slots, at most MAX_LOWER_FDS). */
#define MAX_LOWER_FDS 512
extern volatile int32_t lower_fd_slots[MAX_LOWER_FDS];
extern volatile int32_t lower_fd_count;

/* Move fd to a high free number (close-on-exec), record it, return the new number or -1. */
int lower_fd_adopt(int fd);
int lower_fd_is_ours(int fd);
/* Record fd as the lower half's without moving it. */
void lower_fd_record(int fd);
/* No longer the lower half's (closed by it). */
void lower_fd_forget(int fd);

#endif
