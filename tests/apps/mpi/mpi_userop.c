/* mpi_userop.c — a self-checking MPI program for user reduction operations: MPI_Op_create of a
   commutative modular sum (on MPI_LONG) and of a non-commutative 2x2 matrix product (on a
   contiguous derived type of 4 longs), used by MPI_Allreduce and MPI_Reduce every step; the
   functions touch thread-local storage and call libc (so they must run with the program's own
   fs), check the datatype they are given, and the operations are freed and created again every
   10 steps. A pause with a message in flight each step. Rank 0 prints `step N` and DONE. */
#define PROG "mpi_userop"
#define USAGE "[STEPS [MS_PER_STEP]]"
#include "mpi_common.h"

#include <mpi.h>
#include <stdint.h>

#define MOD 1000003L

static MPI_Datatype mat_type;
static __thread long tls_calls;
static long calls;

static void modsum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", *len); /* libc, with its TLS */
    if (*t != MPI_LONG || atoi(buf) != *len)
        abort();
    long *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = (a[i] + b[i]) % MOD;
    tls_calls++;
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
}

/* inout = in x inout (2x2 matrices mod MOD): not commutative. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t)
{
    if (*t != mat_type)
        abort();
    long *a = in, *b = inout;
    for (int i = 0; i < *len; i++, a += 4, b += 4) {
        long r[4] = {(a[0] * b[0] + a[1] * b[2]) % MOD, (a[0] * b[1] + a[1] * b[3]) % MOD,
                     (a[2] * b[0] + a[3] * b[2]) % MOD, (a[2] * b[1] + a[3] * b[3]) % MOD};
        for (int j = 0; j < 4; j++)
            b[j] = r[j];
    }
    tls_calls++;
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
}

static void mat_of(long k, int r, long *m)
{
    m[0] = 1 + (k + r) % 5;
    m[1] = r + 1;
    m[2] = k % 3;
    m[3] = 1;
}

static void mat_mul(const long *a, const long *b, long *out)
{
    long r[4] = {(a[0] * b[0] + a[1] * b[2]) % MOD, (a[0] * b[1] + a[1] * b[3]) % MOD,
                 (a[2] * b[0] + a[3] * b[2]) % MOD, (a[2] * b[1] + a[3] * b[3]) % MOD};
    for (int j = 0; j < 4; j++)
        out[j] = r[j];
}

int main(int argc, char **argv)
{
    mpi_start(&argc, &argv, 50, 10000, MPI_INIT_PLAIN);
    MPI_Type_contiguous(4, MPI_LONG, &mat_type);
    MPI_Type_commit(&mat_type);
    MPI_Op sum_op = MPI_OP_NULL, mat_op = MPI_OP_NULL;
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        if (k % 10 == 1) {
            if (sum_op != MPI_OP_NULL) {
                MPI_Op_free(&sum_op);
                MPI_Op_free(&mat_op);
                check(sum_op == MPI_OP_NULL, "Op_free", k);
            }
            MPI_Op_create(modsum, 1, &sum_op);
            MPI_Op_create(matmul, 0, &mat_op);
        }
        long v[3] = {k * 999983L * (rank + 1) % MOD, rank, k}, s[3];
        MPI_Allreduce(v, s, 3, MPI_LONG, sum_op, MPI_COMM_WORLD);
        long want = 0;
        for (int r = 0; r < size; r++)
            want = (want + k * 999983L * (r + 1) % MOD) % MOD;
        check(s[0] == want && s[1] == (long)size * (size - 1) / 2 && s[2] == k * size % MOD,
              "user Allreduce", k);
        long m[4], prod[4] = {0, 0, 0, 0}, exp[4] = {1, 0, 0, 1};
        mat_of(k, rank, m);
        MPI_Reduce(m, prod, 1, mat_type, mat_op, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (int r = 0; r < size; r++) {
                long mr[4];
                mat_of(k, r, mr);
                mat_mul(exp, mr, exp); /* rank order: m0 x m1 x ... */
            }
            for (int j = 0; j < 4; j++)
                check(prod[j] == exp[j], "user Reduce (non-commutative)", k);
            h = (h ^ (uint64_t)(s[0] + prod[0] * 7 + prod[3])) * 0x100000001b3ULL;
            step_line(k);
        }
        late_message(k, 3, 9);
    }
    /* The root combines every step's matrices (which ranks run the sums is the library's). */
    check(rank != 0 || size == 1 || __atomic_load_n(&calls, __ATOMIC_RELAXED) >= steps, "op calls",
          steps);
    (void)tls_calls;
    MPI_Op_free(&sum_op);
    MPI_Op_free(&mat_op);
    mpi_done(h);
    MPI_Finalize();
    return 0;
}
