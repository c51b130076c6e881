/* vdso_stubs.c — the code of the upper half's vDSO (copied into W by vdso_proxy.c) and the
 * rollback of a call a signal interrupted inside the real vDSO. TLS-free: raw code only. */
#include "vdso_proxy.h"

#include "confine.h"
#include "crac_layout.h"

#include <stdint.h>
#include <ucontext.h>

/* Each stub keeps its arguments and the callee-saved registers on the stack, then calls the real
 * function through its slot (crac_vdso_slots, in the loader's data: the same address in every
 * process of this loader build, filled by vdso_proxy_bind). While the real code runs, that frame
 * is everything needed to call again from the start. A clock id the program's CPU clocks use
 * (negative, or 2 and 3) is a system call from W, trapped as it was without a vDSO
 * (docs/DECISIONS.md "CPU-time clocks"); so is a function this kernel's vDSO lacks (its slot
 * points at the stub's own system call). 9 pushes: the call is made with rsp 16-byte aligned. */
#define STUB_SAVED 9
__asm__(".pushsection .rodata.crac_vdso,\"a\"\n"
        ".balign 4096\n"
        ".globl crac_vdso_stubs\n"
        "crac_vdso_stubs:\n"
        ".macro CRAC_VDSO_STUB name, slot, nr, clock\n"
        ".globl crac_vdso_e_\\name\n"
        "crac_vdso_e_\\name:\n"
        ".if \\clock\n"
        "    test %edi, %edi\n"
        "    js 8f\n"
        "    cmp $2, %edi\n"
        "    je 8f\n"
        "    cmp $3, %edi\n"
        "    je 8f\n"
        ".endif\n"
        "    push %rbx\n"
        "    push %rbp\n"
        "    push %r12\n"
        "    push %r13\n"
        "    push %r14\n"
        "    push %r15\n"
        "    push %rdi\n"
        "    push %rsi\n"
        "    push %rdx\n"
        "    movabs $crac_vdso_slots + 8 * \\slot, %rax\n"
        "    call *(%rax)\n"
        ".globl crac_vdso_r_\\name\n"
        "crac_vdso_r_\\name:\n"
        "    add $72, %rsp\n"
        "    ret\n"
        ".globl crac_vdso_f_\\name\n"
        "crac_vdso_f_\\name:\n"
        "8:  mov $\\nr, %eax\n"
        "    syscall\n"
        "    ret\n"
        ".endm\n"
        "CRAC_VDSO_STUB clock_gettime, 0, 228, 1\n"
        "CRAC_VDSO_STUB gettimeofday, 1, 96, 0\n"
        "CRAC_VDSO_STUB time, 2, 201, 0\n"
        "CRAC_VDSO_STUB clock_getres, 3, 229, 1\n"
        "CRAC_VDSO_STUB getcpu, 4, 309, 0\n"
        ".globl crac_vdso_stubs_end\n"
        "crac_vdso_stubs_end:\n"
        ".popsection\n");

struct vdso_proxy_state vdso_proxy;

/* The real functions call each other a level or two deep at most. */
#define UNWIND_DEPTH 4

static const struct vdso_cfa_row *row_at(uint64_t ip)
{
    for (int i = 0; i < vdso_proxy.n_rows; i++)
        if (ip >= vdso_proxy.rows[i].lo && ip < vdso_proxy.rows[i].hi)
            return &vdso_proxy.rows[i];
    return 0;
}

/* Unwinds from the interrupted instruction through the real vDSO's frames by its call frame
 * information (vdso_cfi.c) to the stub's call: the return address there must be a stub's, and
 * the stub's kept registers lie right above it. Only the live frame is read: a scan of the stack
 * for the return address found stale copies below it (an earlier call from a deeper frame, a
 * signal frame's saved rip) and restored registers from the wrong words. */
int vdso_proxy_rollback(void *ucontext)
{
    greg_t *g = ((ucontext_t *)ucontext)->uc_mcontext.gregs;
    uint64_t ip = (uint64_t)g[REG_RIP], sp = (uint64_t)g[REG_RSP], bp = (uint64_t)g[REG_RBP];
    if (ip < vdso_proxy.text_lo || ip >= vdso_proxy.text_hi)
        return 0;
    static const char *const entry[] = {crac_vdso_e_clock_gettime, crac_vdso_e_gettimeofday,
                                        crac_vdso_e_time, crac_vdso_e_clock_getres,
                                        crac_vdso_e_getcpu};
    static const char *const ret[] = {crac_vdso_r_clock_gettime, crac_vdso_r_gettimeofday,
                                      crac_vdso_r_time, crac_vdso_r_clock_getres,
                                      crac_vdso_r_getcpu};
    for (int depth = 0; depth < UNWIND_DEPTH; depth++) {
        const struct vdso_cfa_row *row = row_at(ip);
        if (!row || row->cfa_reg < 0)
            return 0;
        uint64_t cfa = (row->cfa_reg == 7 ? sp : bp) + (uint64_t)(int64_t)row->cfa_off;
        uint64_t w[1 + STUB_SAVED]; /* the return address, then what the stub pushed */
        if (confine_from_user(w, (const void *)(cfa - 8), sizeof(w)) != 0)
            return 0;
        if (row->rbp_saved &&
            confine_from_user(&bp, (const void *)(cfa + (uint64_t)(int64_t)row->rbp_saved),
                              sizeof(bp)) != 0)
            return 0;
        if (w[0] >= vdso_proxy.text_lo && w[0] < vdso_proxy.text_hi) {
            ip = w[0]; /* called from another real function: one frame out */
            sp = cfa;
            continue;
        }
        for (int s = 0; s < (int)(sizeof(ret) / sizeof(ret[0])); s++) {
            if (w[0] != VDSO_PROXY_CODE + (uint64_t)(ret[s] - crac_vdso_stubs))
                continue;
            const uint64_t *f = &w[1]; /* pushed last first: rdx, rsi, rdi, r15... */
            g[REG_RDX] = (greg_t)f[0];
            g[REG_RSI] = (greg_t)f[1];
            g[REG_RDI] = (greg_t)f[2];
            g[REG_R15] = (greg_t)f[3];
            g[REG_R14] = (greg_t)f[4];
            g[REG_R13] = (greg_t)f[5];
            g[REG_R12] = (greg_t)f[6];
            g[REG_RBP] = (greg_t)f[7];
            g[REG_RBX] = (greg_t)f[8];
            g[REG_RSP] = (greg_t)(cfa + 8 * STUB_SAVED);
            g[REG_RIP] = (greg_t)(VDSO_PROXY_CODE + (uint64_t)(entry[s] - crac_vdso_stubs));
            return 1;
        }
        return 0; /* not called through a stub: left alone */
    }
    return 0;
}
