/* mpi_intercomm.c — inter-communicators (docs/MPI.md, "Groups and inter-communicators"):
 * MPI_Intercomm_create/_merge described by both groups' world ranks, the leaders and the tag,
 * and rebuilt from that at restart; the ghost counters the cut counts creations on. */
#include "mpi_shim.h"

#include <stdlib.h>
#include <string.h>

struct vcomm *mpi_aux;

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static int min_of(const int *w, int n)
{
    int m = n > 0 ? w[0] : -1;
    for (int i = 1; i < n; i++)
        if (w[i] < m)
            m = w[i];
    return m;
}

/* A hash both sides of an inter-communicator compute alike: the two (disjoint) groups in the
 * order of their least world rank. */
static uint64_t pair_hash(uint64_t h, const int *a, int na, const int *b, int nb)
{
    if (b && nb > 0 && min_of(b, nb) < min_of(a, na)) {
        const int *t = a;
        int nt = na;
        a = b, na = nb, b = t, nb = nt;
    }
    h = fnv(h, (uint64_t)na);
    for (int i = 0; i < na; i++)
        h = fnv(h, (uint64_t)a[i]);
    h = fnv(h, (uint64_t)nb);
    for (int i = 0; i < nb; i++)
        h = fnv(h, (uint64_t)b[i]);
    return h;
}

struct vcomm *mpi_ghost(uint64_t kind, const int *a, int na, const int *b, int nb, int tag)
{
    uint64_t key = fnv(pair_hash(fnv(0xcbf29ce484222325ULL, kind), a, na, b, nb), (uint64_t)tag);
    key |= 2; /* never FIN_KEY (1) nor 0, the cut's markers */
    pthread_mutex_lock(&mpi_mu);
    struct vcomm *g = vcomm_list;
    while (g && !(g->ghost && g->key == key))
        g = g->next;
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g)
            mpi_die("out of memory in the MPI shim");
        /* Created during a cut, it is held (target 0) until the table raises its target. */
        g->magic = VMAGIC;
        g->ghost = 1;
        g->key = key;
        vcomm_append(g);
    }
    pthread_mutex_unlock(&mpi_mu);
    return g;
}

int comm_peer_world(struct vcomm *c, int peer)
{
    if (peer < 0)
        return -1;
    if (c->inter)
        return peer < c->remote_size ? c->remote_world[peer] : -1;
    return peer < c->size ? c->world_ranks[peer] : -1;
}

/* At MPI_Init, every rank: the leaders' exchange of MPI_Intercomm_create runs on it, never on a
 * communicator of the program, and it is rebuilt and drained like the program's. */
void mpi_groups_start(void)
{
    void *d = NULL;
    L("MPI_Comm_dup", U(lower_named("ompi_mpi_comm_world")), U(&d));
    pthread_mutex_lock(&mpi_mu);
    mpi_aux = vcomm_wrap(d);
    pthread_mutex_unlock(&mpi_mu);
    if (!mpi_aux)
        mpi_die("out of memory in the MPI shim");
}

/* The exchange: the leaders swap their groups (world ranks) over the shim's communicator with
 * the program's tag, then each leader sends the other side's to its members. All of it is
 * point to point of the shim's own, so a cut meets it as ordinary messages; only the library's
 * MPI_Intercomm_create, once every participant knows both groups, is a counted creation. A
 * message: [size, leader's rank in its group, world ranks...]. */
static int exchange(struct vcomm *lc, int local_leader, MPI_Comm peer_comm, int remote_leader,
                    int tag, int *buf, int len)
{
    MPI_Comm aux = (MPI_Comm)(void *)mpi_aux;
    if (lc->rank != local_leader)
        return MPI_Recv(buf, len, MPI_INT, lc->world_ranks[local_leader], tag, aux,
                        MPI_STATUS_IGNORE);
    struct vcomm *pc = comm_v(peer_comm);
    if (!pc)
        return MPI_ERR_COMM;
    int rw = comm_peer_world(pc, remote_leader);
    if (rw < 0 || rw == mpi_world_rank)
        return MPI_ERR_RANK;
    int *mine = calloc((size_t)len, sizeof(int));
    MPI_Request *reqs = calloc((size_t)lc->size, sizeof(*reqs));
    if (!mine || !reqs) {
        free(mine);
        free(reqs);
        return MPI_ERR_NO_MEM;
    }
    mine[0] = lc->size;
    mine[1] = local_leader;
    memcpy(mine + 2, lc->world_ranks, sizeof(int) * (size_t)lc->size);
    int rc = MPI_Sendrecv(mine, len, MPI_INT, rw, tag, buf, len, MPI_INT, rw, tag, aux,
                          MPI_STATUS_IGNORE);
    int n = 0;
    for (int i = 0; i < lc->size && rc == MPI_SUCCESS; i++)
        if (i != local_leader)
            rc = MPI_Isend(buf, len, MPI_INT, lc->world_ranks[i], tag, aux, &reqs[n++]);
    int rc2 = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    free(mine);
    free(reqs);
    return rc != MPI_SUCCESS ? rc : rc2;
}

static int *copy_ints(const int *w, int n)
{
    int *c = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!c)
        mpi_die("out of memory in the MPI shim");
    memcpy(c, w, sizeof(int) * (size_t)n);
    return c;
}

/* The record of a new inter-communicator REAL whose local group is LOCAL's. Its key is the
 * same on both sides: both groups, and how many inter-communicators between them this process
 * already holds (each side creates them in the same order). */
static struct vcomm *inter_new(void *real, const struct vcomm *local, int rsize, const int *rw,
                               int local_leader, int remote_leader_world, int tag)
{
    struct vcomm *v = calloc(1, sizeof(*v));
    if (!v)
        mpi_die("out of memory in the MPI shim");
    v->magic = VMAGIC;
    v->real = real;
    v->inter = 1;
    v->size = local->size;
    v->rank = local->rank;
    v->world_ranks = copy_ints(local->world_ranks, local->size);
    v->remote_size = rsize;
    v->remote_world = copy_ints(rw, rsize);
    v->local_leader = local_leader;
    v->remote_leader_world = remote_leader_world;
    v->tag = tag;
    uint64_t base = pair_hash(0x6b1e5d9a1c3f0001ULL, v->world_ranks, v->size, rw, rsize);
    pthread_mutex_lock(&mpi_mu);
    int ordinal = 0;
    for (struct vcomm *o = vcomm_list; o; o = o->next)
        if (o->inter && pair_hash(0x6b1e5d9a1c3f0001ULL, o->world_ranks, o->size, o->remote_world,
                                  o->remote_size) == base)
            ordinal++;
    v->key = fnv(base, (uint64_t)ordinal) | 2;
    vcomm_append(v);
    pthread_mutex_unlock(&mpi_mu);
    return v;
}

/* MPI_Comm_dup of an inter-communicator (counted on it by the caller): the same description,
 * so a restart builds it with the same calls. */
int mpi_inter_dup(struct vcomm *c, void *real, MPI_Comm *out)
{
    *out = (MPI_Comm)(void *)inter_new(real, c, c->remote_size, c->remote_world, c->local_leader,
                                       c->remote_leader_world, c->tag);
    return MPI_SUCCESS;
}

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                         int remote_leader, int tag, MPI_Comm *newintercomm)
{
    struct vcomm *lc = comm_v(local_comm);
    if (!lc || lc->inter)
        return MPI_ERR_COMM;
    if (local_leader < 0 || local_leader >= lc->size)
        return MPI_ERR_RANK;
    int len = mpi_world_size + 2;
    int *buf = calloc((size_t)len, sizeof(int));
    if (!buf)
        return MPI_ERR_NO_MEM;
    int rc = exchange(lc, local_leader, peer_comm, remote_leader, tag, buf, len);
    int rsize = buf[0], rlead = buf[1], *rw = buf + 2;
    if (rc == MPI_SUCCESS && (rsize < 1 || rsize > mpi_world_size || rlead < 0 || rlead >= rsize))
        rc = MPI_ERR_INTERN;
    if (rc != MPI_SUCCESS) {
        free(buf);
        return rc;
    }
    /* Every participant (both groups) counts it on the same ghost, so the cut lets a side that
     * has not started it through to the other side's count. */
    struct vcomm *ghost =
        mpi_ghost(0x494e544552ULL /* "INTER" */, lc->world_ranks, lc->size, rw, rsize, tag);
    void *real = NULL;
    mpi_enter(ghost, 1);
    cross_gate_enter(); /* to the record made: see mpi_comm_made */
    rc = L("MPI_Intercomm_create", U(lc->real), (uint64_t)local_leader, U(mpi_aux->real),
           (uint64_t)rw[rlead], (uint64_t)tag, U(&real));
    if (rc == MPI_SUCCESS)
        *newintercomm =
            (MPI_Comm)(void *)inter_new(real, lc, rsize, rw, local_leader, rw[rlead], tag);
    cross_gate_leave();
    mpi_leave(ghost, 1);
    free(buf);
    return rc;
}

/* A collective on the inter-communicator (both groups): counted on it, its key being the same
 * on both sides. The merged communicator is an ordinary one. */
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    struct vcomm *c = comm_v(intercomm);
    if (!c || !c->inter)
        return MPI_ERR_COMM;
    void *real = NULL;
    mpi_enter(c, 1);
    cross_gate_enter(); /* to the record made: see mpi_comm_made */
    int rc = L("MPI_Intercomm_merge", U(c->real), (uint64_t)(high != 0), U(&real));
    rc = mpi_comm_made(real, rc, newintracomm);
    cross_gate_leave();
    mpi_leave(c, 1);
    return rc;
}

/* At restart, in creation order: the local group as a communicator of its own (the program's
 * local communicator may be freed since), then the library's MPI_Intercomm_create with the
 * leaders' world ranks on the rebuilt shim communicator. */
void mpi_intercomm_rebuild(struct vcomm *c)
{
    void *lg = mpi_lower_group(c->world_ranks, c->size), *local = NULL, *nc = NULL;
    L("MPI_Comm_create_group", U(lower_named("ompi_mpi_comm_world")), U(lg),
      (uint64_t)((c->key + 1) % 32768), U(&local));
    mpi_lower_group_free(lg, c->size);
    int rc = L("MPI_Intercomm_create", U(local), (uint64_t)c->local_leader, U(mpi_aux->real),
               (uint64_t)c->remote_leader_world, (uint64_t)(c->key % 32768), U(&nc));
    if (rc != MPI_SUCCESS)
        mpi_die("cannot create an inter-communicator again at restart (error %d)", rc);
    L("MPI_Comm_free", U(&local));
    c->real = nc;
}
