/* notes.c — which kind of state a note of upper.core belongs to, when a restart reads it, and
 * which required note is missing. Apart from kinds.c so the note parser can be tested alone. */
#include "state.h"

#include "restart.h"

#include <stdlib.h>
#include <string.h>

void state_note_take(struct restart_image *img, uint32_t type, const void *desc, size_t len)
{
    for (int k = 0; k < n_state_kinds; k++) {
        if (!state_kinds[k].note || state_kinds[k].note != type || len < state_kinds[k].min_len)
            continue;
        void *d = malloc(len ? len : 1);
        if (!d)
            return;
        memcpy(d, desc, len);
        free((void *)img->notes[k].data); /* a repeated note: the last one counts */
        img->notes[k] = (struct state_note){d, len};
        return;
    }
}

const char *state_note_missing(const struct restart_image *img)
{
    for (int k = 0; k < n_state_kinds; k++)
        if (state_kinds[k].required && !img->notes[k].data)
            return state_kinds[k].name;
    return NULL;
}
