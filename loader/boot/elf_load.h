/* elf_load.h — mapping the upper half's ELF interpreter (ld.so) into W. */
#ifndef CRAC_ELF_LOAD_H
#define CRAC_ELF_LOAD_H

#include <stddef.h>
#include <stdint.h>

struct loaded_elf {
    uint64_t base;  /* load bias */
    uint64_t entry; /* relocated entry point */
    uint64_t phdr;  /* address of the program headers in memory */
    uint64_t phnum;
    uint64_t phent;
};

/* Map the ET_DYN ELF at `path` into W. Returns 0, or -1 with a message in err. */
int elf_map_into_w(const char *path, struct loaded_elf *out, char *err, size_t errlen);
/* Read PT_INTERP of the program at `path` into buf. Returns 0 or -1 with a message in err. */
int elf_read_interp(const char *path, char *buf, size_t buflen, char *err, size_t errlen);

#endif
