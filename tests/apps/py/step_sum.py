"""The running checksum the tagged test programs here print on their DONE line: ckpt_counter's
(tests/apps/ckpt_common.h), FNV-1a over each step number's 8 little-endian bytes."""

FNV_BASIS = 0xCBF29CE484222325


def fnv_step(h: int, k: int) -> int:
    """H with step K's 8 bytes folded in."""
    for i in range(8):
        h ^= (k >> (8 * i)) & 0xFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h
