/* json_read.h — a strict JSON reader for MANIFEST.json (the native `crac restart` path): a tree of
 * values, nothing evaluated. */
#ifndef CRAC_JSON_READ_H
#define CRAC_JSON_READ_H

#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_INT, JSON_FLOAT, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
    enum json_type type;
    int boolean;        /* JSON_BOOL */
    int negative;       /* JSON_INT: the sign, and */
    uint64_t magnitude; /* its absolute value */
    char *str;          /* JSON_STR: decoded UTF-8, NUL-terminated (may hold a NUL: len) */
    size_t len;         /* JSON_STR: bytes; JSON_ARR, JSON_OBJ: items */
    char **keys;        /* JSON_OBJ */
    struct json *items; /* JSON_ARR, JSON_OBJ */
};

/* Parses data[0..len) into *out; 0, or -1 (what Python's json.loads would take and this reader
 * does not is refused too: NaN, numbers beyond 64 bits, duplicate keys, lone surrogates, deep
 * nesting; the caller then leaves the decision to the Python CLI). Never frees (the process
 * execs soon after). */
int json_parse(const char *data, size_t len, struct json *out);
/* The member KEY of object O, or NULL (also when O is not an object). */
const struct json *json_get(const struct json *o, const char *key);
/* Whether V is an integer in lo..hi; *value gets it. */
int json_int_in(const struct json *v, int64_t lo, int64_t hi, int64_t *value);
/* Whether V is a string without NUL bytes. */
int json_plain_str(const struct json *v);

#endif
