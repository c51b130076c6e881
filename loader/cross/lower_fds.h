/* lower_fds.h — file descriptors the lower half keeps open (coordinator socket, wake-up eventfd,
 * backend files): never saved as the program's, and kept at high numbers out of its way. */
#ifndef CRAC_LOWER_FDS_H
#define CRAC_LOWER_FDS_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>

/* The recorded descriptors (the first lower_fd_count slots, at most MAX_LOWER_FDS). */
#define MAX_LOWER_FDS 512
extern volatile int32_t lower_fd_slots[MAX_LOWER_FDS];
extern volatile int32_t lower_fd_count;

/* Grows the descriptor table to hold the numbers lower_fd_adopt uses, while the process has one
 * thread: grown later, with threads sharing it, the kernel waits for an RCU grace period first
 * (milliseconds, longer on a loaded machine: most of an exec'd loader's start). */
void lower_fds_size_table(void);
/* In a forked child: closes what the parent's manager had open for a moment up there when the
 * fork came (a /proc/self/task scan, say), which is neither the child's nor its program's; it
 * was saved as the program's, and its number near RLIMIT_NOFILE then failed the tree's restart. */
void lower_fds_drop_strays(void);
/* Move fd to a high free number (close-on-exec), record it, return the new number or -1. */
int lower_fd_adopt(int fd);
/* Where lower_fd_adopt puts descriptors: just under RLIMIT_NOFILE now, and never under the
 * threshold of the seccomp filter's close() check (lower_fd_low, once it is set). */
int lower_fd_floor(void);
/* The lowest number the filter traps the program's close() at (confine_filter.c), or 0: such a
 * close of one of these descriptors answers EBADF (emu_close, confine_exe.c). */
extern int lower_fd_low;
int lower_fd_is_ours(int fd);
/* Record fd as the lower half's without moving it. */
void lower_fd_record(int fd);
/* No longer the lower half's (closed by it). */
void lower_fd_forget(int fd);

/* The manager's short-lived descriptors (directory scans, image files, /proc reads) are opened
 * while the program's threads may run, at whatever number is free: the program's close_range
 * (Python closes every descriptor in a child before its exec) must not close them under it.
 * lower_fds_hold() waits for the close_ranges in progress and holds new ones back (the trap
 * handler waits in emu_close_range, loader/confine/confine_exe.c) until lower_fds_release().
 * Only around work that never waits for a program thread. */
extern volatile int32_t lower_fd_busy;    /* holds in progress */
extern volatile int32_t lower_fd_closers; /* program threads inside an emulated close_range */
void lower_fds_hold(void);
void lower_fds_release(void);

/* What the manager opens while program threads may run: openat, dup, opendir and fopen(path,
 * "r"), each close-on-exec and moved up to lower_fd_floor(), where the program's close() is
 * trapped and, while the manager holds, waits (emu_close, loader/confine/confine_exe.c). A
 * close-everything loop would otherwise close them at the low numbers open() gives, and its
 * next open() take the number the manager goes on writing to. */
int lower_openat(int dirfd, const char *path, int flags, ...);
#define lower_open(...) lower_openat(AT_FDCWD, __VA_ARGS__)
int lower_dup(int fd);
DIR *lower_opendir(const char *path);
FILE *lower_fopen_read(const char *path);

#endif
