/* sim_layout: where things live. Device and managed memory at addresses inside D, mapped
   read-write while allocated and PROT_NONE again after cudaFree (no hole in D); pinned host
   memory inside W (under crac); handles the program sees are crac's virtual handles, the same
   values whichever sim version runs below. Prints the handles and the driver version. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W_START 0x200000000000UL
#define W_END 0x300000000000UL
#define D_START 0x300000000000UL
#define D_END 0x340000000000UL

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "sim_layout: " __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            FAIL("%s: %s", #call, cudaGetErrorName(e_));                                           \
    } while (0)

/* The permissions of the mapping covering addr ("rw-p", "---p"), or "" if unmapped. */
static void perms_at(uintptr_t addr, char out[8])
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    out[0] = 0;
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long a, b;
        char p[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, p) == 3 && addr >= a && addr < b) {
            strcpy(out, p);
            break;
        }
    }
    if (f)
        fclose(f);
}

static int in(uintptr_t a, uintptr_t lo, uintptr_t hi) { return a >= lo && a < hi; }

int main(void)
{
    int (*version)(void) = (int (*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "crac_sim_version");
    int count;
    CHECK(cudaGetDeviceCount(&count));
    int under_crac = version && version() > 0;

    char *d, *m, *h;
    CHECK(cudaMalloc((void **)&d, 3 << 20));
    CHECK(cudaMallocManaged((void **)&m, 5000, cudaMemAttachGlobal));
    CHECK(cudaMallocHost((void **)&h, 5000));
    uintptr_t ud = (uintptr_t)d, um = (uintptr_t)m, uh = (uintptr_t)h;
    /* The native sim reserves the same window when it is free, so D holds there too. */
    if (!in(ud, D_START, D_END) || !in(um, D_START, D_END))
        FAIL("device %#lx / managed %#lx not inside D", (unsigned long)ud, (unsigned long)um);
    if (ud % 4096 || um % 4096)
        FAIL("allocations are not page-aligned");
    if (under_crac && !in(uh, W_START, W_END))
        FAIL("pinned memory %#lx not inside W", (unsigned long)uh);
    char p[8];
    perms_at(ud, p);
    if (strncmp(p, "rw", 2) != 0)
        FAIL("device memory mapped %s", p);
    memset(m, 7, 5000); /* host code uses managed memory directly */
    memset(h, 9, 5000);
    CHECK(cudaMemcpy(d, m, 5000, cudaMemcpyDefault));
    CHECK(cudaMemcpy(h, d, 5000, cudaMemcpyDefault));
    if (h[0] != 7 || h[4999] != 7)
        FAIL("copies through cudaMemcpyDefault went wrong");
    CHECK(cudaFree(d));
    perms_at(ud, p);
    if (under_crac && strcmp(p, "---p") != 0)
        FAIL("freed device memory left %s at %#lx (a hole or still mapped)", p[0] ? p : "nothing",
             (unsigned long)ud);
    char *d2;
    CHECK(cudaMalloc((void **)&d2, 1 << 20));
    if ((uintptr_t)d2 != ud)
        FAIL("first fit did not reuse the freed range");
    CHECK(cudaFree(d2));
    CHECK(cudaFree(m));
    CHECK(cudaFreeHost(h));

    cudaStream_t s1, s2;
    cudaEvent_t e1;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreate(&s2));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamCreate(&s1));
    printf("handles: stream %#lx %#lx event %#lx\n", (unsigned long)(uintptr_t)s1,
           (unsigned long)(uintptr_t)s2, (unsigned long)(uintptr_t)e1);
    int drv = 0;
    CHECK(cudaDriverGetVersion(&drv));
    printf("driver: %d\n", drv);
    printf("sim_layout: OK\n");
    return 0;
}
