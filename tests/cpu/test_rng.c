/* Philox4x32-10: known answers, stream layout, and distribution sanity. */
#include "harness.h"

/* Random123's kat_vectors for philox4x32_10 (the same three vectors appear in
 * many independent ports of Random123); the fourth is from the generated table
 * of girving/random123-manual (counter 1, key 1). */
static void test_philox_known_answers(void) {
    static const struct {
        uint32_t ctr[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
        {{1, 0, 0, 0}, {1, 0}, {0xac08141bu, 0xdfc5ccbeu, 0x79c07a47u, 0xa7f66093u}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        uint32_t out[4];
        cml_philox4x32(out, kat[k].ctr, kat[k].key);
        for (int j = 0; j < 4; j++)
            CHECK_MSG(out[j] == kat[k].want[j], "vector %zu word %d: got 0x%08x want 0x%08x", k, j,
                      out[j], kat[k].want[j]);
    }
}

/* Key = (seed lo, seed hi), counter = (block lo, block hi, 0, 0), word i%4 of block offset + i/4. */
static void test_stream_layout(void) {
    const uint64_t seed = 0x299f31d0a4093822ull;
    const uint32_t key[2] = {0xa4093822u, 0x299f31d0u};
    const uint64_t block = 0x0000000500000007ull;
    uint32_t ctr[4] = {7, 5, 0, 0}, out[4];
    cml_philox4x32(out, ctr, key);
    for (uint64_t i = 0; i < 4; i++) CHECK(cml_philox_word(seed, block, i) == out[i]);
    ctr[0] = 8;
    cml_philox4x32(out, ctr, key);
    for (uint64_t i = 0; i < 4; i++) CHECK(cml_philox_word(seed, block, 4 + i) == out[i]);
    CHECK(cml_philox_word(seed, block + 1, 2) == out[2]);
    /* A carry into the counter's high word. */
    uint32_t ctr2[4] = {0, 1, 0, 0};
    cml_philox4x32(out, ctr2, key);
    CHECK(cml_philox_word(seed, 0xffffffffull, 4) == out[0]);
    /* Seed 0, block 0 is the all-zero KAT. */
    CHECK(cml_philox_word(0, 0, 0) == 0x6627e8d5u);
    CHECK(cml_philox_word(0, 0, 3) == 0x9b00dbd8u);
}

static void test_reserve_and_reproducibility(void) {
    cml_rng r;
    cml_rng_init(&r, 42);
    CHECK(r.seed == 42 && r.offset == 0);
    CHECK(cml_rng_reserve(&r, 5) == 0 && r.offset == 2);
    CHECK(cml_rng_reserve(&r, 0) == 2 && r.offset == 2);
    CHECK(cml_rng_reserve(&r, 4) == 2 && r.offset == 3);
    CHECK(cml_rng_reserve(&r, 1) == 3 && r.offset == 4);
    CHECK(cml_rng_reserve(&r, UINT64_MAX) == 4 && r.offset == 4 + (UINT64_MAX / 4 + 1));

    /* u32 is word 0 of the next block; uniform and normal use one block each. */
    cml_rng_init(&r, 7);
    CHECK(cml_rng_u32(&r) == cml_philox_word(7, 0, 0) && r.offset == 1);
    CHECK(cml_rng_u32(&r) == cml_philox_word(7, 1, 0) && r.offset == 2);
    float u = cml_rng_uniform(&r);
    CHECK(u == cml_u32_to_unit(cml_philox_word(7, 2, 0)) && r.offset == 3);
    (void)cml_rng_normal(&r);
    CHECK(r.offset == 4);

    cml_rng a, b, c;
    cml_rng_init(&a, 1234);
    cml_rng_init(&b, 1234);
    cml_rng_init(&c, 1235);
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t x = cml_rng_u32(&a), y = cml_rng_u32(&b), z = cml_rng_u32(&c);
        same &= x == y;
        differ += x != z;
        float na = cml_rng_normal(&a), nb = cml_rng_normal(&b);
        same &= memcmp(&na, &nb, sizeof na) == 0;
        same &= cml_rng_below(&a, 1000) == cml_rng_below(&b, 1000);
    }
    CHECK(same);
    CHECK(differ > 990);
    CHECK(a.offset == b.offset);

    /* Words are stable values: a regression guard for the stream layout. */
    cml_rng_init(&r, 0);
    CHECK(cml_rng_u32(&r) == 0x6627e8d5u);
}

static void test_uniform_moments(void) {
    cml_rng r;
    cml_rng_init(&r, 2024);
    const int n = 1000000;
    double s = 0, s2 = 0;
    float lo = 1, hi = 0;
    for (int i = 0; i < n; i++) {
        float u = cml_rng_uniform(&r);
        if (u < lo) lo = u;
        if (u > hi) hi = u;
        s += u;
        s2 += (double)u * u;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    CHECK(lo >= 0.0f && hi < 1.0f);
    CHECK(lo < 1e-5f && hi > 1.0f - 1e-5f);
    CHECK_NEAR(mean, 0.5, 2e-3);        /* std error 2.9e-4 */
    CHECK_NEAR(var, 1.0 / 12.0, 1e-3);  /* std error 7.5e-5 */
    CHECK(cml_u32_to_unit(0) == 0.0f);
    CHECK(cml_u32_to_unit(0xffffffffu) < 1.0f);
}

static void test_normal_moments(void) {
    cml_rng r;
    cml_rng_init(&r, 99);
    const int n = 1000000;
    double s = 0, s2 = 0, s4 = 0;
    int finite = 1, beyond3 = 0;
    for (int i = 0; i < n; i++) {
        float z = cml_rng_normal(&r);
        finite &= isfinite(z) != 0;
        s += z;
        s2 += (double)z * z;
        s4 += (double)z * z * z * z;
        beyond3 += fabsf(z) > 3.0f;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    CHECK(finite);
    CHECK_NEAR(mean, 0.0, 5e-3);        /* std error 1e-3 */
    CHECK_NEAR(sqrt(var), 1.0, 5e-3);   /* std error 7e-4 */
    CHECK_NEAR(s4 / n, 3.0, 0.05);      /* kurtosis; std error ~0.01 */
    CHECK_NEAR(beyond3 / (double)n, 0.0026998, 4e-4);
}

static void test_below(void) {
    cml_rng r;
    cml_rng_init(&r, 5);
    CHECK(cml_rng_below(&r, 0) == 0);
    CHECK(cml_rng_below(&r, 1) == 0);

    /* Histogram over 10 buckets: chi-square with 9 degrees of freedom
     * (p = 0.001 critical value 27.9). */
    enum { K = 10 };
    const int n = 1000000;
    int64_t hist[K] = {0};
    int in_range = 1;
    for (int i = 0; i < n; i++) {
        uint32_t v = cml_rng_below(&r, K);
        if (v >= K) {
            in_range = 0;
            continue;
        }
        hist[v]++;
    }
    CHECK(in_range);
    double chi2 = 0, expect = n / (double)K;
    for (int k = 0; k < K; k++) chi2 += (hist[k] - expect) * (hist[k] - expect) / expect;
    CHECK_MSG(chi2 < 27.9, "chi2 = %g", chi2);

    /* Unbiasedness where plain modulo fails: n = 3 * 2^30. x % n puts half of
     * the mass below 2^30; an unbiased draw puts a third in each 2^30 range. */
    const uint32_t big = 3u << 30;
    int64_t thirds[3] = {0};
    const int m = 300000;
    for (int i = 0; i < m; i++) {
        uint32_t v = cml_rng_below(&r, big);
        in_range &= v < big;
        thirds[v >> 30 < 3 ? v >> 30 : 0]++;
    }
    CHECK(in_range);
    for (int k = 0; k < 3; k++) CHECK_NEAR(thirds[k] / (double)m, 1.0 / 3.0, 5e-3);
}

int main(void) {
    RUN(test_philox_known_answers);
    RUN(test_stream_layout);
    RUN(test_reserve_and_reproducibility);
    RUN(test_uniform_moments);
    RUN(test_normal_moments);
    RUN(test_below);
    return th_finish();
}
