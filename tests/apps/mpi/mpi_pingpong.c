/* mpi_pingpong.c — a self-checking MPI program: 8-byte MPI_Send/MPI_Recv ping-pongs between ranks
   0 and 1; under crac it also checks that a blocking send costs one crossing, not two. */
#define PROG "mpi_pingpong"
#define USAGE "[STEPS [ROUNDS_PER_STEP [MS_PER_STEP]]]"
#include "../ckpt_common.h"

#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>

static void check(int ok, const char *what, long step)
{
    if (!ok) {
        fprintf(stderr, PROG ": FAIL: %s at step %ld\n", what, step);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

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
    long steps = arg(argc, argv, 1, 40, 1, 1000000);
    long rounds = arg(argc, argv, 2, 200, 1, 1000000);
    long ms = arg(argc, argv, 3, 30, 0, 10000);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2)
        fail("needs 2 ranks");
    uint64_t (*crossings)(void) = NULL;
    if (under_crac()) {
        crossings = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "crac_upper_crossings");
        if (!crossings)
            fail("under crac, but libcrac-upper.so has no crac_upper_crossings");
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        uint64_t send_cross = 0;
        for (long j = 0; j < rounds && rank < 2; j++) {
            int64_t v = k * 1000003 + j * 2 + rank, got = -1;
            int peer = 1 - rank;
            MPI_Status st;
            if (rank == 1) {
                MPI_Recv(&got, 1, MPI_INT64_T, peer, 7, MPI_COMM_WORLD, &st);
                check(got == k * 1000003 + j * 2 && st.MPI_SOURCE == 0, "ping", k);
            }
            uint64_t c0 = crossings ? crossings() : 0;
            MPI_Send(&v, 1, MPI_INT64_T, peer, 7, MPI_COMM_WORLD);
            send_cross += crossings ? crossings() - c0 : 0;
            if (rank == 0) {
                MPI_Recv(&got, 1, MPI_INT64_T, peer, 7, MPI_COMM_WORLD, &st);
                check(got == k * 1000003 + j * 2 + 1 && st.MPI_SOURCE == 1, "pong", k);
            }
            h = (h ^ (uint64_t)got) * 0x100000001b3ULL;
        }
        /* An eager 8-byte send with one message in flight completes as it is posted: one
         * crossing that posts and tests. Slack for the first call's lookups, after a restart too. */
        if (crossings && (long)send_cross > rounds + rounds / 4 + 8) {
            fprintf(stderr, PROG ": FAIL: %llu crossings for %ld blocking sends at step %ld\n",
                    (unsigned long long)send_cross, rounds, k);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (rank == 0)
            step_line(k);
        if (ms) { /* steps long enough for the test to checkpoint between them */
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
    }
    uint64_t all = 0;
    MPI_Reduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("DONE checksum=%016llx steps=%ld ranks=%d\n", (unsigned long long)all, steps, size);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
