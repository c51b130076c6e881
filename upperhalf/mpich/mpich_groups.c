/* mpich_groups.c — the MPICH-ABI shim's groups, Comm_create/_create_group/_compare and
 * inter-communicators: MPICH's group handles and results translated for the libmpi.so.40 shim. */
#include "mpich_shim.h"

#include <stdlib.h>

/* MPI_IDENT .. MPI_UNEQUAL: the same in both mpi.h today, translated by name all the same so a
 * library that numbers them otherwise still reads right. */
static int cmp_out(int r)
{
    return r == OC(MPI_IDENT)       ? MPI_IDENT
           : r == OC(MPI_CONGRUENT) ? MPI_CONGRUENT
           : r == OC(MPI_SIMILAR)   ? MPI_SIMILAR
                                    : MPI_UNEQUAL;
}

/* A new group from the shim: the program's handle only when the call succeeded. */
static int new_group(int rc, oh o, MPI_Group *out)
{
    if (rc == 0)
        *out = group_out(o);
    return err_out(rc);
}

static int new_comm(int rc, oh o, MPI_Comm *out)
{
    if (rc == 0)
        *out = comm_out(o);
    return err_out(rc);
}

/* ---- groups of communicators ---- */

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, oh *), "MPI_Comm_group")(comm_in(comm), &o);
    return new_group(rc, o, group);
}

int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, oh *), "MPI_Comm_remote_group")(comm_in(comm), &o);
    return new_group(rc, o, group);
}

int MPI_Comm_remote_size(MPI_Comm comm, int *size)
{
    return err_out(OFN(int (*)(oh, int *), "MPI_Comm_remote_size")(comm_in(comm), size));
}

/* ---- local group queries and set arithmetic ---- */

int MPI_Group_size(MPI_Group group, int *size)
{
    return err_out(OFN(int (*)(oh, int *), "MPI_Group_size")(group_in(group), size));
}

int MPI_Group_rank(MPI_Group group, int *rank)
{
    int r = 0;
    int rc = OFN(int (*)(oh, int *), "MPI_Group_rank")(group_in(group), &r);
    if (rc == 0)
        *rank = undef_out(r);
    return err_out(rc);
}

/* MPI_GROUP_EMPTY stays in the map (a predefined value): only created handles are forgotten. */
int MPI_Group_free(MPI_Group *group)
{
    oh o = group_in(*group);
    int rc = OFN(int (*)(oh *), "MPI_Group_free")(&o);
    if (rc == 0) {
        group_forget(*group);
        *group = MPI_GROUP_NULL;
    }
    return err_out(rc);
}

typedef int (*f_sel)(oh, int, const int *, oh *);

int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    oh o = NULL;
    int rc = OFN(f_sel, "MPI_Group_incl")(group_in(group), n, ranks, &o);
    return new_group(rc, o, newgroup);
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup)
{
    oh o = NULL;
    int rc = OFN(f_sel, "MPI_Group_excl")(group_in(group), n, ranks, &o);
    return new_group(rc, o, newgroup);
}

typedef int (*f_range)(oh, int, int (*)[3], oh *);

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    oh o = NULL;
    int rc = OFN(f_range, "MPI_Group_range_incl")(group_in(group), n, ranges, &o);
    return new_group(rc, o, newgroup);
}

int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)
{
    oh o = NULL;
    int rc = OFN(f_range, "MPI_Group_range_excl")(group_in(group), n, ranges, &o);
    return new_group(rc, o, newgroup);
}

typedef int (*f_set)(oh, oh, oh *);

int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    oh o = NULL;
    int rc = OFN(f_set, "MPI_Group_union")(group_in(group1), group_in(group2), &o);
    return new_group(rc, o, newgroup);
}

int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    oh o = NULL;
    int rc = OFN(f_set, "MPI_Group_intersection")(group_in(group1), group_in(group2), &o);
    return new_group(rc, o, newgroup);
}

int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup)
{
    oh o = NULL;
    int rc = OFN(f_set, "MPI_Group_difference")(group_in(group1), group_in(group2), &o);
    return new_group(rc, o, newgroup);
}

/* MPI_PROC_NULL in, MPI_PROC_NULL or MPI_UNDEFINED out: through a copy in the shim's values. */
int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[])
{
    size_t k = n > 0 ? (size_t)n : 1;
    int *in = malloc(k * sizeof(int)), *out = malloc(k * sizeof(int));
    if (!in || !out) {
        free(in);
        free(out);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < n; i++)
        in[i] = rank_in(ranks1[i]);
    int rc = OFN(int (*)(oh, int, const int *, oh, int *),
                 "MPI_Group_translate_ranks")(group_in(group1), n, in, group_in(group2), out);
    for (int i = 0; rc == 0 && i < n; i++)
        ranks2[i] = undef_out(rank_out(out[i]));
    free(in);
    free(out);
    return err_out(rc);
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result)
{
    int r = 0;
    int rc =
        OFN(int (*)(oh, oh, int *), "MPI_Group_compare")(group_in(group1), group_in(group2), &r);
    if (rc == 0)
        *result = cmp_out(r);
    return err_out(rc);
}

/* ---- communicators from groups ---- */

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
    int r = 0;
    int rc = OFN(int (*)(oh, oh, int *), "MPI_Comm_compare")(comm_in(comm1), comm_in(comm2), &r);
    if (rc == 0)
        *result = cmp_out(r);
    return err_out(rc);
}

/* A process outside GROUP gets the shim's MPI_COMM_NULL, a predefined object: MPICH's by name. */
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, oh, oh *), "MPI_Comm_create")(comm_in(comm), group_in(group), &o);
    return new_comm(rc, o, newcomm);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, oh, int, oh *), "MPI_Comm_create_group")(comm_in(comm),
                                                                      group_in(group), tag, &o);
    return new_comm(rc, o, newcomm);
}

/* ---- inter-communicators ---- */

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                         int remote_leader, int tag, MPI_Comm *newintercomm)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, int, oh, int, int, oh *), "MPI_Intercomm_create")(
        comm_in(local_comm), local_leader, comm_in(peer_comm), remote_leader, tag, &o);
    return new_comm(rc, o, newintercomm);
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, int, oh *), "MPI_Intercomm_merge")(comm_in(intercomm), high, &o);
    return new_comm(rc, o, newintracomm);
}
