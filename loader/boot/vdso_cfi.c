/* vdso_cfi.c — reads the real vDSO's call frame information (.eh_frame, found through its
 * PT_GNU_EH_FRAME table) into the rows the rollback unwinds by (docs/DECISIONS.md "The upper half's vDSO"). */
#include "vdso_proxy.h"

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* DWARF register numbers on x86-64. */
#define DW_RBP 6
#define DW_RSP 7

/* A bounded little-endian reader over the mapped vDSO. */
struct cursor {
    const uint8_t *at, *end;
    int bad;
};

static uint64_t take(struct cursor *c, int n)
{
    if (c->bad || c->end - c->at < n) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | c->at[i];
    c->at += n;
    return v;
}

static void skip(struct cursor *c, uint64_t n)
{
    if (c->bad || (uint64_t)(c->end - c->at) < n)
        c->bad = 1;
    else
        c->at += n;
}

static uint64_t uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint64_t b = take(c, 1);
        v |= (b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    c->bad = 1;
    return 0;
}

static int64_t sleb(struct cursor *c)
{
    uint64_t v = 0;
    int shift = 0;
    uint64_t b;
    do {
        b = take(c, 1);
        if (shift < 64)
            v |= (b & 0x7f) << shift;
        shift += 7;
    } while ((b & 0x80) && !c->bad && shift < 70);
    if (shift < 64 && (b & 0x40))
        v |= ~0ULL << shift;
    return (int64_t)v;
}

/* A DW_EH_PE-encoded pointer: pc-relative or relative to the table (hdr), never indirect. */
static uint64_t pointer(struct cursor *c, uint8_t enc, uint64_t hdr)
{
    uint64_t here = (uint64_t)c->at, v;
    switch (enc & 0x0f) {
    case 0x00: v = take(c, 8); break;
    case 0x01: v = uleb(c); break;
    case 0x02: v = take(c, 2); break;
    case 0x03: v = take(c, 4); break;
    case 0x04: v = take(c, 8); break;
    case 0x09: v = (uint64_t)sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)take(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)take(c, 4); break;
    case 0x0c: v = take(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: return v;
    case 0x10: return here + v;
    case 0x30: return hdr + v;
    default: c->bad = 1; return 0;
    }
}

/* What the interpreter tracks: the CFA rule, and where rbp was saved (0: not saved). */
struct rule {
    int32_t cfa_reg, cfa_off, rbp_saved;
};

struct table {
    struct vdso_cfa_row *rows;
    int n, max, bad;
};

static void emit(struct table *t, uint64_t lo, uint64_t hi, struct rule r)
{
    if (hi <= lo)
        return;
    if (t->n >= t->max) {
        t->bad = 1;
        return;
    }
    int8_t reg = r.cfa_reg == DW_RSP || r.cfa_reg == DW_RBP ? (int8_t)r.cfa_reg : -1;
    t->rows[t->n++] = (struct vdso_cfa_row){lo, hi, reg, r.cfa_off, r.rbp_saved};
}

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    int has_aug_data;
    const uint8_t *insns, *insns_end;
};

#define STATE_DEPTH 8

/* Register reg saved at CFA + factored * data_align: only rbp's place is followed. */
static void saved_at(struct rule *r, uint64_t reg, int64_t factored, int64_t data_align)
{
    if (reg == DW_RBP)
        r->rbp_saved = (int32_t)(factored * data_align);
}

/* Runs one instruction list from loc; with rows != NULL, emits a row per address range up to
 * end. The CIE's initial instructions run first with no rows (init gives what DW_CFA_restore
 * would need: only the CFA and rbp matter here). */
static void run_cfa(struct cursor c, const struct cie *cie, struct rule *r, uint64_t loc,
                    uint64_t end, struct table *t, uint64_t hdr)
{
    struct rule saved[STATE_DEPTH];
    int depth = 0;
    while (c.at < c.end && !c.bad) {
        uint8_t op = (uint8_t)take(&c, 1);
        uint64_t advance = 0, reg;
        switch (op >> 6) {
        case 1: advance = (op & 0x3f) * cie->code_align; break;
        case 2: /* offset */ saved_at(r, op & 0x3f, (int64_t)uleb(&c), cie->data_align); continue;
        case 3:
            if ((op & 0x3f) == DW_RBP)
                r->rbp_saved = 0;
            continue;
        default: break;
        }
        if (op >> 6 == 0)
            switch (op) {
            case 0x00: break; /* nop */
            case 0x01: {      /* set_loc */
                uint64_t to = pointer(&c, cie->fde_enc, hdr);
                advance = to > loc ? to - loc : 0;
                break;
            }
            case 0x02: advance = take(&c, 1) * cie->code_align; break;
            case 0x03: advance = take(&c, 2) * cie->code_align; break;
            case 0x04: advance = take(&c, 4) * cie->code_align; break;
            case 0x05: /* offset_extended */
                reg = uleb(&c);
                saved_at(r, reg, (int64_t)uleb(&c), cie->data_align);
                break;
            case 0x06: /* restore_extended, undefined, same_value */
            case 0x07:
            case 0x08:
                if (uleb(&c) == DW_RBP)
                    r->rbp_saved = 0;
                break;
            case 0x09: /* register */
                if (uleb(&c) == DW_RBP)
                    r->cfa_reg = -1; /* rbp elsewhere: not followed */
                uleb(&c);
                break;
            case 0x0a:
                if (depth == STATE_DEPTH) {
                    c.bad = 1;
                    break;
                }
                saved[depth++] = *r;
                break;
            case 0x0b:
                if (depth == 0) {
                    c.bad = 1;
                    break;
                }
                *r = saved[--depth];
                break;
            case 0x0c:
                r->cfa_reg = (int32_t)uleb(&c);
                r->cfa_off = (int32_t)uleb(&c);
                break;
            case 0x0d: r->cfa_reg = (int32_t)uleb(&c); break;
            case 0x0e: r->cfa_off = (int32_t)uleb(&c); break;
            case 0x0f: /* def_cfa_expression */
                skip(&c, uleb(&c));
                r->cfa_reg = -1;
                break;
            case 0x10: /* expression, val_expression */
            case 0x16:
                if (uleb(&c) == DW_RBP)
                    r->cfa_reg = -1;
                skip(&c, uleb(&c));
                break;
            case 0x11: /* offset_extended_sf */
                reg = uleb(&c);
                saved_at(r, reg, sleb(&c), cie->data_align);
                break;
            case 0x12:
                r->cfa_reg = (int32_t)uleb(&c);
                r->cfa_off = (int32_t)(sleb(&c) * cie->data_align);
                break;
            case 0x13: r->cfa_off = (int32_t)(sleb(&c) * cie->data_align); break;
            case 0x14: /* val_offset */
                if (uleb(&c) == DW_RBP)
                    r->cfa_reg = -1;
                uleb(&c);
                break;
            case 0x15: /* val_offset_sf */
                if (uleb(&c) == DW_RBP)
                    r->cfa_reg = -1;
                sleb(&c);
                break;
            case 0x2e: uleb(&c); break; /* GNU_args_size */
            default: c.bad = 1; break;
            }
        if (advance && t) {
            uint64_t to = loc + advance < end ? loc + advance : end;
            emit(t, loc, to, *r);
            loc = to;
        } else {
            loc += advance;
        }
    }
    if (c.bad && t)
        t->bad = 1;
    if (t)
        emit(t, loc, end, *r);
}

/* The CIE at p: its alignment factors, FDE pointer encoding and initial instructions. */
static int read_cie(const uint8_t *p, const uint8_t *limit, struct cie *cie)
{
    struct cursor c = {p, limit, 0};
    uint64_t len = take(&c, 4);
    if (len == 0 || len == 0xffffffff || len > (uint64_t)(limit - c.at))
        return -1;
    c.end = c.at + len;
    if (take(&c, 4) != 0) /* the CIE id */
        return -1;
    uint64_t version = take(&c, 1);
    if (version != 1 && version != 3)
        return -1;
    const char *aug = (const char *)c.at;
    size_t aug_len = strnlen(aug, (size_t)(c.end - c.at));
    skip(&c, aug_len + 1);
    if (c.bad) /* a string without its end */
        return -1;
    cie->code_align = uleb(&c);
    cie->data_align = sleb(&c);
    if (version == 1)
        take(&c, 1);
    else
        uleb(&c);
    cie->fde_enc = 0;
    cie->has_aug_data = aug[0] == 'z';
    if (cie->has_aug_data) {
        uint64_t n = uleb(&c);
        struct cursor data = c;
        skip(&c, n);
        data.end = c.at;
        for (size_t i = 1; i < aug_len && !c.bad; i++) {
            if (aug[i] == 'R')
                cie->fde_enc = (uint8_t)take(&data, 1);
            else if (aug[i] == 'L')
                take(&data, 1);
            else if (aug[i] == 'P')
                pointer(&data, (uint8_t)take(&data, 1), 0);
            else if (aug[i] != 'S')
                return -1;
        }
        if (data.bad)
            return -1;
    } else if (aug_len) {
        return -1;
    }
    if (c.bad || c.at > c.end)
        return -1;
    cie->insns = c.at;
    cie->insns_end = c.end;
    return 0;
}

/* The FDE at p: appends the rows for its code. */
static int read_fde(const uint8_t *p, const uint8_t *start, const uint8_t *limit, uint64_t hdr,
                    struct table *t)
{
    struct cursor c = {p, limit, 0};
    uint64_t len = take(&c, 4);
    if (len == 0 || len == 0xffffffff || len > (uint64_t)(limit - c.at))
        return -1;
    c.end = c.at + len;
    const uint8_t *id_at = c.at;
    uint64_t cie_off = take(&c, 4);
    if (cie_off == 0 || cie_off > (uint64_t)(id_at - start))
        return -1;
    struct cie cie;
    if (read_cie(id_at - cie_off, limit, &cie) != 0)
        return -1;
    uint64_t lo = pointer(&c, cie.fde_enc, hdr);
    uint64_t range = pointer(&c, cie.fde_enc & 0x0f, hdr);
    if (cie.has_aug_data)
        skip(&c, uleb(&c));
    if (c.bad || c.at > c.end)
        return -1;
    struct rule r = {DW_RSP, 8, 0};
    run_cfa((struct cursor){cie.insns, cie.insns_end, 0}, &cie, &r, lo, lo, NULL, hdr);
    run_cfa(c, &cie, &r, lo, lo + range, t, hdr);
    return t->bad ? -1 : 0;
}

int vdso_cfi_read(const Elf64_Ehdr *e, uint64_t base, struct vdso_cfa_row *rows, int max)
{
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)e + e->e_phoff);
    const Elf64_Phdr *eh = NULL, *load = NULL;
    for (int i = 0; i < e->e_phnum; i++) {
        if (ph[i].p_type == PT_GNU_EH_FRAME)
            eh = &ph[i];
        else if (ph[i].p_type == PT_LOAD && !load)
            load = &ph[i];
    }
    if (!eh || !load)
        return -1;
    const uint8_t *image = (const uint8_t *)(base + load->p_vaddr),
                  *image_end = image + load->p_memsz;
    uint64_t hdr = base + eh->p_vaddr;
    struct cursor c = {(const uint8_t *)hdr, image_end, 0};
    uint64_t version = take(&c, 1);
    uint8_t frame_enc = (uint8_t)take(&c, 1), count_enc = (uint8_t)take(&c, 1),
            table_enc = (uint8_t)take(&c, 1);
    if (version != 1 || table_enc == 0xff)
        return -1;
    pointer(&c, frame_enc, hdr);
    uint64_t count = pointer(&c, count_enc, hdr);
    struct table t = {rows, 0, max, 0};
    for (uint64_t i = 0; i < count && !c.bad; i++) {
        pointer(&c, table_enc, hdr); /* the FDE's first address */
        uint64_t fde = pointer(&c, table_enc, hdr);
        if (c.bad || fde < (uint64_t)image || fde >= (uint64_t)image_end ||
            read_fde((const uint8_t *)fde, image, image_end, hdr, &t) != 0)
            return -1;
    }
    return c.bad || t.n == 0 ? -1 : t.n;
}
