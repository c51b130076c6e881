/* restorer.c — the sa_restorer of every handler the loader installs for upper threads (the
 * checkpoint trigger, the signal wrapper): a raw rt_sigreturn in the loader's fixed text. TLS-free. */

/* Not the lower libc's restorer: a frame of it on a saved upper stack must stay valid after a
 * restart, whatever lower half that brings (docs/DECISIONS.md). */
void crac_loader_restorer(void);
__asm__(".text\n"
        ".globl crac_loader_restorer\n"
        ".type crac_loader_restorer, @function\n"
        "crac_loader_restorer:\n"
        "    mov $15, %eax\n"
        "    syscall\n"
        "    hlt\n");
