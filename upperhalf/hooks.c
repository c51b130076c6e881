/* hooks.c — the named, ordered hooks upper-half libraries register (include/crac_hooks.h): the
 * table, the dispatcher the lower half calls per event, and the hook thread PRE_SUSPEND runs on.
 * PARKED/PRE_RESUME/RESTART run on a lower thread with a parked thread's TCB: errno is saved. */
#include "crac.h"
#include "crac_hooks.h"

#include "upper_runtime.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_HOOKS 32

struct hook {
    char name[48];
    int event, order;
    unsigned seq; /* registration order: the tie-break */
    crac_hook_fn fn;
    void *arg;
};

static struct hook table[MAX_HOOKS]; /* kept sorted by (event, order, seq) */
static int n_hooks;
static unsigned next_seq;
static int debug = -1;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct crac_hook_ctl ctl;

static const char *const event_names[CRAC_EV_COUNT] = {"PRE_SUSPEND", "PARKED", "PRE_RESUME",
                                                       "RESTART"};

/* CRAC_DEBUG=1: one line per hook call, so the order is visible. snprintf + write: stdio's
 * locks may be held by a parked thread. */
static void log_call(const struct hook *h, int rc)
{
    char line[160];
    int n = snprintf(line, sizeof(line), "crac: debug: hook %s %s (order %d) -> %d\n",
                     event_names[h->event], h->name, h->order, rc);
    if (n > 0)
        (void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* Called by the lower half (ctl.dispatch) and by the hook thread. Stops at the first failure,
 * except PRE_RESUME, where every hook runs: the threads resume whatever they answer. */
static int dispatch(int event)
{
    int saved = errno, rc = 0;
    for (int i = 0; i < n_hooks; i++) {
        if (table[i].event != event)
            continue;
        int r = table[i].fn((enum crac_event)event, table[i].arg);
        if (debug > 0)
            log_call(&table[i], r);
        if (r != 0 && rc == 0)
            rc = r;
        if (rc != 0 && event != CRAC_EV_PRE_RESUME)
            break;
    }
    errno = saved;
    return rc;
}

static long futex(volatile int32_t *addr, int op, int32_t val)
{
    return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* PRE_SUSPEND runs while every thread still runs, so it needs a thread of its own (DMTCP's
 * checkpoint thread plays this part): it waits for the lower half to bump `req`, runs the hooks
 * and publishes `done`. It is an ordinary upper thread, parked and restored with the others. */
static void *hook_thread(void *unused)
{
    (void)unused;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* the program's signals go to its own threads */
    for (;;) {
        int32_t seen = __atomic_load_n(&ctl.done, __ATOMIC_ACQUIRE);
        int32_t req = __atomic_load_n(&ctl.req, __ATOMIC_ACQUIRE);
        if (req == seen) {
            futex(&ctl.req, FUTEX_WAIT_PRIVATE, req);
            continue;
        }
        ctl.rc = dispatch(CRAC_EV_PRE_SUSPEND);
        __atomic_store_n(&ctl.done, req, __ATOMIC_RELEASE);
        futex(&ctl.done, FUTEX_WAKE_PRIVATE, 0x7fffffff);
    }
    return NULL;
}

/* A forked child has no hook thread: it skips PRE_SUSPEND rather than wait for one. */
static void at_fork_child(void) { ctl.events &= ~(1u << CRAC_EV_PRE_SUSPEND); }

static int start_hook_thread(void)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, hook_thread, NULL);
    pthread_attr_destroy(&a);
    if (rc == 0)
        pthread_atfork(NULL, NULL, at_fork_child);
    return rc == 0 ? 0 : -1;
}

int crac_upper_hook_register(const char *name, enum crac_event event, int order, unsigned flags,
                             crac_hook_fn fn, void *arg)
{
    if (!fn || (unsigned)event >= CRAC_EV_COUNT || (flags & ~CRAC_HOOK_BARRIER) ||
        ((flags & CRAC_HOOK_BARRIER) && event != CRAC_EV_PARKED && event != CRAC_EV_PRE_RESUME))
        return -1;
    pthread_mutex_lock(&reg_lock);
    int rc = -1;
    if (n_hooks >= MAX_HOOKS)
        goto out;
    if (event == CRAC_EV_PRE_SUSPEND && !(ctl.events & (1u << CRAC_EV_PRE_SUSPEND)) &&
        start_hook_thread() != 0)
        goto out;
    if (debug < 0) {
        const char *d = getenv("CRAC_DEBUG");
        debug = d && *d && strcmp(d, "0") != 0;
    }
    struct hook h = {.event = event, .order = order, .seq = next_seq++, .fn = fn, .arg = arg};
    snprintf(h.name, sizeof(h.name), "%s", name && *name ? name : "?");
    int at = n_hooks;
    while (at > 0 && (table[at - 1].event > h.event ||
                      (table[at - 1].event == h.event && table[at - 1].order > h.order)))
        at--;
    memmove(&table[at + 1], &table[at], (size_t)(n_hooks - at) * sizeof(table[0]));
    table[at] = h;
    n_hooks++;
    ctl.events |= 1u << event;
    if (flags & CRAC_HOOK_BARRIER)
        ctl.barriers |= 1u << event;
    ctl.dispatch = (uint64_t)dispatch;
    crac_registry.hooks = (uint64_t)&ctl;
    if (debug > 0) {
        char line[160];
        int n = snprintf(line, sizeof(line), "crac: debug: hook %s %s (order %d) registered\n",
                         event_names[event], h.name, order);
        if (n > 0)
            (void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    }
    rc = 0;
out:
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

/* The first interface, kept for its callers: fn at PARKED / RESTART, order 0. */
typedef int (*crac_hook)(void);

static int call_plain(enum crac_event event, void *arg)
{
    (void)event;
    return ((crac_hook)arg)();
}

int crac_upper_at_checkpoint(crac_hook fn)
{
    return crac_upper_hook_register("at_checkpoint", CRAC_EV_PARKED, 0, 0, call_plain, (void *)fn);
}

int crac_upper_at_restart(crac_hook fn)
{
    return crac_upper_hook_register("at_restart", CRAC_EV_RESTART, 0, 0, call_plain, (void *)fn);
}

/* The shim's device registry (struct crac_dev_ranges), read by the lower half at checkpoints. */
void crac_upper_set_device_ranges(const void *ranges)
{
    crac_registry.device_ranges = (uint64_t)ranges;
}
