/* mpi_colls.c — a self-checking MPI program for the cut of collectives: each step runs an
   MPI_Alltoall, an MPI_Allreduce of 8 doubles and an MPI_Bcast on the world, then DIFFERENT
   collectives at the same time on the two halves of an MPI_Comm_split (even ranks an
   MPI_Allreduce, odd ranks an MPI_Alltoall) while a message sent before them is still in flight
   (received only after the pause). One rank per step (k % size) pauses before the world
   collectives, so the others wait inside them when a checkpoint lands. Every rank checks every
   value. Rank 0 prints `step N` and a DONE line (checksum). */
#define PROG "mpi_colls"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stdint.h>

#define MAXR 16

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 50, 10000, MPI_INIT_PLAIN);
    check(size <= MAXR, "too many ranks", 0);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        /* In flight across every collective of this step. */
        long late = k * 5 + rank, got_late = -1;
        MPI_Request lreq;
        MPI_Isend(&late, 1, MPI_LONG, right, 77, MPI_COMM_WORLD, &lreq);
        if (rank == (int)(k % size) && ms)
            ckpt_sleep_ms(ms / 2);
        long out[MAXR], in[MAXR];
        for (int i = 0; i < size; i++)
            out[i] = k * 1000 + rank * 10 + i;
        MPI_Alltoall(out, 1, MPI_LONG, in, 1, MPI_LONG, MPI_COMM_WORLD);
        for (int i = 0; i < size; i++)
            check(in[i] == k * 1000 + i * 10 + rank, "Alltoall value", k);
        double v[8], s[8];
        for (int i = 0; i < 8; i++)
            v[i] = (double)(k * (rank + 1) + i);
        MPI_Allreduce(v, s, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < 8; i++)
            check(s[i] == (double)(k * size * (size + 1) / 2 + (long)i * size), "Allreduce", k);
        int root = (int)((k + 1) % size);
        long b[3] = {0, 0, 0};
        if (rank == root)
            for (int i = 0; i < 3; i++)
                b[i] = k * 11 + i + root;
        MPI_Bcast(b, 3, MPI_LONG, root, MPI_COMM_WORLD);
        for (int i = 0; i < 3; i++)
            check(b[i] == k * 11 + i + root, "Bcast value", k);
        /* The halves in different collectives at once. */
        long hv = 0;
        if (rank % 2 == 0) {
            long mine = k + hrank, mx = -1;
            MPI_Allreduce(&mine, &mx, 1, MPI_LONG, MPI_MAX, half);
            check(mx == k + hsize - 1, "half Allreduce", k);
            hv = mx;
        } else {
            long ho[MAXR], hi[MAXR];
            for (int i = 0; i < hsize; i++)
                ho[i] = k * 100 + hrank * 10 + i;
            MPI_Alltoall(ho, 1, MPI_LONG, hi, 1, MPI_LONG, half);
            for (int i = 0; i < hsize; i++)
                check(hi[i] == k * 100 + i * 10 + hrank, "half Alltoall", k);
            hv = hi[hsize - 1];
        }
        h = ckpt_fnv(
            ckpt_fnv(ckpt_fnv(ckpt_fnv(h, (uint64_t)in[size - 1]), (uint64_t)s[7]), (uint64_t)b[2]),
            (uint64_t)hv);
        if (rank == 0)
            step_line(k);
        if (ms)
            ckpt_sleep_ms(ms / 2);
        MPI_Status st;
        MPI_Recv(&got_late, 1, MPI_LONG, left, 77, MPI_COMM_WORLD, &st);
        check(got_late == k * 5 + left && st.MPI_SOURCE == left, "late message", k);
        MPI_Wait(&lreq, MPI_STATUS_IGNORE);
    }
    mpi_done(xor_at_root(h));
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
