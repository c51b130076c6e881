/* mpi_groups.c — a self-checking MPI program for groups held across checkpoints: before the loop
   it makes groups of the world with MPI_Group_range_incl/_incl/_excl/_union/_intersection/
   _difference, communicators from them with MPI_Comm_create (the evens, the world reversed) and
   MPI_Comm_create_group (the odds), and checks MPI_Group_compare/MPI_Comm_compare. Every step
   it checks those groups again (sizes, ranks, translated ranks), makes a communicator from one
   of them with MPI_Comm_create (and the odds one with MPI_Comm_create_group) and frees it, and
   runs collectives and a ring on the created communicators, with a message in flight on the
   reversed one across a pause. Rank 0 prints `step N` and a DONE line (checksum). */
#define PROG "mpi_groups"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stdint.h>

#define MAXR 16

static int gsize(MPI_Group g)
{
    int n = -1;
    MPI_Group_size(g, &n);
    return n;
}

static int grank(MPI_Group g)
{
    int r = -2;
    MPI_Group_rank(g, &r);
    return r;
}

/* World rank of each member of G, by translation to the world's group W. */
static void to_world(MPI_Group g, MPI_Group w, int *out)
{
    int in[MAXR], n = gsize(g);
    for (int i = 0; i < n; i++)
        in[i] = i;
    MPI_Group_translate_ranks(g, n, in, w, out);
}

/* The groups every step checks: made once, before the first checkpoint. */
struct groups {
    MPI_Group world, evens, odds, rev, uni, inter, ends, empty;
};

static void check_groups(const struct groups *g, int rank, int size, long k)
{
    int w[MAXR];
    int ne = (size + 1) / 2, no = size / 2;
    check(gsize(g->world) == size && grank(g->world) == rank, "world group", k);
    check(gsize(g->evens) == ne && grank(g->evens) == (rank % 2 ? MPI_UNDEFINED : rank / 2),
          "evens group", k);
    check(gsize(g->odds) == no && grank(g->odds) == (rank % 2 ? rank / 2 : MPI_UNDEFINED),
          "odds group", k);
    to_world(g->rev, g->world, w);
    for (int i = 0; i < size; i++)
        check(w[i] == size - 1 - i, "reversed group members", k);
    check(grank(g->rev) == size - 1 - rank, "reversed group rank", k);
    to_world(g->uni, g->world, w); /* the odds, then the evens */
    for (int i = 0; i < size; i++)
        check(w[i] == (i < no ? 2 * i + 1 : 2 * (i - no)), "union order", k);
    check(gsize(g->ends) == (size > 2 ? size - 2 : 0), "range_excl size", k);
    if (size > 2) {
        to_world(g->ends, g->world, w);
        for (int i = 0; i < size - 2; i++)
            check(w[i] == i + 1, "range_excl members", k);
    }
    int pn[2] = {MPI_PROC_NULL, 0}, pt[2];
    MPI_Group_translate_ranks(g->world, 2, pn, g->odds, pt);
    check(pt[0] == MPI_PROC_NULL && pt[1] == MPI_UNDEFINED, "translate PROC_NULL/UNDEFINED", k);
    int r = -1;
    MPI_Group_compare(g->inter, g->evens, &r);
    check(r == MPI_IDENT, "intersection IDENT", k);
    MPI_Group_compare(g->uni, g->world, &r);
    check(r == MPI_SIMILAR, "union SIMILAR", k);
    MPI_Group_compare(g->odds, g->evens, &r);
    check(r == MPI_UNEQUAL, "odds/evens UNEQUAL", k);
    MPI_Group_compare(g->empty, MPI_GROUP_EMPTY, &r);
    check(r == MPI_IDENT && gsize(g->empty) == 0, "empty difference", k);
}

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 50, 10000, MPI_INIT_PLAIN);
    check(size >= 2 && size <= MAXR, "2 to 16 ranks", 0);
    struct groups g;
    MPI_Comm_group(MPI_COMM_WORLD, &g.world);
    int ev[1][3] = {{0, size - 1, 2}};
    MPI_Group_range_incl(g.world, 1, ev, &g.evens);
    MPI_Group_difference(g.world, g.evens, &g.odds);
    int rv[MAXR];
    for (int i = 0; i < size; i++)
        rv[i] = size - 1 - i;
    MPI_Group_incl(g.world, size, rv, &g.rev);
    MPI_Group_union(g.odds, g.evens, &g.uni);
    MPI_Group_intersection(g.world, g.evens, &g.inter);
    int ends[2][3] = {{0, 0, 1}, {size - 1, size - 1, 1}};
    MPI_Group_range_excl(g.world, size > 2 ? 2 : 0, ends, &g.ends);
    if (size <= 2) { /* nothing left between the ends: excluded by ranks instead */
        MPI_Group_free(&g.ends);
        int all[2] = {0, 1};
        MPI_Group_excl(g.world, 2, all, &g.ends);
    }
    MPI_Group_difference(g.evens, g.world, &g.empty);
    check_groups(&g, rank, size, 0);

    MPI_Comm ecomm, rcomm, ocomm = MPI_COMM_NULL;
    MPI_Comm_create(MPI_COMM_WORLD, g.evens, &ecomm);
    check((ecomm == MPI_COMM_NULL) == (rank % 2 == 1), "Comm_create of the evens", 0);
    MPI_Comm_create(MPI_COMM_WORLD, g.rev, &rcomm);
    if (rank % 2)
        MPI_Comm_create_group(MPI_COMM_WORLD, g.odds, 41, &ocomm);
    int r = -1;
    MPI_Comm_compare(MPI_COMM_WORLD, rcomm, &r);
    check(r == MPI_SIMILAR, "Comm_compare SIMILAR", 0);
    MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &r);
    check(r == MPI_IDENT, "Comm_compare IDENT", 0);
    MPI_Comm wdup;
    MPI_Comm_dup(MPI_COMM_WORLD, &wdup);
    MPI_Comm_compare(MPI_COMM_WORLD, wdup, &r);
    check(r == MPI_CONGRUENT, "Comm_compare CONGRUENT", 0);
    MPI_Comm_free(&wdup);

    int rrank, ssize;
    MPI_Comm_rank(rcomm, &rrank);
    MPI_Comm_size(rcomm, &ssize);
    check(rrank == size - 1 - rank && ssize == size, "reversed communicator", 0);
    int right = (rrank + 1) % size, left = (rrank + size - 1) % size;
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        check_groups(&g, rank, size, k);
        /* In flight on the reversed communicator across the pause. */
        long late = k * 9 + rrank, got_late = -1;
        MPI_Request lreq;
        MPI_Isend(&late, 1, MPI_LONG, right, 3, rcomm, &lreq);
        long tok = k * 100 + rrank, in = -1;
        MPI_Sendrecv(&tok, 1, MPI_LONG, right, 4, &in, 1, MPI_LONG, left, 4, rcomm,
                     MPI_STATUS_IGNORE);
        check(in == k * 100 + left, "ring on the reversed communicator", k);
        /* A communicator from a group made before the checkpoint, made and freed each step. */
        MPI_Comm ucomm;
        MPI_Comm_create(MPI_COMM_WORLD, g.uni, &ucomm);
        int urank = -1;
        MPI_Comm_rank(ucomm, &urank);
        check(urank == (rank % 2 ? rank / 2 : size / 2 + rank / 2), "union communicator rank", k);
        long mine = k + urank, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, ucomm);
        check(sum == k * size + (long)size * (size - 1) / 2, "union Allreduce", k);
        MPI_Group cg;
        MPI_Comm_group(ucomm, &cg);
        MPI_Group_compare(cg, g.uni, &r);
        check(r == MPI_IDENT, "Comm_group of the created communicator", k);
        MPI_Group_free(&cg);
        MPI_Comm_free(&ucomm);
        long half = 0;
        if (ecomm != MPI_COMM_NULL) {
            long v = k * (rank + 1), s = 0;
            MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, ecomm);
            long want = 0;
            for (int i = 0; i < size; i += 2)
                want += k * (i + 1);
            check(s == want, "evens Allreduce", k);
            half = s;
        } else {
            long b = rank == 1 ? k * 13 : 0;
            MPI_Bcast(&b, 1, MPI_LONG, 0, ocomm);
            check(b == k * 13, "odds Bcast", k);
            /* Made by the odds alone, again each step (the same group and tag). */
            MPI_Comm tmp;
            MPI_Comm_create_group(MPI_COMM_WORLD, g.odds, 42, &tmp);
            long v = k + rank, mx = -1;
            MPI_Allreduce(&v, &mx, 1, MPI_LONG, MPI_MAX, tmp);
            check(mx == k + 2 * (size / 2) - 1, "odds' created group Allreduce", k);
            MPI_Comm_free(&tmp);
            half = b + mx;
        }
        h = ckpt_fnv(ckpt_fnv(ckpt_fnv(h, (uint64_t)in), (uint64_t)sum), (uint64_t)half);
        if (rank == 0)
            step_line(k);
        if (ms)
            ckpt_sleep_ms(ms);
        MPI_Recv(&got_late, 1, MPI_LONG, left, 3, rcomm, MPI_STATUS_IGNORE);
        check(got_late == k * 9 + left, "late message", k);
        MPI_Wait(&lreq, MPI_STATUS_IGNORE);
    }
    mpi_done(xor_at_root(h));
    if (ecomm != MPI_COMM_NULL)
        MPI_Comm_free(&ecomm);
    if (ocomm != MPI_COMM_NULL)
        MPI_Comm_free(&ocomm);
    MPI_Comm_free(&rcomm);
    MPI_Group *all_g[] = {&g.world, &g.evens, &g.odds, &g.rev, &g.uni, &g.inter, &g.ends, &g.empty};
    for (size_t i = 0; i < sizeof(all_g) / sizeof(all_g[0]); i++)
        MPI_Group_free(all_g[i]);
    MPI_Finalize();
    return 0;
}
