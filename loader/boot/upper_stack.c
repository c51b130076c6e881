/* upper_stack.c — builds the upper half's initial process stack inside W, laid out as the kernel
 * lays it out for exec: argc, argv, envp, auxv, then the strings and AT_RANDOM bytes above. */
#include "upper_stack.h"

#include "confine.h"
#include "crac_layout.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#define STACK_DEFAULT (8UL << 20)
#define STACK_MAX (256UL << 20)
#define MAX_AUXV 64

static size_t count(char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

static uint64_t stack_size(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return STACK_DEFAULT;
    uint64_t s = rl.rlim_cur < STACK_DEFAULT ? STACK_DEFAULT : rl.rlim_cur;
    return (s > STACK_MAX ? STACK_MAX : s + CRAC_PAGE - 1) & ~(CRAC_PAGE - 1);
}

/* The loader's own auxv, read from /proc/self/auxv (getauxval cannot enumerate). */
static size_t read_own_auxv(Elf64_auxv_t *out, size_t max)
{
    int fd = open("/proc/self/auxv", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, out, max * sizeof(*out));
    close(fd);
    return n > 0 ? (size_t)n / sizeof(*out) : 0;
}

/* Copies a string below *top and returns its new address. */
static char *push_string(uint64_t *top, const char *s)
{
    size_t len = strlen(s) + 1;
    *top -= len;
    memcpy((void *)*top, s, len);
    return (char *)*top;
}

uint64_t upper_stack_build(const struct upper_start *s, char *err, size_t errlen)
{
    uint64_t size = stack_size();
    long m = confine_place(size + CRAC_PAGE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m < 0 && m > -4096) {
        snprintf(err, errlen, "no room in the upper window for the main stack");
        return 0;
    }
    mprotect((void *)m, CRAC_PAGE, PROT_NONE); /* guard page below the stack */
    uint64_t top = (uint64_t)m + CRAC_PAGE + size;

    size_t argc = count(s->argv), envc = count(s->envp);
    char **argv_copy = (char **)mmap(NULL, (argc + envc + 2) * sizeof(char *),
                                     PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (argv_copy == MAP_FAILED) {
        snprintf(err, errlen, "out of memory building the upper stack");
        return 0;
    }
    char **envp_copy = argv_copy + argc + 1;
    for (size_t i = argc; i-- > 0;)
        argv_copy[i] = push_string(&top, s->argv[i]);
    for (size_t i = envc; i-- > 0;)
        envp_copy[i] = push_string(&top, s->envp[i]);
    char *execfn = push_string(&top, s->execfn);

    Elf64_auxv_t own[MAX_AUXV], aux[MAX_AUXV + 4];
    size_t n_own = read_own_auxv(own, MAX_AUXV), n = 0;
    char *platform = NULL;
    for (size_t i = 0; i < n_own; i++)
        if (own[i].a_type == AT_PLATFORM)
            platform = push_string(&top, (const char *)own[i].a_un.a_val);
    top -= 16;
    unsigned char *random = (unsigned char *)top;
    if (getrandom(random, 16, 0) != 16) {
        snprintf(err, errlen, "getrandom failed");
        return 0;
    }
    for (size_t i = 0; i < n_own && own[i].a_type != AT_NULL; i++) {
        Elf64_auxv_t a = own[i];
        switch (a.a_type) {
        case AT_PHDR: a.a_un.a_val = s->interp->phdr; break;
        case AT_PHNUM: a.a_un.a_val = s->interp->phnum; break;
        case AT_PHENT: a.a_un.a_val = s->interp->phent; break;
        case AT_ENTRY: a.a_un.a_val = s->interp->entry; break;
        case AT_BASE: a.a_un.a_val = 0; break; /* as when ld.so is exec'd directly */
        case AT_RANDOM: a.a_un.a_val = (uint64_t)random; break;
        case AT_EXECFN: a.a_un.a_val = (uint64_t)execfn; break;
        case AT_PLATFORM: a.a_un.a_val = (uint64_t)platform; break;
        /* The real vDSO moves at restart: the upper libc gets the proxy in W (docs/DECISIONS.md
         * "The upper half's vDSO"), or none and makes system calls. */
        case AT_SYSINFO_EHDR:
            if (!s->vdso)
                continue;
            a.a_un.a_val = s->vdso;
            break;
        default: break;
        }
        aux[n++] = a;
    }
    aux[n].a_type = CRAC_AT_LH_API;
    aux[n++].a_un.a_val = s->lh_api;
    aux[n].a_type = AT_NULL;
    aux[n++].a_un.a_val = 0;

    /* argc, argv[], NULL, envp[], NULL, auxv[]; rsp 16-byte aligned at argc. */
    size_t words = 1 + argc + 1 + envc + 1 + 2 * n;
    top = (top - words * 8) & ~15UL;
    uint64_t *sp = (uint64_t *)top;
    size_t w = 0;
    sp[w++] = argc;
    for (size_t i = 0; i < argc; i++)
        sp[w++] = (uint64_t)argv_copy[i];
    sp[w++] = 0;
    for (size_t i = 0; i < envc; i++)
        sp[w++] = (uint64_t)envp_copy[i];
    sp[w++] = 0;
    memcpy(&sp[w], aux, n * sizeof(aux[0]));
    munmap(argv_copy, (argc + envc + 2) * sizeof(char *));
    return top;
}
