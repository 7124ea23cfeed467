/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11), bit-compatible with Random123's philox4x32_10.
 *
 * Stream layout: the key is (seed low 32, seed high 32); block b of a stream
 * uses counter (b low 32, b high 32, 0, 0); word i of the stream starting at
 * block `offset` is word i%4 of block offset + i/4. A CUDA kernel computes the
 * same words from (seed, offset, i), so both backends draw identical bits. */
#include <math.h>

#include "camel/runtime.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

static inline void mulhilo32(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void cml_philox4x32(uint32_t out[4], const uint32_t counter[4], const uint32_t key[2]) {
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) { /* the key schedule: bump before every round but the first */
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo32(PHILOX_M0, c0, &hi0, &lo0);
        mulhilo32(PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static void philox_block(uint32_t out[4], uint64_t seed, uint64_t block) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
    cml_philox4x32(out, counter, key);
}

uint32_t cml_philox_word(uint64_t seed, uint64_t offset, uint64_t i) {
    uint32_t out[4];
    philox_block(out, seed, offset + i / 4);
    return out[i % 4];
}

void cml_rng_init(cml_rng *rng, uint64_t seed) {
    if (!rng) return;
    rng->seed = seed;
    rng->offset = 0;
}

uint64_t cml_rng_reserve(cml_rng *rng, uint64_t n) {
    uint64_t start = rng->offset;
    rng->offset += n / 4 + (n % 4 != 0); /* ceil(n / 4) without overflow */
    return start;
}

uint32_t cml_rng_u32(cml_rng *rng) {
    return cml_philox_word(rng->seed, cml_rng_reserve(rng, 1), 0);
}

float cml_rng_uniform(cml_rng *rng) { return cml_u32_to_unit(cml_rng_u32(rng)); }

/* Box-Muller on words 0 and 1 of one block: u1 in (0, 1] so that log(u1) is
 * finite, u2 in [0, 1); z = sqrt(-2 ln u1) cos(2 pi u2). */
float cml_rng_normal(cml_rng *rng) {
    uint32_t w[4];
    philox_block(w, rng->seed, cml_rng_reserve(rng, 4));
    float u1 = (float)((w[0] >> 8) + 1u) * (1.0f / 16777216.0f);
    float u2 = cml_u32_to_unit(w[1]);
    float r = sqrtf(-2.0f * logf(u1));
    return r * cosf(6.2831853071795864769f * u2);
}

/* Lemire's nearly divisionless method ("Fast random integer generation in an
 * interval", 2019): unbiased, rejecting only when the low half of the product
 * falls below 2^32 mod n. n == 0 returns 0. */
uint32_t cml_rng_below(cml_rng *rng, uint32_t n) {
    if (n == 0) return 0;
    uint64_t m = (uint64_t)cml_rng_u32(rng) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n; /* 2^32 mod n */
        while (low < threshold) {
            m = (uint64_t)cml_rng_u32(rng) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}
