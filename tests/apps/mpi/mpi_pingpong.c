/* mpi_pingpong.c — a self-checking MPI program: 8-byte MPI_Send/MPI_Recv ping-pongs between ranks
   0 and 1, answered by rank 1 also with MPI_Sendrecv and with MPI_Irecv + MPI_Isend + MPI_Waitall;
   under crac it checks that each of those costs one crossing when its messages are there. */
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

/* Rank 0 sends, rank 1 answers once the message is there (MPI_Probe): with MPI_Sendrecv
   (tag 8), then with MPI_Irecv + MPI_Isend + MPI_Waitall (tag 9). Under crac each answer's
   receive matches at once and its eager send completes as posted, so each costs one crossing
   (four and three before: a crossing per post and per request waited for). */
static uint64_t answered(long k, uint64_t (*crossings)(void), uint64_t h)
{
    long single = 0;
    for (long j = 0; j < ROUNDS && rank < 2; j++) {
        for (int tag = 8; tag <= 9; tag++) {
            int64_t v = k * 7919 + j * 4 + tag + rank, got = -1;
            int peer = 1 - rank;
            if (rank == 0) {
                MPI_Send(&v, 1, MPI_INT64_T, peer, tag, MPI_COMM_WORLD);
                MPI_Recv(&got, 1, MPI_INT64_T, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                check(got == k * 7919 + j * 4 + tag + 1, "answer", k);
                h = ckpt_fnv(h, (uint64_t)got);
                continue;
            }
            MPI_Status st;
            MPI_Probe(peer, tag, MPI_COMM_WORLD, &st);
            uint64_t c0 = crossings ? crossings() : 0;
            if (tag == 8) {
                MPI_Sendrecv(&v, 1, MPI_INT64_T, peer, tag, &got, 1, MPI_INT64_T, peer, tag,
                             MPI_COMM_WORLD, &st);
            } else {
                MPI_Request rq[2];
                MPI_Status sts[2];
                MPI_Irecv(&got, 1, MPI_INT64_T, peer, tag, MPI_COMM_WORLD, &rq[0]);
                MPI_Isend(&v, 1, MPI_INT64_T, peer, tag, MPI_COMM_WORLD, &rq[1]);
                MPI_Waitall(2, rq, sts);
                st = sts[0];
                check(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "Waitall requests",
                      k);
            }
            /* Sendrecv: one crossing; Irecv, Isend, Waitall: one each. */
            single += crossings && crossings() - c0 == (tag == 8 ? 1u : 3u);
            check(got == k * 7919 + j * 4 + tag && st.MPI_SOURCE == peer && st.MPI_TAG == tag,
                  "answered value", k);
            h = ckpt_fnv(h, (uint64_t)got);
        }
    }
    if (crossings && rank == 1 && single < ROUNDS) {
        fprintf(stderr,
                PROG ": FAIL: %ld of %d answers (MPI_Sendrecv, MPI_Waitall) cost one crossing per "
                     "call at step %ld\n",
                single, 2 * ROUNDS, k);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return h;
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
        h = answered(k, crossings, h);
        if (rank == 0)
            step_line(k);
        if (ms) /* steps long enough for the test to checkpoint between them */
            ckpt_sleep_ms(ms);
    }
    mpi_done(xor_at_root(h));
    MPI_Finalize();
    return 0;
}
