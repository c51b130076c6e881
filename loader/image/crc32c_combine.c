/* crc32c_combine.c — CRC-32C of A || B from CRC(A), CRC(B) and len(B): CRC(A) shifted over
 * len(B) zero bytes (a multiplication by x^(8 len(B)) modulo the polynomial) xor CRC(B). */
#include "crc32c_combine.h"

#define POLY 0x82f63b78u /* Castagnoli, bit-reflected: bit 31 is x^0 */

/* a * b modulo the polynomial (both reflected). */
static uint32_t mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    /* The pre- and post-inversions of the two CRCs cancel in the xor (as in zlib's
     * crc32_combine): only the shift of crc_a remains. */
    uint32_t shift = 1u << 31; /* x^0 */
    uint32_t sq = 1u << 23;    /* x^8: one byte */
    for (uint64_t n = len_b; n; n >>= 1) {
        if (n & 1)
            shift = mulmod(sq, shift);
        sq = mulmod(sq, sq);
    }
    return mulmod(shift, crc_a) ^ crc_b;
}
