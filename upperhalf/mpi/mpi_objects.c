/* mpi_objects.c — the program's MPI handles (docs/MPI.md): predefined ones are the shim's own
 * data symbols; communicators, datatypes and requests it creates are records in upper memory
 * whose lower handle a restart replaces, described so a fresh library can build them again. */
#include "mpi_shim.h"

#include <stdlib.h>
#include <string.h>

struct vcomm *vcomm_world, *vcomm_self, *vcomm_list;
struct vtype *vtype_list;
struct vreq *vreq_list;

static struct vcomm **comm_tail = &vcomm_list;
static struct vtype **type_tail = &vtype_list;
static struct vreq *vreq_tail;

struct vcomm *comm_v(MPI_Comm c)
{
    if ((void *)c == (void *)&ompi_mpi_comm_world)
        return vcomm_world;
    if ((void *)c == (void *)&ompi_mpi_comm_self)
        return vcomm_self;
    struct vcomm *v = (struct vcomm *)(void *)c;
    if (!v || predef_lower(v))
        return NULL;
    return v->magic == VMAGIC ? v : NULL;
}

void *type_real(MPI_Datatype t)
{
    void *p = predef_lower((void *)t);
    if (p)
        return p;
    struct vtype *v = (struct vtype *)(void *)t;
    return v && v->magic == VMAGIC ? v->real : (void *)t;
}

void *op_real(MPI_Op o)
{
    void *p = predef_lower((void *)o);
    if (!p)
        p = userop_real(o);
    if (!p)
        mpi_die("MPI_Op %p is neither a predefined operation nor one of MPI_Op_create", (void *)o);
    return p;
}

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

int vcomm_describe(struct vcomm *c)
{
    L("MPI_Comm_size", U(c->real), U(&c->size));
    L("MPI_Comm_rank", U(c->real), U(&c->rank));
    c->world_ranks = calloc((size_t)c->size, sizeof(int));
    int *mine = calloc((size_t)c->size, sizeof(int));
    if (!c->world_ranks || !mine)
        mpi_die("out of memory in the MPI shim");
    for (int i = 0; i < c->size; i++)
        mine[i] = i;
    void *g = NULL, *wg = NULL;
    L("MPI_Comm_group", U(c->real), U(&g));
    L("MPI_Comm_group", U(lower_named("ompi_mpi_comm_world")), U(&wg));
    L("MPI_Group_translate_ranks", U(g), (uint64_t)c->size, U(mine), U(wg), U(c->world_ranks));
    L("MPI_Group_free", U(&g));
    L("MPI_Group_free", U(&wg));
    free(mine);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < c->size; i++)
        h = fnv(h, (uint64_t)c->world_ranks[i]);
    /* Members create communicators over the same set in the same order: the ordinal tells
     * duplicates apart. */
    int ordinal = 0;
    for (struct vcomm *o = vcomm_list; o; o = o->next)
        if (o != c && o->size == c->size &&
            memcmp(o->world_ranks, c->world_ranks, sizeof(int) * (size_t)c->size) == 0)
            ordinal++;
    c->key = fnv(h, (uint64_t)ordinal);
    return 0;
}

struct vcomm *vcomm_wrap(void *real)
{
    struct vcomm *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->magic = VMAGIC;
    c->real = real;
    vcomm_describe(c);
    *comm_tail = c;
    comm_tail = &c->next;
    return c;
}

int mpi_comm_made(void *real, int rc, MPI_Comm *out)
{
    if (rc != MPI_SUCCESS)
        return rc;
    if (!real || real == lower_named("ompi_mpi_comm_null")) {
        *out = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    pthread_mutex_lock(&mpi_mu);
    struct vcomm *v = vcomm_wrap(real);
    pthread_mutex_unlock(&mpi_mu);
    if (!v)
        return MPI_ERR_NO_MEM;
    *out = (MPI_Comm)(void *)v;
    return MPI_SUCCESS;
}

/* Call under mpi_mu. */
void vcomm_append(struct vcomm *c)
{
    *comm_tail = c;
    comm_tail = &c->next;
}

struct vtype *vtype_new(void)
{
    struct vtype *t = calloc(1, sizeof(*t));
    if (!t)
        mpi_die("out of memory in the MPI shim");
    t->magic = VMAGIC;
    *type_tail = t;
    type_tail = &t->next;
    return t;
}

/* Requests are kept in creation order (a restart posts the receives again in that order, so
 * matching order is the program's). Call under mpi_mu. */
struct vreq *vreq_new(void)
{
    struct vreq *r = calloc(1, sizeof(*r));
    if (!r)
        mpi_die("out of memory in the MPI shim");
    r->magic = VMAGIC;
    r->prev = vreq_tail;
    if (vreq_tail)
        vreq_tail->next = r;
    else
        vreq_list = r;
    vreq_tail = r;
    return r;
}

void vreq_free(struct vreq *r)
{
    if (r == vreq_tail)
        vreq_tail = r->prev;
    if (r->prev)
        r->prev->next = r->next;
    else
        vreq_list = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->magic = 0;
    free(r);
}

/* A persistent request started again is a new posting: the restart's repost order (the list's)
 * must be the order of postings, not of MPI_Recv_init calls. Call under mpi_mu. */
void vreq_to_tail(struct vreq *r)
{
    if (r == vreq_tail)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        vreq_list = r->next;
    r->next->prev = r->prev;
    r->prev = vreq_tail;
    r->next = NULL;
    vreq_tail->next = r;
    vreq_tail = r;
}
