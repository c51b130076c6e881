/* upper_hooks.c — runs the upper runtime's hooks of one event (include/crac_hooks.h) on a lower
 * thread while every upper thread is parked (fs switched to a parked thread's TCB; the hooks' own
 * crossings skip the checkpoint gate), and asks its hook thread for PRE_SUSPEND. The code between
 * the two fs switches is TLS-free. */
#include "upper_hooks.h"

#include "crac_rawsys.h"

#include <stdio.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>

#define ARCH_SET_FS 0x1002

typedef int (*hook_fn)(int event);

#define PRE_SUSPEND_TIMEOUT_MS 60000

static inline uint64_t read_fs(void)
{
    uint64_t self;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(self));
    return self;
}

static inline void write_fs(uint64_t fs, int fsgsbase)
{
    if (fsgsbase)
        __asm__ volatile("wrfsbase %0" : : "r"(fs) : "memory");
    else
        raw_syscall2(SYS_arch_prctl, ARCH_SET_FS, fs);
}

__attribute__((noinline)) static int call_with_fs(hook_fn fn, int event, uint64_t fs, int fsgsbase)
{
    uint64_t mine = read_fs();
    write_fs(fs, fsgsbase);
    int rc = fn(event);
    write_fs(mine, fsgsbase);
    return rc;
}

static const struct crac_hook_ctl *hook_ctl(const struct crac_registry *r, enum crac_event event)
{
    const struct crac_hook_ctl *ctl = (const struct crac_hook_ctl *)r->hooks;
    return ctl && ctl->dispatch && (ctl->events & (1u << event)) ? ctl : NULL;
}

int upper_hook_run(struct crac_registry *r, enum crac_event event, uint64_t upper_fs)
{
    const struct crac_hook_ctl *ctl = hook_ctl(r, event);
    if (!ctl || !upper_fs)
        return 0;
    int fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0;
    __atomic_store_n(&r->in_hook, 1, __ATOMIC_SEQ_CST);
    int rc = call_with_fs((hook_fn)ctl->dispatch, event, upper_fs, fsgsbase);
    __atomic_store_n(&r->in_hook, 0, __ATOMIC_SEQ_CST);
    return rc;
}

/* The hook thread is an ordinary upper thread: it may be slow to get the CPU on a loaded machine,
 * and a PRE_SUSPEND hook may drain real work, hence the generous wait. */
int upper_hooks_pre_suspend(struct crac_registry *r)
{
    struct crac_hook_ctl *ctl = (struct crac_hook_ctl *)hook_ctl(r, CRAC_EV_PRE_SUSPEND);
    if (!ctl)
        return 0;
    int32_t want = __atomic_add_fetch(&ctl->req, 1, __ATOMIC_SEQ_CST);
    raw_futex_wake(&ctl->req, 1);
    for (int waited = 0; waited < PRE_SUSPEND_TIMEOUT_MS; waited += 50) {
        int32_t done = __atomic_load_n(&ctl->done, __ATOMIC_ACQUIRE);
        if (done == want)
            return __atomic_load_n(&ctl->rc, __ATOMIC_ACQUIRE);
        struct timespec t = {0, 50 * 1000000L};
        raw_futex_wait(&ctl->done, done, &t);
    }
    fprintf(stderr, "crac: error: the PRE_SUSPEND hooks did not finish within %d s\n",
            PRE_SUSPEND_TIMEOUT_MS / 1000);
    return -1;
}
