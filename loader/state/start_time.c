/* start_time.c — the start time a process's /proc/PID/stat shows stays its first run's across
 * restarts (field 22): recorded at its first checkpoint, kept in the control block (memory). */
#include "state.h"

#include "upper_alloc.h"

#include <stdlib.h>
#include <string.h>

void boot_read(struct crac_boot *b)
{
    memset(b, 0, sizeof(*b));
    char text[8192]; /* /proc/stat: btime follows a line per CPU, and we read only this much */
    if (proc_read_text("/proc/sys/kernel/random/boot_id", text, sizeof(b->id)) > 0)
        memcpy(b->id, text, strcspn(text, "\n"));
    if (proc_read_text("/proc/stat", text, sizeof(text)) > 0) {
        const char *at = strstr(text, "\nbtime ");
        b->btime = at ? strtoll(at + 7, NULL, 10) : 0;
    }
}

int start_time_capture(const struct state_capture *cap, void **blob, size_t *len)
{
    (void)cap;
    struct crac_ctrl *c = crac_ctrl();
    long long ticks;
    if (!c->start_ticks && proc_stat_fields(0, 22, 1, &ticks) == 0 && ticks > 0) {
        if (!c->host_boot.id[0])
            boot_read(&c->host_boot);
        c->start_boot = c->host_boot;
        c->start_ticks = ticks;
    }
    *blob = NULL;
    *len = 0;
    return 0;
}

int start_time_restore(const struct state_restore *r, const void *note, size_t len)
{
    (void)r, (void)note, (void)len;
    boot_read(&crac_ctrl()->host_boot); /* perhaps another host, or the same one rebooted */
    return 0;
}
