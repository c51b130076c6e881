/* mpi_vcolls.c — a self-checking MPI program for the shims' v collectives, scans, reduce-scatters,
   synchronous and ready sends, nonblocking collectives and communicator names, built with either
   MPI's mpicc: each step rank r contributes r+1 values to an MPI_Gatherv at a root that moves,
   MPI_Scatterv's them back, MPI_Allgatherv's and MPI_Alltoallv's ragged blocks, MPI_Scan and
   MPI_Exscan its rank, MPI_Reduce_scatter(_block)s a vector, MPI_Ssend/MPI_Issend around the
   ring, answers an MPI_Irsend the right neighbour posted a receive for first, and waits for an
   MPI_Iallreduce (and an MPI_Ibcast, MPI_Ibarrier) started before the pause. A named duplicate of
   the world is checked by name each step and disconnected at the end (MPI_Comm_disconnect).
   Every rank checks every value. Rank 0 prints `step N` and a DONE line (checksum). */
#define PROG "mpi_vcolls"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stdint.h>
#include <string.h>

#define MAXR 8
#define MAXV (MAXR * (MAXR + 1) / 2) /* every rank's r+1 values */

static void check_name(MPI_Comm c, long k)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    MPI_Comm_get_name(c, name, &len);
    check(strcmp(name, "vcolls-dup") == 0, "the duplicate's name", k);
}

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 30, 10000, MPI_INIT_PLAIN);
    check(size <= MAXR, "too many ranks", 0);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "vcolls-dup");
    int counts[MAXR], displs[MAXR], total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r + 1;
        displs[r] = total;
        total += r + 1;
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        int root = (int)(k % size);
        long mine[MAXR], all[MAXV], back[MAXR];
        for (int i = 0; i <= rank; i++)
            mine[i] = k * 100 + rank * 10 + i;
        /* Gatherv at a moving root, then Scatterv of the same blocks back. */
        MPI_Gatherv(mine, rank + 1, MPI_LONG, all, counts, displs, MPI_LONG, root, dup);
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i <= r; i++)
                    check(all[displs[r] + i] == k * 100 + r * 10 + i, "gatherv", k);
        MPI_Scatterv(all, counts, displs, MPI_LONG, back, rank + 1, MPI_LONG, root, dup);
        for (int i = 0; i <= rank; i++)
            check(back[i] == mine[i], "scatterv", k);
        /* Allgatherv of the same; Alltoallv: rank r sends s+1 values to each s. */
        memset(all, 0, sizeof(all));
        MPI_Allgatherv(mine, rank + 1, MPI_LONG, all, counts, displs, MPI_LONG, MPI_COMM_WORLD);
        for (int r = 0; r < size; r++)
            check(all[displs[r]] == k * 100 + r * 10, "allgatherv", k);
        long out[MAXV], in[MAXV];
        int scounts[MAXR], sdispls[MAXR], rcounts[MAXR], rdispls[MAXR], at = 0, rat = 0;
        for (int s = 0; s < size; s++) {
            scounts[s] = s + 1, sdispls[s] = at;
            rcounts[s] = rank + 1, rdispls[s] = rat;
            for (int i = 0; i <= s; i++)
                out[at + i] = k * 1000 + rank * 100 + s * 10 + i;
            at += s + 1;
            rat += rank + 1;
        }
        MPI_Alltoallv(out, scounts, sdispls, MPI_LONG, in, rcounts, rdispls, MPI_LONG,
                      MPI_COMM_WORLD);
        for (int s = 0; s < size; s++)
            for (int i = 0; i <= rank; i++)
                check(in[rdispls[s] + i] == k * 1000 + s * 100 + rank * 10 + i, "alltoallv", k);
        /* Scans of rank+1: 1+...+(rank+1), and the same less its own. */
        long v = rank + 1, incl = 0, excl = 0;
        MPI_Scan(&v, &incl, 1, MPI_LONG, MPI_SUM, dup);
        MPI_Exscan(&v, &excl, 1, MPI_LONG, MPI_SUM, dup);
        check(incl == (long)(rank + 1) * (rank + 2) / 2, "scan", k);
        check(rank == 0 || excl == (long)rank * (rank + 1) / 2, "exscan", k);
        /* Reduce-scatters: every rank adds k + its rank to each element. */
        long vec[MAXV], part[MAXR];
        for (int i = 0; i < total; i++)
            vec[i] = k + rank + i;
        long base = (long)size * k + (long)size * (size - 1) / 2;
        MPI_Reduce_scatter_block(vec, part, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        check(part[0] == base + (long)size * rank, "reduce_scatter_block", k);
        MPI_Reduce_scatter(vec, part, counts, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i <= rank; i++)
            check(part[i] == base + (long)size * (displs[rank] + i), "reduce_scatter", k);
        /* Synchronous sends round the ring (received the other way round the ring). */
        long ss = k * 7 + rank, got = -1;
        MPI_Request sreq;
        MPI_Issend(&ss, 1, MPI_LONG, right, 11, MPI_COMM_WORLD, &sreq);
        MPI_Recv(&got, 1, MPI_LONG, left, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&sreq, MPI_STATUS_IGNORE);
        check(got == k * 7 + left, "issend", k);
        MPI_Request rreq;
        MPI_Irecv(&got, 1, MPI_LONG, left, 12, MPI_COMM_WORLD, &rreq);
        MPI_Barrier(MPI_COMM_WORLD); /* every receive posted: a ready send is allowed now */
        if (k % 2)
            MPI_Ssend(&ss, 1, MPI_LONG, right, 12, MPI_COMM_WORLD);
        else
            MPI_Rsend(&ss, 1, MPI_LONG, right, 12, MPI_COMM_WORLD);
        MPI_Wait(&rreq, MPI_STATUS_IGNORE);
        check(got == k * 7 + left, "ssend/rsend", k);
        /* Nonblocking collectives in flight over the pause. */
        long sum = -1, bc = rank == root ? k * 3 : -1;
        MPI_Request nb[3];
        MPI_Iallreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, dup, &nb[0]);
        MPI_Ibcast(&bc, 1, MPI_LONG, root, MPI_COMM_WORLD, &nb[1]);
        MPI_Ibarrier(dup, &nb[2]);
        if (ms)
            ckpt_sleep_ms(ms);
        MPI_Status nst[3]; /* not MPI_STATUSES_IGNORE: gcc 12 warns of it with MPICH's mpi.h */
        MPI_Waitall(3, nb, nst);
        check(sum == (long)size * (size + 1) / 2, "iallreduce", k);
        check(bc == k * 3, "ibcast", k);
        check_name(dup, k);
        h = ckpt_fnv(h, (uint64_t)(incl + excl + part[0] + sum + bc));
        if (rank == 0)
            step_line(k);
    }
    MPI_Comm_disconnect(&dup);
    check(dup == MPI_COMM_NULL, "disconnect", steps);
    uint64_t all = xor_at_root(h);
    mpi_done(all);
    MPI_Finalize();
    return 0;
}
