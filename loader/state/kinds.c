/* kinds.c — the single table of the kinds of process state saved beside memory and threads, and
 * the loops the checkpoint (ckpt_run.c, image_core.c) and the restart (restart*.c) run over it. */
#include "state.h"

#include "restart.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Memory and threads are not in the table: they are the core file's own structure (PT_LOAD
 * segments, NT_PRSTATUS, CRAC_NT_PROCESS/REGIONS/THREADS: image_core.c writes them,
 * restart_memory.c and restart_threads.c bring them back) and every kind here is restored into
 * them. The table's order is the order of capture, of the notes in upper.core (docs/IMAGE.md:
 * keep it, the format depends on it) and of restore within a phase. To add a kind: a new file
 * with X_capture and X_restore, a CRAC_NT_* in crac_image.h, one line here
 * (loader/state/README.md). */
const struct state_kind state_kinds[] = {
    /* The CPU clocks go on from their checkpoint values; kept in the control block (memory). */
    {"cputime", 0, 0, 0, STATE_WITH_THREADS, cputime_capture, NULL, cputime_restore},
    /* Not saved: named at checkpoint time (losses.c); no note, nothing to restore. */
    {"children", 0, 0, 0, STATE_WITH_THREADS, children_capture, NULL, NULL},
    /* Before the lower half starts, fds hold their numbers; reopened once memory is back. */
    {"fds", CRAC_NT_FDS, 0, 1, STATE_WITH_MEMORY, fds_capture, fds_hold, fds_restore},
    /* Captured with the fds (their note): threads' /proc files, reopened once the threads are
     * back and before the limits and filters below come back. */
    {"threads' /proc fds", 0, 0, 0, STATE_WITH_THREADS, NULL, NULL, fds_thread_phase_restore},
    {"signals", CRAC_NT_SIGNALS, 65 * sizeof(struct crac_signal_rec), 1, STATE_WITH_MEMORY,
     signals_capture, NULL, signals_restore},
    {"timers", CRAC_NT_TIMERS, sizeof(struct crac_timers_rec), 1, STATE_WITH_THREADS,
     timers_capture, NULL, timers_restore},
    {"pending", CRAC_NT_PENDING, 0, 0, STATE_WITH_THREADS, pending_capture, NULL, pending_restore},
    /* Last: it may lower limits the restore of the others needed. */
    {"rlimits", CRAC_NT_RLIMITS, 0, 0, STATE_WITH_THREADS, rlimits_capture, NULL, rlimits_restore},
    /* Checked, not restored: a file the program reads that changed stops the restart. */
    {"file ids", CRAC_NT_FILE_IDS, 0, 0, STATE_WITH_MEMORY, file_ids_capture, file_ids_hold, NULL},
    /* Before the threads are cloned: they inherit it. */
    {"prctl state", CRAC_NT_PRCTL, sizeof(struct crac_prctl_rec), 0, STATE_WITH_MEMORY,
     prctl_capture, NULL, prctl_restore},
    /* Last of all: the program's own seccomp filters might forbid crac's restore work. */
    {"seccomp filters", CRAC_NT_SECCOMP, sizeof(struct crac_seccomp_rec), 0, STATE_WITH_THREADS,
     seccomp_capture, seccomp_hold, seccomp_restore},
    /* With memory, after fds: taken again on the reopened descriptors (in the file after the
     * seccomp note only because a new note goes last). */
    {"file locks", CRAC_NT_FILE_LOCKS, 0, 0, STATE_WITH_MEMORY, file_locks_capture, NULL,
     file_locks_restore},
    /* Once the threads are back (each has its own); a new note goes last. */
    {"thread scheduling", CRAC_NT_THREAD_SCHED, 0, 0, STATE_WITH_THREADS, thread_sched_capture,
     NULL, thread_sched_restore},
    /* The process's first start time, in the control block (memory); no note. */
    {"start time", 0, 0, 0, STATE_WITH_MEMORY, start_time_capture, NULL, start_time_restore},
    /* Not saved: mappings a restart cannot give back, named at checkpoint time; no note. */
    {"mapped losses", 0, 0, 0, STATE_WITH_MEMORY, mapped_losses_capture, NULL, NULL},
};
const int n_state_kinds = (int)(sizeof(state_kinds) / sizeof(state_kinds[0]));
_Static_assert(sizeof(state_kinds) / sizeof(state_kinds[0]) <= STATE_KINDS_MAX,
               "STATE_KINDS_MAX is too small for the table");

int state_capture_all(const struct state_capture *c, struct state_note notes[STATE_KINDS_MAX])
{
    memset(notes, 0, STATE_KINDS_MAX * sizeof(notes[0]));
    state_losses_reset();
    for (int k = 0; k < n_state_kinds; k++) {
        void *blob = NULL;
        size_t len = 0;
        if (state_kinds[k].capture && state_kinds[k].capture(c, &blob, &len) != 0) {
            free(blob);
            return -1;
        }
        notes[k] = (struct state_note){blob, len};
    }
    return 0;
}

void state_notes_free(struct state_note notes[STATE_KINDS_MAX])
{
    for (int k = 0; k < STATE_KINDS_MAX; k++) {
        free((void *)notes[k].data);
        notes[k] = (struct state_note){NULL, 0};
    }
}

int state_hold_all(const struct state_restore *r)
{
    for (int k = 0; k < n_state_kinds; k++)
        if (state_kinds[k].hold && (r->img->notes[k].data || !state_kinds[k].note) &&
            state_kinds[k].hold(r, r->img->notes[k].data, r->img->notes[k].len) != 0)
            return -1;
    return 0;
}

int state_restore_phase(enum state_phase phase, const struct state_restore *r)
{
    for (int k = 0; k < n_state_kinds; k++) {
        const struct state_kind *s = &state_kinds[k];
        if (s->phase != phase || !s->restore || (s->note && !r->img->notes[k].data))
            continue;
        r->err[0] = '\0';
        if (s->restore(r, r->img->notes[k].data, r->img->notes[k].len) != 0) {
            if (!r->err[0])
                snprintf(r->err, r->errlen, "cannot restore the %s", s->name);
            return -1;
        }
    }
    return 0;
}
