/* mpi_intercomm.c — a self-checking MPI program for inter-communicators: the world split into
   its lower and upper halves, joined by MPI_Intercomm_create; every step each rank exchanges
   with its partner in the other half over the inter-communicator (MPI_Sendrecv, and a message
   sent before a pause and received after it, so checkpoints find it in flight there: one from a
   lower rank, two from an upper one), the ranks allreduce on the MPI_Intercomm_merge'd
   communicator, and the lower half's first rank broadcasts to the upper half over a duplicate
   of the inter-communicator (MPI_ROOT); every EVERY (10) steps a second inter-communicator and
   its merge are made, used and freed. Rank 0 prints `step N` and a DONE line (checksum). Needs an
   even number of ranks. */
#define PROG "mpi_intercomm"
#define USAGE "[STEPS [MS_PER_STEP [EVERY]]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stdint.h>

#define MAXR 16

/* The inter-communicator between the halves and its merge (the lower half first): checked. */
static void join(MPI_Comm half, int upper, int size, int tag, MPI_Comm *inter, MPI_Comm *merged,
                 long k)
{
    int n = size / 2;
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, upper ? 0 : n, tag, inter);
    int flag = 0, rsize = -1, lsize = -1;
    MPI_Comm_test_inter(*inter, &flag);
    MPI_Comm_remote_size(*inter, &rsize);
    MPI_Comm_size(*inter, &lsize);
    check(flag && rsize == n && lsize == n, "inter-communicator sizes", k);
    MPI_Group rg, wg;
    MPI_Comm_remote_group(*inter, &rg);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int in[MAXR], out[MAXR];
    for (int i = 0; i < n; i++)
        in[i] = i;
    MPI_Group_translate_ranks(rg, n, in, wg, out);
    for (int i = 0; i < n; i++)
        check(out[i] == (upper ? i : n + i), "remote group", k);
    MPI_Group_free(&rg);
    MPI_Group_free(&wg);
    MPI_Intercomm_merge(*inter, upper, merged);
    int mrank = -1, msize = -1, world_rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_rank(*merged, &mrank);
    MPI_Comm_size(*merged, &msize);
    check(mrank == world_rank && msize == size, "merged communicator", k);
}

int main(int argc, char **argv)
{
    long every = arg(argc, argv, 3, 10, 1, 1000000);
    mpi_start(&argc, &argv, 50, 10000, MPI_INIT_PLAIN);
    check(size >= 2 && size <= MAXR && size % 2 == 0, "an even number of ranks, 2 to 16", 0);
    int n = size / 2, upper = rank >= n;
    MPI_Comm half, inter, merged;
    MPI_Comm_split(MPI_COMM_WORLD, upper, rank, &half);
    int hrank;
    MPI_Comm_rank(half, &hrank);
    join(half, upper, size, 99, &inter, &merged, 0);
    int r = -1;
    MPI_Comm_compare(inter, inter, &r);
    check(r == MPI_IDENT, "Comm_compare of the inter-communicator", 0);
    MPI_Comm idup; /* a duplicate, for a collective across the halves */
    MPI_Comm_dup(inter, &idup);
    MPI_Comm_compare(inter, idup, &r);
    check(r == MPI_CONGRUENT, "Comm_compare of the duplicate", 0);
    int partner_world = upper ? hrank : n + hrank;
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        /* Sent before the pause, received after it: in flight on the inter-communicator.
         * The upper half sends two, the lower one: the cut's counts per rank differ by side. */
        long late[2] = {k * 7 + rank, k * 7 + rank + 1}, got_late = -1;
        MPI_Request lreq[2];
        int nlate = upper ? 2 : 1;
        for (int i = 0; i < nlate; i++)
            MPI_Isend(&late[i], 1, MPI_LONG, hrank, 11, inter, &lreq[i]);
        long out[4], in[4];
        for (int i = 0; i < 4; i++)
            out[i] = k * 1000 + rank * 10 + i;
        MPI_Status st;
        MPI_Sendrecv(out, 4, MPI_LONG, hrank, 12, in, 4, MPI_LONG, hrank, 12, inter, &st);
        check(st.MPI_SOURCE == hrank && st.MPI_TAG == 12, "Sendrecv status", k);
        for (int i = 0; i < 4; i++)
            check(in[i] == k * 1000 + partner_world * 10 + i, "inter-communicator value", k);
        long mine = k * (rank + 1), sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, merged);
        check(sum == k * (long)size * (size + 1) / 2, "merged Allreduce", k);
        /* The lower half's first rank to every rank of the upper half. */
        long b[2] = {0, 0};
        if (!upper && hrank == 0)
            b[0] = k * 17, b[1] = k * 19;
        MPI_Bcast(b, 2, MPI_LONG, upper ? 0 : (hrank == 0 ? MPI_ROOT : MPI_PROC_NULL), idup);
        if (upper)
            check(b[0] == k * 17 && b[1] == k * 19, "Bcast across the halves", k);
        long extra = upper ? b[1] : 0;
        if (k % every == 0) { /* made, used and freed after restarts too */
            MPI_Comm i2, m2;
            join(half, upper, size, 98, &i2, &m2, k);
            long v = rank, mx = -1;
            MPI_Allreduce(&v, &mx, 1, MPI_LONG, MPI_MAX, m2);
            check(mx == size - 1, "second merged Allreduce", k);
            long a = k + rank, b2 = -1;
            MPI_Sendrecv(&a, 1, MPI_LONG, hrank, 13, &b2, 1, MPI_LONG, hrank, 13, i2,
                         MPI_STATUS_IGNORE);
            check(b2 == k + partner_world, "second inter-communicator", k);
            extra += b2;
            MPI_Comm_free(&m2);
            MPI_Comm_free(&i2);
        }
        h = ckpt_fnv(ckpt_fnv(ckpt_fnv(h, (uint64_t)in[3]), (uint64_t)sum), (uint64_t)extra);
        if (rank == 0)
            step_line(k);
        if (ms)
            ckpt_sleep_ms(ms);
        for (int i = 0; i < (upper ? 1 : 2); i++) {
            MPI_Recv(&got_late, 1, MPI_LONG, MPI_ANY_SOURCE, 11, inter, &st);
            check(got_late == k * 7 + partner_world + i && st.MPI_SOURCE == hrank, "late message",
                  k);
        }
        /* A status array, not MPI_STATUSES_IGNORE: MPICH's is (MPI_Status *)1, which gcc's
         * -Wstringop-overflow rejects under -Werror when the count is not constant. */
        MPI_Status lst[2];
        MPI_Waitall(nlate, lreq, lst);
    }
    mpi_done(xor_at_root(h));
    MPI_Comm_free(&idup);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
