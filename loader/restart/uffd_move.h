/* uffd_move.h — UFFDIO_MOVE (Linux 6.8) for systems whose kernel headers predate it: the staged
 * restart fill (restart_stage.c) and bench/apps/fill_floor.c use it. */
#ifndef CRAC_UFFD_MOVE_H
#define CRAC_UFFD_MOVE_H

#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#define _UFFDIO_MOVE (0x05)
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
struct uffdio_move {
    __u64 dst, src, len, mode;
    __s64 move;
};
#endif

#endif
