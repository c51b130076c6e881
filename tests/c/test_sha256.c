/* test_sha256.c — SHA-256 (loader/image/sha256.c): FIPS 180-2 vectors through the OpenSSL path
 * and the built-in one, then the file and page digests of the files named on the command line,
 * printed for tests/test_c_units.py to compare with hashlib and crac_py.digest. */
#include "ctest.h"

/* The source itself, so the built-in (portable_*) path can be called whether or not OpenSSL is. */
#include "sha256.c"

static void portable_hex(const void *p, size_t n, size_t piece, char hex[65])
{
    struct sha256_ctx c;
    unsigned char d[32];
    portable_init(&c);
    for (size_t off = 0; off < n; off += piece)
        portable_update(&c, (const unsigned char *)p + off, n - off < piece ? n - off : piece);
    portable_final(&c, d);
    to_hex(d, hex);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char hex[65];
    printf("# openssl: %s\n", openssl() ? "yes" : "no (built-in only)");
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        size_t n = strlen(v[i].in);
        sha256_buffer(v[i].in, n, hex);
        CHECK(strcmp(hex, v[i].hex) == 0);
        for (size_t piece = 1; piece <= 64; piece *= 4) {
            portable_hex(v[i].in, n, piece, hex);
            CHECK(strcmp(hex, v[i].hex) == 0);
        }
    }
    /* One million 'a' (FIPS 180-2 C.3), through blocks of odd sizes. */
    static char a[1000000];
    memset(a, 'a', sizeof(a));
    const char *million = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    portable_hex(a, sizeof(a), 999, hex);
    CHECK(strcmp(hex, million) == 0);
    sha256_buffer(a, sizeof(a), hex);
    CHECK(strcmp(hex, million) == 0);

    for (int k = 1; k < argc; k++) {
        const char *tag = k == 1 ? "file" : "file2";
        CHECK(sha256_file(argv[k], hex) == 0);
        printf("%s-sha256 %s\n", tag, hex);
        CHECK(sha256_pages_file(argv[k], hex) == 0);
        printf("%s-pages %s\n", tag, hex);
    }
    CHECK(sha256_file("/nonexistent/crac-test", hex) == -1);
    return ctest_done();
}
