/* hooks_lib.c — an upper-half library for test_hooks.py: registers named hooks at every event of
 * include/crac_hooks.h with different orders and appends "EVENT name" to a log file per call. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../include/crac_hooks.h"

/* Weak: natively (no libcrac-upper.so) nothing is registered and the log stays empty. */
extern int crac_upper_hook_register(const char *name, enum crac_event event, int order,
                                    unsigned flags, crac_hook_fn fn, void *arg)
    __attribute__((weak));

static char log_path[4096];
static const char *const names[] = {"PRE_SUSPEND", "PARKED", "PRE_RESUME", "RESTART"};

/* open/write/close per call: no stdio (its locks may be held by a parked thread), no fd kept. */
static void log_line(const char *line)
{
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    (void)!write(fd, line, strlen(line));
    close(fd);
}

static int hook(enum crac_event event, void *arg)
{
    const char *name = arg;
    char line[128];
    /* The name says which event the hook was registered for: "ps.", "pk.", "pr.", "rs.". */
    static const char *const prefix[] = {"ps.", "pk.", "pr.", "rs."};
    if ((unsigned)event > CRAC_EV_RESTART || strncmp(name, prefix[event], 3) != 0)
        snprintf(line, sizeof(line), "WRONG-EVENT %d %s\n", (int)event, name);
    else
        snprintf(line, sizeof(line), "%s %s\n", names[event], name);
    log_line(line);
    /* HOOKS_FAIL=NAME: that hook fails (the checkpoint must be abandoned, the program go on). */
    const char *fail = getenv("HOOKS_FAIL");
    return fail && strcmp(fail, name) == 0 ? 1 : 0;
}

static int reg(const char *name, enum crac_event event, int order, unsigned flags)
{
    return crac_upper_hook_register(name, event, order, flags, hook, (void *)name);
}

/* Registered out of order on purpose: the log must come out by order, ties by registration. */
int hooks_lib_init(const char *path)
{
    if (!crac_upper_hook_register)
        return -1;
    snprintf(log_path, sizeof(log_path), "%s", path);
    int bad = 0;
    bad |= reg("ps.b", CRAC_EV_PRE_SUSPEND, 20, 0);
    bad |= reg("ps.a", CRAC_EV_PRE_SUSPEND, 10, 0);
    bad |= reg("ps.c", CRAC_EV_PRE_SUSPEND, 10, 0);
    bad |= reg("pk.late", CRAC_EV_PARKED, 5, CRAC_HOOK_BARRIER);
    bad |= reg("pk.early", CRAC_EV_PARKED, -5, 0);
    bad |= reg("pr.x", CRAC_EV_PRE_RESUME, 1, 0);
    bad |= reg("pr.y", CRAC_EV_PRE_RESUME, 0, CRAC_HOOK_BARRIER);
    bad |= reg("rs.2", CRAC_EV_RESTART, 2, 0);
    bad |= reg("rs.1", CRAC_EV_RESTART, 1, 0);
    /* No coordinator phase after PRE_SUSPEND or RESTART yet: a barrier there is refused. */
    if (reg("ps.barrier", CRAC_EV_PRE_SUSPEND, 0, CRAC_HOOK_BARRIER) == 0 ||
        reg("rs.barrier", CRAC_EV_RESTART, 0, CRAC_HOOK_BARRIER) == 0 ||
        reg("bad.event", (enum crac_event)7, 0, 0) == 0)
        bad = 1;
    if (bad)
        log_line("REGISTRATION-FAILED\n");
    return bad ? -2 : 0;
}
