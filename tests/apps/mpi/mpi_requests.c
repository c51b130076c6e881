/* mpi_requests.c — a self-checking MPI program for request completion and persistent requests:
   a ring through persistent requests (MPI_Recv_init/MPI_Send_init once, MPI_Startall each
   step, a pause with them started, then MPI_Waitany for each), then halo messages to both
   neighbours completed by MPI_Waitsome, by MPI_Testany and by MPI_Testall loops; statuses and
   indices checked; MPI_Request_free at the end. Rank 0 prints `step N` and DONE (checksum). */
#define PROG "mpi_requests"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <sched.h>
#include <stdint.h>

/* Irecv from both neighbours (tag TAG) into IN[0..1], Isend OUT to both: REQ[0..3]. */
static void halo(long *in, long out, int left, int right, int tag, MPI_Request *req)
{
    MPI_Irecv(&in[0], 1, MPI_LONG, left, tag, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(&in[1], 1, MPI_LONG, right, tag, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(&out, 1, MPI_LONG, right, tag, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(&out, 1, MPI_LONG, left, tag, MPI_COMM_WORLD, &req[3]);
}

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 50, 10000, MPI_INIT_PLAIN);
    long pin = -1, pout = 0;
    MPI_Request preq[2];
    MPI_Recv_init(&pin, 1, MPI_LONG, left, 1, MPI_COMM_WORLD, &preq[0]);
    MPI_Send_init(&pout, 1, MPI_LONG, right, 1, MPI_COMM_WORLD, &preq[1]);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        /* Persistent ring: started, then a pause (a checkpoint finds them active). */
        pout = k * 100 + rank;
        pin = -1;
        MPI_Startall(2, preq);
        if (ms)
            ckpt_sleep_ms(ms);
        int seen = 0;
        for (int n = 0; n < 2; n++) {
            int idx = -1;
            MPI_Status st;
            MPI_Waitany(2, preq, &idx, &st);
            check(idx == 0 || idx == 1, "Waitany index", k);
            check(!(seen & (1 << idx)), "Waitany index twice", k);
            seen |= 1 << idx;
            if (idx == 0)
                check(st.MPI_SOURCE == left && st.MPI_TAG == 1, "Waitany status", k);
        }
        check(preq[0] != MPI_REQUEST_NULL && preq[1] != MPI_REQUEST_NULL, "persistent kept", k);
        check(pin == k * 100 + left, "persistent ring value", k);
        int idx = 5;
        MPI_Waitany(2, preq, &idx, MPI_STATUS_IGNORE); /* both inactive now */
        check(idx == MPI_UNDEFINED, "Waitany of inactive requests", k);

        /* Waitsome until every request is done. */
        long in[2] = {-1, -1};
        MPI_Request req[4];
        halo(in, k * 10 + rank, left, right, 2, req);
        int left_to_do = 4;
        for (;;) {
            int out = 0, ids[4];
            MPI_Status sts[4];
            MPI_Waitsome(4, req, &out, ids, sts);
            if (out == MPI_UNDEFINED)
                break;
            check(out >= 1 && out <= left_to_do, "Waitsome count", k);
            for (int i = 0; i < out; i++) {
                check(req[ids[i]] == MPI_REQUEST_NULL, "Waitsome freed", k);
                if (ids[i] < 2)
                    check(sts[i].MPI_SOURCE == (ids[i] == 0 ? left : right), "Waitsome status", k);
            }
            left_to_do -= out;
        }
        check(left_to_do == 0, "Waitsome total", k);
        check(in[0] == k * 10 + left && in[1] == k * 10 + right, "Waitsome values", k);

        /* Testany until none is active. */
        halo(in, k * 20 + rank, left, right, 3, req);
        int done = 0;
        while (done < 5) {
            int flag = 0, i = -1;
            MPI_Status st;
            MPI_Testany(4, req, &i, &flag, &st);
            if (!flag) {
                sched_yield();
                continue;
            }
            done++;
            if (i == MPI_UNDEFINED)
                break;
            check(i >= 0 && i < 4 && req[i] == MPI_REQUEST_NULL, "Testany index", k);
            if (i < 2)
                check(st.MPI_SOURCE == (i == 0 ? left : right), "Testany status", k);
        }
        check(done == 5, "Testany count", k);
        check(in[0] == k * 20 + left && in[1] == k * 20 + right, "Testany values", k);

        /* Testall: nothing touched until all are complete. */
        halo(in, k * 30 + rank, left, right, 4, req);
        MPI_Status sts[4];
        for (int flag = 0; !flag;) {
            MPI_Testall(4, req, &flag, sts);
            if (!flag) {
                check(req[0] != MPI_REQUEST_NULL, "Testall left a request alone", k);
                sched_yield();
            }
        }
        for (int i = 0; i < 4; i++)
            check(req[i] == MPI_REQUEST_NULL, "Testall freed", k);
        check(sts[0].MPI_SOURCE == left && sts[1].MPI_SOURCE == right, "Testall status", k);
        check(in[0] == k * 30 + left && in[1] == k * 30 + right, "Testall values", k);

        h = ckpt_fnv(ckpt_fnv(h, (uint64_t)pin), (uint64_t)(in[0] + in[1]));
        if (rank == 0)
            step_line(k);
    }
    MPI_Request_free(&preq[0]);
    MPI_Request_free(&preq[1]);
    check(preq[0] == MPI_REQUEST_NULL && preq[1] == MPI_REQUEST_NULL, "Request_free", steps);
    mpi_done(xor_at_root(h));
    MPI_Finalize();
    return 0;
}
