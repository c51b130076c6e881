/* sim_restore: device state that must survive a restart exactly: device pointers stored in device
 * memory (a list a kernel walks) and in managed memory, event timings, destroyed handles, and new
 * allocations that must not overlap restored ones. It checkpoints itself with crac_checkpoint(). */
#define _DEFAULT_SOURCE
#include "../../examples/common.h"
#include "../../include/crac.h"
#include "crac_sim.h"

#include <stdint.h>
#include <string.h>

#define NODES 64

struct node {
    long value;
    struct node *next;
};

/* Walks the list from head and stores the sum: dereferences device pointers kept in device
 * memory. */
CRAC_SIM_KERNEL(walk, (struct node *, head), (long *, out))
{
    if (ctx->threadIdx.x != 0)
        return;
    long sum = 0;
    for (struct node *n = head; n; n = n->next)
        sum += n->value;
    *out = sum;
}

static long walk_list(struct node *head, long *d_out)
{
    void *args[] = {&head, &d_out};
    CHECK(cudaLaunchKernel((const void *)walk, dim3_of(1), dim3_of(1), args, 0, NULL));
    long sum = 0;
    CHECK(cudaMemcpy(&sum, d_out, sizeof(sum), cudaMemcpyDeviceToHost));
    return sum;
}

static int fail(const char *what)
{
    fprintf(stderr, "sim_restore: FAIL: %s\n", what);
    return 1;
}

int main(void)
{
    struct node *nodes[NODES];
    long expected = 0;
    for (int i = 0; i < NODES; i++)
        CHECK(cudaMalloc((void **)&nodes[i], sizeof(struct node)));
    for (int i = 0; i < NODES; i++) {
        struct node h = {i * 7 + 1, i + 1 < NODES ? nodes[i + 1] : NULL};
        expected += h.value;
        CHECK(cudaMemcpy(nodes[i], &h, sizeof(h), cudaMemcpyHostToDevice));
    }
    struct node **table; /* managed memory holding device pointers */
    CHECK(cudaMallocManaged((void **)&table, NODES * sizeof(*table), cudaMemAttachGlobal));
    for (int i = 0; i < NODES; i++)
        table[i] = nodes[i];
    long *d_out;
    CHECK(cudaMalloc((void **)&d_out, sizeof(long)));

    cudaStream_t s;
    cudaEvent_t e1, e2, gone_event;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventCreate(&e2));
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaMemsetAsync(d_out, 0, sizeof(long), s));
    CHECK(cudaEventRecord(e2, s));
    CHECK(cudaEventSynchronize(e2));
    float before = 0;
    CHECK(cudaEventElapsedTime(&before, e1, e2));
    cudaStream_t gone_stream;
    CHECK(cudaStreamCreate(&gone_stream));
    CHECK(cudaStreamDestroy(gone_stream));
    CHECK(cudaEventCreate(&gone_event));
    CHECK(cudaEventDestroy(gone_event));
    if (walk_list(nodes[0], d_out) != expected)
        return fail("list sum before the checkpoint");

    int r = crac_checkpoint ? crac_checkpoint() : CRAC_NOT_PRESENT;
    if (r == CRAC_AFTER_CHECKPOINT) {
        printf("checkpointed\n");
        return 0; /* the test restarts the image */
    }
    if (r != CRAC_AFTER_RESTART && r != CRAC_NOT_PRESENT)
        return fail("crac_checkpoint");

    if (walk_list(nodes[0], d_out) != expected)
        return fail("a kernel walking device pointers stored in device memory");
    for (int i = 0; i < NODES; i++) {
        struct node h;
        CHECK(cudaMemcpy(&h, table[i], sizeof(h), cudaMemcpyDeviceToHost));
        if (table[i] != nodes[i] || h.value != i * 7 + 1)
            return fail("device pointers stored in managed memory");
    }
    float after = -1;
    CHECK(cudaEventElapsedTime(&after, e1, e2));
    if (after != before)
        return fail("cudaEventElapsedTime of events recorded before the checkpoint");
    if (cudaStreamQuery(gone_stream) != cudaErrorInvalidResourceHandle ||
        cudaEventQuery(gone_event) != cudaErrorInvalidResourceHandle)
        return fail("a destroyed stream or event came back");
    (void)cudaGetLastError();
    CHECK(cudaStreamQuery(s));
    void *fresh;
    CHECK(cudaMalloc(&fresh, 1 << 20));
    uintptr_t lo = (uintptr_t)fresh, hi = lo + (1 << 20);
    for (int i = 0; i < NODES; i++) {
        uintptr_t a = (uintptr_t)nodes[i];
        if (a < hi && a + sizeof(struct node) > lo)
            return fail("a new allocation overlaps a restored one");
    }
    if ((uintptr_t)table < hi && (uintptr_t)table + NODES * sizeof(*table) > lo)
        return fail("a new allocation overlaps restored managed memory");
    printf("restored %s OK\n", r == CRAC_AFTER_RESTART ? "after restart" : "without crac");
    return 0;
}
