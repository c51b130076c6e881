/* confine.h — keeping the upper half inside W: the seccomp filter and its SIGSYS handler.
 * DESIGN §3. */
#ifndef CRAC_CONFINE_H
#define CRAC_CONFINE_H

/* Install the SIGSYS handler (before the filter). Returns 0 or -errno. */
int confine_install_handler(void);
/* Install the seccomp filter on every thread of the process. virtual_ids: also trap the calls
 * that take or return process and thread ids (after a restart). Returns 0 or -errno. */
int confine_install_filter(int virtual_ids);
/* Map [addr, addr+len) inside W as the allocator would, for the loader's own placements. */
long confine_place(unsigned long len, int prot, int flags, int fd, long off);

#endif
