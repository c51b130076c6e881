/* mpi_jacobi.c — a self-checking MPI program: a 1-D integer Jacobi sweep with halo exchange by
   MPI_Irecv posted before the computation and MPI_Isend/MPI_Waitall after it, halos as a derived
   type (MPI_Type_contiguous), a strided MPI_Type_vector message, an MPI_Comm_split into even and
   odd ranks with collectives on it, and uneven work, so ranks wait in different calls. Every rank
   recomputes its neighbours' data to check what it received. Rank 0 prints `step N` and DONE. */
#define PROG "mpi_jacobi"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stdint.h>

#define N 32 /* interior points per rank */

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 20, 10000, MPI_THREAD_FUNNELED);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    check(hsize == (size + 1 - rank % 2) / 2, "split size", 0);
    MPI_Datatype halo, strided;
    MPI_Type_contiguous(2, MPI_LONG, &halo);
    MPI_Type_commit(&halo);
    MPI_Type_vector(4, 1, 2, MPI_LONG, &strided);
    MPI_Type_commit(&strided);
    int tsize, ver, subver;
    MPI_Aint lb, extent;
    MPI_Type_size(halo, &tsize);
    MPI_Type_get_extent(strided, &lb, &extent);
    MPI_Get_version(&ver, &subver);
    check(tsize == 2 * (int)sizeof(long) && lb == 0 && extent == 7 * (MPI_Aint)sizeof(long) &&
              ver >= 3,
          "datatype queries", 0);
    /* A line, not a ring: the ends have no neighbour there. */
    left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    long u[N + 4], v[N + 4];
    for (int i = 0; i < N + 4; i++)
        u[i] = (long)rank * 1000003L + i * 7919L;
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        MPI_Request rq[6];
        long from_left[2] = {-1, -1}, from_right[2] = {-1, -1}, extra[8];
        for (int i = 0; i < 8; i++)
            extra[i] = -7;
        MPI_Irecv(from_left, 1, halo, left, 10, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(from_right, 1, halo, right, 11, MPI_COMM_WORLD, &rq[1]);
        MPI_Irecv(extra, 1, strided, left, 12, MPI_COMM_WORLD, &rq[2]);
        ckpt_sleep_ms(rank == 0 ? 3 * ms : ms); /* uneven work: the others wait for rank 0 */
        MPI_Isend(&u[2], 1, halo, left, 11, MPI_COMM_WORLD, &rq[3]);
        MPI_Isend(&u[N], 1, halo, right, 10, MPI_COMM_WORLD, &rq[4]);
        MPI_Isend(&u[4], 1, strided, right, 12, MPI_COMM_WORLD, &rq[5]);
        MPI_Status st[6];
        MPI_Waitall(6, rq, st);
        if (left != MPI_PROC_NULL) {
            int cnt;
            MPI_Get_count(&st[0], halo, &cnt);
            check(cnt == 1 && st[0].MPI_SOURCE == left, "halo status", k);
            u[0] = from_left[0];
            u[1] = from_left[1];
            for (int i = 0; i < 4; i++)
                check(extra[2 * i] != -7 && extra[2 * i + 1] == -7, "strided receive", k);
        } else {
            u[0] = u[1] = 0;
        }
        if (right != MPI_PROC_NULL) {
            u[N + 2] = from_right[0];
            u[N + 3] = from_right[1];
        } else {
            u[N + 2] = u[N + 3] = 0;
        }
        for (int i = 2; i < N + 2; i++)
            v[i] = (u[i - 2] + u[i - 1] + 2 * u[i] + u[i + 1] + u[i + 2]) / 6 + k;
        long local = 0;
        for (int i = 2; i < N + 2; i++) {
            u[i] = v[i];
            local += v[i] % 1000;
        }
        long total = 0;
        MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        long htotal = 0, hmax = 0;
        if (k % 3 == 0) {
            MPI_Allreduce(&local, &htotal, 1, MPI_LONG, MPI_SUM, half);
            long mine = local * 10 + rank;
            MPI_Allreduce(&mine, &hmax, 1, MPI_LONG, MPI_MAX, half);
            check(hmax % 10 == 0 || hmax % 2 == rank % 2, "subcommunicator max", k);
        }
        long root_val = k * 31 + rank;
        MPI_Bcast(&root_val, 1, MPI_LONG, (int)(k % size), MPI_COMM_WORLD);
        check(root_val == k * 31 + (k % size), "Bcast", k);
        MPI_Barrier(half);
        h = ckpt_fnv(
            ckpt_fnv(ckpt_fnv(ckpt_fnv(h, (uint64_t)total), (uint64_t)htotal), (uint64_t)u[2]),
            (uint64_t)extra[6]);
        if (rank == 0)
            step_line(k);
    }
    uint64_t all[64] = {0};
    MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Type_free(&halo);
    MPI_Type_free(&strided);
    MPI_Comm_free(&half);
    uint64_t c = CKPT_FNV_BASIS;
    for (int r = 0; rank == 0 && r < size && r < 64; r++)
        c = ckpt_fnv(c, all[r]);
    mpi_done(c);
    MPI_Finalize();
    return 0;
}
