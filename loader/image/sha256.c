/* sha256.c — SHA-256 of a file, and the page digest of a sparse one: OpenSSL's libcrypto when the
 * machine has it (SHA-NI, ~1.3 GB/s here), else a portable implementation. Runs in the manager
 * while publishing, and in page_digest.c's thread during the pause. */
#include "sha256.h"
#include "lower_fds.h"

#include "page_zero.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_UNIT SHA256_PAGES_SCRATCH
#define PAGE 4096

struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t fill;
};

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(struct sha256_ctx *c, const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4], f = c->h[5],
             g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = cc;
        cc = b;
        b = a;
        a = t1 + t2;
    }
    c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
    c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void portable_init(struct sha256_ctx *c)
{
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, init, sizeof(init));
    c->bytes = 0;
    c->fill = 0;
}

static void portable_update(struct sha256_ctx *c, const unsigned char *p, size_t n)
{
    c->bytes += n;
    while (n) {
        size_t take = 64 - c->fill < n ? 64 - c->fill : n;
        memcpy(c->block + c->fill, p, take);
        c->fill += take;
        p += take;
        n -= take;
        if (c->fill == 64) {
            compress(c, c->block);
            c->fill = 0;
        }
    }
}

static void portable_final(struct sha256_ctx *c, unsigned char out[32])
{
    uint64_t bits = c->bytes * 8;
    unsigned char pad = 0x80, zero = 0;
    portable_update(c, &pad, 1);
    while (c->fill != 56)
        portable_update(c, &zero, 1);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    portable_update(c, len, 8);
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = (unsigned char)(c->h[i] >> (24 - 8 * k));
}

/* OpenSSL's (deprecated but exported) SHA256_* interface, found at run time. */
struct openssl_sha {
    int (*init)(void *);
    int (*update)(void *, const void *, size_t);
    int (*final)(unsigned char *, void *);
};

static struct openssl_sha openssl_fns;

static void openssl_find(void)
{
    void *lib = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        openssl_fns.init = (int (*)(void *))dlsym(lib, "SHA256_Init");
        openssl_fns.update = (int (*)(void *, const void *, size_t))dlsym(lib, "SHA256_Update");
        openssl_fns.final = (int (*)(unsigned char *, void *))dlsym(lib, "SHA256_Final");
    }
}

/* Looked up once, by whichever thread hashes first (page_digest.c hashes beside the manager). */
static const struct openssl_sha *openssl(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, openssl_find);
    return openssl_fns.init && openssl_fns.update && openssl_fns.final ? &openssl_fns : NULL;
}

static void to_hex(const unsigned char digest[32], char hex[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

void sha256_buffer(const void *data, size_t len, char hex[65])
{
    struct sha256_ctx c;
    unsigned char digest[32];
    portable_init(&c);
    portable_update(&c, data, len);
    portable_final(&c, digest);
    to_hex(digest, hex);
}

/* One SHA-256 computation, by OpenSSL when it is there, else by the portable code. */
struct hasher {
    const struct openssl_sha *ossl;
    union {
        struct sha256_ctx portable;
        unsigned char openssl_ctx[256];
    } ctx;
};

static void hasher_init(struct hasher *h)
{
    h->ossl = openssl();
    if (h->ossl)
        h->ossl->init(&h->ctx);
    else
        portable_init(&h->ctx.portable);
}

static void hasher_update(struct hasher *h, const void *p, size_t n)
{
    if (h->ossl)
        h->ossl->update(&h->ctx, p, n);
    else
        portable_update(&h->ctx.portable, p, n);
}

static void hasher_final_raw(struct hasher *h, unsigned char digest[32])
{
    if (h->ossl)
        h->ossl->final(digest, &h->ctx);
    else
        portable_final(&h->ctx.portable, digest);
}

static void hasher_final(struct hasher *h, char hex[65])
{
    unsigned char digest[32];
    hasher_final_raw(h, digest);
    to_hex(digest, hex);
}

int sha256_file(const char *path, char hex[65])
{
    int fd = lower_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    static unsigned char buf[READ_UNIT];
    struct hasher h;
    hasher_init(&h);
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        hasher_update(&h, buf, (size_t)n);
    close(fd);
    if (n < 0)
        return -1;
    hasher_final(&h, hex);
    return 0;
}

static int file_state(const char *path, struct sha256_memo *out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    out->size = (uint64_t)st.st_size;
    out->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
    out->ctime_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000ULL + (uint64_t)st.st_ctim.tv_nsec;
    return 0;
}

static int same_file_state(const struct sha256_memo *a, const struct sha256_memo *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

int sha256_file_memo(struct sha256_memo *memo, const char *path, char hex[65])
{
    struct sha256_memo before, after;
    if (file_state(path, &before) != 0)
        return sha256_file(path, hex);
    if (memo->valid && same_file_state(memo, &before)) {
        memcpy(hex, memo->hex, 65);
        return 0;
    }
    memo->valid = 0;
    if (sha256_file(path, hex) != 0)
        return -1;
    /* Remembered only if nothing changed the file while it was read. */
    if (file_state(path, &after) == 0 && same_file_state(&before, &after)) {
        *memo = before;
        memcpy(memo->hex, hex, 65);
        memo->valid = 1;
    }
    return 0;
}

/* Hash the pages [first, first + count) of fd that are not all zeros; a short read at the end
 * of the file reads as zeros. */
static int hash_pages(struct hasher *h, int fd, uint64_t first, uint64_t count, unsigned char *buf)
{
    while (count) {
        uint64_t n = count < READ_UNIT / PAGE ? count : READ_UNIT / PAGE;
        ssize_t got = pread(fd, buf, n * PAGE, (off_t)(first * PAGE));
        if (got < 0)
            return -1;
        memset(buf + got, 0, n * PAGE - (size_t)got);
        for (uint64_t i = 0; i < n; i++) {
            const unsigned char *page = buf + i * PAGE;
            if (page_is_zero(page))
                continue;
            uint64_t index = first + i; /* little-endian on x86-64, as the format says */
            hasher_update(h, &index, sizeof(index));
            hasher_update(h, page, PAGE);
        }
        first += n;
        count -= n;
    }
    return 0;
}

int sha256_pages_chunk(int fd, uint64_t chunk, uint64_t file_size, unsigned char out[32],
                       unsigned char *buf)
{
    struct hasher h;
    hasher_init(&h);
    uint64_t pages = (file_size + PAGE - 1) / PAGE;
    uint64_t next = chunk * SHA256_PAGES_CHUNK;
    uint64_t end = next + SHA256_PAGES_CHUNK < pages ? next + SHA256_PAGES_CHUNK : pages;
    int rc = 0;
    /* Holes read as zeros, so only the data extents need reading (a file system without
     * SEEK_DATA reports the whole file as data). */
    while (rc == 0 && next < end) {
        off_t data = lseek(fd, (off_t)(next * PAGE), SEEK_DATA);
        if (data < 0) {
            rc = errno == ENXIO ? 0 : -1;
            break;
        }
        off_t hole = lseek(fd, data, SEEK_HOLE);
        uint64_t from = (uint64_t)data / PAGE;
        uint64_t to = hole < 0 ? end : ((uint64_t)hole + PAGE - 1) / PAGE;
        from = from > next ? from : next;
        if (from >= end)
            break;
        to = to < end ? to : end;
        if (to <= from)
            to = from + 1;
        rc = hash_pages(&h, fd, from, to - from, buf);
        next = to;
    }
    hasher_final_raw(&h, out);
    return rc;
}

void sha256_of_digests(const unsigned char *digests, size_t n, char hex[65])
{
    struct hasher h;
    hasher_init(&h);
    hasher_update(&h, digests, n * 32);
    hasher_final(&h, hex);
}

int sha256_pages_file(const char *path, char hex[65])
{
    int fd = lower_open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    static unsigned char buf[READ_UNIT];
    uint64_t n = sha256_pages_chunks((uint64_t)st.st_size);
    unsigned char *digests = malloc(n ? n * 32 : 1);
    int rc = digests ? 0 : -1;
    for (uint64_t k = 0; rc == 0 && k < n; k++)
        rc = sha256_pages_chunk(fd, k, (uint64_t)st.st_size, digests + k * 32, buf);
    close(fd);
    if (rc == 0)
        sha256_of_digests(digests, n, hex);
    free(digests);
    return rc;
}
