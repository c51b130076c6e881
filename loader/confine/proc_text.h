/* proc_text.h — /proc paths and texts read without libc: a prefix test, a length, a decimal id.
 * TLS-free (confine_procpath.c, confine_procview.c). */
#ifndef CRAC_PROC_TEXT_H
#define CRAC_PROC_TEXT_H

#include <stdint.h>

static inline int proc_starts(const char *s, const char *prefix)
{
    while (*prefix)
        if (*s++ != *prefix++)
            return 0;
    return 1;
}

static inline unsigned proc_length(const char *s)
{
    unsigned n = 0;
    while (s[n])
        n++;
    return n;
}

/* The decimal id at *S (at most 10 digits, advanced past them), -1 when none fits an int32. */
static inline int64_t proc_read_id(const char **s)
{
    const char *p = *s;
    int64_t v = 0;
    while (*p >= '0' && *p <= '9' && p - *s < 10)
        v = v * 10 + (*p++ - '0');
    if (p == *s || v > INT32_MAX)
        return -1;
    *s = p;
    return v;
}

#endif
