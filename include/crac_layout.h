/* crac_layout.h — the fixed address-space layout shared by the loader and the upper runtime.
 * docs/ARCHITECTURE.md "Windows": W holds every upper-half mapping, D every device virtual address. */
#ifndef CRAC_LAYOUT_H
#define CRAC_LAYOUT_H

/* W is 4 GiB-aligned so the seccomp filter can decide "inside W" on the high 32 bits of rip. */
#define CRAC_W_START 0x200000000000UL
#define CRAC_W_END 0x300000000000UL
#define CRAC_D_START 0x300000000000UL
#define CRAC_D_END 0x340000000000UL

/* Inside W: the control block (allocator and signal state, saved with the upper half), then the
 * emulated brk range, then everything the first-fit allocator hands out. */
#define CRAC_CTRL_START CRAC_W_START
#define CRAC_CTRL_SIZE (16UL << 20)
#define CRAC_BRK_START (CRAC_W_START + CRAC_CTRL_SIZE)
#define CRAC_BRK_MAX (1UL << 40)
#define CRAC_ALLOC_START (CRAC_BRK_START + CRAC_BRK_MAX)

#define CRAC_PAGE 4096UL

/* Signals the program can neither take nor block (docs/ARCHITECTURE.md "Checkpoint"). */
#define CRAC_SIG_SUSPEND 62
#define CRAC_SIG_CKPT_DEFAULT 12 /* SIGUSR2, as DMTCP */

/* Private auxv entry carrying the lower-half API table to the upper runtime (ld.so ignores it,
 * getauxval() returns it). */
#define CRAC_AT_LH_API 0x43524143UL

#endif
