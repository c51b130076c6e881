/* ckpt_api: checkpoints itself through crac.h (crac_checkpoint, crac_is_enabled, crac_generation
   and the dmtcp_* names); prints what each call returned so a test can follow a restart. */
#include "../../include/crac.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2;
    if (!crac_is_enabled || !crac_is_enabled()) {
        printf("not under crac\n");
        return 0;
    }
    if (!dmtcp_is_enabled || !dmtcp_is_enabled()) {
        fprintf(stderr, "FAIL: dmtcp_is_enabled disagrees with crac_is_enabled\n");
        return 1;
    }
    for (int i = 1; i <= rounds; i++) {
        int before = crac_generation();
        int r = i % 2 ? crac_checkpoint() : dmtcp_checkpoint();
        int after = crac_generation();
        printf("round %d: result %d generation %d -> %d\n", i, r, before, after);
        fflush(stdout);
        if (r == CRAC_AFTER_CHECKPOINT && after != before + 1) {
            fprintf(stderr, "FAIL: generation did not advance\n");
            return 1;
        }
        if (r != CRAC_AFTER_CHECKPOINT && r != CRAC_AFTER_RESTART) {
            fprintf(stderr, "FAIL: crac_checkpoint returned %d\n", r);
            return 1;
        }
        usleep(300000);
    }
    printf("DONE\n");
    return 0;
}
