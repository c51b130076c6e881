/* mpi_abi.c — a self-checking MPI program for the values an MPI ABI defines (built with either
   MPI's mpicc): MPI_ANY_SOURCE/MPI_ANY_TAG probes and receives, MPI_PROC_NULL statuses, MPI_IN_PLACE
   reductions and scatters, MPI_UNDEFINED (a split colour, Waitany and Testsome of null requests),
   MPI_Testsome and MPI_Waitsome, counts from statuses, error classes, thread level, processor
   name, pack/unpack and type extents; at every step, the strings MPI writes (library version,
   processor/communicator/type names, error strings) stay inside buffers of the program's own
   MPI's maximum sizes, whichever library is below. Rank 0 prints `step N` and DONE (checksum). */
#define PROG "mpi_abi"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <sched.h>
#include <stdint.h>

/* Once, before the steps: what does not change. */
static void local_checks(int rank)
{
    int provided = -1, cls = -1, len = 0;
    MPI_Query_thread(&provided);
    check(provided == MPI_THREAD_FUNNELED, "MPI_Query_thread", 0);
    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 'x', sizeof(name));
    MPI_Get_processor_name(name, &len);
    check(len > 0 && len < MPI_MAX_PROCESSOR_NAME && (int)strlen(name) == len, "processor name", 0);
    MPI_Error_class(MPI_ERR_TRUNCATE, &cls);
    check(cls == MPI_ERR_TRUNCATE, "MPI_Error_class(MPI_ERR_TRUNCATE)", 0);
    MPI_Error_class(MPI_ERR_COMM, &cls);
    check(cls == MPI_ERR_COMM, "MPI_Error_class(MPI_ERR_COMM)", 0);
    char msg[MPI_MAX_ERROR_STRING];
    len = 0;
    MPI_Error_string(MPI_ERR_TRUNCATE, msg, &len);
    check(len > 0 && (int)strlen(msg) == len, "MPI_Error_string", 0);
    int initialized = 0, finalized = 1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    check(initialized && !finalized, "MPI_Initialized/MPI_Finalized", 0);
    (void)rank;
}

/* A string output the size the program's mpi.h gives it, and guard bytes after it the library
 * must not touch (another MPI below may have larger maximums). */
#define GUARD 64

static void bounded_check(const char *text, const char *guard, int len, int max, const char *what,
                          long step)
{
    for (int i = 0; i < GUARD; i++)
        check(guard[i] == 'g', what, step);
    /* Open MPI's library version counts its NUL in the length, MPICH's does not */
    int n = (int)strnlen(text, (size_t)max);
    check(n < max && (len == n || len == n + 1), what, step);
}

#define BOUNDED_CALL(MAX, what, step, call)                                                        \
    do {                                                                                           \
        struct {                                                                                   \
            char text[MAX];                                                                        \
            char guard[GUARD];                                                                     \
        } b_;                                                                                      \
        memset(b_.text, 'x', sizeof(b_.text));                                                     \
        memset(b_.guard, 'g', sizeof(b_.guard));                                                   \
        int len_ = -1;                                                                             \
        char *out_ = b_.text;                                                                      \
        call;                                                                                      \
        bounded_check(b_.text, b_.guard, len_, (MAX), what, step);                                 \
    } while (0)

static void string_checks(MPI_Datatype type, long step)
{
    BOUNDED_CALL(MPI_MAX_LIBRARY_VERSION_STRING, "MPI_Get_library_version bounds", step,
                 MPI_Get_library_version(out_, &len_));
    BOUNDED_CALL(MPI_MAX_PROCESSOR_NAME, "MPI_Get_processor_name bounds", step,
                 MPI_Get_processor_name(out_, &len_));
    BOUNDED_CALL(MPI_MAX_OBJECT_NAME, "MPI_Comm_get_name bounds", step,
                 MPI_Comm_get_name(MPI_COMM_WORLD, out_, &len_));
    BOUNDED_CALL(MPI_MAX_OBJECT_NAME, "MPI_Type_get_name bounds", step,
                 MPI_Type_get_name(type, out_, &len_));
    BOUNDED_CALL(MPI_MAX_ERROR_STRING, "MPI_Error_string bounds", step,
                 MPI_Error_string(MPI_ERR_TRUNCATE, out_, &len_));
}

int main(int argc, char **argv)
{
    int provided = mpi_start(&argc, &argv, 50, 10000, MPI_THREAD_FUNNELED);
    check(provided >= MPI_THREAD_FUNNELED, "MPI_Init_thread provided", 0);
    local_checks(rank);

    /* A vector type: 3 blocks of 2 ints, stride 4. */
    MPI_Datatype vec;
    MPI_Type_vector(3, 2, 4, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int tsize = 0;
    MPI_Aint lb = -1, extent = 0;
    MPI_Type_size(vec, &tsize);
    MPI_Type_get_extent(vec, &lb, &extent);
    check(tsize == 6 * (int)sizeof(int) && lb == 0 && extent == 10 * (MPI_Aint)sizeof(int),
          "vector size and extent", 0);

    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        string_checks(MPI_DOUBLE, k);
        /* Any source, any tag: probe, count, receive. */
        int out[3] = {(int)k, rank, (int)(k * rank)}, in[3] = {0, 0, 0};
        MPI_Request sreq;
        MPI_Isend(out, 3, MPI_INT, right, (int)(k % 100), MPI_COMM_WORLD, &sreq);
        MPI_Status st;
        for (int flag = 0; !flag;) {
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
            if (!flag)
                sched_yield();
        }
        int count = -1;
        MPI_Get_count(&st, MPI_INT, &count);
        check(st.MPI_SOURCE == left && st.MPI_TAG == (int)(k % 100) && count == 3, "Iprobe", k);
        MPI_Recv(in, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        count = -1;
        MPI_Get_count(&st, MPI_INT, &count);
        check(st.MPI_SOURCE == left && st.MPI_TAG == (int)(k % 100) && count == 3, "Recv", k);
        check(in[0] == k && in[1] == left, "Recv values", k);
        MPI_Wait(&sreq, MPI_STATUS_IGNORE);
        check(sreq == MPI_REQUEST_NULL, "Wait freed", k);

        /* MPI_PROC_NULL: completes at once with the null status. */
        MPI_Sendrecv(out, 3, MPI_INT, MPI_PROC_NULL, 5, in, 3, MPI_INT, MPI_PROC_NULL, 5,
                     MPI_COMM_WORLD, &st);
        count = -1;
        MPI_Get_count(&st, MPI_INT, &count);
        check(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
              "PROC_NULL status", k);

        /* The ring with a pause between posting and completing, completed by Testsome (then
         * Waitsome for what is left): a checkpoint finds the requests posted. */
        int rin[2] = {-1, -1}, v = (int)(k * 10 + rank);
        MPI_Request req[4];
        MPI_Irecv(&rin[0], 1, MPI_INT, left, 7, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(&rin[1], 1, MPI_INT, right, 7, MPI_COMM_WORLD, &req[1]);
        if (ms)
            ckpt_sleep_ms(ms);
        MPI_Isend(&v, 1, MPI_INT, right, 7, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(&v, 1, MPI_INT, left, 7, MPI_COMM_WORLD, &req[3]);
        int left_to_do = 4, tests = 0;
        while (left_to_do) {
            int n = 0, ids[4];
            MPI_Status sts[4];
            int waiting = tests++ >= 3;
            if (!waiting)
                MPI_Testsome(4, req, &n, ids, sts);
            else
                MPI_Waitsome(4, req, &n, ids, sts);
            check(n != MPI_UNDEFINED && n >= waiting && n <= left_to_do, "Testsome/Waitsome count",
                  k);
            for (int i = 0; i < n; i++) {
                check(req[ids[i]] == MPI_REQUEST_NULL, "Testsome freed", k);
                if (ids[i] < 2)
                    check(sts[i].MPI_SOURCE == (ids[i] == 0 ? left : right) && sts[i].MPI_TAG == 7,
                          "Testsome status", k);
            }
            left_to_do -= n;
        }
        int n = 5, ids[4];
        MPI_Status sts[4];
        MPI_Testsome(4, req, &n, ids, sts);
        check(n == MPI_UNDEFINED, "Testsome of null requests", k);
        int idx = 5;
        MPI_Waitany(4, req, &idx, MPI_STATUS_IGNORE);
        check(idx == MPI_UNDEFINED, "Waitany of null requests", k);
        check(rin[0] == k * 10 + left && rin[1] == k * 10 + right, "ring values", k);

        /* MPI_IN_PLACE: allreduce, reduce at the root, scatter at the root. */
        long sum[2] = {k + rank, 1};
        MPI_Allreduce(MPI_IN_PLACE, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        check(sum[0] == k * size + (long)size * (size - 1) / 2 && sum[1] == size, "in-place sum",
              k);
        long mx = k * 100 + rank;
        if (rank == 0)
            MPI_Reduce(MPI_IN_PLACE, &mx, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        else
            MPI_Reduce(&mx, NULL, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            check(mx == k * 100 + size - 1, "in-place reduce", k);
        long parts[64], mine = -1;
        for (int i = 0; i < size && i < 64; i++)
            parts[i] = k * 1000 + i;
        if (rank == 0) {
            MPI_Scatter(parts, 1, MPI_LONG, MPI_IN_PLACE, 1, MPI_LONG, 0, MPI_COMM_WORLD);
            mine = parts[0];
        } else
            MPI_Scatter(NULL, 1, MPI_LONG, &mine, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        check(mine == k * 1000 + rank, "in-place scatter", k);

        /* MPI_UNDEFINED colour: odd ranks get MPI_COMM_NULL. */
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2 ? MPI_UNDEFINED : 0, rank, &half);
        check((rank % 2 != 0) == (half == MPI_COMM_NULL), "split with MPI_UNDEFINED", k);
        long evens = 0;
        if (half != MPI_COMM_NULL) {
            long one = 1;
            MPI_Allreduce(&one, &evens, 1, MPI_LONG, MPI_SUM, half);
            check(evens == (size + 1) / 2, "the even half", k);
            MPI_Comm_free(&half);
            check(half == MPI_COMM_NULL, "MPI_Comm_free", k);
        }

        /* The vector type through pack/unpack and a message. */
        int grid[10], back[10], pos = 0;
        char packed[256];
        for (int i = 0; i < 10; i++)
            grid[i] = (int)(k * 10 + i);
        MPI_Pack(grid, 1, vec, packed, sizeof(packed), &pos, MPI_COMM_WORLD);
        check(pos == 6 * (int)sizeof(int), "MPI_Pack position", k);
        memset(back, 0, sizeof(back));
        pos = 0;
        MPI_Unpack(packed, sizeof(packed), &pos, back, 1, vec, MPI_COMM_WORLD);
        check(back[0] == grid[0] && back[5] == grid[5] && back[9] == grid[9] && back[2] == 0,
              "MPI_Unpack", k);
        memset(back, 0, sizeof(back));
        MPI_Sendrecv(grid, 1, vec, right, 9, back, 1, vec, left, 9, MPI_COMM_WORLD, &st);
        int elems = -1;
        MPI_Get_elements(&st, MPI_INT, &elems);
        check(elems == 6 && back[4] == grid[4] && back[3] == 0, "vector message", k);

        h = ckpt_fnv(ckpt_fnv(ckpt_fnv(h, (uint64_t)sum[0]), (uint64_t)(rin[0] + rin[1])),
                     (uint64_t)mine);
        h = ckpt_fnv(h, (uint64_t)evens);
        if (rank == 0)
            step_line(k);
    }
    MPI_Type_free(&vec);
    check(vec == MPI_DATATYPE_NULL, "MPI_Type_free", steps);
    uint64_t all = 0; /* on every rank: an allreduce, where mpi_common.h's xor_at_root reduces */
    MPI_Allreduce(&h, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    mpi_done(all);
    MPI_Finalize();
    return 0;
}
