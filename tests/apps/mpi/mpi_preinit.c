/* mpi_preinit.c — a self-checking MPI program whose rank 1 starts MPI late: given GATE_FILE, it
   waits for that file before MPI_Init (creating GATE_FILE.waiting first), so a checkpoint can come
   while rank 0 is inside MPI_Init and rank 1 before it. Then a ring exchange per step. */
#define PROG "mpi_preinit"
#define USAGE "[STEPS [MS_PER_STEP [GATE_FILE]]]"
#include "mpi_common.h"

#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <unistd.h>

/* The launcher's rank, known before MPI_Init (Open MPI's mpirun, MPICH's Hydra). */
static int launcher_rank(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_RANK");
    if (!v)
        v = getenv("PMI_RANK");
    return v ? atoi(v) : 0;
}

static void wait_for_gate(const char *gate)
{
    char waiting[4096];
    snprintf(waiting, sizeof(waiting), "%s.waiting", gate);
    int fd = open(waiting, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        fail("cannot create %s", waiting);
    close(fd);
    while (access(gate, F_OK) != 0)
        ckpt_sleep_ms(20);
}

int main(int argc, char **argv)
{
    if (argc > 3 && launcher_rank() == 1)
        wait_for_gate(argv[3]);
    mpi_start(&argc, &argv, 30, 10000, MPI_INIT_PLAIN);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        long out = k * 1000 + rank, in = -1;
        MPI_Status st;
        MPI_Sendrecv(&out, 1, MPI_LONG, right, 1, &in, 1, MPI_LONG, left, 1, MPI_COMM_WORLD, &st);
        check(in == k * 1000 + left && st.MPI_SOURCE == left, "ring value", k);
        h = ckpt_fnv(h, (uint64_t)in);
        if (rank == 0)
            step_line(k);
        late_message(k, 7, 2);
    }
    mpi_done(xor_at_root(h));
    MPI_Finalize();
    return 0;
}
