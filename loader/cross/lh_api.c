/* lh_api.c — the lower-half API table: a magic, a version, and named entries (docs/ARCHITECTURE.md "Crossing"). The
 * upper runtime resolves entries by name, so halves built from different lists still agree. */
#include "lh_api.h"

#include "lower_mpi.h"
#include "shadow_pool.h"

#include "ckpt.h"
#include "confine.h"
#include "signal_wrap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Self-test entries (tests/apps/crossing.c). The TLS write shows whose TLS the callee sees: with
 * the fs switch it is this half's; without it the write lands in the upper thread's TLS. */
static __thread unsigned long selftest_tls_slot;

static void *lh_selftest_tls_write(unsigned long value)
{
    selftest_tls_slot = value;
    return (void *)&selftest_tls_slot;
}

/* Uses the lower libc (malloc, snprintf, errno): only correct with this half's TCB in fs. */
static int lh_selftest_libc(void)
{
    char *buf = malloc(64);
    if (!buf)
        return 1;
    int n = snprintf(buf, 64, "lower %d", 42);
    errno = 0;
    char *end;
    strtol("999999999999999999999999", &end, 10);
    int ok = n == 8 && strcmp(buf, "lower 42") == 0 && errno == ERANGE;
    free(buf);
    return ok ? 0 : 2;
}

static const char *backend_name = "none";

static const char *lh_backend_name(void) { return backend_name; }

static const struct crac_lh_entry loader_entries[] = {
    {"crac_lh_backend_name", (void *)lh_backend_name},
    {"crac_lh_selftest_tls_write", (void *)lh_selftest_tls_write},
    {"crac_lh_selftest_libc", (void *)lh_selftest_libc},
    {"crac_lh_register_upper", (void *)ckpt_register_upper},
    {"crac_lh_request_checkpoint", (void *)ckpt_request_entry},
    {"crac_lh_query", (void *)ckpt_query_entry},
    {"crac_lh_pid", (void *)ckpt_pid_entry},
    {"crac_lh_coord_status", (void *)ckpt_coord_status_entry},
    {"crac_lh_emu_mmap", (void *)emu_mmap},
    {"crac_lh_emu_munmap", (void *)emu_munmap},
    {"crac_lh_emu_mremap", (void *)emu_mremap},
    {"crac_lh_emu_brk", (void *)emu_brk},
    {"crac_lh_emu_self_id", (void *)emu_self_id},
    {"crac_lh_emu_path", (void *)emu_path_direct},
    {"crac_lh_emu_getdents", (void *)emu_getdents},
    {"crac_lh_emu_path_after", (void *)emu_path_after},
};

static volatile int32_t gate_inside, gate_pending;
static struct crac_lh_api table;

volatile int32_t *lh_gate_inside(void) { return &gate_inside; }
volatile int32_t *lh_gate_pending(void) { return &gate_pending; }

/* The loader's own entries first, then the MPI library's (lower_mpi.c), then the backend's. */
static const struct crac_lh_entry *merge_entries(const struct crac_backend_info *backend,
                                                 uint32_t *count)
{
    uint32_t n_loader = sizeof(loader_entries) / sizeof(loader_entries[0]);
    uint32_t n_backend = backend ? backend->n_entries : 0;
    uint32_t n_mpi = LOWER_MPI_N_ENTRIES;
    struct crac_lh_entry *all = calloc(n_loader + n_mpi + n_backend, sizeof(*all));
    if (!all)
        return NULL;
    memcpy(all, loader_entries, sizeof(loader_entries));
    memcpy(all + n_loader, lower_mpi_entries, sizeof(lower_mpi_entries));
    if (n_backend)
        memcpy(all + n_loader + n_mpi, backend->entries, n_backend * sizeof(*all));
    *count = n_loader + n_mpi + n_backend;
    return all;
}

const struct crac_lh_api *lh_api_table(const struct crac_backend_info *backend, int fsgsbase)
{
    if (backend)
        backend_name = backend->name;
    table.magic = CRAC_LH_API_MAGIC;
    table.version = CRAC_LH_API_VERSION;
    table.entries = merge_entries(backend, &table.n_entries);
    if (!table.entries)
        return NULL;
    table.gate_inside = &gate_inside;
    table.gate_pending = &gate_pending;
    table.borrow_tcb = shadow_pool_borrow;
    table.return_tcb = shadow_pool_return;
    table.hwcap_fsgsbase = fsgsbase;
    table.backend = backend_name;
    table.deliver_peer_signal = sigwrap_deliver_peer_signal;
    return &table;
}
