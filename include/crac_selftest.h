/* crac_selftest.h — self-test entry points of the upper runtime, used by tests/apps/crossing.c.
 * They demonstrate the crossing (fs switch) and what happens without it (docs/ARCHITECTURE.md "Traps", the first). */
#ifndef CRAC_SELFTEST_H
#define CRAC_SELFTEST_H

void *crac_selftest_cross(int switch_fs, unsigned long value);
int crac_selftest_lower_libc(void);

#endif
