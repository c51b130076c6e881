/* json_read.c — a strict JSON reader for MANIFEST.json, for `crac restart`'s native path
 * (restart_prepare.c): RFC 8259 only, UTF-8 checked, any doubt refused (the Python CLI decides). */
#include "json_read.h"

#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

struct reader {
    const unsigned char *p, *end;
};

static void skip_ws(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int literal(struct reader *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return -1;
    r->p += n;
    return 0;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Integers in 64 bits are kept exactly; a fraction or exponent makes a JSON_FLOAT (no field
 * crac reads is one), more digits than 64 bits hold a refusal. */
static int number(struct reader *r, struct json *v)
{
    v->negative = r->p < r->end && *r->p == '-';
    r->p += v->negative;
    if (r->p >= r->end || !is_digit(*r->p))
        return -1;
    if (*r->p == '0' && r->p + 1 < r->end && is_digit(r->p[1]))
        return -1; /* a leading zero */
    uint64_t m = 0;
    int overflow = 0;
    for (; r->p < r->end && is_digit(*r->p); r->p++) {
        unsigned d = *r->p - '0';
        if (m > (UINT64_MAX - d) / 10)
            overflow = 1;
        m = m * 10 + d;
    }
    v->type = JSON_INT;
    v->magnitude = m;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (r->p >= r->end || !is_digit(*r->p))
            return -1;
        while (r->p < r->end && is_digit(*r->p))
            r->p++;
        v->type = JSON_FLOAT;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (r->p >= r->end || !is_digit(*r->p))
            return -1;
        while (r->p < r->end && is_digit(*r->p))
            r->p++;
        v->type = JSON_FLOAT;
    }
    return v->type == JSON_INT && overflow ? -1 : 0;
}

static int hex4(struct reader *r, unsigned *out)
{
    if (r->end - r->p < 4)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = *r->p++;
        v <<= 4;
        if (is_digit(c))
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(unsigned cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the well-formed UTF-8 sequence at p (what Python's decoder accepts: no overlong
 * forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    size_t n = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (!n || (size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
        (c == 0xF4 && p[1] >= 0x90))
        return 0;
    return n;
}

static int string(struct reader *r, char **out, size_t *outlen)
{
    r->p++; /* the opening quote */
    /* Decoded text is never longer than its source. */
    const unsigned char *q = r->p;
    while (q < r->end && *q != '"')
        q += *q == '\\' && q + 1 < r->end ? 2 : 1;
    char *s = malloc((size_t)(q - r->p) + 1);
    if (!s)
        return -1;
    size_t n = 0;
    for (;;) {
        if (r->p >= r->end)
            return -1;
        unsigned char c = *r->p;
        if (c == '"') {
            r->p++;
            break;
        }
        if (c < 0x20)
            return -1;
        if (c >= 0x80) {
            size_t k = utf8_seq(r->p, r->end);
            if (!k)
                return -1;
            memcpy(s + n, r->p, k);
            n += k;
            r->p += k;
            continue;
        }
        r->p++;
        if (c != '\\') {
            s[n++] = (char)c;
            continue;
        }
        if (r->p >= r->end)
            return -1;
        c = *r->p++;
        const char *esc = strchr("\"\\/bfnrt", c);
        if (c && esc) {
            s[n++] = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
            continue;
        }
        unsigned cp, lo;
        if (c != 'u' || hex4(r, &cp) != 0)
            return -1;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return -1; /* a lone low surrogate */
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (literal(r, "\\u") != 0 || hex4(r, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
                return -1;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        n += put_utf8(cp, s + n);
    }
    s[n] = '\0';
    *out = s;
    *outlen = n;
    return 0;
}

static int value(struct reader *r, struct json *v, int depth);

/* Appends to a growing array of items (and keys for an object). */
static int grow(struct json *v, size_t *cap)
{
    if (v->len < *cap)
        return 0;
    *cap = *cap ? *cap * 2 : 8;
    struct json *items = realloc(v->items, *cap * sizeof(*items));
    if (!items)
        return -1;
    v->items = items;
    if (v->type == JSON_OBJ) {
        char **keys = realloc(v->keys, *cap * sizeof(*keys));
        if (!keys)
            return -1;
        v->keys = keys;
    }
    return 0;
}

static int container(struct reader *r, struct json *v, int depth)
{
    int obj = *r->p == '{';
    v->type = obj ? JSON_OBJ : JSON_ARR;
    r->p++;
    size_t cap = 0;
    skip_ws(r);
    if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
        r->p++;
        return 0;
    }
    for (;;) {
        if (grow(v, &cap) != 0)
            return -1;
        skip_ws(r);
        if (obj) {
            size_t klen;
            if (r->p >= r->end || *r->p != '"' || string(r, &v->keys[v->len], &klen) != 0)
                return -1;
            if (strlen(v->keys[v->len]) != klen)
                return -1;
            for (size_t i = 0; i < v->len; i++)
                if (strcmp(v->keys[i], v->keys[v->len]) == 0)
                    return -1; /* Python keeps the last: refused rather than guessed */
            skip_ws(r);
            if (r->p >= r->end || *r->p != ':')
                return -1;
            r->p++;
        }
        memset(&v->items[v->len], 0, sizeof(v->items[0]));
        if (value(r, &v->items[v->len], depth + 1) != 0)
            return -1;
        v->len++;
        skip_ws(r);
        if (r->p >= r->end)
            return -1;
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p != (obj ? '}' : ']'))
            return -1;
        r->p++;
        return 0;
    }
}

static int value(struct reader *r, struct json *v, int depth)
{
    if (depth > JSON_MAX_DEPTH)
        return -1;
    skip_ws(r);
    if (r->p >= r->end)
        return -1;
    switch (*r->p) {
    case '{':
    case '[': return container(r, v, depth);
    case '"': v->type = JSON_STR; return string(r, &v->str, &v->len);
    case 't':
        v->type = JSON_BOOL;
        v->boolean = 1;
        return literal(r, "true");
    case 'f': v->type = JSON_BOOL; return literal(r, "false");
    case 'n': v->type = JSON_NULL; return literal(r, "null");
    default: return number(r, v);
    }
}

int json_parse(const char *data, size_t len, struct json *out)
{
    struct reader r = {(const unsigned char *)data, (const unsigned char *)data + len};
    memset(out, 0, sizeof(*out));
    if (value(&r, out, 0) != 0)
        return -1;
    skip_ws(&r);
    return r.p == r.end ? 0 : -1;
}

const struct json *json_get(const struct json *o, const char *key)
{
    if (!o || o->type != JSON_OBJ)
        return NULL;
    for (size_t i = 0; i < o->len; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
}

int json_int_in(const struct json *v, int64_t lo, int64_t hi, int64_t *value_out)
{
    if (!v || v->type != JSON_INT || v->magnitude > (uint64_t)INT64_MAX)
        return 0;
    int64_t x = v->negative ? -(int64_t)v->magnitude : (int64_t)v->magnitude;
    if (x < lo || x > hi)
        return 0;
    if (value_out)
        *value_out = x;
    return 1;
}

int json_plain_str(const struct json *v)
{
    return v && v->type == JSON_STR && strlen(v->str) == v->len;
}
