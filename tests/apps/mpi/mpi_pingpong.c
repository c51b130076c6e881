/* mpi_pingpong.c — a self-checking MPI program: 8-byte MPI_Send/MPI_Recv ping-pongs between ranks
   0 and 1; under crac it also checks that a blocking send costs one crossing, not two. */
#define PROG "mpi_pingpong"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>

#define ROUNDS 200 /* ping-pongs per step */

/* Under crac: libcrac-upper.so is mapped, and it counts this thread's crossings. */
static int under_crac(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f))
        found = strstr(line, "libcrac-upper.so") != NULL;
    if (f)
        fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 30, 10000, MPI_INIT_PLAIN);
    if (size < 2)
        fail("needs 2 ranks");
    uint64_t (*crossings)(void) = NULL;
    if (under_crac()) {
        crossings = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "crac_upper_crossings");
        if (!crossings)
            fail("under crac, but libcrac-upper.so has no crac_upper_crossings");
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        long single = 0; /* sends that cost one crossing */
        for (long j = 0; j < ROUNDS && rank < 2; j++) {
            int64_t v = k * 1000003 + j * 2 + rank, got = -1;
            int peer = 1 - rank;
            MPI_Status st;
            if (rank == 1) {
                MPI_Recv(&got, 1, MPI_INT64_T, peer, 7, MPI_COMM_WORLD, &st);
                check(got == k * 1000003 + j * 2 && st.MPI_SOURCE == 0, "ping", k);
            }
            uint64_t c0 = crossings ? crossings() : 0;
            MPI_Send(&v, 1, MPI_INT64_T, peer, 7, MPI_COMM_WORLD);
            single += crossings && crossings() - c0 == 1;
            if (rank == 0) {
                MPI_Recv(&got, 1, MPI_INT64_T, peer, 7, MPI_COMM_WORLD, &st);
                check(got == k * 1000003 + j * 2 + 1 && st.MPI_SOURCE == 1, "pong", k);
            }
            h = ckpt_fnv(h, (uint64_t)got);
        }
        /* An eager 8-byte send with one message in flight completes as it is posted: one
         * crossing that posts and tests (two before: post, then test). Not every one: the first
         * after a restart looks its functions up and may wait for the new library to connect. */
        if (crossings && single < ROUNDS / 2) {
            fprintf(stderr, PROG ": FAIL: %ld of %d blocking sends cost one crossing at step %ld\n",
                    single, ROUNDS, k);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (rank == 0)
            step_line(k);
        if (ms) /* steps long enough for the test to checkpoint between them */
            ckpt_sleep_ms(ms);
    }
    mpi_done(xor_at_root(h));
    MPI_Finalize();
    return 0;
}
