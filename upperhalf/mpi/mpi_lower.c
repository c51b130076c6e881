/* mpi_lower.c — the shim's way into the real MPI library in the lower half (docs/MPI.md): load and
 * initialise it (at the program's MPI_Init and again, fresh, at every restart), resolve its
 * functions and predefined objects by name, rebuild the program's communicators and datatypes. */
#include "mpi_shim.h"

#include "crac_registry.h"
#include "mpi_userop.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* From libcrac-upper.so (preloaded first under crac). */
extern void *upper_lookup(const char *name) __attribute__((weak));
extern uint64_t cross_call_entered(void *fn, uint64_t a0, uint64_t a1, uint64_t a2)
    __attribute__((weak));
extern struct crac_registry crac_registry __attribute__((weak));

int mpi_inited, mpi_finalized, mpi_world_rank, mpi_world_size;
void *mpi_ctl_comm;
struct lower_abi mpi_abi;

/* mpi_mpich_gen.c: MPICH's value of each predefined object, in mpi_predefs' order. */
extern const int mpi_mpich_available;
extern const int64_t mpi_mpich_values[];

/* MPICH's MPI_Status (mpi.h): count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR. */
struct mpich_status {
    int count_lo, count_hi_and_cancelled, source, tag, error;
};

int rank_down(int r)
{
    if (!mpi_abi.mpich)
        return r;
    return r == MPI_ANY_SOURCE  ? mpi_abi.any_source
           : r == MPI_PROC_NULL ? mpi_abi.proc_null
           : r == MPI_ROOT      ? mpi_abi.root
                                : r;
}

int rank_up(int r)
{
    if (!mpi_abi.mpich)
        return r;
    return r == mpi_abi.any_source  ? MPI_ANY_SOURCE
           : r == mpi_abi.proc_null ? MPI_PROC_NULL
           : r == mpi_abi.root      ? MPI_ROOT
                                    : r;
}

void status_up(MPI_Status *up, const lstatus *low)
{
    if (!mpi_abi.mpich) {
        memcpy(up, low, sizeof(*up));
        return;
    }
    const struct mpich_status *m = (const struct mpich_status *)low;
    memset(up, 0, sizeof(*up));
    up->MPI_SOURCE = rank_up(m->source);
    up->MPI_TAG = m->tag;
    up->MPI_ERROR = m->error;
    up->_cancelled = m->count_hi_and_cancelled & 1;
    up->_ucount =
        ((size_t)((unsigned)m->count_hi_and_cancelled >> 1) << 32) + (unsigned)m->count_lo;
}

void status_down(lstatus *low, const MPI_Status *up)
{
    memset(low, 0, sizeof(*low));
    if (!mpi_abi.mpich) {
        memcpy(low, up, sizeof(*up));
        return;
    }
    struct mpich_status *m = (struct mpich_status *)low;
    m->count_lo = (int)up->_ucount;
    m->count_hi_and_cancelled = (int)((up->_ucount >> 32) << 1) | (up->_cancelled & 1);
    m->source = rank_down(up->MPI_SOURCE);
    m->tag = up->MPI_TAG;
    m->error = up->MPI_ERROR;
}

void mpi_die(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "crac: error: %s\n", buf);
    fflush(stderr);
    _exit(1);
}

static int32_t epoch_now(void)
{
    return &crac_registry ? __atomic_load_n(&crac_registry.lower_epoch, __ATOMIC_ACQUIRE) : 0;
}

/* A loader entry, cached per lower half. */
#define LC_ADDR_MASK ((1ULL << 48) - 1)

static void *lcache_get(struct lcache *c, int32_t e)
{
    uint64_t w = __atomic_load_n(&c->word, __ATOMIC_ACQUIRE);
    if (!w || (w >> 48) != ((uint64_t)e & 0xffff))
        return NULL;
    return (void *)(uintptr_t)(w & LC_ADDR_MASK);
}

static void lcache_put(struct lcache *c, int32_t e, void *fn)
{
    uint64_t w = ((uint64_t)(uintptr_t)fn & LC_ADDR_MASK) | (((uint64_t)e & 0xffff) << 48);
    __atomic_store_n(&c->word, w, __ATOMIC_RELEASE);
}

static void *loader_entry(struct lcache *c, const char *name)
{
    int32_t e = epoch_now();
    void *fn = lcache_get(c, e);
    if (fn)
        return fn;
    fn = upper_lookup ? upper_lookup(name) : NULL;
    if (!fn)
        mpi_die("the MPI shim runs only under crac (lower-half entry %s missing)", name);
    lcache_put(c, e, fn);
    return fn;
}

static uint64_t cross3(struct lcache *c, const char *entry, uint64_t a0, uint64_t a1, uint64_t a2)
{
    cross_gate_enter();
    uint64_t r = cross_call_entered(loader_entry(c, entry), a0, a1, a2);
    cross_gate_leave();
    return r;
}

uint64_t mpi_lcall(struct lcache *c, const char *name, const uint64_t *args, int n)
{
    static struct lcache sym_c, callv_c;
    cross_gate_enter();
    /* Looked up after the gate: a thread that waited there may be on a new lower half. */
    int32_t e = epoch_now();
    void *fn = lcache_get(c, e);
    if (!fn) {
        fn = (void *)cross_call_entered(loader_entry(&sym_c, "crac_lh_mpi_sym"), U(name), 0, 0);
        if (!fn)
            mpi_die("the MPI library in the lower half has no %s", name);
        lcache_put(c, e, fn);
    }
    uint64_t r = cross_call_entered(loader_entry(&callv_c, "crac_lh_mpi_callv"), U(fn), U(args),
                                    (uint64_t)n);
    cross_gate_leave();
    return r;
}

/* With the gate held: the real library's function NAME, cached per lower half in C. */
static void *lower_fn_entered(struct lcache *c, int32_t e, const char *name)
{
    static struct lcache sym_c;
    void *fn = lcache_get(c, e);
    if (!fn) {
        fn = (void *)cross_call_entered(loader_entry(&sym_c, "crac_lh_mpi_sym"), U(name), 0, 0);
        if (!fn)
            mpi_die("the MPI library in the lower half has no %s", name);
        lcache_put(c, e, fn);
    }
    return fn;
}

static struct lcache test_c; /* MPI_Test */

int mpi_ltest(void **real, int *flag, lstatus *ls, int tries)
{
    static struct lcache spin_c;
    cross_gate_enter();
    void *fn = lower_fn_entered(&test_c, epoch_now(), "MPI_Test");
    uint64_t a[4] = {U(real), U(flag), U(ls), (uint64_t)(tries > 0 ? tries : 1)};
    uint64_t r = cross_call_entered(loader_entry(&spin_c, "crac_lh_mpi_test_spin"), U(fn), U(a), 4);
    cross_gate_leave();
    return (int)r;
}

int mpi_limprobe(int source, int tag, void *comm, int *flag, void **msg, lstatus *ls, int tries)
{
    static struct lcache spin_c, improbe_c;
    cross_gate_enter();
    void *fn = lower_fn_entered(&improbe_c, epoch_now(), "MPI_Improbe");
    uint64_t a[7] = {(uint64_t)source,
                     (uint64_t)tag,
                     U(comm),
                     U(flag),
                     U(msg),
                     U(ls),
                     (uint64_t)(tries > 0 ? tries : 1)};
    uint64_t r =
        cross_call_entered(loader_entry(&spin_c, "crac_lh_mpi_improbe_spin"), U(fn), U(a), 7);
    cross_gate_leave();
    return (int)r;
}

/* A[0..10) = ARGS[0..N), the rest 0 (an x86-64 callee ignores arguments it does not take). */
static inline void set_args(uint64_t *a, const uint64_t *args, int n)
{
    for (int i = 0; i < 10; i++)
        a[i] = i < n ? args[i] : 0;
}

int mpi_lpost_test(struct lcache *c, const char *post, const uint64_t *args, int n, void **real,
                   int *flag, lstatus *ls, int tries)
{
    static struct lcache spin_c;
    if (n > 10)
        mpi_die("%s: %d arguments, the crossing takes 10", post, n);
    cross_gate_enter();
    /* Looked up after the gate: a thread that waited there may be on a new lower half. */
    int32_t e = epoch_now();
    /* Filled word by word: `= {0}` was a `rep stos`, a tenth of this function's time on an
     * 8-byte send (docs/PERFORMANCE.md, "MPI per-call cost"). */
    uint64_t a[15];
    set_args(a, args, n);
    a[10] = U(real);
    a[11] = U(lower_fn_entered(&test_c, e, "MPI_Test"));
    a[12] = U(flag);
    a[13] = U(ls);
    a[14] = (uint64_t)(tries > 0 ? tries : 1);
    void *post_fn = lower_fn_entered(c, e, post);
    uint64_t r =
        cross_call_entered(loader_entry(&spin_c, "crac_lh_mpi_post_spin"), U(post_fn), U(a), 15);
    cross_gate_leave();
    return (int)r;
}

int mpi_ltests(struct ltest *t, int n, int tries)
{
    static struct lcache spin_c;
    uint64_t stack[3 * 16 + 1], *a = n <= 16 ? stack : malloc(sizeof(*a) * (3 * (size_t)n + 1));
    if (!a)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < n; i++) {
        a[3 * i] = U(&t[i].real);
        a[3 * i + 1] = U(&t[i].flag);
        a[3 * i + 2] = U(&t[i].ls);
    }
    a[3 * n] = (uint64_t)(tries > 0 ? tries : 1);
    cross_gate_enter();
    void *fn = lower_fn_entered(&test_c, epoch_now(), "MPI_Test");
    uint64_t r = cross_call_entered(loader_entry(&spin_c, "crac_lh_mpi_tests_spin"), U(fn), U(a),
                                    (uint64_t)n);
    cross_gate_leave();
    if (a != stack)
        free(a);
    return (int)r;
}

int mpi_lposts_test(const struct lpost *p, struct ltest *t, int n, int tries)
{
    static struct lcache spin_c;
    uint64_t a[14 * 4 + 1];
    if (n > 4)
        mpi_die("%d posts in one crossing, it takes 4", n);
    cross_gate_enter();
    /* Looked up after the gate: a thread that waited there may be on a new lower half. */
    int32_t e = epoch_now();
    for (int i = 0; i < n; i++) {
        uint64_t *r = a + 14 * i;
        if (p[i].n > 10)
            mpi_die("%s: %d arguments, the crossing takes 10", p[i].name, p[i].n);
        r[0] = U(lower_fn_entered(p[i].c, e, p[i].name));
        set_args(r + 1, p[i].args, p[i].n);
        r[11] = U(&t[i].real);
        r[12] = U(&t[i].flag);
        r[13] = U(&t[i].ls);
    }
    a[14 * n] = (uint64_t)(tries > 0 ? tries : 1);
    void *fn = lower_fn_entered(&test_c, e, "MPI_Test");
    uint64_t r = cross_call_entered(loader_entry(&spin_c, "crac_lh_mpi_posts_spin"), U(fn), U(a),
                                    (uint64_t)n);
    cross_gate_leave();
    return (int)r;
}

/* ---- predefined objects ---- */

/* Predefined objects by address, open addressing: every call's datatype (and communicator, and
 * operation) is looked up here, and the binary search over the 104 objects sorted by address was most of
 * the shim's handle translation on an 8-byte send. Built once (the shim's addresses never change,
 * a restart maps them back where they were); an exact address only. */
#define PREDEF_HASH 512 /* a power of two, over four times mpi_n_predefs */
static struct mpi_predef *predef_hash[PREDEF_HASH];

static unsigned predef_slot(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL;
    return (unsigned)(x >> 55) & (PREDEF_HASH - 1);
}

static void predef_hash_build(void)
{
    if (mpi_n_predefs * 4 > PREDEF_HASH)
        mpi_die("%d predefined MPI objects, the shim's table takes %d", mpi_n_predefs,
                PREDEF_HASH / 4);
    for (int i = 0; i < mpi_n_predefs; i++) {
        unsigned h = predef_slot(mpi_predefs[i].upper);
        while (predef_hash[h])
            h = (h + 1) & (PREDEF_HASH - 1);
        predef_hash[h] = &mpi_predefs[i];
    }
}

void *predef_lower(const void *upper)
{
    for (unsigned h = predef_slot(upper);; h = (h + 1) & (PREDEF_HASH - 1)) {
        struct mpi_predef *d = predef_hash[h];
        if (!d)
            return NULL;
        if (d->upper == upper)
            return d->lower;
    }
}

void *predef_upper_of_lower(const void *lower)
{
    for (int i = 0; i < mpi_n_predefs; i++)
        if (mpi_predefs[i].lower == lower)
            return mpi_predefs[i].upper;
    return NULL;
}

void *lower_named(const char *name)
{
    for (int i = 0; i < mpi_n_predefs; i++)
        if (strcmp(mpi_predefs[i].name, name) == 0)
            return mpi_predefs[i].lower;
    return NULL;
}

static int resolve_predefs(void)
{
    static struct lcache sym_c;
    static int hashed;
    if (!hashed) {
        predef_hash_build();
        hashed = 1;
    }
    /* Open MPI's objects are symbols; MPICH's handles are the constants of its mpi.h. */
    mpi_abi.mpich = !cross3(&sym_c, "crac_lh_mpi_sym", U("ompi_mpi_comm_world"), 0, 0);
    if (mpi_abi.mpich && !mpi_mpich_available)
        mpi_die("the MPI library in the lower half is not Open MPI, and crac was built without "
                "MPICH's headers (apt-get install libmpich-dev, then reinstall crac-py)");
    mpi_abi.any_source = mpi_abi.mpich ? -2 : MPI_ANY_SOURCE;
    mpi_abi.proc_null = mpi_abi.mpich ? -1 : MPI_PROC_NULL;
    mpi_abi.root = mpi_abi.mpich ? -3 : MPI_ROOT;
    mpi_abi.in_place = mpi_abi.mpich ? (uint64_t)-1 : U(MPI_IN_PLACE);
    for (int i = 0; i < mpi_n_predefs; i++) {
        if (mpi_abi.mpich) {
            /* 0: MPICH has no such object; a handle the program passes goes down as it is. */
            mpi_predefs[i].lower = (void *)(uintptr_t)mpi_mpich_values[i];
            continue;
        }
        mpi_predefs[i].lower =
            (void *)cross3(&sym_c, "crac_lh_mpi_sym", U(mpi_predefs[i].name), 0, 0);
        if (!mpi_predefs[i].lower)
            mpi_die("the MPI library in the lower half has no %s", mpi_predefs[i].name);
    }
    return 0;
}

/* ---- start ---- */

static void init_lower(void)
{
    static struct lcache load_c, err_c, begin_c, end_c;
    if (!cross3(&load_c, "crac_lh_mpi_load", 0, 0, 0)) {
        char err[256] = "";
        cross3(&err_c, "crac_lh_mpi_error", U(err), sizeof(err), 0);
        mpi_die("%s", err);
    }
    resolve_predefs();
    cross3(&begin_c, "crac_lh_mpi_init_begin", 0, 0, 0);
    int provided = 0;
    /* Always MPI_THREAD_MULTIPLE below: the checkpoint's drain runs on crac's hook thread while
     * program threads may be inside a collective (docs/MPI.md, "The cut"). */
    int rc = L("MPI_Init_thread", 0, 0, MPI_THREAD_MULTIPLE, U(&provided));
    if (rc != MPI_SUCCESS)
        mpi_die("MPI_Init_thread failed in the lower half (error %d)", rc);
    cross3(&end_c, "crac_lh_mpi_init_end", (uint64_t)syscall(SYS_gettid), 0, 0);
    if (provided < MPI_THREAD_MULTIPLE)
        fprintf(stderr,
                "crac: warning: the MPI library gives thread level %d, not "
                "MPI_THREAD_MULTIPLE; a checkpoint during a collective may hang\n",
                provided);
    void *world = lower_named("ompi_mpi_comm_world");
    L("MPI_Comm_rank", U(world), U(&mpi_world_rank));
    L("MPI_Comm_size", U(world), U(&mpi_world_size));
    void *ctl = NULL;
    L("MPI_Comm_dup", U(world), U(&ctl));
    mpi_ctl_comm = ctl;
    const char *debug = getenv("CRAC_DEBUG");
    if (debug && *debug == '1')
        fprintf(stderr, "crac: debug: mpi rank %d of %d: %s in the lower half\n", mpi_world_rank,
                mpi_world_size, mpi_abi.mpich ? "MPICH" : "Open MPI");
}

void mpi_adopt_sockets(void)
{
    static struct lcache c;
    cross3(&c, "crac_lh_mpi_adopt_sockets", 0, 0, 0);
}

volatile int32_t mpi_initing;

int mpi_lower_start(void)
{
    /* One hold of the checkpoint gate around the whole start: a checkpoint between loading the
     * library, MPI_Init and recording its descriptors would save half an MPI. The cut's hook
     * waits for mpi_initing to drop (mpi_cut.c). */
    cross_gate_enter();
    __atomic_store_n(&mpi_initing, 1, __ATOMIC_SEQ_CST);
    init_lower();
    mpi_sent_to = calloc((size_t)mpi_world_size, sizeof(*mpi_sent_to));
    vcomm_world = vcomm_wrap(lower_named("ompi_mpi_comm_world"));
    vcomm_self = vcomm_wrap(lower_named("ompi_mpi_comm_self"));
    if (!mpi_sent_to || !vcomm_world || !vcomm_self)
        mpi_die("out of memory in the MPI shim");
    mpi_groups_start();
    mpi_inited = 1;
    __atomic_store_n(&mpi_initing, 0, __ATOMIC_SEQ_CST);
    cross_gate_leave();
    return 0;
}

/* At restart (the RESTART hook): a fresh library, then every live object again, from its
 * implementation-neutral description, in creation order. */
int mpi_lower_rebuild(void)
{
    int old_rank = mpi_world_rank, old_size = mpi_world_size;
    init_lower();
    if (mpi_world_rank != old_rank || mpi_world_size != old_size)
        mpi_die("restarted as MPI rank %d of %d, but the image is rank %d of %d", mpi_world_rank,
                mpi_world_size, old_rank, old_size);
    void *world = lower_named("ompi_mpi_comm_world");
    void *wgroup = NULL;
    L("MPI_Comm_group", U(world), U(&wgroup));
    for (struct vcomm *c = vcomm_list; c; c = c->next) {
        if (c == vcomm_world) {
            c->real = world;
            continue;
        }
        if (c == vcomm_self) {
            c->real = lower_named("ompi_mpi_comm_self");
            continue;
        }
        if (c->freed || c->ghost)
            continue;
        if (c->inter) {
            mpi_intercomm_rebuild(c);
            continue;
        }
        void *g = NULL, *nc = NULL;
        L("MPI_Group_incl", U(wgroup), (uint64_t)c->size, U(c->world_ranks), U(&g));
        /* Only the members take part, with a tag every member computes alike (under 32768,
         * the least MPI_TAG_UB a library may have). */
        L("MPI_Comm_create_group", U(world), U(g), (uint64_t)(c->key % 32768), U(&nc));
        L("MPI_Group_free", U(&g));
        c->real = nc;
    }
    L("MPI_Group_free", U(&wgroup));
    for (struct vtype *t = vtype_list; t; t = t->next) {
        void *nt = NULL;
        mpi_type_make(t, &nt);
        if (t->committed)
            L("MPI_Type_commit", U(&nt));
        t->real = nt;
    }
    mpi_userop_rebuild();
    mpi_errh_rebuild();
    mpi_names_rebuild();
    /* Freed types were kept only as bases of live ones: free them again now. */
    for (struct vtype *t = vtype_list; t; t = t->next)
        if (t->freed && t->real) {
            void *r = t->real;
            L("MPI_Type_free", U(&r));
        }
    return 0;
}
