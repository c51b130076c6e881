/* mpi_groups.c — MPI groups as virtual handles (docs/MPI.md, "Groups and inter-communicators"):
 * a group is its members' world ranks in upper memory, so it needs no rebuilding at restart;
 * MPI_Comm_create/_create_group/_compare, which build or compare communicators from groups. */
#include "mpi_shim.h"

#include <stdlib.h>
#include <string.h>

#define GMAGIC 0x4d5049475250564bULL

/* Every group operation is local set arithmetic on world ranks: the library below only ever
 * sees a group for the moment of a communicator's creation (mpi_lower_group). */
struct vgroup {
    uint64_t magic;
    int size, rank; /* rank: this process's index, or MPI_UNDEFINED */
    int *world;     /* world rank of each member, in the group's rank order */
};

static struct vgroup group_empty = {GMAGIC, 0, MPI_UNDEFINED, NULL};

static struct vgroup *group_v(MPI_Group g)
{
    if ((void *)g == (void *)&ompi_mpi_group_empty)
        return &group_empty;
    if (!g || (void *)g == (void *)&ompi_mpi_group_null || predef_lower((void *)g))
        return NULL;
    struct vgroup *v = (struct vgroup *)(void *)g;
    return v->magic == GMAGIC ? v : NULL;
}

/* A new group of the N world ranks W (copied); an empty one is MPI_GROUP_EMPTY. */
static int group_out(const int *w, int n, MPI_Group *out)
{
    if (n == 0) {
        *out = MPI_GROUP_EMPTY;
        return MPI_SUCCESS;
    }
    struct vgroup *g = calloc(1, sizeof(*g));
    int *copy = malloc(sizeof(int) * (size_t)n);
    if (!g || !copy) {
        free(g);
        free(copy);
        return MPI_ERR_NO_MEM;
    }
    memcpy(copy, w, sizeof(int) * (size_t)n);
    g->magic = GMAGIC;
    g->size = n;
    g->world = copy;
    g->rank = MPI_UNDEFINED;
    for (int i = 0; i < n; i++)
        if (w[i] == mpi_world_rank)
            g->rank = i;
    *out = (MPI_Group)(void *)g;
    return MPI_SUCCESS;
}

static int index_of(const struct vgroup *g, int world)
{
    for (int i = 0; i < g->size; i++)
        if (g->world[i] == world)
            return i;
    return -1;
}

/* Scratch of N ints (at least one), or NULL. */
static int *ints(int n) { return calloc(n > 0 ? (size_t)n : 1, sizeof(int)); }

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    return group_out(c->world_ranks, c->size, group);
}

int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group)
{
    struct vcomm *c = comm_v(comm);
    if (!c || !c->inter)
        return MPI_ERR_COMM;
    return group_out(c->remote_world, c->remote_size, group);
}

int MPI_Comm_remote_size(MPI_Comm comm, int *size)
{
    struct vcomm *c = comm_v(comm);
    if (!c || !c->inter)
        return MPI_ERR_COMM;
    *size = c->remote_size;
    return MPI_SUCCESS;
}

int MPI_Group_size(MPI_Group group, int *size)
{
    struct vgroup *g = group_v(group);
    if (!g)
        return MPI_ERR_GROUP;
    *size = g->size;
    return MPI_SUCCESS;
}

int MPI_Group_rank(MPI_Group group, int *rank)
{
    struct vgroup *g = group_v(group);
    if (!g)
        return MPI_ERR_GROUP;
    *rank = g->rank;
    return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group *group)
{
    struct vgroup *g = group_v(*group);
    if (!g)
        return MPI_ERR_GROUP;
    if (g != &group_empty) {
        g->magic = 0;
        free(g->world);
        free(g);
    }
    *group = MPI_GROUP_NULL;
    return MPI_SUCCESS;
}

/* Members SEL[0..n) of G (ranks in G, checked: in range, each once) as a new group. */
static int select_ranks(const struct vgroup *g, int n, const int *sel, MPI_Group *out)
{
    if (n < 0 || n > g->size)
        return MPI_ERR_ARG;
    int *w = ints(n);
    char *seen = calloc((size_t)g->size + 1, 1);
    int rc = w && seen ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        if (sel[i] < 0 || sel[i] >= g->size || seen[sel[i]])
            rc = MPI_ERR_RANK;
        else {
            seen[sel[i]] = 1;
            w[i] = g->world[sel[i]];
        }
    }
    if (rc == MPI_SUCCESS)
        rc = group_out(w, n, out);
    free(w);
    free(seen);
    return rc;
}

/* The members of G whose EXCLUDED mark is 0, in G's order. */
static int keep_unmarked(const struct vgroup *g, const char *excluded, MPI_Group *out)
{
    int *w = ints(g->size), k = 0;
    if (!w)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < g->size; i++)
        if (!excluded[i])
            w[k++] = g->world[i];
    int rc = group_out(w, k, out);
    free(w);
    return rc;
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    struct vgroup *g = group_v(group);
    return g ? select_ranks(g, n, ranks, newgroup) : MPI_ERR_GROUP;
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    struct vgroup *g = group_v(group);
    if (!g)
        return MPI_ERR_GROUP;
    if (n < 0 || n > g->size)
        return MPI_ERR_ARG;
    char *ex = calloc((size_t)g->size + 1, 1);
    if (!ex)
        return MPI_ERR_NO_MEM;
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        if (ranks[i] < 0 || ranks[i] >= g->size || ex[ranks[i]])
            rc = MPI_ERR_RANK;
        else
            ex[ranks[i]] = 1;
    }
    if (rc == MPI_SUCCESS)
        rc = keep_unmarked(g, ex, newgroup);
    free(ex);
    return rc;
}

/* The ranks the triplets (first, last, stride) name, in order, into *OUT (malloc'd); *N_OUT
 * their number. Each must be a rank of a group of SIZE, and named once. */
static int expand_ranges(int size, int n, int ranges[][3], int **out, int *n_out)
{
    if (n < 0)
        return MPI_ERR_ARG;
    int *sel = ints(size);
    char *seen = calloc((size_t)size + 1, 1);
    int k = 0, rc = sel && seen ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        int first = ranges[i][0], last = ranges[i][1], stride = ranges[i][2];
        if (stride == 0 || (stride > 0 && first > last) || (stride < 0 && first < last)) {
            rc = MPI_ERR_ARG;
            break;
        }
        for (long r = first; stride > 0 ? r <= last : r >= last; r += stride) {
            if (r < 0 || r >= size || seen[r]) {
                rc = MPI_ERR_RANK;
                break;
            }
            seen[r] = 1;
            sel[k++] = (int)r;
        }
    }
    free(seen);
    if (rc != MPI_SUCCESS) {
        free(sel);
        return rc;
    }
    *out = sel;
    *n_out = k;
    return MPI_SUCCESS;
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    struct vgroup *g = group_v(group);
    if (!g)
        return MPI_ERR_GROUP;
    int *sel, k;
    int rc = expand_ranges(g->size, n, ranges, &sel, &k);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = select_ranks(g, k, sel, newgroup);
    free(sel);
    return rc;
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    struct vgroup *g = group_v(group);
    if (!g)
        return MPI_ERR_GROUP;
    int *sel, k;
    int rc = expand_ranges(g->size, n, ranges, &sel, &k);
    if (rc != MPI_SUCCESS)
        return rc;
    char *ex = calloc((size_t)g->size + 1, 1);
    if (!ex) {
        free(sel);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < k; i++)
        ex[sel[i]] = 1;
    rc = keep_unmarked(g, ex, newgroup);
    free(ex);
    free(sel);
    return rc;
}

enum { SET_UNION, SET_INTERSECTION, SET_DIFFERENCE };

/* The standard's orders: union is G1's members then G2's not in G1; intersection and
 * difference keep G1's order. */
static int set_op(MPI_Group group1, MPI_Group group2, int op, MPI_Group *newgroup)
{
    struct vgroup *a = group_v(group1), *b = group_v(group2);
    if (!a || !b)
        return MPI_ERR_GROUP;
    int *w = ints(a->size + b->size), k = 0;
    if (!w)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < a->size; i++) {
        int in_b = index_of(b, a->world[i]) >= 0;
        if (op == SET_UNION || (op == SET_INTERSECTION) == in_b)
            w[k++] = a->world[i];
    }
    if (op == SET_UNION)
        for (int i = 0; i < b->size; i++)
            if (index_of(a, b->world[i]) < 0)
                w[k++] = b->world[i];
    int rc = group_out(w, k, newgroup);
    free(w);
    return rc;
}

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    return set_op(group1, group2, SET_UNION, newgroup);
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    return set_op(group1, group2, SET_INTERSECTION, newgroup);
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    return set_op(group1, group2, SET_DIFFERENCE, newgroup);
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[])
{
    struct vgroup *a = group_v(group1), *b = group_v(group2);
    if (!a || !b)
        return MPI_ERR_GROUP;
    if (n < 0)
        return MPI_ERR_ARG;
    for (int i = 0; i < n; i++)
        if (ranks1[i] != MPI_PROC_NULL && (ranks1[i] < 0 || ranks1[i] >= a->size))
            return MPI_ERR_RANK;
    for (int i = 0; i < n; i++) {
        if (ranks1[i] == MPI_PROC_NULL) {
            ranks2[i] = MPI_PROC_NULL;
            continue;
        }
        int j = index_of(b, a->world[ranks1[i]]);
        ranks2[i] = j >= 0 ? j : MPI_UNDEFINED;
    }
    return MPI_SUCCESS;
}

/* MPI_IDENT: the same members in the same order; MPI_SIMILAR: the same members. */
static int compare_ranks(const int *a, int na, const int *b, int nb)
{
    if (na != nb)
        return MPI_UNEQUAL;
    if (na == 0 || memcmp(a, b, sizeof(int) * (size_t)na) == 0)
        return MPI_IDENT;
    for (int i = 0; i < na; i++) {
        int found = 0;
        for (int j = 0; j < nb && !found; j++)
            found = a[i] == b[j];
        if (!found)
            return MPI_UNEQUAL;
    }
    return MPI_SIMILAR;
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result)
{
    struct vgroup *a = group_v(group1), *b = group_v(group2);
    if (!a || !b)
        return MPI_ERR_GROUP;
    *result = compare_ranks(a->world, a->size, b->world, b->size);
    return MPI_SUCCESS;
}

/* The same handle is MPI_IDENT; the same members in the same order (both groups of an
 * inter-communicator) MPI_CONGRUENT. */
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
    struct vcomm *a = comm_v(comm1), *b = comm_v(comm2);
    if (!a || !b)
        return MPI_ERR_COMM;
    if (a == b) {
        *result = MPI_IDENT;
        return MPI_SUCCESS;
    }
    if (a->inter != b->inter) {
        *result = MPI_UNEQUAL;
        return MPI_SUCCESS;
    }
    int local = compare_ranks(a->world_ranks, a->size, b->world_ranks, b->size);
    int remote =
        a->inter ? compare_ranks(a->remote_world, a->remote_size, b->remote_world, b->remote_size)
                 : MPI_IDENT;
    if (local == MPI_UNEQUAL || remote == MPI_UNEQUAL)
        *result = MPI_UNEQUAL;
    else if (local == MPI_IDENT && remote == MPI_IDENT)
        *result = MPI_CONGRUENT;
    else
        *result = MPI_SIMILAR;
    return MPI_SUCCESS;
}

/* ---- communicators from groups ---- */

/* A group of the library below with the N world ranks W: made for one call, then freed. */
void *mpi_lower_group(const int *w, int n)
{
    void *wg = NULL, *g = NULL;
    L("MPI_Comm_group", U(lower_named("ompi_mpi_comm_world")), U(&wg));
    L("MPI_Group_incl", U(wg), (uint64_t)n, U(w), U(&g));
    L("MPI_Group_free", U(&wg));
    return g;
}

void mpi_lower_group_free(void *g, int n)
{
    if (n > 0) /* an empty one is the library's MPI_GROUP_EMPTY */
        L("MPI_Group_free", U(&g));
}

/* Every member of the parent calls it: counted on the parent, as MPI_Comm_split. */
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    struct vcomm *c = comm_v(comm);
    struct vgroup *g = group_v(group);
    if (!c)
        return MPI_ERR_COMM;
    if (c->inter)
        mpi_die("MPI_Comm_create on an inter-communicator is not supported yet (docs/MPI.md)");
    if (!g)
        return MPI_ERR_GROUP;
    for (int i = 0; i < g->size; i++)
        for (int j = 0; j <= c->size; j++)
            if (j == c->size)
                return MPI_ERR_GROUP; /* not a subgroup of the communicator's */
            else if (c->world_ranks[j] == g->world[i])
                break;
    void *real = NULL;
    mpi_enter(c, 1);
    cross_gate_enter(); /* to the record made: see mpi_comm_made */
    void *lg = mpi_lower_group(g->world, g->size);
    int rc = L("MPI_Comm_create", U(c->real), U(lg), U(&real));
    mpi_lower_group_free(lg, g->size);
    rc = mpi_comm_made(real, rc, newcomm);
    cross_gate_leave();
    mpi_leave(c, 1);
    return rc;
}

/* Only the group's members call it, so nothing they share counts it: a ghost counter keyed by
 * the group and the tag, which every member makes alike, carries its sequence number. */
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    struct vcomm *c = comm_v(comm);
    struct vgroup *g = group_v(group);
    if (!c || c->inter)
        return MPI_ERR_COMM;
    if (!g)
        return MPI_ERR_GROUP;
    if (g->rank == MPI_UNDEFINED)
        return MPI_ERR_GROUP; /* callers must be members */
    struct vcomm *ghost = mpi_ghost(0x4352475250ULL /* "CRGRP" */, g->world, g->size, NULL, 0, tag);
    void *real = NULL;
    mpi_enter(ghost, 1);
    cross_gate_enter(); /* to the record made: see mpi_comm_made */
    void *lg = mpi_lower_group(g->world, g->size);
    int rc = L("MPI_Comm_create_group", U(c->real), U(lg), (uint64_t)tag, U(&real));
    mpi_lower_group_free(lg, g->size);
    rc = mpi_comm_made(real, rc, newcomm);
    cross_gate_leave();
    mpi_leave(ghost, 1);
    return rc;
}
