/* mpi_types.c — the program's derived datatypes: each a record of its constructor and arguments
 * (as MPI_Type_get_contents lays them out), made in the library now and again at every restart. */
#include "mpi_shim.h"

#include <stdlib.h>
#include <string.h>

static void *alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        mpi_die("out of memory in the MPI shim");
    return p;
}

static void *copy_of(const void *src, size_t n)
{
    void *p = alloc(n);
    if (n)
        memcpy(p, src, n);
    return p;
}

/* The library's handles of N of the program's datatypes, laid out as the library's ABI has
 * them (MPICH's are 4-byte integers). Freed by the caller. */
static void *lower_types(const MPI_Datatype *types, int n)
{
    if (mpi_abi.mpich) {
        int *out = alloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++)
            out[i] = (int)(uintptr_t)type_real(types[i]);
        return out;
    }
    void **out = alloc(sizeof(void *) * (size_t)n);
    for (int i = 0; i < n; i++)
        out[i] = type_real(types[i]);
    return out;
}

/* T made in the library from its record: *REAL its handle. With the gate held. */
int mpi_type_make(struct vtype *t, void **real)
{
    const int *i = t->ints;
    const MPI_Aint *a = t->aints;
    uint64_t old = t->nt ? U(type_real(t->types[0])) : 0, out = U(real);
    switch (t->combiner) {
    case MPI_COMBINER_DUP: return L("MPI_Type_dup", old, out);
    case MPI_COMBINER_CONTIGUOUS: return L("MPI_Type_contiguous", (uint64_t)i[0], old, out);
    case MPI_COMBINER_VECTOR:
        return L("MPI_Type_vector", (uint64_t)i[0], (uint64_t)i[1], (uint64_t)i[2], old, out);
    case MPI_COMBINER_HVECTOR:
        return L("MPI_Type_create_hvector", (uint64_t)i[0], (uint64_t)i[1], (uint64_t)a[0], old,
                 out);
    case MPI_COMBINER_INDEXED:
        return L("MPI_Type_indexed", (uint64_t)i[0], U(i + 1), U(i + 1 + i[0]), old, out);
    case MPI_COMBINER_HINDEXED:
        return L("MPI_Type_create_hindexed", (uint64_t)i[0], U(i + 1), U(a), old, out);
    case MPI_COMBINER_INDEXED_BLOCK:
        return L("MPI_Type_create_indexed_block", (uint64_t)i[0], (uint64_t)i[1], U(i + 2), old,
                 out);
    case MPI_COMBINER_HINDEXED_BLOCK:
        return L("MPI_Type_create_hindexed_block", (uint64_t)i[0], (uint64_t)i[1], U(a), old, out);
    case MPI_COMBINER_RESIZED:
        return L("MPI_Type_create_resized", old, (uint64_t)a[0], (uint64_t)a[1], out);
    case MPI_COMBINER_STRUCT: {
        void *lt = lower_types(t->types, t->nt);
        int rc = L("MPI_Type_create_struct", (uint64_t)i[0], U(i + 1), U(a), U(lt), out);
        free(lt);
        return rc;
    }
    case MPI_COMBINER_SUBARRAY: {
        int n = i[0], order = i[1 + 3 * n];
        if (mpi_abi.mpich) /* MPICH's MPI_ORDER_C and MPI_ORDER_FORTRAN */
            order = order == MPI_ORDER_C ? 56 : 57;
        return L("MPI_Type_create_subarray", (uint64_t)n, U(i + 1), U(i + 1 + n), U(i + 1 + 2 * n),
                 (uint64_t)order, old, out);
    }
    default:
        mpi_die("MPI datatype record %p with an unknown constructor %d", (void *)t, t->combiner);
    }
}

/* A datatype's record and the library's type are made with the checkpoint gate held, as a
 * communicator's are (mpi_comm_made): a checkpoint between the two left a record half described
 * for the restart's rebuild, or a handle of the library before it. */
static int type_create(int combiner, int ni, const int *ints, int na, const MPI_Aint *aints, int nt,
                       const MPI_Datatype *types, MPI_Datatype *out)
{
    if (ni < 0 || na < 0 || nt < 0)
        return MPI_ERR_COUNT;
    cross_gate_enter();
    pthread_mutex_lock(&mpi_mu);
    struct vtype *t = vtype_new();
    t->combiner = combiner;
    t->ni = ni;
    t->na = na;
    t->nt = nt;
    t->ints = copy_of(ints, sizeof(int) * (size_t)ni);
    t->aints = copy_of(aints, sizeof(MPI_Aint) * (size_t)na);
    t->types = copy_of(types, sizeof(MPI_Datatype) * (size_t)nt);
    pthread_mutex_unlock(&mpi_mu);
    int rc = mpi_type_make(t, &t->real);
    cross_gate_leave();
    *out = (MPI_Datatype)(void *)t;
    return rc;
}

/* INTS: COUNT, then each of the COUNT-long arrays A and B given (NULL: none). */
static int *counted(int count, const int *a, const int *b, int head2, int *n)
{
    *n = 1 + (head2 >= 0) + (a ? count : 0) + (b ? count : 0);
    int *v = alloc(sizeof(int) * (size_t)*n);
    int k = 0;
    v[k++] = count;
    if (head2 >= 0)
        v[k++] = head2;
    for (int j = 0; a && j < count; j++)
        v[k++] = a[j];
    for (int j = 0; b && j < count; j++)
        v[k++] = b[j];
    return v;
}

int MPI_Type_dup(MPI_Datatype old, MPI_Datatype *out)
{
    return type_create(MPI_COMBINER_DUP, 0, NULL, 0, NULL, 1, &old, out);
}

int MPI_Type_contiguous(int count, MPI_Datatype old, MPI_Datatype *out)
{
    return type_create(MPI_COMBINER_CONTIGUOUS, 1, &count, 0, NULL, 1, &old, out);
}

int MPI_Type_vector(int count, int blocklen, int stride, MPI_Datatype old, MPI_Datatype *out)
{
    int ints[3] = {count, blocklen, stride};
    return type_create(MPI_COMBINER_VECTOR, 3, ints, 0, NULL, 1, &old, out);
}

int MPI_Type_create_hvector(int count, int blocklen, MPI_Aint stride, MPI_Datatype old,
                            MPI_Datatype *out)
{
    int ints[2] = {count, blocklen};
    return type_create(MPI_COMBINER_HVECTOR, 2, ints, 1, &stride, 1, &old, out);
}

int MPI_Type_indexed(int count, const int blocklens[], const int displs[], MPI_Datatype old,
                     MPI_Datatype *out)
{
    int n;
    int *ints = counted(count, blocklens, displs, -1, &n);
    int rc = type_create(MPI_COMBINER_INDEXED, n, ints, 0, NULL, 1, &old, out);
    free(ints);
    return rc;
}

int MPI_Type_create_hindexed(int count, const int blocklens[], const MPI_Aint displs[],
                             MPI_Datatype old, MPI_Datatype *out)
{
    int n;
    int *ints = counted(count, blocklens, NULL, -1, &n);
    int rc = type_create(MPI_COMBINER_HINDEXED, n, ints, count, displs, 1, &old, out);
    free(ints);
    return rc;
}

int MPI_Type_create_indexed_block(int count, int blocklen, const int displs[], MPI_Datatype old,
                                  MPI_Datatype *out)
{
    int n;
    int *ints = counted(count, displs, NULL, blocklen, &n);
    int rc = type_create(MPI_COMBINER_INDEXED_BLOCK, n, ints, 0, NULL, 1, &old, out);
    free(ints);
    return rc;
}

int MPI_Type_create_hindexed_block(int count, int blocklen, const MPI_Aint displs[],
                                   MPI_Datatype old, MPI_Datatype *out)
{
    int ints[2] = {count, blocklen};
    return type_create(MPI_COMBINER_HINDEXED_BLOCK, 2, ints, count, displs, 1, &old, out);
}

int MPI_Type_create_struct(int count, const int blocklens[], const MPI_Aint displs[],
                           const MPI_Datatype types[], MPI_Datatype *out)
{
    int n;
    int *ints = counted(count, blocklens, NULL, -1, &n);
    int rc = type_create(MPI_COMBINER_STRUCT, n, ints, count, displs, count, types, out);
    free(ints);
    return rc;
}

int MPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[], const int starts[],
                             int order, MPI_Datatype old, MPI_Datatype *out)
{
    if (ndims < 0)
        return MPI_ERR_DIMS;
    int n = 2 + 3 * ndims;
    int *ints = alloc(sizeof(int) * (size_t)n);
    ints[0] = ndims;
    for (int j = 0; j < ndims; j++) {
        ints[1 + j] = sizes[j];
        ints[1 + ndims + j] = subsizes[j];
        ints[1 + 2 * ndims + j] = starts[j];
    }
    ints[1 + 3 * ndims] = order;
    int rc = type_create(MPI_COMBINER_SUBARRAY, n, ints, 0, NULL, 1, &old, out);
    free(ints);
    return rc;
}

int MPI_Type_create_resized(MPI_Datatype old, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *out)
{
    MPI_Aint aints[2] = {lb, extent};
    return type_create(MPI_COMBINER_RESIZED, 0, NULL, 2, aints, 1, &old, out);
}

static struct vtype *type_v(MPI_Datatype t)
{
    if (predef_lower((void *)t))
        return NULL;
    struct vtype *v = (struct vtype *)(void *)t;
    return v && v->magic == VMAGIC ? v : NULL;
}

int MPI_Type_commit(MPI_Datatype *type)
{
    struct vtype *t = type_v(*type);
    if (!t)
        return MPI_SUCCESS; /* predefined types are committed */
    cross_gate_enter();
    int rc = L("MPI_Type_commit", U(&t->real));
    t->committed = 1;
    cross_gate_leave();
    return rc;
}

int MPI_Type_free(MPI_Datatype *type)
{
    struct vtype *t = type_v(*type);
    if (!t)
        return MPI_ERR_TYPE;
    /* One step with the gate held, as MPI_Comm_free. */
    cross_gate_enter();
    pthread_mutex_lock(&mpi_mu);
    void *real = t->real;
    int rc = L("MPI_Type_free", U(&real));
    t->freed = 1; /* kept: a live type built on it is rebuilt from it at restart */
    pthread_mutex_unlock(&mpi_mu);
    cross_gate_leave();
    *type = MPI_DATATYPE_NULL;
    return rc;
}

int MPI_Type_get_envelope(MPI_Datatype type, int *num_integers, int *num_addresses,
                          int *num_datatypes, int *combiner)
{
    struct vtype *v = type_v(type);
    if (!v) {
        if (!predef_lower((void *)type))
            return MPI_ERR_TYPE;
        *num_integers = *num_addresses = *num_datatypes = 0;
        *combiner = MPI_COMBINER_NAMED;
        return MPI_SUCCESS;
    }
    *num_integers = v->ni;
    *num_addresses = v->na;
    *num_datatypes = v->nt;
    *combiner = v->combiner;
    return MPI_SUCCESS;
}

int MPI_Type_get_contents(MPI_Datatype type, int max_integers, int max_addresses, int max_datatypes,
                          int integers[], MPI_Aint addresses[], MPI_Datatype datatypes[])
{
    struct vtype *v = type_v(type);
    if (!v) /* a predefined type has no contents */
        return predef_lower((void *)type) ? MPI_ERR_ARG : MPI_ERR_TYPE;
    if (max_integers < v->ni || max_addresses < v->na || max_datatypes < v->nt)
        return MPI_ERR_ARG;
    /* The program frees a derived type it gets here: it would free the record this one uses. */
    for (int i = 0; i < v->nt; i++)
        if (!predef_lower((void *)v->types[i]))
            return mpi_refused("MPI_Type_get_contents (of a type made from a derived type)");
    memcpy(integers, v->ints, sizeof(int) * (size_t)v->ni);
    memcpy(addresses, v->aints, sizeof(MPI_Aint) * (size_t)v->na);
    memcpy(datatypes, v->types, sizeof(MPI_Datatype) * (size_t)v->nt);
    return MPI_SUCCESS;
}
