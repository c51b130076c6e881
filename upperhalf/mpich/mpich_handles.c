/* mpich_handles.c — the MPICH-ABI shim's translation of handles, constants and statuses: MPICH's
 * integer handles <-> the libmpi.so.40 shim's (predefined ones by MPI name, created ones through tables). */
#include "mpich_shim.h"

#include "mpi_predef.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* From the libmpi.so.40 shim (crac_py/codegen/mpi_spec.py): MPICH's value of each of its
 * predefined objects, 0 where MPICH has none. */
extern const int64_t mpi_mpich_values[];

static void die(const char *what)
{
    fprintf(stderr, "crac: error: MPICH-ABI MPI shim: %s\n", what);
    fflush(stderr);
    _exit(1);
}

/* dlsym on the libmpi.so.40 shim itself: this shim defines the same names. */
void *o_fn(const char *name)
{
    static void *h;
    if (!h)
        h = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD);
    void *f = h ? dlsym(h, name) : NULL;
    if (!f) {
        char msg[160];
        snprintf(msg, sizeof(msg), "crac's libmpi.so.40 shim has no %s", name);
        die(msg);
    }
    return f;
}

/* ---- predefined handles: MPICH's value <-> the shim's object of the same MPI name ---- */

struct pmap {
    int64_t mpich;
    oh o;
};
static struct pmap *pmap; /* sorted by MPICH value */
static int n_pmap;
static pthread_once_t pmap_once = PTHREAD_ONCE_INIT;

static int cmp_pmap(const void *a, const void *b)
{
    const struct pmap *x = a, *y = b;
    return x->mpich < y->mpich ? -1 : x->mpich > y->mpich;
}

static void pmap_build(void)
{
    pmap = calloc((size_t)mpi_n_predefs, sizeof(*pmap));
    if (!pmap)
        die("out of memory");
    for (int i = 0; i < mpi_n_predefs; i++)
        if (mpi_mpich_values[i]) {
            /* Two Open MPI objects with one MPICH value (aliases): the first, as mpi.h orders. */
            int dup = 0;
            for (int j = 0; j < n_pmap; j++)
                dup |= pmap[j].mpich == mpi_mpich_values[i];
            if (!dup)
                pmap[n_pmap++] = (struct pmap){mpi_mpich_values[i], mpi_predefs[i].upper};
        }
    qsort(pmap, (size_t)n_pmap, sizeof(*pmap), cmp_pmap);
}

static oh predef_in(int64_t v)
{
    pthread_once(&pmap_once, pmap_build);
    int lo = 0, hi = n_pmap - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (pmap[mid].mpich == v)
            return pmap[mid].o;
        if (pmap[mid].mpich < v)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* 1 and *V when O is a predefined object MPICH has too. */
static int predef_out(oh o, int64_t *v)
{
    pthread_once(&pmap_once, pmap_build);
    for (int i = 0; i < n_pmap; i++)
        if (pmap[i].o == o) {
            *v = pmap[i].mpich;
            return 1;
        }
    return 0;
}

oh o_request_null(void)
{
    static oh null;
    if (!null)
        null = predef_in((int64_t)MPI_REQUEST_NULL);
    return null;
}

/* ---- created handles: BASE + slot, a slot holding the shim's handle (upper memory, so saved
 * and restored with the program; the shim's handle stays valid across a restart) ---- */

struct htab {
    pthread_mutex_t mu;
    int base;
    oh *slot;
    int cap, used;  /* slots [0, used) handed out at least once */
    int *free_list; /* freed slots, reused first */
    int n_free;
};
#define HTAB_MAX (1 << 22) /* under the next kind's predefined values */
#define HTAB(b) {PTHREAD_MUTEX_INITIALIZER, (b), NULL, 0, 0, NULL, 0}
/* Away from MPICH's predefined values of each kind (0x44000000 MPI_COMM_WORLD ...). */
static struct htab comms = HTAB(0x44400000), types = HTAB(0x4c400000), ops = HTAB(0x58400000),
                   reqs = HTAB(0x2c400000), groups = HTAB(0x48400000);

static int h_new(struct htab *t, oh o)
{
    pthread_mutex_lock(&t->mu);
    int i;
    if (t->n_free)
        i = t->free_list[--t->n_free];
    else {
        if (t->used == t->cap) {
            int cap = t->cap ? 2 * t->cap : 256;
            oh *s = cap <= HTAB_MAX ? realloc(t->slot, sizeof(*s) * (size_t)cap) : NULL;
            int *f = s ? realloc(t->free_list, sizeof(*f) * (size_t)cap) : NULL;
            if (!s || !f)
                die("out of handles");
            t->slot = s;
            t->free_list = f;
            t->cap = cap;
        }
        i = t->used++;
    }
    t->slot[i] = o;
    pthread_mutex_unlock(&t->mu);
    return t->base + i;
}

/* The slot of handle H, or -1. Call under t->mu. */
static int h_index(struct htab *t, int h)
{
    int i = h - t->base;
    return h >= t->base && i < t->used && t->slot[i] ? i : -1;
}

static oh h_get(struct htab *t, int h)
{
    pthread_mutex_lock(&t->mu);
    int i = h_index(t, h);
    oh o = i >= 0 ? t->slot[i] : NULL;
    pthread_mutex_unlock(&t->mu);
    return o;
}

static void h_free(struct htab *t, int h)
{
    pthread_mutex_lock(&t->mu);
    int i = h_index(t, h);
    if (i >= 0) {
        t->slot[i] = NULL;
        t->free_list[t->n_free++] = i;
    }
    pthread_mutex_unlock(&t->mu);
}

static int h_find(struct htab *t, oh o)
{
    pthread_mutex_lock(&t->mu);
    int h = 0;
    for (int i = 0; i < t->used && !h; i++)
        if (t->slot[i] == o)
            h = t->base + i;
    pthread_mutex_unlock(&t->mu);
    return h;
}

/* A handle in: predefined first (a few compares), else the table. */
static oh handle_in(struct htab *t, int h)
{
    oh o = h_get(t, h);
    return o ? o : predef_in(h);
}

static int handle_out_new(struct htab *t, oh o)
{
    int64_t v;
    return predef_out(o, &v) ? (int)v : h_new(t, o);
}

oh predef_handle_in(int h) { return predef_in(h); }

int predef_handle_out(oh o, int *h)
{
    int64_t v;
    if (!predef_out(o, &v))
        return 0;
    *h = (int)v;
    return 1;
}

oh comm_in(MPI_Comm c) { return handle_in(&comms, c); }
MPI_Comm comm_out(oh o) { return handle_out_new(&comms, o); }
void comm_forget(MPI_Comm c) { h_free(&comms, c); }
oh type_in(MPI_Datatype t) { return handle_in(&types, t); }
MPI_Datatype type_out_new(oh o) { return handle_out_new(&types, o); }
void type_forget(MPI_Datatype t) { h_free(&types, t); }
oh op_in(MPI_Op o) { return handle_in(&ops, o); }
MPI_Op op_out_new(oh o) { return handle_out_new(&ops, o); }
void op_forget(MPI_Op o) { h_free(&ops, o); }
oh group_in(MPI_Group g) { return handle_in(&groups, g); }
MPI_Group group_out(oh o) { return handle_out_new(&groups, o); }
void group_forget(MPI_Group g) { h_free(&groups, g); }

MPI_Datatype type_out(oh o)
{
    int64_t v;
    if (predef_out(o, &v))
        return (MPI_Datatype)v;
    int h = h_find(&types, o);
    return h ? h : MPI_DATATYPE_NULL;
}

/* Requests come and go at every nonblocking call: MPI_REQUEST_NULL without a search. */
oh req_in(MPI_Request r) { return r == MPI_REQUEST_NULL ? o_request_null() : h_get(&reqs, r); }

MPI_Request req_out_new(oh o) { return o == o_request_null() ? MPI_REQUEST_NULL : h_new(&reqs, o); }

void req_update(MPI_Request *r, oh o)
{
    if (o != o_request_null() || *r == MPI_REQUEST_NULL)
        return;
    h_free(&reqs, *r);
    *r = MPI_REQUEST_NULL;
}

/* ---- constants ---- */

int rank_in(int r)
{
    return r == MPI_ANY_SOURCE  ? (int)OC(MPI_ANY_SOURCE)
           : r == MPI_PROC_NULL ? (int)OC(MPI_PROC_NULL)
           : r == MPI_ROOT      ? (int)OC(MPI_ROOT)
                                : r;
}

int rank_out(int r)
{
    return r == OC(MPI_ANY_SOURCE)  ? MPI_ANY_SOURCE
           : r == OC(MPI_PROC_NULL) ? MPI_PROC_NULL
           : r == OC(MPI_ROOT)      ? MPI_ROOT
                                    : r;
}

int tag_in(int t) { return t == MPI_ANY_TAG ? (int)OC(MPI_ANY_TAG) : t; }
int tag_out(int t) { return t == OC(MPI_ANY_TAG) ? MPI_ANY_TAG : t; }
int undef_in(int v) { return v == MPI_UNDEFINED ? (int)OC(MPI_UNDEFINED) : v; }
int undef_out(int v) { return v == OC(MPI_UNDEFINED) ? MPI_UNDEFINED : v; }

const void *buf_in(const void *p)
{
    return p == MPI_IN_PLACE ? (const void *)(intptr_t)OC(MPI_IN_PLACE) : p;
}

int err_in(int e)
{
    for (int i = 0; e && i < CRAC_N_ERRS; i++)
        if (crac_mpich_errs[i] == e)
            return crac_ompi_errs[i] >= 0 ? crac_ompi_errs[i] : e;
    return e;
}

/* An Open MPI code MPICH has no class for is MPI_ERR_OTHER. */
int err_out(int e)
{
    if (!e)
        return MPI_SUCCESS;
    for (int i = 0; i < CRAC_N_ERRS; i++)
        if (crac_ompi_errs[i] == e)
            return crac_mpich_errs[i];
    return MPI_ERR_OTHER;
}

/* ---- statuses: MPICH keeps the byte count in count_lo and count_hi_and_cancelled ---- */

struct ostatus *status_arg(MPI_Status *st, struct ostatus *tmp)
{
    if (st == MPI_STATUS_IGNORE)
        return (struct ostatus *)(intptr_t)OC(MPI_STATUS_IGNORE);
    memset(tmp, 0, sizeof(*tmp));
    return tmp;
}

void status_out(MPI_Status *st, const struct ostatus *o)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    st->count_lo = (int)(unsigned)o->ucount;
    st->count_hi_and_cancelled = (int)(((o->ucount >> 32) << 1) | (size_t)(o->cancelled & 1));
    st->MPI_SOURCE = rank_out(o->source);
    st->MPI_TAG = tag_out(o->tag);
    st->MPI_ERROR = err_out(o->error);
}

const struct ostatus *status_in(struct ostatus *o, const MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE)
        return (const struct ostatus *)(intptr_t)OC(MPI_STATUS_IGNORE);
    o->ucount =
        ((size_t)((unsigned)st->count_hi_and_cancelled >> 1) << 32) + (unsigned)st->count_lo;
    o->cancelled = st->count_hi_and_cancelled & 1;
    o->source = rank_in(st->MPI_SOURCE);
    o->tag = tag_in(st->MPI_TAG);
    o->error = err_in(st->MPI_ERROR);
    return o;
}
