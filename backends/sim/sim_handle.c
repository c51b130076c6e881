/* sim_handle.c — the handle values the sim gives out for streams, events and modules. They differ
 * between sim versions (as between driver releases), which crac's virtual handles must hide. */
#include "sim.h"

#if CRAC_SIM_VERSION == 1

/* sim1: the address of the object's slot. */
uint64_t sim_handle_encode(int kind, const void *base, size_t elem, uint32_t index, uint32_t gen)
{
    (void)kind;
    (void)gen;
    return (uint64_t)(uintptr_t)base + (uint64_t)index * elem;
}

long sim_handle_decode(int kind, uint64_t h, const void *base, size_t elem, uint32_t n,
                       uint32_t *gen)
{
    (void)kind;
    *gen = SIM_GEN_ANY;
    uint64_t b = (uint64_t)(uintptr_t)base;
    if (h < b || h >= b + (uint64_t)n * elem || (h - b) % elem)
        return -1;
    return (long)((h - b) / elem);
}

#else

/* sim2: 0x7e | kind (4 bits) | generation (20 bits) | index + 1 (24 bits). */
#define TAG 0x7eUL
#define GEN_BITS 20
#define GEN_MASK ((1U << GEN_BITS) - 1)

uint64_t sim_handle_encode(int kind, const void *base, size_t elem, uint32_t index, uint32_t gen)
{
    (void)base;
    (void)elem;
    return (TAG << 56) | ((uint64_t)kind << 52) | ((uint64_t)(gen & GEN_MASK) << 24) |
           (uint64_t)(index + 1);
}

long sim_handle_decode(int kind, uint64_t h, const void *base, size_t elem, uint32_t n,
                       uint32_t *gen)
{
    (void)base;
    (void)elem;
    *gen = SIM_GEN_ANY;
    if ((h >> 56) != TAG || ((h >> 52) & 0xf) != (uint64_t)kind)
        return -1;
    uint64_t idx = h & 0xffffff;
    if (idx == 0 || idx > n)
        return -1;
    *gen = (uint32_t)(h >> 24) & GEN_MASK;
    return (long)(idx - 1);
}

#endif

int sim_handle_gen_matches(uint32_t encoded, uint32_t gen)
{
#if CRAC_SIM_VERSION == 1
    (void)gen;
    return encoded == SIM_GEN_ANY;
#else
    return encoded == (gen & GEN_MASK);
#endif
}
