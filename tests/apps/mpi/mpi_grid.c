/* mpi_grid.c — a self-checking MPI program for the shims' Cartesian grids, topology test,
   communicators by node, error handlers, derived datatypes past vector, the other nonblocking
   collectives, a cancelled receive and MPI_Alloc_mem, built with either MPI's mpicc. Ranks form a
   2-D grid (periodic in its first dimension only); each step they pass values to their grid
   neighbours (MPI_PROC_NULL off the open edges), send a 2x2 subarray of a 4x4 matrix and an
   indexed block round the ring, allgather a struct, check that a send to a rank that does not
   exist returns an error (MPI_ERRORS_RETURN), cancel a receive nobody answers, and wait for
   MPI_Igather/Iscatter/Iallgather/Ialltoall/Ireduce/Iscan/Iexscan started before the pause
   (Iscatter on the grid's row, Iallgather on the grid, the others on the world: a rank held by
   the cut at its row's Iscatter owes the grid's Iallgather the others wait for, docs/MPI.md
   "The cut").
   Every rank checks every value. Rank 0 prints `step N` and a DONE line (checksum). */
#define PROG "mpi_grid"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAXR 16

struct pair {
    int rank;
    double half;
};

static MPI_Datatype pair_type(void)
{
    int lens[2] = {1, 1};
    MPI_Aint displs[2] = {offsetof(struct pair, rank), offsetof(struct pair, half)};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, t, sized;
    MPI_Type_create_struct(2, lens, displs, types, &t);
    MPI_Type_create_resized(t, 0, sizeof(struct pair), &sized);
    MPI_Type_free(&t);
    MPI_Type_commit(&sized);
    return sized;
}

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 30, 10000, MPI_INIT_PLAIN);
    check(size <= MAXR, "too many ranks", 0);
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm grid, row, node;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    int topo = -1, nd = 0, me = -1, coords[2], back = -1, gd[2], gp[2], gc[2];
    MPI_Topo_test(grid, &topo);
    check(topo == MPI_CART, "topo_test of the grid", 0);
    MPI_Topo_test(MPI_COMM_WORLD, &topo);
    check(topo == MPI_UNDEFINED, "topo_test of the world", 0);
    MPI_Cartdim_get(grid, &nd);
    MPI_Comm_rank(grid, &me);
    MPI_Cart_coords(grid, me, 2, coords);
    MPI_Cart_rank(grid, coords, &back);
    MPI_Cart_get(grid, 2, gd, gp, gc);
    check(nd == 2 && back == me && gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 1 &&
              gp[1] == 0 && gc[0] == coords[0] && gc[1] == coords[1],
          "cart queries", 0);
    int up, down, west, east;
    MPI_Cart_shift(grid, 0, 1, &up, &down);
    MPI_Cart_shift(grid, 1, 1, &west, &east);
    check((coords[1] == 0) == (west == MPI_PROC_NULL), "west edge", 0);
    check((coords[1] == dims[1] - 1) == (east == MPI_PROC_NULL), "east edge", 0);
    int remain[2] = {0, 1}, row_size = 0, node_size = 0;
    MPI_Cart_sub(grid, remain, &row);
    MPI_Comm_size(row, &row_size);
    check(row_size == dims[1], "cart_sub", 0);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    check(node_size >= 1 && node_size <= size, "split_type", 0);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    check(eh == MPI_ERRORS_RETURN, "get_errhandler", 0);
    MPI_Errhandler_free(&eh);

    /* 2x2 inside a 4x4 int matrix at (1,1); 3 of 6 ints (1 at 0, 2 at 3); each duplicated. */
    int sizes[2] = {4, 4}, sub[2] = {2, 2}, starts[2] = {1, 1};
    MPI_Datatype subarray, indexed, block, hvec, dup, pairs = pair_type();
    MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &subarray);
    int lens[2] = {1, 2}, displs[2] = {0, 3}, bdispls[2] = {1, 4};
    MPI_Type_indexed(2, lens, displs, MPI_INT, &indexed);
    MPI_Type_create_indexed_block(2, 1, bdispls, MPI_INT, &block);
    MPI_Type_create_hvector(2, 1, 3 * sizeof(int), MPI_INT, &hvec);
    MPI_Type_dup(subarray, &dup);
    MPI_Datatype all_types[] = {subarray, indexed, block, hvec, dup};
    for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++)
        MPI_Type_commit(&all_types[i]);
    subarray = all_types[0], indexed = all_types[1], block = all_types[2], hvec = all_types[3];
    dup = all_types[4];
    long *mem = NULL;
    MPI_Alloc_mem(4 * sizeof(long), MPI_INFO_NULL, &mem);

    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        /* Grid neighbours: down the periodic dimension, east along the open one. */
        long v = k * 100 + me, from_up = -1, from_west = -7;
        MPI_Sendrecv(&v, 1, MPI_LONG, down, 1, &from_up, 1, MPI_LONG, up, 1, grid,
                     MPI_STATUS_IGNORE);
        int up_coords[2];
        MPI_Cart_coords(grid, up, 2, up_coords);
        check(up_coords[1] == coords[1], "up neighbour's column", k);
        check(from_up == k * 100 + up, "from up", k);
        MPI_Sendrecv(&v, 1, MPI_LONG, east, 2, &from_west, 1, MPI_LONG, west, 2, grid,
                     MPI_STATUS_IGNORE);
        check(west == MPI_PROC_NULL ? from_west == -7 : from_west == k * 100 + west, "from west",
              k);
        /* Derived types round the ring: the receiver gets contiguous ints. */
        int m[16], got[4], six[6], got3[3];
        for (int i = 0; i < 16; i++)
            m[i] = (int)(k * 1000 + rank * 100 + i);
        for (int i = 0; i < 6; i++)
            six[i] = (int)(k * 10 + rank + i * 1000);
        MPI_Datatype as = k % 2 ? subarray : dup;
        MPI_Sendrecv(m, 1, as, right, 3, got, 4, MPI_INT, left, 3, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        int want[4] = {5, 6, 9, 10};
        for (int i = 0; i < 4; i++)
            check(got[i] == (int)(k * 1000 + left * 100 + want[i]), "subarray", k);
        MPI_Sendrecv(six, 1, indexed, right, 4, got3, 3, MPI_INT, left, 4, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        check(got3[0] == (int)(k * 10 + left) && got3[1] == (int)(k * 10 + left + 3000) &&
                  got3[2] == (int)(k * 10 + left + 4000),
              "indexed", k);
        int got2[2];
        MPI_Sendrecv(six, 1, block, right, 5, got2, 2, MPI_INT, left, 5, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        check(got2[0] == (int)(k * 10 + left + 1000) && got2[1] == (int)(k * 10 + left + 4000),
              "indexed_block", k);
        MPI_Sendrecv(six, 1, hvec, right, 6, got2, 2, MPI_INT, left, 6, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        check(got2[0] == (int)(k * 10 + left) && got2[1] == (int)(k * 10 + left + 3000), "hvector",
              k);
        struct pair mine = {rank, (double)k * 0.5}, everyone[MAXR];
        MPI_Allgather(&mine, 1, pairs, everyone, 1, pairs, MPI_COMM_WORLD);
        for (int r = 0; r < size; r++)
            check(everyone[r].rank == r && everyone[r].half == (double)k * 0.5, "struct", k);
        /* MPI_ERRORS_RETURN: an error code, not the job's end. */
        long junk = k;
        check(MPI_Send(&junk, 1, MPI_LONG, size + 3, 7, MPI_COMM_WORLD) != MPI_SUCCESS,
              "a send to no rank returns an error", k);
        /* A receive nobody answers, cancelled. */
        MPI_Request never;
        MPI_Status st;
        int cancelled = 0;
        MPI_Irecv(&junk, 1, MPI_LONG, left, 99, MPI_COMM_WORLD, &never);
        MPI_Cancel(&never);
        MPI_Wait(&never, &st);
        MPI_Test_cancelled(&st, &cancelled);
        check(cancelled && never == MPI_REQUEST_NULL, "cancelled receive", k);
        /* The other nonblocking collectives, in flight over the pause. */
        long root = k % size, one = k + rank, gathered[MAXR], scattered = -1, all[MAXR];
        long to_all[MAXR], from_all[MAXR], to_one[MAXR], reduced = -1, incl = -1, excl = -1;
        int row_root = (int)(k % row_size), row_rank = -1;
        MPI_Comm_rank(row, &row_rank);
        for (int r = 0; r < size; r++) {
            to_all[r] = k * 10000 + rank * 100 + r;
            to_one[r] = k * 100 + r;
        }
        MPI_Request nb[7];
        MPI_Igather(&one, 1, MPI_LONG, gathered, 1, MPI_LONG, (int)root, MPI_COMM_WORLD, &nb[0]);
        MPI_Iscatter(to_one, 1, MPI_LONG, &scattered, 1, MPI_LONG, row_root, row, &nb[1]);
        MPI_Iallgather(&one, 1, MPI_LONG, all, 1, MPI_LONG, grid, &nb[2]);
        MPI_Ialltoall(to_all, 1, MPI_LONG, from_all, 1, MPI_LONG, MPI_COMM_WORLD, &nb[3]);
        MPI_Ireduce(&one, &reduced, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD, &nb[4]);
        MPI_Iscan(&one, &incl, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &nb[5]);
        MPI_Iexscan(&one, &excl, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &nb[6]);
        if (ms)
            ckpt_sleep_ms(ms);
        MPI_Status nst[7];
        MPI_Waitall(7, nb, nst);
        if (rank == root)
            for (int r = 0; r < size; r++)
                check(gathered[r] == k + r, "igather", k);
        check(scattered == k * 100 + row_rank, "iscatter", k);
        for (int r = 0; r < size; r++) {
            check(from_all[r] == k * 10000 + r * 100 + rank, "ialltoall", k);
            int gr = -1, cr[2];
            MPI_Cart_coords(grid, r, 2, cr);
            MPI_Cart_rank(grid, cr, &gr);
            check(gr == r && all[r] == k + r, "iallgather", k);
        }
        check(incl == (long)(rank + 1) * k + (long)rank * (rank + 1) / 2, "iscan", k);
        check(rank == 0 || excl == (long)rank * k + (long)rank * (rank - 1) / 2, "iexscan", k);
        if (rank == 0)
            check(reduced == (long)size * k + (long)size * (size - 1) / 2, "ireduce", k);
        mem[k % 4] = k;
        h = ckpt_fnv(h, (uint64_t)(from_up + got[0] + got3[2] + incl + excl + scattered +
                                   (long)everyone[size - 1].half + mem[k % 4]));
        if (rank == 0)
            step_line(k);
    }
    MPI_Free_mem(mem);
    for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++)
        MPI_Type_free(&all_types[i]);
    MPI_Type_free(&pairs);
    MPI_Comm_free(&node);
    MPI_Comm_free(&row);
    MPI_Comm_free(&grid);
    uint64_t sum = xor_at_root(h);
    mpi_done(sum);
    MPI_Finalize();
    return 0;
}
