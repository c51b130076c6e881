/* sim_kernels_lib.c — the kernels library of an nvcc-built program (built by `crac kernels`,
 * include/crac_kernels_abi.h): opened by path, kernels found by nvcc's device name, and the
 * library's __device__ variables pointed (through its GOT) at the device memory the sim owns. */
#include "sim.h"

#include "crac_kernels_abi.h"

#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char lib_path[PATH_MAX + 16];
static int lib_state; /* 0: not tried, 1: open, -1: failed */
static void *lib_handle;
static const struct crac_kernels_table *lib_table;

/* Caller holds sim_lock. A different path (a restart with another library) starts over. */
void sim_kernels_set_path(const char *path)
{
    if (!path || strcmp(path, lib_path) == 0)
        return;
    snprintf(lib_path, sizeof(lib_path), "%s", path);
    lib_state = 0;
    lib_table = NULL;
}

const char *sim_kernels_path(void) { return lib_path; }

/* Natively the program is this process's executable. */
static void default_path(void)
{
    const char *env = getenv("CRAC_KERNELS");
    if (env && *env) {
        snprintf(lib_path, sizeof(lib_path), "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        snprintf(lib_path, sizeof(lib_path), "%s.kernels.so", exe);
    }
}

static const struct crac_kernels_table *open_lib(void)
{
    if (lib_state)
        return lib_table;
    lib_state = -1;
    if (!lib_path[0])
        default_path();
    if (!lib_path[0] || access(lib_path, F_OK) != 0)
        return NULL;
    void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "crac: kernels library %s cannot be loaded: %s\n", lib_path, dlerror());
        return NULL;
    }
    const struct crac_kernels_table *t = dlsym(h, CRAC_KERNELS_TABLE_SYMBOL);
    if (!t || t->abi != CRAC_KERNELS_ABI) {
        fprintf(stderr,
                "crac: %s is not a kernels library of this crac (rebuild it with crac "
                "kernels)\n",
                lib_path);
        dlclose(h);
        return NULL;
    }
    lib_handle = h;
    lib_table = t;
    lib_state = 1;
    return t;
}

const struct crac_kernel_entry *sim_kernels_find(const char *device_name)
{
    const struct crac_kernels_table *t = device_name ? open_lib() : NULL;
    for (uint32_t i = 0; t && i < t->n; i++)
        if (strcmp(t->entries[i]->name, device_name) == 0)
            return t->entries[i];
    return NULL;
}

int sim_kernels_run_block(const struct crac_kernel_entry *k, void **args,
                          const struct crac_kernel_block *b)
{
    return lib_table ? lib_table->run_block(k, args, b) : CRAC_KERNEL_TRAP;
}

/* One stderr line per kernel the sim cannot run (it would otherwise fail silently). */
void sim_kernels_report_missing(const char *device_name)
{
    const char *path = lib_path[0] ? lib_path : "PROGRAM.kernels.so";
    if (lib_state == 1)
        fprintf(stderr,
                "crac: kernel %s is not in %s: rebuild it with `crac kernels SOURCES.cu -o "
                "%s` from the program's sources\n",
                device_name, path, path);
    else
        fprintf(stderr,
                "crac: kernel %s has no CPU code for the sim: build it with `crac kernels "
                "SOURCES.cu -o %s` (or set CRAC_KERNELS to the library)\n",
                device_name, path);
}

/* Point every GOT slot / absolute pointer the library has for symbol name at addr. */
static int patch_relocs(const char *name, uint64_t addr)
{
    struct link_map *lm = NULL;
    if (!lib_handle || dlinfo(lib_handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
        return 0;
    const ElfW(Rela) *rela = NULL;
    size_t relasz = 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        /* glibc relocates these entries in place on x86-64; be safe with either form. */
        uint64_t p = d->d_un.d_ptr < lm->l_addr ? lm->l_addr + d->d_un.d_ptr : d->d_un.d_ptr;
        switch (d->d_tag) {
        case DT_RELA: rela = (const ElfW(Rela) *)(uintptr_t)p; break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)(uintptr_t)p; break;
        case DT_STRTAB: strtab = (const char *)(uintptr_t)p; break;
        default: break;
        }
    }
    if (!rela || !symtab || !strtab)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    int n = 0;
    for (size_t i = 0; i < relasz / sizeof(*rela); i++) {
        unsigned type = ELF64_R_TYPE(rela[i].r_info);
        if (type != R_X86_64_GLOB_DAT && type != R_X86_64_64)
            continue;
        const ElfW(Sym) *s = &symtab[ELF64_R_SYM(rela[i].r_info)];
        if (strcmp(strtab + s->st_name, name) != 0)
            continue;
        uint64_t *slot = (uint64_t *)(uintptr_t)(lm->l_addr + rela[i].r_offset);
        uintptr_t pg = (uintptr_t)slot & ~(uintptr_t)(page - 1);
        /* The GOT is read-only after relocation (RELRO): open it for the write. */
        mprotect((void *)pg, (size_t)page, PROT_READ | PROT_WRITE);
        *slot = addr + (type == R_X86_64_64 ? (uint64_t)rela[i].r_addend : 0);
        n++;
    }
    return n;
}

/* A variable registered at addr: its initial value is the library's own copy (when init), and
 * the library's code is pointed at addr. Caller holds sim_lock. */
void sim_kernels_bind_var(const char *name, uint64_t addr, uint64_t size, int init)
{
    if (!name || !open_lib())
        return;
    const void *own = dlsym(lib_handle, name);
    if (init && own)
        memcpy((void *)(uintptr_t)addr, own, size);
    patch_relocs(name, addr);
}
