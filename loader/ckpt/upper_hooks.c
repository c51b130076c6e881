/* upper_hooks.c — runs one of the upper runtime's hooks (registry ckpt_hook / restart_hook) on a
 * lower-half thread while every upper thread is parked: fs is switched to a parked thread's TCB
 * for the call, and the hook's own crossings skip the checkpoint gate. The code between the two
 * fs switches is TLS-free. */
#include "upper_hooks.h"

#include "crac_rawsys.h"

#include <sys/auxv.h>
#include <sys/syscall.h>

#define ARCH_SET_FS 0x1002

typedef int (*hook_fn)(void);

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

__attribute__((noinline)) static int call_with_fs(hook_fn fn, uint64_t fs, int fsgsbase)
{
    uint64_t mine = read_fs();
    write_fs(fs, fsgsbase);
    int rc = fn();
    write_fs(mine, fsgsbase);
    return rc;
}

int upper_hook_run(struct crac_registry *r, uint64_t fn, uint64_t upper_fs)
{
    if (!fn || !upper_fs)
        return 0;
    int fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0;
    __atomic_store_n(&r->in_hook, 1, __ATOMIC_SEQ_CST);
    int rc = call_with_fs((hook_fn)fn, upper_fs, fsgsbase);
    __atomic_store_n(&r->in_hook, 0, __ATOMIC_SEQ_CST);
    return rc;
}
