/* mpi_ring.c — a self-checking MPI program: each step passes a token around a ring with
   MPI_Sendrecv, runs an MPI_Allreduce and an MPI_Bcast, and sends a message received only after
   a pause; every rank checks every value. Rank 0 prints `step N` and a DONE line (checksum). */
#define PROG "mpi_ring"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stdint.h>

#define N 64

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 50, 10000, MPI_INIT_PLAIN);
    uint64_t h = CKPT_FNV_BASIS;
    long out[N], in[N];
    for (long k = 1; k <= steps; k++) {
        for (int i = 0; i < N; i++)
            out[i] = k * 1000 + rank * 100 + i;
        MPI_Status st;
        MPI_Sendrecv(out, N, MPI_LONG, right, (int)(k % 1000), in, N, MPI_LONG, left,
                     (int)(k % 1000), MPI_COMM_WORLD, &st);
        check(st.MPI_SOURCE == left && st.MPI_TAG == (int)(k % 1000), "Sendrecv status", k);
        int got = -1;
        MPI_Get_count(&st, MPI_LONG, &got);
        check(got == N, "Sendrecv count", k);
        for (int i = 0; i < N; i++)
            check(in[i] == k * 1000 + left * 100 + i, "ring value", k);
        long mine = k * (rank + 1), sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        check(sum == k * (long)size * (size + 1) / 2, "Allreduce sum", k);
        int root = (int)(k % size);
        long b[4] = {0, 0, 0, 0};
        if (rank == root)
            for (int i = 0; i < 4; i++)
                b[i] = k * 7 + i + root;
        MPI_Bcast(b, 4, MPI_LONG, root, MPI_COMM_WORLD);
        for (int i = 0; i < 4; i++)
            check(b[i] == k * 7 + i + root, "Bcast value", k);
        h = ckpt_fnv(ckpt_fnv(ckpt_fnv(h, (uint64_t)in[N - 1]), (uint64_t)sum), (uint64_t)b[3]);
        if (rank == 0)
            step_line(k);
        /* Sent now, received after the pause: a checkpoint in the pause finds it in flight. */
        long late = k * 3 + rank, got_late = -1;
        MPI_Send(&late, 1, MPI_LONG, right, 5000, MPI_COMM_WORLD);
        if (ms)
            ckpt_sleep_ms(ms);
        /* Probed first: after a restart the message may be one the checkpoint drained. */
        MPI_Probe(MPI_ANY_SOURCE, 5000, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_LONG, &got);
        check(st.MPI_SOURCE == left && got == 1, "late message probe", k);
        MPI_Recv(&got_late, 1, MPI_LONG, st.MPI_SOURCE, 5000, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_LONG, &got);
        check(got_late == k * 3 + left && st.MPI_SOURCE == left && got == 1, "late message", k);
    }
    mpi_done(xor_at_root(h));
    MPI_Finalize();
    return 0;
}
