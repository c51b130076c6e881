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

/* The checkpoint signal's number sent by a program under crac to another crac process goes as a
 * queued signal (si_code SI_QUEUE) with si_errno CRAC_PEER_SIG_MARK | kind, which the kernel never
 * sets: that process gives it to its program's handler, passing it on to a program thread as
 * CRAC_SIG_SUSPEND with the same marks (docs/DECISIONS.md "A program's checkpoint-numbered
 * signal to another process"). */
#define CRAC_PEER_SIG_MARK 0x43520000
enum { CRAC_PEER_KILL = 1, CRAC_PEER_TGKILL = 2, CRAC_PEER_QUEUE = 3 };
static inline int crac_peer_sig_marked(int si_code, int si_errno)
{
    return si_code == -1 /* SI_QUEUE */ && (si_errno & ~0xff) == CRAC_PEER_SIG_MARK;
}

/* Private auxv entry carrying the lower-half API table to the upper runtime (ld.so ignores it,
 * getauxval() returns it). */
#define CRAC_AT_LH_API 0x43524143UL

#endif
