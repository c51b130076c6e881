/* ckpt_sig_pass.c — a checkpoint-numbered signal that another crac process's program sent (marked:
 * crac_layout.h) is this program's, not a checkpoint request: the manager records it (in W) and
 * passes it on to one of the program's threads (docs/DECISIONS.md "A program's checkpoint-numbered
 * signal to another process"). */
#include "ckpt.h"

#include "confine.h"

#include "crac_layout.h"
#include "crac_rawsys.h"
#include "crac_registry.h"
#include "lower_fds.h"
#include "lower_threads.h"
#include "upper_alloc.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Queue the carrier to thread TID, unless the program (in its view) blocks the signal there. */
static int pass_to(struct crac_ctrl *c, pid_t pid, int32_t tid, siginfo_t *carrier)
{
    if (tid <= 0 || lower_threads_contains(tid) || (vmask_get(c, tid) & (1UL << (c->ckpt_sig - 1))))
        return -1;
    return raw_syscall4(SYS_rt_tgsigqueueinfo, pid, tid, CRAC_SIG_SUSPEND, (long)carrier) == 0 ? 0
                                                                                               : -1;
}

/* As the kernel picks a thread for a process-directed signal: one that does not block it. */
static int pass_to_any(struct crac_ctrl *c, pid_t pid, siginfo_t *carrier)
{
    if (pass_to(c, pid, pid, carrier) == 0) /* the main thread first */
        return 0;
    int passed = -1;
    lower_fds_hold();
    DIR *d = lower_opendir("/proc/self/task");
    if (d) {
        struct dirent *de;
        while (passed != 0 && (de = readdir(d)))
            if (atoi(de->d_name) != pid)
                passed = pass_to(c, pid, atoi(de->d_name), carrier);
        closedir(d);
    }
    lower_fds_release();
    return passed;
}

int ckpt_sig_pass(const struct signalfd_siginfo *si)
{
    if (!crac_peer_sig_marked(si->ssi_code, si->ssi_errno))
        return 0;
    struct crac_ctrl *c = crac_ctrl();
    uint64_t handler = c->virt_act[c->ckpt_sig].handler;
    if (handler == (uint64_t)SIG_IGN)
        return 1;
    /* No handler (its default action, under crac, is a checkpoint, as when the program sends it
     * to itself), or an upper runtime that cannot take it (an old image's): a request. */
    struct crac_registry *r = ckpt_registry;
    if (handler == (uint64_t)SIG_DFL || !r || !(r->features & CRAC_UPPER_PEER_SIGNAL))
        return 0;
    int kind = (int)(si->ssi_errno & 0xff);
    int32_t from = (int32_t)si->ssi_pid;
    const struct crac_peer_sig in = {
        .code = kind == CRAC_PEER_KILL     ? SI_USER
                : kind == CRAC_PEER_TGKILL ? SI_TKILL
                                           : SI_QUEUE,
        .pid = c->vppid && from == c->real_ppid ? c->vppid : vid_from_real(c, from),
        .uid = si->ssi_uid,
        .tid = kind == CRAC_PEER_TGKILL ? vid_from_real(c, si->ssi_int) : 0,
        .value = kind == CRAC_PEER_QUEUE ? si->ssi_ptr : 0,
    };
    if (peer_sig_put(c, &in))
        ckpt_peer_sig_carry();
    return 1;
}

void ckpt_peer_sig_carry(void)
{
    struct crac_ctrl *c = crac_ctrl();
    const struct crac_peer_sig *p = &c->peer_sig;
    uint64_t bit = 1UL << (c->ckpt_sig - 1);
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != CRAC_PEER_READY ||
        (__atomic_load_n(&c->virt_pending, __ATOMIC_ACQUIRE) & bit))
        return; /* none, or pending until the program unblocks it */
    siginfo_t carrier;
    memset(&carrier, 0, sizeof(carrier));
    carrier.si_signo = CRAC_SIG_SUSPEND;
    carrier.si_code = SI_QUEUE;
    carrier.si_errno = CRAC_PEER_SIG_MARK | CRAC_PEER_KILL; /* what it was is in the record */
    pid_t pid = getpid();
    carrier.si_pid = pid;
    int passed =
        p->tid ? pass_to(c, pid, vid_to_real(c, p->tid), &carrier) : pass_to_any(c, pid, &carrier);
    if (passed != 0) /* every thread blocks it: pending until one unblocks it */
        __atomic_or_fetch(&c->virt_pending, bit, __ATOMIC_ACQ_REL);
}
