/* losses.c — what a checkpoint cannot save (a child process, a socket): each said once on stderr
 * when first met, and every one listed in the generation's MANIFEST.json ("not_saved"). */
#include "state.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_LOSSES 64
#define LOSS_LEN 384

static char losses[MAX_LOSSES][LOSS_LEN]; /* this checkpoint's */
static int n_losses;
static char warned[MAX_LOSSES][LOSS_LEN]; /* already said in this process */
static int n_warned;

void state_losses_reset(void) { n_losses = 0; }

void state_loss(const char *fmt, ...)
{
    char line[LOSS_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n_losses < MAX_LOSSES)
        memcpy(losses[n_losses++], line, sizeof(line));
    for (int i = 0; i < n_warned; i++)
        if (strcmp(warned[i], line) == 0)
            return;
    fprintf(stderr, "crac: warning: %s\n", line);
    if (n_warned < MAX_LOSSES)
        memcpy(warned[n_warned++], line, sizeof(line));
}

int state_losses(const char *const **list)
{
    static const char *ptrs[MAX_LOSSES];
    for (int i = 0; i < n_losses; i++)
        ptrs[i] = losses[i];
    *list = ptrs;
    return n_losses;
}
