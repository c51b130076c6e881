/* vdso_proxy.h — the upper half's vDSO: a small ELF image in W whose functions forward to the
 * real vDSO of whichever process runs them (docs/DECISIONS.md "The upper half's vDSO"). */
#ifndef CRAC_VDSO_PROXY_H
#define CRAC_VDSO_PROXY_H

#include "crac_layout.h"

#include <elf.h>
#include <stdint.h>

/* Fixed in W, below the signal wrapper's table: page 0 the ELF headers and symbols, page 1 the
 * forwarding stubs. A restart brings both back at the same address with the rest of W. */
#define VDSO_PROXY_ADDR (CRAC_W_END - 4 * CRAC_PAGE)
#define VDSO_PROXY_CODE (VDSO_PROXY_ADDR + CRAC_PAGE)
#define VDSO_PROXY_PAGES 2

/* Where the real vDSO's code [lo, hi) has its canonical frame address (CFA: the caller's rsp
 * before the call; the return address at CFA - 8): cfa_reg (DWARF 7 rsp or 6 rbp; -1 not known)
 * plus cfa_off; rbp_saved: the caller's rbp at CFA + rbp_saved, 0 when rbp is still the caller's. */
struct vdso_cfa_row {
    uint64_t lo, hi;
    int8_t cfa_reg;
    int32_t cfa_off, rbp_saved;
};
#define VDSO_CFA_ROWS 256

/* What the rollback needs, in the loader's data (fixed address: the loader is not PIE), set by
 * vdso_proxy_bind in every process before the program runs. */
struct vdso_proxy_state {
    uint64_t text_lo, text_hi; /* the real vDSO's code; 0, 0 when the process has none */
    int32_t n_rows;            /* > 0 whenever text_hi is set: no unwinding, no proxy */
    struct vdso_cfa_row rows[VDSO_CFA_ROWS];
};
extern struct vdso_proxy_state vdso_proxy;

/* The stubs' code (vdso_stubs.c), in the loader's read-only data, copied into W: its bounds and,
 * per function, its entry (e), the return address of its call (r) and its system call (f). */
extern const char crac_vdso_stubs[], crac_vdso_stubs_end[];
extern const char crac_vdso_e_clock_gettime[], crac_vdso_r_clock_gettime[],
    crac_vdso_f_clock_gettime[];
extern const char crac_vdso_e_gettimeofday[], crac_vdso_r_gettimeofday[],
    crac_vdso_f_gettimeofday[];
extern const char crac_vdso_e_time[], crac_vdso_r_time[], crac_vdso_f_time[];
extern const char crac_vdso_e_clock_getres[], crac_vdso_r_clock_getres[],
    crac_vdso_f_clock_getres[];
extern const char crac_vdso_e_getcpu[], crac_vdso_r_getcpu[], crac_vdso_f_getcpu[];

/* Point the stubs at this process's real vDSO (each missing function at its system call). Called
 * by every loader process, launch and restart, before any upper code runs. */
void vdso_proxy_bind(void);
/* The rows of the vDSO at e (loaded at base) from its .eh_frame: how many, or -1 when it has
 * none this reader follows. */
int vdso_cfi_read(const Elf64_Ehdr *e, uint64_t base, struct vdso_cfa_row *rows, int max);
/* Launch: map and fill the image in W; its address for AT_SYSINFO_EHDR, or 0 (no real vDSO here,
 * or CRAC_NO_VDSO=1: the upper libc then makes system calls, as before). */
uint64_t vdso_proxy_map(void);
/* A thread interrupted (ucontext) inside the real vDSO, called from a stub: rewind it to the
 * stub's entry with the arguments and callee-saved registers the stub kept, so that it calls again
 * rather than resume in code a restart does not bring back. 1 rewound, 0 nothing to do.
 * TLS-free (the signal wrapper calls it). */
int vdso_proxy_rollback(void *ucontext);

#endif
