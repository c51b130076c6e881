/* elf_load.c — reads a program's PT_INTERP and maps that interpreter (ld.so) into W, as the kernel
 * would map it for an ordinary exec. Runs in the loader before the upper half exists. */
#include "elf_load.h"

#include "confine.h"
#include "crac_layout.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_PHDRS 64

static int read_at(int fd, void *buf, size_t len, off_t off)
{
    ssize_t n = pread(fd, buf, len, off);
    return n == (ssize_t)len ? 0 : -1;
}

/* Open and validate an x86-64 ELF; fill header and program headers. Returns the fd or -1. */
static int open_elf(const char *path, Elf64_Ehdr *eh, Elf64_Phdr *ph, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (read_at(fd, eh, sizeof(*eh), 0) != 0 || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64) {
        snprintf(err, errlen, "%s is not an x86-64 ELF file", path);
        close(fd);
        return -1;
    }
    if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 || eh->e_phnum > MAX_PHDRS ||
        read_at(fd, ph, (size_t)eh->e_phnum * sizeof(Elf64_Phdr), (off_t)eh->e_phoff) != 0) {
        snprintf(err, errlen, "%s has unreadable program headers", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether an ET_DYN file is a shared library rather than a position-independent program: it
 * names itself (DT_SONAME) and is not marked a PIE (DF_1_PIE in DT_FLAGS_1). libc.so.6 has a
 * PT_INTERP and an entry point, yet loading it as the program crashes. A PIE from a linker too
 * old to set DF_1_PIE has no DT_SONAME, so it is still taken as a program. */
static int is_shared_library(int fd, const Elf64_Ehdr *eh, const Elf64_Phdr *ph)
{
    if (eh->e_type != ET_DYN)
        return 0;
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_DYNAMIC)
            continue;
        int soname = 0, pie = 0;
        size_t n = ph[i].p_filesz / sizeof(Elf64_Dyn);
        for (size_t k = 0; k < n && k < 4096; k++) {
            Elf64_Dyn d;
            if (read_at(fd, &d, sizeof(d), (off_t)(ph[i].p_offset + k * sizeof(d))) != 0 ||
                d.d_tag == DT_NULL)
                break;
            soname |= d.d_tag == DT_SONAME;
            pie |= d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_PIE);
        }
        return soname && !pie;
    }
    return 0;
}

int elf_read_interp(const char *path, char *buf, size_t buflen, char *err, size_t errlen)
{
    Elf64_Ehdr eh;
    Elf64_Phdr ph[MAX_PHDRS];
    int fd = open_elf(path, &eh, ph, err, errlen);
    if (fd < 0)
        return -1;
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
        snprintf(err, errlen, "%s is not a program (ELF type %u); give a linked program", path,
                 (unsigned)eh.e_type);
        close(fd);
        return -1;
    }
    if (is_shared_library(fd, &eh, ph)) {
        snprintf(err, errlen,
                 "%s is a shared library, not a program; launch the program that "
                 "uses it",
                 path);
        close(fd);
        return -1;
    }
    for (int i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type != PT_INTERP)
            continue;
        if (ph[i].p_filesz == 0 || ph[i].p_filesz >= buflen ||
            read_at(fd, buf, ph[i].p_filesz, (off_t)ph[i].p_offset) != 0) {
            snprintf(err, errlen, "%s has a malformed PT_INTERP", path);
            close(fd);
            return -1;
        }
        buf[ph[i].p_filesz] = '\0';
        close(fd);
        return 0;
    }
    close(fd);
    snprintf(err, errlen, "%s is statically linked (no PT_INTERP); link it dynamically", path);
    return -1;
}

static int elf_prot(uint32_t flags)
{
    return ((flags & PF_R) ? PROT_READ : 0) | ((flags & PF_W) ? PROT_WRITE : 0) |
           ((flags & PF_X) ? PROT_EXEC : 0);
}

static uint64_t page_down(uint64_t x) { return x & ~(CRAC_PAGE - 1); }
static uint64_t page_up(uint64_t x) { return (x + CRAC_PAGE - 1) & ~(CRAC_PAGE - 1); }

static int map_segment(int fd, const Elf64_Phdr *p, uint64_t base)
{
    uint64_t start = page_down(base + p->p_vaddr);
    uint64_t file_end = base + p->p_vaddr + p->p_filesz;
    uint64_t mem_end = page_up(base + p->p_vaddr + p->p_memsz);
    int prot = elf_prot(p->p_flags);
    if (p->p_filesz > 0) {
        void *m = mmap((void *)start, page_up(file_end) - start, prot | PROT_WRITE,
                       MAP_PRIVATE | MAP_FIXED, fd, (off_t)page_down(p->p_offset));
        if (m == MAP_FAILED)
            return -1;
        /* The rest of the last file page belongs to .bss and must read as zero. */
        if (p->p_memsz > p->p_filesz && (file_end & (CRAC_PAGE - 1)))
            memset((void *)file_end, 0, page_up(file_end) - file_end);
    }
    uint64_t anon_start = page_up(file_end) > start ? page_up(file_end) : start;
    if (mem_end > anon_start && mmap((void *)anon_start, mem_end - anon_start, prot,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        return -1;
    return mprotect((void *)start, mem_end - start, prot);
}

int elf_map_into_w(const char *path, struct loaded_elf *out, char *err, size_t errlen)
{
    Elf64_Ehdr eh;
    Elf64_Phdr ph[MAX_PHDRS];
    int fd = open_elf(path, &eh, ph, err, errlen);
    if (fd < 0)
        return -1;
    if (eh.e_type != ET_DYN) {
        snprintf(err, errlen, "interpreter %s is not position independent", path);
        close(fd);
        return -1;
    }
    uint64_t lo = UINT64_MAX, hi = 0, phdr_vaddr = 0;
    for (int i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_PHDR)
            phdr_vaddr = ph[i].p_vaddr;
        if (ph[i].p_type != PT_LOAD)
            continue;
        if (page_down(ph[i].p_vaddr) < lo)
            lo = page_down(ph[i].p_vaddr);
        if (page_up(ph[i].p_vaddr + ph[i].p_memsz) > hi)
            hi = page_up(ph[i].p_vaddr + ph[i].p_memsz);
        if (!phdr_vaddr && ph[i].p_offset == 0)
            phdr_vaddr = ph[i].p_vaddr + eh.e_phoff;
    }
    if (hi <= lo) {
        snprintf(err, errlen, "interpreter %s has no loadable segments", path);
        close(fd);
        return -1;
    }
    long span =
        confine_place(hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (span < 0 && span > -4096) {
        snprintf(err, errlen, "no room in the upper window for %s", path);
        close(fd);
        return -1;
    }
    uint64_t base = (uint64_t)span - lo;
    for (int i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && map_segment(fd, &ph[i], base) != 0) {
            snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    close(fd);
    out->base = base;
    out->entry = base + eh.e_entry;
    out->phdr = base + phdr_vaddr;
    out->phnum = eh.e_phnum;
    out->phent = eh.e_phentsize;
    return 0;
}
