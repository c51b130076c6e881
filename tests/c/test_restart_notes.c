/* test_restart_notes.c — the parser of upper.core's crac notes (parse_notes in
 * loader/restart/restart.c): a whole set is accepted; every truncation, garbled sizes, a wrong
 * format or window layout, and missing or short notes are refused with "image corrupted" (or
 * the layout message), each case in a child process so a crash is reported, not fatal. */
#include "ctest.h"

/* The source itself: parse_notes is static. The rest of the loader is not linked: the test
 * wrapper has the linker drop what the parser does not reach (-Wl,--gc-sections). */
#include "restart.c"
#include "notes.c"

#include <sys/wait.h>

/* The parser looks notes up in the table of kinds (loader/state/kinds.c); the real table brings
 * every capture and restore function, so the test has its own with the same note types, sizes
 * and required flags and no functions. */
const struct state_kind state_kinds[] = {
    {"fds", CRAC_NT_FDS, 0, 1, STATE_WITH_MEMORY, NULL, NULL, NULL},
    {"signals", CRAC_NT_SIGNALS, 65 * sizeof(struct crac_signal_rec), 1, STATE_WITH_MEMORY, NULL,
     NULL, NULL},
    {"timers", CRAC_NT_TIMERS, sizeof(struct crac_timers_rec), 1, STATE_WITH_THREADS, NULL, NULL,
     NULL},
    {"pending", CRAC_NT_PENDING, 0, 0, STATE_WITH_THREADS, NULL, NULL, NULL},
    {"rlimits", CRAC_NT_RLIMITS, 0, 0, STATE_WITH_THREADS, NULL, NULL, NULL},
};
const int n_state_kinds = (int)(sizeof(state_kinds) / sizeof(state_kinds[0]));

static unsigned char buf[1 << 16];
static size_t used;

static void note(uint32_t type, const void *desc, uint32_t descsz, uint32_t claimed_namesz,
                 uint32_t claimed_descsz)
{
    Elf64_Nhdr h = {claimed_namesz, claimed_descsz, type};
    memcpy(buf + used, &h, sizeof(h));
    used += sizeof(h);
    memcpy(buf + used, CRAC_NOTE_NAME "\0\0\0", 8);
    used += 8;
    memcpy(buf + used, desc, descsz);
    used += (descsz + 3) & ~3u;
}

/* The notes of a valid image; the required ones last, so any truncation drops one of them. */
static void whole_set(void)
{
    used = 0;
    static unsigned char proc_cwd[sizeof(struct crac_process_rec) + 8];
    struct crac_process_rec p = {.format = CRAC_IMAGE_FORMAT,
                                 .pid = 77,
                                 .w_start = CRAC_W_START,
                                 .w_end = CRAC_W_END,
                                 .d_start = CRAC_D_START,
                                 .d_end = CRAC_D_END,
                                 .cwd_len = 5};
    memcpy(proc_cwd, &p, sizeof(p));
    memcpy(proc_cwd + sizeof(p), "/tmp\0\0\0", 8);
    static unsigned char regions[48], fds[40], pending[16], rlimits[32];
    static struct crac_thread_note threads[2] = {{.tid = 77, .is_main = 1}, {.tid = 78}};
    static struct crac_signal_rec signals[65];
    static struct crac_timers_rec timers;
    note(CRAC_NT_PENDING, pending, sizeof(pending), 5, sizeof(pending));
    note(CRAC_NT_RLIMITS, rlimits, sizeof(rlimits), 5, sizeof(rlimits));
    note(0x1234, regions, 8, 5, 8); /* unknown type: skipped */
    note(CRAC_NT_PROCESS, proc_cwd, sizeof(proc_cwd), 5, sizeof(proc_cwd));
    note(CRAC_NT_REGIONS, regions, sizeof(regions), 5, sizeof(regions));
    note(CRAC_NT_THREADS, threads, sizeof(threads), 5, sizeof(threads));
    note(CRAC_NT_FDS, fds, sizeof(fds), 5, sizeof(fds));
    note(CRAC_NT_SIGNALS, signals, sizeof(signals), 5, sizeof(signals));
    note(CRAC_NT_TIMERS, &timers, sizeof(timers), 5, sizeof(timers));
}

/* parse_notes on buf[0, len) in a child: 0 accepted, 1 refused with a message containing
 * `want`, 2 refused with another message, 3 crashed or hung. */
static int parse_in_child(size_t len, const char *want)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        struct restart_image img;
        memset(&img, 0, sizeof(img));
        char err[256] = "";
        int rc = parse_notes(&img, buf, len, err, sizeof(err));
        if (rc == 0)
            _exit(img.n_threads == 2 && strcmp(img.cwd, "/tmp") == 0 && img.proc.pid == 77 &&
                          img.regions_len == 48 && img.notes[0].len == 40 &&
                          img.notes[3].len == 16 && img.notes[4].len == 32
                      ? 0
                      : 4);
        _exit(strstr(err, want) ? 1 : 2);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 3;
}

/* Overwrite field `off` (bytes into the note with the given type) with v. */
static void poke_note(uint32_t type, size_t field_off, uint32_t v)
{
    for (size_t off = 0; off + sizeof(Elf64_Nhdr) <= used;) {
        Elf64_Nhdr h;
        memcpy(&h, buf + off, sizeof(h));
        if (h.n_type == type) {
            memcpy(buf + off + field_off, &v, sizeof(v));
            return;
        }
        off += sizeof(h) + 8 + ((h.n_descsz + 3) & ~3u);
    }
}

int main(void)
{
    const char *corrupt = "image corrupted: upper.core lacks crac's notes";
    whole_set();
    CHECK(parse_in_child(used, "") == 0);

    /* Every truncation, in one child (a crash at any length fails the check). */
    size_t whole = used;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        for (size_t len = 0; len < whole; len++) {
            struct restart_image img;
            memset(&img, 0, sizeof(img));
            char err[256] = "";
            if (parse_notes(&img, buf, len, err, sizeof(err)) != -1 || !strstr(err, corrupt)) {
                printf("# truncated to %zu bytes: not refused (%s)\n", len, err);
                fflush(stdout);
                _exit(1);
            }
        }
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* Sizes that run past the end, or wrap when rounded up to 4, in each note. */
    static const uint32_t types[] = {CRAC_NT_PROCESS, CRAC_NT_REGIONS, CRAC_NT_THREADS,
                                     CRAC_NT_FDS,     CRAC_NT_SIGNALS, CRAC_NT_TIMERS,
                                     CRAC_NT_PENDING, CRAC_NT_RLIMITS};
    static const uint32_t sizes[] = {0xffffffffu, 0xfffffffeu, 0xfffffffdu,
                                     0xfffffffcu, 0x80000000u, 1u << 20};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            whole_set();
            poke_note(types[t], 4, sizes[s]); /* n_descsz */
            int r = parse_in_child(used, corrupt);
            if (r != 1)
                printf("# note %#x descsz %#x: %d\n", types[t], sizes[s], r);
            CHECK(r == 1);
            whole_set();
            poke_note(types[t], 0, sizes[s]); /* n_namesz */
            r = parse_in_child(used, corrupt);
            if (r != 1)
                printf("# note %#x namesz %#x: %d\n", types[t], sizes[s], r);
            CHECK(r == 1);
        }
    }

    /* Notes too short to hold their record are ignored, so the image lacks them. */
    whole_set();
    poke_note(CRAC_NT_SIGNALS, 4, 64 * sizeof(struct crac_signal_rec));
    CHECK(parse_in_child(used, corrupt) == 1);
    whole_set();
    poke_note(CRAC_NT_PROCESS, 4, 8);
    CHECK(parse_in_child(used, corrupt) == 1);
    /* Another image format, another window layout, another owner's name. */
    whole_set();
    poke_note(CRAC_NT_PROCESS, 20, CRAC_IMAGE_FORMAT_COMPRESSED + 1); /* proc.format */
    CHECK(parse_in_child(used, corrupt) == 1);
    whole_set();
    poke_note(CRAC_NT_PROCESS, 20 + 16, 0x1000); /* low half of proc.w_start */
    CHECK(parse_in_child(used, "different window layout") == 1);
    whole_set();
    buf[sizeof(Elf64_Nhdr)] = 'X'; /* the first note's name: "XRAC" is not ours; it is optional */
    CHECK(parse_in_child(used, "") == 4);
    return ctest_done();
}
