/* maps_check: creates every kind of mapping a program makes (text, libc, heap, sbrk, stacks, TLS,
   dlopen, mmap, mremap) and prints /proc/self/maps, `ADDR name 0xhex` lines and kernel [heap] sizes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NADDR 32
#define SMALL_TOTAL (200UL << 20)
#define SMALL_SIZE 1000UL

static __thread long tls_var = 42;
static struct {
    const char *name;
    uintptr_t addr;
} addrs[NADDR];
static int naddr;
static pthread_barrier_t bar;

static void add(const char *name, const void *p)
{
    if (naddr == NADDR) {
        fprintf(stderr, "maps_check: too many addresses\n");
        exit(1);
    }
    addrs[naddr].name = name;
    addrs[naddr].addr = (uintptr_t)p;
    naddr++;
}

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "maps_check: " __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

/* Size in bytes of the kernel's [heap] mapping(s), 0 if there is none. */
static unsigned long kernel_heap_size(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        DIE("cannot open /proc/self/maps");
    char line[4096];
    unsigned long total = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (strstr(line, "[heap]") && sscanf(line, "%lx-%lx", &a, &b) == 2)
            total += b - a;
    }
    fclose(f);
    return total;
}

static void *thread_fn(void *arg)
{
    (void)arg;
    volatile int local = 1;
    tls_var = 43;
    add("thread_stack", (const void *)&local);
    add("tls_thread", &tls_var);
    pthread_barrier_wait(&bar); /* addresses recorded */
    pthread_barrier_wait(&bar); /* maps printed: we may exit */
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned long heap_before = kernel_heap_size();

    /* 200 MiB of small mallocs from the main thread (main arena, i.e. brk), then free them. */
    size_t nsmall = SMALL_TOTAL / SMALL_SIZE;
    char **small = malloc(nsmall * sizeof *small);
    if (!small)
        DIE("malloc(pointer array) failed");
    for (size_t i = 0; i < nsmall; i++) {
        small[i] = malloc(SMALL_SIZE - (i % 64));
        if (!small[i])
            DIE("small malloc #%zu failed", i);
        small[i][0] = (char)i;
    }
    unsigned long heap_after = kernel_heap_size();
    for (size_t i = 0; i < nsmall; i++) {
        if (small[i][0] != (char)i)
            DIE("small block #%zu corrupted", i);
        free(small[i]);
    }
    free(small);

    volatile int main_local = 0;
    add("main", (const void *)(uintptr_t)&main);
    add("printf", (const void *)(uintptr_t)&printf);
    add("main_stack", (const void *)&main_local);
    add("argv", argv[0]);
    char *m_small = malloc(32);
    char *m_big = malloc(64UL << 20);
    if (!m_small || !m_big)
        DIE("malloc failed");
    memset(m_small, 1, 32);
    memset(m_big, 2, 64UL << 20);
    add("malloc_small", m_small);
    add("malloc_64m", m_big);

    void *brk0 = sbrk(0);
    if (brk0 == (void *)-1)
        DIE("sbrk(0) failed");
    void *old = sbrk(1 << 20);
    if (old == (void *)-1)
        DIE("sbrk(1 MiB) failed");
    void *brk1 = sbrk(0);
    if ((char *)brk1 != (char *)old + (1 << 20))
        DIE("sbrk: break moved to %p, expected %p", brk1, (void *)((char *)old + (1 << 20)));
    memset(old, 3, 1 << 20);
    add("sbrk_before", brk0);
    add("sbrk_after", brk1);

    tls_var = 44;
    add("tls_main", &tls_var);

    if (argc > 1) {
        void *h = dlopen(argv[1], RTLD_NOW);
        if (!h)
            DIE("dlopen(%s): %s", argv[1], dlerror());
        void *fn = dlsym(h, "dlopen_lib_compute");
        void *data = dlsym(h, "dlopen_lib_data");
        void *(*tls_addr)(void) = (void *(*)(void))(uintptr_t)dlsym(h, "dlopen_lib_tls_addr");
        if (!fn || !data || !tls_addr)
            DIE("dlsym: %s", dlerror());
        add("dlopen_func", fn);
        add("dlopen_data", data);
        add("dlopen_tls", tls_addr());
    }

    long pg = sysconf(_SC_PAGESIZE);
    char *anon =
        mmap(NULL, 16 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (anon == MAP_FAILED)
        DIE("anonymous mmap failed");
    anon[0] = 1;
    add("anon_mmap", anon);

    int fd = open("/etc/passwd", O_RDONLY);
    if (fd < 0)
        DIE("open /etc/passwd failed");
    char *fmap = mmap(NULL, (size_t)pg, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fmap == MAP_FAILED)
        DIE("file mmap failed");
    close(fd);
    add("file_mmap", fmap);

    /* Grow the first page of a 3-page mapping: the next page is taken, so the kernel must move it. */
    char *r =
        mmap(NULL, 3 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        DIE("mmap for mremap failed");
    r[0] = 'x';
    char *moved = mremap(r, (size_t)pg, 4 * (size_t)pg, MREMAP_MAYMOVE);
    if (moved == MAP_FAILED)
        DIE("mremap failed");
    if (moved == r || moved[0] != 'x')
        DIE("mremap did not move the region or lost its data");
    add("mremap_moved", moved);

    void *al = NULL;
    int rc = posix_memalign(&al, 2UL << 20, 4UL << 20);
    if (rc != 0 || ((uintptr_t)al & ((2UL << 20) - 1)) != 0)
        DIE("posix_memalign(2 MiB) failed or misaligned: rc=%d p=%p", rc, al);
    memset(al, 4, 4UL << 20);
    add("memalign_2m", al);

    pthread_t t;
    if (pthread_barrier_init(&bar, NULL, 2) != 0 || pthread_create(&t, NULL, thread_fn, NULL) != 0)
        DIE("cannot start thread");
    pthread_barrier_wait(&bar);

    printf("MAPS BEGIN\n");
    fflush(stdout);
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        DIE("cannot open /proc/self/maps");
    char line[4096];
    while (fgets(line, sizeof line, f))
        fputs(line, stdout);
    fclose(f);
    printf("MAPS END\n");
    for (int i = 0; i < naddr; i++)
        printf("ADDR %s 0x%lx\n", addrs[i].name, (unsigned long)addrs[i].addr);
    printf("HEAP before %lu\n", heap_before);
    printf("HEAP after %lu\n", heap_after);
    pthread_barrier_wait(&bar);
    pthread_join(t, NULL);
    free(m_small);
    free(m_big);
    free(al);
    return 0;
}
