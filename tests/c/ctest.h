/* ctest.h — the checks of crac's C unit tests (tests/test_c_units.py compiles and runs them).
 * CHECK records a failure with its line and goes on; ctest_done prints the summary and the exit. */
#ifndef CRAC_CTEST_H
#define CRAC_CTEST_H

#include <stdio.h>

static int ctest_passed, ctest_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            ctest_passed++;                                                                        \
        } else {                                                                                   \
            ctest_failed++;                                                                        \
            printf("not ok: %s:%d: %s\n", __FILE__, __LINE__, #cond);                              \
        }                                                                                          \
    } while (0)

/* The line the pytest wrapper reads; non-zero exit when anything failed. */
static inline int ctest_done(void)
{
    printf("%d passed, %d failed\n", ctest_passed, ctest_failed);
    return ctest_failed ? 1 : 0;
}

#endif
