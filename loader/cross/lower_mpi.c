/* lower_mpi.c — the MPI library in the lower half (docs/MPI.md): dlopened in the loader's own
 * namespace, initialised fresh at launch and at every restart; its threads and descriptors are
 * recorded as the lower half's so a checkpoint never saves them. */
#include "lower_mpi.h"

#include "lower_fds.h"
#include "lower_threads.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SEEN 1024

static void *mpi_lib;
static char mpi_err[256];

/* Which descriptors and threads existed before MPI_Init: the rest, after it, are MPI's. */
static int fds_before[MAX_SEEN], n_fds_before;
static int tids_before[MAX_SEEN], n_tids_before;

static int list_dir_numbers(const char *path, int *out, int max)
{
    DIR *d = lower_opendir(path);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max)
        if (de->d_name[0] != '.' && atoi(de->d_name) != dirfd(d))
            out[n++] = atoi(de->d_name);
    closedir(d);
    return n;
}

static int in_list(const int *list, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (list[i] == v)
            return 1;
    return 0;
}

/* The library of the launcher that started this process (its environment, so a restart may
 * bring another one than the launch had): Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE, MPICH's
 * Hydra PMI_FD or PMI_PORT. */
static const char *launcher_library(void)
{
    if (getenv("OMPI_COMM_WORLD_SIZE"))
        return "libmpi.so.40";
    if (getenv("PMI_FD") || getenv("PMI_PORT"))
        return "libmpich.so.12";
    return "libmpi.so.40";
}

/* Loads the MPI library named by CRAC_MPI_LIB, else the launcher's. RTLD_GLOBAL: Open MPI's
 * components find its symbols that way. Returns the dlopen handle, or 0 with
 * crac_lh_mpi_error() set. */
static uint64_t lh_mpi_load(void)
{
    if (mpi_lib)
        return (uint64_t)mpi_lib;
    const char *path = getenv("CRAC_MPI_LIB");
    if (!path || !*path)
        path = launcher_library();
    mpi_lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!mpi_lib)
        snprintf(mpi_err, sizeof(mpi_err), "cannot load the MPI library %s: %s", path, dlerror());
    return (uint64_t)mpi_lib;
}

static uint64_t lh_mpi_sym(const char *name)
{
    return mpi_lib ? (uint64_t)dlsym(mpi_lib, name) : 0;
}

static uint64_t lh_mpi_error(char *buf, uint64_t len)
{
    if (len)
        snprintf(buf, len, "%s", mpi_err);
    return 0;
}

static uint64_t lh_mpi_init_begin(void)
{
    n_fds_before = list_dir_numbers("/proc/self/fd", fds_before, MAX_SEEN);
    n_tids_before = list_dir_numbers("/proc/self/task", tids_before, MAX_SEEN);
    /* MPICH's Hydra hands each process its PMI connection as an inherited descriptor. */
    const char *pmi = getenv("PMI_FD");
    if (pmi && *pmi) {
        int fd = atoi(pmi);
        if (fd > 2 && fcntl(fd, F_GETFD) >= 0 && !lower_fd_is_ours(fd))
            lower_fd_record(fd);
    }
    return 0;
}

/* At a checkpoint: every socket is MPI's or its launcher's (connections MPI opened lazily, to a
 * peer; sockets a launcher such as MPICH's Hydra leaves open in each rank). A program's own
 * socket is taken for one too (docs/MPI.md, "Not yet"); crac cannot restore sockets anyway.
 * Returns how many were adopted. */
static uint64_t lh_mpi_adopt_sockets(void)
{
    int now[MAX_SEEN];
    int n = list_dir_numbers("/proc/self/fd", now, MAX_SEEN), adopted = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (lower_fd_is_ours(now[i]) || fstat(now[i], &st) != 0 || !S_ISSOCK(st.st_mode))
            continue;
        lower_fd_record(now[i]);
        adopted++;
    }
    return (uint64_t)adopted;
}

/* After MPI_Init: every new descriptor and thread is the library's. CALLER is the upper thread
 * that ran MPI_Init, which is not. Returns how many descriptors were adopted. */
static uint64_t lh_mpi_init_end(uint64_t caller)
{
    int now[MAX_SEEN];
    int n = list_dir_numbers("/proc/self/fd", now, MAX_SEEN), adopted = 0;
    for (int i = 0; i < n; i++)
        if (!in_list(fds_before, n_fds_before, now[i]) && !lower_fd_is_ours(now[i])) {
            lower_fd_record(now[i]);
            adopted++;
        }
    n = list_dir_numbers("/proc/self/task", now, MAX_SEEN);
    for (int i = 0; i < n; i++)
        if (!in_list(tids_before, n_tids_before, now[i]) && now[i] != (int)caller &&
            !lower_threads_contains(now[i]))
            lower_threads_register(now[i]);
    return (uint64_t)adopted;
}

typedef uint64_t (*fn12)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                         uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

/* A call with up to 12 integer or pointer arguments (every MPI C function the shim forwards is
 * of that kind; extra arguments are ignored by the callee under the x86-64 calling convention). */
static uint64_t lh_mpi_callv(void *fn, const uint64_t *a, uint64_t n)
{
    uint64_t v[12] = {0};
    for (uint64_t i = 0; i < n && i < 12; i++)
        v[i] = a[i];
    return ((fn12)fn)(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]);
}

/* MPI_Test (FN) of one request up to A[3] times in a row, until it completes or fails: the wait
 * loops of the upper shim poll in batches, one crossing per batch instead of per test (a
 * crossing costs more than an idle MPI_Test; docs/MPI.md, "The split"). Bounded, so a thread
 * never holds the checkpoint gate for long. A: request *, flag *, status *, tries. */
typedef int (*test_fn)(uint64_t, uint64_t, uint64_t);
static uint64_t lh_mpi_test_spin(void *fn, const uint64_t *a, uint64_t n)
{
    (void)n;
    int rc = 0;
    for (uint64_t i = 0; i < a[3]; i++) {
        rc = ((test_fn)fn)(a[0], a[1], a[2]);
        if (rc != 0 || *(volatile int *)(uintptr_t)a[1])
            break;
    }
    return (uint64_t)(int64_t)rc;
}

/* Up to A[6] MPI_Improbes (FN; A[0..5] its arguments: source, tag, comm, flag *, message *,
 * status *) in one crossing, until one matches: a blocking matched probe's poll (mpi4py receives
 * every pickled object this way). Bounded like lh_mpi_test_spin. */
typedef int (*improbe_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
static uint64_t lh_mpi_improbe_spin(void *fn, const uint64_t *a, uint64_t n)
{
    (void)n;
    int rc = 0;
    for (uint64_t i = 0; i < a[6]; i++) {
        rc = ((improbe_fn)fn)(a[0], a[1], a[2], a[3], a[4], a[5]);
        if (rc != 0 || *(volatile int *)(uintptr_t)a[3])
            break;
    }
    return (uint64_t)(int64_t)rc;
}

/* A nonblocking call (FN: MPI_Isend, MPI_Irecv, MPI_Iallreduce...; A[0..9] its arguments, unused
 * ones 0: an x86-64 callee ignores arguments it does not take) and then up to A[14] MPI_Tests of
 * the request it made (A[10] request *, A[11] the test function, A[12] flag *, A[13] status *),
 * all in one crossing: a small message of a blocking call completes here, and the call costs one
 * crossing instead of two (docs/DECISIONS.md, "MPI: fewer crossings per message"). Bounded like
 * lh_mpi_test_spin, so the checkpoint gate comes back soon. */
typedef int (*post_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                       uint64_t, uint64_t, uint64_t);
static uint64_t lh_mpi_post_spin(void *fn, const uint64_t *a, uint64_t n)
{
    (void)n;
    int rc = ((post_fn)fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
    if (rc != 0)
        return (uint64_t)(int64_t)rc;
    uint64_t t[4] = {a[10], a[12], a[13], a[14]};
    return lh_mpi_test_spin((void *)(uintptr_t)a[11], t, 4);
}

/* Up to TRIES rounds of MPI_Test (FN) of the N requests whose records (STRIDE words apart)
 * end in {request *, flag *, status *}, each tested until its flag is set (a completed request
 * is not tested again: its handle is now MPI_REQUEST_NULL, and a test would overwrite its
 * status); until all are complete or a test fails. */
static uint64_t test_records(void *fn, const uint64_t *rec, uint64_t stride, uint64_t n,
                             uint64_t tries)
{
    for (uint64_t t = 0; t < tries; t++) {
        int all = 1;
        for (uint64_t i = 0; i < n; i++) {
            const uint64_t *r = rec + i * stride;
            if (*(volatile int *)(uintptr_t)r[1])
                continue;
            int rc = ((test_fn)fn)(r[0], r[1], r[2]);
            if (rc != 0)
                return (uint64_t)(int64_t)rc;
            all &= *(volatile int *)(uintptr_t)r[1] != 0;
        }
        if (all)
            break;
    }
    return 0;
}

/* MPI_Test (FN) of N requests in rounds, in one crossing: MPI_Waitall and the polls of
 * MPI_Testall/any/some cost one crossing, not one per request. A: N records {request *, flag *,
 * status *} (flags 0 for the requests to test), then the number of rounds. */
static uint64_t lh_mpi_tests_spin(void *fn, const uint64_t *a, uint64_t n)
{
    return test_records(fn, a, 3, n, a[3 * n]);
}

/* N nonblocking calls, in order, then rounds of MPI_Test (FN) of the requests they made, in one
 * crossing: MPI_Sendrecv's receive and send post and, for small messages, complete in one
 * crossing (four before: two posts, two waits). A: N records of 14 words {post function, its
 * 10 arguments (unused ones 0), request *, flag *, status *}, then the number of rounds. A post
 * that fails ends it (the requests before it are live; its own request * is left as it was). */
static uint64_t lh_mpi_posts_spin(void *fn, const uint64_t *a, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t *r = a + i * 14;
        int rc =
            ((post_fn)(uintptr_t)r[0])(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10]);
        if (rc != 0)
            return (uint64_t)(int64_t)rc;
    }
    return test_records(fn, a + 11, 14, n, a[14 * n]);
}

const struct crac_lh_entry lower_mpi_entries[LOWER_MPI_N_ENTRIES] = {
    {"crac_lh_mpi_load", (void *)lh_mpi_load},
    {"crac_lh_mpi_sym", (void *)lh_mpi_sym},
    {"crac_lh_mpi_error", (void *)lh_mpi_error},
    {"crac_lh_mpi_init_begin", (void *)lh_mpi_init_begin},
    {"crac_lh_mpi_init_end", (void *)lh_mpi_init_end},
    {"crac_lh_mpi_callv", (void *)lh_mpi_callv},
    {"crac_lh_mpi_adopt_sockets", (void *)lh_mpi_adopt_sockets},
    {"crac_lh_mpi_test_spin", (void *)lh_mpi_test_spin},
    {"crac_lh_mpi_improbe_spin", (void *)lh_mpi_improbe_spin},
    {"crac_lh_mpi_post_spin", (void *)lh_mpi_post_spin},
    {"crac_lh_mpi_tests_spin", (void *)lh_mpi_tests_spin},
    {"crac_lh_mpi_posts_spin", (void *)lh_mpi_posts_spin},
};
