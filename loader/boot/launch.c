/* launch.c — starting the program as the upper half: its ld.so mapped into W, a stack built in W,
 * the reserved signals claimed, the seccomp confinement installed, then a jump (docs/ARCHITECTURE.md "Launch"). */
#include "launch.h"

#include "ckpt.h"
#include "confine.h"
#include "crac_layout.h"
#include "elf_load.h"
#include "tree.h"
#include "upper_stack.h"
#include "vdso_proxy.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RSEQ_FLAG_UNREGISTER 1
#define RSEQ_SIG_X86 0x53053053

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

void release_lower_rseq(void)
{
    if (!&__rseq_size || !&__rseq_offset || __rseq_size == 0)
        return;
    char *tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    syscall(SYS_rseq, tp + __rseq_offset, __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG_X86);
}

__attribute__((noreturn)) static void jump_to_upper(uint64_t sp, uint64_t entry)
{
    /* rdx = 0: no rtld_fini for the program's libc to register, as after exec. */
    __asm__ volatile("mov %0, %%rsp\n\t"
                     "xor %%ebp, %%ebp\n\t"
                     "xor %%edx, %%edx\n\t"
                     "jmp *%1\n\t"
                     :
                     : "S"(sp), "a"(entry)
                     : "memory");
    __builtin_unreachable();
}

static void upper_runtime_path(const char *dir, const char *device, const char *mpi_shim,
                               const char *cudart_shim, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/libcrac-upper.so", dir);
    if (access(out, R_OK) != 0)
        die("upper runtime %s is missing; reinstall crac-py", out);
    /* With a device, also the libcudart shim: its soname makes the program's libcudart.so.13
     * resolve to it (docs/SIM.md). ld.so's --preload takes a colon-separated list. */
    if (strcmp(device, "none") != 0) {
        size_t n = strlen(out);
        snprintf(out + n, outlen - n, ":%s/shim/libcudart.so.13", dir);
        if (access(out + n + 1, R_OK) != 0)
            die("CUDA runtime shim %s is missing; reinstall crac-py", out + n + 1);
    }
    /* A program linked to CUDA 12's libcudart.so.12: the CUDA 12 layer, after the 13 shim it calls
     * (docs/CUDA.md "CUDA 12"). One path component: nothing outside shim/. */
    if (cudart_shim && *cudart_shim && strcmp(device, "none") != 0 && !strchr(cudart_shim, '/')) {
        size_t n = strlen(out);
        snprintf(out + n, outlen - n, ":%s/shim/%s", dir, cudart_shim);
        if (access(out + n + 1, R_OK) != 0)
            die("CUDA runtime shim %s is missing (crac was built without CUDA 12's headers: pip "
                "install nvidia-cuda-runtime-cu12 and reinstall crac-py)",
                out + n + 1);
    }
    /* The program links an MPI library: the shim with its soname (docs/MPI.md). The soname is
     * one path component, so it cannot name anything outside shim/. */
    if (mpi_shim && *mpi_shim && !strchr(mpi_shim, '/')) {
        size_t n = strlen(out);
        snprintf(out + n, outlen - n, ":%s/shim/%s", dir, mpi_shim);
        if (access(out + n + 1, R_OK) != 0)
            die("MPI shim %s is missing (crac was built without that MPI's headers; install them "
                "and reinstall crac-py)",
                out + n + 1);
    }
}

void launch_run(const struct options *o, const struct crac_lh_api *api, char **envp)
{
    char err[512], interp[PATH_MAX], runtime[4 * PATH_MAX + 64];
    if (elf_read_interp(o->program_argv[0], interp, sizeof(interp), err, sizeof(err)) != 0)
        die("%s", err);
    upper_runtime_path(o->native_dir, o->device, o->mpi_shim, o->cudart_shim, runtime,
                       sizeof(runtime));
    struct loaded_elf ldso;
    if (elf_map_into_w(interp, &ldso, err, sizeof(err)) != 0)
        die("%s", err);

    /* The upper ld.so is run as a program: it maps the application, its libraries and our
     * runtime, and keeps argv[0] and the environment exactly as the caller gave them. */
    char **uargv = calloc((size_t)o->program_argc + 8, sizeof(char *));
    int k = 0;
    uargv[k++] = interp;
    uargv[k++] = "--argv0";
    uargv[k++] = (char *)o->argv0;
    uargv[k++] = "--preload";
    uargv[k++] = runtime;
    /* ld.so is given the real file (symlinks resolved): it derives the program's $ORIGIN from
     * the path it opens, where the kernel would have used /proc/self/exe, the real file too. */
    uargv[k++] = ckpt_cfg.program[0] ? ckpt_cfg.program : o->program_argv[0];
    for (int i = 1; i < o->program_argc; i++)
        uargv[k++] = o->program_argv[i];
    uargv[k] = NULL;
    struct upper_start start = {.argv = uargv,
                                .envp = envp,
                                .interp = &ldso,
                                .execfn = o->program_argv[0],
                                .lh_api = (uint64_t)api,
                                .vdso = vdso_proxy_map()};
    uint64_t sp = upper_stack_build(&start, err, sizeof(err));
    if (!sp)
        die("%s", err);
    free(uargv);

    int e, ids = tree_exec_filter(); /* an exec'd loader may keep the inherited filter */
    if ((e = confine_install_handler()) != 0 ||
        (ids >= 0 && (e = confine_install_filter(ids)) != 0))
        die("cannot install the seccomp confinement: %s", strerror(-e));
    if (ids < 0)
        confine_filter_kept();
    /* The checkpoint signal has been blocked since main() began and the program's threads
     * inherit that mask; a lower thread waits for it (ckpt_trigger.c). */
    fflush(NULL); /* the lower stdio is never flushed again: the process exits through the upper */
    release_lower_rseq();
    jump_to_upper(sp, ldso.entry);
}
