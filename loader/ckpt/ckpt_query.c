/* ckpt_query.c — what the program may ask about its checkpoints through the DMTCP-compatible API
 * (upperhalf/dmtcp_api.c): directories, the real program path, the signal, the coordinator. */
#include "ckpt.h"

#include "coord_client.h"
#include "crac_lh_api.h"
#include "upper_alloc.h"

#include <stdio.h>
#include <string.h>

/* Lower-half API entry, reached through a crossing (lower TCB in fs, so libc is fine). Strings
 * are copied into buf and their length returned (-1 if buf is too small); numbers are returned. */
long ckpt_query_entry(long what, char *buf, unsigned long len)
{
    const char *s = NULL;
    switch (what) {
    case CRAC_QUERY_PROC_DIR: s = ckpt_cfg.proc_dir; break;
    case CRAC_QUERY_CKPT_DIR: s = ckpt_cfg.ckpt_dir; break;
    case CRAC_QUERY_PROGRAM: s = ckpt_cfg.program; break;
    case CRAC_QUERY_SIGNAL: return ckpt_cfg.ckpt_signal;
    case CRAC_QUERY_COORDINATED: return ckpt_cfg.coord_fd >= 0;
    case CRAC_QUERY_INTERVAL: return ckpt_cfg.interval;
    default: return -1;
    }
    size_t n = strlen(s);
    if (!buf || n >= len)
        return -1;
    memcpy(buf, s, n + 1);
    return (long)n;
}

/* Lower-half API entry: the program's pid (the first launch's) for a kernel pid (dir 0), or the
 * other way (dir 1). Pids the table does not know are their own translation. */
long ckpt_pid_entry(long dir, long pid)
{
    struct crac_ctrl *c = crac_ctrl();
    return dir == 0 ? vid_from_real(c, (int32_t)pid) : vid_to_real(c, (int32_t)pid);
}

/* Lower-half API entry: the coordinator's view of the job (dmtcp_get_coordinator_status()).
 * 0 with *peers and *running filled, -1 without a coordinator or an answer. */
long ckpt_coord_status_entry(int *peers, int *running) { return coord_status(peers, running); }
