/* upper_stack.h — the initial stack of the upper half (argv, envp, auxv) inside W. */
#ifndef CRAC_UPPER_STACK_H
#define CRAC_UPPER_STACK_H

#include "elf_load.h"

#include <stddef.h>
#include <stdint.h>

struct upper_start {
    char *const *argv; /* argv for the upper ld.so: [ld.so, options..., program, args...] */
    char *const *envp;
    const struct loaded_elf *interp;
    const char *execfn;
    uint64_t lh_api; /* address of the lower-half API table, passed in a private auxv entry */
    uint64_t vdso;   /* the upper half's vDSO in W (vdso_proxy.c), 0 for none */
};

/* Build the stack in W; returns the initial stack pointer, or 0 with a message in err. */
uint64_t upper_stack_build(const struct upper_start *s, char *err, size_t errlen);

#endif
