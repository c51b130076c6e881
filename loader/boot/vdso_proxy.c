/* vdso_proxy.c — builds the upper half's vDSO image in W at launch and points its stubs at this
 * process's real vDSO (the stubs and the rollback: loader/confine/vdso_stubs.c). */
#include "vdso_proxy.h"

#include "confine.h"
#include "crac_layout.h"

#include <elf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#define N_FUNCS 5

/* Where each stub calls: the real function, or the stub's own system call. */
uint64_t crac_vdso_slots[N_FUNCS];

/* In slot order (vdso_stubs.c). The kernel's names are also exported without the prefix. */
static const struct {
    const char *name;
    const char *entry, *fallback;
} funcs[N_FUNCS] = {
    {"__vdso_clock_gettime", crac_vdso_e_clock_gettime, crac_vdso_f_clock_gettime},
    {"__vdso_gettimeofday", crac_vdso_e_gettimeofday, crac_vdso_f_gettimeofday},
    {"__vdso_time", crac_vdso_e_time, crac_vdso_f_time},
    {"__vdso_clock_getres", crac_vdso_e_clock_getres, crac_vdso_f_clock_getres},
    {"__vdso_getcpu", crac_vdso_e_getcpu, crac_vdso_f_getcpu},
};

static uint64_t in_proxy(const char *label)
{
    return VDSO_PROXY_CODE + (uint64_t)(label - crac_vdso_stubs);
}

void vdso_proxy_bind(void)
{
    for (int i = 0; i < N_FUNCS; i++)
        crac_vdso_slots[i] = in_proxy(funcs[i].fallback);
    const Elf64_Ehdr *e = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
    if (!e || memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 || e->e_ident[EI_CLASS] != ELFCLASS64)
        return;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)e + e->e_phoff);
    const Elf64_Phdr *load = NULL, *dynamic = NULL;
    for (int i = 0; i < e->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && !load)
            load = &ph[i];
        else if (ph[i].p_type == PT_DYNAMIC)
            dynamic = &ph[i];
    }
    if (!load || !dynamic)
        return;
    uint64_t base = (uint64_t)e - load->p_vaddr;
    const Elf64_Sym *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *hash = NULL; /* its nchain is the symbol count */
    for (const Elf64_Dyn *d = (const Elf64_Dyn *)(base + dynamic->p_vaddr); d->d_tag; d++) {
        const void *at = (const void *)(base + d->d_un.d_ptr);
        if (d->d_tag == DT_SYMTAB)
            symtab = at;
        else if (d->d_tag == DT_STRTAB)
            strtab = at;
        else if (d->d_tag == DT_HASH)
            hash = at;
    }
    /* x86-64's vDSO is linked with both hash styles; without DT_HASH the stubs make system
     * calls, as they do for a function it lacks. */
    if (!symtab || !strtab || !hash)
        return;
    /* A signal inside the real code is rewound by unwinding its frames exactly (a stack scan
     * took stale return addresses for the live one); without call frame information the stubs
     * make system calls and no proxy is mapped. */
    int rows = vdso_cfi_read(e, base, vdso_proxy.rows, VDSO_CFA_ROWS);
    if (rows <= 0)
        return;
    vdso_proxy.n_rows = rows;
    uint32_t n = hash[1];
    for (uint32_t s = 1; s < n; s++) {
        const Elf64_Sym *sym = &symtab[s];
        if (sym->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym->st_info) != STT_FUNC)
            continue;
        for (int i = 0; i < N_FUNCS; i++)
            if (strcmp(strtab + sym->st_name, funcs[i].name) == 0)
                crac_vdso_slots[i] = base + sym->st_value;
    }
    vdso_proxy.text_lo = base + load->p_vaddr;
    vdso_proxy.text_hi = vdso_proxy.text_lo + load->p_memsz;
}

/* Page 0 of the image: headers, a one-bucket DT_HASH, the symbols, their version (LINUX_2.6, as
 * the kernel's) and their names. Go's runtime reads the version definitions without checking
 * they are there: without them every Go program died at start-up (vdsoFindVersion). */
struct image {
    Elf64_Ehdr ehdr;
    Elf64_Phdr phdr[2];
    Elf64_Dyn dyn[10];
    uint32_t hash[2 + 1 + 1 + 2 * N_FUNCS];
    struct {
        Elf64_Verdef def;
        Elf64_Verdaux aux;
    } verdef[2]; /* the base (the soname), then LINUX_2.6 */
    Elf64_Sym sym[1 + 2 * N_FUNCS];
    Elf64_Half versym[1 + 2 * N_FUNCS];
    char str[512];
};
_Static_assert(sizeof(struct image) <= CRAC_PAGE, "the vDSO headers fit in one page");

/* The System V ELF hash of a name, as version definitions carry it. */
static uint32_t elf_hash(const char *name)
{
    uint32_t h = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        h = (h << 4) + *c;
        uint32_t g = h & 0xf0000000u;
        h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

/* Version definition I (index I + 1) named by the string at NAME. */
static void define_version(struct image *im, int i, size_t name)
{
    const char *text = im->str + name;
    im->verdef[i].def = (Elf64_Verdef){.vd_version = VER_DEF_CURRENT,
                                       .vd_flags = i == 0 ? VER_FLG_BASE : 0,
                                       .vd_ndx = (Elf64_Half)(i + 1),
                                       .vd_cnt = 1,
                                       .vd_hash = elf_hash(text),
                                       .vd_aux = sizeof(Elf64_Verdef),
                                       .vd_next = i == 0 ? sizeof(im->verdef[0]) : 0};
    im->verdef[i].aux = (Elf64_Verdaux){.vda_name = (Elf64_Word)name, .vda_next = 0};
}

static void build_image(struct image *im)
{
    memset(im, 0, sizeof(*im));
    size_t str = 1;
    const size_t soname = str;
    str += (size_t)sprintf(im->str + str, "linux-vdso.so.1") + 1;
    const size_t version = str;
    str += (size_t)sprintf(im->str + str, "LINUX_2.6") + 1;
    define_version(im, 0, soname);
    define_version(im, 1, version);
    uint32_t n_sym = 1;
    for (int i = 0; i < N_FUNCS; i++)
        for (int plain = 0; plain < 2; plain++) {
            const char *name = funcs[i].name + (plain ? strlen("__vdso_") : 0);
            im->versym[n_sym] = 2; /* LINUX_2.6 */
            Elf64_Sym *s = &im->sym[n_sym++];
            s->st_name = (uint32_t)str;
            s->st_info = ELF64_ST_INFO(plain ? STB_WEAK : STB_GLOBAL, STT_FUNC);
            s->st_shndx = 1; /* defined (any section but SHN_UNDEF and SHN_ABS) */
            s->st_value = CRAC_PAGE + (uint64_t)(funcs[i].entry - crac_vdso_stubs);
            str += (size_t)sprintf(im->str + str, "%s", name) + 1;
        }
    /* One bucket: every lookup walks the chain 1 -> 2 -> ... -> n_sym - 1. */
    im->hash[0] = 1;
    im->hash[1] = n_sym;
    im->hash[2] = 1;
    for (uint32_t s = 1; s + 1 < n_sym; s++)
        im->hash[3 + s] = s + 1;
    Elf64_Ehdr *e = &im->ehdr;
    memcpy(e->e_ident, ELFMAG, SELFMAG);
    e->e_ident[EI_CLASS] = ELFCLASS64;
    e->e_ident[EI_DATA] = ELFDATA2LSB;
    e->e_ident[EI_VERSION] = EV_CURRENT;
    e->e_type = ET_DYN;
    e->e_machine = EM_X86_64;
    e->e_version = EV_CURRENT;
    e->e_phoff = offsetof(struct image, phdr);
    e->e_ehsize = sizeof(Elf64_Ehdr);
    e->e_phentsize = sizeof(Elf64_Phdr);
    e->e_phnum = 2;
    im->phdr[0] = (Elf64_Phdr){.p_type = PT_LOAD,
                               .p_flags = PF_R | PF_X,
                               .p_filesz = VDSO_PROXY_PAGES * CRAC_PAGE,
                               .p_memsz = VDSO_PROXY_PAGES * CRAC_PAGE,
                               .p_align = CRAC_PAGE};
    uint64_t dyn_at = offsetof(struct image, dyn);
    im->phdr[1] = (Elf64_Phdr){.p_type = PT_DYNAMIC,
                               .p_flags = PF_R,
                               .p_offset = dyn_at,
                               .p_vaddr = dyn_at,
                               .p_paddr = dyn_at,
                               .p_filesz = sizeof(im->dyn),
                               .p_memsz = sizeof(im->dyn),
                               .p_align = 8};
    const Elf64_Dyn dyn[10] = {
        {DT_HASH, {offsetof(struct image, hash)}},
        {DT_STRTAB, {offsetof(struct image, str)}},
        {DT_SYMTAB, {offsetof(struct image, sym)}},
        {DT_STRSZ, {str}},
        {DT_SYMENT, {sizeof(Elf64_Sym)}},
        {DT_SONAME, {soname}},
        {DT_VERSYM, {offsetof(struct image, versym)}},
        {DT_VERDEF, {offsetof(struct image, verdef)}},
        {DT_VERDEFNUM, {2}},
        {DT_NULL, {0}},
    };
    memcpy(im->dyn, dyn, sizeof(dyn));
}

uint64_t vdso_proxy_map(void)
{
    const char *off = getenv("CRAC_NO_VDSO");
    if ((off && strcmp(off, "1") == 0) || !vdso_proxy.text_hi)
        return 0;
    uint64_t code = (uint64_t)(crac_vdso_stubs_end - crac_vdso_stubs);
    if (code > CRAC_PAGE)
        return 0;
    long m = emu_mmap(VDSO_PROXY_ADDR, VDSO_PROXY_PAGES * CRAC_PAGE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m != (long)VDSO_PROXY_ADDR)
        return 0;
    build_image((struct image *)VDSO_PROXY_ADDR);
    memcpy((void *)VDSO_PROXY_CODE, crac_vdso_stubs, code);
    if (mprotect((void *)VDSO_PROXY_ADDR, CRAC_PAGE, PROT_READ) != 0 ||
        mprotect((void *)VDSO_PROXY_CODE, CRAC_PAGE, PROT_READ | PROT_EXEC) != 0)
        return 0;
    return VDSO_PROXY_ADDR;
}
