/* fsgsbase.h — whether this kernel lets user code write fs itself (wrfsbase), read once at start
 * so the TLS-free fs switches need no libc. */
#ifndef CRAC_FSGSBASE_H
#define CRAC_FSGSBASE_H

/* 1: wrfsbase works (HWCAP2_FSGSBASE); 0: switch fs with arch_prctl. Set by a constructor. */
extern int crac_fsgsbase;

#endif
