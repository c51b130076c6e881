/* test_vdso_cfi.c — the reader of the real vDSO's call frame information (loader/boot/vdso_cfi.c)
 * on this process's own vDSO: rows ordered and covering each function, printed for the pytest
 * wrapper to compare with readelf's; garbled copies of the vDSO are refused, never a crash. */
#include "ctest.h"

#include "vdso_proxy.h"

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

static const Elf64_Phdr *first_load(const Elf64_Ehdr *e)
{
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)e + e->e_phoff);
    for (int i = 0; i < e->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD)
            return &ph[i];
    return NULL;
}

static struct vdso_cfa_row rows[VDSO_CFA_ROWS];

static void own_vdso(const Elf64_Ehdr *e, uint64_t base, uint64_t size, const char *dump)
{
    int n = vdso_cfi_read(e, base, rows, VDSO_CFA_ROWS);
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        CHECK(rows[i].lo < rows[i].hi);
        CHECK(rows[i].lo >= base && rows[i].hi <= base + size);
        CHECK(rows[i].cfa_reg == 6 || rows[i].cfa_reg == 7);
        printf("row %lx %lx %d %d %d\n", (unsigned long)(rows[i].lo - base),
               (unsigned long)(rows[i].hi - base), rows[i].cfa_reg, rows[i].cfa_off,
               rows[i].rbp_saved);
    }
    /* A whole table is one call's worth, whatever the order of its FDEs. */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            CHECK(rows[i].hi <= rows[j].lo || rows[j].hi <= rows[i].lo);
    /* The whole mapping: the section headers readelf wants lie past the loaded part. */
    uint64_t pages = (size + 4095) & ~4095UL;
    FILE *f = fopen(dump, "wb");
    CHECK(f && fwrite(e, 1, pages, f) == pages);
    if (f)
        fclose(f);
}

/* Random bytes over the frame information of a copy: the reader gives rows inside the copy or
 * refuses, and never reads outside it (a crash, or under ASan a report). */
static void garbled(const Elf64_Ehdr *e, uint64_t size)
{
    uint8_t *copy = malloc(size);
    const Elf64_Ehdr *c = (const Elf64_Ehdr *)copy;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)e + e->e_phoff), *eh = NULL;
    for (int i = 0; i < e->e_phnum; i++)
        if (ph[i].p_type == PT_GNU_EH_FRAME)
            eh = &ph[i];
    CHECK(eh != NULL);
    if (!eh || !copy)
        return;
    uint64_t from = eh->p_offset, span = size - from;
    srand(1);
    int refused = 0, sane = 1;
    for (int trial = 0; trial < 20000; trial++) {
        memcpy(copy, e, size);
        for (int k = 1 + trial % 8; k > 0; k--)
            copy[from + (uint64_t)rand() % span] = (uint8_t)rand();
        uint64_t base = (uint64_t)copy - first_load(c)->p_vaddr;
        int n = vdso_cfi_read(c, base, rows, VDSO_CFA_ROWS);
        refused += n < 0;
        for (int i = 0; i < n; i++)
            sane &= rows[i].lo < rows[i].hi && rows[i].cfa_reg >= -1;
    }
    CHECK(sane);
    CHECK(refused > 0);
    free(copy);
}

int main(int argc, char **argv)
{
    const Elf64_Ehdr *e = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
    if (argc != 2 || !e) {
        printf("usage: test_vdso_cfi DUMP (in a process with a vDSO)\n");
        return 2;
    }
    const Elf64_Phdr *load = first_load(e);
    CHECK(load != NULL);
    if (!load)
        return ctest_done();
    own_vdso(e, (uint64_t)e - load->p_vaddr, load->p_memsz, argv[1]);
    garbled(e, load->p_memsz);
    return ctest_done();
}
